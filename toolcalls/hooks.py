"""The engine's declared hooks: how other packages hear of what the engine records without the
engine importing them.

An audit listener is called with every audit event the engine records, inside the transaction
that records it (so it sees the event's operation locked and may register on-commit work); it
must not write engine rows. Listeners register once, from their app's ``ready()``.
"""

from __future__ import annotations

from collections.abc import Callable

from toolcalls.models import AuditEvent

AuditListener = Callable[[AuditEvent], None]

_audit_listeners: list[AuditListener] = []


def audit_listen(listener: AuditListener) -> None:
    """Call ``listener`` with each audit event recorded from now on (registering twice is a
    no-op)."""
    if listener not in _audit_listeners:
        _audit_listeners.append(listener)


def audit_recorded(event: AuditEvent) -> None:
    """Tell every listener of ``event`` (the engine calls this once per event it records)."""
    for listener in _audit_listeners:
        listener(event)
