"""The console in a real browser: log in, filter the queue, approve (as proposed and with an edited
amount), deny with a reason, and find an operation by its idempotency key as support staff."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from tests import replies as r
from tests.browser.conftest import Screenshot
from tests.engine import bundled_replies, start
from tests.factories import ApprovalRequestFactory
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]

SUBMITTED = "has been submitted"  # the scripted model's answer to a refund that ran
NOT_APPROVED = "did not go through"  # ... and to a denial


@pytest.fixture
def parked(demo: Any) -> Operation:
    """The demo refund, parked at WAITING_APPROVAL on its $49.99 ``submit_refund``."""
    return start(demo, bundled_replies("refund_approve"))


def _other_pending(demo: Any, tool_name: str) -> ApprovalRequest:
    """A pending approval of ``tool_name`` in the demo tenant, on an operation of its own."""
    approval = ApprovalRequestFactory.create(tool_name=tool_name, risk="write")
    operation = approval.operation
    operation.tenant = demo.tenant
    operation.save(update_fields=["tenant"])
    approval.tenant = demo.tenant
    approval.save(update_fields=["tenant"])
    return approval


def _log_in(page: Page, screenshot: Screenshot, username: str) -> None:
    """Open the console, get sent to the login form, and log in through it."""
    page.goto("/")
    expect(page).to_have_title("Log in · Callgate")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-demo-pass")
    screenshot("login")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("form.who span")).to_have_text(username)


def _open_decision(page: Page, approval: ApprovalRequest, decision: str) -> None:
    """From the approval detail page, follow "Approve…" or "Deny…" to the confirmation page."""
    page.get_by_role("link", name=f"{decision.title()}…").click()
    expect(page.get_by_role("heading", name=f"{decision.title()} submit_refund?")).to_be_visible()
    expect(page.locator("code.digest")).to_have_text(approval.arguments_sha256)


def test_operator_filters_the_queue_and_approves_the_refund(
    page: Page, screenshot: Screenshot, demo: Any, parked: Operation
) -> None:
    refund = parked.approvals.get()
    draft = _other_pending(demo, "create_refund_draft")
    _log_in(page, screenshot, "operator")

    queue = page.get_by_test_id("queue")
    expect(page.get_by_role("heading", name="Pending approvals")).to_be_visible()
    expect(page.get_by_test_id("pending-count")).to_have_text("2")
    expect(queue.locator("tbody tr")).to_have_count(2)
    expect(queue).to_contain_text(refund.public_id)
    expect(queue).to_contain_text(draft.public_id)
    screenshot("queue")

    filters = page.get_by_test_id("filters")
    filters.locator("select[name=tool]").select_option("submit_refund")
    filters.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"\?tool=submit_refund&"))
    expect(queue.locator("tbody tr")).to_have_count(1)
    expect(queue).not_to_contain_text(draft.public_id)
    row = queue.locator("tbody tr").first
    expect(row).to_contain_text("submit_refund")
    expect(row).to_contain_text("irreversible")
    expect(row).to_contain_text("49.99")
    expect(filters.get_by_role("link", name="Clear")).to_be_visible()
    screenshot("queue-filtered")

    row.get_by_role("link", name="cus_1001 · ORD-1001 · 49.99 USD · damaged item").click()
    expect(page.get_by_test_id("approval-state")).to_have_text("PENDING")
    expect(page.get_by_test_id("tool")).to_have_text("submit_refund")
    expect(page.get_by_test_id("amount")).to_contain_text("49.99")
    expect(page.get_by_test_id("digest")).to_have_text(refund.arguments_sha256)
    expect(page.get_by_test_id("arguments")).to_contain_text('"draft_id": "RD-ORD-1001-1"')
    expect(page.get_by_test_id("preview")).to_be_visible()
    screenshot("approval-detail")

    _open_decision(page, refund, "approve")
    screenshot("approve-confirm")
    page.get_by_role("button", name="Confirm approve", exact=True).click()

    expect(page).to_have_url(re.compile(rf"/console/operations/{parked.public_id}/$"))
    expect(page.get_by_role("status")).to_contain_text(
        f"Approved submit_refund ({refund.public_id})"
    )
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED")
    expect(page.get_by_test_id("final-text")).to_contain_text(SUBMITTED)
    expect(page.get_by_test_id("pending-count")).to_have_text("1")  # the other tool's approval
    screenshot("operation-completed")


def test_operator_approves_an_edited_amount(
    page: Page, screenshot: Screenshot, parked: Operation
) -> None:
    approval = parked.approvals.get()
    _log_in(page, screenshot, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("approval-state")).to_have_text("PENDING")
    screenshot("approval-detail")

    _open_decision(page, approval, "approve")
    arguments = page.get_by_label("Arguments (edit to approve with changes)")
    proposed = json.loads(arguments.input_value())
    assert proposed == {"amount_cents": 4999, "draft_id": "RD-ORD-1001-1", "order_id": "ORD-1001"}
    arguments.fill(json.dumps({**proposed, "amount_cents": 3000}, indent=2))
    screenshot("approve-edited")
    page.get_by_role("button", name="Confirm approve", exact=True).click()

    expect(page.get_by_role("status")).to_contain_text(
        "Approved submit_refund with edited arguments"
    )
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED")
    expect(page.get_by_test_id("final-text")).to_be_visible()
    screenshot("operation-completed")
    assert list(LedgerEntry.objects.values_list("amount_cents", flat=True)) == [3000]

    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("approval-state")).to_have_text("APPROVED")
    expect(page.get_by_test_id("arguments")).to_contain_text('"amount_cents": 3000')
    expect(page.get_by_text("As the model proposed them (edited by operator)")).to_be_visible()
    expect(page.get_by_test_id("original-arguments")).to_contain_text('"amount_cents": 4999')
    expect(page.get_by_text("Approved by operator")).to_be_visible()
    expect(page.get_by_role("link", name="Approve…")).to_have_count(0)
    screenshot("approval-after-edit")


def test_operator_denies_with_a_reason(
    page: Page, screenshot: Screenshot, parked: Operation
) -> None:
    approval = parked.approvals.get()
    _log_in(page, screenshot, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("approval-state")).to_have_text("PENDING")
    screenshot("approval-detail")

    _open_decision(page, approval, "deny")
    expect(page.locator("pre")).to_contain_text('"draft_id": "RD-ORD-1001-1"')  # pretty JSON
    reason = page.get_by_label("Reason (sent to the model)")
    confirm = page.get_by_role("button", name="Confirm deny", exact=True)
    confirm.click()  # empty: the browser itself refuses to send the form
    assert reason.evaluate("field => field.validity.valueMissing") is True
    expect(page).to_have_url(re.compile(r"/deny/$"))
    reason.fill("   ")  # only blanks: sent, and refused by the server
    confirm.click()
    expect(page.locator(".errorlist")).to_have_text("This field is required.")
    expect(page.get_by_role("heading", name="Deny submit_refund?")).to_be_visible()
    screenshot("deny-reason-required")
    assert ApprovalRequest.objects.get(pk=approval.pk).state == "PENDING"

    reason.fill("Ask the customer for a photo of the damage first.")
    confirm.click()
    expect(page.get_by_role("status")).to_contain_text(
        f"Denied submit_refund ({approval.public_id})"
    )
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED after a denial")
    expect(page.get_by_test_id("final-text")).to_contain_text(NOT_APPROVED)
    screenshot("operation-completed")
    assert LedgerEntry.objects.count() == 0

    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("approval-state")).to_have_text("DENIED")
    expect(page.get_by_text("“Ask the customer for a photo of the damage first.”")).to_be_visible()
    screenshot("approval-denied")


def test_support_finds_an_operation_by_its_idempotency_key(
    page: Page, screenshot: Screenshot, demo: Any, parked: Operation
) -> None:
    key = parked.calls.get(tool_name="create_refund_draft").idempotency_key
    assert key
    kinds = list(parked.events.order_by("seq").values_list("kind", flat=True))
    lookups = [
        r.response(r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"})) for i in (1, 2)
    ]
    escalated = start(demo, [*lookups, r.final()], budgets={"max_turns": 1})
    _log_in(page, screenshot, "support")

    search = page.get_by_test_id("search")
    search.fill(key)
    search.press("Enter")
    expect(page).to_have_url(re.compile(rf"/console/operations/{parked.public_id}/$"))
    expect(page.get_by_test_id("operation-state")).to_have_text("WAITING_APPROVAL")
    # The draft call's key, one click away among its IDs and digests.
    draft = page.get_by_test_id("call").filter(has_text="create_refund_draft")
    draft.get_by_text("IDs and digests").click()
    expect(draft.get_by_text(key, exact=True)).to_be_visible()

    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_be_visible()
    expect(timeline.locator("li")).to_have_count(len(kinds))
    assert timeline.locator("li > p strong").all_inner_texts() == kinds

    diagram = page.get_by_test_id("diagram")
    expect(diagram).to_be_visible()
    assert diagram.evaluate("svg => svg.tagName") == "svg"
    current = diagram.locator("g.node.current")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("data-state", "WAITING_APPROVAL")
    expect(diagram.locator('g.node.visited[data-state="COMPLETED"]')).to_have_count(0)

    expect(page.get_by_test_id("escalation")).to_have_count(0)
    expect(page.get_by_role("button")).to_have_text(["Log out"])  # no control but logging out
    screenshot("operation-waiting")

    approval = parked.approvals.get()
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("blocker")).to_have_text(
        "You can read approvals but not decide them."
    )
    expect(page.get_by_role("link", name="Approve…")).to_have_count(0)
    expect(page.get_by_role("link", name="Deny…")).to_have_count(0)
    screenshot("approval-read-only")

    page.get_by_role("link", name="Escalated").click()
    escalations = page.get_by_test_id("escalations")
    expect(escalations).to_contain_text("MAX_TURNS")
    screenshot("escalations")
    escalations.get_by_role("link", name=escalated.public_id).click()
    expect(page.get_by_test_id("operation-state")).to_have_text("ESCALATED")
    expect(page.get_by_test_id("escalation")).to_have_count(0)
    expect(page.get_by_role("button")).to_have_text(["Log out"])
    expect(page.get_by_test_id("diagram").locator("g.node.current")).to_have_attribute(
        "data-state", "ESCALATED"
    )
    screenshot("operation-escalated")
