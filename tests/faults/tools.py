"""Tools of the fault-injection suite, talking HTTP to the fake payments provider
(``tests/faults/payments_service.py``) at ``CALLGATE_FAULTS_PAYMENTS_URL``.

- ``pay_refund`` (irreversible, never needs approval, so tests drive it without a human): one
  ``POST /refunds`` under the call's idempotency key, reconciled by asking the provider about
  that key. Fault points: ``faults.pay_refund.before_payment`` (nothing was paid) and
  ``faults.pay_refund.after_payment`` (paid; the answer is about to be lost).
- ``lookup_payment`` (read): the refunds of an order; fault point
  ``faults.lookup_payment.before_read``.

Workers load this module through ``CALLGATE_TOOL_MODULES``; the test process registers the tools
only while fault tests run (:func:`register_all` / :func:`unregister_all`), so the rest of the
suite keeps the demo registry it asserts on.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from toolcalls import faultpoints, registry
from toolcalls.policy import never
from toolcalls.registry import Reconciliation, ToolContext, ToolError, ToolSpec

PAYMENTS_URL_ENV = "CALLGATE_FAULTS_PAYMENTS_URL"
#: Seconds one HTTP request to the provider may take (below the tool's own timeout).
HTTP_TIMEOUT_S = 2.0
_REVISIONS = {"input": "v1", "output": "v1", "effect": "v1", "handler": "v1"}
_ORDER_ID = {"type": "string", "pattern": "^ORD-[0-9]{3,10}$"}


def _url(path: str) -> str:
    # Read at call time: each test's workers get the provider's address in their environment.
    return os.environ[PAYMENTS_URL_ENV].rstrip("/") + path


def _get(path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(_url(path), timeout=HTTP_TIMEOUT_S) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.load(exc)


def _refund_data(payment: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "refund_id": payment["id"],
        "order_id": payment["order_id"],
        "amount_cents": payment["amount_cents"],
        "status": payment["status"],
    }


def pay_refund(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    faultpoints.reach("faults.pay_refund.before_payment")
    body = {"order_id": args["order_id"], "amount_cents": args["amount_cents"]}
    request = urllib.request.Request(
        _url("/refunds"),
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key},
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            payment = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (400, 409):  # refused before any effect: safe to tell the model
            with exc:
                detail = json.load(exc).get("error", {})
            raise ToolError(
                "PAYMENT_REFUSED", "The payments provider refused the refund.", audit=detail
            ) from None
        raise  # anything else: whether it took effect is unknown (reconciled)
    faultpoints.reach("faults.pay_refund.after_payment")
    return _refund_data(payment)


def reconcile_payment(ctx: ToolContext, key: str) -> Reconciliation:
    """Ask the provider whether a refund was applied under ``key``."""
    status, payload = _get("/refunds?" + urlencode({"key": key}))
    if status == 200:
        return Reconciliation(applied=True, data=_refund_data(payload))
    if status == 404:
        return Reconciliation(applied=False)
    raise RuntimeError(f"payments provider answered {status}")


def lookup_payment(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    faultpoints.reach("faults.lookup_payment.before_read")
    status, payload = _get("/refunds?" + urlencode({"order_id": args["order_id"]}))
    if status != 200:
        raise RuntimeError(f"payments provider answered {status}")
    return {"order_id": args["order_id"], "refunds": [_refund_data(p) for p in payload["data"]]}


SPECS = (
    ToolSpec(
        name="pay_refund",
        description="Pay a refund to the customer through the payments provider. Irreversible.",
        parameters={
            "type": "object",
            "properties": {
                "order_id": _ORDER_ID,
                "amount_cents": {"type": "integer", "minimum": 1},
            },
            "required": ["order_id", "amount_cents"],
            "additionalProperties": False,
        },
        schema_version="pay-refund-v1",
        risk="irreversible",
        # Below the suite's 3000 ms lease: a live handler never outlives its claim.
        timeout_ms=2500,
        handler=pay_refund,
        idempotency_key=lambda ctx, a: (
            f"pay:{ctx.tenant_ref}:{ctx.subject_ref}:{a['order_id']}:{a['amount_cents']}"
        ),
        reconcile=reconcile_payment,
        amount_field="amount_cents",
        approval=never(),
        revisions=_REVISIONS,
    ),
    ToolSpec(
        name="lookup_payment",
        description="List the refunds paid for one order.",
        parameters={
            "type": "object",
            "properties": {"order_id": _ORDER_ID},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        schema_version="lookup-payment-v1",
        risk="read",
        timeout_ms=2500,
        handler=lookup_payment,
        revisions=_REVISIONS,
    ),
)
NAMES = tuple(spec.name for spec in SPECS)


def register_all() -> None:
    """Register the suite's tools unless they already are (``register`` refuses duplicates)."""
    for spec in SPECS:
        if registry.get(spec.name) is None:
            registry.register(spec)


def unregister_all() -> None:
    """Take the suite's tools out of this process's registry again (test process only)."""
    for spec in SPECS:
        if registry.get(spec.name) is spec:
            del registry._REGISTRY[spec.name]


register_all()
