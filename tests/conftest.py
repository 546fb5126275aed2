"""Shared fixtures: fixture corpus location, demo data, in-process tasks, a real Celery worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from config import inprocess_worker as worker_module
from config.celery import app as celery_app
from providers.fake_server import ReplayServer
from tests.otlp import OtlpReceiver
from toolcalls.services.handler_threads import handler_threads_stop

REPO = Path(__file__).resolve().parents[1]
#: The project's provider wire-format corpus (format: ``tests/fixtures/README.md``).
FIXTURES = REPO / "tests" / "fixtures"


def wait_for(predicate: Callable[[], object], *, timeout_s: float = 30.0, what: str = "") -> object:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what or predicate}")


@pytest.fixture(autouse=True)
def _handler_threads_stopped() -> Iterator[None]:
    """After each test, end the idle tool-handler threads this process started: their database
    connections would outlive the test (and keep the test database from being dropped)."""
    yield
    handler_threads_stop()


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Run Celery tasks in-process right after the enqueuing commit (fast unit tests only)."""
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


#: Seconds between the beat entries' runs on the in-process worker of the tests (30 s and 15 s in
#: ``CELERY_BEAT_SCHEDULE``; a test should not wait for those).
FAST_BEAT_S = 0.25


@pytest.fixture
def inprocess_worker(transactional_db) -> Iterator[worker_module.InProcessWorker]:  # type: ignore[no-untyped-def]
    """The embedded mode's in-process worker (``config.inprocess_worker``), started as
    ``config.wsgi`` starts it without a broker, with every beat entry due each
    :data:`FAST_BEAT_S`; stopped after the test."""
    schedule = {
        name: {**entry, "schedule": FAST_BEAT_S}
        for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
    }
    yield worker_module.start(app=celery_app, schedule=schedule)
    worker_module.stop()


@pytest.fixture
def demo(db):  # type: ignore[no-untyped-def]
    """The seeded demo tenant, users and orders, with every registered tool (the suite's own
    too) in the tenant's catalogue."""
    from tests.factories import catalogue_enable_all
    from toolcalls.demo.services import demo_seed

    seed = demo_seed()
    catalogue_enable_all(seed.tenant)
    return seed


@pytest.fixture(scope="session")
def replay_server() -> Iterator[ReplayServer]:
    """The local provider endpoints (all families) the live SDK transport talks to."""
    server = ReplayServer()
    server.start()
    yield server
    server.stop()


def provider_settings(server: ReplayServer) -> dict[str, dict[str, str]]:
    """``CALLGATE_PROVIDERS`` pointing every provider at ``server``."""
    return {
        provider: {"api_key": f"test-{provider}-key", "base_url": server.base_url(provider)}
        for provider in ("openai", "anthropic", "google")
    }


def database_url() -> str:
    """The test database's URL, for a process the test starts (``TEST_DATABASE_URL``)."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(scope="session")
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """The OTLP/HTTP endpoint the test worker exports its spans to."""
    receiver = OtlpReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="session")
def celery_worker(
    django_db_setup, django_db_blocker, replay_server, otlp_receiver
) -> Iterator[subprocess.Popen[bytes]]:  # type: ignore[no-untyped-def]
    """A real ``celery worker`` process on the test database and the test Redis database, with
    the live transport pointed at :func:`replay_server` and its spans exported (OTLP) to
    :func:`otlp_receiver` within a tenth of a second."""
    with django_db_blocker.unblock():
        database = database_url()
    broker = settings.CELERY_BROKER_URL
    redis.Redis.from_url(broker).flushdb()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "TEST_DATABASE_URL": database,
        "TEST_CELERY_BROKER_URL": broker,
        "CALLGATE_DEMO_FAULTS": "1",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp_receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        **{
            f"CALLGATE_{provider.upper()}_{key.upper()}": value
            for provider, config in provider_settings(replay_server).items()
            for key, value in config.items()
        },
    }
    log_path = REPO / "var" / "test-worker.log"
    log_path.parent.mkdir(exist_ok=True)
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "config", "worker",
            "--queues=callgate", "--concurrency=2", "--loglevel=INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(
            lambda: b"ready." in log_path.read_bytes() or process.poll() is not None,
            timeout_s=60,
            what="the Celery worker to start",
        )
        if process.poll() is not None:
            pytest.fail(f"celery worker exited early:\n{log_path.read_text()[-3000:]}")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
