"""Escalation: a guard or an unknown outcome hands the operation to a human, who extends its
budget (it resumes where it stopped) or stops it (STOPPED)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolcalls.errors import CallgateError
from toolcalls.guards import BudgetError, budgets_for, turn_trip
from toolcalls.models import Operation
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.transitions import operation_transition
from toolcalls.states import OperationState

#: Where an escalated operation may resume on its own (a budget extension).
RESUMABLE = (OperationState.RESULTS_READY, OperationState.MODEL_REQUESTED)


class EscalationError(CallgateError):
    """An extension or stop that cannot be made; ``code`` is machine-readable."""


def operation_escalate(*, operation: Operation, reason: str, actor: str, **details: Any) -> None:
    """Move the locked ``operation`` to ESCALATED, remembering where it would go on."""
    operation.resume_state = operation.state
    operation.guard_tripped = ""
    operation.lease_token, operation.lease_expires_at = "", None
    operation_transition(
        operation=operation,
        to_state=OperationState.ESCALATED,
        actor=actor,
        reason=reason,
        details=details,
        update_fields=["resume_state", "guard_tripped", "lease_token", "lease_expires_at"],
    )


def _locked_escalated(operation_pk: int) -> Operation:
    operation = Operation.objects.select_for_update().get(pk=operation_pk)
    if operation.state != OperationState.ESCALATED:
        raise EscalationError("not_escalated", f"the operation is {operation.state}")
    return operation


def operation_extend(
    *, operation_pk: int, actor: str, budgets: Mapping[str, Any], note: str = ""
) -> Operation:
    """Raise budgets (within ``CALLGATE_GUARD_LIMITS``) and resume where the operation stopped.

    ``budgets`` maps guard names to new limits (may be empty to just continue after a
    no-progress or tool-call trip; the no-progress counter restarts). Raises
    :class:`EscalationError` (``not_escalated``, ``needs_resolution`` for an unknown outcome,
    ``bad_budget``, ``still_over`` when the new limits would trip again at once).
    """
    with transaction.atomic(durable=True):
        operation = _locked_escalated(operation_pk)
        if operation.resume_state not in RESUMABLE:
            raise EscalationError(
                "needs_resolution", "a call's outcome is unknown: resolve the call, not the budget"
            )
        try:
            merged = budgets_for({**operation.budgets, **budgets})
        except BudgetError as exc:
            raise EscalationError("bad_budget", str(exc)) from None
        operation.budgets = merged
        operation.no_progress_turns = 0
        operation.deadline_at = operation.created_at + timedelta(seconds=merged["deadline_s"])
        trip = turn_trip(operation, now=timezone.now())
        if trip:
            raise EscalationError("still_over", f"still over a budget: {trip.reason}")
        operation_transition(
            operation=operation,
            to_state=operation.resume_state,
            actor=actor,
            details={"extended": dict(budgets), "note": note},
            update_fields=["budgets", "no_progress_turns", "deadline_at"],
        )
        enqueue_turn(operation_pk=operation.pk)
    return operation


def operation_stop(*, operation_pk: int, actor: str, reason: str) -> Operation:
    """End an escalated operation for good (STOPPED). Raises :class:`EscalationError`."""
    if not reason.strip():
        raise EscalationError("reason_required", "say why the operation is stopped")
    with transaction.atomic(durable=True):
        operation = _locked_escalated(operation_pk)
        operation_transition(
            operation=operation,
            to_state=OperationState.STOPPED,
            actor=actor,
            reason=f"STOPPED: {reason.strip()}",
        )
    return operation
