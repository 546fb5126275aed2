"""The Celery application.

Settings come from Django settings under the ``CELERY_`` namespace (``config/settings/base.py``);
with no broker configured, tasks run in-process (the embedded demo default).
"""

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("callgate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_prerun.connect
@signals.task_postrun.connect
def _connections_recycle(task: Any = None, **_: Any) -> None:
    """Around every task, Django's rule for a request: close a connection that is past
    ``CONN_MAX_AGE`` or broke, and check a kept one before its next use.

    Instead of Celery's own rule (``CELERY_DB_REUSE_MAX``), which closes every connection after
    every task: a new PostgreSQL connection costs more than a turn's statements. Not for a task
    run in-process (eager): its caller owns the connection.
    """
    from django.db import close_old_connections

    if task is None or getattr(task.request, "is_eager", False):
        return
    close_old_connections()
