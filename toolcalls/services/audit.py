"""The append-only, hash-chained audit trail of an operation.

Each event's ``hash`` is SHA-256 over the canonical JSON of its fields and the previous event's
hash; ``toolcalls.services.audit.event_hash`` is the one definition used to write and to verify.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, NotRequired, TypedDict, Unpack

from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from toolcalls.actors import Actor
from toolcalls.binding import digest
from toolcalls.hooks import audit_recorded, audit_rows
from toolcalls.models import AuditEvent, Operation, ToolCall
from toolcalls.services.watching import operations_changed
from toolcalls.services.writes import Change, rows_write
from toolcalls.states import AuditKind

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


def absent_as_null(details: Mapping[str, Any]) -> dict[str, Any]:
    """``details`` with each ``""`` among its values as ``None``: an absent value (an approval
    decided without a reason, an extension without a note) reads ``null``, never ``""``, as
    everywhere in the API. Values inside lists and objects are data (an argument may be ``""``)
    and stay as they are."""
    return {key: None if value == "" else value for key, value in details.items()}


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


class EventFields(TypedDict):
    """What an event says: ``kind`` and ``actor``; optionally the ``call`` row, the approval's
    public ID (``approval_ref``), the states it moved between and ``details`` (a JSON mapping;
    secret-looking keys are masked, ``""`` values recorded as ``null``)."""

    kind: AuditKind
    actor: Actor
    call: NotRequired[ToolCall | None]
    approval_ref: NotRequired[str]
    from_state: NotRequired[str]
    to_state: NotRequired[str]
    details: NotRequired[Mapping[str, Any] | None]


def audit_event(operation: Operation, **fields: Unpack[EventFields]) -> AuditEvent:
    """The next event of ``operation``'s chain, not yet inserted; ``operation.audit_seq`` and
    ``audit_head`` move on to it (the caller saves them). The caller holds the operation row
    lock inside a transaction, which serialises ``seq``."""
    assert connection.in_atomic_block, (
        "audit events are written inside the state change's transaction"
    )
    call = fields.get("call")
    event = AuditEvent(
        operation=operation,
        seq=operation.audit_seq + 1,
        kind=fields["kind"],
        call=call,
        approval_ref=fields.get("approval_ref", ""),
        actor=fields["actor"].audit_name,
        from_state=fields.get("from_state", ""),
        to_state=fields.get("to_state", ""),
        details=mask_secrets(absent_as_null(fields.get("details") or {})),
        created_at=timezone.now(),
        prev_hash=operation.audit_head,
    )
    event.hash = event_hash(
        event, operation_id=operation.public_id, call_id=call.public_id if call else None
    )
    operation.audit_seq = event.seq
    operation.audit_head = event.hash
    return event


def audit_insert(
    events: list[AuditEvent], changes: Sequence[Change] = (), inserts: Sequence[Model] = ()
) -> None:
    """Insert ``inserts`` (new rows, ids given), ``events`` and the rows the audit row sources
    give for them, and save ``changes`` (rows and the fields to save: the chain head of the
    operation among them) in one statement (:func:`rows_write`), then tell the audit listeners
    of each event (``toolcalls.hooks``), inside the transaction that records them, and whoever
    watches their operations once it commits (``toolcalls.services.watching``)."""
    rows_write(events, changes, inserts, additions=audit_rows(events))
    for event in events:
        audit_recorded(event)
    if events:
        changed = sorted({event.operation_id for event in events})
        transaction.on_commit(partial(operations_changed, changed), robust=True)


def audit_record(*, operation: Operation, **fields: Unpack[EventFields]) -> AuditEvent:
    """Append one event to ``operation``'s chain now and save the operation's chain head, for a
    change made outside a step (``toolcalls.services.unit``). Locking as for
    :func:`audit_event`."""
    event = audit_event(operation, **fields)
    audit_insert([event], [(operation, ["audit_seq", "audit_head", "updated_at"])])
    return event
