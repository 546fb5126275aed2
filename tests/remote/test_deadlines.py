"""One deadline for the whole exchange with a remote server: name resolution, connection (TLS
handshake included), request, status line, headers and body. A server dripping its answer a
byte at a time keeps each wait for bytes short; the exchange still ends at the timeout, as a
lost answer once the request may have gone out and as one that reached nothing before that.
A call records it so: a side effect whose request never went out (an MCP session still starting
or listing, a TLS handshake, a late resolver) is a tool that did not run, not an unknown
outcome. Real servers on 127.0.0.1; ``toolcalls.outbound``."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import pytest

from tests.remote.conftest import (
    ScriptedHttp,
    ScriptedMcp,
    dripping,
    forward,
    holding,
    jsonrpc_method,
)
from tests.remote.test_remote_tools import enable, mcp_tool, register_http, register_mcp, run
from toolcalls import addresses, outbound
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.remote import clients
from toolcalls.remote.clients import Address, RemoteLost, RemoteUnavailable
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.states import CallState, OperationState
from toolcalls.webhooks import delivery

#: An answer whose status line and headers alone take 20 s at a byte every 0.3 s.
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
#: The most an exchange with a 1 s timeout may take here (room for a slow machine); dripping
#: that answer or a TLS handshake (``conftest.HANDSHAKE``) takes 20 s.
WITHIN_S = 4.0


def _late(host: str, port: int) -> str:
    """A resolver answering after 6 s."""
    time.sleep(6)
    return "203.0.113.7"


def _post(url: str) -> Any:
    return clients.http_post(
        url, body={"amount_cents": 100}, key="k1", secret="s", headers={}, timeout_s=1.0
    )


def _get(url: str) -> Any:
    return clients.http_get(url, key="k1", tenant_ref="t", secret="s", headers={}, timeout_s=1.0)


@pytest.mark.parametrize("exchange", [_post, _get], ids=["call", "reconcile"])
def test_an_http_tool_dripping_its_status_line_and_headers_is_lost_at_its_timeout(
    scripted_http: ScriptedHttp, exchange: Any
) -> None:
    """The request went out: a timeout while its answer's head drips in is a lost answer."""
    scripted_http.reply = dripping(ANSWER, every_s=0.3)
    started = time.monotonic()
    with pytest.raises(RemoteLost, match="no whole answer within the timeout"):
        exchange(f"{scripted_http.url}/refund")
    assert time.monotonic() - started < WITHIN_S
    assert len(scripted_http.requests) == 1


def test_an_https_tool_dripping_its_handshake_got_nothing_at_its_timeout(
    tls_dripping: tuple[str, list[bytes]],
) -> None:
    """Connected, the TLS handshake under way, the request not yet sent: the timeout ends it
    as a tool that could not be reached (nothing ran), not as a lost answer."""
    url, received = tls_dripping
    started = time.monotonic()
    with pytest.raises(RemoteUnavailable, match="nothing was sent within the timeout"):
        _post(f"{url}/refund")
    assert time.monotonic() - started < WITHIN_S
    assert received and received[0].startswith(b"\x16")  # a TLS hello, no HTTP request


def test_a_webhook_receiver_dripping_its_answer_fails_the_attempt_at_the_timeout(
    settings: Any, scripted_http: ScriptedHttp
) -> None:
    settings.CALLGATE_WEBHOOK_TIMEOUT_S = 1.0
    scripted_http.reply = dripping(ANSWER, every_s=0.3)
    claim = delivery._Claim(
        pk=1, attempt=1, url=scripted_http.url, secret="s", event_type="e", body=b"{}"
    )
    started = time.monotonic()
    outcome = delivery._send(claim)
    assert time.monotonic() - started < WITHIN_S
    assert (outcome.status, outcome.permanent) == (None, False)  # retried with backoff
    assert "no whole answer within the timeout" in outcome.error
    assert len(scripted_http.requests) == 1


def test_an_mcp_session_waiting_for_its_host_to_resolve_ends_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Where private addresses are refused, an MCP request's host is resolved (and checked) as
    the request is sent: a resolver answering late holds the session no longer than its
    timeout, and nothing was sent."""
    settings.CALLGATE_REMOTE_ALLOW_PRIVATE = False
    monkeypatch.setattr(clients, "url_check", lambda url, *, allow_private: None)

    monkeypatch.setattr(outbound, "public_address", _late)
    started = time.monotonic()
    with pytest.raises(RemoteUnavailable, match="no answer in time"):
        clients.mcp_list_tools(Address(url="http://mcp.callgate.invalid/mcp"), timeout_s=1.0)
    assert time.monotonic() - started < WITHIN_S


# --- a whole call: nothing sent before the timeout is a tool that did not run -------------------

#: The timeout of the tools called below (ms); each server holds its answer far longer.
CALL_TIMEOUT_MS = 500


def _unavailable(operation: Operation) -> ToolCall:
    """The operation's one call, failed as a tool that could not be reached: nothing ran, the
    model was told, its key released (the same intent may run once the server answers)."""
    operation.refresh_from_db()
    failed = operation.calls.get()
    assert (failed.state, failed.error_code) == (CallState.FAILED, "TOOL_UNAVAILABLE")
    assert operation.state == OperationState.COMPLETED
    assert not IdempotencyRecord.objects.exists()
    return failed


def _pay_through(demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp) -> None:
    """A side-effecting MCP tool, registered and enabled through ``scripted_http`` forwarding
    the session to the fixture server."""
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    scripted_http.reply = partial(forward, scripted_mcp.url)
    server = register_mcp(demo.tenant, f"{scripted_http.url}/mcp")
    enable(server, "pay", risk="irreversible", timeout_ms=CALL_TIMEOUT_MS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize("method", ["initialize", "notifications/initialized", "tools/list"])
def test_an_mcp_server_silent_before_the_call_went_out_ran_nothing(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, method: str
) -> None:
    """The session's start, or the listing before the call, held past the tool's timeout:
    ``tools/call`` was never sent, so a side effect is unavailable, not an unknown outcome."""
    _pay_through(demo, scripted_mcp, scripted_http)
    scripted_http.reply = holding(scripted_mcp.url, method, seconds=10)
    started = time.monotonic()
    operation = run(demo, "shop__pay", {"order_id": "ORD-1"})
    assert time.monotonic() - started < WITHIN_S
    failed = _unavailable(operation)
    assert "no answer in time" in (failed.protected_audit or {})["handler"]["detail"]
    methods = _methods(scripted_http)
    assert method in methods and "tools/call" not in methods


def _methods(scripted_http: ScriptedHttp) -> list[str]:
    """The JSON-RPC methods of the MCP requests ``scripted_http`` got, in order."""
    return [jsonrpc_method(command, body) for command, _p, _h, body in scripted_http.requests]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize("kind", ["mcp", "http"])
def test_a_tool_whose_handshake_outlasts_its_timeout_ran_nothing(
    demo: Any,
    scripted_mcp: ScriptedMcp,
    scripted_http: ScriptedHttp,
    tls_dripping: tuple[str, list[bytes]],
    kind: str,
) -> None:
    """Connected, the TLS handshake still under way at the timeout: nothing was sent, as the
    exchange on its own says (above), and the call records it so."""
    url, received = tls_dripping
    if kind == "mcp":
        _pay_through(demo, scripted_mcp, scripted_http)
        RemoteServer.objects.update(url=f"{url}/mcp")
        name = "shop__pay"
    else:
        server = register_http(demo, scripted_http)
        enable(server, "pay", risk="irreversible", timeout_ms=CALL_TIMEOUT_MS)
        RemoteTool.objects.update(url=f"{url}/pay")
        name = "ledger__pay"
    started = time.monotonic()
    operation = run(demo, name, {"order_id": "ORD-1"})
    assert time.monotonic() - started < WITHIN_S
    _unavailable(operation)
    assert received and received[0].startswith(b"\x16")  # a TLS hello, no HTTP request


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_an_mcp_tool_whose_host_resolves_after_its_timeout_ran_nothing(
    demo: Any,
    scripted_mcp: ScriptedMcp,
    scripted_http: ScriptedHttp,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """Where private addresses are refused, the session's address check resolves its host
    first: a resolver answering late holds it no longer than the tool's timeout either."""
    _pay_through(demo, scripted_mcp, scripted_http)
    settings.CALLGATE_REMOTE_ALLOW_PRIVATE = False

    monkeypatch.setattr(addresses, "public_address", _late)
    started = time.monotonic()
    operation = run(demo, "shop__pay", {"order_id": "ORD-1"})
    assert time.monotonic() - started < WITHIN_S
    _unavailable(operation)
    assert _methods(scripted_http).count("initialize") == 1  # the registration's session only
