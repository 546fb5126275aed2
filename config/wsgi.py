"""WSGI entry point (``gunicorn config.wsgi``; ``runserver`` loads it in the process that serves).

Without a broker (the embedded mode), the serving process also starts the in-process worker that
runs tasks and the periodic sweeps in time (``config.inprocess_worker``).
"""

import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from config import celery_app, inprocess_worker
from config.heap import startup_objects_freeze
from config.settings.env import server_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

server_setup()
# Before the application loads its middleware, which the Django instrumentation extends.
from config.observability import tracing_setup  # noqa: E402  (needs the apps loaded)

tracing_setup()
application = get_wsgi_application()

if settings.CELERY_TASK_ALWAYS_EAGER:
    inprocess_worker.start(app=celery_app, schedule=settings.CELERY_BEAT_SCHEDULE)
startup_objects_freeze()  # loaded: the collector need not walk all that again (config.heap)
