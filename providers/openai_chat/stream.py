"""Assembling a streamed Chat Completions reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from providers.base import Outcome, ParsedReply, Usage
from providers.openai_chat.reply import REVISION, USAGE, classify, failure_in_200
from providers.payload import integer, items, joined, obj, text
from providers.streaming import ArgumentBuffer


@dataclass
class _StreamedCall:
    """One call being assembled from ``delta.tool_calls`` (or a legacy ``delta.function_call``)."""

    arguments: ArgumentBuffer
    call_id: str | None = None
    name: str | None = None
    kind: str | None = None


def _extend(call: _StreamedCall, function: Mapping[str, Any]) -> str | None:
    """Add one ``function`` fragment (name, argument text) to ``call``; returns the name when
    it is the call's first, as the progress note."""
    call.arguments.add(function.get("arguments"))
    name = text(function.get("name"))
    if name and call.name is None:
        call.name = name
        return name
    return None


class ChatStream:
    """Assembles a Chat Completions SSE stream (API reference "The chat completion chunk
    object"; no ``event:`` lines).

    Only choice 0 is read. Tool-call fragments are keyed by ``tool_calls[].index``, but a
    fragment that brings a new non-empty ``id`` at an index held by a different ``id`` starts a
    new call (some servers stream every call at index 0). The first non-empty ``name`` of a call
    is kept. The chunk with a non-null ``finish_reason`` completes the reply; ``data: [DONE]``
    is neither needed nor relied on (a server may leave it out); a usage-only
    chunk (``choices: []``) that follows it is read when it arrives. A
    ``data: {"error": {...}}`` frame is an API failure.
    """

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_bytes = max_argument_bytes
        self._calls: list[_StreamedCall] = []
        self._open: dict[int | None, _StreamedCall] = {}
        self._legacy: _StreamedCall | None = None
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._response_id: str | None = None
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._error: Any = None

    def feed(self, event: Mapping[str, Any]) -> str | None:
        data = event.get("data")
        if not isinstance(data, Mapping):
            return None  # ``[DONE]`` or an unreadable data line
        if data.get("error") is not None:
            self._error = data["error"]
            return None
        if event.get("event") == "error":
            self._error = data
            return None
        self._response_id = self._response_id or text(data.get("id")) or None
        self._usage = USAGE.read(data.get("usage")) or self._usage
        note = None
        for choice in items(data.get("choices")):
            index = choice.get("index")
            if index is not None and (isinstance(index, bool) or index != 0):
                continue
            note = self._delta(obj(choice.get("delta"))) or note
            finish = text(choice.get("finish_reason"))
            if finish and self._finish is None:
                self._finish = finish
        return note

    def _delta(self, delta: Mapping[str, Any]) -> str | None:
        if isinstance(delta.get("content"), str):
            self._content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        if isinstance(delta.get("reasoning_content"), str):
            self._reasoning.append(delta["reasoning_content"])
        note = None
        for fragment in items(delta.get("tool_calls")):
            note = self._tool_call(integer(fragment.get("index")), fragment) or note
        legacy = obj(delta.get("function_call"))
        if legacy:
            if self._legacy is None:
                self._legacy = _StreamedCall(arguments=ArgumentBuffer(self._max_bytes))
            note = _extend(self._legacy, legacy) or note
        return note

    def _tool_call(self, key: int | None, fragment: Mapping[str, Any]) -> str | None:
        call_id = text(fragment.get("id")) or None
        call = self._open.get(key)
        if call is None or (call_id and call.call_id and call_id != call.call_id):
            call = _StreamedCall(arguments=ArgumentBuffer(self._max_bytes))
            self._calls.append(call)
            self._open[key] = call
        call.call_id = call.call_id or call_id
        call.kind = call.kind or text(fragment.get("type"))
        return _extend(call, obj(fragment.get("function")))

    def _message(self) -> tuple[dict[str, Any], frozenset[int]]:
        """The assembled assistant message (shaped like a non-streamed one) and the positions
        of calls whose arguments overflowed the byte limit."""
        message: dict[str, Any] = {"role": "assistant", "content": joined(self._content)}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = [
                {
                    **({"id": call.call_id} if call.call_id else {}),
                    "type": call.kind or "function",
                    "function": {"name": call.name or "", "arguments": call.arguments.text()},
                }
                for call in self._calls
            ]
            calls = self._calls
        elif self._legacy is not None:
            legacy = self._legacy
            message["function_call"] = {
                "name": legacy.name or "",
                "arguments": legacy.arguments.text(),
            }
            calls = [legacy]
        else:
            calls = []
        overflowed = frozenset(i for i, call in enumerate(calls) if call.arguments.overflowed)
        return message, overflowed

    def finish(self) -> ParsedReply:
        if self._error is not None:
            return failure_in_200(self._error, response_id=self._response_id, usage=self._usage)
        if self._finish is None:
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=self._finish,
                response_id=self._response_id,
                text=joined([*self._content, *self._refusal]),
                usage=self._usage,
                error_message=f"{REVISION}: the stream ended before a finish_reason",
            )
        message, overflowed = self._message()
        return classify(
            response_id=self._response_id,
            finish=self._finish,
            message=message,
            usage=self._usage,
            overflowed=overflowed,
        )
