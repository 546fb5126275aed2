"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

from config.settings.env import server_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

server_setup()
# Before the application loads its middleware, which the Django instrumentation extends.
from config.observability import tracing_setup  # noqa: E402  (needs the apps loaded)

tracing_setup()
application = get_asgi_application()
