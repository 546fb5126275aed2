"""Where private addresses are refused, the address a request connects to is held to the rule,
not only the one the host resolved to before (DNS rebinding: a name answering a public address
for the check and ``127.0.0.1`` for the connection). Real servers on 127.0.0.1; the check's
first resolution is made to pass, as a rebinding name's would; ``toolcalls.outbound``.

Also: an HTTP tool's whole reply must arrive within its timeout, however it drips in."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import httpx2
import pytest

from tests.remote.conftest import ScriptedHttp, ScriptedMcp
from toolcalls import outbound
from toolcalls.remote import clients
from toolcalls.remote.clients import Address, RemoteLost, RemoteUnavailable
from toolcalls.webhooks import delivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Private addresses refused; the address check before the request passes, as it does
    for a name whose first answer is public."""
    settings.CALLGATE_REMOTE_ALLOW_PRIVATE = False
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(clients, "url_check", lambda url, *, allow_private: None)
    monkeypatch.setattr(delivery, "webhook_url_check", lambda url: None)


def _post(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    return clients.http_post(
        f"{url}/refund",
        body={"amount_cents": 100},
        key="k1",
        secret="s",
        headers={},
        timeout_s=timeout_s,
    )


@pytest.mark.usefixtures("rebinding")
def test_an_http_tool_whose_connection_lands_on_a_private_address_gets_nothing(
    scripted_http: ScriptedHttp,
) -> None:
    with pytest.raises(RemoteUnavailable, match=r"127\.0\.0\.1, which is not a public address"):
        _post(scripted_http.url)
    assert scripted_http.requests == []  # refused before anything was sent


@pytest.mark.usefixtures("rebinding")
def test_a_webhook_whose_connection_lands_on_a_private_address_gets_nothing(
    scripted_http: ScriptedHttp,
) -> None:
    claim = delivery._Claim(
        pk=1, attempt=1, url=scripted_http.url, secret="s", event_type="e", body=b"{}"
    )
    outcome = delivery._send(claim)
    assert outcome.status is None and "not a public address" in outcome.error
    assert scripted_http.requests == []


@pytest.mark.usefixtures("rebinding")
def test_an_mcp_server_whose_name_now_resolves_to_a_private_address_gets_nothing(
    scripted_mcp: ScriptedMcp,
) -> None:
    with pytest.raises(RemoteUnavailable, match=r"127\.0\.0\.1, which is not a public address"):
        clients.mcp_list_tools(Address(url=scripted_mcp.url), timeout_s=10)


@pytest.mark.usefixtures("rebinding")
def test_an_mcp_request_goes_to_the_address_that_was_checked_under_its_name(
    monkeypatch: pytest.MonkeyPatch, scripted_mcp: ScriptedMcp
) -> None:
    """The name is resolved once, checked, and the request sent to that address: a name no
    resolver knows reaches the server, whose own rebinding guard (it serves ``127.0.0.1`` only)
    then refuses the name it is asked under (its ``Host``): the session cannot start, the
    server is unavailable."""
    asked: list[tuple[str, int]] = []

    def resolved(host: str, port: int) -> str:
        asked.append((host, port))
        return "127.0.0.1"

    monkeypatch.setattr(outbound, "public_address", resolved)
    url = scripted_mcp.url.replace("127.0.0.1", "mcp.callgate.invalid")
    with pytest.raises(RemoteUnavailable, match="answered with an error before the call"):
        clients.mcp_list_tools(Address(url=url), timeout_s=10)
    assert {host for host, _ in asked} == {"mcp.callgate.invalid"}


def test_a_pinned_request_keeps_its_name_for_host_and_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbound, "public_address", lambda host, port: "203.0.113.7")
    request = httpx2.Request("POST", "https://tools.example:8443/mcp")
    pinned = anyio.run(outbound.request_pinned, request)
    assert (pinned.url.host, pinned.url.port) == ("203.0.113.7", 8443)
    assert pinned.headers["Host"] == "tools.example:8443"
    assert pinned.extensions["sni_hostname"] == "tools.example"


def test_an_http_tool_reply_dripping_past_its_timeout_is_lost(
    scripted_http: ScriptedHttp,
) -> None:
    """Each byte comes well within the timeout, the whole reply would not: the exchange ends at
    the timeout as one whose answer was lost (the request was sent)."""

    def drip(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "40")
        handler.end_headers()
        for _ in range(40):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)

    scripted_http.reply = drip
    started = time.monotonic()
    with pytest.raises(RemoteLost, match="no whole answer within the timeout"):
        _post(scripted_http.url, timeout_s=1.0)
    assert time.monotonic() - started < 2.0
    assert len(scripted_http.requests) == 1
