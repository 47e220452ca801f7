import os

from django.core.asgi import get_asgi_application

from kernel.tracing import setup_tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
setup_tracing()
application = get_asgi_application()
