"""Classifying one ``GenerateContentResponse`` (the order of :class:`providers.base.Outcome`).

``raw_reason`` is ``candidates[0].finishReason``, else ``promptFeedback.blockReason``; for an
error, ``error.status``. Finish reasons: ``FinishReason`` in the API reference
(https://ai.google.dev/api/generate-content#FinishReason). Calls the model sent without an
``id`` get one derived from the reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import UsageFields, api_failure
from providers.base import Outcome, ParsedReply, ProposedCall, Usage
from providers.errors import code_is_retryable
from providers.payload import items, joined, obj, text
from providers.streaming import ArgumentBuffer

REVISION = "gemini_generate/2026-11-30.1"
#: ``promptTokenCount`` in; ``candidatesTokenCount + thoughtsTokenCount`` out (a missing count
#: is 0). No usage when the reply carries none of these counts.
USAGE = UsageFields(
    input="promptTokenCount",
    output=("candidatesTokenCount", "thoughtsTokenCount"),
    only_when_counted=True,
)

#: Finish reasons that mean the output was blocked : the safety family
#: and their ``IMAGE_*`` variants (``FinishReason`` in google-genai ``types.py``).
_BLOCKED = frozenset({"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION"})
REFUSAL_REASONS = _BLOCKED | {f"IMAGE_{reason}" for reason in _BLOCKED}
#: Finish reasons that mean a limit cut the reply.
TRUNCATED_REASONS = frozenset({"MAX_TOKENS", "CONTINUATION"})
#: The one normal ending. Every other reason, known or not, is MALFORMED.
NORMAL_REASON = "STOP"


def failure_in_200(error: Mapping[str, Any], usage: Usage | None) -> ParsedReply:
    """A Google error envelope inside a 200: a stream chunk ``{"error": {...}}`` (google-genai
    ``_api_client.py`` ``request_streamed`` raises ``APIError`` on it). ``error.status`` names
    the problem."""
    status = text(error.get("status"))
    return api_failure(
        raw_reason=status,
        usage=usage,
        retryable=code_is_retryable(status),
        error_message=text(error.get("message")) or "error reported inside the reply",
    )


def parse_response(body: Mapping[str, Any], max_argument_bytes: int) -> ParsedReply:
    """Classify one ``GenerateContentResponse`` (a whole body, or the one a stream assembled).

    Only ``candidates[0]`` is read: the loop never asks for more than one candidate.
    """
    usage = USAGE.read(body.get("usageMetadata"))
    if isinstance(body.get("error"), Mapping):
        return failure_in_200(obj(body.get("error")), usage)
    response_id = text(body.get("responseId"))
    candidates = items(body.get("candidates"))
    if not candidates:
        block = text(obj(body.get("promptFeedback")).get("blockReason"))
        outcome = Outcome.REFUSAL if block else Outcome.MALFORMED
        return ParsedReply(
            outcome=outcome,
            raw_reason=block,
            response_id=response_id,
            text=None,
            usage=usage,
            error_message=None if block else f"{REVISION}: no candidates and no block reason",
        )
    candidate = candidates[0]
    content = obj(candidate.get("content"))
    parts = items(content.get("parts"))
    reason = text(candidate.get("finishReason"))
    common: dict[str, Any] = {
        "raw_reason": reason,
        "response_id": response_id,
        "text": visible_text(parts),
        "usage": usage,
        "continuation": frozenset({"thought_signature"} if signed(parts) else ()),
        "assistant_items": (_model_turn(content),) if parts else (),
    }
    if reason in REFUSAL_REASONS:
        return ParsedReply(outcome=Outcome.REFUSAL, **common)
    if reason in TRUNCATED_REASONS:
        return ParsedReply(outcome=Outcome.TRUNCATED, **common)
    if reason != NORMAL_REASON:
        detail = text(candidate.get("finishMessage")) or f"finish reason {reason!r}"
        return ParsedReply(
            outcome=Outcome.MALFORMED, error_message=f"{REVISION}: {detail}", **common
        )
    call_parts = [(index, part) for index, part in enumerate(parts) if "functionCall" in part]
    if call_parts:
        if not all(call_name(part) for _, part in call_parts):
            return ParsedReply(
                outcome=Outcome.MALFORMED,
                error_message=f"{REVISION}: a functionCall part without a name",
                **common,
            )
        seed = _reply_digest(body)
        calls = tuple(
            _proposed_call(part, index, seed, max_argument_bytes) for index, part in call_parts
        )
        return ParsedReply(outcome=Outcome.TOOL_PROPOSALS, calls=calls, **common)
    if common["text"] is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, **common)
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        error_message=f"{REVISION}: STOP with neither text nor function calls",
        **common,
    )


def _model_turn(content: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's content, replayed verbatim; ``role`` is filled in only if absent."""
    turn = dict(content)
    turn.setdefault("role", "model")
    return turn


def visible_text(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """``text`` parts not marked ``thought: true``, concatenated."""
    return joined(
        [
            part["text"]
            for part in parts
            if isinstance(part.get("text"), str) and part.get("thought") is not True
        ]
    )


def signed(parts: Sequence[Mapping[str, Any]]) -> bool:
    return any(text(part.get("thoughtSignature")) for part in parts)


def call_name(part: Mapping[str, Any]) -> str | None:
    call = part.get("functionCall")
    name = text(call.get("name")) if isinstance(call, Mapping) else None
    return name or None


def _reply_digest(body: Mapping[str, Any]) -> str:
    """A digest of the whole reply: the seed of synthesized call IDs (no clock, no randomness,
    so parsing the same payload again yields the same IDs)."""
    try:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        canonical = repr(body)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def synthesized_call_id(digest: str, part_index: int) -> str:
    """The ID made up for a ``functionCall`` without ``id``: reply digest + part position."""
    return f"gcall_{digest}_{part_index}"


def _proposed_call(
    part: Mapping[str, Any], part_index: int, digest: str, max_argument_bytes: int
) -> ProposedCall:
    """``functionCall.args`` is an object on the wire: taken as is, never coerced. A missing
    ``args`` is a call without parameters; anything but an object is an argument error; an
    object larger than the byte limit is one too (``ArgumentBuffer``)."""
    call = obj(part.get("functionCall"))
    wire_id = text(call.get("id")) or None
    value = call.get("args")
    arguments: dict[str, Any] | None
    try:
        raw: str | None = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        raw = None
    if value is None:
        arguments, error, raw = {}, False, None
    elif isinstance(value, Mapping) and raw is not None:
        buffer = ArgumentBuffer(max_argument_bytes)
        buffer.replace(raw)
        arguments, error = (None, True) if buffer.overflowed else (dict(value), False)
        raw = buffer.text()
    else:
        arguments, error = None, True
    return ProposedCall(
        call_id=wire_id or synthesized_call_id(digest, part_index),
        name=call_name(part) or "",
        arguments=arguments,
        raw_arguments=raw,
        arguments_error=error,
        synthesized=wire_id is None,
    )
