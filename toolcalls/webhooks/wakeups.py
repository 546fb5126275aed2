"""Wake the outbox's Celery tasks after the current transaction commits.

The tasks (``toolcalls.webhooks.tasks``) import the services, so the services reach the tasks
through the two functions here, which :meth:`WebhooksConfig.ready` binds to them at start-up,
instead of importing the task module back.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.db import transaction


class _Task(Protocol):
    def apply_async(self, args: list[Any], countdown: float | None = None) -> Any: ...


_tasks: dict[str, _Task] = {}


def bind(*, fanout: _Task, deliver: _Task) -> None:
    """Install the tasks to wake (called once per process, from the app's ``ready()``)."""
    _tasks.update(fanout=fanout, deliver=deliver)


def fanout_later(*, event_pk: int) -> None:
    """Fan the audit event out after commit. ``robust``: a webhook that cannot be queued is
    logged and never keeps the engine's own wake-ups, registered after it, from running."""
    task = _tasks["fanout"]
    transaction.on_commit(lambda: task.apply_async(args=[event_pk]), robust=True)


def deliver_later(*, endpoint_pk: int, operation_pk: int, countdown_s: float | None = None) -> None:
    """Send the (endpoint, operation) pair's due deliveries after commit (optionally delayed)."""
    task = _tasks["deliver"]
    transaction.on_commit(
        lambda: task.apply_async(args=[endpoint_pk, operation_pk], countdown=countdown_s)
    )
