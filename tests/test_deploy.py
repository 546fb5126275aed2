"""Production settings pass Django's deployment checks with the documented environment."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

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
