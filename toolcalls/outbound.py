"""Outgoing requests (HTTP tools, webhooks, MCP over HTTP), held to the address rules where the
connection is made, and each exchange to one deadline.

The address rules at the connection: :func:`toolcalls.addresses.url_check` resolves a URL's
host before anything is sent; the HTTP client would then resolve it again to connect, and a name
may answer differently the second time (DNS rebinding: a public address for the check,
``127.0.0.1`` or ``169.254.169.254`` for the connection). Where private addresses are refused,
:func:`request_pinned` resolves the host once, checks every address, and the request is sent to
that address, the host name kept for the ``Host`` header and TLS (``sni_hostname``, the
certificate checked against the name).

One deadline: httpx's timeouts (connect, read, write, pool) each bound one wait for the
network, not the exchange: a server that sends its status line, headers or body a byte at a time
keeps every wait short and the request open for as long as it likes. :func:`send_within` runs
the whole exchange (name resolution, connection, request, status line, headers, body) inside
``anyio.fail_after``, which cancels it wherever it is when the time is up.

A request through a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``; :func:`environ_proxy`) is connected
by the proxy, which resolves the name itself: the address rule does not apply to it, and the
proxy must refuse private destinations (docs/security.md).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx2

from toolcalls.addresses import UrlRefused, public_address


class NotSent(Exception):
    """Nothing of the request was sent: its host is refused or does not resolve, no connection
    was made, or the deadline passed first. The message says why (safe to show)."""


class NoAnswer(Exception):
    """The request may have been sent, and no whole answer came: the deadline passed, or the
    connection failed or carried no valid HTTP answer. The message says why (safe to show)."""


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status and the start of its (decoded) body."""

    status: int
    body: bytes


def send_within(
    request: httpx2.Request,
    *,
    timeout_s: float,
    allow_private: bool,
    body_bytes: Callable[[int], int],
) -> Answer:
    """Send ``request`` (no redirects followed) and read its answer, the whole exchange within
    ``timeout_s`` seconds: the name resolved (to public addresses only unless
    ``allow_private``, :func:`request_pinned`), connected, the request sent, the status line,
    headers and at most ``body_bytes(status)`` bytes of the decoded body read. Runs its own
    event loop in the calling thread. Raises :class:`NotSent` or :class:`NoAnswer`."""
    exchange = partial(_exchange, request, timeout_s, allow_private, body_bytes)
    return anyio.run(exchange)


async def _exchange(
    request: httpx2.Request,
    timeout_s: float,
    allow_private: bool,
    body_bytes: Callable[[int], int],
) -> Answer:
    progress = _Progress()
    request.extensions = {**request.extensions, "trace": progress.trace}
    proxy = environ_proxy(str(request.url))
    try:
        with anyio.fail_after(timeout_s):
            if proxy is None and not allow_private:
                request = await pinned(request)
            return await _answer(request, proxy, body_bytes)
    except TimeoutError as exc:
        late = f"within the timeout ({timeout_s:g} s)"
        raise progress.failure(f"nothing was sent {late}", f"no whole answer {late}") from exc
    except httpx2.HTTPError as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise progress.failure(f"nothing was sent: {why}", f"no whole answer: {why}") from exc


class _Progress:
    """Whether the request began to go out: httpcore's ``trace`` extension names each step of
    an exchange, and sending the request's headers comes after the connection (and the TLS
    handshake) and before anything of the request that could take effect."""

    sent = False

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.started"):
            self.sent = True

    def failure(self, unsent: str, unanswered: str) -> NotSent | NoAnswer:
        return NoAnswer(unanswered) if self.sent else NotSent(unsent)


async def _answer(
    request: httpx2.Request, proxy: str | None, body_bytes: Callable[[int], int]
) -> Answer:
    transport = httpx2.AsyncHTTPTransport(proxy=proxy)
    async with httpx2.AsyncClient(transport=transport, follow_redirects=False) as http:
        response = await http.send(request, stream=True)
        try:
            body = await _body(response, body_bytes(response.status_code))
        finally:
            await response.aclose()
    return Answer(status=response.status_code, body=body)


async def _body(response: httpx2.Response, most: int) -> bytes:
    """At most ``most`` bytes of ``response``'s decoded body, reading no further."""
    body = bytearray()
    if most > 0:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= most:
                break
    return bytes(body[:most])


def environ_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``, unless
    ``NO_PROXY`` lists its host), as the standard library reads them."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


async def pinned(request: httpx2.Request) -> httpx2.Request:
    """:func:`request_pinned`, its refusals raised as :class:`NotSent`."""
    try:
        return await request_pinned(request)
    except UrlRefused as exc:
        raise NotSent(str(exc)) from exc
    except OSError as exc:
        raise NotSent(f"cannot resolve the host: {exc}") from exc


async def request_pinned(request: httpx2.Request) -> httpx2.Request:
    """``request`` sent to the one address its host resolves to now, every address the name
    has being public (:func:`toolcalls.addresses.public_address`), the name kept for ``Host``
    (set when the request was built) and for TLS. Raises
    :class:`~toolcalls.addresses.UrlRefused` (an address is not public) or ``OSError`` (the
    name does not resolve), before anything is sent. A cancelled wait for the resolver returns
    at once (the resolver's thread is left to finish alone), so a deadline covers it."""
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await anyio.to_thread.run_sync(public_address, url.host, port, abandon_on_cancel=True)
    if url.scheme == "https":
        request.extensions = {**request.extensions, "sni_hostname": url.host}
    request.url = url.copy_with(host=address)
    return request
