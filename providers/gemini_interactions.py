"""Gemini Interactions API (``POST /v1beta/interactions``, ``steps`` schema) adapter.

Wire facts (step and delta types, statuses, stream events, field names) come from the
google-genai type files ``google/genai/_gaos/types/interactions/*.py`` (``Interaction``, the
``Step`` union, ``FunctionCallStep``, ``FunctionResultStep``, ``ThoughtStep``, ``StepStart`` /
``StepDelta`` / ``StepStop``, ``ErrorEvent``, ``CreateModelInteraction``), the May 2026 migration
guide (``outputs`` → ``steps``) and public error reports, collected in
``shared/reference/provider-wire-notes.md`` §5 and §6; classification follows
``shared/fixtures/README.md``. The older ``outputs`` schema is not spoken.
"""

from __future__ import annotations

import hashlib
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

REVISION = "gemini_interactions/2026-11-30.1"

#: ErrorInfo reasons of a ``model_output`` step that mean a safety block (fixtures README step 4).
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
#: Statuses of an interaction cut by a limit. ``requires_continuation`` (wire notes §5) and
#: ``continuation_required`` (newer SDK enum) mean the per-request token limit was hit, like
#: Gemini's ``CONTINUATION`` finish reason.
_CUT_STATUSES = frozenset(
    {"incomplete", "budget_exceeded", "requires_continuation", "continuation_required"}
)
#: Statuses of an interaction that ended normally (``requires_action``: calls are pending).
_NORMAL_STATUSES = frozenset({"completed", "requires_action"})
#: Statuses of a stream still running: not a stop reason.
_PROGRESS_STATUSES = frozenset({"in_progress", "queued"})
#: Step types that carry the client's input, never the model's output (echoed by some servers).
_INPUT_STEPS = frozenset({"user_input", "function_result"})
#: gRPC canonical codes DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE.
_RETRYABLE_GRPC_CODES = frozenset({4, 8, 13, 14})

# 400 texts (wire notes §4.2 for the shared Gemini backend, §5 for a thought step replayed without
# its signature; the unknown-call text is the one in the fixture http_400_invalid_argument; a
# function_result without ``name`` was answered "Invalid input received." in a public live report).
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
NOT_AFTER_CALL = (
    "Please ensure that function response turn comes immediately after a function call turn."
)
INVALID_ARGUMENT = "Request contains an invalid argument."
INVALID_INPUT = "Invalid input received."


def unknown_call_message(position: int, call_id: str | None) -> str:
    return (
        f"input[{position}].call_id '{call_id or ''}' does not match any function_call step "
        "of the previous interaction."
    )


class GeminiInteractionsAdapter:
    """Adapter for the Interactions API: ``function_call`` steps out, ``function_result`` in.

    The conversation is the stateless ``input`` step list: a ``user_input`` step, then every
    earlier reply's model steps replayed verbatim and in order (``thought`` steps with their
    ``signature`` included, which Gemini 3 requires for function calling), each reply followed by
    one ``function_result`` step per ``function_call.id``. Requests carry ``store: false``: the
    SDK's ``CreateModelInteraction`` has ``store`` ("whether to store the response and request
    for later retrieval"), and the notes' stateless alternative to ``previous_interaction_id``
    is exactly prior steps plus results in ``input``. Nothing then lives at the provider, so any
    worker can send the next request from the stored conversation and a replayed or retried
    request is self-contained.
    """

    provider = "google"
    family = "gemini_interactions"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"type": "user_input", "content": [{"type": "text", "text": user_input}]}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        # Tool declarations are flat in this API (no function_declarations wrapper).
        return {
            "model": model,
            "input": list(conversation),
            "tools": [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                }
                for tool in tools
            ],
            "store": False,
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
            return _parse_interaction(reply.body)
        return _malformed(f"a {reply.kind!r} reply without a JSON object body")

    def stream_assembler(self, *, max_argument_bytes: int) -> InteractionsStream:
        return InteractionsStream(max_argument_bytes)

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        return [*conversation, *reply.assistant_items]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        return [*conversation, *(_function_result(result) for result in results)]

    def request_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
        steps = _indexed(request.get("input"))
        calls = [(i, step) for i, step in steps if step.get("type") == "function_call"]
        results = [(i, step) for i, step in steps if step.get("type") == "function_result"]
        for position, result in results:
            if text(result.get("name")) is None or "result" not in result:
                return _invalid_argument(INVALID_INPUT)
            problem = _unmatched(position, result, calls)
            if problem is not None:
                return _invalid_argument(problem)
        problem = _pairing_problem(steps, results, previous) or _missing_signature(steps, previous)
        return _invalid_argument(problem) if problem else None


def _function_result(result: ToolResultMessage) -> dict[str, Any]:
    """One ``function_result`` step. ``name`` is always sent (the live API rejects a result
    without it); ``call_id`` is left out for a made-up ID, which the provider never issued."""
    step: dict[str, Any] = {"type": "function_result", "name": result.name}
    if not result.synthesized:
        step["call_id"] = result.call_id
    step["result"] = dict(result.model_result)
    if result.is_error:
        step["is_error"] = True
    return step


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
        return NOT_AFTER_CALL
    return None


def _pairing_problem(
    steps: list[tuple[int, Mapping[str, Any]]],
    results: list[tuple[int, Mapping[str, Any]]],
    previous: ParsedReply,
) -> str | None:
    """Every call of ``previous`` answered exactly once, right after that reply's steps."""
    if not previous.calls:
        return None
    end = max((p for p in _replayed(steps, previous) if p is not None), default=-1)
    if not _answered_once(results, previous, after=end):
        return COUNT_MISMATCH
    answers = [i for i, r in results if _answers(r, i, previous, after=end)]
    last = max(answers, default=end)
    misplaced = any(i < end for i in answers) or any(
        step.get("type") != "function_result" for i, step in steps if end < i <= last
    )
    return NOT_AFTER_CALL if misplaced else None


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
    """Where each step of ``previous`` sits in the input (last verbatim copy), or ``None``."""
    found: list[int | None] = []
    for item in previous.assistant_items:
        matches = [i for i, step in steps if step == item]
        found.append(matches[-1] if matches else None)
    return found


def _missing_signature(
    steps: list[tuple[int, Mapping[str, Any]]], previous: ParsedReply
) -> str | None:
    """Steps that carry a ``signature`` must come back unchanged, before the calls they preceded
    in the reply (wire notes §5)."""
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


def _invalid_argument(message: str) -> WireReply:
    """The Google 400 envelope (wire notes §4.2, §6)."""
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return WireReply(kind="http_error", http_status=400, body=body)


def _malformed(message: str, raw_reason: str | None = None) -> ParsedReply:
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=raw_reason,
        response_id=None,
        text=None,
        error_message=f"{REVISION}: {message}",
    )


def _code_text(code: Any) -> str | None:
    """An error code as the payload gave it: a string, or an integer written out."""
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    return text(code)


def _code_retryable(code: Any) -> bool:
    """Whether an error code inside a 200 names a server-side or capacity problem: Google status
    names, HTTP statuses, or gRPC canonical code numbers."""
    if isinstance(code, int) and not isinstance(code, bool):
        return status_is_retryable(code) if code >= 100 else code in _RETRYABLE_GRPC_CODES
    return code_is_retryable(text(code))


def _parse_http_error(reply: WireReply) -> ParsedReply:
    error = obj(obj(reply.body).get("error"))
    status = text(error.get("status"))
    retryable = status_is_retryable(reply.http_status, status)
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=status,
        response_id=None,
        text=None,
        retryable=retryable,
        retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
        error_message=text(error.get("message")) or f"HTTP {reply.http_status}",
    )


def _parse_interaction(body: Mapping[str, Any]) -> ParsedReply:
    steps = items(body.get("steps"))
    status = text(body.get("status"))
    common: dict[str, Any] = {
        "response_id": text(body.get("id")),
        "text": _visible_text(steps),
        "usage": _usage(body.get("usage")),
        "continuation": frozenset({"thought_signature"} if _signed(steps) else ()),
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
        message = f"{REVISION}: interaction status {status!r} is not a finished state"
        return ParsedReply(
            outcome=Outcome.MALFORMED, raw_reason=status, error_message=message, **common
        )
    if blocked:
        # A model_output step that failed for a non-safety reason: nothing usable came back.
        message = f"{REVISION}: a model_output step carries an error ({reason})"
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
        retryable=any(_code_retryable(e.get("code")) for e in errors),
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


def _signed(steps: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a model step carries a thought ``signature`` that must go back."""
    return any(
        text(step.get("type")) not in _INPUT_STEPS and text(step.get("signature")) for step in steps
    )


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input_tokens=count(usage.get("total_input_tokens")),
        output_tokens=count(usage.get("total_output_tokens"))
        + count(usage.get("total_thought_tokens")),
    )


class _Slot:
    """One streamed step: the ``step.start`` payload plus what its deltas brought."""

    def __init__(self, step: Mapping[str, Any], max_bytes: int) -> None:
        self.step = dict(step)
        self.arguments = ArgumentBuffer(max_bytes)
        self.text: list[str] = []
        self.signature: list[str] = []

    @property
    def kind(self) -> str | None:
        return text(self.step.get("type"))

    def assembled(self) -> dict[str, Any]:
        step = dict(self.step)
        if self.kind == "function_call" and (self.arguments.overflowed or self.arguments.text()):
            raw = self.arguments.text()
            value, error = decode_arguments(raw)
            # A decoded object is replayed as an object (the API rejects string arguments);
            # anything else stays raw so the call carries an argument error or reads as cut.
            step["arguments"] = raw if error or self.arguments.overflowed else value
        if self.text:
            step["content"] = [
                *items(step.get("content")),
                {"type": "text", "text": "".join(self.text)},
            ]
        if self.signature:
            step["signature"] = "".join(self.signature)
        return step


#: Step type implied by a delta that arrives for an index no ``step.start`` opened.
_DELTA_STEP = {
    "arguments_delta": "function_call",
    "text": "model_output",
    "thought_signature": "thought",
    "thought_summary": "thought",
}


class InteractionsStream:
    """Assembles an Interactions SSE stream (wire notes §5).

    Steps are keyed by ``index``; deltas of several steps may interleave, and a ``step.start``
    at an index already used opens a new step there. A call's arguments are the joined
    ``arguments_delta.arguments`` strings, or the ``arguments`` object of ``step.start`` when no
    delta came; ``thought_signature`` deltas give the thought step's ``signature``. Only
    ``interaction.completed`` completes the stream; an ``error`` event is an API failure.
    """

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_bytes = max_argument_bytes
        self._slots: list[_Slot] = []
        self._by_index: dict[Any, _Slot] = {}
        self._text: list[str] = []
        self._response_id: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._reported: str | None = None
        self._terminal: Mapping[str, Any] | None = None
        self._error: Mapping[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> str | None:
        data = obj(event.get("data"))
        kind = text(data.get("event_type")) or text(event.get("event"))
        self._note(data)
        if kind == "error":
            self._error = obj(data.get("error"))
        elif kind == "interaction.completed":
            self._terminal = obj(data.get("interaction"))
        elif kind == "step.start":
            return self._start(data)
        elif kind == "step.delta":
            self._delta(data)
        return None

    def _note(self, data: Mapping[str, Any]) -> None:
        """Reply ID (first seen), latest cumulative usage and latest reported status."""
        interaction = obj(data.get("interaction"))
        self._response_id = (
            self._response_id or text(interaction.get("id")) or text(data.get("interaction_id"))
        )
        for usage in (interaction.get("usage"), data.get("usage")):
            if isinstance(usage, Mapping):
                self._usage = usage
        status = text(interaction.get("status")) or text(data.get("status"))
        if status and status not in _PROGRESS_STATUSES:
            self._reported = status

    @staticmethod
    def _index(data: Mapping[str, Any]) -> int | None:
        index = data.get("index")
        return index if isinstance(index, int) and not isinstance(index, bool) else None

    def _open(self, index: int | None, step: Mapping[str, Any]) -> _Slot:
        slot = _Slot(step, self._max_bytes)
        self._slots.append(slot)
        self._by_index[index] = slot
        return slot

    def _start(self, data: Mapping[str, Any]) -> str | None:
        slot = self._open(self._index(data), obj(data.get("step")))
        return text(slot.step.get("name")) if slot.kind == "function_call" else None

    def _delta(self, data: Mapping[str, Any]) -> None:
        delta = obj(data.get("delta"))
        kind = text(delta.get("type"))
        index = self._index(data)
        slot = self._by_index.get(index)
        if slot is None:
            implied = _DELTA_STEP.get(kind or "")
            slot = self._open(index, {"type": implied} if implied else {})
        if kind == "arguments_delta":
            slot.arguments.add(delta.get("arguments"))
        elif kind == "text" and slot.kind == "model_output":
            piece = text(delta.get("text")) or ""
            slot.text.append(piece)
            self._text.append(piece)
        elif kind == "thought_signature":
            slot.signature.append(text(delta.get("signature")) or "")

    def finish(self) -> ParsedReply:
        if self._error is not None:
            code = self._error.get("code")
            return ParsedReply(
                outcome=Outcome.API_FAILURE,
                raw_reason=_code_text(code),
                response_id=self._response_id,
                text=None,
                usage=_usage(self._usage),
                retryable=_code_retryable(code),
                error_message=text(self._error.get("message")) or "stream error event",
            )
        steps = [slot.assembled() for slot in self._slots]
        if self._terminal is None:
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=self._reported,
                response_id=self._response_id,
                text=joined(self._text),
                usage=_usage(self._usage),
                continuation=frozenset({"thought_signature"} if _signed(steps) else ()),
            )
        body = {
            **self._terminal,
            "id": self._response_id,
            "steps": steps or items(self._terminal.get("steps")),
            "usage": self._usage,
        }
        return _parse_interaction(body)
