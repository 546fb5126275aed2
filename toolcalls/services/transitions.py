"""The one place a ``state`` field changes: check the table, write, audit, log.

Callers hold the operation row lock (and the locked child row) inside a transaction; every
function here asserts that.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, models

from toolcalls.models import Operation, ToolCall
from toolcalls.services.audit import audit_record
from toolcalls.states import (
    CALL_TRANSITIONS,
    OPERATION_TRANSITIONS,
    OperationState,
    check_transition,
)

log = logging.getLogger("callgate.transitions")

_REASON_STATES = frozenset(
    {
        OperationState.ESCALATED,
        OperationState.REFUSED,
        OperationState.INCOMPLETE,
        OperationState.FAILED,
        OperationState.STOPPED,
        OperationState.CANCELLED,
    }
)


def operation_transition(
    *,
    operation: Operation,
    to_state: str,
    actor: str,
    reason: str = "",
    details: Mapping[str, Any] | None = None,
    update_fields: Iterable[str] = (),
    save: bool = True,
) -> list[str]:
    """Move ``operation`` to ``to_state``; raises ``IllegalTransition`` if the table forbids it.

    ``reason`` (for ESCALATED and failure states) is stored as ``terminal_reason``, and cleared
    when an escalated operation resumes (the audit trail keeps it); ``update_fields`` names
    other fields the caller changed that must be saved with it.

    Returns the fields saved. With ``save=False`` nothing is saved and the caller must save the
    returned fields before its transaction commits: a step that moves on again within the same
    transaction then writes the row once instead of once per state.
    """
    from_state = operation.state
    check_transition(OPERATION_TRANSITIONS, "operation", from_state, to_state)
    operation.state = to_state
    fields = {"state", "audit_seq", "audit_head", "updated_at", *update_fields}
    if to_state in _REASON_STATES:
        operation.terminal_reason = reason[:500]
        fields.add("terminal_reason")
    elif operation.terminal_reason:
        operation.terminal_reason = ""
        fields.add("terminal_reason")
    info = {**(details or {}), **({"reason": reason} if reason else {})}
    audit_record(
        operation=operation,
        kind="operation.transition",
        actor=actor,
        from_state=from_state,
        to_state=to_state,
        details=info,
        save_operation=False,
    )
    if save:
        operation.save(update_fields=sorted(fields))
    _log(operation=operation, call=None, from_state=from_state, to_state=to_state, details=info)
    return sorted(fields)


def call_transition(
    *,
    operation: Operation,
    call: ToolCall,
    to_state: str,
    actor: str,
    details: Mapping[str, Any] | None = None,
    update_fields: Iterable[str] = (),
    approval_ref: str = "",
    save_operation: bool = True,
) -> None:
    """Move ``call`` (of the locked ``operation``) to ``to_state``; raises ``IllegalTransition``.

    With ``save_operation=False`` the caller saves the operation's ``audit_seq``/``audit_head``
    itself, with its own change to the row, before the transaction commits."""
    from_state = call.state
    check_transition(CALL_TRANSITIONS, "call", from_state, to_state)
    call.state = to_state
    call.save(update_fields=sorted({"state", "updated_at", *update_fields}))
    info = {
        "call_id": call.call_id,
        "tool": call.tool_name,
        "arguments_sha256": call.arguments_sha256,
        "attempt": call.attempt,
        **(details or {}),
    }
    audit_record(
        operation=operation,
        kind="call.transition",
        actor=actor,
        call=call,
        approval_ref=approval_ref,
        from_state=from_state,
        to_state=to_state,
        details=info,
        save_operation=save_operation,
    )
    _log(operation=operation, call=call, from_state=from_state, to_state=to_state, details=info)


def row_transition(
    *,
    operation: Operation,
    row: models.Model,
    table: Mapping[str, frozenset[str]],
    kind: str,
    to_state: str,
    actor: str,
    approval_ref: str = "",
    details: Mapping[str, Any] | None = None,
    update_fields: Iterable[str] = (),
) -> None:
    """Transition any other stateful row of ``operation`` (approvals) through its ``table``."""
    from_state = row.state  # type: ignore[attr-defined]
    check_transition(dict(table), kind, from_state, to_state)
    row.state = to_state  # type: ignore[attr-defined]
    row.save(update_fields=sorted({"state", *update_fields}))
    audit_record(
        operation=operation,
        kind=f"{kind}.transition",
        actor=actor,
        approval_ref=approval_ref,
        from_state=from_state,
        to_state=to_state,
        details=details,
    )
    _log(operation=operation, call=None, from_state=from_state, to_state=to_state, details=details)


def _log(
    *,
    operation: Operation,
    call: ToolCall | None,
    from_state: str,
    to_state: str,
    details: Mapping[str, Any] | None,
) -> None:
    assert connection.in_atomic_block
    fields = {
        "operation_id": operation.public_id,
        "from_state": from_state,
        "state": to_state,
        "call_id": call.call_id if call else None,
        "tool": call.tool_name if call else None,
        "arguments_sha256": call.arguments_sha256 if call else None,
        "attempt": call.attempt if call else None,
        "outcome": (details or {}).get("outcome"),
    }
    text = " ".join(f"{key}={value}" for key, value in fields.items() if value not in (None, ""))
    log.info("transition %s", text, extra=fields)
