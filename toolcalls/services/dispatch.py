"""Dispatch a reply's call set: store every call, run the validation chain, then reject, park
for approval or queue for execution — all inside the transaction that records the turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.utils import timezone

from providers.base import ProposedCall
from toolcalls import guards
from toolcalls.actors import ENGINE
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.services.approvals import call_park
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_result, call_set_settle
from toolcalls.services.scheduling import calls_ready
from toolcalls.services.unit import Step
from toolcalls.services.validation import Verdict, arguments_normalize, call_check
from toolcalls.services.writes import rows_insert
from toolcalls.states import AuditKind, CallState
from toolcalls.storage import storable


def call_set_dispatch(step: Step, *, turn: ModelTurn, calls: Sequence[ProposedCall]) -> None:
    """Create one :class:`ToolCall` per proposed call of ``turn`` and decide each one.

    The step's operation is in VALIDATING; this leaves it in EXECUTING, WAITING_APPROVAL or
    RESULTS_READY via ``call_set_settle``. Executable calls are queued after commit; none runs
    inside this transaction.
    """
    operation = step.operation
    earlier = dict(operation.calls_per_tool)  # calls per tool before this reply
    decided = [_proposed(operation, turn, position, call) for position, call in enumerate(calls)]
    rows = [row for row, _, _ in decided]
    verdicts = _one_approval_per_intent(
        rows, [_guarded(step, row, verdict, earlier) for row, verdict, _ in decided]
    )
    step.change(operation, "tool_call_count", "calls_per_tool", "guard_tripped")
    # The calls that will stay PROPOSED and fit the parallelism budget are handed to workers
    # by this insert (``queued_at``) rather than by an update after it; they are enqueued once
    # the set is settled, after commit.
    runnable = [row for row, v in zip(rows, verdicts, strict=True) if _runnable(v)]
    start = calls_ready(operation=operation, calls=runnable)
    now = timezone.now()
    for row in start:
        row.queued_at = now
    _insert(step, rows)
    step.hold(turn.pk, rows)
    for (row, _, text), verdict in zip(decided, verdicts, strict=True):
        _audit_proposed(step, row)
        _decide(step, row, verdict, text)
    call_set_settle(step, turn_id=turn.pk, actor=ENGINE)
    for row in start:
        enqueue_execute(step, call_pk=row.pk)


def _insert(step: Step, rows: list[ToolCall]) -> None:
    """Insert the set's rows: with the step's other writes, under the ids the turn's insert
    reserved (PostgreSQL; a parked call's approval, inserted with them, names its row by that
    id); else now."""
    ids = step.reserved_call_ids(len(rows))
    if not ids:
        rows_insert(rows)
        return
    for row, pk in zip(rows, ids, strict=True):
        row.pk = pk
    step.insert(rows)


def _parked(verdict: Verdict) -> bool:
    return not verdict.rejected and verdict.approval_reason is not None


def _proposed(
    operation: Operation, turn: ModelTurn, position: int, proposed: ProposedCall
) -> tuple[ToolCall, Verdict, str]:
    """The unsaved row of one proposed call, its verdict and its canonical arguments."""
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
        provider_call_id=storable(proposed.call_id),
        provider_call_id_synthesized=proposed.synthesized,
        item_id=storable(proposed.item_id or ""),
        tool_name=storable(proposed.name),
        raw_arguments=storable(proposed.raw_arguments),
        arguments=arguments.value,
        arguments_sha256=arguments.sha256,
        schema_version=verdict.spec.schema_version if verdict.spec else "",
    )
    return row, verdict, arguments.canonical


def _audit_proposed(step: Step, row: ToolCall) -> None:
    step.audit(
        kind=AuditKind.CALL_PROPOSED,
        actor=ENGINE,
        call=row,
        to_state=CallState.PROPOSED,
        details={
            "provider_call_id": row.provider_call_id,
            "tool": row.tool_name,
            "arguments_sha256": row.arguments_sha256,
            "position": row.position,
        },
    )


def _runnable(verdict: Verdict) -> bool:
    """Whether the call stays PROPOSED after :func:`_decide` (neither rejected nor parked)."""
    return not verdict.rejected and not _parked(verdict)


def _guarded(step: Step, call: ToolCall, verdict: Verdict, earlier: Mapping[str, Any]) -> Verdict:
    """Count the call against the budgets and apply the guards (after the validation chain,
    before parking or running: docs/design.md §5). A tripped budget or a repeat-of-a-repeat also
    marks the operation to escalate once this call set has its results. ``earlier``: calls per
    tool before this reply (a tool never called before cannot be repeated)."""
    operation = step.operation
    tool_limit = verdict.spec.max_calls if verdict.spec else None
    budget = guards.call_budget_problem(operation, call.tool_name, tool_limit=tool_limit)
    operation.tool_call_count += 1
    per_tool = operation.calls_per_tool
    per_tool[call.tool_name] = int(per_tool.get(call.tool_name, 0)) + 1
    if verdict.rejected:
        return verdict
    if budget:
        operation.guard_tripped = operation.guard_tripped or budget.reason
        message = "The tool-call budget of this task is used up; a person has been asked to look."
        return replace(verdict, error_code=ErrorCode.BUDGET_EXCEEDED, error_message=message)
    called = int(earlier.get(call.tool_name, 0))
    repeat = guards.repeat_trip(step.history(), call) if called else None
    if repeat:
        if repeat.guard == "repeat_escalate":
            operation.guard_tripped = operation.guard_tripped or repeat.reason
        message = (
            "You already made this exact call and nothing new has happened since; repeating it "
            "will not change the result. Use the earlier result or try something different."
        )
        return replace(verdict, error_code=ErrorCode.NO_PROGRESS, error_message=message)
    return verdict


def _one_approval_per_intent(calls: list[ToolCall], verdicts: list[Verdict]) -> list[Verdict]:
    """Identical calls (same tool, same canonical arguments) of one reply that need approval are
    one intent: the first is parked and decided once; each later copy is answered at once with
    ``DUPLICATE_CALL`` naming the first, so an operator never decides the same thing twice and
    the effect runs at most once whatever the decision."""
    first: dict[tuple[str, str], ToolCall] = {}
    out = []
    for call, verdict in zip(calls, verdicts, strict=True):
        if verdict.rejected or verdict.approval_reason is None:
            out.append(verdict)
            continue
        original = first.setdefault((call.tool_name, call.arguments_sha256), call)
        if original is not call:
            message = (
                f"This call repeats call {original.provider_call_id} of the same reply exactly; it "
                f"is decided and run once, as {original.provider_call_id}. Use that call's result."
            )
            code = ErrorCode.DUPLICATE_CALL
            verdict = replace(verdict, error_code=code, error_message=message, approval_reason=None)
        out.append(verdict)
    return out


def _decide(step: Step, call: ToolCall, verdict: Verdict, canonical: str) -> None:
    if verdict.rejected:
        call_result(
            step,
            call,
            to_state=CallState.REJECTED,
            model_result=error(verdict.error_code, verdict.error_message),
            actor=ENGINE,
        )
    elif verdict.approval_reason is not None:
        assert verdict.spec is not None
        call_park(
            step,
            call,
            spec=verdict.spec,
            canonical_arguments=canonical,
            reason=verdict.approval_reason,
        )
    # Otherwise the call stays PROPOSED: ready, handed to a worker when there is room.
