"""Reads for the console: always scoped to the tenants the user belongs to."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from approvals.models import ApprovalRequest
from toolcalls.models import ToolCall
from toolcalls.states import ApprovalState

#: The header shows "1000+" beyond this, so the count never scans a big table.
PENDING_COUNT_CAP = 1000


def approvals_visible(*, user: User) -> QuerySet[ApprovalRequest]:
    """Every approval of the user's tenants."""
    return ApprovalRequest.objects.filter(tenant__members=user)


def approvals_pending(*, user: User) -> QuerySet[ApprovalRequest]:
    """Pending approvals of the user's tenants, soonest expiry first, with what the queue shows."""
    return (
        approvals_visible(user=user)
        .filter(state=ApprovalState.PENDING)
        .select_related("tenant", "requested_by", "operation", "call")
        .order_by("expires_at", "pk")
    )


def approvals_pending_count(*, user: User) -> int:
    """Pending approvals of the user's tenants, counted up to :data:`PENDING_COUNT_CAP`."""
    capped = approvals_visible(user=user).filter(state=ApprovalState.PENDING)[:PENDING_COUNT_CAP]
    return capped.count()


def approval_get(*, user: User, public_id: str) -> ApprovalRequest:
    """One approval by public ID; raises ``ApprovalRequest.DoesNotExist`` for other tenants'."""
    return (
        approvals_visible(user=user)
        .select_related("tenant", "requested_by", "decided_by", "operation", "call__turn")
        .get(public_id=public_id)
    )


def approval_siblings(*, approval: ApprovalRequest) -> QuerySet[ToolCall]:
    """The other calls of the same call set (same model reply)."""
    return (
        ToolCall.objects.filter(turn_id=approval.call.turn_id)
        .exclude(pk=approval.call_id)
        .order_by("position")
    )


def approval_model_said(*, approval: ApprovalRequest) -> str:
    """The model's latest visible text up to the reply that proposed the call ("" if none)."""
    text = (
        approval.operation.turns.filter(index__lte=approval.call.turn.index)
        .exclude(text="")
        .order_by("-index")
        .values_list("text", flat=True)
        .first()
    )
    return text or ""
