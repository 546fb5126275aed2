"""Odd tool listings: a tool without a name is kept with its problem and cannot be enabled; a
listing with two tools under one name cannot be used (a call by that name could reach either),
at registration and when listed again. The fixture MCP server on 127.0.0.1."""

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
)
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool
from toolcalls.remote.services import (
    HttpToolForm,
    RemoteError,
    ServerForm,
    remote_http_tool_register,
    remote_server_discover,
    remote_server_register,
)

pytestmark = pytest.mark.django_db(transaction=True)

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


def test_a_listing_with_two_tools_under_one_name_cannot_be_registered(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("lookup"), mcp_tool("pay", readOnlyHint=True)])
    with pytest.raises(RemoteError, match="more than one tool is named 'pay'") as refused:
        register_mcp(demo.tenant, scripted_mcp.url)
    assert refused.value.code == "server_unreachable"
    assert not RemoteServer.objects.exists() and not RemoteTool.objects.exists()


def test_a_listing_with_two_tools_under_one_name_is_refused_when_listed_again(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    pinned = enable(server, "pay", risk="write").pinned_sha256
    events = RemoteEvent.objects.count()
    scripted_mcp.script([mcp_tool("pay"), mcp_tool("pay", readOnlyHint=True)])
    with pytest.raises(RemoteError, match="cannot be used") as refused:
        remote_server_discover(server_pk=server.pk, actor=ADMIN)
    assert refused.value.code == "server_unreachable"
    tool = server.tools.get()
    assert (tool.enabled, tool.pinned_sha256, tool.served_sha256) == (True, pinned, pinned)
    assert RemoteEvent.objects.count() == events
