"""The Celery application.

Settings come from Django settings under the ``CELERY_`` namespace (``config/settings/base.py``);
with no broker configured, tasks run in-process (the embedded demo default): on the process's
in-process worker when one runs (``config.inprocess_worker``), else inline.
"""

import os
from typing import Any

import celery
from celery import Celery, signals

from config import inprocess_worker
from config.heap import startup_objects_freeze

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


class Task(celery.Task):
    """Every Callgate task. While this process runs an in-process worker (the embedded mode),
    sending a task hands it to that worker, ``countdown`` or ``eta`` included; otherwise this
    is Celery's own ``apply_async``, unchanged."""

    def apply_async(
        self,
        args: Any = None,
        kwargs: Any = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        **options: Any,
    ) -> Any:
        worker = inprocess_worker.running()
        if worker is None:
            return super().apply_async(
                args, kwargs, task_id, producer, link, link_error, shadow, **options
            )
        task_id = task_id or celery.uuid()
        worker.submit(
            self,
            tuple(args or ()),
            dict(kwargs or {}),
            task_id=task_id,
            countdown=options.get("countdown"),
            eta=options.get("eta"),
        )
        return self.AsyncResult(task_id)


app = Celery("callgate", task_cls=Task)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect
def _logging_as_configured(**_: Any) -> None:
    """Log as ``LOGGING`` says (``LOG_FORMAT``, ``LOG_LEVEL``: JSON lines in production, each
    naming its request), in the worker and beat as in the web processes. A receiver here is
    Celery's sign to leave logging alone: its own text format and ``--loglevel`` (WARNING
    unless given, which dropped every transition line) would replace Django's on the root
    logger."""
    from django.conf import settings
    from django.utils.log import configure_logging

    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


@signals.worker_process_init.connect
def _tracing_start(**_: Any) -> None:
    """Trace each pool process as ``OTEL_*`` says: after the fork, so the span exporter's
    thread runs in the process that records the spans."""
    from config.observability import tracing_setup

    tracing_setup()


@signals.worker_process_init.connect
def _startup_objects_freeze(**_: Any) -> None:
    """Freeze what the pool process inherited and loaded (``config.heap``), once forked."""
    startup_objects_freeze()


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
