"""The console as operators and support staff use it all day: queue filters and pages, edited
approvals, dry runs, diffs, search by any ID, the escalations list, the diagram, query counts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import services as approvals_services
from approvals.models import ApprovalRequest
from approvals.services import ApprovalError, approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from tests.factories import ApprovalRequestFactory, TenantFactory
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry, RefundDraft
from toolcalls.services.operations import operation_cancel
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


@pytest.fixture
def parked(demo):  # type: ignore[no-untyped-def]
    return start(demo, bundled_replies("refund_approve"))


def _pile(demo: Any, count: int, **fields: Any) -> list[ApprovalRequest]:
    """``count`` pending approvals for the demo tenant, expiring one minute apart."""
    now = timezone.now()
    made = []
    for i in range(count):
        approval = ApprovalRequestFactory.create(**fields)
        operation = approval.operation
        operation.tenant = demo.tenant
        operation.save(update_fields=["tenant"])
        approval.tenant = demo.tenant
        approval.expires_at = now + timedelta(minutes=5 + i)
        approval.save(update_fields=["tenant", "expires_at"])
        made.append(approval)
    return made


def test_queue_filters_and_keyset_pages(demo) -> None:
    refunds = _pile(demo, 55, amount_cents=1234)
    _pile(demo, 3, tool_name="create_refund_draft", risk="write")
    client = _client("operator")
    first = client.get(reverse("approvals:queue")).content.decode()
    assert first.count('class="risk ') == 50  # one page
    assert refunds[0].public_id in first and "12.34" in first
    assert 'data-testid="next-page"' in first
    cursor = first.split("after=")[1].split('"')[0]
    second = client.get(reverse("approvals:queue") + f"?after={cursor}").content.decode()
    assert refunds[0].public_id not in second and refunds[-1].public_id in second
    assert 'data-testid="next-page"' not in second
    only = client.get(reverse("approvals:queue") + "?tool=create_refund_draft").content.decode()
    assert only.count('class="risk ') == 3 and refunds[0].public_id not in only
    soon = client.get(reverse("approvals:queue") + "?expiring=on").content.decode()
    assert soon.count('class="risk ') == 11 + 3  # within 15 minutes: refunds 5..15, drafts 5..7


def test_queue_and_detail_query_counts_do_not_grow(
    demo, parked, django_assert_max_num_queries
) -> None:
    client = _client("operator")
    with django_assert_max_num_queries(10):
        client.get(reverse("approvals:queue"))
    _pile(demo, 60)
    with django_assert_max_num_queries(10):
        client.get(reverse("approvals:queue"))
    approval = parked.approvals.get()
    with django_assert_max_num_queries(16):
        client.get(reverse("approvals:detail", args=[approval.public_id]))


def test_detail_shows_the_dry_run_and_earlier_proposals(demo) -> None:
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}
    lower = {**submit, "amount_cents": 3000}
    replies = [
        r.response(
            r.call(
                "d",
                "create_refund_draft",
                {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"},
            )
        ),
        r.response(r.call("s1", "submit_refund", submit)),
    ]
    first = start(demo, replies)
    approval_decide(
        approval_pk=first.approvals.get().pk, actor=operator(), approve=False, reason="Too much."
    )
    again = start(demo, [r.response(r.call("s2", "submit_refund", lower))])
    assert again.approvals.count() == 1
    page = _client("operator").get(
        reverse("approvals:detail", args=[again.approvals.get().public_id])
    )
    text = page.content.decode()
    assert 'data-testid="preview"' in text
    assert "Order total" in text and "129.99" in text and "Remaining after" in text


def test_diff_against_an_earlier_proposal_in_the_same_operation(demo) -> None:
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}
    replies = [
        r.response(
            r.call(
                "d",
                "create_refund_draft",
                {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"},
            )
        ),
        r.response(r.call("s1", "submit_refund", {**submit, "amount_cents": 99999})),
        r.response(r.call("s2", "submit_refund", submit)),
    ]
    operation = start(demo, replies)
    approval_decide(
        approval_pk=operation.approvals.get().pk,
        actor=operator(),
        approve=False,
        reason="Wrong amount.",
    )
    pending = operation.approvals.get(state="PENDING")
    text = (
        _client("operator")
        .get(reverse("approvals:detail", args=[pending.public_id]))
        .content.decode()
    )
    assert 'data-testid="diff"' in text
    assert (
        "<code>amount_cents</code>" in text
        and "<code><bdi>99999</bdi></code>" in text
        and "<code><bdi>4999</bdi></code>" in text
    )


def test_approve_with_edited_arguments(parked) -> None:
    approval = parked.approvals.get()
    client = _client("operator")
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    token = client.get(url).context["csrf_token"]
    edited = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 3000}
    bad = client.post(
        url,
        {"arguments": json.dumps({**edited, "amount_cents": "lots"}), "csrfmiddlewaretoken": token},
    )
    assert bad.status_code == 200 and b"schema" in bad.content  # refused, nothing decided
    response = client.post(url, {"arguments": json.dumps(edited), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert (
        approval.state == "APPROVED"
        and approval.edited_by
        and approval.edited_by.username == "operator"
    )
    assert json.loads(approval.original_arguments)["amount_cents"] == 4999
    assert json.loads(approval.canonical_arguments)["amount_cents"] == 3000
    event = parked.events.get(kind="approval.arguments_edited")
    assert event.details["diff"] == [
        {"path": "amount_cents", "change": "values_changed", "old": 4999, "new": 3000}
    ]
    assert (
        event.details["arguments_sha256"] == approval.arguments_sha256 != approval.original_sha256
    )
    call = parked.calls.get(tool_name="submit_refund")
    assert call.state == CallState.SUCCEEDED
    assert call.model_result["note"].startswith("An operator edited the arguments")
    assert call.model_result["arguments"]["amount_cents"] == 3000
    assert [e.amount_cents for e in LedgerEntry.objects.all()] == [3000]  # the edit ran
    sent = parked.turns.get(index=3).request_body["input"][-1]
    assert json.loads(sent["output"])["arguments"]["amount_cents"] == 3000  # the model was told


def test_an_edit_beyond_the_draft_is_refused_before_it_is_decided(parked) -> None:
    approval = parked.approvals.get()
    edited = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 6000}
    with pytest.raises(ApprovalError) as exc:
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, arguments=edited)
    assert exc.value.code == "invalid_edit" and "draft" in str(exc.value)
    approval.refresh_from_db()
    call = parked.calls.get(tool_name="submit_refund")
    assert approval.state == "PENDING" and call.state == CallState.WAITING_APPROVAL
    assert json.loads(approval.canonical_arguments)["amount_cents"] == 4999
    assert LedgerEntry.objects.count() == 0
    with pytest.raises(ApprovalError) as exc:  # the requester still hears only that
        approval_decide(
            approval_pk=approval.pk, actor=approval.requested_by, approve=True, arguments=edited
        )
    assert exc.value.code == "self_approval"


def test_a_draft_changed_after_the_edit_is_still_refused_at_resume(parked, monkeypatch) -> None:
    """The edit's precheck is advice; resume checks the precondition again."""
    approval = parked.approvals.get()
    edited = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 3000}
    monkeypatch.setattr(approvals_services, "arguments_edit_precondition", lambda **kwargs: None)
    RefundDraft.objects.filter(draft_id="RD-ORD-1001-1").update(amount_cents=2000)
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, arguments=edited)
    call = parked.calls.get(tool_name="submit_refund")
    assert (call.state, call.error_code) == (CallState.REJECTED, "DRAFT_MISMATCH")
    assert LedgerEntry.objects.count() == 0


def test_an_edit_is_validated_like_a_proposal(parked) -> None:
    approval = parked.approvals.get()
    with pytest.raises(ApprovalError) as exc:
        approval_decide(
            approval_pk=approval.pk,
            actor=operator(),
            approve=True,
            arguments={"order_id": "ORD-1001", "surprise": 1},
        )
    assert exc.value.code == "invalid_edit"
    approval.refresh_from_db()
    assert approval.state == "PENDING" and approval.canonical_arguments.count("surprise") == 0


def test_a_superseded_approval_cannot_be_decided(demo, parked) -> None:
    operation_cancel(operation_pk=parked.pk, actor=Actor.user(operator()), reason="moot")
    approval = parked.approvals.get()
    with pytest.raises(ApprovalError) as exc:
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    assert exc.value.code == "superseded"
    client = _client("operator")
    assert approval.public_id not in client.get(reverse("approvals:queue")).content.decode()
    text = client.get(reverse("approvals:detail", args=[approval.public_id])).content.decode()
    assert "Superseded" in text and "Approve…" not in text


@pytest.mark.parametrize(
    "what", ["operation", "call", "provider_call", "approval", "key", "response"]
)
def test_search_finds_an_operation_by_any_id(parked, what) -> None:
    draft = parked.calls.get(tool_name="create_refund_draft")
    approval = parked.approvals.get()
    query = {
        "operation": parked.public_id,
        "call": draft.public_id,
        "provider_call": draft.provider_call_id,
        "approval": approval.public_id,
        "key": draft.idempotency_key,
        "response": draft.turn.response_id,
    }[what]
    response = _client("support").get(reverse("search"), {"q": query})
    assert response.status_code == 302
    assert response["Location"] == reverse("operations:detail", args=[parked.public_id])


def test_search_never_crosses_tenants(parked) -> None:
    from tests.factories import UserFactory

    outsider = UserFactory.create(username="outsider")
    TenantFactory.create(slug="other").members.add(outsider)
    client = Client()
    client.force_login(outsider)
    response = client.get(reverse("search"), {"q": parked.public_id})
    assert response.status_code == 200 and b'data-testid="no-results"' in response.content


def test_escalations_list_shows_reason_and_counters(demo, django_assert_max_num_queries) -> None:
    lookups = [
        r.response(r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"})) for i in (1, 2)
    ]
    operations = [start(demo, [*lookups, r.final()], budgets={"max_turns": 1}) for _ in range(3)]
    client = _client("support")
    with django_assert_max_num_queries(6):  # none per operation
        text = client.get(reverse("operations:escalations")).content.decode()
    assert all(operation.public_id in text for operation in operations) and "MAX_TURNS" in text


def test_operation_page_draws_the_path_taken(parked, django_assert_max_num_queries) -> None:
    approval_decide(approval_pk=parked.approvals.get().pk, actor=operator(), approve=True)
    client = _client("support")
    with django_assert_max_num_queries(13):  # the fork button asks for a permission
        text = client.get(reverse("operations:detail", args=[parked.public_id])).content.decode()
    svg = text[text.index('data-testid="diagram"') :]
    assert 'class="node visited current" data-state="COMPLETED"' in svg
    assert 'class="node" data-state="REFUSED"' in svg  # not visited
    assert "RESULTS_READY → MODEL_REQUESTED (3\u00d7)" in svg
    assert "USD" in text  # turns show their cost


def test_huge_json_columns_are_not_loaded_for_the_operation_page(parked) -> None:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        _client("support").get(reverse("operations:detail", args=[parked.public_id]))
    selects = [q["sql"] for q in captured.captured_queries if "toolcalls_operation" in q["sql"]]
    assert selects and all('"conversation"' not in sql for sql in selects)
