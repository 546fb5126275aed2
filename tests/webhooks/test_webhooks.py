"""Signed webhooks: signatures, fan-out, address checks, retries, ordering, the admin, and the
refund scenario delivered by a real worker to a receiver on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.services import approval_decide
from tests import replies as r
from tests.api.support import READ, WRITE, create_body, keyed_client, post
from tests.conftest import wait_for
from tests.engine import bundled_replies, operator, start
from tests.factories import OperationFactory, TenantFactory, UserFactory
from toolcalls.actors import Actor
from toolcalls.addresses import UrlRefused
from toolcalls.api.auth import api_key_create
from toolcalls.models import AuditEvent, Operation, Tenant
from toolcalls.services.audit import audit_record
from toolcalls.signing import sign, verify_signature
from toolcalls.states import AuditKind, OperationState
from toolcalls.times import rfc3339
from toolcalls.webhooks import delivery, wakeups
from toolcalls.webhooks.addresses import webhook_url_check
from toolcalls.webhooks.delivery import webhook_retry_delay_s, webhook_retry_due
from toolcalls.webhooks.models import WebhookDelivery, WebhookEndpoint
from toolcalls.webhooks.outbox import EVENT_TYPES, event_payloads, webhook_fanout

SECRET = "whsec-test-secret"
D = WebhookDelivery.State


# --- A receiver on 127.0.0.1 --------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)


class Receiver:
    """An HTTP server in a thread: records every POST and answers the next scripted status
    (``statuses``), 200 once the script is used up; while ``gate`` is set, not before ``gate``
    opens (at most 60 s)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.statuses: list[int] = []
        self.gate: threading.Event | None = None
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                if receiver.gate is not None:
                    receiver.gate.wait(60)
                reply = b"busy" if status >= 500 else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/callgate"

    def payloads(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.payload for r in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def endpoint(tenant: Tenant, url: str, **fields: Any) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(tenant=tenant, url=url, secret=SECRET, **fields)


def record(operation: Operation, to_state: str, from_state: str = "") -> AuditEvent:
    """An ``operation.transition`` event, written as the engine writes one (row lock, commit)."""
    with transaction.atomic():
        locked = Operation.objects.select_for_update().get(pk=operation.pk)
        return audit_record(
            operation=locked,
            kind=AuditKind.OPERATION_TRANSITION,
            actor=Actor.system("test"),
            from_state=from_state,
            to_state=to_state,
            details={"reason": f"now {to_state}"},
        )


@pytest.fixture
def held_fanout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events recorded in the test are not fanned out: the test runs ``webhook_fanout``."""
    monkeypatch.setattr(wakeups, "fanout_later", lambda **kwargs: None)


def make_due(*deliveries: WebhookDelivery) -> None:
    """Let the retry timers of ``deliveries`` run out."""
    past = timezone.now() - timedelta(seconds=1)
    WebhookDelivery.objects.filter(pk__in=[d.pk for d in deliveries]).update(next_attempt_at=past)


def assert_signed(request: Received) -> None:
    assert request.headers["content-type"] == "application/json"
    assert request.headers["callgate-event"] == request.payload["type"]
    assert verify_signature(
        secret=SECRET, header=request.headers["callgate-signature"], body=request.body
    )


# --- Signatures ---------------------------------------------------------------------------------


def test_a_signature_verifies_the_exact_body_with_the_secret_while_fresh() -> None:
    body = b'{"id":"evt_1","type":"operation.state_changed"}'
    now = int(time.time())
    header = sign(secret=SECRET, body=body, timestamp=now)
    assert header.startswith(f"t={now},v1=")
    assert verify_signature(secret=SECRET, header=header, body=body)
    assert verify_signature(secret=SECRET, header=header, body=body.decode())
    assert not verify_signature(secret=SECRET, header=header, body=body.replace(b"1", b"2"))
    assert not verify_signature(secret=SECRET, header=header, body=body + b" ")
    assert not verify_signature(secret="another-secret", header=header, body=body)
    stale = sign(secret=SECRET, body=body, timestamp=now - 301)
    assert not verify_signature(secret=SECRET, header=stale, body=body)
    assert verify_signature(secret=SECRET, header=stale, body=body, tolerance_s=600)
    future = sign(secret=SECRET, body=body, timestamp=now + 301)
    assert not verify_signature(secret=SECRET, header=future, body=body)
    # The timestamp is signed too: moving it forward breaks the signature.
    moved = header.replace(f"t={now}", f"t={now + 1}")
    assert not verify_signature(secret=SECRET, header=moved, body=body)


@pytest.mark.parametrize(
    "header", ["", "v1=abc", "t=123", "t=abc,v1=00", "garbage", "t=,v1=", "t=-5,v1=00"]
)
def test_malformed_signature_headers_do_not_verify(header: str) -> None:
    assert not verify_signature(secret=SECRET, header=header, body=b"{}")


def test_any_v1_entry_may_match_so_secrets_can_rotate() -> None:
    now = int(time.time())
    old = sign(secret="old-secret", body=b"{}", timestamp=now)
    new = sign(secret=SECRET, body=b"{}", timestamp=now).split(",")[1]
    assert verify_signature(secret=SECRET, header=f"{old},{new}", body=b"{}")


# --- Fan-out ------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_fanout_follows_tenant_event_types_and_active(demo, receiver: Receiver) -> None:
    everything = endpoint(demo.tenant, receiver.url)
    approvals = endpoint(
        demo.tenant, receiver.url, events=["approval.requested", "approval.decided"]
    )
    inactive = endpoint(demo.tenant, receiver.url, is_active=False)
    elsewhere = endpoint(TenantFactory.create(slug="elsewhere"), receiver.url)
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == OperationState.WAITING_APPROVAL
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED

    events = list(operation.events.filter(kind__in=EVENT_TYPES).order_by("seq"))
    approval_events = [e for e in events if e.kind.startswith("approval.")]
    assert len(approval_events) == 2
    sent = WebhookDelivery.objects.order_by("pk")
    assert [d.event_id for d in sent.filter(endpoint=everything)] == [e.pk for e in events]
    assert [d.event_id for d in sent.filter(endpoint=approvals)] == [e.pk for e in approval_events]
    assert not sent.filter(endpoint__in=[inactive, elsewhere]).exists()
    assert set(sent.values_list("state", flat=True)) == {D.DELIVERED}
    assert len(receiver.received) == len(events) + 2
    for request in receiver.received:
        assert_signed(request)

    by_type = {d.event_type: d.payload for d in sent.filter(endpoint=approvals)}
    approval = operation.approvals.get()
    call = approval.call
    requested = by_type["approval.requested"]
    assert requested["id"] == f"evt_{approval_events[0].pk}"
    assert requested["operation"] == operation.public_id
    assert requested["sequence"] == approval_events[0].seq
    assert requested["created"] == rfc3339(approval_events[0].created_at)
    assert requested["created"].endswith("Z")
    assert requested["data"] == {
        "from_state": None,
        "to_state": "PENDING",
        "reason": approval.reason,
        "approval": approval.public_id,
        "tool": "submit_refund",
        "call": call.public_id,
        "provider_call_id": call.provider_call_id,
        "expires_at": rfc3339(approval.expires_at),
    }
    decided = by_type["approval.decided"]["data"]
    assert (decided["from_state"], decided["to_state"]) == ("PENDING", "APPROVED")
    assert (decided["approval"], decided["call"], decided["tool"]) == (
        approval.public_id,
        call.public_id,
        "submit_refund",
    )
    first = sent.filter(endpoint=everything).first()
    assert first is not None and first.payload["type"] == "operation.state_changed"
    assert first.payload["data"] == {
        "from_state": "PENDING",
        "to_state": "MODEL_REQUESTED",
        "reason": None,
        "reason_code": None,
    }
    # Nothing of the audit's digests or protected results leaves Callgate.
    everything_sent = b"".join(r.body for r in receiver.received).decode()
    assert "sha256" not in everything_sent and "protected" not in everything_sent
    assert call.arguments_sha256 not in everything_sent


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("held_fanout")
def test_fanout_without_endpoints_costs_one_query(django_assert_num_queries: Any) -> None:
    operation = OperationFactory.create()
    event = record(operation, "MODEL_REQUESTED", "PENDING")
    endpoint(TenantFactory.create(slug="other"), "https://hooks.example.com/callgate")
    endpoint(operation.tenant, "https://hooks.example.com/off", is_active=False)
    with django_assert_num_queries(1):
        assert webhook_fanout(event_pk=event.pk) == 0


@pytest.mark.django_db
def test_the_tenant_flag_follows_its_active_endpoints() -> None:
    tenant = TenantFactory.create()
    assert not tenant.webhooks_active

    first = endpoint(tenant, "https://hooks.example.com/one")
    second = endpoint(tenant, "https://hooks.example.com/two")
    tenant.refresh_from_db()
    assert tenant.webhooks_active
    first.is_active = False
    first.save()
    tenant.refresh_from_db()
    assert tenant.webhooks_active  # the second one is still active
    second.delete()
    tenant.refresh_from_db()
    assert not tenant.webhooks_active
    first.is_active = True
    first.save()
    tenant.refresh_from_db()
    assert tenant.webhooks_active


@pytest.mark.django_db(transaction=True)
def test_events_of_a_tenant_without_endpoints_wake_no_fanout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    woken: list[int] = []
    monkeypatch.setattr(wakeups, "fanout_later", lambda **kw: woken.append(kw["event_pk"]))
    quiet = OperationFactory.create()
    hooked = OperationFactory.create(tenant=TenantFactory.create(slug="hooked"))
    endpoint(TenantFactory.create(slug="elsewhere"), "https://hooks.example.com/elsewhere")
    endpoint(quiet.tenant, "https://hooks.example.com/off", is_active=False)
    endpoint(hooked.tenant, "https://hooks.example.com/on")

    record(quiet, "MODEL_REQUESTED", "PENDING")
    event = record(hooked, "MODEL_REQUESTED", "PENDING")

    assert woken == [event.pk]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_fanout_is_idempotent_and_skips_events_older_than_the_endpoint(
    receiver: Receiver,
) -> None:
    operation = OperationFactory.create()
    before = record(operation, "MODEL_REQUESTED", "PENDING")
    hook = endpoint(operation.tenant, receiver.url)
    after = record(operation, "VALIDATING", "MODEL_REQUESTED")
    assert webhook_fanout(event_pk=before.pk) == 0
    assert webhook_fanout(event_pk=after.pk) == 0
    assert list(hook.deliveries.values_list("event_id", flat=True)) == [after.pk]
    assert [p["sequence"] for p in receiver.payloads()] == [after.seq]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks", "held_fanout")
def test_a_late_fanout_never_overtakes_an_earlier_event(receiver: Receiver) -> None:
    """Fan-outs of one operation may run in any order: the later one creates the earlier
    event's delivery too, so the drain sends them in audit order."""
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, receiver.url)
    first = record(operation, "MODEL_REQUESTED", "PENDING")
    second = record(operation, "VALIDATING", "MODEL_REQUESTED")
    assert webhook_fanout(event_pk=second.pk) == 2
    assert webhook_fanout(event_pk=first.pk) == 0
    assert [p["sequence"] for p in receiver.payloads()] == [first.seq, second.seq]
    assert set(hook.deliveries.values_list("state", flat=True)) == {D.DELIVERED}


# --- Addresses ----------------------------------------------------------------------------------

PRIVATE = [
    "http://127.0.0.1:8000/hooks",
    "http://localhost/hooks",
    "http://10.1.2.3/",
    "http://192.168.0.10/",
    "http://172.16.5.4/",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
]
NOT_HTTP = ["ftp://hooks.example.com/", "file:///etc/passwd", "http:///no-host", "gopher://x/"]


@pytest.mark.parametrize("url", PRIVATE)
def test_private_and_loopback_addresses_are_refused(settings: Any, url: str) -> None:
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(UrlRefused, match="not a public address"):
        webhook_url_check(url)
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = True
    webhook_url_check(url)


@pytest.mark.parametrize("url", NOT_HTTP)
def test_only_http_and_https_are_called(settings: Any, url: str) -> None:
    for allow in (False, True):
        settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = allow
        with pytest.raises(UrlRefused, match="only http and https"):
            webhook_url_check(url)


def test_urls_with_credentials_are_refused(settings: Any) -> None:
    for allow in (False, True):
        settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = allow
        for url in ("https://user:pw@93.184.215.14/hooks", "https://user@93.184.215.14/hooks"):
            with pytest.raises(UrlRefused, match="user name or password"):
                webhook_url_check(url)


def test_public_addresses_pass(settings: Any) -> None:
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    webhook_url_check("https://93.184.215.14/hooks")
    webhook_url_check("http://[2606:4700:4700::1111]:8443/hooks")
    with pytest.raises(UrlRefused, match="invalid URL"):
        webhook_url_check("https://93.184.215.14:99999/hooks")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_a_refused_endpoint_fails_at_once_and_gets_nothing(
    settings: Any, receiver: Receiver
) -> None:
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, receiver.url)
    record(operation, "MODEL_REQUESTED", "PENDING")
    delivery = hook.deliveries.get()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == (D.FAILED, 1, None)
    assert "127.0.0.1" in delivery.last_error and "not a public address" in delivery.last_error
    assert delivery.next_attempt_at is None
    assert receiver.received == []


# --- Retries and order --------------------------------------------------------------------------


def test_backoff_doubles_from_two_seconds_with_jitter_and_caps_at_an_hour() -> None:
    for attempt, ceiling in [(1, 2), (2, 4), (3, 8), (8, 256), (12, 3600), (40, 3600)]:
        delays = [webhook_retry_delay_s(attempt=attempt) for _ in range(50)]
        assert all(0.75 * ceiling <= d <= ceiling for d in delays), (attempt, delays)
        assert len(set(delays)) > 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_a_failed_attempt_is_retried_with_backoff_then_delivered(receiver: Receiver) -> None:
    receiver.statuses = [500]
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, receiver.url)
    record(operation, "MODEL_REQUESTED", "PENDING")
    delivery = hook.deliveries.get()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == (D.PENDING, 1, 500)
    assert delivery.last_error == "HTTP 500: busy"
    assert delivery.next_attempt_at is not None
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert 1.0 < wait <= 2.0
    # The retry countdown already ran in-process: the database said "not yet".
    assert len(receiver.received) == 1
    assert webhook_retry_due() == 0

    make_due(delivery)
    assert webhook_retry_due() == 1
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == (D.DELIVERED, 2, 200)
    assert delivery.last_error == "" and delivery.next_attempt_at is None
    assert delivery.delivered_at is not None
    first, second = receiver.received
    assert first.body == second.body
    assert first.headers["callgate-delivery"] == second.headers["callgate-delivery"]
    assert second.headers["callgate-delivery"] == str(delivery.pk)
    assert_signed(first)
    assert_signed(second)
    assert webhook_retry_due() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_after_the_last_attempt_it_fails_and_the_next_delivery_goes(
    settings: Any, receiver: Receiver
) -> None:
    settings.CALLGATE_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.statuses = [500, 502, 503]
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, receiver.url)
    record(operation, "MODEL_REQUESTED", "PENDING")
    record(operation, "VALIDATING", "MODEL_REQUESTED")
    first, second = hook.deliveries.order_by("event__seq")
    # The second waits for the first: only the first was tried.
    assert [p["sequence"] for p in receiver.payloads()] == [first.event.seq]
    second.refresh_from_db()
    assert (second.state, second.attempts) == (D.PENDING, 0)
    for _ in range(2):
        make_due(first)
        webhook_retry_due()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, first.attempts, first.last_status_code) == (D.FAILED, 3, 503)
    assert first.next_attempt_at is None
    assert (second.state, second.attempts) == (D.DELIVERED, 1)
    sequences = [p["sequence"] for p in receiver.payloads()]
    assert sequences == [first.event.seq] * 3 + [second.event.seq]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_a_later_delivery_waits_until_the_earlier_one_is_delivered(receiver: Receiver) -> None:
    receiver.statuses = [503]
    operation = OperationFactory.create()
    other = OperationFactory.create(tenant=operation.tenant)
    hook = endpoint(operation.tenant, receiver.url)
    events = [record(operation, "MODEL_REQUESTED", "PENDING")]
    events += [record(operation, "VALIDATING", "MODEL_REQUESTED")]
    events += [record(operation, "EXECUTING", "VALIDATING")]
    # Another operation is not held back by this one.
    unrelated = record(other, "MODEL_REQUESTED", "PENDING")
    assert [p["sequence"] for p in receiver.payloads()] == [events[0].seq, unrelated.seq]
    assert delivery.webhook_deliver(endpoint_pk=hook.pk, operation_pk=operation.pk) == 0

    make_due(hook.deliveries.get(event=events[0]))
    assert webhook_retry_due() == 1
    mine = [p for p in receiver.payloads() if p["operation"] == operation.public_id]
    assert [p["sequence"] for p in mine] == [events[0].seq] + [e.seq for e in events]
    assert set(hook.deliveries.values_list("state", flat=True)) == {D.DELIVERED}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("held_fanout")
def test_one_claim_at_a_time_and_a_lost_lease_drops_the_late_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The drain is driven by hand (nothing is sent): claims and records only.
    monkeypatch.setattr(wakeups, "deliver_later", lambda **kwargs: None)
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, "https://93.184.215.14/hooks")
    record(operation, "MODEL_REQUESTED", "PENDING")
    last = record(operation, "VALIDATING", "MODEL_REQUESTED")
    assert webhook_fanout(event_pk=last.pk) == 2
    first, second = hook.deliveries.order_by("event__seq")

    claim = delivery._claim(hook.pk, operation.pk)
    assert claim is not None and (claim.pk, claim.attempt) == (first.pk, 1)
    assert delivery._claim(hook.pk, operation.pk) is None  # in flight: nobody else sends
    make_due(first)  # the lease ran out: presumed dead
    retaken = delivery._claim(hook.pk, operation.pk)
    assert retaken is not None and (retaken.pk, retaken.attempt) == (first.pk, 2)
    late = delivery._Outcome(status=200, error="")
    assert not delivery._record(claim, late, endpoint_pk=hook.pk, operation_pk=operation.pk)
    first.refresh_from_db()
    assert (first.state, first.attempts) == (D.PENDING, 2)
    assert delivery._record(retaken, late, endpoint_pk=hook.pk, operation_pk=operation.pk)
    following = delivery._claim(hook.pk, operation.pk)
    assert following is not None and following.pk == second.pk


# --- Admin --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_admin_shows_keys_without_their_hash_and_revokes_them() -> None:
    tenant = TenantFactory.create(slug="alpha")
    key, _ = api_key_create(tenant=tenant, name="billing", scopes=["operations:read"])
    other, _ = api_key_create(
        tenant=TenantFactory.create(slug="bravo"), name="other", scopes=["operations:read"]
    )
    client = Client()
    client.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    changelist = reverse("admin:api_apikey_changelist")
    page = client.get(reverse("admin:api_apikey_change", args=[key.pk])).content.decode()
    assert f"cg_{key.prefix}_" in page and key.key_sha256 not in page
    assert 'name="_save"' not in page
    response = client.post(changelist, {"action": "revoke", "_selected_action": [key.pk]})
    assert response.status_code == 302
    key.refresh_from_db()
    other.refresh_from_db()
    assert key.revoked_at is not None and other.revoked_at is None


@pytest.mark.django_db
def test_admin_pages_render_and_staff_see_their_tenants_rows_only() -> None:
    rows = {}
    for slug in ("alpha", "bravo"):
        operation = OperationFactory.create(tenant=TenantFactory.create(slug=slug))
        hook = endpoint(operation.tenant, f"https://hooks.example.com/{slug}")
        with transaction.atomic():
            event = audit_record(
                operation=operation,
                kind=AuditKind.OPERATION_TRANSITION,
                actor=Actor.system("test"),
                to_state="X",
            )
        delivery = WebhookDelivery.objects.create(
            endpoint=hook, event=event, event_type="operation.state_changed", payload={"n": 1}
        )
        rows[slug] = (hook, delivery)
    staff = UserFactory.create(username="support-alpha", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["api", "webhooks"])
    )
    Tenant.objects.get(slug="alpha").members.add(staff)
    root = UserFactory.create(username="root", is_staff=True, is_superuser=True)
    for user in (root, staff):
        client = Client()
        client.force_login(user)
        for name, (mine, theirs) in (
            ("webhookendpoint", (rows["alpha"][0], rows["bravo"][0])),
            ("webhookdelivery", (rows["alpha"][1], rows["bravo"][1])),
        ):
            listing = client.get(reverse(f"admin:webhooks_{name}_changelist")).content.decode()
            mine_url = reverse(f"admin:webhooks_{name}_change", args=[mine.pk])
            theirs_url = reverse(f"admin:webhooks_{name}_change", args=[theirs.pk])
            assert mine_url in listing
            assert (theirs_url in listing) == user.is_superuser
            page = client.get(mine_url)
            assert page.status_code == 200
        endpoint_page = client.get(
            reverse("admin:webhooks_webhookendpoint_change", args=[rows["alpha"][0].pk])
        ).content.decode()
        assert (SECRET in endpoint_page) == user.is_superuser
        assert client.get(reverse("admin:api_idempotentrequest_changelist")).status_code == 200


@pytest.mark.django_db
def test_admin_refuses_a_private_endpoint_url_when_private_is_off(settings: Any) -> None:
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    tenant = TenantFactory.create(slug="alpha")
    client = Client()
    client.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    add = reverse("admin:webhooks_webhookendpoint_add")
    form = {"tenant": tenant.pk, "url": "http://10.0.0.5/hooks", "is_active": "on"}
    response = client.post(add, form)
    assert response.status_code == 200 and "not a public address" in response.content.decode()
    form |= {"url": "https://93.184.215.14/hooks", "events": ["approval.decided"]}
    assert client.post(add, form).status_code == 302
    saved = WebhookEndpoint.objects.get()
    assert saved.events == ["approval.decided"] and len(saved.secret) == 64


# --- The embedded mode's in-process worker ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("inprocess_worker")
def test_in_process_a_failed_delivery_is_retried_after_its_backoff(receiver: Receiver) -> None:
    began = time.monotonic()
    operation = OperationFactory.create()
    hook = endpoint(operation.tenant, receiver.url)
    receiver.statuses = [500]
    record(operation, "MODEL_REQUESTED", "PENDING")
    wait_for(
        lambda: hook.deliveries.filter(state=D.DELIVERED).exists(), what="the retried delivery"
    )
    assert time.monotonic() - began >= 1.5  # the first backoff: 2 s, less at most 25 % jitter
    delivery = hook.deliveries.get()
    assert (delivery.attempts, delivery.last_status_code) == (2, 200)
    first, second = receiver.received
    assert first.body == second.body


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("inprocess_worker")
def test_in_process_a_request_returns_without_waiting_for_a_slow_receiver(
    demo, receiver: Receiver, settings: Any
) -> None:
    settings.CALLGATE_WEBHOOK_TIMEOUT_S = 60.0
    # The receiver answers nothing before the gate opens: 15 s from now, or when the test says.
    receiver.gate = threading.Event()
    opener = threading.Timer(15.0, receiver.gate.set)
    opener.start()
    hook = endpoint(demo.tenant, receiver.url)
    client = keyed_client(demo.tenant, READ, WRITE)[0]
    try:
        began = time.monotonic()
        response = post(client, "/operations", create_body("refund_approve"))
        took_s = time.monotonic() - began
        wait_for(lambda: receiver.received, what="a delivery to reach the receiver")
    finally:
        opener.cancel()
        receiver.gate.set()
    assert response.status_code == 201, response.content
    assert took_s < 10.0  # sending even one delivery in the request would have taken 15 s
    operation = Operation.objects.get(public_id=response.json()["id"])
    wait_for(lambda: operation.approvals.exists(), what="the refund to park")

    def all_delivered() -> bool:
        events = operation.events.filter(kind__in=EVENT_TYPES)
        deliveries = hook.deliveries.all()
        return len(deliveries) == events.count() and all(d.state == D.DELIVERED for d in deliveries)

    wait_for(all_delivered, what="every delivery")
    sequences = [p["sequence"] for p in receiver.payloads()]
    assert sequences == sorted(set(sequences))


# --- End to end ---------------------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_worker_delivers_every_event_of_the_refund_signed_and_in_order(
    demo, celery_worker, receiver: Receiver
) -> None:
    hook = endpoint(demo.tenant, receiver.url)
    operation = start(demo, bundled_replies("refund_approve"))

    def state(*states: str) -> bool:
        operation.refresh_from_db()
        return operation.state in states

    wait_for(lambda: state(OperationState.WAITING_APPROVAL), what="the refund to park")
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    wait_for(lambda: state(OperationState.COMPLETED, OperationState.FAILED), what="completion")
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason

    events = list(operation.events.filter(kind__in=EVENT_TYPES).order_by("seq"))

    def all_delivered() -> bool:
        deliveries = hook.deliveries.all()
        return len(deliveries) == len(events) and all(d.state == D.DELIVERED for d in deliveries)

    wait_for(all_delivered, what="every delivery")
    assert len(receiver.received) == len(events)
    for request in receiver.received:
        assert_signed(request)
    payloads = receiver.payloads()
    assert [p["id"] for p in payloads] == [f"evt_{e.pk}" for e in events]
    sequences = [p["sequence"] for p in payloads]
    assert sequences == sorted(set(sequences))
    assert [p["type"] for p in payloads] == [EVENT_TYPES[e.kind] for e in events]
    assert {p["operation"] for p in payloads} == {operation.public_id}
    types = [p["type"] for p in payloads]
    assert types.count("approval.requested") == types.count("approval.decided") == 1
    transitions = [
        (p["data"]["from_state"], p["data"]["to_state"])
        for p in payloads
        if p["type"] == "operation.state_changed"
    ]
    assert transitions[-1] == (OperationState.MODEL_REQUESTED, OperationState.COMPLETED)
    assert len(transitions) == operation.events.filter(kind="operation.transition").count()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_state_changes_carry_the_reason_code_and_utc_times(demo: Any) -> None:
    lookup = r.response(r.call("g1", "get_order", {"order_id": "ORD-1001"}))
    operation = start(demo, [lookup, r.final()], budgets={"max_turns": 1})
    assert operation.state == OperationState.ESCALATED
    events = list(operation.events.filter(kind=AuditKind.OPERATION_TRANSITION).order_by("seq"))
    payloads = event_payloads(events, operation.public_id)
    escalated = next(p["data"] for p in payloads if p["data"]["to_state"] == "ESCALATED")
    assert escalated["reason_code"] == "MAX_TURNS"
    assert escalated["reason"] == operation.terminal_reason
    quiet = [p["data"] for p in payloads if p["data"]["to_state"] != "ESCALATED"]
    assert quiet and all(d["reason"] is None and d["reason_code"] is None for d in quiet)
    assert all(p["created"].endswith("Z") and "+00:00" not in p["created"] for p in payloads)
