"""OpenAI Chat Completions (``POST /v1/chat/completions``) adapter, also for servers that copy it.

Wire facts (field names, finish reasons, chunk shapes, pairing rules, 400 texts) come from the
openai-python type files ``src/openai/types/chat/*.py`` (``chat_completion.py``,
``chat_completion_chunk.py``, ``chat_completion_assistant_message_param.py``,
``chat_completion_tool_message_param.py``) and the public error reports collected in
``shared/reference/provider-wire-notes.md`` §2; classification follows
``shared/fixtures/README.md``.
"""

from __future__ import annotations

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
from providers.payload import count, items, joined, obj, text
from providers.streaming import ArgumentBuffer, assemble

REVISION = "openai_chat/2026-11-30.1"
#: Finish reasons that end a reply normally; with calls present the reply proposes them.
_NORMAL_ENDS = ("tool_calls", "stop", "function_call")
#: Prefix of call IDs the adapter makes up for calls the server sent without an ``id``.
SYNTHESIZED_PREFIX = "synth_"


class OpenAIChatAdapter:
    """Adapter for Chat Completions: ``tool_calls`` on the assistant message out, one
    ``{"role": "tool", "tool_call_id", "content"}`` message per call in.

    The conversation is the request's ``messages`` list: the user message, then each assistant
    message as the server returned it (``content``, ``refusal``, ``tool_calls`` verbatim, and a
    ``reasoning_content`` when a compatible server sent one), each immediately followed by one
    tool message per ``tool_call_id`` (wire notes §2: nothing may come between them).
    """

    provider = "openai"
    family = "openai_chat"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"role": "user", "content": user_input}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        # Keyword arguments of ``client.chat.completions.create``. ``stream`` and
        # ``stream_options`` are the transport's: the API rejects ``stream_options`` unless
        # ``stream`` is true. An empty ``tools`` array is a 400, so it is left out.
        body: dict[str, Any] = {"model": model, "messages": list(conversation)}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                        "strict": False,
                    },
                }
                for tool in tools
            ]
        return body

    def parse_reply(
        self, reply: WireReply, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ParsedReply:
        if reply.kind == "http_error":
            return _parse_http_error(reply)
        if reply.kind == "stream":
            events = reply.events if isinstance(reply.events, Sequence) else []
            return assemble(self.stream_assembler(max_argument_bytes=max_argument_bytes), events)
        if isinstance(reply.body, Mapping):
            return _parse_completion(reply.body)
        return _malformed(f"a {reply.kind!r} reply without a JSON object body")

    def stream_assembler(self, *, max_argument_bytes: int) -> ChatStream:
        return ChatStream(max_argument_bytes)

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        return [*conversation, *reply.assistant_items]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        legacy = _answers_legacy_function_call(conversation)
        messages: list[dict[str, Any]] = []
        for result in results:
            content = json.dumps(dict(result.model_result), separators=(",", ":"))
            if not result.synthesized:
                messages.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": content}
                )
            elif legacy:
                # The deprecated ``function_call`` has no ID: its answer is a ``function`` message.
                messages.append({"role": "function", "name": result.name, "content": content})
            else:
                # The server sent the call without an ID; the made-up one is not sent back as if
                # it had issued it. The answer is matched by position (and name).
                messages.append({"role": "tool", "name": result.name, "content": content})
        return [*conversation, *messages]

    def request_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
        raw = request.get("messages")
        messages = list(raw) if isinstance(raw, Sequence) and not isinstance(raw, str) else []
        return (
            _pairing_error(messages)
            or _unsent_calls(messages, previous)
            or _missing_reasoning(messages, previous)
        )


# --- request_error: the server's own 400s -----------------------------------------------------


@dataclass
class _Slot:
    """One call of an assistant message, waiting for its answer."""

    call_id: str | None
    name: str | None
    legacy: bool = False
    answered_at: int | None = None


@dataclass
class _Block:
    """The calls of the latest assistant message, answered by the messages right after it."""

    slots: list[_Slot] = field(default_factory=list)

    def unanswered(self) -> list[str]:
        return [slot.call_id or slot.name or "" for slot in self.slots if slot.answered_at is None]


def _slots(message: Mapping[str, Any]) -> list[_Slot]:
    slots = [
        _Slot(call_id=text(call.get("id")) or None, name=_call_name(call))
        for call in items(message.get("tool_calls"))
    ]
    legacy = obj(message.get("function_call"))
    if not slots and legacy:
        slots.append(_Slot(call_id=None, name=text(legacy.get("name")), legacy=True))
    return slots


def _pairing_error(messages: Sequence[Any]) -> WireReply | None:
    """Walk ``messages`` as the server does: an assistant message with ``tool_calls`` must be
    followed, with nothing in between, by exactly one tool message per ``tool_call_id``; a tool
    message must answer a call of the assistant message right before its run of tool messages.
    Calls the server sent without an ID are answered, in order, by tool messages without one.
    """
    block: _Block | None = None
    for index, raw in enumerate(messages):
        message = obj(raw)
        role = message.get("role")
        if role == "tool":
            if block is None:
                return _orphan_tool_message(index)
            problem = _answer(block, message, index)
            if problem is not None:
                return problem
            continue
        if role == "function" and block is not None:
            legacy = next(
                (
                    s
                    for s in block.slots
                    if s.legacy and s.answered_at is None and s.name == message.get("name")
                ),
                None,
            )
            if legacy is not None:
                legacy.answered_at = index
                continue
        if block is not None and block.unanswered():
            return _missing_tool_messages(block.unanswered(), f"messages.[{index}].role")
        block = None
        if role == "assistant":
            slots = _slots(message)
            block = _Block(slots) if slots else None
    if block is not None and block.unanswered():
        return _missing_tool_messages(block.unanswered(), "messages")
    return None


def _answer(block: _Block, message: Mapping[str, Any], index: int) -> WireReply | None:
    if "tool_call_id" not in message or message.get("tool_call_id") is None:
        slot = next(
            (
                s
                for s in block.slots
                if s.call_id is None and not s.legacy and s.answered_at is None
            ),
            None,
        )
        if slot is None:
            return _invalid_request(
                f"Missing required parameter: 'messages.[{index}].tool_call_id'.",
                param=f"messages.[{index}].tool_call_id",
                code="missing_required_parameter",
            )
        slot.answered_at = index
        return None
    call_id = message.get("tool_call_id")
    slot = next((s for s in block.slots if s.call_id is not None and s.call_id == call_id), None)
    if slot is None:
        return _invalid_request(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
            "previous message.",
            param=f"messages.[{index}].tool_call_id",
        )
    if slot.answered_at is not None:
        return _invalid_request(
            f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in "
            f"messages[{slot.answered_at}] and messages[{index}].",
            param=f"messages.[{index}].tool_call_id",
        )
    slot.answered_at = index
    return None


def _unsent_calls(messages: Sequence[Any], previous: ParsedReply) -> WireReply | None:
    """Every call of ``previous`` must be in the request, on its last assistant message (whose
    answers :func:`_pairing_error` has already checked). A request that left the assistant
    message out altogether leaves those calls unanswered."""
    if not previous.calls:
        return None
    last = next((obj(m) for m in reversed(messages) if obj(m).get("role") == "assistant"), None)
    slots = _slots(last) if last is not None else []
    sent = {slot.call_id for slot in slots if slot.call_id is not None}
    missing = [c.call_id for c in previous.calls if not c.synthesized and c.call_id not in sent]
    unnamed = sum(1 for slot in slots if slot.call_id is None)
    synthesized = [c.call_id for c in previous.calls if c.synthesized]
    missing += synthesized[unnamed:]
    if missing:
        return _missing_tool_messages(missing, "messages")
    return None


def _missing_reasoning(messages: Sequence[Any], previous: ParsedReply) -> WireReply | None:
    """Servers that think before calling tools (``reasoning_content`` on the assistant message)
    require it back on that message while the tool loop goes on; OpenAI itself never sends it.
    Text: https://api-docs.deepseek.com/guides/thinking_mode#tool-calls (public error reports)."""
    if not previous.calls:
        return None
    sent = [obj(item) for item in previous.assistant_items]
    if not any(isinstance(item.get("reasoning_content"), str) for item in sent):
        return None
    for index in range(len(messages) - 1, -1, -1):
        message = obj(messages[index])
        if message.get("role") == "assistant":
            if isinstance(message.get("reasoning_content"), str):
                return None
            return _invalid_request(
                "Missing `reasoning_content` field in the assistant message at message index "
                f"{index}. For more information, please refer to "
                "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
                param=None,
                code="invalid_request_error",
            )
    return None


def _orphan_tool_message(index: int) -> WireReply:
    return _invalid_request(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
        param=f"messages.[{index}].role",
    )


def _missing_tool_messages(call_ids: Sequence[str], param: str) -> WireReply:
    return _invalid_request(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(call_ids),
        param=param,
    )


def _invalid_request(message: str, *, param: str | None, code: str | None = None) -> WireReply:
    """The 400 envelope Chat Completions sends for a broken ``messages`` list (wire notes §2)."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return WireReply(kind="http_error", http_status=400, body=body)


def _answers_legacy_function_call(conversation: Sequence[Any]) -> bool:
    """Whether the latest assistant message carries a deprecated ``function_call`` (and no
    ``tool_calls``), so its result goes back as a ``function`` message."""
    for raw in reversed(conversation):
        message = obj(raw)
        if message.get("role") == "assistant":
            return not items(message.get("tool_calls")) and bool(obj(message.get("function_call")))
    return False


# --- parsing ----------------------------------------------------------------------------------


def _malformed(message: str, raw_reason: str | None = None) -> ParsedReply:
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=raw_reason,
        response_id=None,
        text=None,
        error_message=f"{REVISION}: {message}",
    )


def _error_code(error: Mapping[str, Any]) -> str | None:
    """``error.code``, or ``error.type`` when the code is null (fixtures README, raw_reason)."""
    return text(error.get("code")) or text(error.get("type"))


def _parse_http_error(reply: WireReply) -> ParsedReply:
    error = obj(obj(reply.body).get("error"))
    code = _error_code(error)
    # A quota code in either field means "no credit left", never worth a retry.
    retryable = status_is_retryable(reply.http_status, code) and status_is_retryable(
        reply.http_status, text(error.get("type"))
    )
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=code,
        response_id=None,
        text=None,
        retryable=retryable,
        retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
        error_message=text(error.get("message")) or f"HTTP {reply.http_status}",
    )


def _failure_in_200(error: Any, *, response_id: str | None, usage: Usage | None) -> ParsedReply:
    """An error reported inside a 200: a streamed ``data: {"error": {...}}`` frame, or a body
    holding only ``error``. Whatever text arrived before it is discarded."""
    details = obj(error)
    code = _error_code(details)
    retryable = code_is_retryable(text(details.get("code"))) or code_is_retryable(
        text(details.get("type"))
    )
    message = text(details.get("message")) or (error if isinstance(error, str) else None)
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=code,
        response_id=response_id,
        text=None,
        usage=usage,
        retryable=retryable,
        error_message=message or "error reported inside a 200 reply",
    )


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input_tokens=count(usage.get("prompt_tokens")),
        output_tokens=count(usage.get("completion_tokens")),
    )


def _first_choice(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = body.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        return None
    return obj(choices[0]) if isinstance(choices[0], Mapping) else None


def _parse_completion(body: Mapping[str, Any]) -> ParsedReply:
    response_id = text(body.get("id"))
    usage = _usage(body.get("usage"))
    choice = _first_choice(body)
    if choice is None:
        if body.get("error") is not None:
            return _failure_in_200(body.get("error"), response_id=response_id, usage=usage)
        return ParsedReply(
            outcome=Outcome.MALFORMED,
            raw_reason=None,
            response_id=response_id,
            text=None,
            usage=usage,
            error_message=f"{REVISION}: a chat completion without choices",
        )
    return _classify(
        response_id=response_id,
        finish=text(choice.get("finish_reason")),
        message=obj(choice.get("message")),
        usage=usage,
    )


def _content_text(content: Any) -> str | None:
    """``message.content``: a string, or (some compatible servers) a list of text parts."""
    if isinstance(content, str):
        return content
    return joined(
        [text(part.get("text")) or "" for part in items(content) if part.get("type") == "text"]
    )


def _call_name(call: Mapping[str, Any]) -> str | None:
    return text(obj(call.get("function")).get("name")) or text(obj(call.get("custom")).get("name"))


def _raw_arguments(call: Mapping[str, Any]) -> Any:
    function = obj(call.get("function"))
    if "arguments" in function:
        return function.get("arguments")
    return obj(call.get("custom")).get("input")  # custom tools carry free text in ``input``


def _synthesized_id(response_id: str | None, message: Mapping[str, Any], position: int) -> str:
    """A call ID derived from the reply itself (its id and calls) and the call's position."""
    try:
        payload = json.dumps(
            [response_id, message.get("tool_calls"), message.get("function_call")],
            sort_keys=True,
            default=repr,
        )
    except (TypeError, ValueError):
        payload = repr([response_id, message.get("tool_calls"), message.get("function_call")])
    digest = hashlib.sha256(f"{payload}#{position}".encode("utf-8", "replace")).hexdigest()
    return f"{SYNTHESIZED_PREFIX}{digest[:24]}"


def _proposed_calls(
    response_id: str | None, message: Mapping[str, Any], overflowed: frozenset[int]
) -> tuple[list[ProposedCall], bool]:
    """The message's calls in order, and whether any call's argument text is cut off."""
    wire = items(message.get("tool_calls"))
    legacy = obj(message.get("function_call"))
    if not wire and legacy:
        wire = [{"type": "function", "function": legacy}]
    calls: list[ProposedCall] = []
    cut = False
    for position, call in enumerate(wire):
        raw_value = _raw_arguments(call)
        raw = text(raw_value)
        if position in overflowed:
            arguments, error = None, True
        else:
            arguments, error = decode_arguments(raw)
            if raw_value is not None and raw is None:  # not a string at all
                arguments, error = None, True
            cut = cut or is_cut_off(raw)
        call_id = text(call.get("id"))
        calls.append(
            ProposedCall(
                call_id=call_id or _synthesized_id(response_id, message, position),
                name=_call_name(call) or "",
                arguments=arguments,
                raw_arguments=raw,
                arguments_error=error,
                synthesized=not call_id,
            )
        )
    return calls, cut


def _assistant_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The assistant message to send back: the fields of ``ChatCompletionAssistantMessageParam``
    the server returned (response-only fields such as ``annotations`` are left out), plus a
    ``reasoning_content`` a compatible server requires back."""
    content = message.get("content")
    replayed: dict[str, Any] = {
        "role": "assistant",
        "content": content if isinstance(content, str | list) else None,
    }
    if isinstance(message.get("refusal"), str):
        replayed["refusal"] = message["refusal"]
    tool_calls = items(message.get("tool_calls"))
    if tool_calls:
        replayed["tool_calls"] = [dict(call) for call in tool_calls]
    elif obj(message.get("function_call")):
        replayed["function_call"] = dict(obj(message.get("function_call")))
    if isinstance(message.get("reasoning_content"), str):
        replayed["reasoning_content"] = message["reasoning_content"]
    return replayed


def _classify(
    *,
    response_id: str | None,
    finish: str | None,
    message: Mapping[str, Any],
    usage: Usage | None,
    overflowed: frozenset[int] = frozenset(),
) -> ParsedReply:
    """Steps 4-10 of the fixtures README for one assistant message and its finish reason."""
    refusal = text(message.get("refusal")) or None
    visible = joined([_content_text(message.get("content")) or "", refusal or ""])
    calls, cut = _proposed_calls(response_id, message, overflowed)
    common: dict[str, Any] = {
        "raw_reason": finish,
        "response_id": response_id,
        "text": visible,
        "usage": usage,
        "assistant_items": (_assistant_message(message),),
    }
    if refusal is not None or finish == "content_filter":
        return ParsedReply(outcome=Outcome.REFUSAL, **common)
    if finish == "length" or cut:
        return ParsedReply(outcome=Outcome.TRUNCATED, **common)
    if finish in _NORMAL_ENDS and calls:
        return ParsedReply(outcome=Outcome.TOOL_PROPOSALS, calls=tuple(calls), **common)
    if finish == "stop" and visible is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, **common)
    reason = f"finish_reason {finish!r}" + (
        "" if calls or visible else " with neither text nor calls"
    )
    return ParsedReply(outcome=Outcome.MALFORMED, error_message=f"{REVISION}: {reason}", **common)


# --- streaming --------------------------------------------------------------------------------


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
    """Assembles a Chat Completions SSE stream (wire notes §2; no ``event:`` lines).

    Only choice 0 is read. Tool-call fragments are keyed by ``tool_calls[].index``, but a
    fragment that brings a new non-empty ``id`` at an index held by a different ``id`` starts a
    new call (some servers stream every call at index 0). The first non-empty ``name`` of a call
    is kept. The chunk with a non-null ``finish_reason`` completes the reply; ``data: [DONE]``
    is neither needed nor relied on (``shared/fixtures/README.md``, stream notes); a usage-only
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
        self._usage = _usage(data.get("usage")) or self._usage
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
            index = fragment.get("index")
            key = index if isinstance(index, int) and not isinstance(index, bool) else None
            note = self._tool_call(key, fragment) or note
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
            return _failure_in_200(self._error, response_id=self._response_id, usage=self._usage)
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
        return _classify(
            response_id=self._response_id,
            finish=self._finish,
            message=message,
            usage=self._usage,
            overflowed=overflowed,
        )
