"""Check an adapter against wire-fixture cases.

A case is one JSON file: a reply as :meth:`providers.base.WireReply.from_case` reads it, its
``family``, an ``id``, and an ``expect`` block naming what the adapter must make of it
(``outcome``, ``raw_reason``, ``response_id``, ``text``, ``calls``, and where they apply
``retryable``, ``retry_after_s``, ``usage``, ``continuation``).

Used by the conformance tests and by ``manage.py check_wire_fixtures``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.base import ParsedReply, WireReply
from providers.families import ADAPTERS


@dataclass(frozen=True)
class CaseResult:
    """``case_id`` (the case's ``id``, else its path) and what differed (empty: passed)."""

    case_id: str
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems


def case_files(directory: Path) -> Iterator[Path]:
    """Every ``*.json`` case below ``directory``, sorted."""
    yield from sorted(p for p in directory.rglob("*.json") if p.name != "case.schema.json")


def check_file(path: Path) -> CaseResult:
    """Load one case file, parse its reply twice with its family's adapter, compare."""
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return CaseResult(str(path), (f"unreadable: {exc}",))
    case_id = str(case.get("id") or path) if isinstance(case, Mapping) else str(path)
    if not isinstance(case, Mapping) or not isinstance(case.get("expect"), Mapping):
        return CaseResult(case_id, ("not a case: no expect block",))
    adapter = ADAPTERS.get(str(case.get("family")))
    if adapter is None:
        return CaseResult(case_id, (f"unknown family {case.get('family')!r}",))
    try:
        reply = WireReply.from_case(case)
    except (KeyError, TypeError, ValueError) as exc:
        return CaseResult(case_id, (f"unreadable reply: {exc}",))
    try:
        first, again = adapter.parse_reply(reply), adapter.parse_reply(reply)
    except Exception as exc:  # a checker reports a crashing adapter instead of crashing itself
        return CaseResult(case_id, (f"adapter raised {type(exc).__name__}: {exc}",))
    return CaseResult(case_id, tuple(differences(first, again, case["expect"])))


def differences(first: ParsedReply, again: ParsedReply, expect: Mapping[str, Any]) -> list[str]:
    """What ``first`` (and its re-parse ``again``) got wrong against ``expect``; [] when right."""
    found: list[str] = []

    def same(name: str, got: Any, want: Any) -> None:
        if got != want:
            found.append(f"{name}: got {got!r}, expected {want!r}")

    same("outcome", first.outcome.value, expect.get("outcome"))
    same("raw_reason", first.raw_reason, expect.get("raw_reason"))
    same("response_id", first.response_id, expect.get("response_id"))
    same("text", first.text, expect.get("text"))
    found += _call_differences(first, again, list(expect.get("calls") or []))
    if "retryable" in expect:
        same("retryable", first.retryable, expect["retryable"])
    same("retry_after_s", first.retry_after_s, expect.get("retry_after_s"))
    usage = first.usage and {
        "input_tokens": first.usage.input_tokens,
        "output_tokens": first.usage.output_tokens,
    }
    same("usage", usage, expect.get("usage"))
    same("continuation", sorted(first.continuation), sorted(expect.get("continuation") or []))
    return found


def _call_differences(first: ParsedReply, again: ParsedReply, expected: list[Any]) -> list[str]:
    if len(first.calls) != len(expected):
        return [f"calls: got {len(first.calls)}, expected {len(expected)}"]
    found = []
    ids = [call.call_id for call in first.calls]
    if len(set(ids)) != len(ids):
        found.append(f"calls: call IDs are not unique: {ids}")
    for index, (got, want, repeat) in enumerate(
        zip(first.calls, expected, again.calls, strict=False)
    ):
        where = f"calls[{index}]"
        if got.name != want.get("name"):
            found.append(f"{where}.name: got {got.name!r}, expected {want.get('name')!r}")
        if got.arguments != want.get("arguments"):
            found.append(
                f"{where}.arguments: got {got.arguments!r}, expected {want.get('arguments')!r}"
            )
        if got.arguments_error != bool(want.get("arguments_error", False)):
            found.append(f"{where}.arguments_error: got {got.arguments_error!r}")
        if want.get("call_id") is None:
            if not got.call_id or not got.synthesized or got.call_id != repeat.call_id:
                found.append(f"{where}.call_id: a made-up ID must be non-empty, marked and stable")
        elif got.call_id != want["call_id"]:
            found.append(f"{where}.call_id: got {got.call_id!r}, expected {want['call_id']!r}")
    return found
