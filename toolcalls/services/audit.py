"""The append-only, hash-chained audit trail of an operation.

Each event's ``hash`` is SHA-256 over the canonical JSON of its fields and the previous event's
hash; ``toolcalls.services.audit.event_hash`` is the one definition used to write and to verify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.utils import timezone

from toolcalls.binding import digest
from toolcalls.hooks import audit_recorded
from toolcalls.models import AuditEvent, Operation, ToolCall

# "token" ("access_token", "tokenValue") but not a count of tokens ("max_input_tokens").
_SECRET_KEY = re.compile(
    r"(secret|passw|api[_-]?key|authorization|credential|private[_-]?key|cookie|token(?!s))",
    re.I,
)
MASK = "***"


def mask_secrets(value: Any) -> Any:
    """A copy of ``value`` where every mapping entry whose key looks secret is replaced by
    ``"***"`` (keys containing secret, token, password, api_key, authorization, credential, …)."""
    if isinstance(value, Mapping):
        return {
            key: MASK if _SECRET_KEY.search(str(key)) else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(item) for item in value]
    return value


def event_hash(event: AuditEvent, *, operation_id: str, call_id: str | None) -> str:
    """SHA-256 hex over the event's content and ``prev_hash``."""
    return digest(
        {
            "operation": operation_id,
            "seq": event.seq,
            "kind": event.kind,
            "call": call_id,
            "approval": event.approval_ref,
            "actor": event.actor,
            "from": event.from_state,
            "to": event.to_state,
            "details": event.details,
            "created_at": event.created_at.isoformat(),
            "prev_hash": event.prev_hash,
        }
    )


def audit_record(
    *,
    operation: Operation,
    kind: str,
    actor: str,
    call: ToolCall | None = None,
    approval_ref: str = "",
    from_state: str = "",
    to_state: str = "",
    details: Mapping[str, Any] | None = None,
    save_operation: bool = True,
) -> AuditEvent:
    """Append one event to ``operation``'s chain. The caller must hold the operation row lock
    (``select_for_update``) inside a transaction, which serialises ``seq``.

    With ``save_operation=False`` the caller saves ``audit_seq``/``audit_head`` itself (in the
    same ``save(update_fields=…)`` as its own change).
    """
    assert connection.in_atomic_block, (
        "audit events are written inside the state change's transaction"
    )
    event = AuditEvent(
        operation=operation,
        seq=operation.audit_seq + 1,
        kind=kind,
        call=call,
        approval_ref=approval_ref,
        actor=actor,
        from_state=from_state,
        to_state=to_state,
        details=mask_secrets(dict(details or {})),
        created_at=timezone.now(),
        prev_hash=operation.audit_head,
    )
    event.hash = event_hash(
        event, operation_id=operation.public_id, call_id=call.public_id if call else None
    )
    event.save(force_insert=True)
    operation.audit_seq = event.seq
    operation.audit_head = event.hash
    if save_operation:
        operation.save(update_fields=["audit_seq", "audit_head", "updated_at"])
    audit_recorded(event)
    return event
