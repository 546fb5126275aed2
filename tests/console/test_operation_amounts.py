"""An operation's page shows every amount in cents with its currency, as the approval pages do,
whether or not the operation asked for an approval: the arguments, what the model was told and
the outcome."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from toolcalls.demo.models import Order
from toolcalls.models import Operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

DRAFT = {"order_id": "ORD-1001", "amount_cents": 1000, "reason": "damaged_item"}
SUBMIT = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 1000}


def _page(operation: Operation) -> str:
    client = Client()
    assert client.login(username="support", password="support-demo-pass")
    response = client.get(reverse("operations:detail", args=[operation.public_id]))
    assert response.status_code == 200
    return response.content.decode()


def _amounts(page: str) -> list[str]:
    """Each amount in cents the outcome and the calls show (``12.34``, with what follows it up
    to the tag's end); the budgets' and the turns' model costs are in USD, whatever the shop's
    currency."""
    outcome = page[page.index('data-testid="outcome"') : page.index("</section>")]
    calls = page[page.index("<h2>Turns and calls</h2>") : page.index("<h2>Timeline</h2>")]
    return re.findall(r">(\d[\d,]*\.\d\d(?: [A-Z]{3})?)<", outcome + calls)


@pytest.fixture
def euros(demo: Any) -> None:
    Order.objects.filter(tenant_ref="acme", order_id="ORD-1001").update(currency="EUR")


@pytest.mark.usefixtures("euros")
def test_a_refund_below_the_threshold_shows_its_amounts_with_the_currency(demo: Any) -> None:
    """No approval, and no call that looked the order up: the amounts showed bare (the currency
    came only from approvals' summaries)."""
    replies = [
        r.response(r.call("call_draft", "create_refund_draft", DRAFT)),
        r.response(r.call("call_submit", "submit_refund", SUBMIT)),
        r.final("Refunded 10.00 EUR."),
    ]
    operation = start(demo, replies)
    assert operation.state == "COMPLETED" and not operation.approvals.exists()
    page = _page(operation)
    amounts = _amounts(page)
    assert "10.00 EUR" in amounts
    assert all(amount.endswith(" EUR") for amount in amounts), amounts
    outcome = page[page.index('data-testid="outcome"') : page.index("</section>")]
    assert "Amount <strong><bdi>10.00 EUR</bdi></strong>" in outcome


@pytest.mark.usefixtures("euros")
def test_an_approved_refund_shows_every_amount_with_the_currency_as_before(demo: Any) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    amounts = _amounts(_page(operation))
    assert amounts and all(amount.endswith(" EUR") for amount in amounts), amounts
