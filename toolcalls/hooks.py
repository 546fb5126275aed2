"""The engine's declared hooks: how other packages hear of what the engine records without the
engine importing them.

An audit listener is called with every audit event the engine records, inside the transaction
that records it (so it sees the event's operation locked and may register on-commit work); it
must not write engine rows. An audit row source is called with every event before it is
written, and returns rows of its own package's models (new, no id) to insert with the event,
in the same statement, a row that would repeat a unique one left out (conflicts ignored).
Both register once, from their app's ``ready()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db.models import Model

from toolcalls.models import AuditEvent

AuditListener = Callable[[AuditEvent], None]
AuditRowSource = Callable[[AuditEvent], Sequence[Model]]

_audit_listeners: list[AuditListener] = []
_audit_row_sources: list[AuditRowSource] = []


def audit_listen(listener: AuditListener) -> None:
    """Call ``listener`` with each audit event recorded from now on (registering twice is a
    no-op)."""
    if listener not in _audit_listeners:
        _audit_listeners.append(listener)


def audit_recorded(event: AuditEvent) -> None:
    """Tell every listener of ``event`` (the engine calls this once per event it records)."""
    for listener in _audit_listeners:
        listener(event)


def audit_rows_from(source: AuditRowSource) -> None:
    """Insert what ``source`` returns for each audit event recorded from now on with the event
    (registering twice is a no-op)."""
    if source not in _audit_row_sources:
        _audit_row_sources.append(source)


def audit_rows(events: Sequence[AuditEvent]) -> list[Model]:
    """The rows every source gives for ``events`` (not yet written), to insert with them."""
    return [row for event in events for source in _audit_row_sources for row in source(event)]
