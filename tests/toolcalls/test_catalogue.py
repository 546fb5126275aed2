"""Per-tenant tool catalogues: only enabled tools are offered and run, overrides are only ever
stricter and change the policy revision, and a lookup costs no query while nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from tests.factories import OperationFactory, TenantFactory
from toolcalls import catalogue, registry
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.services import DemoSeed
from toolcalls.models import ReplayScript, TenantTool
from toolcalls.services.catalogue import CatalogueError, tenant_tool_set, tenant_tools_enable
from toolcalls.services.operations import OperationError, operation_start
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
GET_ORDER = {"order_id": "ORD-1001"}
ADMIN = Actor.system("tests")


def _set(demo: DemoSeed, tool: str, **settings: Any) -> TenantTool:
    return tenant_tool_set(
        tenant=demo.tenant, tool_name=tool, actor=ADMIN, **{"enabled": True, **settings}
    )


def _start(tenant: Any, tool_names: list[str] | None) -> Any:
    return operation_start(
        tenant=tenant,
        requested_by=get_user_model().objects.get_or_create(username=f"req-{tenant.slug}")[0],
        subject_ref="cus_1001",
        family="openai_responses",
        model="m",
        input_text="Look it up.",
        tool_names=tool_names,
        replay_script=ReplayScript(
            name="t", family="openai_responses", model="m", replies=[r.final()]
        ),
    )


def test_a_tenant_may_offer_only_the_tools_of_its_catalogue(demo: DemoSeed) -> None:
    other = TenantFactory.create(slug="globex", tools=False)
    assert catalogue.tool_names(other) == []
    with pytest.raises(OperationError) as refused:
        _start(other, ["get_order"])
    assert refused.value.code == "unknown_tool"
    tenant_tools_enable(tenant=other, tool_names=["get_order"], actor=ADMIN)
    assert catalogue.tool_names(other) == ["get_order"]
    assert _start(other, None).tool_names == ["get_order"]  # by default: every enabled tool
    _set(demo, "create_refund_draft", enabled=False)
    assert catalogue.tool_names(demo.tenant) == ["get_order", "submit_refund"]
    with pytest.raises(OperationError, match="create_refund_draft"):
        _start(demo.tenant, ["get_order", "create_refund_draft"])


def test_a_disabled_tool_is_no_longer_offered_and_its_parked_call_goes_stale(
    demo: DemoSeed,
) -> None:
    _set(demo, "get_order", approval="always")
    again = r.call("c2", "get_order", GET_ORDER)
    operation = start(
        demo, [r.response(r.call("c1", "get_order", GET_ORDER)), r.response(again), r.final()]
    )
    assert operation.state == S.WAITING_APPROVAL
    _set(demo, "get_order", enabled=False)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    first, second = operation.calls.order_by("turn__index")
    assert (first.state, first.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert "disabled" in (first.model_result or {})["error"]["message"]
    assert (second.state, second.error_code) == (CallState.REJECTED, "UNKNOWN_TOOL")
    offered = [tool["name"] for tool in operation.turns.get(index=1).request_body["tools"]]
    assert offered == ["create_refund_draft", "submit_refund"]


def test_an_override_changed_while_a_call_waits_makes_its_approval_stale(demo: DemoSeed) -> None:
    _set(demo, "submit_refund", approval="threshold", approval_threshold=1000)
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == S.WAITING_APPROVAL
    approval = operation.approvals.get()
    assert approval.policy_revision == "refund-threshold-v1+tenant-threshold:1000"
    _set(demo, "submit_refund", approval="threshold", approval_threshold=2000)
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    submit = operation.calls.get(tool_name="submit_refund")
    assert (submit.state, submit.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert not LedgerEntry.objects.exists()


def test_overrides_are_stricter_and_have_their_own_policy_revision(demo: DemoSeed) -> None:
    operation = OperationFactory.create(tenant=demo.tenant)
    spec = registry.get("submit_refund")
    assert spec is not None
    assert catalogue.tool_spec(operation, "submit_refund") is spec  # no override: the spec
    _set(demo, "submit_refund", approval="threshold", approval_threshold=1000, max_calls=2)
    effective = catalogue.tool_spec(operation, "submit_refund")
    assert effective is not None and effective.max_calls == 2
    assert spec.approval.reason_for({"amount_cents": 2000}) is None
    assert effective.approval.reason_for({"amount_cents": 2000})
    assert effective.approval.revision != spec.approval.revision
    with override_settings(CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS=500):
        assert effective.approval.reason_for({"amount_cents": 600})  # the lower of the two
    _set(demo, "get_order", approval="always")
    always = catalogue.tool_spec(operation, "get_order")
    assert always is not None and always.approval.reason_for(GET_ORDER)


def test_a_tools_call_limit_rejects_calls_beyond_it(demo: DemoSeed) -> None:
    _set(demo, "get_order", max_calls=1)
    other = r.call("c2", "get_order", {"order_id": "ORD-1002"})
    operation = start(
        demo, [r.response(r.call("c1", "get_order", GET_ORDER)), r.response(other), r.final()]
    )
    assert operation.state == S.ESCALATED
    assert operation.terminal_reason.startswith("MAX_CALLS_PER_TOOL")
    assert [c.error_code for c in operation.calls.order_by("turn__index")] == [
        "",
        "BUDGET_EXCEEDED",
    ]


@pytest.mark.parametrize(
    ("tool", "settings", "field"),
    [
        ("get_order", {"approval": "threshold", "approval_threshold": 5}, "approval"),
        ("submit_refund", {"approval": "threshold", "approval_threshold": 2500},
         "approval_threshold"),
        ("submit_refund", {"approval": "threshold"}, "approval_threshold"),
        ("submit_refund", {"approval_threshold": 100}, "approval_threshold"),
        ("submit_refund", {"approval": "sometimes"}, "approval"),
        ("get_order", {"max_calls": 0}, "max_calls"),
        ("get_order", {"max_calls": 10_000}, "max_calls"),
    ],
)  # fmt: skip
def test_an_override_that_is_not_stricter_is_refused(
    demo: DemoSeed, tool: str, settings: dict[str, Any], field: str
) -> None:
    revision = demo.tenant.catalogue_revision
    with pytest.raises(CatalogueError) as refused:
        _set(demo, tool, **settings)
    assert (refused.value.code, refused.value.details) == ("invalid_override", {"field": field})
    assert demo.tenant.catalogue_revision == revision
    with pytest.raises(CatalogueError, match="launch_rocket"):
        _set(demo, "launch_rocket")


def test_a_lookup_costs_no_query_while_the_catalogue_is_unchanged(
    demo: DemoSeed, django_assert_num_queries: Any
) -> None:
    operation = OperationFactory.create(tenant=demo.tenant)
    catalogue.declarations(operation)
    with django_assert_num_queries(0):
        catalogue.tool_spec(operation, "submit_refund")
        catalogue.declarations(operation)
        assert catalogue.enabled(operation, "get_order")
    _set(demo, "get_order", max_calls=3)  # a new revision, on this tenant row too
    with django_assert_num_queries(1):
        spec = catalogue.tool_spec(operation, "get_order")
    assert spec is not None and spec.max_calls == 3
