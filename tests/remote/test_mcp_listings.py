"""Odd tool listings: a tool without a name, or a name the listing gives to two tools (a call by
that name could reach either), is kept with its problem and cannot be enabled, at registration,
when listed again and when a call finds it so; the server's other tools stay usable. The
fixture MCP server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from tests.remote.conftest import ScriptedMcp
from tests.remote.test_remote_tools import (
    ADMIN,
    OBJECT,
    enable,
    mcp_tool,
    register_mcp,
    run,
)
from toolcalls.remote.models import RemoteEvent, RemoteTool
from toolcalls.remote.services import (
    HttpToolForm,
    RemoteError,
    ServerForm,
    remote_http_tool_register,
    remote_server_discover,
    remote_server_register,
)
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

NO_NAME = "the tool has no name"


def test_a_tool_without_a_name_is_kept_with_its_problem_and_cannot_be_enabled(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool(""), mcp_tool("lookup")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    nameless = server.tools.get(remote_name="")
    assert NO_NAME in nameless.problem and not nameless.enabled
    with pytest.raises(RemoteError, match=NO_NAME) as refused:
        enable(server, "")
    assert refused.value.code == "invalid_tool"
    assert enable(server, "lookup").enabled


def test_an_http_tool_without_a_name_is_refused(demo: Any) -> None:
    form = ServerForm(name="ledger", kind="http", signing_secret="s")
    server = remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    tool = HttpToolForm("", "", OBJECT, "http://127.0.0.1:9/pay")
    with pytest.raises(RemoteError, match=NO_NAME) as refused:
        remote_http_tool_register(server_pk=server.pk, form=tool, actor=ADMIN)
    assert refused.value.code == "invalid_tool"
    assert not RemoteTool.objects.exists()


TWICE = "the server lists 2 tools named 'pay': a call by that name could reach any of them"


def test_a_name_listed_twice_is_kept_with_its_problem_and_the_other_tools_are_usable(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("lookup"), mcp_tool("pay", readOnlyHint=True)])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    pay = server.tools.get(remote_name="pay")
    assert (pay.problem, pay.enabled, pay.description) == (TWICE, False, "pay things")
    with pytest.raises(RemoteError, match=TWICE) as refused:
        enable(server, "pay", risk="write")
    assert refused.value.code == "invalid_tool"
    assert enable(server, "lookup").enabled


def test_a_name_listed_twice_when_listed_again_disables_its_tool_until_enabled_again(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("lookup")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    pinned = enable(server, "pay", risk="write").pinned_sha256
    enable(server, "lookup")
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("lookup"), mcp_tool("pay", readOnlyHint=True)])
    remote_server_discover(server_pk=server.pk, actor=ADMIN)
    pay, lookup = server.tools.get(remote_name="pay"), server.tools.get(remote_name="lookup")
    assert (pay.enabled, pay.problem, pay.pinned_sha256) == (False, TWICE, pinned)
    assert pay.served_sha256 != pinned
    assert RemoteEvent.objects.filter(kind="tool_changed", tool=pay).count() == 1
    assert lookup.enabled
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("lookup")])
    remote_server_discover(server_pk=server.pk, actor=ADMIN)
    pay.refresh_from_db()
    assert (pay.enabled, pay.problem, pay.served_sha256) == (False, "", pinned)
    assert enable(server, "pay", risk="write").enabled


def test_a_call_by_a_name_listed_twice_does_not_run_and_disables_the_tool(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": "echo"}})
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "pay", risk="write")
    twice = [mcp_tool("pay"), mcp_tool("pay", readOnlyHint=True)]
    scripted_mcp.script(twice, {"pay": {"structured": "echo"}})
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001", "amount_cents": 100})
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.FAILED, "TOOL_CHANGED")
    assert "did not run" in (refused.model_result or {})["error"]["message"]
    pay = server.tools.get()
    assert (pay.enabled, pay.problem) == (False, TWICE)
