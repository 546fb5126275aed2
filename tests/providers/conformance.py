"""Compare a parsed reply with a fixture case's ``expect`` block (shared/fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from providers.base import ParsedReply


def load_cases(root: Path, family: str) -> list[Path]:
    cases = sorted((root / "providers" / family).glob("*.json"))
    assert cases, f"no fixture cases for {family} under {root}; set CALLGATE_FIXTURES_DIR"
    return cases


def read_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def check(first: ParsedReply, again: ParsedReply, expect: dict[str, Any]) -> None:
    assert first.outcome.value == expect["outcome"]
    assert first.raw_reason == expect["raw_reason"]
    assert first.response_id == expect["response_id"]
    assert first.text == expect["text"]
    assert len(first.calls) == len(expect["calls"])
    for got, want, repeat in zip(first.calls, expect["calls"], again.calls, strict=True):
        assert got.name == want["name"]
        assert got.arguments == want["arguments"]
        assert got.arguments_error == want.get("arguments_error", False)
        if want["call_id"] is None:
            assert got.call_id and got.synthesized
            assert got.call_id == repeat.call_id
        else:
            assert got.call_id == want["call_id"]
    if first.calls:
        assert len({call.call_id for call in first.calls}) == len(first.calls)
    if "retryable" in expect:
        assert first.retryable == expect["retryable"]
    assert first.retry_after_s == expect.get("retry_after_s")
    usage = expect.get("usage")
    got_usage = first.usage and {
        "input_tokens": first.usage.input_tokens,
        "output_tokens": first.usage.output_tokens,
    }
    assert got_usage == usage
    assert first.continuation == frozenset(expect.get("continuation", []))
