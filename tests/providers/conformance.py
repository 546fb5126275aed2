"""Fixture cases for the conformance tests (the comparison itself is ``providers.conformance``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from providers.base import ParsedReply
from providers.conformance import differences


def load_cases(root: Path, family: str) -> list[Path]:
    cases = sorted((root / "providers" / family).glob("*.json"))
    assert cases, f"no fixture cases for {family} under {root}"
    return cases


def read_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def check(first: ParsedReply, again: ParsedReply, expect: dict[str, Any]) -> None:
    problems = differences(first, again, expect)
    assert not problems, "\n".join(problems)
