"""Signed webhooks: fan each audit event out to the tenant's endpoints, deliver in audit order.

Three audit kinds become events (:data:`EVENT_TYPES`). :func:`webhook_fanout` turns one audit
event into one :class:`WebhookDelivery` per subscribed endpoint; :func:`webhook_deliver` drains
the pending deliveries of one (endpoint, operation) pair, lowest audit ``seq`` first, one at a
time:

1. claim, in a short transaction: lock the pair's oldest pending delivery
   (``select_for_update(skip_locked=True)``); only when nothing older is pending and it is due,
   mark it in flight (``attempts + 1``, ``next_attempt_at`` = now + a lease) and commit.
2. send, outside any transaction: a slow receiver must never hold a row lock or a connection's
   transaction open.
3. record, in one conditional ``UPDATE … WHERE state=PENDING AND attempts=<claimed>``: 0 rows
   means the lease ran out and another worker took the delivery over, so this outcome is dropped.

A pending delivery whose ``next_attempt_at`` lies ahead (in flight, or waiting for its retry)
holds back every later delivery of the pair: that is the ordering rule. It lets go once
DELIVERED or FAILED. Receivers get each delivery at least once (a worker that dies after the
POST leaves it to be sent again when the lease runs out): they deduplicate on
``Callgate-Delivery`` or the payload's ``id``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import random
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Max, OuterRef, QuerySet, Subquery
from django.utils import timezone

from approvals.models import ApprovalRequest
from toolcalls.api.models import WebhookDelivery, WebhookEndpoint
from toolcalls.models import AuditEvent
from toolcalls.services.audit import WEBHOOK_KINDS

log = logging.getLogger("callgate.webhooks")

#: Audit kind → webhook event type.
EVENT_TYPES = {
    "operation.transition": "operation.state_changed",
    "approval.requested": "approval.requested",
    "approval.transition": "approval.decided",
}
assert set(EVENT_TYPES) == WEBHOOK_KINDS, "the engine enqueues fan-outs for exactly these kinds"

SIGNATURE_HEADER = "Callgate-Signature"
#: Exponential backoff between attempts: first delay and cap, seconds (25 % jitter downwards).
RETRY_BASE_S = 2.0
RETRY_CAP_S = 3600.0
#: Deliveries one task sends before it hands the rest of the pair to a fresh task.
DRAIN_BATCH = 50
#: (endpoint, operation) pairs the periodic sweep wakes per run; the next run takes the rest.
SWEEP_BATCH = 500
_ERROR_CHARS = 1000
_BODY_SNIPPET_BYTES = 200
_PENDING = WebhookDelivery.State.PENDING


class WebhookRefused(Exception):
    """The endpoint URL may not be called: not http(s), or a non-public address. Permanent."""


# --- Signing ------------------------------------------------------------------------------------


def sign(*, secret: str, body: bytes, timestamp: int) -> str:
    """The ``Callgate-Signature`` value: ``t=<unix seconds>,v1=<hex HMAC-SHA256>`` over
    ``f"{t}.{body}"`` with the endpoint's secret (``body`` is the exact bytes sent)."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def verify_signature(
    *, secret: str, header: str, body: bytes | str, tolerance_s: int = 300, now: float | None = None
) -> bool:
    """True if ``header`` (a ``Callgate-Signature`` value) signs ``body`` with ``secret`` and its
    timestamp is within ``tolerance_s`` seconds of ``now`` (default: the clock). Any ``v1``
    entry may match; the comparison is constant-time."""
    raw = body.encode() if isinstance(body, str) else body
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = _mac(secret, timestamp, raw)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def payload_body(payload: dict[str, Any]) -> bytes:
    """The bytes POSTed for a payload: compact JSON with sorted keys, so every attempt of a
    delivery sends the same body (``jsonb`` does not keep key order)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


# --- Fan-out ------------------------------------------------------------------------------------


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
        _enqueue_deliver(endpoint_pk=endpoint.pk, operation_pk=event.operation_id)
    return len(rows)


def event_payloads(events: list[AuditEvent], operation_id: str) -> list[dict[str, Any]]:
    """The webhook payload of each audit event (all of one operation, ``operation_id``).

    ``{"id": "evt_<audit event id>", "type", "created", "sequence", "operation", "data"}``.
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
            "created": event.created_at.isoformat(),
            "sequence": event.seq,
            "operation": operation_id,
            "data": _data(event, approvals.get(event.approval_ref)),
        }
        for event in events
    ]


def _data(event: AuditEvent, approval: ApprovalRequest | None) -> dict[str, Any]:
    details = event.details or {}
    reason = details.get("reason", "")
    data: dict[str, Any] = {
        "from_state": event.from_state or None,
        "to_state": event.to_state or None,
        "reason": reason if isinstance(reason, str) else "",
    }
    if event.kind == "operation.transition":
        return data
    call = approval.call if approval else event.call
    data |= {
        "approval": event.approval_ref or None,
        "tool": approval.tool_name if approval else details.get("tool"),
        "call": call.public_id if call else None,
        "call_id": call.call_id if call else details.get("call_id"),
    }
    if event.kind == "approval.requested" and approval is not None:
        data["expires_at"] = approval.expires_at.isoformat()
    return data


# --- Delivery -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Claim:
    pk: int
    attempt: int
    url: str
    secret: str
    event_type: str
    body: bytes


@dataclass(frozen=True)
class _Outcome:
    status: int | None
    error: str
    permanent: bool = False

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def webhook_deliver(*, endpoint_pk: int, operation_pk: int) -> int:
    """Send the pair's due deliveries in audit order until one must wait; returns how many were
    sent (whatever the answer). Safe to run in any number of workers at once."""
    sent = 0
    while sent < DRAIN_BATCH:
        claim = _claim(endpoint_pk, operation_pk)
        if claim is None:
            return sent
        outcome = _send(claim)
        sent += 1
        if not _record(claim, outcome, endpoint_pk=endpoint_pk, operation_pk=operation_pk):
            return sent
    _enqueue_deliver(endpoint_pk=endpoint_pk, operation_pk=operation_pk)
    return sent


def _pending(endpoint_pk: int, operation_pk: int) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(
        endpoint_id=endpoint_pk, event__operation_id=operation_pk, state=_PENDING
    )


def _claim(endpoint_pk: int, operation_pk: int) -> _Claim | None:
    """Mark the pair's next delivery in flight, or None: nothing pending, the oldest is not due
    (in flight elsewhere or waiting for its retry), or another worker is claiming it."""
    pending = _pending(endpoint_pk, operation_pk)
    with transaction.atomic(durable=True):
        row = (
            pending.select_for_update(skip_locked=True, of=("self",))
            .select_related("endpoint", "event")
            .order_by("event__seq")
            .first()
        )
        if row is None or not row.endpoint.is_active:
            return None  # an inactive endpoint keeps its deliveries until it is active again
        # skip_locked passes over a row another worker is claiming: then this is not the oldest.
        if pending.filter(event__seq__lt=row.event.seq).exists():
            return None
        now = timezone.now()
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            return None
        row.attempts += 1
        row.next_attempt_at = now + timedelta(seconds=_lease_s())
        row.save(update_fields=["attempts", "next_attempt_at"])
    return _Claim(
        pk=row.pk,
        attempt=row.attempts,
        url=row.endpoint.url,
        secret=row.endpoint.secret,
        event_type=row.event_type,
        body=payload_body(row.payload),
    )


def _lease_s() -> float:
    # Longer than any one POST (connect and read timeouts, name resolution): a claim that
    # outlives it is presumed dead and the delivery is sent again.
    return max(60.0, 4 * settings.CALLGATE_WEBHOOK_TIMEOUT_S)


def _send(claim: _Claim) -> _Outcome:
    """POST the delivery. Runs outside any transaction; never raises."""
    try:
        webhook_url_check(claim.url)
    except WebhookRefused as exc:
        return _Outcome(status=None, error=str(exc)[:_ERROR_CHARS], permanent=True)
    except OSError as exc:
        return _Outcome(status=None, error=f"cannot resolve the host: {exc}"[:_ERROR_CHARS])
    headers = {
        "Content-Type": "application/json",
        "Callgate-Event": claim.event_type,
        "Callgate-Delivery": str(claim.pk),
        SIGNATURE_HEADER: sign(secret=claim.secret, body=claim.body, timestamp=int(time.time())),
    }
    try:
        # No redirects: a redirect could point at an address the check above refuses.
        with requests.post(
            claim.url,
            data=claim.body,
            headers=headers,
            timeout=settings.CALLGATE_WEBHOOK_TIMEOUT_S,
            allow_redirects=False,
            stream=True,
        ) as response:
            if 200 <= response.status_code < 300:
                return _Outcome(status=response.status_code, error="")
            snippet = response.raw.read(_BODY_SNIPPET_BYTES, decode_content=True)
            text = snippet.decode(errors="replace").strip()
            error = f"HTTP {response.status_code}" + (f": {text}" if text else "")
            return _Outcome(status=response.status_code, error=error[:_ERROR_CHARS])
    except (requests.RequestException, OSError) as exc:
        return _Outcome(status=None, error=f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])


def _record(claim: _Claim, outcome: _Outcome, *, endpoint_pk: int, operation_pk: int) -> bool:
    """Store the attempt's outcome; True when the pair's next delivery may go now."""
    mine = WebhookDelivery.objects.filter(pk=claim.pk, state=_PENDING, attempts=claim.attempt)
    now = timezone.now()
    common: dict[str, Any] = {"last_status_code": outcome.status, "last_error": outcome.error}
    if outcome.ok:
        done = mine.update(
            state=WebhookDelivery.State.DELIVERED, delivered_at=now, next_attempt_at=None, **common
        )
    elif outcome.permanent or claim.attempt >= settings.CALLGATE_WEBHOOK_MAX_ATTEMPTS:
        done = mine.update(state=WebhookDelivery.State.FAILED, next_attempt_at=None, **common)
    else:
        delay = webhook_retry_delay_s(attempt=claim.attempt)
        done = mine.update(next_attempt_at=now + timedelta(seconds=delay), **common)
        if done:
            _enqueue_deliver(endpoint_pk=endpoint_pk, operation_pk=operation_pk, countdown_s=delay)
        _log(claim, outcome, f"retry in {delay:.1f} s" if done else "lease lost")
        return False
    _log(claim, outcome, "" if done else "lease lost")
    return bool(done)


def _log(claim: _Claim, outcome: _Outcome, note: str) -> None:
    fields = {
        "delivery_id": claim.pk,
        "event_type": claim.event_type,
        "attempt": claim.attempt,
        "status_code": outcome.status,
        "error": outcome.error,
    }
    text = " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, ""))
    log.info("webhook %s%s", text, f" ({note})" if note else "", extra=fields)


def webhook_retry_delay_s(*, attempt: int) -> float:
    """Seconds before the attempt after failed attempt ``attempt`` (1-based): 2 s doubling per
    attempt, capped at one hour, with 25 % jitter downwards."""
    return min(RETRY_BASE_S * 2 ** (attempt - 1), RETRY_CAP_S) * random.uniform(0.75, 1.0)


def webhook_url_check(url: str) -> None:
    """Raise :class:`WebhookRefused` unless ``url`` is http(s) with a host (and no credentials)
    whose every address is public (``CALLGATE_WEBHOOK_ALLOW_PRIVATE`` lifts the address rule).
    Resolves the host: ``OSError`` when that fails (worth retrying)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused(f"only http and https URLs with a host are called, not {url!r}")
    if parts.username is not None or parts.password is not None:
        # They would be sent as Basic auth and shown wherever the URL is: the signature is the
        # endpoint's credential.
        raise WebhookRefused("a webhook URL may not carry a user name or password")
    if settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except ValueError as exc:  # a bad port, or a host name IDNA cannot encode: never retried
        raise WebhookRefused(f"invalid URL {url!r}: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise WebhookRefused(
                f"{parts.hostname} resolves to {address}, which is not a public address"
            )


def webhook_retry_due(*, now: datetime | None = None) -> int:
    """Wake the sender of every pair whose oldest pending delivery is due (a retry whose timer
    passed, a lost wake-up, a claim whose lease ran out); returns how many pairs it woke. The
    database decides what is due, not the broker's countdowns."""
    earlier = WebhookDelivery.objects.filter(
        state=_PENDING,
        endpoint_id=OuterRef("endpoint_id"),
        event__operation_id=OuterRef("event__operation_id"),
        event__seq__lt=OuterRef("event__seq"),
    )
    heads = (
        WebhookDelivery.objects.filter(
            state=_PENDING, next_attempt_at__lte=now or timezone.now(), endpoint__is_active=True
        )
        .filter(~Exists(earlier))
        .order_by("next_attempt_at")
        .values_list("endpoint_id", "event__operation_id")[:SWEEP_BATCH]
    )
    pairs = _unique(heads)
    for endpoint_pk, operation_pk in pairs:
        _enqueue_deliver(endpoint_pk=endpoint_pk, operation_pk=operation_pk)
    return len(pairs)


def _unique(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return list(dict.fromkeys(pairs))


def _enqueue_deliver(
    *, endpoint_pk: int, operation_pk: int, countdown_s: float | None = None
) -> None:
    """Run ``api.webhook_deliver`` for the pair after the current transaction commits."""
    from toolcalls.api import tasks

    transaction.on_commit(
        lambda: tasks.webhook_deliver.apply_async(
            args=[endpoint_pk, operation_pk], countdown=countdown_s
        )
    )
