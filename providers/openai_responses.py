"""OpenAI Responses API (``POST /v1/responses``) adapter.

Wire facts (field names, statuses, stream events, pairing rules, 400 texts) come from the
openai-python type files ``src/openai/types/responses/*.py`` and the public error reports
collected in ``shared/reference/provider-wire-notes.md`` §1; classification follows
``shared/fixtures/README.md``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
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
from providers.payload import count, items, joined, obj, text
from providers.streaming import ArgumentBuffer, assemble

REVISION = "openai_responses/2026-11-30.2"
_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


class OpenAIResponsesAdapter:
    """Adapter for the Responses API: ``function_call`` items out, ``function_call_output`` in.

    The conversation is the Responses ``input`` list: the user message, then every earlier
    ``output`` list replayed verbatim and in order (reasoning items included, as the API requires
    for reasoning models), each followed by one ``function_call_output`` per ``call_id``.
    """

    provider = "openai"
    family = "openai_responses"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"type": "message", "role": "user", "content": user_input}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        # store=False keeps no state at the provider; the encrypted reasoning content lets the
        # next request replay reasoning items without it.
        return {
            "model": model,
            "input": list(conversation),
            "tools": [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in tools
            ],
            "store": False,
            "include": ["reasoning.encrypted_content"],
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
            return _parse_response(reply.body)
        return _malformed(f"a {reply.kind!r} reply without a JSON object body")

    def stream_assembler(self, *, max_argument_bytes: int) -> ResponsesStream:
        return ResponsesStream(max_argument_bytes)

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        return [*conversation, *reply.assistant_items]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        outputs = [
            {
                "type": "function_call_output",
                "call_id": result.call_id,
                "output": json.dumps(dict(result.model_result), separators=(",", ":")),
            }
            for result in results
        ]
        return [*conversation, *outputs]

    def request_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
        given = items(request.get("input"))
        known_calls = {item.get("call_id") for item in given if item.get("type") == "function_call"}
        outputs = Counter(
            item.get("call_id") for item in given if item.get("type") == "function_call_output"
        )
        for call_id in outputs:
            if call_id not in known_calls:
                return _invalid_request(
                    f"No tool call found for function call output with call_id {call_id}."
                )
        for call in previous.calls:
            if outputs[call.call_id] == 0:
                return _invalid_request(f"No tool output found for function call {call.call_id}.")
            if outputs[call.call_id] > 1:
                return _invalid_request(
                    f"Duplicate function_call_output for call_id {call.call_id}."
                )
        return _missing_reasoning(given, previous)


def _missing_reasoning(given: list[Mapping[str, Any]], previous: ParsedReply) -> WireReply | None:
    """A reasoning model's function_call must come back with the reasoning item before it."""
    replayed = {item.get("id") for item in given}
    reasoning = [i for i in items(list(previous.assistant_items)) if i.get("type") == "reasoning"]
    for item in items(list(previous.assistant_items)):
        if item.get("type") == "function_call" and reasoning and item.get("id") in replayed:
            missing = [r.get("id") for r in reasoning if r.get("id") not in replayed]
            if missing:
                return _invalid_request(
                    f"Item '{item.get('id')}' of type 'function_call' was provided without its "
                    f"required 'reasoning' item: '{missing[0]}'."
                )
    return None


def _invalid_request(message: str) -> WireReply:
    """The 400 envelope the Responses API sends for a broken input list (wire notes §1.4)."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    return WireReply(kind="http_error", http_status=400, body=body)


def _malformed(message: str, raw_reason: str | None = None) -> ParsedReply:
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=raw_reason,
        response_id=None,
        text=None,
        error_message=f"{REVISION}: {message}",
    )


def _parse_http_error(reply: WireReply) -> ParsedReply:
    error = obj(obj(reply.body).get("error"))
    code = text(error.get("code")) or text(error.get("type"))
    retryable = status_is_retryable(reply.http_status, code)
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=code,
        response_id=None,
        text=None,
        retryable=retryable,
        retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
        error_message=text(error.get("message")) or f"HTTP {reply.http_status}",
    )


def _parse_response(body: Mapping[str, Any]) -> ParsedReply:
    output = items(body.get("output"))
    status = text(body.get("status"))
    visible, refused = _visible_text(output)
    common: dict[str, Any] = {
        "response_id": text(body.get("id")),
        "text": visible,
        "usage": _usage(body.get("usage")),
        "continuation": frozenset({"reasoning"} if _has(output, "reasoning") else ()),
        "assistant_items": tuple(output),
    }
    if status == "failed":
        error = obj(body.get("error"))
        code = text(error.get("code"))
        return ParsedReply(
            outcome=Outcome.API_FAILURE,
            raw_reason=code,
            retryable=code_is_retryable(code),
            error_message=text(error.get("message")),
            **{**common, "text": None},
        )
    if status == "incomplete":
        reason = text(obj(body.get("incomplete_details")).get("reason"))
        outcome = Outcome.REFUSAL if reason == "content_filter" else Outcome.TRUNCATED
        return ParsedReply(outcome=outcome, raw_reason=reason, **common)
    if status != "completed":
        return ParsedReply(outcome=Outcome.MALFORMED, raw_reason=status, **common)
    if refused:
        return ParsedReply(outcome=Outcome.REFUSAL, raw_reason=status, **common)
    calls = [item for item in output if item.get("type") == "function_call"]
    if any(is_cut_off(text(item.get("arguments"))) for item in calls):
        return ParsedReply(outcome=Outcome.TRUNCATED, raw_reason=status, **common)
    if any(not text(item.get("call_id")) or not text(item.get("name")) for item in calls):
        # A result can only be returned to a call_id, and only a name can select a tool.
        return ParsedReply(
            outcome=Outcome.MALFORMED,
            raw_reason=status,
            error_message=f"{REVISION}: a function_call without a call_id or a name",
            **common,
        )
    if calls:
        proposed = tuple(_proposed_call(item) for item in calls)
        return ParsedReply(
            outcome=Outcome.TOOL_PROPOSALS, raw_reason=status, calls=proposed, **common
        )
    if visible is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, raw_reason=status, **common)
    return ParsedReply(outcome=Outcome.MALFORMED, raw_reason=status, **common)


def _proposed_call(item: Mapping[str, Any]) -> ProposedCall:
    raw = text(item.get("arguments"))
    arguments, error = decode_arguments(raw)
    if item.get("arguments") is not None and raw is None:  # not a string at all
        arguments, error = None, True
    return ProposedCall(
        call_id=str(item.get("call_id")),
        name=str(item.get("name")),
        arguments=arguments,
        raw_arguments=raw,
        arguments_error=error,
        item_id=text(item.get("id")),
    )


def _visible_text(output: Sequence[Mapping[str, Any]]) -> tuple[str | None, bool]:
    """Concatenated ``output_text`` and ``refusal`` parts of message items, and whether any part
    was a refusal."""
    pieces: list[str] = []
    refused = False
    for item in output:
        if item.get("type") != "message":
            continue
        for part in items(item.get("content")):
            if part.get("type") == "output_text":
                pieces.append(text(part.get("text")) or "")
            elif part.get("type") == "refusal":
                refused = True
                pieces.append(text(part.get("refusal")) or "")
    return joined(pieces), refused


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
    )


def _has(output: Sequence[Mapping[str, Any]], item_type: str) -> bool:
    return any(item.get("type") == item_type for item in output)


class ResponsesStream:
    """Assembles a Responses SSE stream (wire notes §1.5).

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
            self._usage = _usage(response.get("usage")) or self._usage
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
            code = text(self._error.get("code")) or text(self._error.get("type"))
            return ParsedReply(
                outcome=Outcome.API_FAILURE,
                raw_reason=code,
                response_id=self._response_id,
                text=None,
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
                continuation=frozenset({"reasoning"} if _has(done, "reasoning") else ()),
            )
        # Servers repeat the full output in the terminal event; the items assembled from the
        # done events are used when present (their arguments are the authoritative ones).
        body = {
            **self._terminal,
            "id": self._response_id,
            "output": output or items(self._terminal.get("output")),
        }
        return _parse_response(body)
