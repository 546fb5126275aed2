"""Dispatch a reply's call set: store every call, run the validation chain, then reject, park
for approval or queue for execution — all inside the transaction that records the turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from approvals.services import approval_request_open
from providers.base import ProposedCall
from toolcalls.envelopes import error
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_finish, call_set_settle
from toolcalls.services.transitions import call_transition
from toolcalls.services.validation import Verdict, arguments_normalize, call_check
from toolcalls.states import CallState
from toolcalls.storage import storable

ACTOR = "engine"


def call_set_dispatch(
    *, operation: Operation, turn: ModelTurn, calls: Sequence[ProposedCall]
) -> None:
    """Create one :class:`ToolCall` per proposed call of ``turn`` and decide each one.

    The caller holds the operation row lock and has moved the operation to VALIDATING; this
    leaves it in EXECUTING, WAITING_APPROVAL or RESULTS_READY via ``call_set_settle``. Executable
    calls are queued after commit; none runs inside this transaction.
    """
    checked = []
    for proposed in calls:
        arguments = arguments_normalize(
            arguments=proposed.arguments,
            arguments_error=proposed.arguments_error,
            raw_arguments=proposed.raw_arguments,
        )
        verdict = call_check(operation=operation, tool_name=proposed.name, arguments=arguments)
        checked.append((proposed, arguments, verdict))
    rows = ToolCall.objects.bulk_create(
        [
            ToolCall(
                operation=operation,
                turn=turn,
                position=position,
                response_id=turn.response_id,
                call_id=storable(proposed.call_id),
                call_id_synthesized=proposed.synthesized,
                item_id=storable(proposed.item_id or ""),
                tool_name=storable(proposed.name),
                raw_arguments=storable(proposed.raw_arguments),
                arguments=arguments.value,
                arguments_sha256=arguments.sha256,
                schema_version=verdict.spec.schema_version if verdict.spec else "",
            )
            for position, (proposed, arguments, verdict) in enumerate(checked)
        ]
    )
    operation.tool_call_count += len(rows)
    operation.save(update_fields=["tool_call_count", "updated_at"])
    for row, (_, arguments, verdict) in zip(rows, checked, strict=True):
        audit_record(
            operation=operation,
            kind="call.proposed",
            actor=ACTOR,
            call=row,
            to_state=CallState.PROPOSED,
            details={
                "call_id": row.call_id,
                "tool": row.tool_name,
                "arguments_sha256": row.arguments_sha256,
                "position": row.position,
            },
        )
        _decide(operation, row, verdict, arguments.canonical)
    call_set_settle(operation=operation, turn_id=turn.pk, actor=ACTOR)


def _decide(operation: Operation, call: ToolCall, verdict: Verdict, canonical: str) -> None:
    if verdict.rejected:
        call_finish(
            operation=operation,
            call=call,
            to_state=CallState.REJECTED,
            model_result=error(verdict.error_code, verdict.error_message),
            actor=ACTOR,
        )
    elif verdict.approval_reason is not None:
        assert verdict.spec is not None
        call_transition(
            operation=operation,
            call=call,
            to_state=CallState.WAITING_APPROVAL,
            actor=ACTOR,
            details={"reason": verdict.approval_reason},
        )
        approval_request_open(
            operation=operation,
            call=call,
            spec=verdict.spec,
            canonical_arguments=canonical,
            reason=verdict.approval_reason,
        )
    else:
        enqueue_execute(call_pk=call.pk)
