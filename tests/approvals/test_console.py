"""The operator console through Django's test client: login, queue, detail, decide."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from approvals.states import ApprovalState
from tests.engine import bundled_replies, start
from tests.factories import TenantFactory, UserFactory
from toolcalls.demo.models import LedgerEntry
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def parked(demo):  # type: ignore[no-untyped-def]
    return start(demo, bundled_replies("refund_approve"))


def _client(username: str, password: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.get(reverse("login"))
    token = client.cookies["csrftoken"].value
    response = client.post(
        reverse("login"),
        {"username": username, "password": password, "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302, response.content
    return client


def _post(client: Client, url: str, data: dict[str, str]) -> Any:
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def test_console_requires_login(parked) -> None:
    response = Client().get(reverse("approvals:queue"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_operator_sees_queue_and_detail_with_canonical_arguments(parked) -> None:
    client = _client("operator", "operator-demo-pass")
    approval = parked.approvals.get()
    queue = client.get(reverse("approvals:queue")).content.decode()
    assert approval.public_id in queue and "submit_refund" in queue
    detail = client.get(reverse("approvals:detail", args=[approval.public_id])).content.decode()
    assert approval.arguments_sha256 in detail
    assert approval.canonical_arguments == (
        '{"amount_cents":4999,"draft_id":"RD-ORD-1001-1","order_id":"ORD-1001"}'
    )
    assert "&quot;draft_id&quot;: &quot;RD-ORD-1001-1&quot;" in detail
    exact = escape(approval.canonical_arguments)  # the bytes the digest covers, verbatim
    assert f'<pre data-testid="canonical-arguments"><bdi>{exact}</bdi></pre>' in detail
    assert "amount_cents 4999 cents is above the approval threshold" in detail
    assert "prepare a refund draft of $49.99" in detail  # what the model said before


def test_approve_confirms_on_get_decides_on_post_and_redirects(parked) -> None:
    client = _client("operator", "operator-demo-pass")
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    confirm = client.get(url)
    assert confirm.status_code == 200 and b"Confirm approve" in confirm.content
    approval.refresh_from_db()
    assert approval.state == ApprovalState.PENDING  # GET changes nothing
    assert client.post(url, {}).status_code == 403  # no CSRF token
    response = _post(client, url, {})
    assert response.status_code == 302
    assert response["Location"] == reverse("operations:detail", args=[parked.public_id])
    page = client.get(response["Location"]).content.decode()
    assert "COMPLETED" in page and "has been submitted" in page
    parked.refresh_from_db()
    assert parked.state == OperationState.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_deny_requires_a_reason(parked) -> None:
    client = _client("operator", "operator-demo-pass")
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "deny"])
    response = _post(client, url, {"reason": ""})
    assert response.status_code == 200 and b"This field is required" in response.content
    response = _post(client, url, {"reason": "\u200b\u2060"})  # the form sees no white space
    assert response.status_code == 200
    assert response.context["form"].errors == {"reason": ["A denial needs a reason for the model."]}
    assert response.context["form"]["reason"].value() == "\u200b\u2060"
    response = _post(client, url, {"reason": "Photo first."})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert (approval.state, approval.decision_reason) == (ApprovalState.DENIED, "Photo first.")
    # The demo's scripted model answers the denial it was sent, not the refund it proposed.
    parked.refresh_from_db()
    assert parked.state == OperationState.COMPLETED
    assert "did not go through" in parked.final_text
    assert LedgerEntry.objects.count() == 0


def test_requester_is_shown_why_they_cannot_decide(parked) -> None:
    client = _client("requester", "requester-demo-pass")
    approval = parked.approvals.get()
    detail = client.get(reverse("approvals:detail", args=[approval.public_id])).content.decode()
    assert "another operator must decide" in detail
    assert "Approve…" not in detail
    response = _post(client, reverse("approvals:decide", args=[approval.public_id, "approve"]), {})
    assert response.status_code == 403  # the page says why; a client reads the status
    assert "Not recorded: You requested this call" in response.content.decode()
    approval.refresh_from_db()
    assert approval.state == ApprovalState.PENDING


def test_a_decision_sent_after_another_is_409_with_what_was_typed_kept(parked) -> None:
    client = _client("operator", "operator-demo-pass")
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "deny"])
    assert _post(client, url, {"reason": "Photo first."}).status_code == 302
    response = _post(client, url, {"reason": "Second thoughts."})
    assert response.status_code == 409
    page = response.content.decode()
    assert "Not recorded: This approval is already DENIED" in page
    assert "Second thoughts.</textarea>" in page


def test_other_tenants_data_is_not_found(parked) -> None:
    outsider = UserFactory.create(username="outsider")
    TenantFactory.create(slug="other").members.add(outsider)
    client = _client("outsider", "pw")
    approval = parked.approvals.get()
    assert client.get(reverse("approvals:detail", args=[approval.public_id])).status_code == 404
    assert client.get(reverse("operations:detail", args=[parked.public_id])).status_code == 404
    assert approval.public_id not in client.get(reverse("approvals:queue")).content.decode()


def test_operation_page_shows_timeline_in_order(parked, django_assert_max_num_queries) -> None:
    client = _client("support", "support-demo-pass")
    url = reverse("operations:detail", args=[parked.public_id])
    with django_assert_max_num_queries(13):  # the fork button asks for a permission
        page = client.get(url).content.decode()
    kinds = [e.kind for e in parked.events.order_by("seq")]
    assert len(kinds) > 10
    timeline = page[page.index('data-testid="timeline"') :]
    positions = [timeline.index(f'data-seq="{seq}"') for seq in range(1, len(kinds) + 1)]
    assert positions == sorted(positions)


def test_operation_page_queries_do_not_grow_with_calls(demo, django_assert_max_num_queries) -> None:
    from tests import replies as r

    calls = [r.call(f"c{i}", "get_order", {"order_id": "ORD-1001"}) for i in range(40)]
    operation = start(demo, [r.response(*calls), r.final()])
    client = _client("support", "support-demo-pass")
    with django_assert_max_num_queries(13):  # the fork button asks for a permission
        page = client.get(reverse("operations:detail", args=[operation.public_id]))
    assert page.status_code == 200 and page.content.decode().count("get_order") >= 40
