"""The keyset-paged console lists link back as well as on: a page after the first links the
first page and the page before it (an ``after`` cursor found on the same index backwards, or
the first page), with the filters applied; a later page whose rows are gone says so and still
links back."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import selectors
from approvals.models import ApprovalRequest
from approvals.selectors import QUEUE_SORTS, DecisionFilters, QueueFilters
from tests.factories import pending_approval
from toolcalls.models import Tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _pending(tenant: Tenant, count: int) -> list[ApprovalRequest]:
    """``count`` pending refunds, expiring a minute apart, with amounts, risks and ages that
    repeat (so every order but expiry has ties its last key breaks)."""
    now = timezone.now()
    return [
        pending_approval(
            tenant,
            amount_cents=1000 * (index % 3),
            risk=("read", "write", "irreversible")[index % 3],
            created_at=now - timedelta(minutes=index % 2),
            expires_at=now + timedelta(minutes=20 + index),
        )
        for index in range(count)
    ]


def _link(page: str, testid: str) -> str | None:
    """The unescaped ``href`` of the link marked ``testid``, or ``None``."""
    found = re.search(rf'<a href="([^"]*)"[^>]*data-testid="{testid}"', page)
    return html.unescape(found.group(1)) if found else None


@pytest.mark.parametrize("sort", sorted(QUEUE_SORTS))
def test_previous_cursors_walk_back_through_the_pages_a_next_cursor_walked(
    demo: Any, sort: str
) -> None:
    _pending(demo.tenant, 8)
    operator = User.objects.get(username="operator")
    filters = QueueFilters(sort=sort)

    def page(cursor: str | None) -> Any:
        return selectors.approvals_queue(user=operator, filters=filters, cursor=cursor, size=3)

    forward = [page(None)]
    while forward[-1].next_cursor:
        forward.append(page(forward[-1].next_cursor))
    assert [len(p.rows) for p in forward] == [3, 3, 2]
    assert forward[0].first and not forward[1].first and not forward[2].first
    # Page 3's previous page is page 2, read again; page 2's is the first page (no cursor).
    back = page(forward[2].previous_cursor)
    assert [a.pk for a in back.rows] == [a.pk for a in forward[1].rows]
    assert back.previous_cursor is None and not back.first
    assert forward[1].previous_cursor is None
    assert not any(p.refused for p in [*forward, back])


def test_a_page_whose_rows_are_gone_links_the_last_rows_before_it(demo: Any) -> None:
    made = _pending(demo.tenant, 5)
    operator = User.objects.get(username="operator")

    def page(cursor: str | None) -> Any:
        return selectors.approvals_queue(
            user=operator, filters=QueueFilters(), cursor=cursor, size=2
        )

    second = page(page(None).next_cursor)
    last = page(second.next_cursor)
    ApprovalRequest.objects.filter(pk=made[4].pk).update(
        state="APPROVED", decided_at=timezone.now()
    )
    empty = page(second.next_cursor)
    assert [a.pk for a in last.rows] == [made[4].pk] and empty.rows == []
    assert not empty.first and not empty.refused
    assert [a.pk for a in page(empty.previous_cursor).rows] == [made[2].pk, made[3].pk]


def test_the_decisions_history_pages_back_newest_first(demo: Any) -> None:
    operator = User.objects.get(username="operator")
    now = timezone.now()
    for index in range(5):
        pending_approval(
            demo.tenant,
            state="DENIED",
            decided_by=operator,
            decided_at=now - timedelta(minutes=index),
        )

    def page(cursor: str | None) -> Any:
        return selectors.approvals_decided(
            user=operator, filters=DecisionFilters(), cursor=cursor, size=2
        )

    second = page(page(None).next_cursor)
    third = page(second.next_cursor)
    assert [a.pk for a in page(third.previous_cursor).rows] == [a.pk for a in second.rows]


def _client() -> Client:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    return client


def test_the_queue_links_the_first_and_the_previous_page_with_its_filters(demo: Any) -> None:
    _pending(demo.tenant, 53)
    client = _client()
    first = client.get(reverse("approvals:queue"), {"sort": "age"}).content.decode()
    assert _link(first, "first-page") is None and _link(first, "previous-page") is None
    following = _link(first, "next-page")
    assert following and following.startswith("/console/approvals/?sort=age&after=")
    second = client.get(following).content.decode()
    assert second.count('class="risk ') == 3 and _link(second, "next-page") is None
    # Fifty rows before it: the page before is the first page, as both links say.
    assert _link(second, "first-page") == "/console/approvals/?sort=age"
    assert _link(second, "previous-page") == "/console/approvals/?sort=age"
    assert "no longer valid" not in second
    one_page = client.get(reverse("approvals:queue"), {"risk": "write"}).content.decode()
    assert one_page.count('class="risk ') == 18
    assert all(_link(one_page, name) is None for name in ("first-page", "previous-page"))
    assert _link(one_page, "next-page") is None


def test_a_later_queue_page_with_nothing_left_says_so_and_links_back(demo: Any) -> None:
    made = _pending(demo.tenant, 51)
    client = _client()
    following = _link(client.get(reverse("approvals:queue")).content.decode(), "next-page")
    assert following
    ApprovalRequest.objects.filter(pk=made[-1].pk).update(
        state="APPROVED", decided_at=timezone.now()
    )
    page = client.get(following).content.decode()
    assert "Nothing more is waiting after the previous page" in page
    assert "Nothing is waiting for a decision" not in page
    assert _link(page, "first-page") == _link(page, "previous-page") == "/console/approvals/?"
