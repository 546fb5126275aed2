"""Database connections across the slow steps of the loop (a model request, a tool handler)."""

from __future__ import annotations

from django.db import connections


def connections_check() -> None:
    """Before recording what a slow step returned: close every connection that no longer
    answers (a server restart, an idle timeout, a proxy or an operator cutting it while the step
    ran), so the record opens a fresh one; keep those that do.

    One round trip (``SELECT 1``) per open connection. Django's ``close_old_connections`` would
    instead close a healthy connection whenever ``CONN_MAX_AGE`` is 0 (the default), and the
    reconnect costs a new server process, its authentication and start-up: several
    milliseconds on every turn and every call.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()
