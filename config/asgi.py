"""ASGI entry point."""

import os

import django
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

django.setup(set_prefix=False)
# Before the application loads its middleware, which the Django instrumentation extends.
from config.observability import tracing_setup  # noqa: E402  (needs the apps loaded)

tracing_setup()
application = get_asgi_application()
