"""Wake-ups for workers, sent only after the transaction that made the work visible commits.

The database is the source of truth: a lost message delays work, it never loses it. So every
wake-up is registered ``robust``: a broker that refuses it (or, in-process, a task that fails)
is logged and leaves the committed work for the recovery sweep, instead of turning a committed
request into an error that a client would retry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from celery import Task


class Wakes(Protocol):
    """What registers a wake-up to send after commit (a ``toolcalls.services.unit.Step``)."""

    def wake(self, action: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class Workers:
    """The engine's tasks (``toolcalls.tasks``), registered by the app at start-up so the
    services that wake them need not import the module that imports the services."""

    run_turn: Task
    execute_call: Task
    reconcile_call: Task
    resume_call: Task


_workers: list[Workers] = []


def workers_register(workers: Workers) -> None:
    """Register the engine's tasks (``ToolcallsConfig.ready``)."""
    _workers[:] = [workers]


def _registered() -> Workers:
    assert _workers, "toolcalls.apps.ToolcallsConfig.ready registers the engine's tasks"
    return _workers[0]


def enqueue_turn(step: Wakes, *, operation_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.run_turn`` for the operation after commit (optionally delayed, seconds)."""
    task = _registered().run_turn
    step.wake(lambda: task.apply_async(args=[operation_pk], countdown=countdown_s))


def enqueue_execute(step: Wakes, *, call_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.execute_call`` for the call after commit."""
    task = _registered().execute_call
    step.wake(lambda: task.apply_async(args=[call_pk], countdown=countdown_s))


def enqueue_reconcile(step: Wakes, *, call_pk: int) -> None:
    """Run ``toolcalls.reconcile_call`` for a call whose outcome is unknown, after commit."""
    task = _registered().reconcile_call
    step.wake(lambda: task.apply_async(args=[call_pk]))


def enqueue_resume(step: Wakes, *, call_pk: int) -> None:
    """Run ``toolcalls.resume_call`` for an approved call after commit."""
    task = _registered().resume_call
    step.wake(lambda: task.apply_async(args=[call_pk]))
