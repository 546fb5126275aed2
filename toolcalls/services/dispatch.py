"""Dispatch a reply's call set: store every call, run the validation chain, then reject, park
for approval or queue for execution — all inside the transaction that records the turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.utils import timezone

from approvals.services import approval_request_open
from providers.base import ProposedCall
from toolcalls import guards
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_finish, call_set_settle
from toolcalls.services.scheduling import calls_ready
from toolcalls.services.transitions import call_transition
from toolcalls.services.validation import Verdict, arguments_normalize, call_check
from toolcalls.states import CallState
from toolcalls.storage import storable

ACTOR = "engine"


def call_set_dispatch(
    *,
    operation: Operation,
    turn: ModelTurn,
    calls: Sequence[ProposedCall],
    unsaved_fields: Sequence[str] = (),
) -> None:
    """Create one :class:`ToolCall` per proposed call of ``turn`` and decide each one.

    The caller holds the operation row lock and has moved the operation to VALIDATING, leaving
    ``unsaved_fields`` of the operation for this to save; this leaves it in EXECUTING,
    WAITING_APPROVAL or RESULTS_READY via ``call_set_settle``, saving the operation row once.
    Executable calls are queued after commit; none runs inside this transaction.
    """
    earlier = dict(operation.calls_per_tool)  # calls per tool before this reply
    rows, verdicts, canonical = [], [], []
    for position, proposed in enumerate(calls):
        arguments = arguments_normalize(
            arguments=proposed.arguments,
            arguments_error=proposed.arguments_error,
            raw_arguments=proposed.raw_arguments,
        )
        verdict = call_check(operation=operation, tool_name=proposed.name, arguments=arguments)
        row = ToolCall(
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
        rows.append(row)
        verdicts.append(_guarded(operation, row, verdict, earlier))
        canonical.append(arguments.canonical)
    # The calls that will stay PROPOSED and fit the parallelism budget are handed to workers
    # by this insert (``queued_at``) rather than by an update after it; they are enqueued once
    # the set is settled, after commit.
    runnable = [row for row, v in zip(rows, verdicts, strict=True) if _runnable(v)]
    start = calls_ready(operation=operation, calls=runnable)
    now = timezone.now()
    for row in start:
        row.queued_at = now
    ToolCall.objects.bulk_create(rows)
    for row, verdict, text in zip(rows, verdicts, canonical, strict=True):
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
            save_operation=False,  # saved when the set settles
        )
        _decide(operation, row, verdict, text)
    call_set_settle(
        operation=operation,
        turn_id=turn.pk,
        actor=ACTOR,
        calls=rows,
        update_fields=[
            *unsaved_fields,
            "tool_call_count",
            "calls_per_tool",
            "guard_tripped",
            "audit_seq",
            "audit_head",
        ],
    )
    for row in start:
        enqueue_execute(call_pk=row.pk)


def _runnable(verdict: Verdict) -> bool:
    """Whether the call stays PROPOSED after :func:`_decide` (neither rejected nor parked)."""
    return not verdict.rejected and verdict.approval_reason is None


def _guarded(
    operation: Operation, call: ToolCall, verdict: Verdict, earlier: Mapping[str, Any]
) -> Verdict:
    """Count the call against the budgets and apply the guards (after the validation chain,
    before parking or running: DESIGN.md §5). A tripped budget or a repeat-of-a-repeat also
    marks the operation to escalate once this call set has its results. ``earlier``: calls per
    tool before this reply (a tool never called before cannot be repeated)."""
    budget = guards.call_budget_problem(operation, call.tool_name)
    operation.tool_call_count += 1
    per_tool = operation.calls_per_tool
    per_tool[call.tool_name] = int(per_tool.get(call.tool_name, 0)) + 1
    if verdict.rejected:
        return verdict
    if budget:
        operation.guard_tripped = operation.guard_tripped or budget.reason
        message = "The tool-call budget of this task is used up; a person has been asked to look."
        return replace(verdict, error_code=ErrorCode.BUDGET_EXCEEDED, error_message=message)
    repeat = guards.repeat_trip(operation, call) if int(earlier.get(call.tool_name, 0)) else None
    if repeat:
        if repeat.guard == "repeat_escalate":
            operation.guard_tripped = operation.guard_tripped or repeat.reason
        message = (
            "You already made this exact call and nothing new has happened since; repeating it "
            "will not change the result. Use the earlier result or try something different."
        )
        return replace(verdict, error_code=ErrorCode.NO_PROGRESS, error_message=message)
    return verdict


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
    # Otherwise the call stays PROPOSED: ready, handed to a worker by call_set_start_ready.
