import os

from django.core.wsgi import get_wsgi_application

from config.runtime import ready_to_serve
from kernel.request_limits import ChunkedBodyMiddleware
from kernel.tracing import setup_tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Before the application loads its middleware: Django's instrumentation adds its own.
setup_tracing()
# A chunked body is read (within SERENITY_MAX_BODY_BYTES) or refused with 411, never taken for
# an empty one: Django itself reads Content-Length bytes only.
application = ChunkedBodyMiddleware(get_wsgi_application())
ready_to_serve(web=True)
