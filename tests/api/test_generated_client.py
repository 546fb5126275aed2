"""Clients as a check: a Python client generated from the served schema
(openapi-python-client) type-checks a refund-flow script under ``mypy --strict`` and runs it
against a live server with a real Celery worker (tests/api/clients/refund_flow.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from pytest_django.live_server_helper import LiveServer
from rest_framework.test import APIClient

from tests.api.support import DECIDE, READ, WRITE, new_key
from tests.conftest import REPO
from toolcalls.demo.scenario import bundled_path
from toolcalls.demo.services import DemoSeed

SCRIPT = REPO / "tests" / "api" / "clients" / "refund_flow.py"
BIN = Path(sys.executable).parent


def generate(schema: dict[str, Any], where: Path) -> Path:
    """The client package ``callgate_client`` generated from ``schema`` under ``where``."""
    (where / "schema.json").write_text(json.dumps(schema))
    (where / "config.yml").write_text("post_hooks: []\n")  # no formatter needed
    subprocess.run(
        [
            str(BIN / "openapi-python-client"), "generate",
            "--path", str(where / "schema.json"),
            "--meta", "none",
            "--output-path", str(where / "callgate_client"),
            "--config", str(where / "config.yml"),
        ],
        check=True, capture_output=True, cwd=where,
    )  # fmt: skip
    return where


def type_check(client_dir: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on the script with the generated client, and no project settings. The
    client's types are used, its own code is not judged: the generator names a model's local
    variable after its class's ``error`` property (``Error.from_dict``), which mypy reports."""
    (client_dir / "mypy.ini").write_text(
        "[mypy]\n[mypy-callgate_client.*]\nfollow_imports = silent\n"
    )
    return subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-incremental",
            "--config-file", str(client_dir / "mypy.ini"), str(SCRIPT),
        ],
        capture_output=True, text=True, cwd=client_dir,
        env={**os.environ, "MYPYPATH": str(client_dir)},
    )  # fmt: skip


def served_schema() -> dict[str, Any]:
    schema: dict[str, Any] = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    return schema


def test_the_refund_script_type_checks_against_the_generated_client(tmp_path: Path) -> None:
    result = type_check(generate(served_schema(), tmp_path))
    print(f"mypy --strict: {result.stdout.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("Success: no issues found")


def test_an_always_present_field_left_optional_would_fail_the_check(tmp_path: Path) -> None:
    schema = served_schema()
    schema["components"]["schemas"]["Operation"]["required"].remove("state")
    result = type_check(generate(schema, tmp_path))
    assert result.returncode == 1
    assert 'has type "OperationStateEnum | Unset"' in result.stdout, result.stdout


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_refund_script_runs_against_a_live_server(
    demo: DemoSeed, live_server: LiveServer, celery_worker: Any, tmp_path: Path
) -> None:
    cache.clear()
    client_dir = generate(served_schema(), tmp_path)
    _, starter = new_key(demo.tenant, READ, WRITE, name="checkout")
    _, reviewer = new_key(demo.tenant, READ, DECIDE, name="review")
    base = live_server.url.replace("://localhost:", "://127.0.0.1:")
    scenario = bundled_path(family="openai_responses", name="refund_approve")
    run = subprocess.run(
        [sys.executable, str(SCRIPT), base, starter, reviewer, str(scenario)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(client_dir)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["state"] == "COMPLETED"
    assert outcome["decided_by"] == "service:review"
    assert "has been submitted" in outcome["final_text"]
