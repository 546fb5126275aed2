"""An operation's outcome counts a remote tool's call as what it was when it ran, whatever the
tool is now: a side effect whose approval went stale once the tool was disabled shows as failed
(as a local tool's does), not a plain COMPLETED. The fixture MCP server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.services import approval_decide
from tests.engine import operator
from tests.remote.conftest import ScriptedMcp
from tests.remote.test_remote_tools import ADMIN, enable, mcp_tool, register_mcp, run
from toolcalls.remote.services import remote_tool_disable
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def test_a_stale_remote_side_effect_of_a_disabled_tool_shows_as_failed(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")])
    tool = enable(
        register_mcp(demo.tenant, scripted_mcp.url), "pay", risk="write", approval="always"
    )
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001"})
    remote_tool_disable(tool_pk=tool.pk, actor=ADMIN)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED
    assert operation.calls.get().state == CallState.REJECTED
    console = Client()
    assert console.login(username="operator", password="operator-demo-pass")
    page = console.get(reverse("operations:detail", args=[operation.public_id])).content.decode()
    assert "COMPLETED, shop__pay failed" in page
