"""Assembling a streamed interaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.adapter import api_failure
from providers.arguments import decode_arguments
from providers.base import Outcome, ParsedReply
from providers.gemini_interactions.reply import (
    PROGRESS_STATUSES,
    USAGE,
    code_retryable,
    code_text,
    parse_interaction,
    signed,
)
from providers.payload import integer, items, joined, obj, text
from providers.streaming import ArgumentBuffer


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
    """Assembles an Interactions SSE stream ("Streaming" in the Interactions guide).

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
        if status and status not in PROGRESS_STATUSES:
            self._reported = status

    def _open(self, index: int | None, step: Mapping[str, Any]) -> _Slot:
        slot = _Slot(step, self._max_bytes)
        self._slots.append(slot)
        self._by_index[index] = slot
        return slot

    def _start(self, data: Mapping[str, Any]) -> str | None:
        slot = self._open(integer(data.get("index")), obj(data.get("step")))
        return text(slot.step.get("name")) if slot.kind == "function_call" else None

    def _delta(self, data: Mapping[str, Any]) -> None:
        delta = obj(data.get("delta"))
        kind = text(delta.get("type"))
        index = integer(data.get("index"))
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
            return api_failure(
                raw_reason=code_text(code),
                response_id=self._response_id,
                usage=USAGE.read(self._usage),
                retryable=code_retryable(code),
                error_message=text(self._error.get("message")) or "stream error event",
            )
        steps = [slot.assembled() for slot in self._slots]
        if self._terminal is None:
            return ParsedReply(
                outcome=Outcome.TRUNCATED,
                raw_reason=self._reported,
                response_id=self._response_id,
                text=joined(self._text),
                usage=USAGE.read(self._usage),
                continuation=frozenset({"thought_signature"} if signed(steps) else ()),
            )
        body = {
            **self._terminal,
            "id": self._response_id,
            "steps": steps or items(self._terminal.get("steps")),
            "usage": self._usage,
        }
        return parse_interaction(body)
