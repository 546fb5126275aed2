"""The Interactions API's own request rules, for the replay transport only.

The rules are in the Interactions guide's "Function calling"
(https://ai.google.dev/gemini-api/docs/interactions/function-calling: a ``function_result`` step
per ``function_call`` id, thought steps sent back with their signatures); the texts come from
public error reports (the function-calling texts are the ones the Gemini backend also sends for
``generateContent``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from providers.base import ParsedReply, WireReply
from providers.payload import obj, text
from providers.rejections import (
    COUNT_MISMATCH,
    RESPONSE_NOT_AFTER_CALL,
    google_invalid_argument,
)

# Public error reports: a thought step replayed without its signature is answered with the
# generic invalid-argument text, a function_result without ``name`` with "Invalid input
# received."; the unknown-call text is written in the API's style (``input[N]`` paths).
INVALID_ARGUMENT = "Request contains an invalid argument."
INVALID_INPUT = "Invalid input received."


def unknown_call_message(position: int, call_id: str | None) -> str:
    return (
        f"input[{position}].call_id '{call_id or ''}' does not match any function_call step "
        "of the previous interaction."
    )


def request_error(*, request: Mapping[str, Any], previous: ParsedReply) -> WireReply | None:
    """The API's 400 when a ``function_result`` step lacks ``name`` or ``result``, answers no
    earlier call, leaves a call of ``previous`` unanswered or answered twice, is misplaced, or
    a signed step of ``previous`` does not come back unchanged before its calls; ``None`` when
    it is acceptable."""
    steps = _indexed(request.get("input"))
    calls = [(i, step) for i, step in steps if step.get("type") == "function_call"]
    results = [(i, step) for i, step in steps if step.get("type") == "function_result"]
    for position, result in results:
        if text(result.get("name")) is None or "result" not in result:
            return google_invalid_argument(INVALID_INPUT)
        problem = _unmatched(position, result, calls)
        if problem is not None:
            return google_invalid_argument(problem)
    problem = _pairing_problem(steps, results, previous) or _missing_signature(steps, previous)
    return google_invalid_argument(problem) if problem else None


def _indexed(value: Any) -> list[tuple[int, Mapping[str, Any]]]:
    """The JSON objects of an ``input`` list with their positions in it."""
    if not isinstance(value, list):
        return []
    return [(i, step) for i, step in enumerate(value) if isinstance(step, Mapping)]


def _unmatched(
    position: int,
    result: Mapping[str, Any],
    calls: list[tuple[int, Mapping[str, Any]]],
) -> str | None:
    """A result must answer a ``function_call`` step with the same ID and name, sent before it.
    A result without ``call_id`` can only answer a call that came without an ID."""
    call_id = text(result.get("call_id"))
    name = result.get("name")
    found = [i for i, call in calls if text(call.get("id")) == call_id and call.get("name") == name]
    if not found:
        return unknown_call_message(position, call_id)
    if all(i > position for i in found):
        return RESPONSE_NOT_AFTER_CALL
    return None


def _pairing_problem(
    steps: list[tuple[int, Mapping[str, Any]]],
    results: list[tuple[int, Mapping[str, Any]]],
    previous: ParsedReply,
) -> str | None:
    """Every call of ``previous`` answered exactly once, right after that reply's steps."""
    if not previous.calls:
        return None
    previous = _as_replayed(steps, previous)
    end = max((p for p in _replayed(steps, previous) if p is not None), default=-1)
    if not _answered_once(results, previous, after=end):
        return COUNT_MISMATCH
    answers = [i for i, r in results if _answers(r, i, previous, after=end)]
    last = max(answers, default=end)
    misplaced = any(i < end for i in answers) or any(
        step.get("type") != "function_result" for i, step in steps if end < i <= last
    )
    return RESPONSE_NOT_AFTER_CALL if misplaced else None


def _answered_once(
    results: list[tuple[int, Mapping[str, Any]]], previous: ParsedReply, *, after: int
) -> bool:
    """Wire IDs are counted over the whole input (they are unique); calls without one are
    counted by name among the ID-less results after the reply's steps."""
    by_id = Counter(text(r.get("call_id")) for _, r in results)
    if any(by_id[c.call_id] != 1 for c in previous.calls if not c.synthesized):
        return False
    expected = Counter(c.name for c in previous.calls if c.synthesized)
    given = Counter(
        r.get("name") for i, r in results if i > after and text(r.get("call_id")) is None
    )
    return all(given[name] == n for name, n in expected.items())


def _answers(
    result: Mapping[str, Any], position: int, previous: ParsedReply, *, after: int
) -> bool:
    """Whether ``result`` answers one of the calls of ``previous``."""
    call_id = text(result.get("call_id"))
    if call_id is None:
        named = any(c.synthesized and c.name == result.get("name") for c in previous.calls)
        return named and position > after
    return any(not c.synthesized and c.call_id == call_id for c in previous.calls)


def _replayed(
    steps: list[tuple[int, Mapping[str, Any]]], previous: ParsedReply
) -> list[int | None]:
    """Where each step of ``previous`` sits in the input (last verbatim copy, else the last copy
    of a call under another ID), or ``None``."""
    found: list[int | None] = []
    for item in previous.assistant_items:
        matches = [i for i, step in steps if step == item]
        matches = matches or [i for i, step in steps if _renamed_call(step, item)]
        found.append(matches[-1] if matches else None)
    return found


def _renamed_call(step: Mapping[str, Any], item: Any) -> bool:
    """``step`` replays the ``function_call`` step ``item`` under an ID of the client's own
    (the API keeps no state, so what pairs is what the input holds); only used when no step
    replays ``item`` unchanged."""
    calls = step.get("type") == "function_call" and obj(item).get("type") == "function_call"
    return calls and {**step, "id": None} == {**obj(item), "id": None}


def _as_replayed(steps: list[tuple[int, Mapping[str, Any]]], previous: ParsedReply) -> ParsedReply:
    """``previous`` with each issued call under the ID its replayed step carries."""
    where = _replayed(steps, previous)
    by_position = dict(steps)
    renames: dict[str, str] = {}
    for k, item in enumerate(previous.assistant_items):
        old = text(obj(item).get("id")) if obj(item).get("type") == "function_call" else None
        at = where[k]
        new = text(by_position[at].get("id")) if old and at is not None else None
        if old and new and new != old:
            renames[old] = new
    calls = tuple(replace(c, call_id=renames.get(c.call_id, c.call_id)) for c in previous.calls)
    return replace(previous, calls=calls)


def _missing_signature(
    steps: list[tuple[int, Mapping[str, Any]]], previous: ParsedReply
) -> str | None:
    """Steps that carry a ``signature`` must come back unchanged, before the calls they preceded
    in the reply."""
    reply = list(previous.assistant_items)
    where = _replayed(steps, previous)
    for k, item in enumerate(reply):
        if not (isinstance(item, Mapping) and text(item.get("signature"))):
            continue
        at = where[k]
        if at is None:
            return INVALID_ARGUMENT
        later_calls = [
            where[m]
            for m in range(k + 1, len(reply))
            if isinstance(reply[m], Mapping) and reply[m].get("type") == "function_call"
        ]
        if any(p is not None and p < at for p in later_calls):
            return INVALID_ARGUMENT
    return None
