"""An MCP session goes through the proxy the environment names (``HTTP_PROXY``, unless
``NO_PROXY`` lists the host), as HTTP tools' requests do. Real servers on 127.0.0.1: the
fixture MCP server behind a forwarding proxy."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp, ScriptedMcp, forward
from tests.remote.test_remote_tools import enable, mcp_tool, register_mcp, run
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

#: A host no resolver knows: only the proxy can reach it.
URL = "http://mcp.callgate.invalid/mcp"


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch, scripted_http: ScriptedHttp) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, scripted_http.url)


@pytest.mark.usefixtures("proxy_env")
def test_an_mcp_session_goes_through_the_environment_s_proxy(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp
) -> None:
    def through(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        assert handler.path == URL  # asked of the proxy in absolute form
        forward(scripted_mcp.url, handler, body)

    scripted_http.reply = through
    scripted_mcp.script([mcp_tool("lookup")], {"lookup": {"structured": {"found": True}}})
    enable(register_mcp(demo.tenant, URL), "lookup")
    call = run(demo, "shop__lookup", {"order_id": "ORD-1"}).calls.get()
    assert call.state == CallState.SUCCEEDED
    assert (call.model_result or {})["data"] == {"found": True}
    assert scripted_http.requests  # the proxy saw the session


@pytest.mark.usefixtures("proxy_env")
def test_a_host_no_proxy_lists_is_reached_directly(
    monkeypatch: pytest.MonkeyPatch,
    demo: Any,
    scripted_mcp: ScriptedMcp,
    scripted_http: ScriptedHttp,
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    scripted_mcp.script([mcp_tool("lookup")])
    register_mcp(demo.tenant, scripted_mcp.url)
    assert not scripted_http.requests
