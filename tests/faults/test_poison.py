"""Work that kills its worker every time it runs: attempts are bounded, then a side effect is
ESCALATED to a human, a read fails into an error result, a model request fails the operation —
never an endless loop, even with a supervisor restarting every worker that dies."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from tests import replies as r
from tests.engine import start
from tests.faults.conftest import GRACE_S
from tests.faults.scenarios import (
    TOOLS,
    FaultRun,
    beat,
    claims,
    order_id,
    received,
    start_payment,
)
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

C = CallState
S = OperationState


def stays_put(fault: FaultRun, operation: Operation, point: str) -> None:
    """Beat for longer than the recovery grace and check nothing is tried again: the bound is
    final, not a pause between rounds."""
    crashes = fault.workers.markers(point)
    events = operation.events.count()
    deadline = time.monotonic() + GRACE_S + 1.5
    while time.monotonic() < deadline:  # proving an absence takes waiting past the grace
        beat()
        time.sleep(0.2)
    assert fault.workers.markers(point) == crashes
    assert operation.events.count() == events


def test_a_payment_that_kills_its_worker_every_time_escalates(
    demo: object, fault: FaultRun
) -> None:
    point = "faults.pay_refund.before_payment"
    fault.workers.start(2, faults={point: "crash"})
    operation = start_payment(demo, order_id(9))

    [operation] = fault.drive([operation], keep_workers=2, timeout_s=120)

    attempts = settings.CALLGATE_MAX_CALL_ATTEMPTS
    assert operation.state == S.ESCALATED, operation.terminal_reason
    assert operation.terminal_reason.startswith("UNKNOWN_OUTCOME") and "attempts spent" in (
        operation.terminal_reason
    )
    call = operation.calls.get()
    assert (call.state, call.attempt, claims(call)) == (C.UNKNOWN_OUTCOME, attempts, attempts)
    assert len(fault.workers.markers(point)) == attempts
    assert not fault.payments.payment_requests()  # never sent: only reconciliation asked
    stays_put(fault, operation, point)


def test_a_read_that_kills_its_worker_every_time_fails_into_an_error_result(
    demo: object, fault: FaultRun
) -> None:
    point = "faults.lookup_payment.before_read"
    fault.workers.start(2, faults={point: "crash"})
    look = r.call("look-1", "lookup_payment", {"order_id": order_id(91)})
    operation = start(
        demo, [r.response(look), r.final("I could not look that up.")], tool_names=TOOLS
    )

    [operation] = fault.drive([operation], keep_workers=2, timeout_s=120)

    attempts = settings.CALLGATE_MAX_CALL_ATTEMPTS
    assert operation.state == S.COMPLETED, operation.terminal_reason
    call = operation.calls.get()
    assert (call.state, call.attempt, claims(call)) == (C.FAILED, attempts, attempts)
    assert received(operation, "look-1")["error"]["code"] == "TOOL_FAILED"
    assert len(fault.workers.markers(point)) == attempts
    stays_put(fault, operation, point)


def test_a_model_request_that_kills_its_worker_every_time_fails(
    demo: object, fault: FaultRun
) -> None:
    point = "turn.after_claim"
    fault.workers.start(2, faults={point: "crash"})
    operation = start_payment(demo, order_id(92))

    [operation] = fault.drive([operation], keep_workers=2, timeout_s=120)

    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("POISON_TURN"), operation.terminal_reason
    assert (operation.lease_token, operation.lease_expires_at) == ("", None)
    assert len(fault.workers.markers(point)) == settings.CALLGATE_MAX_TURN_ATTEMPTS
    assert not operation.turns.exists() and not fault.payments.effects()
    stays_put(fault, operation, point)
