"""Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` adapter (REST, camelCase).

Wire facts (field names, finish reasons, stream chunks, pairing rules, 400 texts) come from the
google-genai type and client files (``google/genai/types.py``, ``models.py``, ``chats.py``,
``_api_client.py``) and the public error reports collected in
``shared/reference/provider-wire-notes.md`` §4 and §6; classification follows
``shared/fixtures/README.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

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

REVISION = "gemini_generate/2026-11-30.1"

#: Finish reasons that mean the output was blocked (fixtures README step 4): the safety family
#: and their ``IMAGE_*`` variants (``FinishReason`` in google-genai ``types.py``).
_BLOCKED = frozenset({"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION"})
REFUSAL_REASONS = _BLOCKED | {f"IMAGE_{reason}" for reason in _BLOCKED}
#: Finish reasons that mean a limit cut the reply (step 5).
TRUNCATED_REASONS = frozenset({"MAX_TOKENS", "CONTINUATION"})
#: The one normal ending (step 8/9). Every other reason, known or not, is MALFORMED (step 7).
NORMAL_REASON = "STOP"

#: Gemini's 400 texts for a broken function-calling history (public reports, wire notes §4.2).
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
RESPONSE_NOT_AFTER_CALL = (
    "Please ensure that function response turn comes immediately after a function call turn."
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


class GeminiGenerateAdapter:
    """Adapter for ``generateContent``: ``functionCall`` parts out, ``functionResponse`` parts in.

    The conversation is the request's ``contents`` list of ``Content`` objects
    (``{"role": "user" | "model", "parts": [Part, ...]}``): the user's text, then each model
    turn replayed verbatim (every part, ``thoughtSignature`` included), each followed by one
    ``role: "user"`` content holding one ``functionResponse`` part per ``functionCall`` part, in
    call order (google-genai ``chats.py`` builds history the same way).
    """

    provider = "google"
    family = "gemini_generate"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"role": "user", "parts": [{"text": user_input}]}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        """The REST body of ``POST /v1beta/models/{model}:generateContent``.

        The model is part of the URL path, not of the body (google-genai ``models.py``
        ``_GenerateContentParameters_to_mldev`` binds it to ``_url.model``), so the transport
        takes it from the operation. Parameters go in ``parametersJsonSchema`` (JSON Schema,
        "mutually exclusive with ``parameters``", google-genai ``types.FunctionDeclaration``):
        the registry's schemas set ``additionalProperties: false``, which the OpenAPI-subset
        ``parameters`` field rejects with ``Invalid JSON payload received. Unknown name
        "additionalProperties"``. ``toolConfig`` is sent only with tools: a calling config
        without declarations is itself an invalid request.
        """
        body: dict[str, Any] = {"contents": list(conversation)}
        if tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": tool.name,
                            "description": tool.description,
                            "parametersJsonSchema": dict(tool.parameters),
                        }
                        for tool in tools
                    ]
                }
            ]
            body["toolConfig"] = {"functionCallingConfig": {"mode": "AUTO"}}
        return body

    def parse_reply(
        self, reply: WireReply, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ParsedReply:
        if reply.kind == "http_error":
            return _parse_http_error(reply)
        if reply.kind == "stream":
            # ``items``: a hostile ``events`` value that is not a list reads as no events.
            return assemble(
                self.stream_assembler(max_argument_bytes=max_argument_bytes), items(reply.events)
            )
        if isinstance(reply.body, Mapping):
            return _parse_response(reply.body, max_argument_bytes)
        return _malformed(f"a {reply.kind!r} reply without a JSON object body")

    def stream_assembler(self, *, max_argument_bytes: int) -> GenerateStream:
        return GenerateStream(max_argument_bytes)

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        return [*conversation, *reply.assistant_items]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        """One ``role: "user"`` content with one ``functionResponse`` part per result.

        ``response`` is the model-facing envelope as is: an error envelope carries an ``error``
        key, which Gemini reads as error details ("Use "output" key to specify function output
        and "error" key to specify error details", ``types.FunctionResponse``); the API has no
        separate error flag. The provider's ``id`` is echoed; a synthesized ID is left out, so
        Gemini pairs that response by name and order. Parts follow the order of the
        ``functionCall`` parts of the last model turn.
        """
        if not results:
            return list(conversation)
        ordered = _in_call_order(results, _last_model_calls(conversation))
        parts = [{"functionResponse": _function_response(result)} for result in ordered]
        return [*conversation, {"role": "user", "parts": parts}]

    def request_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
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
        return _invalid_argument(problem) if problem else None


# --- reading replies -------------------------------------------------------------------------


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


def _failure_in_200(error: Mapping[str, Any], usage: Usage | None) -> ParsedReply:
    """A Google error envelope inside a 200: a stream chunk ``{"error": {...}}`` (google-genai
    ``_api_client.py`` ``request_streamed`` raises ``APIError`` on it). ``error.status`` names
    the problem."""
    status = text(error.get("status"))
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=status,
        response_id=None,
        text=None,
        usage=usage,
        retryable=code_is_retryable(status),
        error_message=text(error.get("message")) or "error reported inside the reply",
    )


def _malformed(message: str, raw_reason: str | None = None) -> ParsedReply:
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=raw_reason,
        response_id=None,
        text=None,
        error_message=f"{REVISION}: {message}",
    )


def _parse_response(body: Mapping[str, Any], max_argument_bytes: int) -> ParsedReply:
    """Classify one ``GenerateContentResponse`` (fixtures README steps 2, 4, 5, 7-10).

    Only ``candidates[0]`` is read: the loop never asks for more than one candidate.
    """
    usage = _usage(body.get("usageMetadata"))
    if isinstance(body.get("error"), Mapping):
        return _failure_in_200(obj(body.get("error")), usage)
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
        "text": _visible_text(parts),
        "usage": usage,
        "continuation": frozenset({"thought_signature"} if _signed(parts) else ()),
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
        if not all(_call_name(part) for _, part in call_parts):
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


def _visible_text(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """``text`` parts not marked ``thought: true``, concatenated."""
    return joined(
        [
            part["text"]
            for part in parts
            if isinstance(part.get("text"), str) and part.get("thought") is not True
        ]
    )


def _signed(parts: Sequence[Mapping[str, Any]]) -> bool:
    return any(text(part.get("thoughtSignature")) for part in parts)


def _call_name(part: Mapping[str, Any]) -> str | None:
    call = part.get("functionCall")
    name = text(call.get("name")) if isinstance(call, Mapping) else None
    return name or None


def _usage(metadata: Any) -> Usage | None:
    """``promptTokenCount`` in; ``candidatesTokenCount + thoughtsTokenCount`` out (a missing
    count is 0). ``None`` when the reply carries none of these counts."""
    fields = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
    if not isinstance(metadata, Mapping) or not any(key in metadata for key in fields):
        return None
    return Usage(
        input_tokens=count(metadata.get("promptTokenCount")),
        output_tokens=count(metadata.get("candidatesTokenCount"))
        + count(metadata.get("thoughtsTokenCount")),
    )


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
        name=_call_name(part) or "",
        arguments=arguments,
        raw_arguments=raw,
        arguments_error=error,
        synthesized=wire_id is None,
    )


class GenerateStream:
    """Assembles a ``streamGenerateContent?alt=sse`` stream (wire notes §4.3).

    Every event is one ``GenerateContentResponse`` chunk (no ``event:`` lines, no ``[DONE]``).
    A ``functionCall`` part arrives whole in one chunk (the Gemini API does not stream
    arguments), so parts are collected across chunks in order, each kept verbatim for replay.
    The stream is complete once a chunk's candidate carries ``finishReason`` or a chunk carries
    ``promptFeedback.blockReason``; ``responseId`` comes from the first chunk that has one,
    usage from the last chunk with ``usageMetadata``. A chunk ``{"error": {...}}`` is a failure.
    """

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_bytes = max_argument_bytes
        self._parts: list[dict[str, Any]] = []
        self._saw_candidate = False
        self._finish_reason: str | None = None
        self._finish_message: str | None = None
        self._block: Mapping[str, Any] | None = None
        self._response_id: str | None = None
        self._usage_metadata: Mapping[str, Any] | None = None
        self._error: Mapping[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> str | None:
        data = obj(event.get("data"))
        if isinstance(data.get("error"), Mapping):
            self._error = obj(data.get("error"))
            return None
        self._response_id = self._response_id or text(data.get("responseId"))
        if isinstance(data.get("usageMetadata"), Mapping):
            self._usage_metadata = obj(data.get("usageMetadata"))
        feedback = obj(data.get("promptFeedback"))
        if text(feedback.get("blockReason")):
            self._block = feedback
        candidates = items(data.get("candidates"))
        if not candidates:
            return None
        self._saw_candidate = True
        candidate = candidates[0]
        started: str | None = None
        for part in items(obj(candidate.get("content")).get("parts")):
            self._parts.append(dict(part))
            if "functionCall" in part and started is None:
                started = _call_name(part)
        reason = text(candidate.get("finishReason"))
        if reason:
            self._finish_reason = reason
            self._finish_message = text(candidate.get("finishMessage"))
        return started

    def finish(self) -> ParsedReply:
        usage = _usage(self._usage_metadata)
        if self._error is not None:
            return _failure_in_200(self._error, usage)
        if self._finish_reason is None and self._block is None:
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=None,
                response_id=self._response_id,
                text=_visible_text(self._parts),
                usage=usage,
                continuation=frozenset({"thought_signature"} if _signed(self._parts) else ()),
                error_message=f"{REVISION}: the stream ended before a finish reason",
            )
        body: dict[str, Any] = {"candidates": []}
        if self._saw_candidate:
            candidate: dict[str, Any] = {
                "content": {"role": "model", "parts": self._parts},
                "index": 0,
            }
            if self._finish_reason is not None:
                candidate["finishReason"] = self._finish_reason
            if self._finish_message is not None:
                candidate["finishMessage"] = self._finish_message
            body["candidates"] = [candidate]
        if self._block is not None:
            body["promptFeedback"] = dict(self._block)
        if self._usage_metadata is not None:
            body["usageMetadata"] = dict(self._usage_metadata)
        if self._response_id is not None:
            body["responseId"] = self._response_id
        return _parse_response(body, self._max_bytes)


# --- writing results -------------------------------------------------------------------------


def _last_model_calls(conversation: Sequence[Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """``(part position, functionCall)`` of the last ``role: "model"`` content, in order."""
    for content in reversed(items(list(conversation))):
        if content.get("role") == "model":
            return [
                (index, obj(part.get("functionCall")))
                for index, part in enumerate(items(content.get("parts")))
                if "functionCall" in part
            ]
    return []


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


def _in_call_order(
    results: Sequence[ToolResultMessage], calls: Sequence[tuple[int, Mapping[str, Any]]]
) -> list[ToolResultMessage]:
    """``results`` reordered to follow ``calls``: a call with a provider ``id`` takes the result
    with that ID; one without takes the synthesized result made up for its part position (see
    :func:`synthesized_call_id`), else the next synthesized result of the same name. Results
    that match no call keep their order at the end."""
    remaining = list(results)
    ordered: list[ToolResultMessage] = []
    for position, call in calls:
        wire_id = text(call.get("id"))
        if wire_id:
            found = [r for r in remaining if not r.synthesized and r.call_id == wire_id]
        else:
            named = [r for r in remaining if r.synthesized and r.name == call.get("name")]
            suffix = f"_{position}"
            found = [r for r in named if r.call_id.endswith(suffix)] + named
        if found:
            ordered.append(found[0])
            remaining.remove(found[0])
    return [*ordered, *remaining]


def _function_response(result: ToolResultMessage) -> dict[str, Any]:
    response: dict[str, Any] = {"name": result.name, "response": dict(result.model_result)}
    if not result.synthesized:
        response = {"id": result.call_id, **response}
    return response


# --- checking requests -----------------------------------------------------------------------


def _invalid_argument(message: str) -> WireReply:
    """Gemini's 400 envelope (wire notes §4.2 and §6)."""
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return WireReply(kind="http_error", http_status=400, body=body)


def _turn_order_problem(contents: Sequence[Mapping[str, Any]]) -> str | None:
    """Gemini's turn rules over the whole history, with its own texts (wire notes §4.2)."""
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
    return _pairing_problem(previous.calls, responses)


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
            return _call_name(original) or ""
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
