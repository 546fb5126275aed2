"""Assembling a streamed Responses reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.adapter import api_failure, error_reason
from providers.base import Outcome, ParsedReply, Usage
from providers.errors import code_is_retryable
from providers.openai_responses.reply import USAGE, has_item, parse_response
from providers.payload import items, joined, obj, text
from providers.streaming import ArgumentBuffer

#: The events that complete a stream.
_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


class ResponsesStream:
    """Assembles a Responses SSE stream (API reference "Streaming events").

    Items are keyed by ``item_id`` (falling back to ``output_index``); argument deltas of several
    items may interleave. ``response.output_item.done`` (or ``function_call_arguments.done``)
    carries the authoritative arguments; the name comes from ``output_item.added``. Only a
    terminal event (completed / incomplete / failed) completes the stream.
    """

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_bytes = max_argument_bytes
        self._order: list[Any] = []
        self._items: dict[Any, dict[str, Any]] = {}
        self._arguments: dict[Any, ArgumentBuffer] = {}
        self._text: list[str] = []
        self._response_id: str | None = None
        self._usage: Usage | None = None
        self._terminal: Mapping[str, Any] | None = None
        self._error: Mapping[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> str | None:
        data = obj(event.get("data"))
        kind = text(data.get("type")) or text(event.get("event"))
        response = obj(data.get("response"))
        if response:
            self._response_id = self._response_id or text(response.get("id"))
            self._usage = USAGE.read(response.get("usage")) or self._usage
        if kind == "error" or ("error" in data and kind is None):
            self._error = data
        elif kind in _TERMINAL_EVENTS:
            self._terminal = response
        elif kind == "response.output_item.added":
            return self._item_added(data)
        elif kind == "response.output_item.done":
            self._item_done(data)
        elif kind == "response.function_call_arguments.delta":
            self._buffer(data).add(data.get("delta"))
        elif kind == "response.function_call_arguments.done":
            self._buffer(data).replace(data.get("arguments"))
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            self._text.append(text(data.get("delta")) or "")
        return None

    def _key(self, data: Mapping[str, Any]) -> Any:
        item = obj(data.get("item"))
        return text(data.get("item_id")) or text(item.get("id")) or data.get("output_index")

    def _buffer(self, data: Mapping[str, Any]) -> ArgumentBuffer:
        key = self._key(data)
        if key not in self._arguments:
            self._arguments[key] = ArgumentBuffer(self._max_bytes)
        return self._arguments[key]

    def _item_added(self, data: Mapping[str, Any]) -> str | None:
        key = self._key(data)
        if key not in self._items:
            self._order.append(key)
        self._items[key] = {**obj(data.get("item")), "_done": False}
        item = self._items[key]
        return text(item.get("name")) if item.get("type") == "function_call" else None

    def _item_done(self, data: Mapping[str, Any]) -> None:
        key = self._key(data)
        if key not in self._items:
            self._order.append(key)
        added = self._items.get(key, {})
        done = {**obj(data.get("item")), "_done": True}
        if done.get("type") == "function_call":
            done.setdefault("name", added.get("name"))
            self._buffer(data).replace(done.get("arguments"))
        self._items[key] = done

    def _output(self) -> list[dict[str, Any]]:
        output = []
        for key in self._order:
            item = {k: v for k, v in self._items[key].items() if k != "_done"}
            if item.get("type") == "function_call" and key in self._arguments:
                item["arguments"] = self._arguments[key].text()
            output.append(item)
        return output

    def finish(self) -> ParsedReply:
        if self._error is not None:
            code = error_reason(self._error, ("code", "type"))
            return api_failure(
                raw_reason=code,
                response_id=self._response_id,
                usage=self._usage,
                retryable=code_is_retryable(code),
                error_message=text(self._error.get("message")),
            )
        output = self._output()
        if self._terminal is None:
            done = [
                item
                for key, item in zip(self._order, output, strict=True)
                if self._items[key]["_done"]
            ]
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=None,
                response_id=self._response_id,
                text=joined(self._text),
                usage=self._usage,
                continuation=frozenset({"reasoning"} if has_item(done, "reasoning") else ()),
            )
        # Servers repeat the full output in the terminal event; the items assembled from the
        # done events are used when present (their arguments are the authoritative ones).
        body = {
            **self._terminal,
            "id": self._response_id,
            "output": output or items(self._terminal.get("output")),
        }
        return parse_response(body)
