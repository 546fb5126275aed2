"""OpenAI Responses API (``POST /v1/responses``) adapter.

Wire facts (field names, statuses, pairing rules, 400 texts) come from the openai-python type
files ``src/openai/types/responses/*.py`` and the public error reports collected in
``shared/reference/provider-wire-notes.md`` §1; classification follows
``shared/fixtures/README.md``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from providers.arguments import decode_arguments, is_cut_off
from providers.base import (
    Outcome,
    ParsedReply,
    ProposedCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    WireReply,
)
from providers.errors import code_is_retryable, retry_after_seconds, status_is_retryable

REVISION = "openai_responses/2026-11-30.1"


class OpenAIResponsesAdapter:
    """Adapter for the Responses API: ``function_call`` items out, ``function_call_output`` in.

    The conversation is the Responses ``input`` list: the user message, then every earlier
    ``output`` list replayed verbatim and in order (reasoning items included, as the API requires
    for reasoning models), each followed by one ``function_call_output`` per ``call_id``.
    """

    provider = "openai"
    family = "openai_responses"
    revision = REVISION

    def start_conversation(self, *, user_input: str) -> list[Any]:
        return [{"type": "message", "role": "user", "content": user_input}]

    def build_request(
        self, *, model: str, conversation: Sequence[Any], tools: Sequence[ToolDeclaration]
    ) -> dict[str, Any]:
        # store=False keeps no state at the provider; the encrypted reasoning content lets the
        # next request replay reasoning items without it.
        return {
            "model": model,
            "input": list(conversation),
            "tools": [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in tools
            ],
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }

    def parse_reply(self, reply: WireReply) -> ParsedReply:
        if reply.kind == "http_error":
            return _parse_http_error(reply)
        if reply.kind == "response" and isinstance(reply.body, Mapping):
            return _parse_response(reply.body)
        return ParsedReply(
            outcome=Outcome.MALFORMED,
            raw_reason=None,
            response_id=None,
            text=None,
            error_message=f"{REVISION} cannot read a reply of kind {reply.kind!r}",
        )

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        return [*conversation, *reply.assistant_items]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        outputs = [
            {
                "type": "function_call_output",
                "call_id": result.call_id,
                "output": json.dumps(dict(result.model_result), separators=(",", ":")),
            }
            for result in results
        ]
        return [*conversation, *outputs]

    def pairing_error(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None:
        items = [item for item in request.get("input", []) if isinstance(item, Mapping)]
        known_calls = {item.get("call_id") for item in items if item.get("type") == "function_call"}
        outputs = Counter(
            item.get("call_id") for item in items if item.get("type") == "function_call_output"
        )
        for call_id in outputs:
            if call_id not in known_calls:
                return _invalid_request(
                    f"No tool call found for function call output with call_id {call_id}."
                )
        for call in previous.calls:
            if outputs[call.call_id] == 0:
                return _invalid_request(f"No tool output found for function call {call.call_id}.")
            if outputs[call.call_id] > 1:
                return _invalid_request(
                    f"Duplicate function_call_output for call_id {call.call_id}."
                )
        return None


def _invalid_request(message: str) -> WireReply:
    """The 400 envelope the Responses API sends for a broken input list (wire notes §1.4)."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    return WireReply(kind="http_error", http_status=400, body=body)


def _parse_http_error(reply: WireReply) -> ParsedReply:
    error = reply.body.get("error") if isinstance(reply.body, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code") or error.get("type")
    retryable = status_is_retryable(reply.http_status, code)
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=code,
        response_id=None,
        text=None,
        retryable=retryable,
        retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
        error_message=error.get("message") or f"HTTP {reply.http_status}",
    )


def _parse_response(body: Mapping[str, Any]) -> ParsedReply:
    output = [item for item in body.get("output") or [] if isinstance(item, Mapping)]
    status = body.get("status")
    text, refused = _visible_text(output)
    common: dict[str, Any] = {
        "response_id": body.get("id"),
        "text": text,
        "usage": _usage(body.get("usage")),
        "continuation": frozenset({"reasoning"} if _has(output, "reasoning") else ()),
        "assistant_items": tuple(output),
    }
    if status == "failed":
        error = body.get("error") or {}
        code = error.get("code")
        return ParsedReply(
            outcome=Outcome.API_FAILURE,
            raw_reason=code,
            retryable=code_is_retryable(code),
            error_message=error.get("message"),
            **{**common, "text": None},
        )
    if status == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        outcome = Outcome.REFUSAL if reason == "content_filter" else Outcome.TRUNCATED
        return ParsedReply(outcome=outcome, raw_reason=reason, **common)
    if status != "completed":
        return ParsedReply(outcome=Outcome.MALFORMED, raw_reason=status, **common)
    if refused:
        return ParsedReply(outcome=Outcome.REFUSAL, raw_reason=status, **common)
    calls = [item for item in output if item.get("type") == "function_call"]
    if any(is_cut_off(item.get("arguments")) for item in calls):
        return ParsedReply(outcome=Outcome.TRUNCATED, raw_reason=status, **common)
    if calls:
        proposed = tuple(_proposed_call(item) for item in calls)
        return ParsedReply(
            outcome=Outcome.TOOL_PROPOSALS, raw_reason=status, calls=proposed, **common
        )
    if text is not None:
        return ParsedReply(outcome=Outcome.FINAL_TEXT, raw_reason=status, **common)
    return ParsedReply(outcome=Outcome.MALFORMED, raw_reason=status, **common)


def _proposed_call(item: Mapping[str, Any]) -> ProposedCall:
    raw = item.get("arguments")
    arguments, error = decode_arguments(raw)
    return ProposedCall(
        call_id=str(item.get("call_id")),
        name=str(item.get("name")),
        arguments=arguments,
        raw_arguments=raw,
        arguments_error=error,
        item_id=item.get("id"),
    )


def _visible_text(output: Sequence[Mapping[str, Any]]) -> tuple[str | None, bool]:
    """Concatenated ``output_text`` and ``refusal`` parts of message items, and whether any part
    was a refusal."""
    pieces: list[str] = []
    refused = False
    for item in output:
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                pieces.append(part.get("text") or "")
            elif part.get("type") == "refusal":
                refused = True
                pieces.append(part.get("refusal") or "")
    text = "".join(pieces)
    return (text or None), refused


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, Mapping):
        return None
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
    )


def _has(output: Sequence[Mapping[str, Any]], item_type: str) -> bool:
    return any(item.get("type") == item_type for item in output)
