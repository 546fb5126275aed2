"""Reads for the console: always scoped to the tenants the user belongs to."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals.models import DECIDABLE, ApprovalRequest
from toolcalls import registry
from toolcalls.diffs import arguments_diff
from toolcalls.models import Tenant, ToolCall
from toolcalls.registry import ToolError
from toolcalls.services.results import tool_context

#: The header shows "1000+" beyond this, so the count never scans a big table.
PENDING_COUNT_CAP = 1000
#: Approvals per queue page.
PAGE_SIZE = 50
#: "Expiring soon" means within this long.
EXPIRING_SOON = timedelta(minutes=15)


def user_tenant_ids(*, user: User) -> list[int]:
    """The tenants the user belongs to (one small query; lets queue queries use their index)."""
    return list(Tenant.objects.filter(members=user).values_list("pk", flat=True))


def approvals_visible(*, user: User) -> QuerySet[ApprovalRequest]:
    """Every approval of the user's tenants."""
    return ApprovalRequest.objects.filter(tenant_id__in=user_tenant_ids(user=user))


def _pending(user: User) -> QuerySet[ApprovalRequest]:
    return approvals_visible(user=user).filter(DECIDABLE)  # superseded ones are not queued


def approvals_pending_count(*, user: User) -> int:
    """Pending approvals of the user's tenants, counted up to :data:`PENDING_COUNT_CAP`."""
    # In queue order, so PostgreSQL walks the queue index over pending rows only. Unordered,
    # it may merge-join on the operation key instead, reading every decided approval older
    # than the first pending one: 85 ms at 100k decided, growing with the history.
    return _pending(user).order_by("expires_at", "pk")[:PENDING_COUNT_CAP].count()


@dataclass(frozen=True)
class QueueFilters:
    """Queue filters from the query string; empty values filter nothing."""

    tool: str = ""
    risk: str = ""
    tenant: str = ""
    expiring: bool = False

    def query(self) -> dict[str, str]:
        """The filters as query-string parameters (for links to the next page)."""
        values = {"tool": self.tool, "risk": self.risk, "tenant": self.tenant}
        found = {name: value for name, value in values.items() if value}
        return {**found, "expiring": "1"} if self.expiring else found


@dataclass(frozen=True)
class QueuePage:
    approvals: list[ApprovalRequest]
    next_cursor: str | None


def _cursor(approval: ApprovalRequest) -> str:
    raw = json.dumps([approval.expires_at.isoformat(), approval.pk]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _position(cursor: str) -> tuple[datetime, int] | None:
    try:
        expires, pk = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(expires), int(pk)
    except (ValueError, TypeError):
        return None  # a damaged cursor starts from the first page


def approvals_queue(
    *, user: User, filters: QueueFilters, cursor: str | None = None, size: int = PAGE_SIZE
) -> QueuePage:
    """One page of pending approvals, soonest expiry first, keyset-paginated on
    ``(expires_at, id)`` so a page costs the same at row 100,000 as at row 1."""
    # The operation is joined for its state only: its row (the whole conversation) is not read.
    rows = _pending(user).select_related("tenant", "requested_by")
    if filters.tool:
        rows = rows.filter(tool_name=filters.tool)
    if filters.risk:
        rows = rows.filter(risk=filters.risk)
    if filters.tenant:
        rows = rows.filter(tenant__slug=filters.tenant)
    if filters.expiring:
        rows = rows.filter(expires_at__lte=timezone.now() + EXPIRING_SOON)
    position = _position(cursor) if cursor else None
    if position:
        expires, pk = position
        # The ``>=`` bounds the index scan (tenant, state, expires_at); the OR alone would be
        # a filter over every earlier row: 50 ms half-way down a queue of 100k.
        rows = rows.filter(expires_at__gte=expires).filter(
            Q(expires_at__gt=expires) | Q(expires_at=expires, pk__gt=pk)
        )
    found = list(rows.order_by("expires_at", "pk")[: size + 1])
    next_cursor = _cursor(found[size - 1]) if len(found) > size else None
    return QueuePage(approvals=found[:size], next_cursor=next_cursor)


def approval_get(*, user: User, public_id: str) -> ApprovalRequest:
    """One approval by public ID; raises ``ApprovalRequest.DoesNotExist`` for other tenants'."""
    return (
        approvals_visible(user=user)
        .select_related(
            "tenant", "requested_by", "decided_by", "edited_by", "operation__tenant", "call__turn"
        )
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


def approval_earlier_proposals(*, approval: ApprovalRequest) -> list[dict[str, Any]]:
    """Earlier calls of the same tool in this operation, each with its difference from the
    arguments now awaiting approval (``diff`` rows: ``path``, ``change``, ``old``, ``new``)."""
    current = json.loads(approval.canonical_arguments)
    earlier = (
        ToolCall.objects.filter(operation_id=approval.operation_id, tool_name=approval.tool_name)
        .exclude(pk=approval.call_id)
        .filter(turn__index__lte=approval.call.turn.index)
        .select_related("turn")
        .order_by("turn__index", "position")
    )
    return [
        {"call": call, "diff": arguments_diff(call.arguments, current)}
        for call in earlier
        if call.arguments is not None
    ]


def approval_preview(*, approval: ApprovalRequest) -> dict[str, Any] | None:
    """The tool's dry run of the effect, when it offers one: ``{"data": …}`` or
    ``{"error": message}``; ``None`` for tools without a preview."""
    spec = registry.get(approval.tool_name)
    if spec is None or spec.preview is None:
        return None
    arguments = json.loads(approval.canonical_arguments)
    try:
        return {"data": spec.preview(tool_context(approval.operation, approval.call), arguments)}
    except ToolError as exc:
        return {"error": exc.message}
