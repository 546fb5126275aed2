"""The demo's out-of-process tool servers: MCP (the ``mcp`` SDK's server side, streamable HTTP at
``/mcp``) and plain HTTP (``POST /tools/<name>``, ``GET /reconcile/<name>``). Both run the
handlers of :mod:`toolcalls.demo.remote` against the demo database.
"""

from __future__ import annotations

import json
import socket
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import mcp_types
import uvicorn
from django.conf import settings
from mcp.server.lowlevel import Server

from toolcalls.demo.remote import demo_tool_call, demo_tool_reconcile, served_tools
from toolcalls.registry import ToolError
from toolcalls.signing import SIGNATURE_HEADER, verify_signature

# --- MCP ----------------------------------------------------------------------------------------


async def _list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
    tools = [
        mcp_types.Tool(
            name=tool["name"],
            description=tool["description"],
            input_schema=tool["inputSchema"],
            annotations=mcp_types.ToolAnnotations(
                read_only_hint=tool["annotations"]["readOnlyHint"],
                destructive_hint=tool["annotations"]["destructiveHint"],
                idempotent_hint=tool["annotations"]["idempotentHint"],
            ),
        )
        for tool in await anyio.to_thread.run_sync(served_tools)
    ]
    return mcp_types.ListToolsResult(tools=tools)


async def _call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
    context = dict(params.meta or {}).get("callgate")
    run = partial(
        demo_tool_call,
        name=params.name,
        arguments=params.arguments or {},
        context=context if isinstance(context, dict) else {},
    )
    try:
        data = await anyio.to_thread.run_sync(run)
    except ToolError as exc:
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=exc.message)],
            structured_content={"code": exc.code, "message": exc.message},
            is_error=True,
        )
    text = json.dumps(data, ensure_ascii=False)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], structured_content=data
    )


def mcp_listen(*, port: int) -> socket.socket:
    """The socket :func:`mcp_serve` serves on, bound to ``127.0.0.1:<port>`` and listening.
    Raises ``OSError`` when it cannot be (the port is taken), before anything is served."""
    listening = socket.socket()
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        listening.bind(("127.0.0.1", port))
        listening.listen()
    except OSError:
        listening.close()
        raise
    return listening


def mcp_serve(listening: socket.socket) -> None:
    """Serve the demo tools over MCP at ``/mcp`` on ``listening`` (:func:`mcp_listen`) until
    stopped."""
    server = Server("callgate-demo-shop", on_list_tools=_list_tools, on_call_tool=_call_tool)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])


# --- HTTP ---------------------------------------------------------------------------------------


class _ToolHandler(BaseHTTPRequestHandler):
    """``POST /tools/<name>`` runs a tool; ``GET /reconcile/<name>`` says whether an effect
    happened under a key. Every request must carry a valid ``Callgate-Signature``."""

    def do_POST(self) -> None:
        name = self.path.removeprefix("/tools/")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._signed(body):
            return
        try:
            request = json.loads(body)
            context = {**request, "idempotency_key": self.headers.get("Idempotency-Key", "")}
            data = demo_tool_call(name=name, arguments=request["arguments"], context=context)
        except ToolError as exc:
            status = HTTPStatus.NOT_FOUND if exc.code == "UNKNOWN_TOOL" else 422
            self._reply(status, {"error": {"code": exc.code, "message": exc.message}})
            return
        except (ValueError, KeyError, TypeError):
            self._reply(400, {"error": {"code": "BAD_REQUEST", "message": "not a tool request"}})
            return
        self._reply(200, data)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        key = query.get("idempotency_key", "")
        if not self._signed(key.encode()):
            return
        name = parts.path.removeprefix("/reconcile/")
        try:
            answer = demo_tool_reconcile(name=name, tenant_ref=query.get("tenant_ref", ""), key=key)
        except ToolError as exc:
            self._reply(404, {"error": {"code": exc.code, "message": exc.message}})
            return
        self._reply(200, {"applied": answer.applied, "result": dict(answer.data)})

    def _signed(self, body: bytes) -> bool:
        header = self.headers.get(SIGNATURE_HEADER, "")
        secret = settings.CALLGATE_DEMO_TOOLS_SECRET
        if verify_signature(secret=secret, header=header, body=body):
            return True
        self._reply(401, {"error": {"code": "BAD_SIGNATURE", "message": "signature mismatch"}})
        return False

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        return


def http_server(*, port: int) -> ThreadingHTTPServer:
    """The demo tools' HTTP server, bound to ``127.0.0.1:<port>`` (``serve_forever`` serves
    them); raises ``OSError`` when it cannot listen there (the port is taken)."""
    return ThreadingHTTPServer(("127.0.0.1", port), _ToolHandler)
