"""The demo refund tools, registered on import (``CALLGATE_TOOL_MODULES``).

``get_order`` (read) → ``create_refund_draft`` (write) → ``submit_refund`` (irreversible,
approval above ``CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS``). Amounts are in cents. Every
lookup is scoped to the operation's tenant and subject (the customer), never to model input;
the refund tools' ``authorize`` hook refuses an order that is not the customer's before anything
runs.

Idempotency keys name the tenant and the customer (the subject) as well as the order: tenants
number their orders and drafts alike (two tenants may both have ``ORD-1001`` and its draft
``RD-ORD-1001-1``), and one tenant's or customer's stored result must never answer another's
call. Reconciliation looks a key up within the tenant's own drafts and ledger only.
Handlers raise ``ToolError`` only before any effect, so a refused request can be corrected and
tried again under the same key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from toolcalls.demo.faults import fault_point
from toolcalls.demo.models import LedgerEntry, Order, RefundDraft
from toolcalls.policy import above_threshold
from toolcalls.registry import Reconciliation, ToolContext, ToolError, ToolSpec, register

REFUND_REASONS = ["damaged_item", "wrong_item", "not_delivered", "returned", "other"]


def _orders(ctx: ToolContext) -> QuerySet[Order]:
    """The customer's orders in the tenant."""
    return Order.objects.filter(tenant_ref=ctx.tenant_ref, customer_ref=ctx.subject_ref)


def _order(ctx: ToolContext, order_id: str, *, lock: bool = False) -> Order:
    orders = _orders(ctx).select_for_update() if lock else _orders(ctx)
    order = orders.filter(order_id=order_id).first()
    if order is None:
        raise ToolError("ORDER_NOT_FOUND", f"No order {order_id} for this customer.")
    return order


def refund_authorize(ctx: ToolContext, args: Mapping[str, Any]) -> str | None:
    """A refund may touch only the customer's own orders (checked before the call runs, and
    again at resume: an order moved to another customer meanwhile is no longer theirs)."""
    if _orders(ctx).filter(order_id=args["order_id"]).exists():
        return None
    return f"No order {args['order_id']} for this customer."


def get_order(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    order = _order(ctx, args["order_id"])
    return {
        "order_id": order.order_id,
        "description": order.description,
        "total_cents": order.total_cents,
        "refunded_cents": order.refunded_cents,
        "refundable_cents": order.refundable_cents,
        "currency": order.currency,
    }


def create_refund_draft(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    with transaction.atomic():
        order = _order(ctx, args["order_id"], lock=True)
        if args["amount_cents"] > order.refundable_cents:
            raise ToolError(
                "REFUND_EXCEEDS_REMAINING",
                f"Only {order.refundable_cents} cents of {order.order_id} can still be refunded.",
            )
        number = order.drafts.count() + 1
        draft = RefundDraft.objects.create(
            tenant_ref=order.tenant_ref,
            draft_id=f"RD-{order.order_id}-{number}",
            order=order,
            amount_cents=args["amount_cents"],
            reason=args["reason"],
            idempotency_key=ctx.idempotency_key,
        )
    fault_point("create_refund_draft.after_effect")
    return _draft_result(draft)


def _draft_result(draft: RefundDraft) -> dict[str, Any]:
    return {
        "draft_id": draft.draft_id,
        "order_id": draft.order.order_id,
        "amount_cents": draft.amount_cents,
        "reason": draft.reason,
        "status": RefundDraft.Status.OPEN,
    }


def reconcile_draft(ctx: ToolContext, key: str) -> Reconciliation:
    """Was a draft of this tenant created under this idempotency key?"""
    drafts = RefundDraft.objects.select_related("order")
    draft = drafts.filter(tenant_ref=ctx.tenant_ref, idempotency_key=key).first()
    if draft is None:
        return Reconciliation(applied=False)
    return Reconciliation(applied=True, data=_draft_result(draft))


def _drafts(ctx: ToolContext, args: Mapping[str, Any]) -> QuerySet[RefundDraft]:
    """The draft ``args`` name, of the customer's order they name (none when either is not
    theirs)."""
    return RefundDraft.objects.filter(
        order__tenant_ref=ctx.tenant_ref,
        order__customer_ref=ctx.subject_ref,
        order__order_id=args["order_id"],
        draft_id=args.get("draft_id"),
    )


def _open_draft(ctx: ToolContext, args: Mapping[str, Any], *, lock: bool) -> RefundDraft:
    """The draft ``args`` name with its order, read in one statement (with ``lock``, both rows
    locked). Raises ``ORDER_NOT_FOUND`` when the order is not the customer's, ``DRAFT_MISMATCH``
    when the order has no such draft or it covers less than ``amount_cents``."""
    drafts = _drafts(ctx, args).select_related("order")
    draft = (drafts.select_for_update() if lock else drafts).first()
    if draft is None:
        _order(ctx, args["order_id"])  # ORDER_NOT_FOUND, when that is why
    # A draft caps the refund: an operator may approve less than was drafted, never more.
    if draft is None or args["amount_cents"] > draft.amount_cents:
        raise ToolError(
            "DRAFT_MISMATCH", "That draft does not exist for this order or covers less."
        )
    return draft


def refund_key(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    """The business intent of a refund: this customer's refund of this amount from this draft
    of this order (``submit_refund``'s idempotency key)."""
    return (
        f"refund:{ctx.tenant_ref}:{ctx.subject_ref}:{args['order_id']}:{args['amount_cents']}:"
        f"{args['draft_id']}"
    )


def refund_precondition(ctx: ToolContext, args: Mapping[str, Any]) -> None:
    """Checked before an approval and again at resume: the draft still matches and the order
    can still cover it.

    A draft already submitted passes only for the same intent (:func:`refund_key`), which then
    gets the stored result through its idempotency key instead of a second refund; a draft paid
    by another request is ``DRAFT_ALREADY_SUBMITTED``, as the payout itself would say.
    """
    draft = _open_draft(ctx, args, lock=False)
    if draft.status != RefundDraft.Status.OPEN:
        if not draft.ledger.filter(idempotency_key=refund_key(ctx, args)).exists():
            raise ToolError(
                "DRAFT_ALREADY_SUBMITTED",
                f"{draft.draft_id} was already paid by another request: approving would pay "
                "nothing.",
            )
        return
    if args["amount_cents"] > draft.order.refundable_cents:
        raise ToolError(
            "REFUND_EXCEEDS_REMAINING",
            f"Only {draft.order.refundable_cents} cents can still be refunded on this order.",
        )


def submit_refund(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    with transaction.atomic():
        draft = _open_draft(ctx, args, lock=True)
        order = draft.order
        if draft.status != RefundDraft.Status.OPEN:
            raise ToolError("DRAFT_ALREADY_SUBMITTED", f"{draft.draft_id} was already submitted.")
        amount = args["amount_cents"]
        if amount > order.refundable_cents:
            raise ToolError(
                "REFUND_EXCEEDS_REMAINING",
                f"Only {order.refundable_cents} cents can still be refunded on this order.",
            )
        entry = LedgerEntry.objects.create(
            tenant_ref=order.tenant_ref,
            refund_id=f"RF-{draft.draft_id}",
            order=order,
            draft=draft,
            amount_cents=amount,
            idempotency_key=ctx.idempotency_key,
            operation_ref=ctx.operation_id,
            call_ref=ctx.provider_call_id,
        )
        order.refunded_cents += amount
        order.save(update_fields=["refunded_cents"])
        draft.status = RefundDraft.Status.SUBMITTED
        draft.save(update_fields=["status"])
    fault_point("submit_refund.after_effect")
    return _refund_result(entry)


def _refund_result(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "refund_id": entry.refund_id,
        "order_id": entry.order.order_id,
        "amount_cents": entry.amount_cents,
        "status": "submitted",
        "refundable_cents": entry.order.refundable_cents,
    }


def reconcile_refund(ctx: ToolContext, key: str) -> Reconciliation:
    """Does the tenant's ledger hold a refund paid under this idempotency key?"""
    entries = LedgerEntry.objects.select_related("order")
    entry = entries.filter(tenant_ref=ctx.tenant_ref, idempotency_key=key).first()
    if entry is None:
        return Reconciliation(applied=False)
    return Reconciliation(applied=True, data=_refund_result(entry))


def refund_preview(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    """What submitting would do to the order, in cents; reads only. For a draft already
    submitted (the same intent, as the precondition lets through) it pays nothing more: the
    refund's stored result is returned, and ``note`` says so."""
    draft = _open_draft(ctx, args, lock=False)
    order = draft.order
    paying = args["amount_cents"] if draft.status == RefundDraft.Status.OPEN else 0
    preview = {
        "order_total_cents": order.total_cents,
        "already_refunded_cents": order.refunded_cents,
        "this_refund_cents": paying,
        "remaining_after_cents": order.refundable_cents - paying,
        "currency": order.currency,
    }
    if not paying:
        preview["note"] = (
            f"{draft.draft_id} was already submitted for this same refund: approving pays "
            "nothing more and gives the model that refund's result."
        )
    return preview


def refund_summary(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    """The refund as an operator reads it: whose, which order, how much in the order's
    currency, and why (a submitted refund's reason is its draft's). Reads only."""
    currency, reason = "", args.get("reason")
    if reason is None:  # a submitted refund's: its draft's, read with its order's currency
        found = _drafts(ctx, args).values_list("order__currency", "reason").first()
        currency, reason = found or ("", None)
    if not currency:
        orders = _orders(ctx).filter(order_id=args["order_id"])
        currency = orders.values_list("currency", flat=True).first() or ""
    summary = {
        "customer": ctx.subject_ref,
        "order": args["order_id"],
        "amount_cents": args["amount_cents"],
        "currency": currency,
        "reason": (reason or "").replace("_", " "),
    }
    return {key: value for key, value in summary.items() if value != ""}


def _threshold() -> int:
    return settings.CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS


_REVISIONS = {"input": "v1", "output": "v1", "effect": "v1", "handler": "v1"}

register(
    ToolSpec(
        name="get_order",
        description="Look up one order of the signed-in customer by its order number.",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{3,10}$"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        schema_version="get-order-v1",
        risk="read",
        timeout_ms=500,
        handler=get_order,
        search_fields=("order_id",),
        revisions=_REVISIONS,
    )
)

register(
    ToolSpec(
        name="create_refund_draft",
        description="Prepare (but do not pay) a refund for part or all of an order, in cents.",
        parameters={
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^ORD-[0-9]{3,10}$"},
                "amount_cents": {"type": "integer", "minimum": 1},
                "reason": {"type": "string", "enum": REFUND_REASONS},
            },
            "required": ["order_id", "amount_cents", "reason"],
            "additionalProperties": False,
        },
        schema_version="create-refund-draft-v1",
        risk="write",
        timeout_ms=1000,
        handler=create_refund_draft,
        authorize=refund_authorize,
        reconcile=reconcile_draft,
        amount_field="amount_cents",
        summary=refund_summary,
        search_fields=("order_id", "draft_id"),
        idempotency_key=lambda ctx, a: (
            f"draft:{ctx.tenant_ref}:{ctx.subject_ref}:{a['order_id']}:{a['amount_cents']}:"
            f"{a['reason']}"
        ),
        revisions=_REVISIONS,
    )
)

register(
    ToolSpec(
        name="submit_refund",
        description="Pay out a prepared refund draft. Irreversible.",
        parameters={
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^ORD-[0-9]{3,10}$"},
                "draft_id": {"type": "string", "minLength": 1, "maxLength": 60},
                "amount_cents": {"type": "integer", "minimum": 1},
            },
            "required": ["order_id", "draft_id", "amount_cents"],
            "additionalProperties": False,
        },
        schema_version="submit-refund-v1",
        risk="irreversible",
        timeout_ms=2000,
        handler=submit_refund,
        authorize=refund_authorize,
        idempotency_key=refund_key,
        precondition=refund_precondition,
        reconcile=reconcile_refund,
        preview=refund_preview,
        amount_field="amount_cents",
        summary=refund_summary,
        search_fields=("order_id", "draft_id", "refund_id"),
        approval=above_threshold(
            field="amount_cents", threshold=_threshold, unit="cents", revision="refund-threshold-v1"
        ),
        revisions=_REVISIONS,
    )
)
