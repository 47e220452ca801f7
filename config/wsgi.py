import os

from django.core.wsgi import get_wsgi_application

from config.runtime import ready_to_serve

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
ready_to_serve(web=True)
