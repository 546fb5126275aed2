"""Assembling a streamed Messages reply.

Events and deltas: "Streaming Messages"
(https://platform.claude.com/docs/en/build-with-claude/streaming); the block a stream adds up to
follows the anthropic-sdk-python stream accumulator (``lib/streaming/_messages.py``,
``accumulate_event``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from providers.anthropic_messages.reply import (
    Call,
    classify,
    continuation,
    dump,
    failure_in_200,
    visible_text,
)
from providers.arguments import decode_arguments, is_cut_off
from providers.base import Outcome, ParsedReply, Usage
from providers.payload import count, integer, items, obj, text
from providers.streaming import ArgumentBuffer

#: Blocks whose ``input`` streams as ``input_json_delta`` (SDK ``TRACKS_TOOL_INPUT``).
_INPUT_BLOCKS = ("tool_use", "server_tool_use")


@dataclass
class _Block:
    """One content block of a stream: its ``content_block_start`` plus the deltas since."""

    start: Mapping[str, Any]
    arguments: ArgumentBuffer
    text_parts: list[str] = field(default_factory=list)
    thinking_parts: list[str] = field(default_factory=list)
    signature: str | None = None
    citations: list[Any] = field(default_factory=list)
    stopped: bool = False

    @property
    def kind(self) -> str | None:
        return text(self.start.get("type"))

    def content(self) -> dict[str, Any]:
        """The block as the non-streamed message would hold it (SDK ``accumulate_event``)."""
        block = dict(self.start)
        if self.kind == "text":
            block["text"] = (text(self.start.get("text")) or "") + "".join(self.text_parts)
            if self.citations:
                block["citations"] = [*items(self.start.get("citations")), *self.citations]
        elif self.kind == "thinking":
            block["thinking"] = (text(self.start.get("thinking")) or "") + "".join(
                self.thinking_parts
            )
            if self.signature is not None:
                block["signature"] = self.signature
        elif self.kind in _INPUT_BLOCKS:
            # Undecodable or overflowed arguments leave the start's input in place: the call
            # carries the argument error, and the block stays a valid one to send back.
            arguments, error = self._decoded()
            if not error and self.arguments.text():
                block["input"] = arguments
        return block

    def _decoded(self) -> tuple[dict[str, Any] | None, bool]:
        """The joined ``partial_json``; when it joins to nothing, the start's ``input``."""
        if self.arguments.overflowed:
            return None, True
        raw = self.arguments.text()
        if raw == "":
            value = self.start.get("input")
            return (dict(value), False) if isinstance(value, Mapping) else (None, True)
        return decode_arguments(raw)

    def call(self) -> Call:
        arguments, error = self._decoded()
        raw = self.arguments.text() or dump(self.start.get("input"))
        cut = not self.stopped or (not self.arguments.overflowed and is_cut_off(raw))
        return Call(
            call_id=text(self.start.get("id")),
            name=text(self.start.get("name")),
            arguments=None if error else arguments,
            raw_arguments=raw,
            cut=cut,
        )


class MessagesStream:
    """Assembles a Messages SSE stream ("Streaming Messages").

    Blocks are keyed by content block ``index``; a ``content_block_start`` at an index already
    used starts a new block there. ``input_json_delta`` pieces are joined per block (bounded by
    :class:`ArgumentBuffer`) and decoded at ``content_block_stop``. Only ``message_stop`` after
    a ``message_delta`` carrying ``stop_reason`` completes the stream; an ``error`` event is an
    API failure. Usage: input from ``message_start`` (replaced by a ``message_delta`` input
    count if one is sent), output from the latest ``message_delta`` (running totals).
    """

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_bytes = max_argument_bytes
        self._blocks: list[_Block] = []
        self._by_index: dict[int | None, _Block] = {}
        self._response_id: str | None = None
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._stop_reason: str | None = None
        self._complete = False
        self._error: Mapping[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> str | None:
        data = obj(event.get("data"))
        kind = text(data.get("type")) or text(event.get("event"))
        if kind == "message_start":
            self._message_start(obj(data.get("message")))
        elif kind == "content_block_start":
            return self._block_start(data)
        elif kind == "content_block_delta":
            self._delta(data)
        elif kind == "content_block_stop":
            block = self._by_index.get(integer(data.get("index")))
            if block is not None:
                block.stopped = True
        elif kind == "message_delta":
            self._message_delta(data)
        elif kind == "message_stop":
            self._complete = self._complete or self._stop_reason is not None
        elif kind == "error":
            self._error = obj(data.get("error"))
        return None

    def _message_start(self, message: Mapping[str, Any]) -> None:
        self._response_id = self._response_id or text(message.get("id"))
        usage = message.get("usage")
        if isinstance(usage, Mapping):
            self._input_tokens = count(usage.get("input_tokens"))
            self._output_tokens = count(usage.get("output_tokens"))

    def _message_delta(self, data: Mapping[str, Any]) -> None:
        self._stop_reason = text(obj(data.get("delta")).get("stop_reason")) or self._stop_reason
        usage = data.get("usage")
        if isinstance(usage, Mapping):
            if "output_tokens" in usage:
                self._output_tokens = count(usage.get("output_tokens"))
            if usage.get("input_tokens") is not None:
                self._input_tokens = count(usage.get("input_tokens"))

    def _block_start(self, data: Mapping[str, Any]) -> str | None:
        block = _Block(
            start=obj(data.get("content_block")), arguments=ArgumentBuffer(self._max_bytes)
        )
        self._blocks.append(block)
        self._by_index[integer(data.get("index"))] = block
        return text(block.start.get("name")) if block.kind == "tool_use" else None

    def _delta(self, data: Mapping[str, Any]) -> None:
        block = self._by_index.get(integer(data.get("index")))
        if block is None or block.stopped:
            return  # a fragment outside its block's start/stop is not part of any block
        delta = obj(data.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            block.text_parts.append(text(delta.get("text")) or "")
        elif kind == "input_json_delta":
            block.arguments.add(delta.get("partial_json"))
        elif kind == "thinking_delta":
            block.thinking_parts.append(text(delta.get("thinking")) or "")
        elif kind == "signature_delta":
            block.signature = text(delta.get("signature")) or block.signature
        elif kind == "citations_delta" and "citation" in delta:
            block.citations.append(delta["citation"])

    def _usage(self) -> Usage | None:
        if self._input_tokens is None and self._output_tokens is None:
            return None
        return Usage(input_tokens=self._input_tokens or 0, output_tokens=self._output_tokens or 0)

    def finish(self) -> ParsedReply:
        usage = self._usage()
        if self._error is not None:
            return failure_in_200(self._error, response_id=self._response_id, usage=usage)
        if not self._complete:
            # Cut before message_stop: nothing runs, whatever the blocks look like; only the
            # blocks that finished count as continuation data.
            finished = [block.content() for block in self._blocks if block.stopped]
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=self._stop_reason,
                response_id=self._response_id,
                text=visible_text([block.content() for block in self._blocks]),
                usage=usage,
                continuation=continuation(finished, self._stop_reason),
            )
        return classify(
            response_id=self._response_id,
            stop_reason=self._stop_reason,
            content=[block.content() for block in self._blocks],
            calls=[block.call() for block in self._blocks if block.kind == "tool_use"],
            usage=usage,
        )
