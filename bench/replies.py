"""Scripted zero-latency model replies (OpenAI Responses wire format) for the bench."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bench.tools import TOOL
from toolcalls.demo.scenario import bundled_path

FAMILY = "openai_responses"
MODEL = "gpt-5.1-bench"


def _response(tag: str, *output: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "response",
        "http_status": 200,
        "body": {
            "id": f"resp_{tag}",
            "object": "response",
            "status": "completed",
            "output": list(output),
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
    }


def lookup_script(turns: int, *, result_bytes: int = 0) -> list[dict[str, Any]]:
    """``turns`` replies: ``turns - 1`` that each propose one ``bench_lookup`` call (asking for
    ``result_bytes`` of padding in its result when set), then a final answer. Every call has new
    arguments, so no loop guard trips."""
    extra = {"result_bytes": result_bytes} if result_bytes else {}
    replies = [
        _response(
            f"bench{step:04d}",
            {
                "id": f"fc_bench{step:04d}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_bench{step:04d}",
                "name": TOOL,
                "arguments": json.dumps({"step": step, **extra}),
            },
        )
        for step in range(turns - 1)
    ]
    final = {
        "id": "msg_bench_final",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": "All looked up."}],
    }
    return [*replies, _response("bench_final", final)]


def refund_script(order_id: str, *, tools: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The bundled ``refund_approve`` scenario, about ``order_id`` instead of ``ORD-1001`` (each
    refund gets its own order, so no run is answered from another's idempotency record), its
    calls proposing ``tools[name]`` where ``tools`` names another tool for a demo tool."""
    text = bundled_path(family=FAMILY, name="refund_approve").read_text()
    replies: list[dict[str, Any]] = json.loads(text.replace("ORD-1001", order_id))["replies"]
    return _renamed(replies, tools or {})


def _renamed(value: Any, tools: Mapping[str, str]) -> Any:
    """``value`` with each function call's ``name`` found in ``tools`` replaced by its value."""
    if isinstance(value, list):
        return [_renamed(item, tools) for item in value]
    if not isinstance(value, dict):
        return value
    renamed = {key: _renamed(item, tools) for key, item in value.items()}
    if renamed.get("type") == "function_call" and renamed.get("name") in tools:
        renamed["name"] = tools[renamed["name"]]
    return renamed
