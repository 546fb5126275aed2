"""The rest of the console as a person uses it, in a real browser: sorting and the labelled
filters of the queue, a requester's own request marked as not theirs to decide, a refund that
failed badged as such on top, an extension that changes nothing refused, the settings,
escalations and tools pages, the skip link, and the styled 403 and 404 pages (DEBUG off). Every
page passes axe-core and fits 390 px."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import RequestFactory
from django.views.defaults import server_error
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from tests import replies as r
from tests.browser.pages import check, log_in
from tests.engine import bundled_replies, operator, start
from tests.factories import (
    small_and_large,
)
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.models import Operation
from toolcalls.registry import ToolContext, ToolError
from toolcalls.services.catalogue import tenant_tool_set

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]


def _expect_rows(page: Page, *approvals: ApprovalRequest) -> None:
    """The queue's rows are these approvals, top to bottom (waiting for the page to load)."""
    ids = page.get_by_test_id("queue").get_by_test_id("approval-id")
    expect(ids).to_have_text([approval.public_id for approval in approvals])


def _filter(page: Page, **choices: str) -> None:
    """Set the queue's filters by their labels, press Filter and wait for the new page."""
    filters = page.get_by_test_id("filters")
    for label, value in choices.items():
        field = filters.get_by_label(re.compile(rf"^{label}\b"))
        if field.evaluate("f => f.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    with page.expect_navigation():
        filters.get_by_role("button", name="Filter").click()


def test_operator_sorts_and_filters_the_queue_by_its_labels(page: Page, demo: Any) -> None:
    small, large = small_and_large(demo.tenant)
    log_in(page, "operator")
    page.goto("/console/approvals/")
    _expect_rows(page, small, large)  # soonest expiry first
    _filter(page, **{"Sort by": "amount"})
    _expect_rows(page, large, small)
    _filter(page, **{"Sort by": "age"})
    _expect_rows(page, large, small)
    _filter(page, **{"Amount from": "10", "Amount to": "1000.00"})
    _expect_rows(page, large)
    check(page, "queue-filtered")
    with page.expect_navigation():
        page.get_by_test_id("filters").get_by_role("link", name="Clear").click()
    page.get_by_label("Expiring within 15 minutes").check()
    _filter(page)
    _expect_rows(page, small)
    _filter(page, **{"Requested by": "nobody"})
    expect(page.get_by_test_id("queue")).to_have_count(0)
    expect(page.get_by_text("Nothing is waiting for a decision with these filters")).to_be_visible()
    for label in ("Tool", "Risk", "Tenant"):
        expect(
            page.get_by_test_id("filters").get_by_label(re.compile(rf"^{label}\b"))
        ).to_be_visible()
    check(page)


def test_a_requester_sees_their_own_request_as_not_theirs_to_decide(page: Page, demo: Any) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    log_in(page, "requester")
    page.goto("/console/approvals/")
    expect(page.get_by_test_id("queue")).to_contain_text("your request: another operator decides")
    check(page)
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_test_id("blocker")).to_have_text(
        "You requested this call; another operator must decide it."
    )
    expect(page.get_by_role("link", name="Approve…")).to_have_count(0)
    check(page)


def _declined(ctx: ToolContext, arguments: Mapping[str, Any]) -> dict[str, Any]:
    raise ToolError("CARD_DECLINED", "The bank declined the refund.")


def test_a_failed_refund_is_badged_and_explained_on_top(
    page: Page, demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = registry.get("submit_refund")
    assert spec is not None
    monkeypatch.setitem(
        registry._REGISTRY, "submit_refund", dataclasses.replace(spec, handler=_declined)
    )
    failed: Operation = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=failed.approvals.get().pk, actor=operator(), approve=True)
    log_in(page, "support")
    page.goto(f"/console/operations/{failed.public_id}/")
    expect(page.get_by_test_id("operation-state")).to_have_text("COMPLETED, submit_refund failed")
    outcome = page.get_by_test_id("outcome")
    expect(outcome).to_contain_text("CARD_DECLINED")
    expect(outcome).to_contain_text("The bank declined the refund.")
    top = outcome.bounding_box()
    assert top is not None and top["y"] < 400  # first thing under the heading
    check(page, "operation-refund-failed")


def _escalated(demo: Any) -> Operation:
    lookups = [
        r.response(r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"})) for i in (1, 2)
    ]
    return start(demo, [*lookups, r.final()], budgets={"max_turns": 1})


def test_an_extension_that_changes_nothing_is_refused(page: Page, demo: Any) -> None:
    operation = _escalated(demo)
    log_in(page, "operator")
    page.get_by_role("link", name="Escalated").click()
    expect(page.get_by_test_id("escalations")).to_contain_text("MAX_TURNS")
    check(page, "escalations")
    page.get_by_test_id("escalations").get_by_role("link", name=operation.public_id).click()
    check(page)
    page.get_by_role("button", name="Extend and resume").click()
    expect(page.locator(".message.error")).to_contain_text("raise max_turns")
    expect(page.get_by_test_id("operation-state")).to_have_text("ESCALATED")
    operation.refresh_from_db()
    assert (operation.state, operation.turn_count) == ("ESCALATED", 1)
    check(page)


def test_the_tools_page_lists_the_tenants_catalogue(page: Page, demo: Any) -> None:
    tenant_tool_set(
        tenant=demo.tenant,
        tool_name="submit_refund",
        enabled=True,
        max_calls=2,
        approval="threshold",
        approval_threshold=1000,
        actor=Actor.system("tests"),
    )
    log_in(page, "operator")
    page.get_by_role("navigation").get_by_role("link", name="Tools").click()
    expect(page.get_by_role("heading", name="Acme Outfitters")).to_be_visible()
    row = page.get_by_test_id("tool-submit_refund")
    expect(row).to_contain_text("threshold 1000 cents (tenant override")
    expect(row.get_by_role("cell", name="2 (tenant override)")).to_be_visible()
    check(page, "tools")
    page.set_viewport_size({"width": 390, "height": 900})  # axe at the narrow width too
    check(page)


def test_the_settings_page_and_the_styled_error_pages(
    page: Page, demo: Any, expected_errors: set[int]
) -> None:
    operation = _escalated(demo)
    log_in(page, "operator")
    page.goto("/console/settings/")
    expect(page.get_by_label("Show dates in the time zone")).to_be_visible()
    check(page)
    page.keyboard.press("Tab")  # the first stop on every page
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()

    expected_errors.update({403, 404})
    response = page.goto("/console/operations/op_000000000000000000000000/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_test_id("search")).to_be_visible()
    check(page, "not-found")

    page.goto(f"/console/operations/{operation.public_id}/")
    resolve = Permission.objects.get(codename="resolve_operation")
    Group.objects.get(name="operators").permissions.remove(resolve)  # revoked meanwhile
    page.get_by_label("Reason").fill("The customer asked us to stop.")
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_text("You may not act on escalated operations.")).to_be_visible()
    check(page, "not-allowed")


def test_the_500_page_passes_the_page_checks(page: Page, settings: Any) -> None:
    """The 500 page is rendered as production renders it (DEBUG off) and shown at the live
    server's address, so its stylesheet loads as it would for a failed request."""
    settings.DEBUG = False
    html = server_error(RequestFactory().get("/console/approvals/")).content.decode()
    page.goto("/login/")
    page.set_content(html)
    expect(page.get_by_role("heading", name="Something went wrong on our side")).to_be_visible()
    check(page, "server-error")
