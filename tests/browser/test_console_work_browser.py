"""The console as an operator and support staff work it, in a real browser: a keyboard-only run
through "approve & next", a dry run that refuses a draft another request paid (and lets the same
refund asked again through), a stale decision that keeps the typed reason, an approval that
shows expired at once, the outcome on top of the operation page, search by customer and order.
Every page passes axe-core, fits 390 px, and is saved full-page at 1366 and 390 px under
``var/screenshots/``."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from tests import replies as r
from tests.browser.pages import check, log_in
from tests.engine import bundled_replies, operator, start
from toolcalls.models import Operation

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]


def _focused_text(page: Page) -> str:
    return str(page.evaluate("document.activeElement.textContent.trim()"))


def _tab_to(page: Page, text: str) -> None:
    """Press Tab until the element named ``text`` has the focus."""
    for _ in range(10):
        page.keyboard.press("Tab")
        if _focused_text(page) == text:
            return
    raise AssertionError(f"Tab never reached {text!r}")


def test_keyboard_only_approve_and_next_through_the_queue(page: Page, demo: Any) -> None:
    first = start(demo, bundled_replies("refund_approve")).approvals.get()
    second = start(demo, bundled_replies("refund_approve")).approvals.get()
    log_in(page, "operator")
    page.goto("/console/approvals/")
    queue = page.get_by_test_id("queue")
    expect(queue.locator("tbody tr")).to_have_count(2)
    expect(queue).to_contain_text("cus_1001 · ORD-1001 · 49.99 USD · damaged item")
    expect(page.get_by_test_id("shortcuts")).to_contain_text("approve & next")
    check(page, "queue")

    page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("approval-state")).to_have_text("PENDING")
    expect(page).to_have_url(f"/console/approvals/{first.public_id}/", ignore_case=False)
    expect(page.get_by_test_id("summary")).to_contain_text("49.99 USD")
    check(page, "approval")

    page.keyboard.press("a")
    expect(page.get_by_role("heading", name="Approve submit_refund?")).to_be_visible()
    expect(page.get_by_label("Note")).to_be_focused()
    check(page)
    page.keyboard.type("Receipt checked.")
    _tab_to(page, "Confirm approve & next")
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"/console/approvals/{second.public_id}/")
    expect(page.locator(".message.success")).to_contain_text(
        f"Approved submit_refund ({first.public_id})"
    )
    page.keyboard.press("d")
    expect(page.get_by_label("Reason (sent to the model)")).to_be_focused()
    page.keyboard.type("Duplicate request.")
    _tab_to(page, "Confirm deny & next")
    page.keyboard.press("Enter")

    expect(page).to_have_url("/console/approvals/")
    expect(page.locator(".message.info")).to_contain_text("last approval")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, first.decision_reason) == ("APPROVED", "Receipt checked.")
    assert (second.state, second.decision_reason) == ("DENIED", "Duplicate request.")

    page.goto(f"/console/operations/{first.operation.public_id}/")
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED")
    outcome = page.get_by_test_id("outcome")
    expect(outcome).to_contain_text("Refund id RF-RD-ORD-1001-1")
    expect(outcome.get_by_role("link", name=first.public_id)).to_be_visible()
    check(page, "operation")
    page.goto(f"/console/operations/{second.operation.public_id}/")
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED after a denial")
    expect(page.get_by_test_id("outcome")).to_contain_text("Duplicate request.")
    check(page)

    page.goto("/console/approvals/decided/")
    expect(page.get_by_test_id("decisions").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("decisions")).to_contain_text("Duplicate request.")
    check(page, "decisions")


def test_a_draft_paid_by_another_request_cannot_be_approved(page: Page, demo: Any) -> None:
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
    smaller = {**paying, "amount_cents": 3000}
    other = start(demo, [r.response(r.call("s2", "submit_refund", smaller))]).approvals.get()
    again = start(demo, [r.response(r.call("s3", "submit_refund", paying))]).approvals.get()
    approval_decide(approval_pk=paid.approvals.get().pk, actor=operator(), approve=True)

    log_in(page, "operator")
    page.goto(f"/console/approvals/{other.public_id}/")
    expect(page.get_by_test_id("preview")).to_contain_text("already paid by another request")
    expect(page.get_by_test_id("approve-disabled")).to_have_attribute("aria-disabled", "true")
    expect(page.get_by_test_id("approve-blocked")).to_contain_text("approving would pay nothing")
    check(page, "approval-blocked")

    page.goto(f"/console/approvals/{again.public_id}/")  # the same refund asked again
    expect(page.get_by_test_id("preview")).to_contain_text("already submitted for this same refund")
    expect(page.get_by_role("link", name="Approve…")).to_be_visible()
    check(page, "approval-repeated")


def test_a_stale_decision_says_so_and_keeps_the_reason(
    page: Page, demo: Any, expected_errors: set[int]
) -> None:
    expected_errors.add(409)  # the refused decision's page answers 409
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    log_in(page, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/deny/")
    page.get_by_label("Reason (sent to the model)").fill("The customer withdrew the request.")
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)  # someone else
    page.get_by_role("button", name="Confirm deny", exact=True).click()
    expect(page.get_by_test_id("decide-error")).to_contain_text("already APPROVED")
    expect(page.get_by_label("Reason (sent to the model)")).to_have_value(
        "The customer withdrew the request."
    )
    check(page)


def test_an_expired_approval_shows_expired_before_the_sweep(page: Page, demo: Any) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    log_in(page, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("approval-state")).to_have_text("EXPIRED")
    expect(page.get_by_test_id("blocker")).to_contain_text("expired")
    expect(page.get_by_role("link", name="Approve…")).to_have_count(0)
    page.goto("/console/approvals/")
    expect(page.get_by_test_id("queue")).to_contain_text("EXPIRED")


def test_support_finds_operations_by_customer_order_and_id_prefix(page: Page, demo: Any) -> None:
    operations: list[Operation] = [start(demo, bundled_replies("refund_approve")) for _ in range(2)]
    log_in(page, "support")
    search = page.get_by_test_id("search")
    search.fill("CUS_1001")
    search.press("Enter")
    expect(page.get_by_test_id("result-count")).to_have_text("2 operations match “CUS_1001”.")
    expect(page.get_by_test_id("results")).to_contain_text("customer cus_1001")
    check(page, "search")
    search = page.get_by_test_id("search")
    search.fill("ord-1001")
    search.press("Enter")
    expect(page.get_by_test_id("result-count")).to_have_text("2 operations match “ord-1001”.")
    expect(page.get_by_test_id("results")).to_contain_text("order ord-1001")
    search = page.get_by_test_id("search")
    search.fill(operations[0].public_id[:12].upper())
    search.press("Enter")
    expect(page.get_by_test_id("operation-state")).to_be_visible()  # one match: straight to it
    assert operations[0].public_id in page.url
    page.goto("/console/operations/?customer=cus_1001")
    expect(page.get_by_test_id("operations").locator("tbody tr")).to_have_count(2)
    check(page, "operations")
    page.goto("/console/settings/")
    page.get_by_label("Show dates in the time zone").select_option("Europe/Paris")
    page.get_by_role("button", name="Save").click()
    page.goto(f"/console/operations/{operations[0].public_id}/")
    stamp = page.get_by_test_id("timeline").locator("time").first
    expect(stamp).to_contain_text("CET")
    expect(stamp).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))


def test_bulk_deny_reports_each_approval(page: Page, demo: Any) -> None:
    approvals = [start(demo, bundled_replies("refund_approve")).approvals.get() for _ in range(2)]
    log_in(page, "operator")
    page.goto("/console/approvals/")
    for approval in approvals:
        page.get_by_label(f"Select {approval.public_id}").check()
    page.get_by_label("Reason (needed to deny; sent to the model)").fill("Duplicate requests.")
    page.get_by_role("button", name="Deny ticked").click()
    report = page.get_by_test_id("bulk-report")
    expect(report.locator("tbody tr")).to_have_count(2)
    expect(report).to_contain_text("denied")
    check(page, "bulk-report")
