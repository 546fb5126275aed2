"""One deadline for the whole exchange with a remote server: name resolution, connection (TLS
handshake included), request, status line, headers and body. A server dripping its answer a
byte at a time keeps each wait for bytes short; the exchange still ends at the timeout, as a
lost answer once the request may have gone out and as one that reached nothing before that.
Real servers on 127.0.0.1; ``toolcalls.outbound``."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp, dripping
from toolcalls import outbound
from toolcalls.remote import clients
from toolcalls.remote.clients import Address, RemoteLost, RemoteUnavailable
from toolcalls.webhooks import delivery

#: An answer whose status line and headers alone take 20 s at a byte every 0.3 s.
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
#: The start of a TLS handshake record (a 64-byte ServerHello): 20 s at a byte every 0.3 s.
HANDSHAKE = b"\x16\x03\x03\x00\x40" + bytes(64)
#: The most an exchange with a 1 s timeout may take here (room for a slow machine); dripping
#: the answers above takes 20 s.
WITHIN_S = 4.0


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


@pytest.fixture
def tls_dripping() -> Iterator[tuple[str, list[bytes]]]:
    """An https URL on 127.0.0.1 whose server reads the client's first flight (its TLS hello,
    recorded in the list) and answers with :data:`HANDSHAKE`, a byte every 0.3 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        with contextlib.suppress(OSError):  # the client gave up, or the test ended
            connection, _ = listener.accept()
            with connection:
                received.append(connection.recv(65536))
                for byte in HANDSHAKE:
                    connection.sendall(bytes([byte]))
                    time.sleep(0.3)

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", received
    listener.close()


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

    def late(host: str, port: int) -> str:
        time.sleep(6)
        return "203.0.113.7"

    monkeypatch.setattr(outbound, "public_address", late)
    started = time.monotonic()
    with pytest.raises(RemoteUnavailable, match="no answer in time"):
        clients.mcp_list_tools(Address(url="http://mcp.callgate.invalid/mcp"), timeout_s=1.0)
    assert time.monotonic() - started < WITHIN_S
