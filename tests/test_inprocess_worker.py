"""The embedded mode keeps time: with the in-process worker (``config.inprocess_worker``), as
``make run`` starts it, delays are waited out, the periodic sweeps run, and a task that fails
does not stop the ones after it. (The webhook cases are in ``tests/webhooks``.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from celery import shared_task

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from config.inprocess_worker import InProcessWorker
from tests import replies as r
from tests.conftest import wait_for
from tests.engine import bundled_replies, start
from toolcalls.models import Operation
from toolcalls.states import OperationState

pytestmark = pytest.mark.django_db(transaction=True)

_ran: list[str] = []
_ran_lock = threading.Lock()


@shared_task(name="tests.note")
def note(text: str) -> None:
    """Record ``text``; ``boom`` raises instead."""
    if text == "boom":
        raise RuntimeError("boom")
    with _ran_lock:
        _ran.append(text)


def _state(operation: Operation, *states: str) -> bool:
    operation.refresh_from_db()
    return operation.state in states


def test_a_429_with_retry_after_is_retried_only_after_that_long(
    demo: Any, inprocess_worker: InProcessWorker
) -> None:
    began = time.monotonic()
    operation = start(demo, [r.http_error(429, "rate_limit_exceeded", retry_after="1"), r.final()])
    wait_for(lambda: _state(operation, OperationState.COMPLETED), what="the retried turn")
    elapsed_s = time.monotonic() - began
    first, second = operation.turns.order_by("index")
    assert (first.outcome, second.outcome) == ("API_FAILURE", "FINAL_TEXT")
    # The retry's reply is recorded at least the asked second after the 429 was (wall clock
    # stamps: a little slack); the whole run, on the monotonic clock, took at least that.
    assert (second.created_at - first.created_at).total_seconds() >= 0.95
    assert 1.0 <= elapsed_s < 20.0


def test_an_approval_past_its_ttl_expires_without_anyone_running_the_sweep(
    demo: Any, inprocess_worker: InProcessWorker, settings: Any
) -> None:
    settings.CALLGATE_APPROVAL_TTL_S = 1
    operation = start(demo, bundled_replies("refund_approve"))
    wait_for(lambda: operation.approvals.exists(), what="the refund to park")
    approval = ApprovalRequest.objects.get(operation=operation)

    def expired() -> bool:
        approval.refresh_from_db()
        return approval.state == ApprovalState.EXPIRED

    wait_for(expired, timeout_s=20, what="the expiry sweep")
    event = operation.events.get(kind="approval.transition", to_state=ApprovalState.EXPIRED)
    assert event.actor == "system:expiry-sweep"
    assert operation.calls.get(tool_name="submit_refund").state == "EXPIRED"


def test_delayed_work_runs_when_due_and_a_failing_task_does_not_stop_the_next(
    inprocess_worker: InProcessWorker,
) -> None:
    _ran.clear()
    note.apply_async(args=["late"], countdown=0.5)
    note.apply_async(args=["boom"])
    note.delay("first")
    note.delay("second")
    wait_for(lambda: len(_ran) == 3, timeout_s=10, what="every task")
    assert _ran == ["first", "second", "late"]
