"""Assembling a streamed generateContent reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.base import Outcome, ParsedReply
from providers.gemini_generate.reply import (
    REVISION,
    USAGE,
    call_name,
    failure_in_200,
    parse_response,
    signed,
    visible_text,
)
from providers.payload import items, obj, text


class GenerateStream:
    """Assembles a ``streamGenerateContent?alt=sse`` stream (API reference "Generating content",
    ``models.streamGenerateContent``).

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
                started = call_name(part)
        reason = text(candidate.get("finishReason"))
        if reason:
            self._finish_reason = reason
            self._finish_message = text(candidate.get("finishMessage"))
        return started

    def finish(self) -> ParsedReply:
        usage = USAGE.read(self._usage_metadata)
        if self._error is not None:
            return failure_in_200(self._error, usage)
        if self._finish_reason is None and self._block is None:
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=None,
                response_id=self._response_id,
                text=visible_text(self._parts),
                usage=usage,
                continuation=frozenset({"thought_signature"} if signed(self._parts) else ()),
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
        return parse_response(body, self._max_bytes)
