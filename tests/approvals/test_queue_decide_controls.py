"""The queue offers its decide controls (a tick per row, the bulk buttons, the approve and deny
keys) only to users who may decide: support staff, who can read approvals but not decide them,
get none; a requester gets no bulk buttons when nothing on the page is theirs to decide."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.factories import pending_approval

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

TICK = 'type="checkbox" name="approval"'
BULK = 'data-testid="bulk"'
KEYS = "<kbd>a</kbd> approve, <kbd>d</kbd> deny"


def _queue(username: str) -> str:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    response = client.get(reverse("approvals:queue"))
    assert response.status_code == 200
    return response.content.decode()


def test_an_operator_gets_a_tick_per_row_the_bulk_buttons_and_the_keys(demo: Any) -> None:
    approvals = [pending_approval(demo.tenant) for _ in range(2)]
    page = _queue("operator")
    assert page.count(TICK) == 2 and all(f"Select {a.public_id}" in page for a in approvals)
    assert BULK in page and "Approve ticked" in page and "Deny ticked" in page
    assert KEYS in page


def test_support_staff_get_no_decide_controls(demo: Any) -> None:
    approval = pending_approval(demo.tenant)
    page = _queue("support")
    assert approval.public_id in page  # they read the queue
    assert TICK not in page and BULK not in page and "Approve ticked" not in page
    assert KEYS not in page and "<kbd>j</kbd>" in page
    assert '<span class="visually-hidden">Select</span>' not in page  # no empty column


def test_a_requester_gets_no_bulk_buttons_with_nothing_to_tick(demo: Any) -> None:
    requester = User.objects.get(username="requester")
    own = pending_approval(demo.tenant, requested_by=requester)
    page = _queue("requester")
    assert own.public_id in page and 'data-testid="mine"' in page
    assert TICK not in page and BULK not in page and "Approve ticked" not in page
    assert KEYS in page  # they decide other people's requests


def test_a_requester_may_tick_the_others_requests_only(demo: Any) -> None:
    requester = User.objects.get(username="requester")
    own = pending_approval(demo.tenant, requested_by=requester)
    other = pending_approval(demo.tenant)
    page = _queue("requester")
    assert page.count(TICK) == 1 and f"Select {other.public_id}" in page
    assert f"Select {own.public_id}" not in page and BULK in page
