"""Anthropic Messages API (``POST /v1/messages``) adapter.

Wire facts (field names, stop reasons, stream events, pairing rules, 400 texts) come from the
anthropic-sdk-python type files ``src/anthropic/types/*.py``, its stream accumulator
``src/anthropic/lib/streaming/_messages.py`` (``accumulate_event``) and the public error reports
collected in ``shared/reference/provider-wire-notes.md`` §3; classification follows
``shared/fixtures/README.md``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from providers.arguments import decode_arguments, is_cut_off
from providers.base import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    Outcome,
    ParsedReply,
    ProposedCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    WireReply,
)
from providers.errors import code_is_retryable, retry_after_seconds, status_is_retryable
from providers.payload import EMPTY, count, items, joined, obj, text
from providers.streaming import ArgumentBuffer, assemble

REVISION = "anthropic_messages/2026-11-30.1"

#: ``max_tokens`` is required by the Messages API; output tokens per reply.
MAX_TOKENS = 4096

#: Stop reasons that cut the reply short (README step 5).
_LIMIT_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
#: Stop reasons that end a reply normally, so the calls in it may run (README step 8).
_NORMAL_ENDS = frozenset({"tool_use", "end_turn", "stop_sequence"})
#: Stop reasons that mark text as a finished answer (README step 9).
_COMPLETIONS = frozenset({"end_turn", "stop_sequence"})
_THINKING = ("thinking", "redacted_thinking")
#: Blocks whose ``input`` streams as ``input_json_delta`` (SDK ``TRACKS_TOOL_INPUT``).
_INPUT_BLOCKS = ("tool_use", "server_tool_use")

# The API's own 400 texts (wire notes §3.2 and the public reports cited there). ``n`` is the
# message index in ``messages``, ``m`` the block index in that message's ``content``.
MISSING_RESULT = (
    "messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
UNEXPECTED_RESULT = (
    "messages.{n}.content.{m}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
DUPLICATE_RESULT = (
    "messages.{n}.content.{m}: each tool_use must have a single result. Found multiple "
    "`tool_result` blocks with id: {id}"
)
RESULTS_NOT_FIRST = (
    "messages.{n}: Did not find {count} `tool_result` block(s) at the beginning of this message. "
    "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
    "blocks."
)
THINKING_NOT_FIRST = (
    "messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). To "
    "avoid this requirement, disable `thinking`."
)
THINKING_MODIFIED = (
    "messages.{n}.content.{m}: `thinking` or `redacted_thinking` blocks in the latest assistant "
    "message cannot be modified. These blocks must remain as they were in the original response."
)


class AnthropicMessagesAdapter:
    """Adapter for the Messages API: ``tool_use`` blocks out, ``tool_result`` blocks in.

    The conversation is the request's ``messages`` list: the user message, then each reply's
    ``content`` array replayed verbatim as one assistant message (thinking and
    redacted_thinking blocks with their ``signature``/``data`` untouched, text, tool_use,
    server_tool_use), each followed by one user message whose content is one ``tool_result``
    block per ``tool_use`` id. A paused turn (``pause_turn``) is sent back as it came, with no
    results, so the server continues it.
    """

    provider = "anthropic"
    family = "anthropic_messages"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"role": "user", "content": user_input}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        # Extended thinking is not switched on here: it is model-dependent and Callgate has no
        # per-operation setting for it. Thinking blocks that come back are replayed verbatim.
        return {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "messages": list(conversation),
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.parameters),
                }
                for tool in tools
            ],
        }

    def parse_reply(
        self, reply: WireReply, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ParsedReply:
        if reply.kind == "http_error":
            return _parse_http_error(reply)
        if reply.kind == "stream":
            return assemble(
                self.stream_assembler(max_argument_bytes=max_argument_bytes), items(reply.events)
            )
        if isinstance(reply.body, Mapping):
            return _parse_message(reply.body)
        return _malformed(f"a {reply.kind!r} reply without a JSON object body")

    def stream_assembler(self, *, max_argument_bytes: int) -> MessagesStream:
        return MessagesStream(max_argument_bytes)

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        # The content array goes back as it came: the API checks thinking signatures and needs
        # a paused turn's server_tool_use blocks to continue it. A copy, so later edits of the
        # conversation cannot reach the parsed reply (or the other way round).
        if not reply.assistant_items:
            return list(conversation)
        content = copy.deepcopy(list(reply.assistant_items))
        return [*conversation, {"role": "assistant", "content": content}]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        # One user message holding only tool_result blocks, so they are first in it. This
        # adapter never synthesizes call IDs (a tool_use without an id is MALFORMED), so every
        # tool_use_id is one the provider issued.
        blocks = [_tool_result(result) for result in results]
        if not blocks:
            return list(conversation)
        return [*conversation, {"role": "user", "content": blocks}]

    def request_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
        messages = _messages(request)
        message = (
            _pairing_problem(messages)
            or _unreplayed_calls(messages, previous)
            or _thinking_problem(messages, previous)
        )
        return None if message is None else _invalid_request(message, request)


def _tool_result(result: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": json.dumps(dict(result.model_result), separators=(",", ":")),
    }
    if result.is_error:
        block["is_error"] = True
    return block


# --- request_error ------------------------------------------------------------------------


def _messages(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's messages, positions kept (a non-object entry reads as ``{}``)."""
    raw = request.get("messages")
    if isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        return [obj(message) for message in raw]
    return []


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's content blocks, positions kept; string content has none."""
    content = message.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str | bytes):
        return [obj(block) for block in content]
    return []


def _tool_use_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [str(block.get("id")) for block in _blocks(message) if block.get("type") == "tool_use"]


def _pairing_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The API's own check over the whole list: the message after an assistant message with
    tool_use blocks is a user message starting with exactly one tool_result per tool_use id,
    and a tool_result answers only a tool_use of the message right before it."""
    for position, message in enumerate(messages):
        asked = _tool_use_ids(message)
        following = messages[position + 1] if position + 1 < len(messages) else EMPTY
        if asked and following.get("role") != "user":
            return MISSING_RESULT.format(n=position, ids=", ".join(asked))
        if message.get("role") == "user":
            expected = _tool_use_ids(messages[position - 1]) if position else []
            problem = _results_problem(position, _blocks(message), expected)
            if problem:
                return problem
    return None


def _results_problem(
    position: int, blocks: Sequence[Mapping[str, Any]], asked: list[str]
) -> str | None:
    answered: list[str] = []
    leading = True
    misplaced = False
    for index, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            leading = False
            continue
        call_id = str(block.get("tool_use_id"))
        if call_id not in asked:
            return UNEXPECTED_RESULT.format(n=position, m=index, id=call_id)
        if call_id in answered:
            return DUPLICATE_RESULT.format(n=position, m=index, id=call_id)
        answered.append(call_id)
        misplaced = misplaced or not leading
    if misplaced:
        return RESULTS_NOT_FIRST.format(n=position, count=len(asked))
    missing = [call_id for call_id in asked if call_id not in answered]
    if missing:
        return MISSING_RESULT.format(n=position - 1, ids=", ".join(missing))
    return None


def _unreplayed_calls(messages: Sequence[Mapping[str, Any]], previous: ParsedReply) -> str | None:
    """The previous reply's tool_use blocks must be in the request at all. The API itself cannot
    notice a turn that was left out, so its missing-result text is used, placed at the end."""
    present = {call_id for message in messages for call_id in _tool_use_ids(message)}
    missing = [call.call_id for call in previous.calls if call.call_id not in present]
    if not missing:
        return None
    return MISSING_RESULT.format(n=max(len(messages) - 1, 0), ids=", ".join(missing))


def _thinking_problem(messages: Sequence[Mapping[str, Any]], previous: ParsedReply) -> str | None:
    """With thinking on, the assistant message holding the calls must start with a thinking
    block, and its thinking blocks must be the previous reply's, unchanged."""
    produced = items(list(previous.assistant_items))
    if not previous.calls or not _thinks_before_calling(produced):
        return None
    call_id = previous.calls[0].call_id
    position = next((i for i, m in enumerate(messages) if call_id in _tool_use_ids(m)), None)
    if position is None:
        return None  # already answered as an unreplayed call
    blocks = _blocks(messages[position])
    found = text(blocks[0].get("type")) if blocks else None
    if found not in _THINKING:
        return THINKING_NOT_FIRST.format(n=position, found=found)
    originals = [block for block in produced if block.get("type") in _THINKING]
    return _modified_thinking(position, blocks, originals)


def _thinks_before_calling(produced: Sequence[Mapping[str, Any]]) -> bool:
    for block in produced:
        if block.get("type") == "tool_use":
            return False
        if block.get("type") in _THINKING:
            return True
    return False


def _modified_thinking(
    position: int, blocks: Sequence[Mapping[str, Any]], originals: Sequence[Mapping[str, Any]]
) -> str | None:
    """The first replayed thinking block that differs from (or is missing next to) the
    previous reply's; ``blocks`` starts with a thinking block."""
    replayed = [(i, block) for i, block in enumerate(blocks) if block.get("type") in _THINKING]
    for (index, block), original in zip(replayed, originals, strict=False):
        if dict(block) != dict(original):
            return THINKING_MODIFIED.format(n=position, m=index)
    if len(replayed) > len(originals):
        return THINKING_MODIFIED.format(n=position, m=replayed[len(originals)][0])
    if len(replayed) < len(originals):
        return THINKING_MODIFIED.format(n=position, m=replayed[-1][0] + 1)
    return None


def _invalid_request(message: str, request: Mapping[str, Any]) -> WireReply:
    """The 400 envelope the Messages API sends (wire notes §3.2, §6); the request id is derived
    from the request so replaying it gives the same reply."""
    request_id = _request_id(request)
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": request_id,
    }
    return WireReply(
        kind="http_error", http_status=400, headers={"request-id": request_id}, body=body
    )


_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _request_id(request: Mapping[str, Any]) -> str:
    """``req_011C…`` (24 characters after ``req_``, like the API's) from a digest of the body."""
    try:
        encoded = json.dumps(request, sort_keys=True, default=str)
    except (TypeError, ValueError):
        encoded = repr(request)
    number = int.from_bytes(hashlib.sha256(encoded.encode("utf-8")).digest(), "big")
    digits = []
    for _ in range(20):
        number, digit = divmod(number, len(_BASE58))
        digits.append(_BASE58[digit])
    return "req_011C" + "".join(digits)


# --- parsing ------------------------------------------------------------------------------


def _malformed(message: str, raw_reason: str | None = None) -> ParsedReply:
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=raw_reason,
        response_id=None,
        text=None,
        error_message=f"{REVISION}: {message}",
    )


def _parse_http_error(reply: WireReply) -> ParsedReply:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``; a spend cap shows as
    ``error.details.error_code`` (wire notes §6) and is never retried."""
    error = obj(obj(reply.body).get("error"))
    error_type = text(error.get("type"))
    quota = text(obj(error.get("details")).get("error_code"))
    retryable = status_is_retryable(reply.http_status, quota or error_type)
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=error_type,
        response_id=None,
        text=None,
        retryable=retryable,
        retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
        error_message=text(error.get("message")) or f"HTTP {reply.http_status}",
    )


def _failure_in_200(
    error: Mapping[str, Any], *, response_id: str | None, usage: Usage | None
) -> ParsedReply:
    """An error reported inside a 200 (a stream ``error`` event, or an error object served as
    the body): whatever text came before it is discarded."""
    error_type = text(error.get("type"))
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=error_type,
        response_id=response_id,
        text=None,
        usage=usage,
        retryable=code_is_retryable(error_type),
        error_message=text(error.get("message")),
    )


def _parse_message(body: Mapping[str, Any]) -> ParsedReply:
    """A ``message`` object: ``{id, content: [blocks], stop_reason, usage, ...}``."""
    usage = _usage(body.get("usage"))
    if body.get("type") == "error":
        return _failure_in_200(obj(body.get("error")), response_id=None, usage=usage)
    content = items(body.get("content"))
    calls = [_message_call(block) for block in content if block.get("type") == "tool_use"]
    return _classify(
        response_id=text(body.get("id")),
        stop_reason=text(body.get("stop_reason")),
        content=content,
        calls=calls,
        usage=usage,
    )


def _message_call(block: Mapping[str, Any]) -> _Call:
    """A non-streamed tool_use: ``input`` is already a JSON object; anything else is an
    argument error (no coercion)."""
    value = block.get("input")
    arguments = dict(value) if isinstance(value, Mapping) else None
    return _Call(
        call_id=text(block.get("id")),
        name=text(block.get("name")),
        arguments=arguments,
        raw_arguments=_dump(value),
        cut=False,
    )


@dataclass(frozen=True)
class _Call:
    """A tool_use block read from a reply, before it is known whether it may be handed over."""

    call_id: str | None
    name: str | None
    arguments: dict[str, Any] | None
    raw_arguments: str | None
    cut: bool

    @property
    def addressable(self) -> bool:
        """A result needs the provider's id, and the call a name."""
        return bool(self.call_id) and self.name is not None

    def proposed(self) -> ProposedCall:
        return ProposedCall(
            call_id=str(self.call_id),
            name=str(self.name),
            arguments=self.arguments,
            raw_arguments=self.raw_arguments,
            arguments_error=self.arguments is None,
        )


def _classify(
    *,
    response_id: str | None,
    stop_reason: str | None,
    content: Sequence[Mapping[str, Any]],
    calls: Sequence[_Call],
    usage: Usage | None,
) -> ParsedReply:
    """README steps 4-10 for a message that finished (non-streamed, or after ``message_stop``)."""
    visible = _visible_text(content)
    common: dict[str, Any] = {
        "raw_reason": stop_reason,
        "response_id": response_id,
        "text": visible,
        "usage": usage,
        "continuation": _continuation(content, stop_reason),
        "assistant_items": tuple(content),
    }
    if stop_reason == "refusal":
        return ParsedReply(outcome=Outcome.REFUSAL, **common)
    if stop_reason in _LIMIT_REASONS or any(call.cut for call in calls):
        return ParsedReply(outcome=Outcome.TRUNCATED, **common)
    if stop_reason == "pause_turn":
        return ParsedReply(outcome=Outcome.PAUSED, **common)
    if stop_reason in _NORMAL_ENDS and calls:
        if not all(call.addressable for call in calls):
            return ParsedReply(
                outcome=Outcome.MALFORMED,
                error_message=f"{REVISION}: a tool_use block without a string id and name",
                **common,
            )
        proposed = tuple(call.proposed() for call in calls)
        return ParsedReply(outcome=Outcome.TOOL_PROPOSALS, calls=proposed, **common)
    if stop_reason in _COMPLETIONS and visible is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, **common)
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        error_message=f"{REVISION}: stop_reason {stop_reason!r} with neither text nor calls",
        **common,
    )


def _visible_text(content: Sequence[Mapping[str, Any]]) -> str | None:
    """The ``text`` blocks, concatenated; thinking is never text."""
    return joined(
        [text(block.get("text")) or "" for block in content if block.get("type") == "text"]
    )


def _continuation(content: Sequence[Mapping[str, Any]], stop_reason: str | None) -> frozenset[str]:
    """Opaque blocks that must go back unchanged: thinking, redacted_thinking, and the
    server_tool_use blocks of a paused turn."""
    kinds = set()
    for block in content:
        kind = block.get("type")
        if kind in _THINKING or (kind == "server_tool_use" and stop_reason == "pause_turn"):
            kinds.add(str(kind))
    return frozenset(kinds)


def _usage(usage: Any) -> Usage | None:
    """``input_tokens`` (cache read/write counts are reported apart and not added) and
    ``output_tokens``."""
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
    )


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None


# --- streaming ----------------------------------------------------------------------------


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

    def call(self) -> _Call:
        arguments, error = self._decoded()
        raw = self.arguments.text() or _dump(self.start.get("input"))
        cut = not self.stopped or (not self.arguments.overflowed and is_cut_off(raw))
        return _Call(
            call_id=text(self.start.get("id")),
            name=text(self.start.get("name")),
            arguments=None if error else arguments,
            raw_arguments=raw,
            cut=cut,
        )


class MessagesStream:
    """Assembles a Messages SSE stream (wire notes §3.3).

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
            block = self._by_index.get(_index(data))
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
        self._by_index[_index(data)] = block
        return text(block.start.get("name")) if block.kind == "tool_use" else None

    def _delta(self, data: Mapping[str, Any]) -> None:
        block = self._by_index.get(_index(data))
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
            return _failure_in_200(self._error, response_id=self._response_id, usage=usage)
        if not self._complete:
            # Cut before message_stop: nothing runs, whatever the blocks look like; only the
            # blocks that finished count as continuation data.
            finished = [block.content() for block in self._blocks if block.stopped]
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=self._stop_reason,
                response_id=self._response_id,
                text=_visible_text([block.content() for block in self._blocks]),
                usage=usage,
                continuation=_continuation(finished, self._stop_reason),
            )
        return _classify(
            response_id=self._response_id,
            stop_reason=self._stop_reason,
            content=[block.content() for block in self._blocks],
            calls=[block.call() for block in self._blocks if block.kind == "tool_use"],
            usage=usage,
        )


def _index(data: Mapping[str, Any]) -> int | None:
    value = data.get("index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
