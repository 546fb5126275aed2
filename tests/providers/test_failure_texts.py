"""What an adapter says of a reply it cannot use names each field the reply left out as missing
("no stop_reason"), never as ``None``: the words end up in an operation's reason."""

from __future__ import annotations

from typing import Any

import pytest

from providers.base import Outcome, WireReply
from providers.families import ADAPTERS


@pytest.mark.parametrize(
    ("family", "body", "problem"),
    [
        ("openai_responses", {"id": "resp_1"}, "the response is not finished (no status)"),
        (
            "openai_responses",
            {"status": "in_progress"},
            "the response is not finished (status 'in_progress')",
        ),
        (
            "openai_responses",
            {"status": "completed", "output": []},
            "completed with neither text nor calls",
        ),
        (
            "openai_chat",
            {"choices": [{"message": {"role": "assistant"}}]},
            "no finish_reason, and neither text nor calls",
        ),
        (
            "anthropic_messages",
            {"type": "message", "content": []},
            "no stop_reason, and neither text nor calls",
        ),
        (
            "anthropic_messages",
            {"type": "message", "content": [], "stop_reason": "odd"},
            "stop_reason 'odd', and neither text nor calls",
        ),
        (
            "anthropic_messages",
            {"type": "message", "content": [{"type": "text", "text": "Hi."}]},
            "no stop_reason",
        ),
        ("gemini_generate", {"candidates": [{"content": {"parts": []}}]}, "no finish reason"),
        ("gemini_interactions", {"steps": []}, "the interaction is not finished (no status)"),
        (
            "gemini_interactions",
            {"status": "completed", "steps": [{"type": "model_output", "error": {"code": 13}}]},
            "a model_output step carries an error (no reason)",
        ),
    ],
)
def test_a_missing_field_is_named_as_missing(
    family: str, body: dict[str, Any], problem: str
) -> None:
    adapter = ADAPTERS[family]
    parsed = adapter.parse_reply(WireReply(kind="response", http_status=200, body=body))
    assert parsed.outcome is Outcome.MALFORMED
    assert parsed.error_message == f"{adapter.revision}: {problem}"
