"""In a real browser: the decide page refusing a megabyte edited argument (the error cut, the
arguments in their box), the decisions history with a superseded approval, and an operation
without an approval showing its amounts with their currency. Every page passes axe-core, fits
390 px, and is saved full-page at 1366 and 390 px under ``var/screenshots/``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests import replies as r
from tests.browser.pages import check, log_in
from tests.engine import bundled_replies, operator, start
from toolcalls.actors import Actor
from toolcalls.services.operations import operation_cancel

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]


def test_a_megabyte_edit_is_refused_with_its_error_cut_and_the_page_fits(
    page: Page, demo: Any
) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    log_in(page, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/approve/")
    edited = {**json.loads(approval.canonical_arguments), "order_id": "Z" * 1_000_000}
    page.get_by_label("Arguments (edit to approve with changes)").fill(json.dumps(edited))
    page.get_by_role("button", name="Confirm approve", exact=True).click()
    error = page.locator(".errorlist")
    expect(error).to_contain_text("more characters not shown: the arguments are below")
    check(page, "decide-long-edit-refused")


def test_the_decisions_history_shows_a_superseded_approval(page: Page, demo: Any) -> None:
    cancelled = start(demo, bundled_replies("refund_approve"))
    operation_cancel(operation_pk=cancelled.pk, actor=Actor.user(operator()), reason="moot")
    log_in(page, "support")
    page.goto("/console/approvals/decided/")
    row = page.get_by_test_id("decisions").locator("tbody tr")
    expect(row).to_contain_text("SUPERSEDED")
    expect(row).to_contain_text("the operation ended (CANCELLED)")
    expect(row).to_contain_text("no one (the operation ended)")
    check(page, "decisions-superseded")


def test_an_operation_without_approval_shows_amounts_with_their_currency(
    page: Page, demo: Any
) -> None:
    draft = {"order_id": "ORD-1001", "amount_cents": 1000, "reason": "damaged_item"}
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 1000}
    operation = start(
        demo,
        [
            r.response(r.call("call_draft", "create_refund_draft", draft)),
            r.response(r.call("call_submit", "submit_refund", submit)),
            r.final("Refunded."),
        ],
    )
    log_in(page, "support")
    page.goto(f"/console/operations/{operation.public_id}/")
    expect(page.get_by_test_id("outcome")).to_contain_text("Amount 10.00 USD")
    check(page, "operation-without-approval")
