"""Build OpenAI Responses wire replies for tests that need a reply the bundled scenarios lack."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _id(prefix: str, seed: str) -> str:
    return f"{prefix}_{hashlib.sha256(seed.encode()).hexdigest()[:32]}"


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """A ``function_call`` output item; ``arguments`` is JSON-encoded unless already a string."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": _id("fc", call_id),
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": raw,
    }


def message(text: str) -> dict[str, Any]:
    return {
        "id": _id("msg", text),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
    }


def response(*output: dict[str, Any], status: str = "completed", tag: str = "") -> dict[str, Any]:
    """A 200 reply holding ``output`` items (a fixture-format case without ``expect``)."""
    seed = tag or json.dumps(output, sort_keys=True)
    return {
        "kind": "response",
        "http_status": 200,
        "body": {
            "id": _id("resp", seed),
            "object": "response",
            "status": status,
            "output": list(output),
            "usage": {"input_tokens": 100, "output_tokens": 20},
        },
    }


def http_error(status: int, code: str, *, retry_after: str | None = None) -> dict[str, Any]:
    headers = {"retry-after": retry_after} if retry_after else {}
    return {
        "kind": "http_error",
        "http_status": status,
        "headers": headers,
        "body": {
            "error": {"message": f"{code} happened", "type": code, "param": None, "code": code}
        },
    }


def final(text: str = "All done.") -> dict[str, Any]:
    return response(message(text))


def scripted(replies: list[dict[str, Any]], branch: str = "ok") -> list[dict[str, Any]]:
    """A scenario's replies with every ``after_results`` reply resolved to ``branch``."""
    return [
        reply["after_results"][branch] if "after_results" in reply else reply for reply in replies
    ]
