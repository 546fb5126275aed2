"""An approval whose operation ended before anyone decided it (cancelled, stopped …) stays
PENDING as recorded, but everywhere it is shown it reads as superseded: its page and its
operation's page say so, with no countdown, no dry run and no decide controls."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.states import ApprovalState
from tests.engine import bundled_replies, operator, start
from toolcalls.actors import Actor
from toolcalls.models import Operation
from toolcalls.services.operations import operation_cancel

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

BADGE = "SUPERSEDED — the operation ended (CANCELLED)"


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


@pytest.fixture
def cancelled(demo: Any) -> Operation:
    """A refund waiting for approval, then cancelled: its approval is superseded."""
    operation = start(demo, bundled_replies("refund_approve"))
    operation_cancel(operation_pk=operation.pk, actor=Actor.user(operator()), reason="not needed")
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
    approval.refresh_from_db()
    assert approval.state == ApprovalState.PENDING  # shown superseded, stored as asked


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
