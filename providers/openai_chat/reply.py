"""Classifying one Chat Completions reply (the order of :class:`providers.base.Outcome`).

``raw_reason`` is ``choices[0].finish_reason``; for an error, ``error.code`` (``error.type``
when the code is null). Calls the server sent without an ``id`` get one derived from the reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import UsageFields, api_failure, error_reason, malformed, named
from providers.arguments import decode_argument_text, is_cut_off
from providers.base import Outcome, ParsedReply, ProposedCall, Usage
from providers.errors import code_is_retryable
from providers.payload import items, joined, obj, text

REVISION = "openai_chat/2026-11-30.1"
USAGE = UsageFields(input="prompt_tokens", output=("completion_tokens",))
#: Finish reasons that end a reply normally; with calls present the reply proposes them.
_NORMAL_ENDS = ("tool_calls", "stop", "function_call")
#: Prefix of call IDs the adapter makes up for calls the server sent without an ``id``.
SYNTHESIZED_PREFIX = "synth_"


def failure_in_200(error: Any, *, response_id: str | None, usage: Usage | None) -> ParsedReply:
    """An error reported inside a 200: a streamed ``data: {"error": {...}}`` frame, or a body
    holding only ``error``. Whatever text arrived before it is discarded."""
    details = obj(error)
    retryable = code_is_retryable(text(details.get("code"))) or code_is_retryable(
        text(details.get("type"))
    )
    message = text(details.get("message")) or (error if isinstance(error, str) else None)
    return api_failure(
        raw_reason=error_reason(details, ("code", "type")),
        response_id=response_id,
        usage=usage,
        retryable=retryable,
        error_message=message or "error reported inside a 200 reply",
    )


def _first_choice(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = body.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        return None
    return obj(choices[0]) if isinstance(choices[0], Mapping) else None


def parse_completion(body: Mapping[str, Any]) -> ParsedReply:
    response_id = text(body.get("id"))
    usage = USAGE.read(body.get("usage"))
    choice = _first_choice(body)
    if choice is None:
        if body.get("error") is not None:
            return failure_in_200(body.get("error"), response_id=response_id, usage=usage)
        return malformed(
            REVISION, "a chat completion without choices", response_id=response_id, usage=usage
        )
    return classify(
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


def call_name(call: Mapping[str, Any]) -> str | None:
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
            arguments, error = decode_argument_text(raw_value)
            cut = cut or is_cut_off(raw)
        call_id = text(call.get("id"))
        calls.append(
            ProposedCall(
                call_id=call_id or _synthesized_id(response_id, message, position),
                name=call_name(call) or "",
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


def classify(
    *,
    response_id: str | None,
    finish: str | None,
    message: Mapping[str, Any],
    usage: Usage | None,
    overflowed: frozenset[int] = frozenset(),
) -> ParsedReply:
    """Classify one assistant message and its finish reason (an HTTP 200 body, or a stream that
    reached its finish reason)."""
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
    reason = named("finish_reason", finish) + (
        "" if calls or visible else ", and neither text nor calls"
    )
    return ParsedReply(outcome=Outcome.MALFORMED, error_message=f"{REVISION}: {reason}", **common)
