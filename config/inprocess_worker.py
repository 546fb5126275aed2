"""The embedded mode's worker and beat: without a broker, the process that serves requests runs
Callgate's Celery tasks itself, in time, on one background thread.

In production, ``apply_async`` puts a task on the broker and returns; a ``celery worker`` runs it
later (after its ``countdown`` or at its ``eta``), and ``celery beat`` sends the periodic sweeps
of ``CELERY_BEAT_SCHEDULE``. Without a broker (``make run``) nothing of that exists, and running
each task inline in the thread that sent it ignores every delay and puts slow work (webhook
POSTs, model requests) on the request path. So the process that serves requests starts one
:class:`InProcessWorker` (``config.wsgi``: in ``runserver`` that is the reloader's child, never
the reloader itself), and while it runs, ``config.celery.Task.apply_async`` hands every task to
it instead:

- **Queue and timers.** One heap of ``(due, sequence, task, args, kwargs)``: ``due`` is the
  monotonic clock at submission plus the task's ``countdown`` (or its ``eta`` minus now), so work
  runs in due order and, when due together, in the order it was sent.
- **Execution.** One task at a time, through Celery's own ``Task.apply`` (signals, tracing and
  error logging as for any task). A task that raises is logged and dropped: what it left undone
  is in the database, and the sweeps hand it out again, as after a worker's crash.
- **Beat.** Each ``CELERY_BEAT_SCHEDULE`` entry becomes a Celery ``ScheduleEntry`` (so its
  ``schedule`` means what it means to ``celery beat``: seconds, a ``timedelta`` or a
  ``crontab``); a due entry is queued like any task. As with beat, the first run comes one
  interval after start.
- **Database.** The thread has its own connection (Django's are per thread), checked or closed
  between tasks by Django's request rule (``close_old_connections``) and closed when the thread
  ends. On SQLite every transaction takes the write lock when it begins and waits up to 20 s for
  it (``config.settings.base.database``), so the request threads and this one wait for each other
  instead of failing with "database is locked".
- **Lifetime.** A daemon thread: when the process stops, queued and delayed tasks are lost, as
  broker messages may be. The database is the source of truth: the recovery sweep re-sends
  runnable work nobody touched, the webhook sweep the deliveries that are due.

Management commands start no worker: with no broker their tasks run inline (Celery's eager
mode), which is what ``demo_setup`` and ``run_scenario`` wait on. Nothing here runs in
production (a broker configured) or in tests unless a test starts it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery.beat import ScheduleEntry
from celery.utils.time import maybe_make_aware

log = logging.getLogger("callgate.inprocess_worker")

#: Seconds ``stop()`` waits for the task in progress to finish.
STOP_WAIT_S = 30.0


@dataclass(frozen=True)
class _Job:
    task: Any  # a Celery task
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    task_id: str | None


_running: InProcessWorker | None = None
_running_lock = threading.Lock()


class InProcessWorker:
    """Runs tasks sent to it on one thread, each when it is due, and queues the beat entries
    of ``schedule`` (``CELERY_BEAT_SCHEDULE``'s shape) when they are due."""

    def __init__(self, *, app: Any, schedule: Mapping[str, Mapping[str, Any]]) -> None:
        self._app = app
        # What a worker and beat do at start: import the task modules (autodiscovery).
        app.loader.import_default_modules()
        self._entries = [
            ScheduleEntry(name=name, app=app, **spec) for name, spec in schedule.items()
        ]
        unknown = {entry.task for entry in self._entries} - set(app.tasks)
        if unknown:
            raise ValueError(f"the beat schedule names unknown tasks: {sorted(unknown)}")
        self._heap: list[tuple[float, int, _Job]] = []  # (due, sequence, job)
        self._sequence = itertools.count()
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="callgate-inprocess-worker", daemon=True
        )

    def submit(
        self,
        task: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        task_id: str | None = None,
        countdown: float | None = None,
        eta: datetime | None = None,
    ) -> None:
        """Queue ``task(*args, **kwargs)`` to run ``countdown`` seconds from now, or at ``eta``
        (an aware datetime; naive is read as UTC, as Celery does), or as soon as possible."""
        if eta is not None:
            delay_s = (maybe_make_aware(eta) - self._app.now()).total_seconds()
        else:
            delay_s = countdown or 0.0
        due = time.monotonic() + max(delay_s, 0.0)
        with self._wake:
            heapq.heappush(
                self._heap, (due, next(self._sequence), _Job(task, args, kwargs, task_id))
            )
            self._wake.notify()

    def _run(self) -> None:
        from django.db import connections

        try:
            while (job := self._next_due()) is not None:
                self._execute(job)
        finally:
            connections.close_all()

    def _next_due(self) -> _Job | None:
        """Wait for the next due job (queueing due beat entries meanwhile); None once stopped."""
        with self._wake:
            while not self._stopping:
                wait_s = self._queue_due_entries()
                if self._heap:
                    wait_s = min(wait_s, self._heap[0][0] - time.monotonic())
                    if wait_s <= 0:
                        return heapq.heappop(self._heap)[2]
                self._wake.wait(wait_s)
        return None

    def _queue_due_entries(self) -> float:
        """Queue the beat entries that are due; returns seconds until the next one is."""
        wait_s = 60.0
        for index, entry in enumerate(self._entries):
            due, next_s = entry.is_due()
            if due:
                self.submit(self._app.tasks[entry.task], tuple(entry.args), dict(entry.kwargs))
                self._entries[index] = next(entry)
            wait_s = min(wait_s, next_s)
        return wait_s

    def _execute(self, job: _Job) -> None:
        from django.db import close_old_connections

        close_old_connections()
        try:
            job.task.apply(args=job.args, kwargs=job.kwargs, task_id=job.task_id, throw=True)
        except Exception:
            # Say why the task failed (with its traceback) and what becomes of the work.
            log.warning(
                "task %s%r failed; the sweeps take its work up again",
                job.task.name,
                job.args,
                exc_info=True,
            )
        finally:
            close_old_connections()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the task in progress (waiting up to :data:`STOP_WAIT_S`); queued and
        delayed tasks are dropped, and so is what is submitted meanwhile."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(STOP_WAIT_S)


def start(*, app: Any, schedule: Mapping[str, Mapping[str, Any]]) -> InProcessWorker:
    """Start this process's worker (once: a running one is returned as it is)."""
    global _running
    with _running_lock:
        if _running is None:
            _running = InProcessWorker(app=app, schedule=schedule)
            _running.start()
            log.info("in-process worker started: tasks and the periodic sweeps run here")
        return _running


def stop() -> None:
    """Stop this process's worker, if one runs; tasks sent afterwards go to Celery again."""
    global _running
    with _running_lock:
        if _running is not None:
            _running.stop()
            _running = None


def running() -> InProcessWorker | None:
    """This process's worker, or None (then tasks go wherever Celery sends them)."""
    return _running
