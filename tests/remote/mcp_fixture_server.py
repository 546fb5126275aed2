"""An MCP server for tests, driven by a JSON file read on every request:
``{"tools": [<MCP tool>...], "calls": {"<name>": {"sleep_s", "is_error", "structured", "text",
"refuse"}}}`` (``refuse``: answer the call with a JSON-RPC error of that message).

Run: ``python tests/remote/mcp_fixture_server.py PORT FILE`` (streamable HTTP on 127.0.0.1:PORT)
or ``python tests/remote/mcp_fixture_server.py stdio FILE`` (over stdio). A test rewrites the
file to change what the server lists (a new schema, a bad one, a name no model may call) or how
it answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError


def _script() -> dict[str, Any]:
    return json.loads(Path(sys.argv[2]).read_text())


async def _list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
    return mcp_types.ListToolsResult(
        tools=[mcp_types.Tool.model_validate(tool) for tool in _script()["tools"]]
    )


async def _call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
    answer = _script().get("calls", {}).get(params.name, {})
    await anyio.sleep(answer.get("sleep_s", 0))
    if "refuse" in answer:
        raise MCPError(code=mcp_types.INVALID_PARAMS, message=answer["refuse"])
    structured = answer.get("structured")
    if structured == "echo":
        structured = {"arguments": params.arguments, "meta": dict(params.meta or {})}
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=answer.get("text", "done"))],
        structured_content=structured,
        is_error=answer.get("is_error", False),
    )


async def _stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    server = Server("callgate-test", on_list_tools=_list_tools, on_call_tool=_call_tool)
    if sys.argv[1] == "stdio":
        anyio.run(_stdio, server)
    else:
        app = server.streamable_http_app(stateless_http=True, json_response=True)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
