"""The threads local tool handlers run in, so a handler's timeout can be enforced.

A thread is reused from one call to the next, and with it the database connection a handler
opened (Django keeps one per thread, for ``CONN_MAX_AGE``): opening a PostgreSQL connection costs
more than a whole step of the loop. A thread is never shared: a handler that outlives its timeout
keeps its thread while it runs, and the next call gets another one. A thread idle for
:data:`IDLE_S` closes its connections and ends.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import close_old_connections, connections

T = TypeVar("T")

#: Seconds a handler thread waits for its next call before it ends.
IDLE_S = 60.0

Job = Callable[[], None]


class _HandlerThread:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="tool-handler", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while True:
                try:
                    job = self.jobs.get(timeout=IDLE_S)
                except queue.Empty:
                    if _retire(self):
                        return
                    continue  # handed a job just now: it is in the queue
                if job is None:
                    return
                job()
                close_old_connections()  # those past CONN_MAX_AGE, or broken
                with _lock:
                    _idle.append(self)
        finally:
            connections.close_all()


_lock = threading.Lock()
_idle: list[_HandlerThread] = []


def _retire(handler_thread: _HandlerThread) -> bool:
    """Take an idle thread off the list so no job is handed to it; ``False`` if it is busy."""
    with _lock:
        if handler_thread in _idle:
            _idle.remove(handler_thread)
            return True
        return False


def handler_run(run: Callable[[], T], *, timeout_s: float) -> list[T]:
    """``[run()]`` run in a handler thread, or ``[]`` when it did not return within
    ``timeout_s`` (it goes on in the background, in its thread). ``run`` must not raise."""
    box: list[T] = []
    done = threading.Event()

    def job() -> None:
        box.append(run())
        done.set()

    with _lock:
        handler_thread = _idle.pop() if _idle else None
    (handler_thread or _HandlerThread()).jobs.put(job)
    done.wait(timeout_s)
    return box[:1]


def handler_threads_stop() -> None:
    """End the idle handler threads, closing their database connections (a test session
    before it drops its database; a handler still running is left to finish)."""
    with _lock:
        stopping = list(_idle)
        _idle.clear()
    for handler_thread in stopping:
        handler_thread.jobs.put(None)
    for handler_thread in stopping:
        handler_thread.thread.join(timeout=5)


def _forget() -> None:
    """In a forked child: the parent's threads do not exist there (nor does a holder of the
    parent's lock)."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget)
