"""The decisions history filters by customer, requester and the days decided (the viewer's
days, "to" included whole), as the other lists filter: each value not understood is named and
ignored, a first day after the last says why, and the next pages keep the filters. Its rows
show the tool and the amount as the queue's do, from the same cells."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.forms import DecisionFilterForm
from approvals.models import ApprovalRequest
from tests.factories import ApprovalRequestFactory, OperationFactory, pending_approval
from toolcalls.models import Tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

IGNORED = "Some filters were not understood and are ignored: "


def _decided(
    tenant: Tenant, *, customer: str, requester: str, decided_at: datetime, **fields: Any
) -> ApprovalRequest:
    operation = OperationFactory.create(
        tenant=tenant,
        state="COMPLETED",
        subject_ref=customer,
        requested_by=User.objects.get(username=requester),
    )
    return ApprovalRequestFactory.create(
        call__turn__operation=operation,
        state="APPROVED",
        decided_by=User.objects.get(username="operator"),
        decided_at=decided_at,
        **fields,
    )


@pytest.fixture
def support(demo: Any) -> Client:
    client = Client()
    assert client.login(username="support", password="support-demo-pass")
    return client


def _page(client: Client, query: dict[str, str]) -> str:
    response = client.get(reverse("approvals:decisions"), query)
    assert response.status_code == 200
    return response.content.decode()


def _shown(page: str, *approvals: ApprovalRequest) -> list[bool]:
    return [approval.public_id in page for approval in approvals]


@pytest.fixture
def three(demo: Any) -> tuple[ApprovalRequest, ApprovalRequest, ApprovalRequest]:
    """Decided approvals: for cus_1001 asked by requester on 2026-03-02 at 10:00 UTC, for
    cus_2002 asked by support on 2026-03-04 at 23:30 UTC, for cus_1001 asked by support on
    2026-03-06 at 08:00 UTC."""
    return (
        _decided(
            demo.tenant,
            customer="cus_1001",
            requester="requester",
            decided_at=datetime(2026, 3, 2, 10, tzinfo=UTC),
        ),
        _decided(
            demo.tenant,
            customer="cus_2002",
            requester="support",
            decided_at=datetime(2026, 3, 4, 23, 30, tzinfo=UTC),
        ),
        _decided(
            demo.tenant,
            customer="cus_1001",
            requester="support",
            decided_at=datetime(2026, 3, 6, 8, tzinfo=UTC),
        ),
    )


def test_the_history_filters_by_customer_requester_and_days(three: Any, support: Client) -> None:
    assert _shown(_page(support, {"customer": "cus_1001"}), *three) == [True, False, True]
    assert _shown(_page(support, {"requester": "Support"}), *three) == [False, True, True]
    assert _shown(_page(support, {"requester": "user:requester"}), *three) == [True, False, False]
    days = {"decided_from": "2026-03-04", "decided_to": "2026-03-04"}
    assert _shown(_page(support, days), *three) == [False, True, False]  # 23:30 on the last day
    assert _shown(_page(support, {"decided_from": "2026-03-03"}), *three) == [False, True, True]
    assert _shown(_page(support, {"decided_to": "2026-03-05"}), *three) == [True, True, False]
    both = _page(
        support, {"customer": "cus_1001", "requester": "support", "decided_to": "2026-03-06"}
    )
    assert _shown(both, *three) == [False, False, True]
    nobody = _page(support, {"customer": "cus_1001", "requester": "nobody"})
    assert "No decisions with these filters." in nobody and IGNORED not in nobody
    page = _page(support, {})
    for label in ("Customer", "Requested by", "Decided from", "Decided to"):
        assert f">{label} <" in page
    assert re.search(r'<input type="date" name="decided_from"', page)


def test_the_days_are_the_viewers_days() -> None:
    with timezone.override("Pacific/Auckland"):  # UTC+13 in March
        filters = DecisionFilterForm(
            {"decided_from": "2026-03-05", "decided_to": "2026-03-05"}, tools=[]
        ).filters()
    assert filters.decided_from == datetime(2026, 3, 4, 11, tzinfo=UTC)
    assert filters.decided_to == datetime(2026, 3, 5, 11, tzinfo=UTC)


def test_values_not_understood_are_named_and_the_others_apply(three: Any, support: Client) -> None:
    page = _page(support, {"customer": "cus_1001", "decided_from": "soon", "requester": "x" * 151})
    assert _shown(page, *three) == [True, False, True]
    assert f"{IGNORED}Requested by, Decided from." in page


def test_a_first_day_after_the_last_is_ignored_saying_why(three: Any, support: Client) -> None:
    page = _page(support, {"decided_from": "2026-03-05", "decided_to": "2026-03-03"})
    assert "Decided from is ignored: it is after the last day." in page
    assert _shown(page, *three) == [True, False, False]
    assert IGNORED not in page
    assert re.search(r'<input[^>]*name="decided_to"[^>]*value="2026-03-03"', page)


def test_the_next_pages_keep_the_filters(demo: Any, support: Client) -> None:
    moment = datetime(2026, 3, 2, 10, tzinfo=UTC)
    for minutes in range(51):
        _decided(
            demo.tenant,
            customer="cus_1001",
            requester="requester",
            decided_at=moment + timedelta(minutes=minutes),
        )
    _decided(demo.tenant, customer="cus_2002", requester="requester", decided_at=moment)
    query = {"customer": "cus_1001", "requester": "requester", "decided_from": "2026-03-02"}
    first = _page(support, query)
    link = re.search(r'href="([^"]*)"[^>]*data-testid="next-page"', first)
    assert link
    href = link.group(1).replace("&amp;", "&")
    assert href.startswith("?customer=cus_1001&requester=requester&decided_from=2026-03-02&after=")
    second = support.get(reverse("approvals:decisions") + href).content.decode()
    assert second.count('data-label="When"') == 1
    assert re.search(r'href="\?customer=cus_1001&amp;[^"]*"[^>]*data-testid="first-page"', second)


def test_the_history_shows_the_tool_and_amount_cells_of_the_queue(
    demo: Any, support: Client
) -> None:
    summary = [["customer", "cus_1001"], ["currency", "EUR"]]
    decided = _decided(
        demo.tenant,
        customer="cus_1001",
        requester="requester",
        decided_at=timezone.now(),
        tool_name="create_refund_draft",
        risk="write",
        amount_cents=4999,
        summary=summary,
    )
    pending = pending_approval(
        demo.tenant,
        tool_name="create_refund_draft",
        risk="write",
        amount_cents=4999,
        summary=summary,
    )
    cells = (
        r'<td data-label="Tool"><code>create_refund_draft</code> '
        r'<span class="risk write">write</span></td>\s*'
        r'<td data-label="Amount" class="num"><bdi>49.99 EUR</bdi></td>'
    )
    history = _page(support, {})
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    queue = client.get(reverse("approvals:queue")).content.decode()
    assert decided.public_id in history and pending.public_id in queue
    assert re.search(cells, history) and re.search(cells, queue)
    assert '<th scope="col">Tool</th><th scope="col">Amount</th>' in history
    # The currency is the tool's summary's, not the console's: shown as text from elsewhere.
    ApprovalRequest.objects.filter(pk=decided.pk).update(summary=[["currency", "EUR\u202e"]])
    assert '49.99 EUR<span class="control" title="U+202E' in _page(support, {})
