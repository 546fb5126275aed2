"""Waiting for an operation: the commit of a step that appends to its audit trail wakes the
waiter at once (published on the broker's Redis); another operation's, a rolled-back one's or
none leave it to its timeout; without Redis, or with Redis out of reach, it sleeps its poll
interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, transaction
from django.test import override_settings

from tests.factories import OperationFactory
from toolcalls.actors import ENGINE
from toolcalls.models import Operation
from toolcalls.services import watching
from toolcalls.services.audit import audit_record
from toolcalls.services.watching import operation_watch
from toolcalls.states import AuditKind

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


def _appended(operation_pk: int, *, commit: bool = True) -> None:
    """An event appended to the operation's trail on another connection (committed or not)."""
    try:
        with transaction.atomic():
            operation = Operation.objects.select_for_update().get(pk=operation_pk)
            audit_record(operation=operation, kind=AuditKind.OPERATION_BODIES_PRUNED, actor=ENGINE)
            if not commit:
                raise Rollback
    except Rollback:
        pass
    finally:
        connection.close()


def _waited(
    wait: Callable[[float], None], timeout_s: float, meanwhile: Callable[[], None]
) -> float:
    """Seconds ``wait(timeout_s)`` took while ``meanwhile`` ran in another thread."""
    worker = threading.Thread(target=meanwhile)
    started = time.monotonic()
    worker.start()
    wait(timeout_s)
    waited = time.monotonic() - started
    worker.join()
    return waited


def test_a_committed_step_wakes_the_waiter_at_once() -> None:
    operation = OperationFactory.create()
    with operation_watch(operation_pk=operation.pk, poll_s=30) as wait:
        assert _waited(wait, 30, lambda: _appended(operation.pk)) < 5


def test_another_operation_or_a_rolled_back_step_does_not_wake_it() -> None:
    watched, other = OperationFactory.create(), OperationFactory.create()
    with operation_watch(operation_pk=watched.pk, poll_s=30) as wait:
        assert _waited(wait, 0.5, lambda: _appended(other.pk)) >= 0.5
        assert _waited(wait, 0.5, lambda: _appended(watched.pk, commit=False)) >= 0.5


def test_a_change_while_nobody_waited_still_counts() -> None:
    operation = OperationFactory.create()
    with operation_watch(operation_pk=operation.pk, poll_s=30) as wait:
        worker = threading.Thread(target=lambda: _appended(operation.pk))
        worker.start()
        worker.join()
        started = time.monotonic()
        wait(30)
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("broker", ["memory://localhost/", "redis://127.0.0.1:1/0"])
def test_without_redis_it_sleeps_its_poll_interval(broker: str) -> None:
    operation = OperationFactory.create()
    watching._redis.cache_clear()
    try:
        with (
            override_settings(CELERY_BROKER_URL=broker),
            operation_watch(operation_pk=operation.pk, poll_s=0.2) as wait,
        ):
            started = time.monotonic()
            wait(30)
            assert 0.2 <= time.monotonic() - started < 5
            _appended(operation.pk)  # publishing without Redis is no error
    finally:
        watching._redis.cache_clear()


def test_a_publication_never_holds_up_the_commit_and_goes_out_once_per_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The publisher thread sends; what is handed over while it sends goes in its next batch,
    each operation once."""
    sending, release = threading.Event(), threading.Event()
    batches: list[set[int]] = []

    def publish(operation_pks: set[int]) -> None:
        batches.append(set(operation_pks))
        sending.set()
        release.wait(10)

    monkeypatch.setattr(watching, "_publish", publish)
    watching.operations_changed([1])
    assert sending.wait(10)  # the thread holds batch {1} until released
    watching.operations_changed([2, 3])
    watching.operations_changed([3])  # returned although no publish can go out
    release.set()
    deadline = time.monotonic() + 10
    while len(batches) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert batches == [{1}, {2, 3}]


def test_a_publication_that_fails_leaves_the_publisher_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[set[int]] = []

    def publish(operation_pks: set[int]) -> None:
        if not sent:
            sent.append(set())
            raise RuntimeError("the first batch fails")
        sent.append(set(operation_pks))

    monkeypatch.setattr(watching, "_publish", publish)
    watching.operations_changed([1])
    deadline = time.monotonic() + 10
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    watching.operations_changed([2])
    while len(sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent == [set(), {2}]
