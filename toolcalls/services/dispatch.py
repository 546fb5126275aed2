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
from toolcalls.services.validation import Verdict, call_check
from toolcalls.states import CallState

ACTOR = "engine"


def call_set_dispatch(
    *, operation: Operation, turn: ModelTurn, calls: Sequence[ProposedCall]
) -> None:
    """Create one :class:`ToolCall` per proposed call of ``turn`` and decide each one.

    The caller holds the operation row lock and has moved the operation to VALIDATING; this
    leaves it in EXECUTING, WAITING_APPROVAL or RESULTS_READY via ``call_set_settle``. Executable
    calls are queued after commit; none runs inside this transaction.
    """
    rows = ToolCall.objects.bulk_create(
        [
            ToolCall(
                operation=operation,
                turn=turn,
                position=position,
                response_id=turn.response_id,
                call_id=proposed.call_id,
                call_id_synthesized=proposed.synthesized,
                item_id=proposed.item_id or "",
                tool_name=proposed.name,
                raw_arguments=proposed.raw_arguments,
                arguments=proposed.arguments,
            )
            for position, proposed in enumerate(calls)
        ]
    )
    operation.tool_call_count += len(rows)
    operation.save(update_fields=["tool_call_count", "updated_at"])
    for row, proposed in zip(rows, calls, strict=True):
        verdict = call_check(
            operation=operation,
            tool_name=proposed.name,
            arguments=proposed.arguments,
            arguments_error=proposed.arguments_error,
        )
        _record_verdict(row, verdict)
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
        _decide(operation, row, verdict)
    call_set_settle(operation=operation, turn_id=turn.pk, actor=ACTOR)


def _record_verdict(call: ToolCall, verdict: Verdict) -> None:
    call.arguments_sha256 = verdict.arguments_sha256
    call.schema_version = verdict.spec.schema_version if verdict.spec else ""
    call.save(update_fields=["arguments_sha256", "schema_version", "updated_at"])


def _decide(operation: Operation, call: ToolCall, verdict: Verdict) -> None:
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
            canonical_arguments=verdict.canonical_arguments,
            reason=verdict.approval_reason,
        )
    else:
        enqueue_execute(call_pk=call.pk)
