"""The console's words: a decided approval reads "Denied by …", and the queue's key hint names
the button it points to ("Confirm approve & next")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.services import approval_decide
from tests.engine import bundled_replies, operator, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _get(url: str) -> str:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    return client.get(url).content.decode()


def test_a_denied_approval_reads_denied_by_its_decider(demo: Any) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=False, reason="no order")
    page = _get(reverse("approvals:detail", args=[approval.public_id]))
    decided = page.split('data-testid="decided">')[1].split("</p>")[0]
    assert decided.startswith("Denied by operator at ") and "no order" in decided
    assert "Decided" not in decided


def test_the_key_hint_names_the_button(demo: Any) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    hint = _get(reverse("approvals:queue")).split('data-testid="shortcuts"')[1].split("</p>")[0]
    assert "“Confirm approve &amp; next”" in hint
    confirm = _get(reverse("approvals:decide", args=[approval.public_id, "approve"]))
    assert "Confirm approve &amp; next</button>" in confirm
