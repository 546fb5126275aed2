"""Fan each audit event out to the tenant's endpoints as one pending delivery per endpoint.

The engine tells the outbox of every audit event through its one declared hook
(``toolcalls.hooks``); :func:`audit_event_heard` picks the kinds that are webhook events
(:data:`EVENT_TYPES`) of tenants that have an active endpoint and asks for a fan-out after the
commit. :func:`webhook_fanout` writes the deliveries; ``toolcalls.webhooks.delivery`` sends them.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max, Subquery
from django.utils import timezone

from approvals.models import ApprovalRequest
from toolcalls.models import AuditEvent
from toolcalls.reasons import reason_code
from toolcalls.states import AuditKind
from toolcalls.times import rfc3339
from toolcalls.webhooks import wakeups
from toolcalls.webhooks.models import WebhookDelivery, WebhookEndpoint

#: Audit kind → webhook event type.
EVENT_TYPES: dict[str, str] = {
    AuditKind.OPERATION_TRANSITION: "operation.state_changed",
    AuditKind.APPROVAL_REQUESTED: "approval.requested",
    AuditKind.APPROVAL_TRANSITION: "approval.decided",
}


def audit_event_heard(event: AuditEvent) -> None:
    """The engine's audit hook: ask for a fan-out after commit when ``event`` is a webhook event
    and its tenant has an active endpoint (``Tenant.webhooks_active``, read with the locked
    operation, so a tenant without endpoints costs nothing)."""
    if event.kind in EVENT_TYPES and event.operation.tenant.webhooks_active:
        wakeups.fanout_later(event_pk=event.pk)


def webhook_fanout(*, event_pk: int) -> int:
    """Create the deliveries of one audit event and wake their senders; returns how many it wrote
    (a concurrent fan-out may have written some first). With no active endpoint for the event's
    tenant this is one query.

    An endpoint gets the events created since it was registered, of the types it subscribes to
    (``events``; empty means all). The fan-outs of one operation's events may run in any order
    (several workers), so each one also creates the endpoint's missing deliveries of that
    operation's earlier events: a delivery never becomes visible before an earlier one, and the
    drain's ordering rule holds. Idempotent (unique endpoint + event).
    """
    tenant = AuditEvent.objects.filter(pk=event_pk).values("operation__tenant_id")[:1]
    endpoints = list(
        WebhookEndpoint.objects.filter(is_active=True, tenant_id=Subquery(tenant)).order_by("pk")
    )
    if not endpoints:
        return 0
    event = AuditEvent.objects.select_related("operation").get(pk=event_pk)
    event_type = EVENT_TYPES.get(event.kind)
    created = 0
    for endpoint in endpoints:
        if event_type in subscribed_types(endpoint) and event.created_at >= endpoint.created_at:
            created += _fanout_to(endpoint, event)
    return created


def subscribed_types(endpoint: WebhookEndpoint) -> set[str]:
    """The event types ``endpoint`` receives (an empty ``events`` list means all of them)."""
    wanted = set(endpoint.events or ())
    return {t for t in EVENT_TYPES.values() if not wanted or t in wanted}


def _fanout_to(endpoint: WebhookEndpoint, event: AuditEvent) -> int:
    kinds = [kind for kind, t in EVENT_TYPES.items() if t in subscribed_types(endpoint)]
    with transaction.atomic(durable=True):
        pair = WebhookDelivery.objects.filter(endpoint=endpoint, event__operation=event.operation)
        last = pair.aggregate(seq=Max("event__seq"))["seq"] or 0
        if last >= event.seq:
            return 0  # a later fan-out of this operation already created this one
        events = list(
            AuditEvent.objects.filter(
                operation=event.operation,
                seq__gt=last,
                seq__lte=event.seq,
                kind__in=kinds,
                created_at__gte=endpoint.created_at,
            )
            .select_related("call")
            .order_by("seq")
        )
        now = timezone.now()
        rows = [
            WebhookDelivery(
                endpoint=endpoint,
                event=row,
                event_type=EVENT_TYPES[row.kind],
                payload=payload,
                next_attempt_at=now,
            )
            for row, payload in zip(
                events, event_payloads(events, event.operation.public_id), strict=True
            )
        ]
        # Another fan-out may be inserting the same rows: ON CONFLICT waits for it, then skips.
        WebhookDelivery.objects.bulk_create(rows, ignore_conflicts=True)
        wakeups.deliver_later(endpoint_pk=endpoint.pk, operation_pk=event.operation_id)
    return len(rows)


def event_payloads(events: list[AuditEvent], operation_id: str) -> list[dict[str, Any]]:
    """The webhook payload of each audit event (all of one operation, ``operation_id``).

    ``{"id": "evt_<audit event id>", "type", "created", "sequence", "operation", "data"}``;
    date-times as the REST API writes them (RFC 3339, UTC, ``Z``), an absent value as ``null``.
    ``data`` names its fields one by one: audit details are never copied wholesale, so nothing
    from ``protected_audit``, no digest and no secret reaches a receiver.
    """
    refs = {e.approval_ref for e in events if e.kind.startswith("approval.") and e.approval_ref}
    approvals = {
        a.public_id: a
        for a in ApprovalRequest.objects.filter(public_id__in=refs).select_related("call")
    }
    return [
        {
            "id": f"evt_{event.pk}",
            "type": EVENT_TYPES[event.kind],
            "created": rfc3339(event.created_at),
            "sequence": event.seq,
            "operation": operation_id,
            "data": _data(event, approvals.get(event.approval_ref)),
        }
        for event in events
    ]


def _data(event: AuditEvent, approval: ApprovalRequest | None) -> dict[str, Any]:
    details = event.details or {}
    reason = details.get("reason")
    reason = reason if isinstance(reason, str) and reason else None
    data: dict[str, Any] = {
        "from_state": event.from_state or None,
        "to_state": event.to_state or None,
        "reason": reason,
    }
    if event.kind == "operation.transition":
        # An operation's reason starts with its code (toolcalls.reasons); an approval's is prose.
        return data | {"reason_code": reason_code(reason or "")}
    call = approval.call if approval else event.call
    data |= {
        "approval": event.approval_ref or None,
        "tool": approval.tool_name if approval else details.get("tool"),
        "call": call.public_id if call else None,
        "provider_call_id": call.provider_call_id if call else details.get("provider_call_id"),
    }
    if event.kind == "approval.requested" and approval is not None:
        data["expires_at"] = rfc3339(approval.expires_at)
    return data
