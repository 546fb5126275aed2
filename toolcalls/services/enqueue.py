"""Wake-ups for workers, sent only after the transaction that made the work visible commits.

The database is the source of truth: a lost message delays work, it never loses it. So every
wake-up is registered ``robust``: a broker that refuses it (or, in-process, a task that fails)
is logged and leaves the committed work for the recovery sweep, instead of turning a committed
request into an error that a client would retry.

A worker continues what it started (:func:`continuing`): inside an engine task, the first
immediate wake-up a step sends is not sent through the broker but run by the same worker right
after the step, and so on along the operation (the model turn, its first call, the next turn),
up to ``CALLGATE_WORKER_CONTINUE_STEPS`` steps; any further wake-ups of a step (the other calls
of a parallel set) go through the broker to other workers, and what is left when the budget is
spent goes back through the broker too. An operation then runs start to finish without a queue
hop per step, and with many operations waiting each one's latency stays bounded: a worker
finishes one before taking the next, instead of every operation advancing one step per pass
over the whole queue. A worker that dies between two steps loses nothing: its task's message is
delivered again (late acknowledgement), and the recovery sweep hands out what is stranded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from celery import Task
from django.conf import settings

log = logging.getLogger(__name__)


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


@dataclass
class _Continuation:
    """The work a worker continues with: ``steps_left`` more steps, ``next`` the one to run."""

    steps_left: int
    next: tuple[Task, int] | None = None


_local = threading.local()


@contextmanager
def continuing() -> Iterator[None]:
    """Run an engine task's body, then continue with the work it woke (see the module
    docstring). Nested (a continued step is itself a task body), it only runs the body: the
    outermost one runs what the body wakes. A continued step that raises is logged, as a task
    would be, and the worker stops continuing: the work is committed, the sweep hands it out."""
    if getattr(_local, "continuation", None) is not None:
        yield
        return
    continuation = _local.continuation = _Continuation(settings.CALLGATE_WORKER_CONTINUE_STEPS)
    try:
        yield
        _drain(continuation)
    finally:
        _local.continuation = None
        if continuation.next is not None:
            task, pk = continuation.next
            task.apply_async(args=[pk])


def _drain(continuation: _Continuation) -> None:
    while continuation.next is not None and continuation.steps_left > 0:
        (task, pk), continuation.next = continuation.next, None
        continuation.steps_left -= 1
        try:
            task.run(pk)
        except Exception:
            log.exception("continued %s(%s) failed; the recovery sweep hands it out", task.name, pk)
            return


def _wake(step: Wakes, task: Task, pk: int, countdown_s: float | None = None) -> None:
    """After commit: continue with ``task`` for ``pk`` in this worker when it is the step's
    first immediate wake-up inside :func:`continuing`, else send it through the broker."""

    def send() -> None:
        continuation = getattr(_local, "continuation", None)
        if countdown_s is None and continuation is not None and continuation.next is None:
            continuation.next = (task, pk)
        else:
            task.apply_async(args=[pk], countdown=countdown_s)

    step.wake(send)


def enqueue_turn(step: Wakes, *, operation_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.run_turn`` for the operation after commit (optionally delayed, seconds)."""
    _wake(step, _registered().run_turn, operation_pk, countdown_s)


def enqueue_execute(step: Wakes, *, call_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.execute_call`` for the call after commit."""
    _wake(step, _registered().execute_call, call_pk, countdown_s)


def enqueue_reconcile(step: Wakes, *, call_pk: int) -> None:
    """Run ``toolcalls.reconcile_call`` for a call whose outcome is unknown, after commit."""
    _wake(step, _registered().reconcile_call, call_pk)


def enqueue_resume(step: Wakes, *, call_pk: int) -> None:
    """Run ``toolcalls.resume_call`` for an approved call after commit."""
    _wake(step, _registered().resume_call, call_pk)
