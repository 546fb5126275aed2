"""An operator's edit of a remote tool's call at approval keeps its key arguments, the intent
(every argument of a tool with none), and may lower the argument of a ``>``/``>=`` approval
condition (how much) but never raise it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine import operator, start
from tests.remote.conftest import ScriptedMcp, ServerProcess, mcp_url
from tests.remote.test_remote_tools import enable, mcp_tool, register_mcp, run
from tests.replies import call, final, response
from toolcalls.models import Operation
from toolcalls.services.approvals import ApprovalError
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

PROPOSED = {"order_id": "ORD-2001", "draft_id": "RD-ORD-2001-1", "amount_cents": 3000}


def _parked_refund(demo: Any, server: ServerProcess) -> Operation:
    """The demo shop's ``submit_refund`` on its MCP server, approval above 2500 cents, parked
    for customer cus_2002's order."""
    tools = register_mcp(demo.tenant, mcp_url(server))
    enable(
        tools,
        "submit_refund",
        risk="irreversible",
        approval="condition",
        approval_condition="amount_cents > 2500",
        key_arguments=["order_id", "draft_id", "amount_cents"],
    )
    replies = [response(call("call_1", "shop__submit_refund", PROPOSED)), final()]
    operation = start(demo, replies, tool_names=["shop__submit_refund"], subject_ref="cus_2002")
    assert operation.calls.get().state == CallState.WAITING_APPROVAL
    return operation


def _approve(operation: Operation, arguments: dict[str, Any]) -> None:
    from approvals.services import approval_decide

    approval = operation.approvals.get()
    approval_decide(
        approval_pk=approval.pk, actor=operator(), approve=True, reason="", arguments=arguments
    )


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            {"order_id": "ORD-1002", "draft_id": "RD-ORD-1002-1", "amount_cents": 100},
            "order_id, draft_id must stay as proposed",
        ),
        ({**PROPOSED, "draft_id": "RD-ORD-2001-2"}, "draft_id must stay as proposed"),
        ({**PROPOSED, "amount_cents": 3001}, "not raise it: amount_cents at most 3000"),
    ],
)
def test_an_edit_may_not_move_a_remote_refund_nor_raise_it(
    demo: Any, demo_mcp_server: ServerProcess, edit: dict[str, Any], named: str
) -> None:
    operation = _parked_refund(demo, demo_mcp_server)
    with pytest.raises(ApprovalError) as refused:
        _approve(operation, edit)
    assert refused.value.code == "invalid_edit"
    assert named in refused.value.message
    assert refused.value.details["fields"] == {"arguments": [refused.value.message]}
    assert operation.approvals.get().state == "PENDING"
    parked = operation.calls.get()
    assert (parked.state, parked.arguments) == (CallState.WAITING_APPROVAL, PROPOSED)


def test_an_edit_may_lower_a_remote_refund(demo: Any, demo_mcp_server: ServerProcess) -> None:
    operation = _parked_refund(demo, demo_mcp_server)
    lowered = {**PROPOSED, "amount_cents": 2000}
    _approve(operation, lowered)
    assert operation.approvals.get().state == "APPROVED"
    approved = operation.calls.get()
    assert approved.arguments == lowered and approved.arguments_edited


def test_an_edit_keeps_every_argument_of_a_tool_without_key_arguments(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("lookup")], {"lookup": {"structured": {"found": True}}})
    enable(register_mcp(demo.tenant, scripted_mcp.url), "lookup", approval="always")
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1001", "amount_cents": 5})
    with pytest.raises(ApprovalError) as refused:
        _approve(operation, {"order_id": "ORD-2001", "amount_cents": 5})
    assert refused.value.code == "invalid_edit"
    assert "order_id must stay as proposed" in refused.value.message
