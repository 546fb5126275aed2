"""Database connections across the slow steps of the loop (a model request, a tool handler),
and the record that follows them: retried when the database failed it for a passing reason."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from django.conf import settings
from django.db import Error, InterfaceError, OperationalError, connections

log = logging.getLogger("callgate.progress")

#: SQLSTATEs of a transaction that may succeed when run again: serialization failure, deadlock,
#: and the server ending the session (``pg_terminate_backend``, a shutdown, a crash, start-up);
#: every code of class 08 (connection exception) too. PostgreSQL "Appendix A. Error Codes".
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03"})


def connections_check() -> None:
    """Before a record runs again after a transient error: close every connection that no
    longer answers (a server restart, an idle timeout, a proxy or an operator cutting it while
    the slow step ran), so the record opens a fresh one; keep those that do.

    One round trip (``SELECT 1``) per open connection. Django's ``close_old_connections`` would
    instead close a healthy connection whenever ``CONN_MAX_AGE`` is 0 (the default), and the
    reconnect costs a new server process, its authentication and start-up: several
    milliseconds on every turn and every call.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()


def transient(exc: BaseException) -> bool:
    """Whether database error ``exc`` says nothing about the data written: the connection was
    lost, or the server asked for the transaction to be run again.

    Django re-raises the driver's error as ``__cause__``; psycopg's carries the server's
    SQLSTATE, none when the client lost the connection itself. Any other SQLSTATE (a value out
    of range, a NUL byte, a row too big, a statement timeout) is a property of the write.
    """
    if isinstance(exc, InterfaceError):
        return True
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    if sqlstate:
        return sqlstate.startswith("08") or sqlstate in _TRANSIENT_SQLSTATES
    return isinstance(exc, OperationalError)


def record_retrying(record: Callable[[], None], *, what: str) -> None:
    """Run ``record`` (one durable transaction that records what a slow step returned) on live
    connections; after a :func:`transient` error run it again, up to ``CALLGATE_DB_RETRIES``
    times, ``CALLGATE_RETRY_BASE_MS`` doubling (capped at ``CALLGATE_RETRY_CAP_MS``, jittered)
    between tries.

    The first try runs on the connection as it is, with no round trip to check it first: a
    connection lost while the slow step ran fails that try at its first statement, before
    anything is written, and the retry checks the connections (:func:`connections_check`).

    ``record`` must check its own lease: a retry after a commit whose answer was lost finds the
    work recorded and the lease gone. Raises the permanent error, or the last transient one.
    """
    attempt = 0
    while True:
        if attempt:
            connections_check()
        try:
            record()
            return
        except Error as exc:  # a DatabaseError or an InterfaceError (PEP 249)
            attempt += 1
            if not transient(exc) or attempt > settings.CALLGATE_DB_RETRIES:
                raise
            delay_ms = min(
                settings.CALLGATE_RETRY_BASE_MS * 2 ** (attempt - 1), settings.CALLGATE_RETRY_CAP_MS
            )
            log.warning(
                "record retry %s of %s after %s: %s", attempt, what, type(exc).__name__, exc
            )
            time.sleep(delay_ms / 1000 * random.uniform(0.75, 1.0))
