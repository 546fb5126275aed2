"""The refund tools' checks read a draft together with its order: one statement for the
revalidation at resume and one for the operator's summary, with the same answers as before when
the order or the draft is not the customer's."""

from __future__ import annotations

from typing import Any

import pytest

from toolcalls.demo.models import Order, RefundDraft
from toolcalls.demo.services import CUSTOMER_REF
from toolcalls.demo.tools import refund_key, refund_precondition, refund_preview, refund_summary
from toolcalls.registry import ToolContext, ToolError

pytestmark = pytest.mark.django_db

CTX = ToolContext(
    tenant_ref="acme", subject_ref=CUSTOMER_REF, operation_id="op_x", provider_call_id="c1"
)


@pytest.fixture
def draft(demo: Any) -> RefundDraft:
    order = Order.objects.get(tenant_ref="acme", order_id="ORD-1001")
    return RefundDraft.objects.create(
        tenant_ref="acme", draft_id="RD-ORD-1001-1", order=order, amount_cents=4999, reason="other"
    )


def _submit(**changes: Any) -> dict[str, Any]:
    return {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999, **changes}


def test_the_checks_at_resume_and_the_summary_read_the_draft_with_its_order_at_once(
    draft: RefundDraft, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(1):
        refund_precondition(CTX, _submit())
    with django_assert_num_queries(1):
        summary = refund_summary(CTX, _submit())
    assert summary == {
        "customer": CUSTOMER_REF,
        "order": "ORD-1001",
        "amount_cents": 4999,
        "currency": "USD",
        "reason": "other",
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (_submit(order_id="ORD-2001"), "ORDER_NOT_FOUND"),  # another customer's order
        (_submit(order_id="ORD-9999"), "ORDER_NOT_FOUND"),
        (_submit(draft_id="RD-ORD-1001-7"), "DRAFT_MISMATCH"),
        (_submit(order_id="ORD-1002"), "DRAFT_MISMATCH"),  # the draft is another order's
        (_submit(amount_cents=5000), "DRAFT_MISMATCH"),  # more than the draft covers
    ],
)
def test_an_order_or_draft_not_the_customers_is_refused_as_before(
    draft: RefundDraft, args: dict[str, Any], code: str
) -> None:
    for check in (refund_precondition, refund_preview):
        with pytest.raises(ToolError) as raised:
            check(CTX, args)
        assert raised.value.code == code


def test_the_summary_of_a_draft_that_is_gone_still_gives_the_orders_currency(
    draft: RefundDraft,
) -> None:
    summary = refund_summary(CTX, _submit(draft_id="RD-ORD-1001-7"))
    assert summary == {
        "customer": CUSTOMER_REF,
        "order": "ORD-1001",
        "amount_cents": 4999,
        "currency": "USD",
    }
    assert refund_summary(CTX, _submit(order_id="ORD-2001")) == {
        "customer": CUSTOMER_REF,
        "order": "ORD-2001",
        "amount_cents": 4999,
    }


def _paid(draft: RefundDraft, args: dict[str, Any]) -> None:
    """``draft`` paid out for ``args``, as ``submit_refund`` records it."""
    draft.status = RefundDraft.Status.SUBMITTED
    draft.save(update_fields=["status"])
    draft.ledger.create(
        tenant_ref="acme",
        refund_id=f"RF-{draft.draft_id}",
        order=draft.order,
        amount_cents=args["amount_cents"],
        idempotency_key=refund_key(CTX, args),
        operation_ref="op_x",
        call_ref="c0",
    )


def test_a_paid_draft_passes_for_the_same_refund_and_its_preview_pays_nothing_more(
    draft: RefundDraft,
) -> None:
    _paid(draft, _submit())
    refund_precondition(CTX, _submit())  # the stored result answers it
    preview = refund_preview(CTX, _submit())
    assert preview["this_refund_cents"] == 0
    assert "already submitted for this same refund" in preview["note"]


def test_a_draft_paid_by_another_request_is_refused(draft: RefundDraft) -> None:
    _paid(draft, _submit(amount_cents=3000))
    with pytest.raises(ToolError) as raised:
        refund_precondition(CTX, _submit())
    assert raised.value.code == "DRAFT_ALREADY_SUBMITTED"
    assert "already paid by another request" in raised.value.message
