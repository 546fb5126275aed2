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

A wake-up this worker would continue with may instead have its work claimed by the step that
sends it, in the step's own transaction, just before the step is written (:class:`WakeUp`):
the turn that proposes a call claims the call, the call that makes a set's results ready
claims the next turn. That work then needs no transaction of its own to be claimed, and no
wake-up: nobody else can take it. Claimed work runs before anything else the worker continues
with, even past the budget; a worker that dies before running it leaves it as one that died
right after claiming it does, under a lease that runs out, for the recovery sweep to settle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from celery import Task
from django.conf import settings

log = logging.getLogger(__name__)


class Wakes(Protocol):
    """What registers a wake-up to send after commit (a ``toolcalls.services.unit.Step``)."""

    def wake(self, action: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class Claimed:
    """What a claimer did with a wake-up's work inside the step: ``run`` is the rest of that
    work, for this worker after commit (``None``: the step settled it, nothing is left)."""

    run: Callable[[], None] | None


#: Claims the work of a wake-up for ``pk`` inside the step sending it (an argument of type
#: ``toolcalls.services.unit.Step``); ``None`` when it cannot, and the wake-up is sent as usual.
Claimer = Callable[[Any, int], Claimed | None]


@dataclass(frozen=True)
class Workers:
    """The engine's tasks (``toolcalls.tasks``), registered by the app at start-up so the
    services that wake them need not import the module that imports the services, and the
    claimers of the tasks whose work a step may claim (by task name)."""

    run_turn: Task
    execute_call: Task
    reconcile_call: Task
    resume_call: Task
    claimers: Mapping[str, Claimer] = field(default_factory=dict)


_workers: list[Workers] = []


def workers_register(workers: Workers) -> None:
    """Register the engine's tasks (``ToolcallsConfig.ready``)."""
    _workers[:] = [workers]


def _registered() -> Workers:
    assert _workers, "toolcalls.apps.ToolcallsConfig.ready registers the engine's tasks"
    return _workers[0]


@dataclass
class _Continuation:
    """The work a worker continues with: ``steps_left`` more steps, ``claimed`` the work its
    steps claimed for it (run first), ``next`` the step to run after that."""

    steps_left: int
    next: tuple[Task, int] | None = None
    claimed: list[Callable[[], None]] = field(default_factory=list)


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
    """Run the claimed work, then the next step, while the budget lasts. After a step that
    raised, only the work already claimed still runs."""
    while True:
        if continuation.claimed:
            run, what = continuation.claimed.pop(0), "claimed work"
        elif continuation.next is not None and continuation.steps_left > 0:
            (task, pk), continuation.next = continuation.next, None
            run, what = partial(task.run, pk), f"{task.name}({pk})"
        else:
            return
        continuation.steps_left -= 1
        try:
            run()
        except Exception:
            log.exception("continued %s failed; the recovery sweep hands it out", what)
            continuation.steps_left = 0


def _continues_here() -> _Continuation | None:
    """The continuation of this worker when it will run the next step a step in progress
    hands it: inside :func:`continuing`, with budget left, and nothing else to continue with
    yet."""
    continuation: _Continuation | None = getattr(_local, "continuation", None)
    if continuation is None or continuation.steps_left <= 0:
        return None
    return None if continuation.next is not None or continuation.claimed else continuation


@dataclass(frozen=True)
class WakeUp:
    """A wake-up of ``task`` for ``pk``, sent after commit (optionally delayed, seconds): this
    worker continues with it when it is free to, else it goes through the broker."""

    task: Task
    pk: int
    countdown_s: float | None = None

    def __call__(self) -> None:
        continuation: _Continuation | None = getattr(_local, "continuation", None)
        if (
            self.countdown_s is None
            and continuation is not None
            and continuation.next is None
            and not continuation.claimed
        ):
            continuation.next = (self.task, self.pk)
            return
        try:
            self.task.apply_async(args=[self.pk], countdown=self.countdown_s)
        except Exception:  # robust: see the module docstring
            task, pk = self.task.name, self.pk
            log.exception("%s(%s) not sent; the recovery sweep hands it out", task, pk)

    def claim(self, step: Any) -> Callable[[], None] | None:
        """At the end of ``step``, before it is written: claim this wake-up's work in it for
        this worker, when the worker would continue with it and the task's claimer can. Returns
        what to run after commit in place of the wake-up, or ``None`` (the wake-up stands)."""
        claimer = _registered().claimers.get(self.task.name)
        continuation = _continues_here()
        if self.countdown_s is not None or claimer is None or continuation is None:
            return None
        claimed = claimer(step, self.pk)
        if claimed is None:
            return None
        if claimed.run is None:
            return _nothing
        return partial(continuation.claimed.append, claimed.run)


def _nothing() -> None:
    """In place of a wake-up whose work its step settled when it claimed it."""


def _wake(step: Wakes, task: Task, pk: int, countdown_s: float | None = None) -> None:
    step.wake(WakeUp(task, pk, countdown_s))


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
