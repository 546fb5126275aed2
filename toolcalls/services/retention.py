"""Retention: the model traffic of long-ended operations goes, the record of what happened stays.

What is pruned: each turn's request (frame and items) and wire reply, and the operation's
conversation. What stays: the operation, its turns' outcomes, usage and response IDs, every call
with its arguments, result and digests, idempotency records, approvals, and the audit chain,
which still verifies (``manage.py verify_audit_chain``): no audit event holds a body.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from toolcalls.actors import Actor
from toolcalls.models import ModelTurn, Operation
from toolcalls.services.unit import operation_step
from toolcalls.states import OPERATION_TERMINAL, AuditKind


def bodies_prunable(*, ended_before: datetime) -> list[int]:
    """Primary keys of the operations that ended (last changed) before ``ended_before`` and
    still hold their bodies, oldest first."""
    rows = Operation.objects.filter(
        state__in=OPERATION_TERMINAL, updated_at__lt=ended_before, bodies_pruned_at__isnull=True
    )
    return list(rows.order_by("updated_at").values_list("pk", flat=True))


def bodies_prune(*, operation_pk: int, ended_before: datetime, actor: Actor) -> bool:
    """Prune one operation's bodies (see the module docstring) and audit it; ``False`` when it
    no longer qualifies (it was pruned, or is not an ended operation older than
    ``ended_before``)."""
    still = Q(state__in=OPERATION_TERMINAL, updated_at__lt=ended_before)
    with operation_step(operation_pk, where=still & Q(bodies_pruned_at__isnull=True)) as step:
        if step is None:
            return False
        operation = step.operation
        turns = ModelTurn.objects.filter(operation=operation)
        count = turns.update(request_frame={}, request_items=[], reply=None)
        operation.conversation = []
        operation.bodies_pruned_at = timezone.now()
        step.change(operation, "conversation", "bodies_pruned_at")
        step.audit(
            kind=AuditKind.OPERATION_BODIES_PRUNED,
            actor=actor,
            details={"turns": count},
        )
    return True
