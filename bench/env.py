"""Where the bench runs: its own PostgreSQL database and Redis database, never the tests'.

The bench process and its workers use ``config.settings.test`` (PostgreSQL and Redis on
loopback) with ``TEST_DATABASE_URL`` pointing at ``callgate_bench`` and
``TEST_CELERY_BROKER_URL`` at Redis database 9; ``BENCH_DATABASE_URL`` and ``BENCH_BROKER_URL``
override them, and ``BENCH_SETTINGS`` names another settings module (one that starts from
``config.settings.test``, to measure a settings change). The database is dropped and created
again on every run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
VAR = REPO / "var" / "bench"
DATABASE_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://callgate:callgate@127.0.0.1:5432/callgate_bench"
)
BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/9")
TOOL_MODULES = "toolcalls.demo.tools,bench.tools"


def environment() -> dict[str, str]:
    """The environment of the bench process and of every worker it starts.

    Logging stays at WARNING in both, so neither pays for a line per transition; the API's
    per-key throttle is raised so the queue measurement measures pages, not 429s.
    """
    return {
        "DJANGO_SETTINGS_MODULE": os.environ.get("BENCH_SETTINGS", "config.settings.test"),
        "TEST_DATABASE_URL": DATABASE_URL,
        "TEST_CELERY_BROKER_URL": BROKER_URL,
        "CALLGATE_TOOL_MODULES": TOOL_MODULES,
        "CALLGATE_API_RATE": "1000000/min",
        "LOG_LEVEL": "WARNING",
    }


def database_recreate() -> None:
    """Drop and create the bench database (the role may create databases).

    A plain ``DROP`` first: PostgreSQL stops an autovacuum worker busy in the database itself
    (``FORCE`` would try to terminate it and lacks the right). ``FORCE`` then ends sessions the
    bench's role left behind (a worker of an interrupted run).
    """
    import psycopg

    parts = urlsplit(DATABASE_URL)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        for attempt in range(20):
            try:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
                break
            except psycopg.errors.ObjectInUse:
                try:
                    connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    break
                except psycopg.Error:
                    if attempt == 19:
                        raise
                    time.sleep(1)
        connection.execute(f'CREATE DATABASE "{name}"')


def django_setup() -> None:
    """Configure this process for the bench database and start Django."""
    os.environ.update(environment())
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
