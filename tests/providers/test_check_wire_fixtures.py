"""``manage.py check_wire_fixtures``: one line per case, a total, exit 1 on any failure."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from providers.families import ADAPTERS
from tests.conftest import FIXTURES

KINDS = ("response", "stream", "http_error")


def _run(*directories: Path) -> tuple[list[str], int]:
    out = StringIO()
    try:
        call_command("check_wire_fixtures", *map(str, directories), stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return out.getvalue().splitlines(), code


def test_every_case_of_the_projects_corpus_passes() -> None:
    lines, code = _run(FIXTURES / "providers")
    cases = sorted((FIXTURES / "providers").rglob("*.json"))
    assert code == 0
    assert lines[-1] == f"{len(cases)} passed, 0 failed"
    assert all(line.startswith("PASS ") for line in lines[:-1])


def test_several_directories_are_checked_in_one_run() -> None:
    chat, gemini = (
        FIXTURES / "providers" / "openai_chat",
        FIXTURES / "providers" / "gemini_generate",
    )
    lines, code = _run(chat, gemini)
    count = len(list(chat.glob("*.json"))) + len(list(gemini.glob("*.json")))
    assert (code, lines[-1]) == (0, f"{count} passed, 0 failed")


def test_the_corpus_covers_every_family_with_every_kind_of_reply() -> None:
    seen = set()
    for path in (FIXTURES / "providers").rglob("*.json"):
        case = json.loads(path.read_text(encoding="utf-8"))
        assert case["id"] == f"{path.parent.name}/{path.stem}" == f"{case['family']}/{path.stem}"
        seen.add((case["family"], case["kind"]))
    assert seen == {(family, kind) for family in ADAPTERS for kind in KINDS}


def test_a_wrong_expectation_fails_with_what_differed(tmp_path: Path) -> None:
    source = FIXTURES / "providers" / "anthropic_messages" / "end_turn_answer.json"
    shutil.copy(source, tmp_path / "good.json")
    case = json.loads(source.read_text())
    case["expect"]["outcome"] = "REFUSAL"
    (tmp_path / "bad.json").write_text(json.dumps(case))
    (tmp_path / "broken.json").write_text("{nope")
    lines, code = _run(tmp_path)
    assert code == 1
    assert lines[-1] == "1 passed, 2 failed"
    assert (
        "FAIL anthropic_messages/end_turn_answer: outcome: got 'FINAL_TEXT', expected 'REFUSAL'"
        in lines
    )
    assert any(line.startswith("FAIL ") and "broken.json: unreadable" in line for line in lines)


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a directory"):
        call_command("check_wire_fixtures", str(tmp_path / "nope"))


def test_a_directory_without_cases_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no case files"):
        call_command("check_wire_fixtures", str(tmp_path))
