"""An answer to an MCP ``tools/call`` that the server did not send as a JSON-RPC message — an
error status without a JSON-RPC body, a body that is not JSON-RPC, another content type, an
event stream that ends first — leaves the call's outcome unknown: the server got the call and
may have run it, so a side-effecting call escalates rather than being told to the model as
"refused" (which invites the same call again). A JSON-RPC error the server sends is a refusal:
nothing ran. Real servers on 127.0.0.1: the fixture MCP server, behind a proxy that forwards
the session and answers the call as the case says."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.remote.conftest import (
    Reply,
    ScriptedHttp,
    ScriptedMcp,
    forward,
    jsonrpc_method,
    send,
    sent_on,
)
from tests.remote.test_remote_tools import enable, mcp_tool, register_mcp, run
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _proxy(upstream: str, call_answer: tuple[int, str, bytes] | None) -> Reply:
    """Forward the session to ``upstream``; answer a ``tools/call`` with ``call_answer``
    (status, content type, body) after forwarding it (the tool ran), or, when ``None``, with a
    JSON-RPC error without forwarding it (the server refused)."""

    def reply(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if jsonrpc_method(handler.command, body) != "tools/call":
            forward(upstream, handler, body)
        elif call_answer is None:
            error = {"code": -32602, "message": "order_id is unknown here"}
            refusal = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "error": error}
            send(handler, 200, json.dumps(refusal).encode())
        else:
            sent_on(upstream, handler, body)  # the tool runs
            status, content_type, answer = call_answer
            send(handler, status, answer, content_type=content_type)

    return reply


UNREADABLE = [
    pytest.param((200, "application/json", b'{"ok": true}'), id="JSON but not JSON-RPC"),
    pytest.param((200, "application/json", b"<html>"), id="not JSON"),
    pytest.param((200, "text/html", b"<p>done</p>"), id="another content type"),
    pytest.param((500, "text/plain", b"oops"), id="an error status without JSON-RPC"),
    pytest.param((502, "application/json", b'{"detail": "bad gateway"}'), id="a gateway's JSON"),
    pytest.param((200, "text/event-stream", b": nothing\n\n"), id="a stream ending first"),
]


def _pay(demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, risk: str) -> Any:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    enable(register_mcp(demo.tenant, f"{scripted_http.url}/mcp"), "pay", risk=risk)
    operation = run(demo, "shop__pay", {"order_id": "ORD-1", "amount_cents": 100})
    operation.refresh_from_db()
    return operation


@pytest.mark.parametrize("call_answer", UNREADABLE)
def test_an_unreadable_answer_to_a_write_leaves_its_outcome_unknown(
    demo: Any,
    scripted_mcp: ScriptedMcp,
    scripted_http: ScriptedHttp,
    call_answer: tuple[int, str, bytes],
) -> None:
    scripted_http.reply = _proxy(scripted_mcp.url, call_answer)
    operation = _pay(demo, scripted_mcp, scripted_http, "irreversible")
    lost = operation.calls.get()
    assert (lost.state, lost.attempt) == (CallState.UNKNOWN_OUTCOME, 1)
    assert operation.state == OperationState.ESCALATED
    details = " ".join(str(event.details) for event in lost.events.all())
    assert "the answer to the call could not be read" in details
    calls = [body for _m, _p, _h, body in scripted_http.requests if b'"tools/call"' in body]
    assert len(calls) == 1  # never sent again


def test_an_unreadable_answer_to_a_read_is_retried(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = _proxy(scripted_mcp.url, (200, "application/json", b"<html>"))
    operation = _pay(demo, scripted_mcp, scripted_http, "read")
    failed = operation.calls.get()
    assert (failed.state, failed.error_code, failed.attempt) == (CallState.FAILED, "TOOL_FAILED", 3)


def test_a_json_rpc_error_the_server_sends_is_a_refusal_directly(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"refuse": "order_id is unknown here"}})
    enable(register_mcp(demo.tenant, scripted_mcp.url), "pay", risk="irreversible")
    refused = run(demo, "shop__pay", {"order_id": "ORD-1"}).calls.get()
    assert (refused.state, refused.error_code) == (CallState.FAILED, "TOOL_REFUSED")
    assert "order_id is unknown here" in (refused.model_result or {})["error"]["message"]


def test_a_json_rpc_error_answering_the_call_is_a_refusal(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = _proxy(scripted_mcp.url, None)
    operation = _pay(demo, scripted_mcp, scripted_http, "irreversible")
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.FAILED, "TOOL_REFUSED")
    assert "order_id is unknown here" in (refused.model_result or {})["error"]["message"]
    assert operation.state == OperationState.COMPLETED


@pytest.mark.parametrize("method", ["initialize", "tools/list"])
def test_a_json_rpc_error_before_the_call_is_the_server_unavailable(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, method: str
) -> None:
    """The session's start or the listing answered with an error: the call never went out and
    the model is told the tool cannot be used now, not that the server refused the call."""
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    scripted_http.reply = _proxy(scripted_mcp.url, (200, "application/json", b"{}"))
    enable(register_mcp(demo.tenant, f"{scripted_http.url}/mcp"), "pay", risk="irreversible")

    def refusing(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if jsonrpc_method(handler.command, body) != method:
            forward(scripted_mcp.url, handler, body)
            return
        error = {"code": -32603, "message": "down for maintenance"}
        send(
            handler,
            200,
            json.dumps({"jsonrpc": "2.0", "id": json.loads(body)["id"], "error": error}).encode(),
        )

    scripted_http.reply = refusing
    operation = run(demo, "shop__pay", {"order_id": "ORD-1", "amount_cents": 100})
    unavailable = operation.calls.get()
    assert (unavailable.state, unavailable.error_code) == (CallState.FAILED, "TOOL_UNAVAILABLE")
    assert not [body for _m, _p, _h, body in scripted_http.requests if b'"tools/call"' in body]
