"""Gemini's own request rules for a function-calling history, for the replay transport only.

The rules are in "Function calling with the Gemini API"
(https://ai.google.dev/gemini-api/docs/function-calling: a function response turn follows the
function call turn and answers each call) and "Thought signatures"
(https://ai.google.dev/gemini-api/docs/thought-signatures: signatures go back exactly as
received); the texts come from public error reports.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from providers.base import ParsedReply, ProposedCall, WireReply
from providers.gemini_generate.reply import call_name
from providers.payload import items, obj, text
from providers.rejections import (
    COUNT_MISMATCH,
    RESPONSE_NOT_AFTER_CALL,
    google_invalid_argument,
)

CALL_NOT_AFTER_USER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
_MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def request_error(*, request: Mapping[str, Any], previous: ParsedReply) -> WireReply | None:
    """Gemini's HTTP 400 ``INVALID_ARGUMENT`` for a history it rejects; ``None`` otherwise.

    Checked in order: every function response turn directly follows a function call turn
    with as many parts, every function call turn follows a user turn (the whole history);
    then for ``previous``: its model turn is the last model turn and comes back with the
    thought signatures of its ``functionCall`` parts, and the next turn answers each call
    exactly once (by ``id`` where the provider issued one, else by name in call order) and
    nothing else.
    """
    contents = items(request.get("contents"))
    problem = _turn_order_problem(contents)
    if problem is None and previous.calls:
        problem = _previous_reply_problem(contents, previous)
    return google_invalid_argument(problem) if problem else None


def _calls_of(content: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        obj(part.get("functionCall"))
        for part in items(content.get("parts"))
        if "functionCall" in part
    ]


def _responses_of(content: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        obj(part.get("functionResponse"))
        for part in items(content.get("parts"))
        if "functionResponse" in part
    ]


def _turn_order_problem(contents: Sequence[Mapping[str, Any]]) -> str | None:
    """Gemini's turn rules over the whole history, with its own texts."""
    for index, content in enumerate(contents):
        before = contents[index - 1] if index else None
        responses = _responses_of(content)
        if responses:
            calls = _calls_of(before) if before is not None else []
            if before is None or before.get("role") != "model" or not calls:
                return RESPONSE_NOT_AFTER_CALL
            if len(responses) != len(calls):
                return COUNT_MISMATCH
        if _calls_of(content) and (before is None or before.get("role") != "user"):
            return CALL_NOT_AFTER_USER
    return None


def _previous_reply_problem(
    contents: Sequence[Mapping[str, Any]], previous: ParsedReply
) -> str | None:
    """``previous``'s model turn must be the last model turn, replayed with its signatures, and
    answered by the turn right after it."""
    sent = items(list(previous.assistant_items))
    sent_calls = _calls_of(sent[0]) if sent else []
    turn_index = next(
        (i for i in range(len(contents) - 1, -1, -1) if contents[i].get("role") == "model"), None
    )
    if turn_index is None or _call_keys(_calls_of(contents[turn_index])) != _call_keys(sent_calls):
        return COUNT_MISMATCH  # the calls of the previous reply are not in the history: unanswered
    unsigned = _missing_signature(sent[0], contents[turn_index])
    if unsigned is not None:
        # ``position`` is read as the 1-based index of the model turn in ``contents``: every
        # public report of this text shows an even number, 2 for the first call of a chat.
        return _MISSING_SIGNATURE.format(name=unsigned, position=turn_index + 1)
    after = contents[turn_index + 1] if turn_index + 1 < len(contents) else {}
    responses = _responses_of(after)
    if len(responses) != len(sent_calls):
        return COUNT_MISMATCH
    return _pairing_problem(
        _as_replayed(previous.calls, _calls_of(contents[turn_index])), responses
    )


def _as_replayed(
    calls: Sequence[ProposedCall], replayed: Sequence[Mapping[str, Any]]
) -> list[ProposedCall]:
    """``calls`` as their replayed ``functionCall`` parts show them (same order, checked by
    :func:`_call_keys`): the API keeps no state, so what pairs is what the request holds. A
    client may give an issued call an ID of its own, as long as the call and its response
    carry the same one; a made-up ID is never sent, so such a call stays ID-less."""
    return [
        replace(
            call,
            call_id=call.call_id if call.synthesized else text(part.get("id")) or call.call_id,
            name=text(part.get("name")) or call.name,
        )
        for call, part in zip(calls, replayed, strict=True)
    ]


def _call_keys(calls: Sequence[Mapping[str, Any]]) -> list[tuple[Any, str]]:
    return [
        (call.get("name"), json.dumps(call.get("args"), sort_keys=True, default=repr))
        for call in calls
    ]


def _missing_signature(sent: Mapping[str, Any], replayed: Mapping[str, Any]) -> str | None:
    """Name of the first ``functionCall`` part that carried a ``thoughtSignature`` in the reply
    but comes back without that exact signature. Gemini 3 rejects such a history; signatures on
    other parts are recommended, not enforced (ai.google.dev/gemini-api/docs/thought-signatures).
    """
    sent_parts = [part for part in items(sent.get("parts")) if "functionCall" in part]
    replayed_parts = [part for part in items(replayed.get("parts")) if "functionCall" in part]
    for original, echoed in zip(sent_parts, replayed_parts, strict=False):
        signature = text(original.get("thoughtSignature"))
        if signature and echoed.get("thoughtSignature") != signature:
            return call_name(original) or ""
    return None


def _pairing_problem(
    calls: Sequence[ProposedCall], responses: Sequence[Mapping[str, Any]]
) -> str | None:
    """Each call answered exactly once: by ``id`` where the provider issued one, otherwise by
    name in call order. A response may not carry an ID the provider never issued (a
    synthesized one). Gemini's wording for these cases is not in any public report; the texts
    follow the style of its confirmed messages."""
    issued = {call.call_id for call in calls if not call.synthesized}
    answered = Counter(text(r.get("id")) for r in responses if text(r.get("id")))
    for response_id, times in answered.items():
        if response_id not in issued:
            return (
                "Please ensure that each function response id matches the id of a function "
                f"call in the function call turn; no function call has id {response_id}."
            )
        if times > 1:
            return (
                "Please ensure that each function call is answered by exactly one function "
                f"response; function call {response_id} has {times}."
            )
    unmatched_calls = [c for c in calls if c.synthesized or c.call_id not in answered]
    unnamed = [r for r in responses if not text(r.get("id"))]
    for position, (call, response) in enumerate(zip(unmatched_calls, unnamed, strict=False)):
        if response.get("name") != call.name:
            return (
                "Please ensure that function responses without an id follow the order of the "
                f"function calls; function response {position + 1} is named "
                f"{response.get('name')!r} but answers function call {call.name!r}."
            )
    return None
