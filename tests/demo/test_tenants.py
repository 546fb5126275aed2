"""The demo shop keeps tenants apart: draft and refund IDs are numbered per tenant, and every
idempotency key and reconciliation lookup names the tenant it belongs to."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.services import approval_decide
from tests.engine import bundled_replies, operator
from tests.factories import TenantFactory
from toolcalls import registry
from toolcalls.demo.models import LedgerEntry, Order, RefundDraft
from toolcalls.models import Operation, ReplayScript, Tenant
from toolcalls.services.operations import operation_start
from toolcalls.services.results import tool_context
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

OTHER = "globex"


@pytest.fixture
def tenants(demo) -> dict[str, Tenant]:  # type: ignore[no-untyped-def]
    """``acme`` (the demo) and ``globex``, whose customer ``cus_1001`` has an order with the
    same number, ORD-1001, for a different item."""
    other = TenantFactory.create(slug=OTHER, name="Globex")
    users = get_user_model().objects.filter(username__in=["requester", "operator"])
    other.members.add(*users)
    Order.objects.create(
        tenant_ref=OTHER,
        order_id="ORD-1001",
        customer_ref="cus_1001",
        description="Cast-iron skillet",
        total_cents=7500,
    )
    return {"acme": demo.tenant, OTHER: other}


def _refund(tenant: Tenant, *, approve: bool = True) -> Operation:
    """The bundled refund (draft $49.99 of ORD-1001, submit, approval) for ``cus_1001``."""
    script = ReplayScript.objects.create(
        name="refund",
        family="openai_responses",
        model="gpt-5.1-test",
        replies=bundled_replies("refund_approve"),
    )
    operation = operation_start(
        tenant=tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family="openai_responses",
        model="gpt-5.1-test",
        input_text="Please refund $49.99 of ORD-1001.",
        replay_script=script,
    )
    if approve:
        approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    return operation


def _reconcile(operation: Operation, tool: str, key: str) -> Any:
    """What ``tool``'s reconciler tells ``operation``'s tenant about an effect under ``key``."""
    call = operation.calls.get(tool_name=tool)
    spec = registry.get(tool)
    assert spec is not None and spec.reconcile is not None
    return spec.reconcile(tool_context(operation, call), key)


def test_two_tenants_refunding_the_same_order_number_each_get_their_own_draft_and_refund(
    tenants,
) -> None:
    first, second = _refund(tenants["acme"]), _refund(tenants[OTHER])
    for operation in (first, second):
        slug = operation.tenant.slug
        assert operation.state == OperationState.COMPLETED, operation.terminal_reason
        calls = {c.tool_name: c for c in operation.calls.all()}
        assert {name: c.state for name, c in calls.items()} == {
            "get_order": CallState.SUCCEEDED,
            "create_refund_draft": CallState.SUCCEEDED,
            "submit_refund": CallState.SUCCEEDED,
        }
        drafted, refunded = (
            calls[name].model_result or {} for name in ("create_refund_draft", "submit_refund")
        )
        order = Order.objects.get(tenant_ref=slug, order_id="ORD-1001")
        # The draft the model was told of is this tenant's own, on this tenant's order.
        draft = RefundDraft.objects.get(tenant_ref=slug, draft_id=drafted["data"]["draft_id"])
        assert (
            draft.order == order
            and draft.idempotency_key == calls["create_refund_draft"].idempotency_key
        )
        entry = LedgerEntry.objects.get(operation_ref=operation.public_id)
        assert (entry.tenant_ref, entry.order, entry.draft) == (slug, order, draft)
        assert refunded["data"]["refund_id"] == entry.refund_id
        assert refunded["data"]["refundable_cents"] == order.total_cents - 4999
        order.refresh_from_db()
        assert order.refunded_cents == 4999
        assert slug in calls["create_refund_draft"].idempotency_key
        assert slug in calls["submit_refund"].idempotency_key
    # Numbered per tenant: both tenants' first draft of ORD-1001 is RD-ORD-1001-1.
    assert sorted(RefundDraft.objects.values_list("tenant_ref", "draft_id")) == [
        ("acme", "RD-ORD-1001-1"),
        (OTHER, "RD-ORD-1001-1"),
    ]
    assert LedgerEntry.objects.count() == 2


@pytest.mark.parametrize("tool", ["create_refund_draft", "submit_refund"])
def test_reconciling_an_unknown_outcome_finds_only_the_tenants_own_effect(tenants, tool) -> None:
    done = _refund(tenants["acme"])
    parked = _refund(tenants[OTHER], approve=False)
    done_key = done.calls.get(tool_name=tool).idempotency_key
    # Another tenant's effect, even under the very same key, is not this tenant's.
    assert _reconcile(parked, tool, done_key).applied is False
    assert _reconcile(done, tool, done_key).applied is True
    if tool == "create_refund_draft":  # the other tenant's own draft is found, with its data
        own = _reconcile(parked, tool, parked.calls.get(tool_name=tool).idempotency_key)
        draft = RefundDraft.objects.get(tenant_ref=OTHER)
        assert own.applied is True and own.data["draft_id"] == draft.draft_id
        assert draft.order.tenant_ref == OTHER
    else:  # nothing was paid for the other tenant yet
        key = parked.calls.get(tool_name=tool).idempotency_key
        assert _reconcile(parked, tool, key).applied is False
    approval_decide(approval_pk=parked.approvals.get().pk, actor=operator(), approve=True)
    entry = LedgerEntry.objects.get(tenant_ref=OTHER)
    found = _reconcile(parked, tool, parked.calls.get(tool_name=tool).idempotency_key)
    if tool == "submit_refund":
        assert found.applied is True and found.data["refund_id"] == entry.refund_id
        assert found.data["refundable_cents"] == 7500 - 4999


def test_the_migration_gives_existing_drafts_and_refunds_their_orders_tenant(demo) -> None:
    executor = MigrationExecutor(connection)
    before, after = (
        [("demo", "0002_draft_key_and_faults")],
        [("demo", "0003_ids_unique_per_tenant")],
    )
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    order = apps.get_model("demo", "Order").objects.get(tenant_ref="acme", order_id="ORD-1001")
    draft = apps.get_model("demo", "RefundDraft").objects.create(
        draft_id="RD-ORD-1001-1", order=order, amount_cents=100, reason="other"
    )
    apps.get_model("demo", "LedgerEntry").objects.create(
        refund_id="RF-RD-ORD-1001-1",
        order=order,
        draft=draft,
        amount_cents=100,
        idempotency_key="refund:old",
        operation_ref="op_old",
        call_ref="call_old",
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    assert list(RefundDraft.objects.values_list("tenant_ref", "draft_id")) == [
        ("acme", "RD-ORD-1001-1")
    ]
    assert list(LedgerEntry.objects.values_list("tenant_ref", "refund_id")) == [
        ("acme", "RF-RD-ORD-1001-1")
    ]
