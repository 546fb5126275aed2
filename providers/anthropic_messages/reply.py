"""Classifying one Messages reply (the order of :class:`providers.base.Outcome`).

``raw_reason`` is ``stop_reason``; for an error, ``error.type``. Stop reasons: "Handling stop
reasons" (https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from providers.adapter import UsageFields, api_failure, named
from providers.base import Outcome, ParsedReply, ProposedCall, Usage
from providers.errors import code_is_retryable
from providers.payload import items, joined, obj, text

REVISION = "anthropic_messages/2026-11-30.1"
#: ``input_tokens`` (cache read/write counts are reported apart and not added) and
#: ``output_tokens``.
_USAGE = UsageFields(input="input_tokens", output=("output_tokens",))

#: Stop reasons that cut the reply short.
_LIMIT_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
#: Stop reasons that end a reply normally, so the calls in it may run.
_NORMAL_ENDS = frozenset({"tool_use", "end_turn", "stop_sequence"})
#: Stop reasons that mark text as a finished answer.
_COMPLETIONS = frozenset({"end_turn", "stop_sequence"})
#: Blocks that carry the model's thinking: never text, always sent back unchanged.
THINKING = ("thinking", "redacted_thinking")


def failure_in_200(
    error: Mapping[str, Any], *, response_id: str | None, usage: Usage | None
) -> ParsedReply:
    """An error reported inside a 200 (a stream ``error`` event, or an error object served as
    the body): whatever text came before it is discarded."""
    error_type = text(error.get("type"))
    return api_failure(
        raw_reason=error_type,
        response_id=response_id,
        usage=usage,
        retryable=code_is_retryable(error_type),
        error_message=text(error.get("message")),
    )


def parse_message(body: Mapping[str, Any]) -> ParsedReply:
    """A ``message`` object: ``{id, content: [blocks], stop_reason, usage, ...}``."""
    usage = _USAGE.read(body.get("usage"))
    if body.get("type") == "error":
        return failure_in_200(obj(body.get("error")), response_id=None, usage=usage)
    content = items(body.get("content"))
    return classify(
        response_id=text(body.get("id")),
        stop_reason=text(body.get("stop_reason")),
        content=content,
        calls=[_message_call(block) for block in content if block.get("type") == "tool_use"],
        usage=usage,
    )


def _message_call(block: Mapping[str, Any]) -> Call:
    """A non-streamed tool_use: ``input`` is already a JSON object; anything else is an
    argument error (no coercion)."""
    value = block.get("input")
    arguments = dict(value) if isinstance(value, Mapping) else None
    return Call(
        call_id=text(block.get("id")),
        name=text(block.get("name")),
        arguments=arguments,
        raw_arguments=dump(value),
        cut=False,
    )


@dataclass(frozen=True)
class Call:
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


def classify(
    *,
    response_id: str | None,
    stop_reason: str | None,
    content: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    usage: Usage | None,
) -> ParsedReply:
    """Classify a message that finished (non-streamed, or after ``message_stop``)."""
    visible = visible_text(content)
    common: dict[str, Any] = {
        "raw_reason": stop_reason,
        "response_id": response_id,
        "text": visible,
        "usage": usage,
        "continuation": continuation(content, stop_reason),
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
    problem = named("stop_reason", stop_reason) + (
        "" if calls or visible else ", and neither text nor calls"
    )
    return ParsedReply(outcome=Outcome.MALFORMED, error_message=f"{REVISION}: {problem}", **common)


def visible_text(content: Sequence[Mapping[str, Any]]) -> str | None:
    """The ``text`` blocks, concatenated; thinking is never text."""
    return joined(
        [text(block.get("text")) or "" for block in content if block.get("type") == "text"]
    )


def continuation(content: Sequence[Mapping[str, Any]], stop_reason: str | None) -> frozenset[str]:
    """Opaque blocks that must go back unchanged: thinking, redacted_thinking, and the
    server_tool_use blocks of a paused turn."""
    kinds = set()
    for block in content:
        kind = block.get("type")
        if kind in THINKING or (kind == "server_tool_use" and stop_reason == "pause_turn"):
            kinds.add(str(kind))
    return frozenset(kinds)


def dump(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None
