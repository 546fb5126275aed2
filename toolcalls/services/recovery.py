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

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.celery import app
from toolcalls import registry
from toolcalls.models import Operation, ToolCall
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_execute, enqueue_reconcile, enqueue_turn
from toolcalls.services.execution import settle_lost_call
from toolcalls.services.locking import call_lock
from toolcalls.states import CallState, OperationState

ACTOR = "system:recovery"
log = logging.getLogger("callgate.recovery")
_RUNNABLE = (OperationState.PENDING, OperationState.MODEL_REQUESTED, OperationState.RESULTS_READY)
#: Rows looked at per sweep step; the next sweep takes the rest.
BATCH = 500


def recovery_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """One pass over everything that may be stranded; returns how many of each it handled."""
    now = now or timezone.now()
    grace = now - timedelta(seconds=settings.CALLGATE_RECOVERY_GRACE_S)
    counts = {
        "turn_leases": _each(_expired_turns(now), _requeue_turn, "recovery.turn_lease_expired"),
        "call_leases": _each(_expired_calls(now), _reap_call, ""),
        "operations": _each(_stranded_operations(now, grace), _requeue_turn, "recovery.requeued"),
        "calls": _each(_stranded_calls(grace), _requeue_call, ""),
    }
    if any(counts.values()):
        log.info("recovery sweep %s", " ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def _each(pks: list[int], action: Callable[[int, str], bool], kind: str) -> int:
    return sum(1 for pk in pks if action(pk, kind))


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
    handed_over = Q(state=CallState.PROPOSED, queued_at__lt=grace)
    approved = Q(state=CallState.APPROVED, updated_at__lt=grace)
    unreconciled = Q(state=CallState.UNKNOWN_OUTCOME, updated_at__lt=grace) & ~Q(
        operation__state=OperationState.ESCALATED
    )
    rows = ToolCall.objects.filter(handed_over | approved | unreconciled).exclude(
        operation__state__in=(OperationState.CANCELLED, OperationState.STOPPED)
    )
    return list(rows.values_list("pk", flat=True)[:BATCH])


def _requeue_turn(operation_pk: int, kind: str) -> bool:
    with transaction.atomic(durable=True):
        operation = Operation.objects.select_for_update().filter(pk=operation_pk).first()
        if operation is None or operation.state not in _RUNNABLE:
            return False
        audit_record(
            operation=operation,
            kind=kind,
            actor=ACTOR,
            details={"state": operation.state, "turn": operation.turn_count},
        )
        enqueue_turn(operation_pk=operation.pk)
    return True


def _reap_call(call_pk: int, _kind: str) -> bool:
    """A call whose lease expired mid-run: fence the old worker out, then settle it as lost."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        operation, call = call_lock(call_pk)
        if (
            call.state != CallState.EXECUTING
            or not call.lease_expires_at
            or call.lease_expires_at >= now
        ):
            return False
        spec = registry.get(call.tool_name)
        audit_record(
            operation=operation,
            kind="recovery.call_lease_expired",
            actor=ACTOR,
            call=call,
            details={"attempt": call.attempt, "tool": call.tool_name},
        )
        settle_lost_call(
            operation=operation,
            call=call,
            spec=spec,
            kind="lease_expired",
            detail="the worker running it stopped answering",
        )
    return True


def _requeue_call(call_pk: int, _kind: str) -> bool:
    with transaction.atomic(durable=True):
        operation, call = call_lock(call_pk)
        if call.state == CallState.PROPOSED and call.queued_at:
            call.queued_at = timezone.now()
            enqueue_execute(call_pk=call.pk)
        elif call.state == CallState.APPROVED:
            # The approval app's resume task revalidates before running; reached by name.
            transaction.on_commit(
                lambda: app.tasks["approvals.resume_operation"].apply_async(args=[call_pk]),
                robust=True,
            )
        elif call.state == CallState.UNKNOWN_OUTCOME:
            enqueue_reconcile(call_pk=call.pk)
        else:
            return False
        call.save(update_fields=["queued_at", "updated_at"])  # the next sweep waits again
        audit_record(
            operation=operation,
            kind="recovery.call_requeued",
            actor=ACTOR,
            call=call,
            details={"state": call.state, "tool": call.tool_name},
        )
    return True
