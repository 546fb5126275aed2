"""Classifying one Responses ``response`` object (the order of :class:`providers.base.Outcome`).

``raw_reason`` is ``incomplete_details.reason`` for an incomplete response, ``error.code`` for a
failed one, else ``status``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import UsageFields, named
from providers.arguments import decode_argument_text, is_cut_off
from providers.base import Outcome, ParsedReply, ProposedCall
from providers.errors import code_is_retryable
from providers.payload import items, joined, obj, text

REVISION = "openai_responses/2026-11-30.2"
USAGE = UsageFields(input="input_tokens", output=("output_tokens",))


def parse_response(body: Mapping[str, Any]) -> ParsedReply:
    """Classify a ``response`` object (a whole body, or the one a stream assembled)."""
    output = items(body.get("output"))
    status = text(body.get("status"))
    visible, refused = _visible_text(output)
    common: dict[str, Any] = {
        "response_id": text(body.get("id")),
        "text": visible,
        "usage": USAGE.read(body.get("usage")),
        "continuation": frozenset({"reasoning"} if has_item(output, "reasoning") else ()),
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
        message = f"{REVISION}: the response is not finished ({named('status', status)})"
        return ParsedReply(
            outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
        )
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
    message = f"{REVISION}: completed with neither text nor calls"
    return ParsedReply(
        outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
    )


def _proposed_call(item: Mapping[str, Any]) -> ProposedCall:
    raw = text(item.get("arguments"))
    arguments, error = decode_argument_text(item.get("arguments"))
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


def has_item(output: Sequence[Mapping[str, Any]], item_type: str) -> bool:
    """Whether ``output`` holds an item of ``item_type``."""
    return any(item.get("type") == item_type for item in output)
