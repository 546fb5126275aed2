"""Remote tools at their edges: an MCP server over stdio (only where settings allow it), a tool
its server no longer lists, a server that is no MCP server, an HTTP tool slower than its
timeout, an HTTP tool changed while a call is parked, private addresses and addresses with
credentials refused, a requester without the risk's permission. Real servers on 127.0.0.1 and
a real stdio process (the reply limit: test_mcp_reply_limit.py)."""

from __future__ import annotations

import contextlib
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests.engine import operator
from tests.remote.conftest import ScriptedHttp, ScriptedMcp, send
from tests.remote.test_remote_tools import (
    ADMIN,
    OBJECT,
    enable,
    mcp_tool,
    register_http,
    register_mcp,
    run,
)
from toolcalls.remote.models import RemoteEvent, RemoteServer
from toolcalls.remote.services import (
    GONE,
    HttpToolForm,
    RemoteError,
    ServerForm,
    remote_http_tool_register,
    remote_server_register,
)
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


def register_stdio(demo: Any, scripted_mcp: ScriptedMcp) -> RemoteServer:
    command = [sys.executable, FIXTURE, "stdio", str(scripted_mcp.path)]
    form = ServerForm(name="local", kind="mcp", command=command)
    return remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)


@override_settings(CALLGATE_REMOTE_ALLOW_STDIO=True)
def test_an_mcp_server_over_stdio_is_registered_and_called_where_allowed(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": "echo"}})
    # The budget covers starting the server's process for each session.
    enable(register_stdio(demo, scripted_mcp), "pay", risk="write", timeout_ms=30_000)
    operation = run(demo, "local__pay", {"order_id": "ORD-1001"})
    paid = operation.calls.get()
    assert paid.state == CallState.SUCCEEDED
    sent = (paid.model_result or {})["data"]
    assert sent["arguments"] == {"order_id": "ORD-1001"}
    assert sent["meta"]["callgate"]["idempotency_key"] == paid.idempotency_key


@override_settings(CALLGATE_REMOTE_ALLOW_STDIO=True)
def test_a_json_rpc_error_from_a_server_over_stdio_is_a_refusal(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"refuse": "order_id is unknown here"}})
    enable(register_stdio(demo, scripted_mcp), "pay", risk="write", timeout_ms=30_000)
    refused = run(demo, "local__pay", {"order_id": "ORD-1001"}).calls.get()
    assert (refused.state, refused.error_code) == (CallState.FAILED, "TOOL_REFUSED")
    assert "order_id is unknown here" in (refused.model_result or {})["error"]["message"]


def test_an_mcp_server_over_stdio_is_refused_where_not_allowed(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    with pytest.raises(RemoteError, match="over stdio are not allowed") as refused:
        register_stdio(demo, scripted_mcp)
    assert refused.value.code == "invalid_server"  # refused without trying it
    assert not RemoteServer.objects.exists()


def test_a_tool_its_server_no_longer_lists_does_not_run(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "pay", risk="write")
    scripted_mcp.script([mcp_tool("refund")])
    operation = run(demo, "shop__pay", {"order_id": "ORD-1"})
    gone = operation.calls.get()
    assert (gone.state, gone.error_code) == (CallState.FAILED, "TOOL_CHANGED")
    assert gone.attempt == 1
    tool = server.tools.get(remote_name="pay")
    assert (tool.enabled, tool.problem) == (False, GONE)
    assert RemoteEvent.objects.filter(kind="tool_gone", tool=tool).exists()


def test_a_server_that_is_no_mcp_server_is_a_clear_error(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = lambda handler, body: send(handler, 200, b"<html>a web page</html>")
    with pytest.raises(RemoteError) as refused:
        register_mcp(demo.tenant, f"{scripted_http.url}/mcp")
    assert refused.value.code == "server_unreachable"
    assert not RemoteServer.objects.exists()


def slow(seconds: float) -> Any:
    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        time.sleep(seconds)
        with contextlib.suppress(OSError):  # Callgate gave up and closed the connection
            send(handler, 200, b"{}")

    return reply


def test_a_slow_http_read_tool_is_retried_within_its_attempts_then_fails(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = slow(3)
    enable(register_http(demo, scripted_http), "pay", timeout_ms=300)
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert (failed.state, failed.attempt) == (CallState.FAILED, 3)
    # The request's own timeout ends each run, before the engine's timer: a lost answer, the
    # timeout named in its audit.
    assert failed.error_code == "TOOL_FAILED"
    retried = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert all("no whole answer within the timeout" in one["detail"] for one in retried[1:])
    assert len(scripted_http.requests) == 3


def test_a_slow_http_write_times_out_and_is_never_sent_again(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = slow(10)
    enable(register_http(demo, scripted_http), "pay", risk="irreversible", timeout_ms=300)
    began = time.monotonic()
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    assert time.monotonic() - began < 10  # the tool's timeout ended it, not the server's answer
    operation.refresh_from_db()
    lost = operation.calls.get()
    assert (lost.state, lost.attempt) == (CallState.UNKNOWN_OUTCOME, 1)
    assert operation.state == OperationState.ESCALATED
    assert len(scripted_http.requests) == 1


def test_a_requester_without_the_risks_permission_cannot_call_a_remote_tool(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    requester = get_user_model().objects.get(username="requester")
    requester.groups.remove(Group.objects.get(name="requesters"))
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.REJECTED, "UNAUTHORIZED")
    assert scripted_http.requests == []


def test_an_http_tool_changed_while_a_call_is_parked_makes_the_approval_stale(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    from approvals.services import approval_decide

    server = register_http(demo, scripted_http)
    enable(server, "pay", risk="irreversible", approval="always")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    changed = {**OBJECT, "required": ["order_id", "amount_cents"]}
    form = HttpToolForm("pay", "Pay", changed, f"{scripted_http.url}/pay")
    remote_http_tool_register(server_pk=server.pk, form=form, actor=ADMIN)
    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, reason="")
    stale = operation.calls.get()
    assert (stale.state, stale.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    tool = server.tools.get()
    assert not tool.enabled and tool.changed
    assert scripted_http.requests == []


PUBLIC = "http://127.0.0.1:9/pay"  # public enough where private addresses are allowed


@pytest.mark.parametrize(
    ("url", "reconcile_url", "allow_private", "message"),
    [
        ("http://127.0.0.1:9/pay", "", False, "not a public address"),
        ("http://10.0.0.7/pay", "", False, "not a public address"),
        ("http://user:secret@127.0.0.1:9/pay", "", True, "user name or password"),
        ("file:///etc/passwd", "", True, "only http and https"),
        (PUBLIC, "http://user:secret@127.0.0.1:9/reconcile", True, "user name or password"),
    ],
)
def test_an_http_tools_addresses_pass_the_webhook_address_rules(
    demo: Any, url: str, reconcile_url: str, allow_private: bool, message: str
) -> None:
    form = ServerForm(name="ledger", kind="http", signing_secret="s")
    server = remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    tool = HttpToolForm("pay", "", OBJECT, url, reconcile_url)
    with (
        override_settings(CALLGATE_REMOTE_ALLOW_PRIVATE=allow_private),
        pytest.raises(RemoteError, match=message) as refused,
    ):
        remote_http_tool_register(server_pk=server.pk, form=tool, actor=ADMIN)
    assert refused.value.code == "invalid_tool"
    assert not server.tools.exists()
