"""Deliver webhook events to an endpoint in audit order, at least once, signed.

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

import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx2
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from toolcalls.addresses import UrlRefused
from toolcalls.outbound import NoAnswer, NotSent, send_within
from toolcalls.signing import SIGNATURE_HEADER, payload_body, sign
from toolcalls.telemetry import metrics
from toolcalls.webhooks import wakeups
from toolcalls.webhooks.addresses import webhook_url_check
from toolcalls.webhooks.models import WebhookDelivery

log = logging.getLogger("callgate.webhooks")

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
        return _ok(self.status)


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
    wakeups.deliver_later(endpoint_pk=endpoint_pk, operation_pk=operation_pk)
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
    # Longer than any one POST (its timeout bounds the whole exchange; the address check's
    # name resolution comes before it): a claim that outlives it is presumed dead and the
    # delivery is sent again.
    return max(60.0, 4 * settings.CALLGATE_WEBHOOK_TIMEOUT_S)


def _send(claim: _Claim) -> _Outcome:
    """POST the delivery, the whole exchange (its answer included) within
    ``CALLGATE_WEBHOOK_TIMEOUT_S`` seconds. Runs outside any transaction; never raises."""
    try:
        webhook_url_check(claim.url)
    except UrlRefused as exc:
        return _Outcome(status=None, error=str(exc)[:_ERROR_CHARS], permanent=True)
    except OSError as exc:
        return _Outcome(status=None, error=f"cannot resolve the host: {exc}"[:_ERROR_CHARS])
    try:
        # No redirects: one could point at an address the check above refuses. The address
        # connected to is held to the same rule (DNS rebinding).
        answer = send_within(
            _request(claim),
            timeout_s=settings.CALLGATE_WEBHOOK_TIMEOUT_S,
            allow_private=settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE,
            body_bytes=lambda status: 0 if _ok(status) else _BODY_SNIPPET_BYTES,
        )
    except (NotSent, NoAnswer) as exc:
        return _Outcome(status=None, error=str(exc)[:_ERROR_CHARS])
    text = answer.body.decode(errors="replace").strip()
    error = "" if _ok(answer.status) else f"HTTP {answer.status}" + (f": {text}" if text else "")
    return _Outcome(status=answer.status, error=error[:_ERROR_CHARS])


def _request(claim: _Claim) -> httpx2.Request:
    headers = {
        "Content-Type": "application/json",
        "Callgate-Event": claim.event_type,
        "Callgate-Delivery": str(claim.pk),
        SIGNATURE_HEADER: sign(secret=claim.secret, body=claim.body, timestamp=int(time.time())),
    }
    return httpx2.Request("POST", claim.url, content=claim.body, headers=headers)


def _ok(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def _record(claim: _Claim, outcome: _Outcome, *, endpoint_pk: int, operation_pk: int) -> bool:
    """Store the attempt's outcome; True when the pair's next delivery may go now."""
    mine = WebhookDelivery.objects.filter(pk=claim.pk, state=_PENDING, attempts=claim.attempt)
    now = timezone.now()
    common: dict[str, Any] = {"last_status_code": outcome.status, "last_error": outcome.error}
    if outcome.ok:
        metrics.webhook_delivery(outcome="delivered")
        done = mine.update(
            state=WebhookDelivery.State.DELIVERED, delivered_at=now, next_attempt_at=None, **common
        )
    elif outcome.permanent or claim.attempt >= settings.CALLGATE_WEBHOOK_MAX_ATTEMPTS:
        metrics.webhook_delivery(outcome="failed")
        done = mine.update(state=WebhookDelivery.State.FAILED, next_attempt_at=None, **common)
    else:
        metrics.webhook_delivery(outcome="retry")
        delay = webhook_retry_delay_s(attempt=claim.attempt)
        done = mine.update(next_attempt_at=now + timedelta(seconds=delay), **common)
        if done:
            wakeups.deliver_later(
                endpoint_pk=endpoint_pk, operation_pk=operation_pk, countdown_s=delay
            )
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
        wakeups.deliver_later(endpoint_pk=endpoint_pk, operation_pk=operation_pk)
    return len(pairs)


def _unique(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return list(dict.fromkeys(pairs))
