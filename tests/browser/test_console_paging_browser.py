"""In a real browser: the queue paged on and back (next, previous, first, with its order kept),
a page link cut short answered with the first page and a message, an amount range the wrong way
round saying why its lower bound is ignored (on the operations list, a first day after the
last), and the decisions history filtered by customer, requester and days, with the tool and
amount columns. Every page passes axe-core, fits 390 px, and is saved full-page at 1366 and
390 px under ``var/screenshots/``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from approvals.services import approval_decide
from tests.browser.pages import check, log_in
from tests.engine import bundled_replies, operator, start
from tests.factories import OperationFactory, pending_approval

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]


def test_the_queue_pages_on_and_back_and_says_when_a_link_is_broken(page: Page, demo: Any) -> None:
    now = timezone.now()
    for index in range(53):
        pending_approval(
            demo.tenant, amount_cents=2600 + index, created_at=now - timedelta(minutes=index)
        )
    log_in(page, "operator")
    page.goto("/console/approvals/?sort=age")
    queue = page.get_by_test_id("queue").locator("tbody tr")
    expect(queue).to_have_count(50)
    expect(page.get_by_test_id("first-page")).to_have_count(0)
    page.get_by_test_id("next-page").click()
    expect(queue).to_have_count(3)
    expect(page.get_by_label("Sort by")).to_have_value("age")
    check(page, "queue-second-page")
    page.get_by_test_id("previous-page").click()
    expect(queue).to_have_count(50)
    expect(page).to_have_url("/console/approvals/?sort=age")
    page.goto("/console/approvals/?sort=age&after=W1sidCIsICIyMDI2")
    expect(page.get_by_test_id("cursor-refused")).to_have_text(
        "That page link is no longer valid; showing the first page."
    )
    expect(queue).to_have_count(50)
    check(page, "queue-page-link-refused")


def test_an_amount_range_the_wrong_way_round_says_why(page: Page, demo: Any) -> None:
    pending_approval(demo.tenant, amount_cents=3000)
    pending_approval(demo.tenant, amount_cents=9000)
    log_in(page, "operator")
    page.goto("/console/approvals/")
    page.get_by_label("Amount from").fill("80")
    page.get_by_label("Amount to").fill("50")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_test_id("filter-explained")).to_have_text(
        "Amount from is ignored: the minimum is above the maximum."
    )
    expect(page.get_by_label("Amount from")).to_have_value("")
    expect(page.get_by_label("Amount to")).to_have_value("50")
    expect(page.get_by_test_id("queue").locator("tbody tr")).to_have_count(1)
    check(page, "queue-amount-range-inverted")


def test_a_day_range_the_wrong_way_round_on_the_operations_list_says_why(
    page: Page, demo: Any
) -> None:
    operation = OperationFactory.create(tenant=demo.tenant)
    today = timezone.localdate()
    log_in(page, "support")
    page.goto("/console/operations/")
    page.get_by_label("Created from").fill((today + timedelta(days=1)).isoformat())
    page.get_by_label("Created to").fill(today.isoformat())
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_test_id("filter-explained")).to_have_text(
        "Created from is ignored: it is after the last day."
    )
    expect(page.get_by_label("Created from")).to_have_value("")
    expect(page.get_by_label("Created to")).to_have_value(today.isoformat())
    expect(page.get_by_test_id("operations")).to_contain_text(operation.public_id)
    check(page, "operations-days-inverted")


def test_the_decisions_history_filters_by_customer_requester_and_days(
    page: Page, demo: Any
) -> None:
    for _ in range(2):
        approval = start(demo, bundled_replies("refund_approve")).approvals.get()
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=False, reason="No.")
    today = timezone.localdate().isoformat()
    log_in(page, "support")
    page.goto("/console/approvals/decided/")
    rows = page.get_by_test_id("decisions").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator("td[data-label=Tool]")).to_have_text("submit_refund irreversible")
    expect(rows.first.locator("td[data-label=Amount]")).to_have_text("49.99 USD")
    page.get_by_label("Customer", exact=True).fill("cus_1001")
    page.get_by_label("Requested by").fill("requester")
    page.get_by_label("Decided from").fill(today)
    page.get_by_label("Decided to").fill(today)
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    check(page, "decisions-filtered")
    page.get_by_label("Requested by").fill("support")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("p.empty")).to_have_text("No decisions with these filters.")
    later = (timezone.localdate() + timedelta(days=1)).isoformat()
    page.goto(f"/console/approvals/decided/?decided_from={later}&decided_to={today}")
    expect(page.get_by_test_id("filter-explained")).to_have_text(
        "Decided from is ignored: it is after the last day."
    )
    expect(rows).to_have_count(2)
    check(page, "decisions-days-inverted")
