"""A deploy while a call set is parked: results already settled stay bound to the revisions they
ran under; only the parked call, approved after the change, is stale."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import call_set, operator, start
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry
from toolcalls.envelopes import ok
from toolcalls.models import Operation, ToolCall
from toolcalls.policy import above_threshold
from toolcalls.services.results import call_finish, call_set_results
from toolcalls.services.unit import call_step
from toolcalls.states import CallState, OperationState

SMALL = {"order_id": "ORD-1002", "draft_id": "RD-ORD-1002-1", "amount_cents": 20}
LARGE = {"order_id": "ORD-1003", "draft_id": "RD-ORD-1003-1", "amount_cents": 5000}


def _deploy(monkeypatch: pytest.MonkeyPatch, name: str, **changes: Any) -> None:
    """Replace the registered tool ``name`` as a deploy would (same name, new revisions)."""
    spec = registry.get(name)
    assert spec is not None
    monkeypatch.setitem(registry._REGISTRY, name, dataclasses.replace(spec, **changes))


def _new_policy() -> Any:
    return above_threshold(
        field="amount_cents", threshold=lambda: 2500, unit="cents", revision="refund-threshold-v2"
    )


DEPLOYS = {
    "schema": lambda: {"schema_version": "submit-refund-v2"},
    "policy": lambda: {"approval": _new_policy()},
    "handler": lambda: {
        "revisions": {"input": "v1", "output": "v1", "effect": "v1", "handler": "v2"}
    },
}


def _parked_batch(demo: Any) -> Operation:
    """Two drafts, then one reply with two refunds: the small one runs, the large one parks."""
    drafts = [
        r.call(
            "d1",
            "create_refund_draft",
            {"order_id": "ORD-1002", "amount_cents": 20, "reason": "other"},
        ),
        r.call(
            "d2",
            "create_refund_draft",
            {"order_id": "ORD-1003", "amount_cents": 5000, "reason": "other"},
        ),
    ]
    submits = [r.call("s1", "submit_refund", SMALL), r.call("s2", "submit_refund", LARGE)]
    operation = start(demo, [r.response(*drafts), r.response(*submits), r.final()])
    assert operation.state == OperationState.WAITING_APPROVAL
    assert operation.calls.get(provider_call_id="s1").state == CallState.SUCCEEDED
    return operation


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize("change", list(DEPLOYS))
def test_a_deploy_during_a_parked_batch_makes_only_the_parked_call_stale(
    demo: Any, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    operation = _parked_batch(demo)
    _deploy(monkeypatch, "submit_refund", **DEPLOYS[change]())
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    settled, parked = (
        operation.calls.get(provider_call_id="s1"),
        operation.calls.get(provider_call_id="s2"),
    )
    assert settled.state == CallState.SUCCEEDED
    if change == "handler":  # approvals bind schema and policy; a new handler may run it
        assert parked.state == CallState.SUCCEEDED
    else:
        assert (parked.state, parked.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert LedgerEntry.objects.filter(order__order_id="ORD-1002").count() == 1


def _settled() -> ToolCall:
    """A ``get_order`` call of a new operation, settled under today's registry."""
    [call] = call_set(CallState.EXECUTING)
    with call_step(call.pk) as step:
        result = ok({"order": "ORD-1001"})
        actor = Actor.system("test")
        call_finish(step, step.call, to_state=CallState.SUCCEEDED, model_result=result, actor=actor)
    return call


@pytest.mark.django_db
def test_a_settled_result_stays_bound_to_the_revisions_it_ran_under(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    call = _settled()
    _deploy(
        monkeypatch,
        "get_order",
        schema_version="get-order-v2",
        revisions={"input": "v2", "output": "v2", "effect": "v2", "handler": "v2"},
    )
    [message] = call_set_results(operation=call.operation)
    assert message.call_id == call.provider_call_id
    call.refresh_from_db()
    binding = (call.protected_audit or {})["binding"]
    assert binding["tool_revisions"]["schema"] == "get-order-v1"
    assert binding["tool_revisions"]["handler"] == "v1"


@pytest.mark.django_db
def test_a_result_settled_before_revisions_were_stored_still_verifies() -> None:
    call = _settled()
    # As a row written before the call kept its revisions: its digests came from the registry.
    ToolCall.objects.filter(pk=call.pk).update(tool_revisions=None, policy_revision="")
    [message] = call_set_results(operation=call.operation)
    assert message.call_id == call.provider_call_id
