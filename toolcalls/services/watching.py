"""Waiting for an operation to change, told by the database instead of asking it again and again.

On PostgreSQL the statement that writes a step's audit events notifies each of their operations
on the channel ``callgate_operation_<pk>`` (:func:`operation_channel`;
``toolcalls.services.writes``), which PostgreSQL delivers when the step commits: every step of
an operation appends events, so a notification means a committed change to read.
:func:`operation_watch` listens on one operation's channel on this thread's connection; its
``wait`` returns as soon as a change commits, or after a timeout (a wait never blocks longer
than asked, so a missed notification costs at most one timeout).
On SQLite (the embedded demo) nothing notifies, nor inside a transaction (PostgreSQL starts
listening when it commits): ``wait`` sleeps ``poll_s`` (never longer than asked), and the caller
reads again, as it would after a notification.

Read what you wait for *after* entering the watch: a change committed before the ``LISTEN``
is then seen by that read, one committed after it wakes ``wait``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from psycopg import Connection, sql

#: ``wait(timeout_s)``: returns when the watched operation changed or ``timeout_s`` seconds
#: passed, whichever is first.
Wait = Callable[[float], None]


def operation_channel(operation_pk: int) -> str:
    """The channel a step of operation ``operation_pk`` notifies when it commits."""
    return f"callgate_operation_{int(operation_pk)}"


@contextmanager
def operation_watch(*, operation_pk: int, poll_s: float) -> Iterator[Wait]:
    """Watch operation ``operation_pk`` within the block (see the module docstring); ``poll_s``:
    the seconds between reads where the database cannot notify."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield lambda timeout_s: time.sleep(max(0.0, min(poll_s, timeout_s)))
        return
    channel = sql.Identifier(operation_channel(operation_pk))
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("LISTEN {}").format(channel))
    listening = connection.connection
    try:
        yield lambda timeout_s: _notified(listening, timeout_s)
    finally:
        if connection.connection is listening and not listening.closed:
            with connection.cursor() as cursor:
                cursor.execute(sql.SQL("UNLISTEN {}").format(channel))


def _notified(listening: Connection[Any], timeout_s: float) -> None:
    """Return at the first notification on ``listening`` (a connection that listens on one
    channel) or after ``timeout_s``; a notification that came while nobody waited counts."""
    for _ in listening.notifies(timeout=max(0.0, timeout_s), stop_after=1):
        return
