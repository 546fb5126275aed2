"""The Celery application.

Settings come from Django settings under the ``CELERY_`` namespace (``config/settings/base.py``);
with no broker configured, tasks run in-process (the embedded demo default).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("callgate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
