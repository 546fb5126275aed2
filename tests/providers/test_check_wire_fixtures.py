"""``manage.py check_wire_fixtures``: one line per case, a total, exit 1 on any failure."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import FIXTURES


def _run(*directories: Path) -> tuple[list[str], int]:
    out = StringIO()
    try:
        call_command("check_wire_fixtures", *map(str, directories), stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return out.getvalue().splitlines(), code


def test_every_public_fixture_passes() -> None:
    lines, code = _run(FIXTURES / "providers")
    cases = sorted((FIXTURES / "providers").rglob("*.json"))
    assert code == 0
    assert lines[-1] == f"{len(cases)} passed, 0 failed"
    assert all(line.startswith("PASS ") for line in lines[:-1])


def test_a_wrong_expectation_fails_with_what_differed(tmp_path: Path) -> None:
    source = FIXTURES / "providers" / "anthropic_messages" / "final_text.json"
    shutil.copy(source, tmp_path / "good.json")
    case = json.loads(source.read_text())
    case["expect"]["outcome"] = "REFUSAL"
    (tmp_path / "bad.json").write_text(json.dumps(case))
    (tmp_path / "broken.json").write_text("{nope")
    lines, code = _run(tmp_path)
    assert code == 1
    assert lines[-1] == "1 passed, 2 failed"
    assert (
        "FAIL anthropic_messages/final_text: outcome: got 'FINAL_TEXT', expected 'REFUSAL'" in lines
    )
    assert any(line.startswith("FAIL ") and "broken.json: unreadable" in line for line in lines)


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a directory"):
        call_command("check_wire_fixtures", str(tmp_path / "nope"))
