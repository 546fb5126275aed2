"""Escalation: a guard or an unknown outcome hands the operation to a human, who extends its
budget (it resumes where it stopped) or stops it (STOPPED)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.utils import timezone

from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.guards import BudgetError, budgets_for, tripped_guard, turn_trip
from toolcalls.models import Operation
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.transitions import operation_refuse_ended, operation_transition
from toolcalls.services.unit import Step, lease_clear, operation_step
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState
from toolcalls.text import visible

NO_PROGRESS = "max_no_progress_turns"
#: Where an escalated operation may resume on its own (a budget extension).
RESUMABLE = (OperationState.RESULTS_READY, OperationState.MODEL_REQUESTED)


class EscalationError(CallgateError):
    """An extension or stop that cannot be made; ``code`` is machine-readable."""


def operation_escalate(step: Step, *, reason: str, actor: Actor, **details: Any) -> None:
    """Move the step's operation to ESCALATED, remembering where it would go on."""
    operation = step.operation
    operation.resume_state = operation.state
    operation.guard_tripped = ""
    step.change(operation, "resume_state", "guard_tripped")
    lease_clear(step, operation)
    operation_transition(
        step, to_state=OperationState.ESCALATED, actor=actor, reason=reason, details=details
    )


def operation_escalate_unknown(step: Step, *, reason: str, actor: Actor, call: str) -> None:
    """Hand the step's operation to a human for call ``call``'s unknown outcome (its public ID),
    unless no one needs handing it: the operation ended (cancelled or stopped while the call
    ran: the call stays UNKNOWN_OUTCOME, its key held, until someone records its outcome, as
    the operation's page and ``calls/{call_id}/resolve`` allow), or it is escalated already
    (another call of the set: the recovery sweep asks again for this one once it resumes)."""
    state = step.operation.state
    if state not in OPERATION_TERMINAL and state != OperationState.ESCALATED:
        operation_escalate(step, reason=reason, actor=actor, call=call)


@contextmanager
def _escalated_step(operation_pk: int) -> Iterator[Step]:
    with operation_step(operation_pk, related=()) as step:
        if step is None:
            raise Operation.DoesNotExist(f"no operation {operation_pk}")
        operation_refuse_ended(step.operation)
        if step.operation.state != OperationState.ESCALATED:
            raise EscalationError("not_escalated", f"the operation is {step.operation.state}")
        yield step


def operation_extend(
    *, operation_pk: int, actor: Actor, budgets: Mapping[str, Any], note: str = ""
) -> Operation:
    """Raise budgets (within ``CALLGATE_GUARD_LIMITS``) and resume where the operation stopped.

    ``budgets`` maps guard names to new limits (may be empty to just continue after a
    no-progress or tool-call trip; the no-progress counter restarts). Raises
    :class:`~toolcalls.services.transitions.OperationEnded` (``already_ended``) once the
    operation ended, else :class:`EscalationError` (``not_escalated`` while it runs unescalated,
    ``needs_resolution`` for an unknown outcome,
    ``bad_budget``, also for a budget given below the operation's, ``still_over`` when the new
    limits would trip again at once).
    """
    with _escalated_step(operation_pk) as step:
        operation = step.operation
        if operation.resume_state not in RESUMABLE:
            raise _needs_resolution(operation)
        try:
            merged = budgets_for({**operation.budgets, **budgets})
            _refuse_lowered(operation, budgets)
        except BudgetError as exc:
            raise EscalationError("bad_budget", exc.message, details=exc.details) from None
        _refuse_unraised(operation, merged)
        operation.budgets = merged
        operation.no_progress_turns = 0
        operation.deadline_at = operation.created_at + timedelta(seconds=merged["deadline_s"])
        step.change(operation, "budgets", "no_progress_turns", "deadline_at")
        trip = turn_trip(operation, now=timezone.now())
        if trip:
            raise EscalationError("still_over", f"still over a budget: {trip.reason}")
        details = {"extended": dict(budgets), "note": note}
        operation_transition(step, to_state=operation.resume_state, actor=actor, details=details)
        enqueue_turn(step, operation_pk=operation.pk)
    return operation


def _needs_resolution(operation: Operation) -> EscalationError:
    """``needs_resolution``, naming the calls whose outcome a person must record first
    (``details["calls"]``: their IDs) and where: the call's ``resolve`` (the API's
    ``POST /api/v1/operations/{id}/calls/{call}/resolve``, the console's operation page)."""
    lost = operation.calls.filter(state=CallState.UNKNOWN_OUTCOME).order_by("pk")
    calls = list(lost.values_list("public_id", "tool_name"))
    named = ", ".join(f"{tool} ({public_id})" for public_id, tool in calls) or "a call"
    resolve = ", ".join(f"…/calls/{public_id}/resolve" for public_id, _ in calls)
    where = f" ({resolve})" if resolve else ""
    message = (
        f"the outcome of {named} is unknown: resolve the call{where} as applied, not_applied "
        "or unknown, not the budget"
    )
    return EscalationError(
        "needs_resolution", message, details={"calls": [public_id for public_id, _ in calls]}
    )


def _refuse_lowered(operation: Operation, budgets: Mapping[str, Any]) -> None:
    """An extension raises budgets: one given below what the operation has would trip it again
    mid-run (or end it at once, for ``deadline_s``). Raises :class:`BudgetError`."""
    for name, value in budgets.items():
        if value < operation.budgets[name]:
            current = operation.budgets[name]
            raise BudgetError(name, f"an extension raises budgets: {name} is {current} already")


def _refuse_unraised(operation: Operation, merged: Mapping[str, Any]) -> None:
    """An extension must raise the budget that tripped: otherwise the operation would spend a
    turn and escalate again at once. A no-progress trip is the exception: resuming restarts its
    counter, which is the change."""
    guard = tripped_guard(operation.terminal_reason)
    if guard and guard != NO_PROGRESS and merged[guard] <= operation.budgets[guard]:
        raise EscalationError(
            "still_over", f"still over a budget: {operation.terminal_reason} (raise {guard})"
        )


def operation_stop(*, operation_pk: int, actor: Actor, reason: str) -> Operation:
    """End an escalated operation for good (STOPPED). Raises
    :class:`~toolcalls.services.transitions.OperationEnded` (``already_ended``) once it ended,
    whatever ``reason`` is, else :class:`EscalationError` (``not_escalated``, then
    ``reason_required`` for a reason without a visible character)."""
    with _escalated_step(operation_pk) as step:
        # Checked under the lock, after the state: an operation that ended stays
        # already_ended whatever the request says, so a retry with a blank reason learns that.
        if not visible(reason):
            raise EscalationError("reason_required", "say why the operation is stopped")
        reason = f"STOPPED: {reason.strip()}"
        operation_transition(step, to_state=OperationState.STOPPED, actor=actor, reason=reason)
    return step.operation
