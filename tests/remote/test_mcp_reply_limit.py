"""The reply limit over MCP: a server whose answer goes past ``CALLGATE_REMOTE_MAX_REPLY_BYTES``
(one JSON body, or one event stream) is refused as soon as the limit is passed, at registration
and for a call over an established session. Real servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import gzip
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.test import override_settings

from tests.remote.conftest import Reply, ScriptedHttp, ScriptedMcp
from tests.remote.test_remote_tools import enable, mcp_tool, register_mcp, run
from toolcalls.remote.models import RemoteServer
from toolcalls.remote.services import DISCOVERY_TIMEOUT_S, RemoteError
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

LIMIT = 10_000
ANSWER = f"the reply is over the reply limit: larger than {LIMIT} bytes"
HUGE = 1_000_000


def _json_chunks() -> list[bytes]:
    """One JSON-RPC answer of about :data:`HUGE` bytes, in 10 KB pieces."""
    filler = b"x" * 10_000
    return [b'{"jsonrpc": "2.0", "id": 0, "result": {"x": "', *[filler] * (HUGE // 10_000)]


def _event_chunks() -> list[bytes]:
    """An event stream of about :data:`HUGE` bytes: notifications of about 10 KB each."""
    event = b'data: {"jsonrpc": "2.0", "method": "notifications/message", "params": '
    event += b'{"level": "info", "data": "' + b"x" * 10_000 + b'"}}\n\n'
    return [event] * (HUGE // len(event) + 1)


def streamed(content_type: str, chunks: list[bytes]) -> Reply:
    """A reply that streams ``chunks`` with no length given, until the client hangs up."""

    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.end_headers()
        with contextlib.suppress(OSError):  # Callgate stopped reading and hung up
            for chunk in chunks:
                handler.wfile.write(chunk)

    return reply


@pytest.mark.parametrize(
    ("content_type", "chunks"),
    [("application/json", _json_chunks()), ("text/event-stream", _event_chunks())],
    ids=["json", "event-stream"],
)
@override_settings(CALLGATE_REMOTE_MAX_REPLY_BYTES=LIMIT)
def test_registering_a_server_whose_answer_is_over_the_limit_fails_fast_and_saves_nothing(
    demo: Any, scripted_http: ScriptedHttp, content_type: str, chunks: list[bytes]
) -> None:
    scripted_http.reply = streamed(content_type, chunks)
    started = time.monotonic()
    with pytest.raises(RemoteError) as refused:
        register_mcp(demo.tenant, f"{scripted_http.url}/mcp")
    assert time.monotonic() - started < DISCOVERY_TIMEOUT_S / 2
    assert refused.value.code == "server_unreachable"
    assert f"RemoteBadReply: {ANSWER}" in str(refused.value)
    assert not RemoteServer.objects.exists()


def test_a_server_answering_compressed_is_refused_whatever_its_size(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    """Replies are asked for uncompressed: the limit counts what is read, and a small gzip body
    may expand without bound."""
    bomb = gzip.compress(b'{"jsonrpc": "2.0", "id": 0, "result": {"x": "' + b"x" * HUGE)

    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        assert handler.headers["Accept-Encoding"] == "identity"
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        with contextlib.suppress(OSError):
            handler.wfile.write(bomb)

    scripted_http.reply = reply
    with pytest.raises(RemoteError) as refused:
        register_mcp(demo.tenant, f"{scripted_http.url}/mcp")
    assert "RemoteBadReply: the reply is compressed, not as asked" in str(refused.value)
    assert not RemoteServer.objects.exists()


def huge_result(scripted_mcp: ScriptedMcp) -> None:
    scripted_mcp.script([mcp_tool("lookup")], {"lookup": {"structured": {"a": "x" * HUGE}}})


@override_settings(CALLGATE_REMOTE_MAX_REPLY_BYTES=LIMIT)
def test_a_read_tools_answer_over_the_limit_is_a_bad_reply_retried_then_failed(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    huge_result(scripted_mcp)
    enable(register_mcp(demo.tenant, scripted_mcp.url), "lookup")
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert (failed.state, failed.error_code, failed.attempt) == (CallState.FAILED, "TOOL_FAILED", 3)
    details = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert len(details) == 3
    assert all(f"RemoteBadReply: {ANSWER}" == detail["detail"] for detail in details[1:])


@override_settings(CALLGATE_REMOTE_MAX_REPLY_BYTES=LIMIT)
def test_a_write_tools_answer_over_the_limit_leaves_its_outcome_unknown(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    huge_result(scripted_mcp)
    enable(register_mcp(demo.tenant, scripted_mcp.url), "lookup", risk="irreversible")
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    lost = operation.calls.get()
    assert (lost.state, lost.attempt) == (CallState.UNKNOWN_OUTCOME, 1)
    assert operation.state == OperationState.ESCALATED
    details = [str(event.details) for event in lost.events.all()]
    assert any(f"RemoteBadReply: {ANSWER}" in detail for detail in details)
