"""Server-sent events, both directions, in the shape :class:`providers.base.WireReply` stores:
``{"event": name | None, "data": parsed JSON, or the literal string "[DONE]"}``.

Parsing follows the WHATWG event-stream rules for what providers send (``event:`` and ``data:``
fields, multi-line data joined with newlines, comments and ``id:``/``retry:`` ignored, an event
dispatched at a blank line); a data field that is not JSON is kept as its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


def decode(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Events from an iterable of text lines (line endings already stripped or not)."""
    name: str | None = None
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield {"event": name, "data": _value("\n".join(data))}
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value or None
        elif field == "data":
            data.append(value)
    if data:  # a stream closed without the final blank line still delivers its last event
        yield {"event": name, "data": _value("\n".join(data))}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def encode(event: Mapping[str, Any]) -> bytes:
    """One event as SSE bytes: ``event: NAME`` (if named), ``data: <compact JSON>``, blank line."""
    data = event.get("data")
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event['event']}\n" if event.get("event") else ""
    return f"{head}data: {payload}\n\n".encode()
