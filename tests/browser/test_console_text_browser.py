"""Text the console did not write, in a real browser: a 6000-character word wraps instead of
widening the approval, operation and search pages (at 1280 and 390 px), a bidirectional
override shows as a marker instead of reordering what is around it, and the queue's keys work
from a ticked checkbox (``j``/``k`` move, ``x`` ticks). Every page passes axe-core."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals.services import approval_decide
from tests.browser.pages import check, log_in
from tests.engine import bundled_replies, operator, start
from toolcalls.models import ModelTurn, Operation

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]

LONG = "X" * 6000


def _fits(page: Page) -> None:
    """At 1280 and 390 px the page is no wider than the window."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width, f"{page.url} is {scroll_width} px wide at {width} px"
    page.set_viewport_size({"width": 1280, "height": 800})


def _parked(demo: Any, **fields: str) -> Operation:
    """A refund waiting for its approval, with ``fields`` of the operation replaced."""
    operation = start(demo, bundled_replies("refund_approve"))
    Operation.objects.filter(pk=operation.pk).update(**fields)
    return operation


def test_a_long_unbroken_input_wraps_on_the_approval_and_operation_pages(
    page: Page, demo: Any
) -> None:
    operation = _parked(demo, input_text=LONG)
    ModelTurn.objects.filter(operation=operation).update(text="Y" * 6000)
    approval = operation.approvals.get()
    log_in(page, "operator")
    page.goto(f"/console/approvals/{approval.public_id}/")
    expect(page.get_by_text(LONG)).to_be_visible()
    _fits(page)
    check(page, "approval-long-input")
    page.goto(f"/console/operations/{operation.public_id}/")
    expect(page.get_by_test_id("input-text")).to_have_text(LONG)
    _fits(page)
    check(page, "operation-long-input")


def test_a_long_query_wraps_where_the_search_repeats_it(page: Page, demo: Any) -> None:
    log_in(page, "support")
    page.goto("/console/search/?q=" + "Q" * 5000)
    expect(page.get_by_test_id("no-results")).to_contain_text("QQQQ")
    _fits(page)
    check(page, "search-long-query")


def test_a_right_to_left_override_shows_as_a_marker(page: Page, demo: Any) -> None:
    operation = _parked(demo, subject_ref="cus_\u202eevil", input_text="Refund \u202e00.001$")
    log_in(page, "support")
    page.goto("/console/operations/")
    cell = page.get_by_test_id("operations").locator("td[data-label=Customer]").first
    expect(cell).to_have_text("cus_⟨U+202E⟩evil (acme)")
    marker = cell.locator(".control")
    expect(marker).to_have_attribute("title", "U+202E RIGHT-TO-LEFT OVERRIDE")
    # Isolated: "(acme)" is drawn after the customer, left to right, not reversed into it.
    ref_box, tenant_box = cell.locator("code").bounding_box(), cell.locator("small").bounding_box()
    assert ref_box and tenant_box and tenant_box["x"] >= ref_box["x"] + ref_box["width"]
    check(page)
    page.goto(f"/console/operations/{operation.public_id}/")
    expect(page.get_by_test_id("input-text")).to_have_text("Refund ⟨U+202E⟩00.001$")
    check(page)


def test_j_k_and_x_work_while_a_checkbox_has_the_focus(page: Page, demo: Any) -> None:
    first = start(demo, bundled_replies("refund_approve")).approvals.get()
    second = start(demo, bundled_replies("refund_approve")).approvals.get()
    log_in(page, "operator")
    page.goto("/console/approvals/")
    expect(page.get_by_test_id("shortcuts")).to_contain_text("x tick or untick it")
    boxes = [page.locator(f"#pick-{approval.public_id}") for approval in (first, second)]
    boxes[0].focus()
    page.keyboard.press("j")
    links = page.get_by_test_id("queue").locator("[data-row-link]")
    expect(links.nth(1)).to_be_focused()
    page.keyboard.press("x")
    expect(boxes[1]).to_be_checked()
    expect(boxes[0]).not_to_be_checked()
    boxes[1].focus()
    page.keyboard.press("x")  # on the checkbox itself
    expect(boxes[1]).not_to_be_checked()
    page.keyboard.press("k")
    expect(links.nth(0)).to_be_focused()
    page.keyboard.press("x")
    expect(boxes[0]).to_be_checked()
    check(page)


def test_the_decisions_history_keeps_each_moment_on_one_line(page: Page, demo: Any) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    approval_decide(
        approval_pk=operation.approvals.get().pk,
        actor=operator(),
        approve=False,
        reason="Customer asked twice; the first refund is on its way. " * 8,
    )
    log_in(page, "operator")
    page.goto("/console/approvals/decided/")
    moment = page.get_by_test_id("decisions").locator("td[data-label=When] time")
    expect(moment).to_have_count(1)
    assert moment.evaluate("e => e.getClientRects().length") == 1  # one line box
    check(page, "decisions-long-reason")
