"""The one place a ``state`` field changes: check the table, write, audit, log.

Each works on a :class:`toolcalls.services.unit.Step`, which holds the operation row lock (and
the locked child row) inside a transaction and saves the rows once at its end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import connection, models

from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.models import Operation, ToolCall
from toolcalls.services.desk import approval_desk
from toolcalls.services.unit import Step
from toolcalls.states import (
    CALL_TRANSITIONS,
    OPERATION_MAY_WAIT,
    OPERATION_TERMINAL,
    OPERATION_TRANSITIONS,
    AuditKind,
    OperationState,
    check_transition,
)

log = logging.getLogger("callgate.transitions")

#: The characters of a reason ``terminal_reason`` holds: a person's whole, after its code.
_TERMINAL_REASON = Operation._meta.get_field("terminal_reason").max_length

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


class OperationEnded(CallgateError):
    """An action on an operation in a final state, where nothing more happens to it."""

    default_code = "already_ended"


def operation_refuse_ended(operation: Operation) -> None:
    """Raise :class:`OperationEnded` (``already_ended``) when ``operation`` has ended: the one
    refusal of cancelling, extending and stopping it then, whatever each needs otherwise."""
    if operation.state in OPERATION_TERMINAL:
        raise OperationEnded(message=f"the operation already ended ({operation.state})")


def operation_transition(
    step: Step,
    *,
    to_state: str,
    actor: Actor,
    reason: str = "",
    details: Mapping[str, Any] | None = None,
) -> None:
    """Move the step's operation to ``to_state``; raises ``IllegalTransition`` if the table
    forbids it. ``reason`` (for ESCALATED and failure states) is stored as ``terminal_reason``,
    and cleared when an escalated operation resumes (the audit trail keeps it). Ending it (a
    final state) from a state where a call may wait for a person (``OPERATION_MAY_WAIT``) has
    the approvals desk supersede its pending approvals in the step."""
    operation = step.operation
    from_state = operation.state
    check_transition(OPERATION_TRANSITIONS, "operation", from_state, to_state)
    operation.state = to_state
    step.change(operation, "state")
    if to_state in _REASON_STATES or operation.terminal_reason:
        operation.terminal_reason = reason[:_TERMINAL_REASON] if to_state in _REASON_STATES else ""
        step.change(operation, "terminal_reason")
    info = {**(details or {}), **({"reason": reason} if reason else {})}
    step.audit(
        kind=AuditKind.OPERATION_TRANSITION,
        actor=actor,
        from_state=from_state,
        to_state=to_state,
        details=info,
    )
    _log(operation=operation, call=None, from_state=from_state, to_state=to_state, details=info)
    if to_state in OPERATION_TERMINAL and from_state in OPERATION_MAY_WAIT:
        # In the same transaction: an approval is never decidable after its operation ended.
        approval_desk().supersede(step, ended=to_state)


def call_transition(
    step: Step,
    call: ToolCall,
    *,
    to_state: str,
    actor: Actor,
    details: Mapping[str, Any] | None = None,
    approval_ref: str = "",
) -> None:
    """Move ``call`` (held by ``step``) to ``to_state``; raises ``IllegalTransition``."""
    from_state = call.state
    check_transition(CALL_TRANSITIONS, "call", from_state, to_state)
    call.state = to_state
    step.change(call, "state")
    info = {
        "provider_call_id": call.provider_call_id,
        "tool": call.tool_name,
        "arguments_sha256": call.arguments_sha256,
        "attempt": call.attempt,
        **(details or {}),
    }
    step.audit(
        kind=AuditKind.CALL_TRANSITION,
        actor=actor,
        call=call,
        approval_ref=approval_ref,
        from_state=from_state,
        to_state=to_state,
        details=info,
    )
    _log(
        operation=step.operation, call=call, from_state=from_state, to_state=to_state, details=info
    )


def row_transition(
    step: Step,
    row: models.Model,
    *,
    table: Mapping[str, frozenset[str]],
    kind: str,
    audit_kind: AuditKind,
    to_state: str,
    actor: Actor,
    approval_ref: str = "",
    details: Mapping[str, Any] | None = None,
) -> None:
    """Transition another stateful row of the step's operation (an approval) through its
    ``table``; ``kind`` names the row in an ``IllegalTransition``."""
    from_state = row.state  # type: ignore[attr-defined]
    check_transition(dict(table), kind, from_state, to_state)
    row.state = to_state  # type: ignore[attr-defined]
    step.change(row, "state")
    step.audit(
        kind=audit_kind,
        actor=actor,
        approval_ref=approval_ref,
        from_state=from_state,
        to_state=to_state,
        details=details,
    )
    _log(
        operation=step.operation,
        call=None,
        from_state=from_state,
        to_state=to_state,
        details=details,
    )


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
        "provider_call_id": call.provider_call_id if call else None,
        "tool": call.tool_name if call else None,
        "arguments_sha256": call.arguments_sha256 if call else None,
        "attempt": call.attempt if call else None,
        "outcome": (details or {}).get("outcome"),
    }
    text = " ".join(f"{key}={value}" for key, value in fields.items() if value not in (None, ""))
    log.info("transition %s", text, extra=fields)
