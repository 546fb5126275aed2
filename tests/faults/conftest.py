"""Fixtures of the fault-injection suite (``make test-faults``): a dedicated Redis, the fake
payments provider, a worker factory, the invariants checked after every test, and the totals
printed at the end of the session.

Workers use Celery's ``solo`` pool unless a test asks for ``prefork``: a solo worker is one OS
process that runs one task at a time in its main thread, so the PID a fault point writes is
the worker's own, a SIGKILL takes the whole worker down as an OOM kill of its container would,
and no pool parent re-queues the task on the side (``reject_on_worker_lost``): recovery has to
come from the database, the worst case. Concurrency comes from starting several processes. The
load tests (Redis restart, warm shutdown) use ``prefork``, the production pool, to cover its
redelivery and shutdown paths as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from config.celery import app as celery_app
from tests.faults.harness import Payments, RedisServer, Totals, Workers
from tests.faults.invariants import invariants_check
from tests.faults.scenarios import FaultRun

#: The session's totals; ``pytest_terminal_summary`` prints them.
TOTALS = Totals()
LEASE_MS = 3000
GRACE_S = 2


@pytest.fixture(scope="session")
def totals() -> Totals:
    return TOTALS


@pytest.fixture(scope="session")
def fault_redis(tmp_path_factory: pytest.TempPathFactory, totals: Totals) -> Iterator[RedisServer]:
    """The suite's own ``redis-server`` (never the shared one); the test process's Celery app
    publishes to it while the suite runs."""
    server = RedisServer(tmp_path_factory.mktemp("redis"), totals)
    server.start()
    previous = celery_app.conf.broker_url
    _publish_to(server.url)
    try:
        yield server
    finally:
        _publish_to(previous)
        server.stop()


def _publish_to(url: str) -> None:
    """Point this process's Celery app at the broker ``url`` and forget the connections pooled
    for the previous one (as Celery itself does after a fork)."""
    celery_app.conf.broker_url = url
    celery_app._pool = None
    if "amqp" in celery_app.__dict__:
        celery_app.amqp._producer_pool = None


@pytest.fixture(scope="session")
def payments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Payments]:
    service = Payments(tmp_path_factory.mktemp("payments"))
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="package", autouse=True)
def fault_tools() -> Iterator[None]:
    """``pay_refund`` and ``lookup_payment`` in this process's registry while fault tests run
    (imported here, not at collection, so other test runs keep the demo registry)."""
    from tests.faults import tools

    tools.register_all()
    try:
        yield
    finally:
        tools.unregister_all()


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(autouse=True)
def fault(
    request: pytest.FixtureRequest,
    transactional_db: Any,
    fault_redis: RedisServer,
    payments: Payments,
    totals: Totals,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[FaultRun]:
    """One fault test: an empty broker and ledger, the worker factory, and afterwards — with
    every worker stopped — the invariants over everything the test left behind."""
    fault_redis.flush(fault=False)
    payments.reset()
    fault_dir = tmp_path / "points"
    fault_dir.mkdir()
    settings.CALLGATE_RECOVERY_GRACE_S = GRACE_S
    settings.CALLGATE_LEASE_MS = LEASE_MS
    monkeypatch.setenv("CALLGATE_FAULTS_PAYMENTS_URL", payments.url)
    base_env = {
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "TEST_DATABASE_URL": _database_url(),
        "TEST_CELERY_BROKER_URL": fault_redis.url,
        "CALLGATE_LEASE_MS": str(LEASE_MS),
        "CALLGATE_RECOVERY_GRACE_S": str(GRACE_S),
        "CALLGATE_FAULT_DIR": str(fault_dir),
        "CALLGATE_TOOL_MODULES": "toolcalls.demo.tools,tests.faults.tools",
        "CALLGATE_FAULTS_PAYMENTS_URL": payments.url,
        "CALLGATE_DEMO_FAULTS": "0",
        "LOG_LEVEL": "INFO",
    }
    workers = Workers(base_env=base_env, folder=tmp_path, totals=totals)
    run = FaultRun(workers=workers, redis=fault_redis, payments=payments, totals=totals)
    try:
        yield run
    finally:
        workers.stop_all()
        totals.faults += workers.crashes()
    findings = invariants_check(ledger=payments.ledger())
    totals.tests += 1
    totals.operations += findings.operations
    totals.duplicates += findings.duplicates
    totals.lost += findings.lost
    if findings.problems:
        pytest.fail(
            f"invariants broken after {request.node.name}:\n  " + "\n  ".join(findings.problems)
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TOTALS.tests:
        return
    terminalreporter.section("fault injection totals")
    terminalreporter.write_line(
        f"operations run: {TOTALS.operations}, faults injected: {TOTALS.faults}, "
        f"duplicates: {TOTALS.duplicates} (must be 0), lost: {TOTALS.lost} (must be 0) "
        f"[{TOTALS.tests} tests]"
    )
