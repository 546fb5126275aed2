"""An approval whose operation ended before anyone decided it (cancelled, stopped …) is recorded
SUPERSEDED, and everywhere it is shown it reads so: its page and its operation's page, with no
countdown, no dry run and no decide controls; the decisions history lists it among the ended
approvals, at the time its operation ended, with a Decision filter value of its own."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from approvals.selectors import DecisionFilters, approvals_decided
from approvals.services import approval_decide
from approvals.states import ApprovalState
from tests.engine import bundled_replies, operator, start
from toolcalls.actors import Actor
from toolcalls.models import AuditEvent, Operation
from toolcalls.services.operations import operation_cancel
from toolcalls.states import AuditKind

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

BADGE = "SUPERSEDED — the operation ended (CANCELLED)"


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def _cancel(operation: Operation) -> None:
    operation_cancel(operation_pk=operation.pk, actor=Actor.user(operator()), reason="not needed")


@pytest.fixture
def cancelled(demo: Any) -> Operation:
    """A refund waiting for approval, then cancelled: its approval is superseded."""
    operation = start(demo, bundled_replies("refund_approve"))
    _cancel(operation)
    return operation


@pytest.mark.parametrize("username", ["operator", "support"])
def test_the_approval_page_shows_it_superseded_without_countdown_dry_run_or_controls(
    cancelled: Operation, username: str
) -> None:
    approval = cancelled.approvals.get()
    page = _client(username).get(reverse("approvals:detail", args=[approval.public_id]))
    text = page.content.decode()
    assert BADGE in text
    assert 'class="state PENDING"' not in text
    assert "data-countdown" not in text
    assert 'data-testid="preview"' not in text and "dry run" not in text
    assert "Approve…" not in text and "Deny…" not in text and 'data-shortcut="a"' not in text
    decided = re.search(r'data-testid="decided">(.*?)</p>', text, re.S)
    assert decided and "Superseded at" in decided.group(1)
    assert "the operation ended (CANCELLED) before anyone decided" in decided.group(1)
    approval.refresh_from_db()
    assert approval.state == ApprovalState.SUPERSEDED


def test_the_operation_page_lists_it_superseded(cancelled: Operation) -> None:
    approval = cancelled.approvals.get()
    page = _client("support").get(reverse("operations:detail", args=[cancelled.public_id]))
    listed = page.content.decode().split('data-testid="approvals"')[1].split("</ul>")[0]
    assert approval.public_id in listed and BADGE in listed
    assert "PENDING" not in listed


def test_a_live_approval_still_shows_pending_with_its_countdown_and_dry_run(demo: Any) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    approval = operation.approvals.get()
    text = _client("operator").get(reverse("approvals:detail", args=[approval.public_id]))
    page = text.content.decode()
    assert 'class="state PENDING"' in page and "SUPERSEDED" not in page
    assert "data-countdown" in page and 'data-testid="preview"' in page and "Approve…" in page
    listed = _client("operator").get(reverse("operations:detail", args=[operation.public_id]))
    assert 'class="state PENDING"' in listed.content.decode().split('data-testid="approvals"')[1]


def _history(query: dict[str, str] | None = None, username: str = "support") -> str:
    response = _client(username).get(reverse("approvals:decisions"), query or {})
    assert response.status_code == 200
    return response.content.decode()


def _rows(page: str) -> list[str]:
    """The history's rows, in order, as the approval each links to."""
    return re.findall(r'<td data-label="Call"><a href="/console/approvals/(apr_\w+)/"', page)


def _row(page: str, public_id: str) -> str:
    found = re.search(rf"<tr>((?:(?!</tr>).)*{public_id}.*?)</tr>", page, re.S)
    assert found, public_id
    return found.group(1)


def test_the_decisions_history_lists_it_superseded_when_its_operation_ended(demo: Any) -> None:
    """It was left out (the history is ordered by decision time, which it had none of): support
    staff could not find there what happened to it."""
    denied_first = start(demo, bundled_replies("refund_approve")).approvals.get()
    approval_decide(approval_pk=denied_first.pk, actor=operator(), approve=False, reason="No.")
    superseded = start(demo, bundled_replies("refund_approve"))
    _cancel(superseded)
    approval = superseded.approvals.get()
    denied_last = start(demo, bundled_replies("refund_approve")).approvals.get()
    approval_decide(approval_pk=denied_last.pk, actor=operator(), approve=False, reason="No.")
    page = _history()
    assert _rows(page) == [denied_last.public_id, approval.public_id, denied_first.public_id]
    row = _row(page, approval.public_id)
    assert approval.decided_at is not None
    assert f'datetime="{approval.decided_at.isoformat()}"' in row  # when it was superseded
    ended = AuditEvent.objects.get(
        operation=superseded, kind=AuditKind.OPERATION_TRANSITION, to_state="CANCELLED"
    ).created_at
    assert abs((approval.decided_at - ended).total_seconds()) < 5
    assert '<span class="state SUPERSEDED">SUPERSEDED</span>' in row
    assert "the operation ended (CANCELLED)" in row and "no one (the operation ended)" in row
    assert "PENDING" not in row and "it expired" not in row
    assert '<option value="SUPERSEDED">superseded</option>' in page
    assert _rows(_history({"state": "SUPERSEDED"})) == [approval.public_id]
    assert approval.public_id not in _rows(_history({"state": "DENIED"}))
    assert approval.public_id not in _rows(_history({"decided_by": "operator"}))
    assert _rows(_history({"tool": "submit_refund"}))[1] == approval.public_id


def test_the_history_pages_through_decided_and_superseded_approvals_alike(demo: Any) -> None:
    ended = []
    for index in range(5):
        operation = start(demo, bundled_replies("refund_approve"))
        if index % 2:
            _cancel(operation)
        else:
            pk = operation.approvals.get().pk
            approval_decide(approval_pk=pk, actor=operator(), approve=False, reason="No.")
        ended.append(operation.approvals.get().public_id)
    support = User.objects.get(username="support")
    seen: list[str] = []
    cursor = None
    for _page in range(3):
        page = approvals_decided(user=support, filters=DecisionFilters(), cursor=cursor, size=2)
        seen += [approval.public_id for approval in page.rows]
        cursor = page.next_cursor
    assert cursor is None
    assert seen == ended[::-1]
