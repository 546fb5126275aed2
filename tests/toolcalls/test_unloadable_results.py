"""A call set whose results cannot be loaded or shaped for the model fails the operation with
``UNLOADABLE_RESULT`` (audited) instead of leaving it in RESULTS_READY, every turn raising."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import InterfaceError, OperationalError

from providers.families import get_adapter
from tests.engine import call_set
from toolcalls.services import turns
from toolcalls.states import CallState, OperationState

pytestmark = pytest.mark.django_db

S = OperationState


def test_a_finished_call_without_a_stored_result_fails_the_operation_unloadable() -> None:
    [call] = call_set(CallState.SUCCEEDED, operation_state=S.RESULTS_READY, model_result=None)
    turns.turn_run(operation_pk=call.operation_id)

    operation = call.operation
    operation.refresh_from_db()
    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("UNLOADABLE_RESULT: ValueError: ")
    assert call.public_id in operation.terminal_reason
    event = operation.events.get(kind="operation.transition", to_state=S.FAILED)
    assert event.from_state == S.RESULTS_READY
    assert event.details["reason"] == operation.terminal_reason


def test_a_result_the_adapter_cannot_shape_fails_the_operation_unloadable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    [call] = call_set(
        CallState.SUCCEEDED, operation_state=S.RESULTS_READY, model_result={"ok": True}
    )
    adapter = get_adapter(call.operation.family)

    def unshapeable(**kwargs: Any) -> list[Any]:
        raise TypeError("Object of type Decimal is not JSON serializable")

    monkeypatch.setattr(adapter, "append_results", unshapeable)
    monkeypatch.setattr(turns, "call_set_results", lambda *, operation, calls: [])
    turns.turn_run(operation_pk=call.operation_id)

    operation = call.operation
    operation.refresh_from_db()
    assert operation.state == S.FAILED
    assert operation.terminal_reason == (
        "UNLOADABLE_RESULT: TypeError: Object of type Decimal is not JSON serializable"
    )
    assert operation.turn_attempts == 0  # nothing was claimed
    assert operation.events.filter(kind="operation.transition", to_state=S.FAILED).exists()


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_a_database_error_while_loading_results_is_not_taken_for_an_unloadable_result(
    error: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    [call] = call_set(
        CallState.SUCCEEDED, operation_state=S.RESULTS_READY, model_result={"ok": True}
    )

    def lost(*, operation: Any, calls: Any) -> list[Any]:
        raise error("server closed the connection")

    monkeypatch.setattr(turns, "call_set_results", lost)
    with pytest.raises(error):
        turns.turn_run(operation_pk=call.operation_id)

    operation = call.operation
    operation.refresh_from_db()
    assert (operation.state, operation.terminal_reason) == (S.RESULTS_READY, "")
