"""Production settings pass Django's deployment checks with the documented environment."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import REPO, database_url

PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings.production",
    "SECRET_KEY": "x" * 64 + "-not-a-real-secret-but-long-and-varied-0123456789",
    "DATABASE_URL": "postgres://callgate:callgate@127.0.0.1:5432/callgate",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "callgate.example.com",
}


def test_check_deploy_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env={**os.environ, **PRODUCTION_ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key() -> None:
    env = {**os.environ, **PRODUCTION_ENV}
    del env["SECRET_KEY"]
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


@pytest.mark.django_db
def test_gunicorn_serves_the_console_and_static_files(tmp_path: Path) -> None:
    db = connection.settings_dict
    env = {
        **os.environ,
        **PRODUCTION_ENV,
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "STATIC_ROOT": str(tmp_path / "static"),
        "CALLGATE_METRICS_TOKEN": "metrics-test-token",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert collect.returncode == 0, collect.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gunicorn = [sys.executable, "-m", "gunicorn", "config.wsgi", "--workers", "1"]
    server = subprocess.Popen(
        [*gunicorn, "--bind", f"127.0.0.1:{port}"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    headers = {"Host": "callgate.example.com", "X-Forwarded-Proto": "https"}
    try:
        login = _get_when_up(f"http://127.0.0.1:{port}/login/", headers)
        assert login.status == 200 and b"Log in" in login.read()
        plain = urllib.request.Request(
            f"http://127.0.0.1:{port}/login/", headers={"Host": headers["Host"]}
        )
        with pytest.raises(urllib.error.HTTPError, match="301"):
            urllib.request.build_opener(_NoRedirect).open(plain)
        css = urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{port}/static/callgate.css", headers=headers)
        )
        assert css.status == 200 and b"--accent" in css.read()
        # Probes and scrapers reach a process directly, over plain HTTP: answered, not
        # redirected to an HTTPS address nothing serves there.
        opener = urllib.request.build_opener(_NoRedirect)
        for probe_path in ("/api/v1/health/live", "/api/v1/health/ready"):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{probe_path}", headers={"Host": headers["Host"]}
            )
            assert opener.open(request).status == 200, probe_path
        scrape = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Host": headers["Host"], "Authorization": "Bearer metrics-test-token"},
        )
        answer = opener.open(scrape)
        assert answer.status == 200 and b"callgate_operations" in answer.read()
        # A kubelet probes, and Prometheus scrapes, the process's own address: its Host is that
        # address, which ALLOWED_HOSTS does not list. Those paths answer; the others stay 400.
        by_address = {"Host": f"10.1.2.3:{port}"}
        for probe_path in ("/api/v1/health/live", "/api/v1/health/ready"):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{probe_path}", headers=by_address
            )
            assert opener.open(request).status == 200, probe_path
        scrape.headers["Host"] = by_address["Host"]
        assert opener.open(scrape).status == 200
        console = urllib.request.Request(
            f"http://127.0.0.1:{port}/login/", headers={**by_address, "X-Forwarded-Proto": "https"}
        )
        with pytest.raises(urllib.error.HTTPError, match="400") as refused:
            opener.open(console)
        assert b"<h1>Request not understood</h1>" in refused.value.read()  # the console's page
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.django_db
def test_a_production_worker_logs_json_lines_at_log_level(tmp_path: Path) -> None:
    """Started as the README says (no ``--loglevel``), a worker writes its lines as the web
    processes do: JSON, at ``LOG_LEVEL`` (INFO), each naming its request."""
    env = {
        **os.environ,
        **PRODUCTION_ENV,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
    }
    env.pop("LOG_LEVEL", None)
    env.pop("LOG_FORMAT", None)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker",
                "--queues=callgate-logging-check", "--concurrency=1", "--pool=solo",
                "--hostname=logging-check@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
            ],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while b"ready." not in log_path.read_bytes() and time.monotonic() < deadline:
            if worker.poll() is not None:
                break
            time.sleep(0.2)
        worker.terminate()
        worker.wait(timeout=20)
    lines = [line for line in log_path.read_text().splitlines() if "ready." in line]
    assert lines, log_path.read_text()[-3000:]
    ready = json.loads(lines[0])
    assert ready["levelname"] == "INFO" and ready["message"].endswith("ready.")
    assert ready["request_id"] == "-"


@pytest.mark.django_db(transaction=True)
def test_production_settings_let_a_deployer_script_tenants_and_members() -> None:
    """Unlike the demo's commands, these run under production settings: a script may run them
    again, reads the password from the environment, and a refusal is one line, exit status 1."""
    env = {**os.environ, **PRODUCTION_ENV, "DATABASE_URL": database_url()}
    env.pop("CALLGATE_MEMBER_PASSWORD", None)

    def manage(*args: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = {} if password is None else {"CALLGATE_MEMBER_PASSWORD": password}
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO, env={**env, **extra}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    tenant = ("create_tenant", "--slug", "acme", "--name", "Acme")
    member = ("add_tenant_member", "--tenant", "acme", "--username", "alice", "--roles")
    assert manage(*tenant).stdout == "created: tenant acme (Acme)\n"
    assert manage(*tenant).stdout == "exists: tenant acme (Acme)\n"
    created = manage(*member, "operator", "--no-input", password="a long and unusual passphrase")
    assert created.stdout == "created: user alice in acme as operator\n", created.stderr
    again = manage(*member, "operator", "--no-input")
    assert (again.returncode, again.stdout) == (0, "exists: user alice in acme as operator\n")
    weak = manage(
        "add_tenant_member", "--tenant", "acme", "--username", "bob", "--roles", "support",
        "--no-input", password="password",
    )  # fmt: skip
    assert weak.returncode == 1
    assert weak.stderr.startswith("CommandError: password refused: This password is too common.")
    assert "Traceback" not in weak.stderr
    assert manage("demo_setup").returncode == 1  # the demo's commands stay refused


def _get_when_up(url: str, headers: dict[str, str]) -> Any:
    deadline = time.monotonic() + 20
    while True:
        try:
            return urllib.request.urlopen(urllib.request.Request(url, headers=headers))
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
