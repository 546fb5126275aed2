"""Recovery: the database is the source of truth, the broker only carries wake-ups.

A periodic sweep (Celery beat, ``callgate.recovery_sweep``) finds work a dead or slow worker left
behind and work whose wake-up message was lost, and hands it out again:

- a claimed model turn whose lease expired is re-queued; the next claim takes a new lease token,
  so the old worker's late reply is refused (``turn.stale_reply_refused``);
- a call whose lease expired while it ran is settled as its handler's crash would be: a side
  effect's outcome is unknown (reconciler, else a human), a read-only call is retried; its lease
  token is cleared, so the old worker's late result is refused (``call.stale_result_refused``);
- operations and calls that are runnable but were not picked up for a while are re-queued.

Attempts are bounded where the work is claimed (turns in ``turns``, calls in ``execution``), so
work that kills its worker every time ends FAILED or ESCALATED instead of looping. Every
recovery action writes an audit event (``recovery.*``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from toolcalls import catalogue
from toolcalls.actors import RECOVERY
from toolcalls.models import Operation, ToolCall
from toolcalls.services.enqueue import (
    enqueue_execute,
    enqueue_reconcile,
    enqueue_resume,
    enqueue_turn,
)
from toolcalls.services.execution import settle_lost_call
from toolcalls.services.unit import call_step, lease_clear, lease_expired, operation_step
from toolcalls.states import OPERATION_TERMINAL, AuditKind, CallState, OperationState

log = logging.getLogger("callgate.recovery")
_RUNNABLE = (OperationState.PENDING, OperationState.MODEL_REQUESTED, OperationState.RESULTS_READY)
#: Rows looked at per sweep step; the next sweep takes the rest.
BATCH = 500


def recovery_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """One pass over everything that may be stranded; returns how many of each it handled."""
    now = now or timezone.now()
    grace = now - timedelta(seconds=settings.CALLGATE_RECOVERY_GRACE_S)
    turn_lease = AuditKind.RECOVERY_TURN_LEASE_EXPIRED
    counts = {
        "turn_leases": _each(_expired_turns(now), partial(_requeue_turn, kind=turn_lease)),
        "call_leases": _each(_expired_calls(now), _reap_call),
        "operations": _each(
            _stranded_operations(now, grace),
            partial(_requeue_turn, kind=AuditKind.RECOVERY_REQUEUED),
        ),
        "calls": _each(_stranded_calls(grace), _requeue_call),
    }
    if any(counts.values()):
        log.info("recovery sweep %s", " ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def _each(pks: list[int], action: Callable[[int], bool]) -> int:
    """How many of ``pks`` ``action`` handled. One that fails is logged and skipped (its step
    rolled back): a row that cannot be handled must not strand every row after it."""
    handled = 0
    for pk in pks:
        try:
            handled += action(pk)
        except Exception:
            log.exception("recovery sweep: row %s not handled", pk)
    return handled


def _expired_turns(now: datetime) -> list[int]:
    rows = Operation.objects.filter(state=OperationState.MODEL_REQUESTED, lease_expires_at__lt=now)
    return list(rows.values_list("pk", flat=True)[:BATCH])


def _stranded_operations(now: datetime, grace: datetime) -> list[int]:
    rows = Operation.objects.filter(
        state__in=_RUNNABLE, lease_expires_at__isnull=True, updated_at__lt=grace
    ).filter(Q(wake_at__isnull=True) | Q(wake_at__lt=grace))
    return list(rows.values_list("pk", flat=True)[:BATCH])


def _expired_calls(now: datetime) -> list[int]:
    rows = ToolCall.objects.filter(state=CallState.EXECUTING, lease_expires_at__lt=now)
    return list(rows.values_list("pk", flat=True)[:BATCH])


def _stranded_calls(grace: datetime) -> list[int]:
    """Calls handed to a worker that none took. Of an ended operation only a call queued to run
    again (``attempt`` > 0): its claim drops the retry and releases the key it may hold; the
    others wait for no worker (an unknown outcome there waits for a person)."""
    ended = Q(operation__state__in=OPERATION_TERMINAL)
    handed_over = Q(state=CallState.PROPOSED, queued_at__lt=grace) & (~ended | Q(attempt__gt=0))
    approved = Q(state=CallState.APPROVED, updated_at__lt=grace) & ~ended
    unreconciled = (
        Q(state=CallState.UNKNOWN_OUTCOME, updated_at__lt=grace)
        & ~ended
        & ~Q(operation__state=OperationState.ESCALATED)
    )
    rows = ToolCall.objects.filter(handed_over | approved | unreconciled)
    return list(rows.values_list("pk", flat=True)[:BATCH])


def _requeue_turn(operation_pk: int, *, kind: AuditKind) -> bool:
    with operation_step(operation_pk, where=Q(state__in=_RUNNABLE), related=()) as step:
        if step is None:
            return False
        operation = step.operation
        if kind == AuditKind.RECOVERY_TURN_LEASE_EXPIRED and not lease_expired(
            operation, timezone.now()
        ):
            return False  # claimed again since the sweep read it
        details = {"state": operation.state, "turn": operation.turn_count}
        step.audit(kind=kind, actor=RECOVERY, details=details)
        # Fence the dead claim now: its worker can record nothing, and the next sweep does not
        # take the same expired lease for a second one while the wake-up waits for a worker.
        lease_clear(step, operation)
        enqueue_turn(step, operation_pk=operation.pk)
    return True


def _reap_call(call_pk: int) -> bool:
    """A call whose lease expired mid-run: fence the old worker out, then settle it as lost."""
    now = timezone.now()
    with call_step(call_pk) as step:
        call = step.call
        if call.state != CallState.EXECUTING or not lease_expired(call, now):
            return False
        step.audit(
            kind=AuditKind.RECOVERY_CALL_LEASE_EXPIRED,
            actor=RECOVERY,
            call=call,
            details={"attempt": call.attempt, "tool": call.tool_name},
        )
        settle_lost_call(
            step,
            spec=catalogue.tool_spec(step.operation, call.tool_name),
            kind="lease_expired",
            detail="the worker running it stopped answering",
        )
    return True


def _requeue_call(call_pk: int) -> bool:
    with call_step(call_pk) as step:
        call = step.call
        if call.state == CallState.PROPOSED and call.queued_at:
            call.queued_at = timezone.now()
            enqueue_execute(step, call_pk=call.pk)
        elif call.state == CallState.APPROVED:
            enqueue_resume(step, call_pk=call.pk)  # resume revalidates before running
        elif call.state == CallState.UNKNOWN_OUTCOME:
            enqueue_reconcile(step, call_pk=call.pk)
        else:
            return False
        step.change(call, "queued_at")  # saved with ``updated_at``: the next sweep waits again
        step.audit(
            kind=AuditKind.RECOVERY_CALL_REQUEUED,
            actor=RECOVERY,
            call=call,
            details={"state": call.state, "tool": call.tool_name},
        )
    return True
