"""Talking to remote tools: MCP servers through the official ``mcp`` SDK, HTTP tools through
``httpx`` (:func:`toolcalls.outbound.send_within`). No ORM here; the callers pass what a request
needs.

Every failure is one of three kinds, because what Callgate may do next depends on it:
:class:`RemoteUnavailable` (nothing that could take effect was sent: the address or its headers
are refused, nobody answers, the server refused the request before running anything),
:class:`RemoteLost` (the request may have reached the tool and the answer was lost: a timeout, a
dropped connection, a 5xx) and :class:`RemoteBadReply` (an answer came back that cannot be used:
not JSON, JSON that cannot be read exactly (:func:`_exactly`), larger than
``CALLGATE_REMOTE_MAX_REPLY_BYTES``, not the shape the protocol promises).

The engine is synchronous: each MCP or HTTP exchange runs its own event loop (``anyio.run``) in
the calling thread. Celery's workers and the in-process worker's threads run no loop of their own,
so this is safe in both.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import httpx2
import mcp_types
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolcalls.addresses import UrlRefused, url_check
from toolcalls.binding import InexactJson, exact_check, exact_json_loads
from toolcalls.outbound import NoAnswer, NotSent, environ_proxy, pinned, send_within
from toolcalls.signing import SIGNATURE_HEADER, payload_body, sign

T = TypeVar("T")


class RemoteUnavailable(Exception):
    """Nothing that could take effect was sent; the message says why (safe to show)."""


class RemoteLost(Exception):
    """The request may have reached the tool; whether it took effect is unknown."""


class RemoteBadReply(Exception):
    """The tool answered with something that cannot be used."""


class RemoteRefused(Exception):
    """The tool refused the request before any effect, with a machine-readable ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Address:
    """Where a server is: ``url`` (streamable HTTP) or ``command`` (stdio argv), and the
    ``headers`` sent with every HTTP request."""

    url: str = ""
    command: Sequence[str] = ()
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServedTool:
    """One tool as a server lists it: MCP ``name``, ``description``, ``inputSchema`` and
    ``annotations`` (camelCase keys as on the wire), and how many tools the listing gives under
    that name (``listed``; more than one: a call by the name could reach any of them)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any]
    listed: int = 1


def served_by_name(listing: Iterable[ServedTool]) -> dict[str, ServedTool]:
    """Each name of ``listing`` once, as its first tool, ``listed`` counting the tools under it
    (see :func:`toolcalls.remote.rules.served_problem`: such a name cannot be enabled)."""
    tools = list(listing)
    counts = Counter(tool.name for tool in tools)
    served: dict[str, ServedTool] = {}
    for tool in tools:
        served.setdefault(tool.name, replace(tool, listed=counts[tool.name]))
    return served


#: Header names Callgate or its transports set (the MCP SDK's included), or that frame and
#: route the message: a value given for them would be overridden or break the exchange.
#: (``Accept`` is left to the server's registration: the transports read the reply they get.)
RESERVED_HEADERS = frozenset(
    {
        "connection", "content-encoding", "content-length", "content-type", "expect", "host",
        "idempotency-key", "keep-alive", "last-event-id", "mcp-protocol-version",
        "mcp-session-id", "te", "trailer", "transfer-encoding", "upgrade",
        SIGNATURE_HEADER.lower(),
    }
)  # fmt: skip
#: RFC 9110 §5.1: a field name is a token.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: RFC 9110 §5.5 as the transports can send it: visible US-ASCII, spaces and tabs (no CR, LF,
#: NUL or other control character; the MCP transport encodes header values as ASCII).
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


#: Longest header value a server may be given (characters): tokens and credentials fit.
MAX_HEADER_VALUE = 2000


def headers_problem(headers: Mapping[str, str]) -> str:
    """Why ``headers`` cannot be sent with a server's requests, or ``""``. Each name is a token
    (RFC 9110 §5.1), none of :data:`RESERVED_HEADERS`, no two the same ignoring case; each value
    is at most :data:`MAX_HEADER_VALUE` characters of visible US-ASCII, spaces and tabs, neither
    starting nor ending with a space or tab. The
    problem names the header, never its value (a secret)."""
    seen: set[str] = set()
    for name, value in headers.items():
        problem = _header_problem(name, value, seen)
        if problem:
            return problem
        seen.add(name.lower())
    return ""


def _header_problem(name: object, value: object, seen: set[str]) -> str:
    if not isinstance(name, str) or not isinstance(value, str):
        return "headers are names and values, both strings"
    if not _HEADER_NAME.fullmatch(name):
        return f"the header name {name!r} is not an HTTP token: letters, digits, !#$%&'*+-.^_`|~"
    if name.lower() in RESERVED_HEADERS:
        return f"the header {name!r} is set by Callgate or its transport; it cannot be given"
    if name.lower() in seen:
        return f"the header {name!r} is given twice (header names ignore case)"
    if len(value) > MAX_HEADER_VALUE:
        return f"the value of the header {name!r} is longer than {MAX_HEADER_VALUE} characters"
    if not _HEADER_VALUE.fullmatch(value) or value != value.strip(" \t"):
        return (
            f"the value of the header {name!r} must be visible ASCII characters, spaces and "
            "tabs, neither starting nor ending with a space or tab"
        )
    return ""


def address_problem(address: Address) -> str:
    """Why Callgate refuses ``address`` without trying it, or ``""``: a command where
    ``CALLGATE_REMOTE_ALLOW_STDIO`` does not allow stdio, or its headers
    (:func:`headers_problem`)."""
    if address.command and not settings.CALLGATE_REMOTE_ALLOW_STDIO:
        return "MCP servers over stdio are not allowed here"
    return headers_problem(address.headers)


def address_check(address: Address) -> None:
    """Raise :class:`RemoteUnavailable`, before anything is sent, unless ``address`` may be
    called: :func:`address_problem` finds nothing, and a URL passes the address rules
    (:mod:`toolcalls.addresses`, private addresses only where ``CALLGATE_REMOTE_ALLOW_PRIVATE``
    says so)."""
    problem = address_problem(address)
    if problem:
        raise RemoteUnavailable(problem)
    if address.command:
        return
    try:
        url_check(address.url, allow_private=settings.CALLGATE_REMOTE_ALLOW_PRIVATE)
    except UrlRefused as exc:
        raise RemoteUnavailable(str(exc)) from exc
    except OSError as exc:
        raise RemoteUnavailable(f"cannot resolve the host: {exc}") from exc


# --- MCP ----------------------------------------------------------------------------------------


def mcp_list_tools(address: Address, *, timeout_s: float) -> list[ServedTool]:
    """Every tool the MCP server at ``address`` lists (all pages). Raises
    :class:`RemoteUnavailable` (the server cannot be reached or does not answer within
    ``timeout_s`` seconds) or :class:`RemoteBadReply`."""

    async def exchange(client: Client, _phase: _Phase) -> list[ServedTool]:
        return await _listing(client)

    return _mcp(address, timeout_s, exchange)


def mcp_call_tool(
    address: Address,
    *,
    name: str,
    arguments: Mapping[str, Any],
    meta: Mapping[str, Any],
    proceed: Callable[[ServedTool | None], bool],
    timeout_s: float,
) -> tuple[ServedTool | None, mcp_types.CallToolResult | None]:
    """In one session: list the tools, ask ``proceed`` whether ``name`` as served now (``None``:
    not listed) may be called, and if so call it with ``arguments`` and ``meta`` (the request's
    ``_meta``). Returns (the tool as served, the result or ``None`` when not called);
    ``proceed`` runs inside the session's event loop, so it must not touch the database.
    Raises :class:`RemoteUnavailable` before the call is sent (the timeout passing while the
    address is checked, the session starts or the tools are listed included),
    :class:`RemoteRefused` (a JSON-RPC error the server sent answering the call: it ran
    nothing; one answering the session's start or the listing is :class:`RemoteUnavailable`),
    :class:`RemoteLost` once it may have been sent (a timeout included: the whole exchange gets
    ``timeout_s`` seconds; an answer that is no JSON-RPC message, or an error status without
    one), :class:`RemoteBadReply` (a result whose ``structuredContent`` cannot be read exactly
    either, as an HTTP tool's reply: :func:`_exactly`)."""

    async def exchange(
        client: Client, phase: _Phase
    ) -> tuple[ServedTool | None, mcp_types.CallToolResult | None]:
        served = served_by_name(await _listing(client)).get(name)
        if not proceed(served):
            return served, None
        phase.sent = True
        result = await client.call_tool(name, dict(arguments), meta=dict(meta))  # type: ignore[arg-type]
        if not result.is_error:
            _exactly(partial(exact_check, result.structured_content))
        return served, result

    return _mcp(address, timeout_s, exchange)


async def _listing(client: Client) -> list[ServedTool]:
    tools: list[ServedTool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang Callgate
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        for tool in page.tools:
            wire = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
            tools.append(
                ServedTool(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=wire.get("inputSchema", {}),
                    annotations=wire.get("annotations", {}),
                )
            )
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise RemoteBadReply("the server's tool listing did not end after 100 pages")


class _Phase:
    """Whether the exchange got past the point where a request could take effect, the error
    of a response that went past the reply limit (the SDK can turn that error into another, or
    into an ended event stream), and, over HTTP, the answer to the ``tools/call`` request as it
    came: its content type and body (``call_answer``)."""

    sent = False
    too_large: RemoteBadReply | None = None
    over_http = True
    call_answer: tuple[str, bytearray] | None = None

    def server_refused(self) -> bool:
        """Whether the server itself answered the call with a JSON-RPC error (nothing ran).
        Over HTTP the SDK also raises such an error for an answer it could not read (an error
        status without a JSON-RPC body, a body not JSON-RPC, another content type, an event
        stream that ended first): after the call went out, that answer's outcome is unknown.
        Over stdio every such error is the server's."""
        if not self.over_http:
            return True
        if self.call_answer is None:
            return False
        content_type, kept = self.call_answer
        body = bytes(kept)
        if content_type.startswith("text/event-stream"):
            messages = [line[5:] for line in body.splitlines() if line.startswith(b"data:")]
        else:
            messages = [body] if content_type.startswith("application/json") else []
        return any(_jsonrpc_error(message) for message in messages)


def _jsonrpc_error(message: bytes) -> bool:
    try:
        parsed = mcp_types.jsonrpc_message_adapter.validate_json(message, by_name=False)
    except ValidationError:
        return False
    return isinstance(parsed, mcp_types.JSONRPCError)


def _tool_call(request: httpx2.Request) -> bool:
    """Whether ``request`` carries a JSON-RPC ``tools/call`` (the SDK sends one per POST)."""
    if request.method != "POST":
        return False
    try:
        message = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


class _ReplyLimit(httpx2.AsyncBaseTransport):
    """The HTTP transport of an MCP session: each response's body is read up to
    ``CALLGATE_REMOTE_MAX_REPLY_BYTES`` bytes (one event stream as a whole), and reading past
    that raises :class:`RemoteBadReply`, recorded in ``phase``. Replies are asked for
    uncompressed and one that comes compressed anyway is refused the same way: the limit
    counts what is read, and a small compressed body may expand without bound. Requests go
    through ``proxy`` when given; else, with ``public_only``, each to the public address its
    host resolves to at that moment (:func:`toolcalls.outbound.request_pinned`), a host that
    resolves to any other being :class:`~toolcalls.outbound.NotSent`."""

    def __init__(self, phase: _Phase, proxy: str | None, *, public_only: bool) -> None:
        self._network = httpx2.AsyncHTTPTransport(proxy=proxy)
        self._phase = phase
        self._pinned = public_only and proxy is None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._pinned:
            request = await pinned(request)
        request.headers["Accept-Encoding"] = "identity"
        kept = bytearray() if _tool_call(request) else None
        response = await self._network.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        if response.headers.get("Content-Encoding", "identity").lower() != "identity":
            await response.aclose()
            self._phase.too_large = RemoteBadReply("the reply is compressed, not as asked")
            raise self._phase.too_large
        if kept is not None:
            self._phase.call_answer = (response.headers.get("Content-Type", "").lower(), kept)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_LimitedBody(response.stream, self._phase, kept),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._network.aclose()


class _LimitedBody(httpx2.AsyncByteStream):
    """A response body that raises :class:`RemoteBadReply` once more than
    ``CALLGATE_REMOTE_MAX_REPLY_BYTES`` bytes are read, and records it in ``phase``; what is
    read is also added to ``kept`` when given."""

    def __init__(self, body: httpx2.AsyncByteStream, phase: _Phase, kept: bytearray | None) -> None:
        self._body = body
        self._phase = phase
        self._kept = kept

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = settings.CALLGATE_REMOTE_MAX_REPLY_BYTES
        size = 0
        async for chunk in self._body:
            size += len(chunk)
            if size > limit:
                self._phase.too_large = RemoteBadReply(
                    f"the reply is over the reply limit: larger than {limit} bytes"
                )
                raise self._phase.too_large
            if self._kept is not None:
                self._kept += chunk
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


def _mcp(
    address: Address, timeout_s: float, exchange: Callable[[Client, _Phase], Awaitable[T]]
) -> T:
    phase = _Phase()
    phase.over_http = not address.command

    async def session() -> T:
        with anyio.fail_after(timeout_s):
            # Within the deadline: the check resolves the host, and a resolver answering late
            # must end as the session's other steps before the call do (nothing sent).
            await anyio.to_thread.run_sync(address_check, address, abandon_on_cancel=True)
            async with (
                httpx2.AsyncClient(
                    headers=dict(address.headers),
                    timeout=timeout_s,
                    follow_redirects=False,
                    transport=_ReplyLimit(
                        phase,
                        environ_proxy(address.url),
                        public_only=not settings.CALLGATE_REMOTE_ALLOW_PRIVATE,
                    ),
                ) as http,
                Client(_transport(address, http), cache=None) as client,
            ):
                return await exchange(client, phase)

    return _classified(lambda: anyio.run(session), phase)


def _transport(address: Address, http: httpx2.AsyncClient) -> Any:
    if address.command:
        command = list(address.command)
        return stdio_client(StdioServerParameters(command=command[0], args=command[1:]))
    return streamable_http_client(address.url, http_client=http)


def _classified(run: Callable[[], T], phase: _Phase) -> T:
    """Run ``run`` and map what it raises (the SDK wraps transport errors in exception groups)
    onto the kinds of failure; once a response went past the reply limit, whatever the SDK made
    of that is :class:`RemoteBadReply`."""
    try:
        return run()
    except Exception as exc:
        if phase.too_large is not None:
            raise phase.too_large from exc
        leaf = _leaf(exc)
        if isinstance(leaf, RemoteUnavailable | RemoteBadReply | RemoteRefused | RemoteLost):
            raise leaf from exc
        if isinstance(leaf, NotSent):
            raise RemoteUnavailable(str(leaf)) from exc
        if isinstance(leaf, MCPError) and not phase.sent:
            # The session's start or the listing answered with an error: the server cannot
            # be used now, and the call never went out.
            message = f"the MCP server answered with an error before the call: {leaf}"
            raise RemoteUnavailable(message) from exc
        if isinstance(leaf, MCPError) and not phase.server_refused():
            raise RemoteLost(f"the answer to the call could not be read: {leaf}") from exc
        if isinstance(leaf, MCPError):
            message = f"the MCP server refused the request: {leaf}"
            raise RemoteRefused("TOOL_REFUSED", message) from exc
        detail = "no answer in time" if isinstance(leaf, TimeoutError) else _name(leaf)
        if phase.sent:
            raise RemoteLost(f"the answer to the call was lost: {detail}") from exc
        raise RemoteUnavailable(detail) from exc


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _name(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --- HTTP ---------------------------------------------------------------------------------------


def http_post(
    url: str,
    *,
    body: Mapping[str, Any],
    key: str,
    secret: str,
    headers: Mapping[str, str],
    timeout_s: float,
) -> dict[str, Any]:
    """POST ``body`` (compact sorted JSON) to an HTTP tool with ``headers``,
    ``Idempotency-Key: key`` (none for a read tool's empty key) and a ``Callgate-Signature`` made
    with ``secret``; returns the 2xx reply's JSON object. The whole exchange gets ``timeout_s``
    seconds. Raises :class:`RemoteUnavailable` (address or headers refused, no connection, the
    timeout passed before the request went out), :class:`RemoteRefused` (a 4xx:
    ``{"error": {"code", "message"}}``, else ``HTTP_<status>``), :class:`RemoteLost` (the
    timeout passed before the whole reply came, dropped connection, 5xx),
    :class:`RemoteBadReply` (not a JSON object, too large)."""
    address_check(Address(url=url, headers=headers))
    raw = payload_body(dict(body))
    signed = {
        **headers,
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(secret=secret, body=raw, timestamp=int(time.time())),
        **({"Idempotency-Key": key} if key else {}),
    }
    status, reply = _http(httpx2.Request("POST", url, content=raw, headers=signed), timeout_s)
    if 200 <= status < 300:
        return _json_object(reply)
    if 400 <= status < 500:
        raise _refusal(status, reply)
    if status >= 500:
        raise RemoteLost(f"the tool answered HTTP {status}")
    raise RemoteBadReply(f"the tool answered HTTP {status}")


def http_get(
    url: str,
    *,
    key: str,
    tenant_ref: str,
    secret: str,
    headers: Mapping[str, str],
    timeout_s: float,
) -> tuple[int, dict[str, Any] | None]:
    """GET ``url?idempotency_key=<key>&tenant_ref=<tenant>`` with ``Idempotency-Key: key``,
    signed over the key; returns (status, the reply's JSON object or ``None``). Raises what
    :func:`http_post` raises for a failed exchange."""
    address_check(Address(url=url, headers=headers))
    signed = {
        **headers,
        "Idempotency-Key": key,
        SIGNATURE_HEADER: sign(secret=secret, body=key.encode(), timestamp=int(time.time())),
    }
    params = {"idempotency_key": key, "tenant_ref": tenant_ref}
    request = httpx2.Request("GET", url, params=params, headers=signed)
    status, reply = _http(request, timeout_s)
    try:
        return status, _json_object(reply)
    except RemoteBadReply:
        return status, None


def _http(request: httpx2.Request, timeout_s: float) -> tuple[int, bytes]:
    """(status, body) of ``request``, sent where the address rules allow and whole within
    ``timeout_s`` seconds, status line, headers and body alike
    (:func:`toolcalls.outbound.send_within`; no redirects: one could point at an address the
    rules refuse). Raises :class:`RemoteUnavailable` (nothing was sent), :class:`RemoteLost`
    (the request may have been sent and no whole answer came), :class:`RemoteBadReply` (a body
    over ``CALLGATE_REMOTE_MAX_REPLY_BYTES``)."""
    limit = settings.CALLGATE_REMOTE_MAX_REPLY_BYTES
    try:
        answer = send_within(
            request,
            timeout_s=timeout_s,
            allow_private=settings.CALLGATE_REMOTE_ALLOW_PRIVATE,
            body_bytes=lambda _status: limit + 1,
        )
    except NotSent as exc:
        raise RemoteUnavailable(f"cannot reach the tool: {exc}") from exc
    except NoAnswer as exc:
        raise RemoteLost(str(exc)) from exc
    if len(answer.body) > limit:
        raise RemoteBadReply(f"the reply is larger than {limit} bytes")
    return answer.status, answer.body


def _json_object(body: bytes) -> dict[str, Any]:
    """The reply's JSON object, read exactly (:func:`_exactly`). Raises
    :class:`RemoteBadReply`."""
    try:
        value = _exactly(partial(exact_json_loads, body))
    except (ValueError, RecursionError) as exc:
        raise RemoteBadReply("the reply is not JSON") from exc
    if not isinstance(value, dict):
        raise RemoteBadReply("the reply is not a JSON object")
    return value


def _exactly(read: Callable[[], T]) -> T:
    """What ``read`` returns: a tool's reply read, or checked once read, as exact JSON
    (:func:`~toolcalls.binding.exact_json_loads`, :func:`~toolcalls.binding.exact_check`).
    A member name given twice or a number beyond what JSON carries exactly is no usable
    answer: :class:`RemoteBadReply`, which for a side effect is an unknown outcome, never a
    failure that releases its key (the tool answered, so it ran). HTTP tools' replies and MCP
    results (as the SDK read them) are held to it alike."""
    try:
        return read()
    except InexactJson as exc:
        raise RemoteBadReply(f"the reply cannot be read exactly: {exc}") from exc


def _refusal(status: int, body: bytes) -> RemoteRefused:
    try:
        problem = _json_object(body).get("error")
    except RemoteBadReply:
        problem = None
    if isinstance(problem, dict) and isinstance(problem.get("code"), str) and problem["code"]:
        return RemoteRefused(problem["code"][:80], str(problem.get("message", ""))[:500])
    return RemoteRefused(f"HTTP_{status}", f"the tool refused the request (HTTP {status})")
