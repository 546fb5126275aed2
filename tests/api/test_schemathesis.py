"""schemathesis against a live server, with every check and every phase: the examples, the
boundaries of each parameter and field (coverage), generated valid and invalid requests
(fuzzing), and sequences that follow the schema's links (stateful). Bounded and reproducible: a
fixed seed, ``MAX_EXAMPLES`` per operation, no example database, no shrinking.

The server is pytest-django's ``live_server`` (threaded, as ``runserver``) with tasks run right
after each request's commit, so a replay operation started by a generated request has run by
the time the next request reads it. Settings and hooks: ``tests/api/schemathesis.toml`` and
``tests/api/schemathesis_hooks.py``. The run's report lands in ``var/schemathesis.json``.
"""

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

from tests.api.support import ALL_SCOPES, new_key
from tests.conftest import REPO
from toolcalls.api.views import ApiKeyThrottle
from toolcalls.demo.services import DemoSeed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

MAX_EXAMPLES = 10
SEED = 20251130


def test_every_check_in_every_phase_passes(
    demo: DemoSeed, live_server: LiveServer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CALLGATE_API_STREAM_MAX_S = 1.0  # a stream of an operation still waiting closes
    settings.CALLGATE_API_STREAM_POLL_S = 0.1
    monkeypatch.setattr(ApiKeyThrottle, "THROTTLE_RATES", {"api_key": "100000/min"})
    cache.clear()
    _, key = new_key(demo.tenant, *ALL_SCOPES, name="schemathesis")
    # ``live_server`` binds "localhost" on IPv4; name the address so no client tries ::1 first.
    base = live_server.url.replace("://localhost:", "://127.0.0.1:")
    report = REPO / "var" / "schemathesis.json"
    report.parent.mkdir(exist_ok=True)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file", "tests/api/schemathesis.toml",
        "run", f"{base}/api/schema/?format=json",
        "--header", f"Authorization: Bearer {key}",
        "--checks", "all",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(MAX_EXAMPLES),
        "--seed", str(SEED),
        "--no-shrink",
        "--generation-database", "none",
        # Text the database cannot hold is refused with 400 (docs/api.md), which a schema
        # cannot say: generate text without NUL and unpaired surrogates.
        "--generation-codec", "utf-8",
        "--generation-allow-x00", "false",
        "--workers", "1",
        "--request-timeout", "20",
        "--no-color",
        "--report", "json", "--report-json-path", str(report),
    ]  # fmt: skip
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks", "PYTHONPATH": "."}
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    summary: dict[str, Any] = json.loads(report.read_text())
    totals = {
        "test_cases": summary["test_cases"]["generated"],
        "failures": {f["code"]: f["count"] for f in summary["failures"]},
        "errors": summary["errors"],
    }
    print(f"schemathesis: {json.dumps(totals)}")
    assert run.returncode == 0, run.stdout[-20000:]
    assert summary["operations"]["tested"] == summary["operations"]["total"] >= 17
    assert all(phase["status"] == "success" for phase in summary["phases"].values()), summary
    assert totals["failures"] == {} and totals["errors"] == []
