"""The console's lists and what they say: queue order and filters, search by any ID prefix,
customer or business identifier (paged, counted), the operations list and the decisions history
(keyset-paged, pinned query counts), outcome badges, stale decisions, dry runs, time zones, and
bad input answered without a 500."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from tests.factories import (
    ApprovalRequestFactory,
    OperationFactory,
    pending_approval,
    small_and_large,
)
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.console.models import SearchKey
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.registry import ToolContext, ToolError
from toolcalls.services.agents import AgentDefinition, agent_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def _order(page: str, approvals: list[ApprovalRequest]) -> list[str]:
    found = sorted(approvals, key=lambda a: page.index(a.public_id))
    return [a.public_id for a in found]


def test_the_queue_sorts_by_expiry_age_amount_and_risk(demo) -> None:
    small, large = small_and_large(demo.tenant)
    now = timezone.now()
    none = pending_approval(
        demo.tenant, amount_cents=None, risk="read", expires_at=now + timedelta(minutes=9)
    )
    client = _client("operator")
    every = [small, large, none]

    def order(sort: str) -> list[str]:
        page = client.get(reverse("approvals:queue"), {"sort": sort}).content.decode()
        return _order(page, every)

    assert order("expiry") == [small.public_id, none.public_id, large.public_id]
    assert order("age") == [large.public_id, small.public_id, none.public_id]
    assert order("amount") == [large.public_id, small.public_id, none.public_id]
    assert order("risk") == [large.public_id, small.public_id, none.public_id]


def test_the_queue_filters_by_requester_and_amount_range(demo) -> None:
    low = pending_approval(demo.tenant, amount_cents=1000)
    high = pending_approval(demo.tenant, amount_cents=7500)
    client = _client("operator")
    page = client.get(reverse("approvals:queue"), {"amount_min": "50", "amount_max": "80.00"})
    text = page.content.decode()
    assert high.public_id in text and low.public_id not in text
    page = client.get(reverse("approvals:queue"), {"requester": "nobody"})
    assert "Nothing is waiting for a decision with these filters" in page.content.decode()
    for label in ("Tool", "Risk", "Tenant", "Requested by", "Amount from", "Amount to", "Sort by"):
        assert f">{label} <" in text


def test_the_queue_marks_the_viewers_own_requests(demo) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    text = _client("requester").get(reverse("approvals:queue")).content.decode()
    assert approval.public_id in text and "your request: another operator decides" in text
    assert (
        "your request" not in _client("operator").get(reverse("approvals:queue")).content.decode()
    )


@pytest.mark.parametrize(
    "query",
    [
        {"after": "not-a-cursor"},
        {"after": "WyJ0IiwgMV0="},
        {"after": "W1sidiIsICJhYmMiXSwgWyJ2IiwgIngiXV0="},  # [["v", "abc"], ["v", "x"]]
        {"after": "W1sidCIsICIyMDI2LTAxLTAxVDAwOjAwOjAwIl0sIFsidiIsICJ4Il1d", "sort": "risk"},
        {"after": "W1sidiIsIDFdLCBbInYiLCAyXV0=", "sort": "amount"},
        {"amount_min": "lots"},
        {"sort": "loudest"},
        {"amount_max": "-3"},
    ],
)
def test_bad_queue_input_filters_nothing(demo, query: Mapping[str, str]) -> None:
    approval = pending_approval(demo.tenant)
    response = _client("operator").get(reverse("approvals:queue"), query)
    assert response.status_code == 200 and approval.public_id in response.content.decode()


@pytest.mark.parametrize(
    "path", ["/console/operations/", "/console/approvals/decided/", "/console/search/"]
)
@pytest.mark.parametrize(
    "query",
    [
        {"after": "%%%"},
        {"after": "W1sidiIsICJhYmMiXSwgWyJ2IiwgIngiXV0="},
        {"created_from": "yesterday"},
        {"state": "NOPE"},
        {"q": "x\u0000"},
    ],
)
def test_bad_list_input_is_never_a_500(demo, path: str, query: Mapping[str, str]) -> None:
    assert _client("support").get(path, query).status_code == 200


def test_search_finds_id_prefixes_in_any_case_customers_and_business_ids(demo) -> None:
    first = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=first.approvals.get().pk, actor=operator(), approve=True)
    second = start(demo, bundled_replies("refund_approve"))
    client = _client("support")

    def found(query: str) -> str:
        response = client.get(reverse("search"), {"q": query})
        if response.status_code == 302:
            return str(response["Location"])
        return response.content.decode()

    assert first.public_id in found(first.public_id[:9].upper())
    approval = second.approvals.get()
    assert second.public_id in found(approval.public_id.upper()[:14])
    assert second.public_id in found(approval.call.public_id[:10])
    both = found("CUS_1001")
    assert "2 operations match" in both and "customer cus_1001" in both
    assert "2 operations match" in found("rd-ord-1001-1")  # the draft both refunds name
    assert first.public_id in found("RF-RD-ORD-1001-1")  # the refund only the first paid
    assert "Nothing in your tenants matches" in found("cus_2002")


def test_search_pages_and_counts(demo, django_assert_max_num_queries) -> None:
    operations = OperationFactory.create_batch(25, tenant=demo.tenant)
    SearchKey.objects.bulk_create(
        SearchKey(tenant=demo.tenant, operation=o, field="order_id", value="ord-7777")
        for o in operations
    )
    client = _client("support")
    # One lookup per kind of ID, whatever the number of results.
    with django_assert_max_num_queries(14):
        page = client.get(reverse("search"), {"q": "ORD-7777"}).content.decode()
    assert "25 operations match" in page and page.count('data-label="Operation"') == 20
    cursor = page.split("after=")[1].split('"')[0]
    rest = client.get(f"{reverse('search')}?q=ORD-7777&after={cursor}").content.decode()
    assert rest.count('data-label="Operation"') == 5 and "next-page" not in rest


def test_operations_list_filters_pages_and_pins_its_queries(
    demo, django_assert_max_num_queries
) -> None:
    start(demo, bundled_replies("refund_approve"))
    OperationFactory.create_batch(55, tenant=demo.tenant, subject_ref="cus_3003")
    client = _client("support")
    for query in ({}, {"customer": "cus_3003"}, {"tool": "submit_refund"}):
        with django_assert_max_num_queries(8):
            response = client.get(reverse("operations:list"), query)
        assert response.status_code == 200
    text = client.get(reverse("operations:list"), {"tool": "submit_refund"}).content.decode()
    assert text.count('data-label="Operation"') == 1
    today = timezone.localdate().isoformat()
    first = client.get(reverse("operations:list"), {"created_from": today, "created_to": today})
    assert first.content.decode().count('data-label="Operation"') == 50
    cursor = first.content.decode().split("after=")[1].split('"')[0].replace("&amp;", "&")
    rest = client.get(f"{reverse('operations:list')}?created_from={today}&after={cursor}")
    assert rest.content.decode().count('data-label="Operation"') == 6
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    later = client.get(reverse("operations:list"), {"created_from": tomorrow})
    assert "No operations with these filters" in later.content.decode()


def test_operations_list_filters_by_agent_profile(demo, django_assert_max_num_queries) -> None:
    definition: AgentDefinition = {"family": "openai_responses", "model": "gpt-5.1-test"}
    revision = agent_create(
        tenant=demo.tenant, name="refunds", definition=definition, actor=Actor.system("test")
    )
    profiled = OperationFactory.create(tenant=demo.tenant, agent_revision=revision)
    OperationFactory.create(tenant=demo.tenant)
    client = _client("support")
    shown_for = [("refunds", 1), ("refunds@1", 1), ("refunds@2", 0), ("other", 0)]
    # A revision's number as the API writes it: no leading zero, ASCII digits only.
    shown_for += [("refunds@01", 0), ("refunds@\u0661", 0)]
    for agent, shown in shown_for:
        with django_assert_max_num_queries(8):
            text = client.get(reverse("operations:list"), {"agent": agent}).content.decode()
        assert text.count('data-label="Operation"') == shown
    listed = client.get(reverse("operations:list"), {"agent": "refunds"}).content.decode()
    assert profiled.public_id in listed
    assert "<code>refunds@1</code>" in listed


def test_decisions_history_says_who_what_when_why(demo, django_assert_max_num_queries) -> None:
    for index in range(3):
        approval = start(demo, bundled_replies("refund_approve")).approvals.get()
        approval_decide(
            approval_pk=approval.pk, actor=operator(), approve=False, reason=f"Reason {index}"
        )
    client = _client("support")
    with django_assert_max_num_queries(8):
        text = client.get(reverse("approvals:decisions")).content.decode()
    assert text.index("Reason 2") < text.index("Reason 1") < text.index("Reason 0")
    assert text.count(">DENIED<") == 3 and "operator" in text
    filtered = client.get(reverse("approvals:decisions"), {"state": "APPROVED"})
    assert "No decisions with these filters" in filtered.content.decode()


def test_queue_query_count_holds_for_every_sort(demo, django_assert_max_num_queries) -> None:
    for _ in range(30):
        pending_approval(demo.tenant, amount_cents=1000)
    client = _client("operator")
    for sort in ("expiry", "age", "amount", "risk"):
        with django_assert_max_num_queries(10):
            client.get(reverse("approvals:queue"), {"sort": sort})


def _declined(ctx: ToolContext, arguments: Mapping[str, Any]) -> dict[str, Any]:
    raise ToolError("CARD_DECLINED", "The bank declined the refund.")


def test_badges_tell_a_failed_refund_and_a_denial_from_a_success(demo, monkeypatch) -> None:
    spec = registry.get("submit_refund")
    assert spec is not None
    failing = dataclasses.replace(spec, handler=_declined)
    monkeypatch.setitem(registry._REGISTRY, "submit_refund", failing)
    failed = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=failed.approvals.get().pk, actor=operator(), approve=True)
    denied = start(demo, bundled_replies("refund_approve"))
    approval_decide(
        approval_pk=denied.approvals.get().pk, actor=operator(), approve=False, reason="No."
    )
    client = _client("support")
    page = client.get(reverse("operations:detail", args=[failed.public_id])).content.decode()
    assert "COMPLETED, submit_refund failed" in page
    outcome = page[page.index('data-testid="outcome"') : page.index("<h2>Agent and settings</h2>")]
    assert "CARD_DECLINED" in outcome and "The bank declined the refund." in outcome
    page = client.get(reverse("operations:detail", args=[denied.public_id])).content.decode()
    assert "COMPLETED after a denial" in page


def test_a_stale_post_keeps_the_reason_and_says_why(demo) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    response = _client("operator").post(
        reverse("approvals:decide", args=[approval.public_id, "deny"]),
        {"reason": "Customer withdrew."},
    )
    text = response.content.decode()
    assert response.status_code == 409 and "already APPROVED" in text
    assert "Customer withdrew.</textarea>" in text


def _paid_then(demo: Any, submit: dict[str, Any]) -> ApprovalRequest:
    """Pay draft RD-ORD-1001-1 in full (49.99), then park another operation's ``submit``."""
    paying = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}
    draft = {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"}
    paid = start(
        demo,
        [
            r.response(r.call("d", "create_refund_draft", draft)),
            r.response(r.call("s", "submit_refund", paying)),
            r.final(),
        ],
    )
    replies = [r.response(r.call("s2", "submit_refund", submit)), r.final()]
    parked = start(demo, replies).approvals.get()
    approval_decide(approval_pk=paid.approvals.get().pk, actor=operator(), approve=True)
    return parked


def test_approving_what_the_tools_precondition_refuses_is_refused(demo) -> None:
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 3000}
    other = _paid_then(demo, submit)
    client = _client("operator")
    url = reverse("approvals:decide", args=[other.public_id, "approve"])
    assert client.get(url).status_code == 302  # the approval page says why
    response = client.post(url, {"reason": "ok"})
    text = response.content.decode()
    assert "Not recorded: The tool&#x27;s precondition refuses this call now" in text
    assert "already paid by another request" in text
    bulk = client.post(
        reverse("approvals:bulk"), {"approval": [other.public_id], "decision": "approve"}
    )
    assert "already paid by another request" in bulk.content.decode()
    other.refresh_from_db()
    assert other.state == "PENDING"


def test_the_same_refund_asked_again_can_be_approved_and_pays_nothing_more(demo) -> None:
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}
    again = _paid_then(demo, submit)
    client = _client("operator")
    page = client.get(reverse("approvals:detail", args=[again.public_id])).content.decode()
    assert "already submitted for this same refund" in page and "approve-disabled" not in page
    client.post(reverse("approvals:decide", args=[again.public_id, "approve"]), {"reason": "ok"})
    again.refresh_from_db()
    assert again.state == "APPROVED" and again.operation.state == "COMPLETED"
    assert LedgerEntry.objects.count() == 1


def test_dates_follow_the_viewers_time_zone_with_utc_on_hover(demo) -> None:
    operation: Operation = start(demo, bundled_replies("refund_approve"))
    client = _client("support")
    bad = client.post(reverse("console-settings"), {"timezone": "Mars/Olympus"})
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    client.post(reverse("console-settings"), {"timezone": "Asia/Tokyo"})
    page = client.get(reverse("operations:detail", args=[operation.public_id])).content.decode()
    local = timezone.localtime(operation.created_at, timezone=timezone.get_fixed_timezone(540))
    assert f"{local:%Y-%m-%d %H:%M:%S} JST" in page
    assert f'title="{operation.created_at:%Y-%m-%d %H:%M:%S} UTC"' in page
    again = _client("support")  # a new session reads the setting back
    page = again.get(reverse("operations:detail", args=[operation.public_id])).content.decode()
    assert "JST" in page


def test_bulk_decides_each_on_its_own_and_reports_each(demo) -> None:
    fresh = start(demo, bundled_replies("refund_approve")).approvals.get()
    stale = start(demo, bundled_replies("refund_approve")).approvals.get()
    approval_decide(approval_pk=stale.pk, actor=operator(), approve=True)
    elsewhere = ApprovalRequestFactory.create()  # another tenant's: as if there were none
    client = _client("operator")
    ticked = [fresh.public_id, stale.public_id, elsewhere.public_id, "apr_\u0000"]
    denied_without_reason = client.post(
        reverse("approvals:bulk"), {"approval": ticked, "decision": "deny"}
    ).content.decode()
    assert "A denial needs a reason" in denied_without_reason
    invisible = {"approval": ticked, "decision": "deny", "reason": "\ufeff\u180e"}
    assert (
        "A denial needs a reason"
        in client.post(reverse("approvals:bulk"), invisible).content.decode()
    )
    fresh.refresh_from_db()
    assert fresh.state == "PENDING"
    response = client.post(
        reverse("approvals:bulk"), {"approval": ticked, "decision": "deny", "reason": "Dup."}
    )
    report = response.content.decode()
    assert response.status_code == 200
    assert report.count('data-label="Approval"') == 4  # a line for every ticked ID
    assert report.count("No such approval in your tenants.") == 2
    assert "already APPROVED" in report and ">denied<" in report
    elsewhere.refresh_from_db()
    assert elsewhere.state == "PENDING"
    fresh.refresh_from_db()
    assert (fresh.state, fresh.decision_reason) == ("DENIED", "Dup.")
    nothing = client.post(reverse("approvals:bulk"), {"decision": "deny"})  # the queue again
    assert "Nothing was decided: Tick at least one approval." in nothing.content.decode()


def test_the_budgets_show_money_in_dollars_and_each_heading_once(demo) -> None:
    operation: Operation = start(demo, bundled_replies("refund_approve"))
    page = _client("support").get(reverse("operations:detail", args=[operation.public_id]))
    text = page.content.decode()
    cost = operation.cost_micros / 1_000_000
    assert f'<td data-label="Used">{cost:.4f} USD</td>' in text
    assert '<td data-label="Limit">5.00 USD</td>' in text
    assert text.count("<h2>Request</h2>") == 1 and "<h2>Agent and settings</h2>" in text
