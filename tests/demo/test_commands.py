"""The demo's commands: run_scenario, demo_refund, the fake provider and the demo tool servers
(their arguments and ports), and migrate on the embedded defaults."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

from providers.fake_server import ReplayServer
from providers.families import ADAPTERS
from tests.conftest import REPO
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.scenario import BUNDLED_DIR, bundled_path
from toolcalls.models import Operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _run(*args: str) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().splitlines()


def test_run_scenario_prints_transitions_and_a_json_summary() -> None:
    path = bundled_path(family="openai_responses", name="refund_approve")
    lines = _run("run_scenario", str(path), "--approve", "--json")
    summary = json.loads(lines[-1])
    assert lines[-2].startswith("final state: COMPLETED")
    assert summary["state"] == "COMPLETED" and summary["terminal_reason"] is None
    assert summary["turns"] == 4
    assert [(c["tool"], c["state"]) for c in summary["calls"]] == [
        ("get_order", "SUCCEEDED"),
        ("create_refund_draft", "SUCCEEDED"),
        ("submit_refund", "SUCCEEDED"),
    ]
    assert summary["calls"][2]["model_result"]["data"]["refund_id"] == "RF-RD-ORD-1001-1"
    assert [r["amount_cents"] for r in summary["ledger_refunds"]] == [4999]
    transition_lines = [line for line in lines if "call.transition" in line]
    assert any(
        "PROPOSED -> WAITING_APPROVAL" in line
        and "tool=submit_refund" in line
        and "provider_call_id=call_Xz4Jm7Vb2Lq9Ws1Ce8Tn6Rko" in line
        and "args_sha256=" in line
        for line in transition_lines
    )
    assert any("APPROVED -> EXECUTING" in line and "attempt=1" in line for line in transition_lines)


def test_run_scenario_without_a_decision_stops_when_parked() -> None:
    path = bundled_path(family="openai_responses", name="refund_approve")
    summary = json.loads(_run("run_scenario", str(path), "--json")[-1])
    assert summary["state"] == "WAITING_APPROVAL"
    assert summary["ledger_refunds"] == []


@pytest.mark.parametrize(
    ("name", "state"),
    [("max_tokens", "INCOMPLETE"), ("unknown_tool", "COMPLETED"), ("refusal", "REFUSED")],
)
def test_bundled_failure_branches(name: str, state: str) -> None:
    path = bundled_path(family="openai_responses", name=name)
    assert (
        json.loads(_run("run_scenario", str(path), "--json", "--expect", state)[-1])["state"]
        == state
    )


def test_every_bundled_scenario_is_valid() -> None:
    from toolcalls.demo.scenario import scenario_read

    files = sorted(BUNDLED_DIR.rglob("*.json"))
    assert len(files) >= 5
    for path in files:
        scenario_read(path)


def test_bad_scenario_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        _run("run_scenario", str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    scenario = {
        "family": "openai_responses",
        "model": "m",
        "input": "x",
        "replies": [{"kind": "response"}],
    }
    bad.write_text(json.dumps(scenario))
    with pytest.raises(CommandError, match="replies/0: 'http_status' is a required property"):
        _run("run_scenario", str(bad))
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="not readable JSON"):
        _run("run_scenario", str(bad))
    bad.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CommandError, match="not readable JSON"):
        _run("run_scenario", str(bad))
    reply = {"kind": "response", "http_status": 200, "body": {}}
    bad.write_text(json.dumps({**scenario, "input": "x\u0000", "replies": [reply]}))
    with pytest.raises(CommandError, match="holds a NUL"):
        _run("run_scenario", str(bad))
    for blank in (" ", "\u200b\ufeff"):
        bad.write_text(json.dumps({**scenario, "input": blank, "replies": [reply]}))
        with pytest.raises(CommandError, match="input: may not be blank"):
            _run("run_scenario", str(bad))
    assert not Operation.objects.exists()


def test_a_scenario_reply_that_could_only_fail_is_refused_as_the_api_refuses_it(
    tmp_path: Path,
) -> None:
    scenario = json.loads(bundled_path(family="openai_responses", name="refusal").read_text())
    scenario["replies"][0]["http_status"] = 500
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(scenario))
    said = (
        "replies/0/http_status: a response reply has a 2xx status, not 500: an error status is an "
        "http_error"
    )
    with pytest.raises(CommandError) as refused:
        _run("run_scenario", str(path))
    assert str(refused.value) == f"{path}: {said}"
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    ("fragment", "said"),
    [
        (
            '"input": "Refund me.", "input": "Refund the other order."',
            "input: given twice in one object; JSON objects may not repeat a member name",
        ),
        (
            '"settings": {"max_output_tokens": 9007199254740992}',
            "settings/max_output_tokens: 9007199254740992 is beyond ±9007199254740991",
        ),
        (
            '"settings": {"max_output_tokens": 1e20}',
            "settings/max_output_tokens: 1e+20 is beyond ±9007199254740991",
        ),
    ],
)
def test_a_scenario_no_reader_takes_exactly_is_a_clear_refusal(
    tmp_path: Path, fragment: str, said: str
) -> None:
    """Read as the API reads a body: a member given twice is not read as its last value, and a
    number beyond ±(2**53-1), which no audit event can hash, ends in a message, not a
    traceback."""
    text = bundled_path(family="openai_responses", name="refusal").read_text()
    path = tmp_path / "inexact.json"
    path.write_text(text.rstrip()[:-1] + f", {fragment}}}")
    with pytest.raises(CommandError) as refused:
        _run("run_scenario", str(path))
    assert str(refused.value).startswith(f"{path}: not usable exactly as written: {said}")
    assert not Operation.objects.exists()


def test_expect_mismatch_fails_the_command() -> None:
    path = bundled_path(family="openai_responses", name="refusal")
    with pytest.raises(CommandError, match="expected COMPLETED, got REFUSED"):
        _run("run_scenario", str(path), "--expect", "COMPLETED")


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_demo_refund_runs_for_every_family(family: str) -> None:
    lines = _run("demo_refund", "--provider", family, "--approve")
    assert lines[-1].startswith("final state: COMPLETED")
    assert "has been submitted" in lines[-2]
    assert LedgerEntry.objects.count() == 1


def test_demo_refund_deny_completes_with_an_explanation() -> None:
    lines = _run("demo_refund", "--deny")
    assert lines[-1].startswith("final state: COMPLETED")
    assert any("WAITING_APPROVAL -> DENIED" in line for line in lines)


def test_demo_refund_runs_on_the_embedded_defaults(tmp_path: Path) -> None:
    """A fresh SQLite database and in-process tasks, exactly as on a laptop."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "CELERY_BROKER_URL": "",
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert manage("migrate", "-v0").returncode == 0
    result = manage("demo_refund", "--approve")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("final state: COMPLETED")
    assert "model: Your refund of $49.99" in lines[-2]


def test_model_text_is_printed_safely() -> None:
    from toolcalls.demo.runner import printable

    assert printable("ok\n\tfine") == "ok\n\tfine"
    assert printable("a\x00b\u202ec\x1b[2J") == "a\\u0000b\\u202ec\\u001b[2J"


def test_a_scenario_carries_instructions_messages_and_settings(tmp_path: Path) -> None:
    scenario = json.loads(bundled_path(family="anthropic_messages", name="refusal").read_text())
    scenario |= {
        "instructions": "You are the refund desk.",
        "messages": [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}],
        "settings": {"max_output_tokens": 512},
    }
    path = tmp_path / "with_request.json"
    path.write_text(json.dumps(scenario))
    operation_id = json.loads(_run("run_scenario", str(path), "--json")[-1])["operation_id"]
    body = Operation.objects.get(public_id=operation_id).turns.get(index=0).request_body
    assert (body["system"], body["max_tokens"]) == ("You are the refund desk.", 512)
    assert [m["content"] for m in body["messages"][:2]] == ["Hi", "Hello!"]
    path.write_text(json.dumps(scenario | {"settings": {"temperature": 0.5}}))
    with pytest.raises(CommandError, match="temperature"):
        _run("run_scenario", str(path))
    path.write_text(json.dumps(scenario | {"messages": [{"role": "system", "text": "x"}]}))
    with pytest.raises(CommandError, match="messages/0/role"):
        _run("run_scenario", str(path))


def test_migrate_creates_the_embedded_database_directory(tmp_path: Path) -> None:
    """As the README runs it after `make clean`, which removes var/ (SQLite creates the file,
    not its directory: "unable to open database file")."""
    database = tmp_path / "var" / "callgate.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{database}",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert database.is_file()


def test_demo_refund_refuses_a_tools_url_for_local_tools() -> None:
    """It was ignored: the refund ran with the in-process tools."""
    with pytest.raises(CommandError, match=r"^--tools-url goes with --tools mcp or http"):
        _run("demo_refund", "--tools-url", "http://127.0.0.1:8766", "--approve")
    assert not Operation.objects.exists()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("command", ["fake_provider", "demo_http_tools", "demo_mcp_server"])
def test_a_port_in_use_is_a_clear_error(command: str, taken_port: int) -> None:
    refused = f"^cannot listen on 127.0.0.1:{taken_port}: Address already in use$"
    with pytest.raises(CommandError, match=refused):
        _run(command, "--port", str(taken_port))


@pytest.mark.parametrize("command", ["fake_provider", "demo_http_tools", "demo_mcp_server"])
@pytest.mark.parametrize("port", ["70000", "-1", "eighty"])
def test_a_port_out_of_range_is_refused_before_listening(command: str, port: str) -> None:
    with pytest.raises(CommandError, match=r"argument --port: must be (a whole number )?from 1 to"):
        _run(command, f"--port={port}")


@pytest.fixture
def never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake provider fails the test where it would have started serving."""

    def start(self: Any) -> None:
        raise AssertionError("served")

    monkeypatch.setattr(ReplayServer, "start", start)


@pytest.mark.usefixtures("never_served")
def test_the_fake_provider_refuses_directories_without_scenarios(tmp_path: Path) -> None:
    """It served no model and said nothing."""
    missing = tmp_path / "nonexistent"
    with pytest.raises(CommandError, match=f"^{re.escape(str(missing))}: no such directory$"):
        _run("fake_provider", "--port", "8191", str(BUNDLED_DIR), str(missing))
    (tmp_path / "notes.txt").write_text("no scenarios here")
    refused = f"^{re.escape(str(tmp_path))}: no scenario files \\(\\*\\.json\\) in it$"
    with pytest.raises(CommandError, match=refused):
        _run("fake_provider", "--port", "8191", str(tmp_path))


@pytest.mark.parametrize(
    "command",
    [
        ["demo_setup"],
        ["demo_refund", "--approve"],
        ["run_scenario", str(bundled_path(family="openai_responses", name="refund_approve"))],
    ],
)
def test_the_demo_commands_refuse_production_settings(command: list[str]) -> None:
    """They create the demo's users with the passwords the README prints: never in a production
    database, where those would be logins anyone can use."""
    with (
        override_settings(CALLGATE_DEMO_SEED=False),
        pytest.raises(CommandError, match="production settings"),
    ):
        _run(*command)
    assert not get_user_model().objects.filter(username__in=["operator", "requester"]).exists()
