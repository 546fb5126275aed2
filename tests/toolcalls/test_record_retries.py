"""A record that hits a transient database error (the connection lost, a serialization failure,
a deadlock) is retried with the lease still fencing it; only a permanent property of the reply
fails the operation (``UNSTORABLE_REPLY``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg.errors
import pytest
from django.db import DataError, InterfaceError, OperationalError, connection
from django.test import override_settings

from tests import replies as r
from tests.engine import start
from toolcalls.demo.models import RefundDraft
from toolcalls.services import connections, execution, turns
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
DRAFT = r.call(
    "call_draft",
    "create_refund_draft",
    {"order_id": "ORD-1002", "amount_cents": 1000, "reason": "damaged_item"},
)


def _failing(real: Callable[..., Any], errors: list[Exception]) -> Callable[..., Any]:
    """``real``, raising the next of ``errors`` on each call until there are none left."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if errors:
            raise errors.pop(0)
        return real(*args, **kwargs)

    return wrapper


def _caused(error: type[Exception], cause: Exception) -> Exception:
    """A Django database error wrapping a psycopg one, as Django's wrapper raises it."""
    exc = error(str(cause))
    exc.__cause__ = cause
    return exc


def connection_lost() -> Exception:
    return _caused(OperationalError, psycopg.OperationalError("server closed the connection"))


TRANSIENT = {
    "connection_lost": connection_lost,
    "admin_shutdown": lambda: _caused(OperationalError, psycopg.errors.AdminShutdown("cut")),
    "serialization_failure": lambda: _caused(
        OperationalError, psycopg.errors.SerializationFailure("could not serialize")
    ),
    "deadlock": lambda: _caused(OperationalError, psycopg.errors.DeadlockDetected("deadlock")),
    "connection_exception": lambda: _caused(
        OperationalError, psycopg.errors.ConnectionFailure("08006")
    ),
    "interface": lambda: _caused(InterfaceError, psycopg.InterfaceError("connection closed")),
}


@pytest.fixture(autouse=True)
def _fast_backoff(settings: Any) -> None:
    settings.CALLGATE_RETRY_BASE_MS = 1
    settings.CALLGATE_RETRY_CAP_MS = 2


@pytest.mark.parametrize("kind", sorted(TRANSIENT))
def test_a_transient_database_error_while_a_turn_is_recorded_retries_the_record(
    kind: str, demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = [TRANSIENT[kind](), TRANSIENT[kind]()]
    monkeypatch.setattr(turns, "_store_turn", _failing(turns._store_turn, errors))
    operation = start(demo, [r.response(DRAFT), r.final()])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert list(operation.turns.values_list("index", flat=True)) == [0, 1]
    assert RefundDraft.objects.count() == 1
    assert operation.lease_token == ""


@override_settings(CALLGATE_DB_RETRIES=2)
def test_a_connection_that_stays_lost_leaves_the_claim_to_recovery(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = [connection_lost() for _ in range(3)]
    monkeypatch.setattr(turns, "_store_turn", _failing(turns._store_turn, errors))
    operation = start(demo, [r.final()])

    # Three tries (one and two retries), then the turn is left claimed: its lease runs out and
    # the recovery sweep hands it out again. The operation does not fail.
    assert errors == []
    assert operation.state == S.MODEL_REQUESTED
    assert operation.lease_token != ""
    assert not operation.turns.exists()


@pytest.mark.parametrize(
    "error",
    [
        _caused(DataError, psycopg.errors.CharacterNotInRepertoire("invalid byte sequence")),
        _caused(DataError, psycopg.errors.NumericValueOutOfRange("out of range")),
        _caused(OperationalError, psycopg.errors.ProgramLimitExceeded("row is too big")),
    ],
    ids=["nul_byte", "out_of_range", "program_limit"],
)
def test_a_permanent_database_error_while_a_turn_is_recorded_fails_unstorable(
    error: Exception, demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turns, "_store_turn", _failing(turns._store_turn, [error]))
    operation = start(demo, [r.final()])

    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("UNSTORABLE_REPLY: ")
    assert operation.lease_token == ""


def test_a_transient_database_error_while_a_result_is_recorded_retries_the_record(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = [connection_lost(), TRANSIENT["deadlock"]()]
    monkeypatch.setattr(execution, "call_finish", _failing(execution.call_finish, errors))
    operation = start(demo, [r.response(DRAFT), r.final()])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    call = operation.calls.get()
    # Recorded by the worker that ran it, once: no lost run, no second attempt, one draft.
    assert (call.state, call.attempt) == (CallState.SUCCEEDED, 1)
    assert not call.events.filter(to_state=CallState.UNKNOWN_OUTCOME).exists()
    assert RefundDraft.objects.count() == 1


def _cut_during(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` (a slow step), after which the server has ended this process's connection."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        pid = connection.connection.info.backend_pid
        with psycopg.connect(**_conninfo(), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [pid])
        return result

    return wrapper


def _conninfo() -> dict[str, Any]:
    options = connection.settings_dict
    return {
        "dbname": options["NAME"],
        "user": options["USER"],
        "password": options["PASSWORD"],
        "host": options["HOST"],
        "port": options["PORT"],
    }


@pytest.mark.parametrize(("module", "slow_step"), [(turns, "_request"), (execution, "_run")])
def test_a_connection_the_server_ended_during_the_slow_step_is_replaced_for_the_record(
    module: Any,
    slow_step: str,
    demo: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(module, slow_step, _cut_during(getattr(module, slow_step)))
    operation = start(demo, [r.response(DRAFT), r.final()])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    # The first try failed on the dead connection before writing; the second ran on a new one.
    assert [m for m in caplog.messages if m.startswith("record retry 1 of")] != []
    call = operation.calls.get()
    assert (call.state, call.attempt) == (CallState.SUCCEEDED, 1)
    assert RefundDraft.objects.count() == 1


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (connection_lost(), True),
        (_caused(OperationalError, psycopg.errors.LockNotAvailable("lock timeout")), False),
        (_caused(OperationalError, psycopg.errors.QueryCanceled("statement timeout")), False),
        (_caused(DataError, psycopg.errors.StringDataRightTruncation("too long")), False),
        (OperationalError("database is locked"), True),
    ],
)
def test_transient_database_errors_are_told_from_permanent_ones(
    error: Exception, transient: bool
) -> None:
    assert connections.transient(error) is transient
