"""Classifying one interaction (the order of :class:`providers.base.Outcome`).

``raw_reason`` is the interaction ``status``; for a safety-blocked ``model_output`` step, the
``ErrorInfo`` reason; for an HTTP error, ``error.status``. Calls the model sent without an
``id`` get one derived from the reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import UsageFields, named
from providers.arguments import decode_arguments, is_cut_off
from providers.base import Outcome, ParsedReply, ProposedCall
from providers.errors import code_is_retryable, status_is_retryable
from providers.payload import integer, items, joined, text

REVISION = "gemini_interactions/2026-11-30.1"
#: Output counts thinking: ``total_output_tokens + total_thought_tokens``.
USAGE = UsageFields(
    input="total_input_tokens", output=("total_output_tokens", "total_thought_tokens")
)

#: ErrorInfo reasons of a ``model_output`` step that mean a safety block.
SAFETY_REASONS = frozenset(
    {
        "SAFETY",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "RECITATION",
        "IMAGE_SAFETY",
        "IMAGE_BLOCKLIST",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_SPII",
        "IMAGE_RECITATION",
    }
)
#: Statuses of an interaction cut by a limit. ``requires_continuation`` and
#: ``continuation_required`` (newer SDK enum) mean the per-request token limit was hit, like
#: Gemini's ``CONTINUATION`` finish reason.
_CUT_STATUSES = frozenset(
    {"incomplete", "budget_exceeded", "requires_continuation", "continuation_required"}
)
#: Statuses of an interaction that ended normally (``requires_action``: calls are pending).
_NORMAL_STATUSES = frozenset({"completed", "requires_action"})
#: Statuses of a stream still running: not a stop reason.
PROGRESS_STATUSES = frozenset({"in_progress", "queued"})
#: Step types that carry the client's input, never the model's output (echoed by some servers).
_INPUT_STEPS = frozenset({"user_input", "function_result"})
#: gRPC canonical codes DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE.
_RETRYABLE_GRPC_CODES = frozenset({4, 8, 13, 14})


def code_text(code: Any) -> str | None:
    """An error code as the payload gave it: a string, or an integer written out."""
    number = integer(code)
    return text(code) if number is None else str(number)


def code_retryable(code: Any) -> bool:
    """Whether an error code inside a 200 names a server-side or capacity problem: Google status
    names, HTTP statuses, or gRPC canonical code numbers."""
    number = integer(code)
    if number is None:
        return code_is_retryable(text(code))
    return status_is_retryable(number) if number >= 100 else number in _RETRYABLE_GRPC_CODES


def parse_interaction(body: Mapping[str, Any]) -> ParsedReply:
    steps = items(body.get("steps"))
    status = text(body.get("status"))
    common: dict[str, Any] = {
        "response_id": text(body.get("id")),
        "text": _visible_text(steps),
        "usage": USAGE.read(body.get("usage")),
        "continuation": frozenset({"thought_signature"} if signed(steps) else ()),
        "assistant_items": tuple(s for s in steps if text(s.get("type")) not in _INPUT_STEPS),
    }
    if status == "failed":
        return _failed(body, common)
    blocked, reason = _output_error(steps)
    if reason in SAFETY_REASONS:
        return ParsedReply(outcome=Outcome.REFUSAL, raw_reason=reason, **common)
    if status in _CUT_STATUSES:
        return ParsedReply(outcome=Outcome.TRUNCATED, raw_reason=status, **common)
    if status not in _NORMAL_STATUSES:
        message = f"{REVISION}: the interaction is not finished ({named('status', status)})"
        return ParsedReply(
            outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
        )
    if blocked:
        # A model_output step that failed for a non-safety reason: nothing usable came back.
        message = f"{REVISION}: a model_output step carries an error ({named('reason', reason)})"
        return ParsedReply(
            outcome=Outcome.MALFORMED, raw_reason=reason or status, error_message=message, **common
        )
    calls = [step for step in steps if step.get("type") == "function_call"]
    if any(is_cut_off(text(step.get("arguments"))) for step in calls):
        return ParsedReply(outcome=Outcome.TRUNCATED, raw_reason=status, **common)
    if calls:
        return _proposals(body, calls, status, common)
    if status == "completed" and common["text"] is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, raw_reason=status, **common)
    message = f"{REVISION}: status {status!r} with neither text nor function calls"
    return ParsedReply(
        outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
    )


def _failed(body: Mapping[str, Any], common: dict[str, Any]) -> ParsedReply:
    """``status: failed``: the faults are in ``errors`` (``[{code, message}]``)."""
    errors = [*items(body.get("errors")), *items([body.get("error")])]
    messages = [m for m in (text(e.get("message")) for e in errors) if m]
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason="failed",
        retryable=any(code_retryable(e.get("code")) for e in errors),
        error_message="; ".join(messages) or "interaction failed",
        **{**common, "text": None},
    )


def _proposals(
    body: Mapping[str, Any],
    calls: list[Mapping[str, Any]],
    status: str | None,
    common: dict[str, Any],
) -> ParsedReply:
    if any(not text(step.get("name")) for step in calls):
        message = f"{REVISION}: a function_call step without a name"
        return ParsedReply(
            outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
        )
    seed = _payload_digest(body)
    proposed = tuple(_proposed_call(step, seed, position) for position, step in enumerate(calls))
    return ParsedReply(outcome=Outcome.TOOL_PROPOSALS, raw_reason=status, calls=proposed, **common)


def _proposed_call(step: Mapping[str, Any], seed: str, position: int) -> ProposedCall:
    """One call. ``function_call.id`` is required by the API; when a reply still lacks it, the ID
    is derived from the payload digest and the call's position, never sent back as a wire ID."""
    wire_id = text(step.get("id"))
    arguments, raw, error = _arguments(step.get("arguments"))
    return ProposedCall(
        call_id=wire_id or f"gi_{seed}_{position}",
        name=str(step.get("name")),
        arguments=arguments,
        raw_arguments=raw,
        arguments_error=error,
        synthesized=not wire_id,
    )


def _arguments(value: Any) -> tuple[dict[str, Any] | None, str | None, bool]:
    """``(arguments, raw text, error)``: an object as is; a string (assembled from stream deltas)
    decoded strictly; missing means no parameters; anything else is an argument error."""
    if value is None:
        return {}, None, False
    if isinstance(value, Mapping):
        return dict(value), _compact(value), False
    if isinstance(value, str):
        arguments, error = decode_arguments(value)
        return arguments, value, error
    return None, _compact(value), True


def _compact(value: Any) -> str | None:
    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return None


def _payload_digest(body: Mapping[str, Any]) -> str:
    """A stable digest of the reply (same payload, same digest), for made-up call IDs."""
    try:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        canonical = repr(body)
    return hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()[:20]


def _visible_text(steps: Sequence[Mapping[str, Any]]) -> str | None:
    """Concatenated ``text`` content of ``model_output`` steps (thoughts are never text)."""
    pieces = [
        text(part.get("text")) or ""
        for step in steps
        if step.get("type") == "model_output"
        for part in items(step.get("content"))
        if part.get("type") == "text"
    ]
    return joined(pieces)


def _output_error(steps: Sequence[Mapping[str, Any]]) -> tuple[bool, str | None]:
    """Whether a ``model_output`` step carries an ``error`` (a ``google.rpc.Status``), and the
    ``reason`` of its ``google.rpc.ErrorInfo`` detail (a safety reason first, if any)."""
    blocked = False
    reasons: list[str] = []
    for step in steps:
        error = step.get("error")
        if step.get("type") != "model_output" or not isinstance(error, Mapping) or not error:
            continue
        blocked = True
        for detail in items(error.get("details")):
            reason = text(detail.get("reason"))
            if str(detail.get("@type", "")).endswith("ErrorInfo") and reason:
                reasons.append(reason)
    first = reasons[0] if reasons else None
    return blocked, next((r for r in reasons if r in SAFETY_REASONS), first)


def signed(steps: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a model step carries a thought ``signature`` that must go back."""
    return any(
        text(step.get("type")) not in _INPUT_STEPS and text(step.get("signature")) for step in steps
    )
