"""Races: the same task delivered ten times at once, fifty operators clicking approve, approve
racing deny, and approve racing the expiry sweep at the deadline. Each has one winner, and the
side effect happens once or (when the winner says no) never."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services import ApprovalError, approval_decide, approvals_expire_due
from approvals.states import ApprovalState
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from tests.faults.scenarios import (
    FaultRun,
    call_path,
    claims,
    order_id,
    race,
    received,
    start_payment,
)
from toolcalls.demo.models import LedgerEntry, Order
from toolcalls.models import Operation
from toolcalls.services import turns
from toolcalls.states import CallState, OperationState
from toolcalls.tasks import execute_call, resume_call

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

C = CallState
S = OperationState
DELIVERIES = 10


def _deliver(fault: FaultRun, task: Any, call_pk: int) -> None:
    """The same message (one task ID) delivered ``DELIVERIES`` times at once."""
    task_id = str(uuid.uuid4())
    for _ in range(DELIVERIES):
        task.apply_async(args=[call_pk], task_id=task_id)
    fault.totals.faults += DELIVERIES - 1


def test_the_same_execute_task_delivered_ten_times_claims_once(
    demo: object, fault: FaultRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model's reply is recorded here with no wake-up sent: the call is handed over
    # (PROPOSED, queued) and only the duplicated deliveries below will run it.
    monkeypatch.setattr("toolcalls.services.operations.enqueue_turn", lambda *a, **kw: None)
    monkeypatch.setattr("toolcalls.services.scheduling.enqueue_execute", lambda *a, **kw: None)
    operation = start_payment(demo, order_id(5))
    turns.turn_run(operation_pk=operation.pk)
    monkeypatch.undo()
    call = operation.calls.get()
    assert call.state == C.PROPOSED and call.queued_at
    fault.workers.start(4)

    _deliver(fault, execute_call, call.pk)
    [operation] = fault.drive([operation])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    call.refresh_from_db()
    assert call_path(call) == [(C.PROPOSED, C.EXECUTING), (C.EXECUTING, C.SUCCEEDED)]
    assert len(fault.payments.payment_requests()) == 1 and len(fault.payments.effects()) == 1


def _parked_refund(demo: object, fault: FaultRun) -> tuple[Operation, ApprovalRequest]:
    """The demo refund, parked at WAITING_APPROVAL for ``submit_refund``."""
    [operation] = fault.drive([start(demo, bundled_replies("refund_approve"))])
    assert operation.state == S.WAITING_APPROVAL
    return operation, operation.approvals.get()


def test_the_same_resume_delivered_ten_times_runs_once(
    demo: object, fault: FaultRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault.workers.start(4)
    operation, approval = _parked_refund(demo, fault)
    monkeypatch.setattr("toolcalls.services.approvals.enqueue_resume", lambda *a, **kw: None)
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    monkeypatch.undo()

    _deliver(fault, resume_call, approval.call_id)
    [operation] = fault.drive([operation])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    submit = operation.calls.get(tool_name="submit_refund")
    assert call_path(submit)[-2:] == [(C.APPROVED, C.EXECUTING), (C.EXECUTING, C.SUCCEEDED)]
    assert claims(submit) == 1 and LedgerEntry.objects.count() == 1


def test_fifty_concurrent_approve_clicks_make_one_decision(demo: object, fault: FaultRun) -> None:
    fault.workers.start(2)
    operation, approval = _parked_refund(demo, fault)
    user = operator()
    user.has_perm("approvals.decide_approvalrequest")  # fill the permission cache first

    outcomes = race(
        [
            lambda: approval_decide(approval_pk=approval.pk, actor=user, approve=True)
            for _ in range(50)
        ]
    )
    fault.totals.faults += 49

    won = [o for o in outcomes if isinstance(o, ApprovalRequest)]
    lost = [o.code for o in outcomes if isinstance(o, ApprovalError)]
    assert (len(won), lost) == (1, ["already_decided"] * 49), outcomes
    [operation] = fault.drive([operation])
    assert operation.state == S.COMPLETED, operation.terminal_reason
    submit = operation.calls.get(tool_name="submit_refund")
    assert claims(submit) == 1 and submit.state == C.SUCCEEDED
    assert operation.events.filter(kind="approval.transition").count() == 1
    assert LedgerEntry.objects.count() == 1


def test_approve_clicks_racing_deny_clicks_in_the_console_make_one_decision(
    demo: object, fault: FaultRun
) -> None:
    fault.workers.start(2)
    operation, approval = _parked_refund(demo, fault)
    user = operator()
    clients = []
    for _ in range(50):
        client = Client()
        client.force_login(user)
        clients.append(client)

    def click(client: Client, decision: str) -> str:
        url = reverse("approvals:decide", args=[approval.public_id, decision])
        response = client.post(url, {"reason": "Not without the receipt."})
        if response.status_code == 409:  # lost the race: told so, the typed reason kept
            text = response.content.decode()
            assert "already" in text and "Not without the receipt." in text, text
            return f"{decision}:stale"
        assert response.status_code == 302, response.status_code
        return f"{decision}:{response['Location']}"

    outcomes = race(
        [partial(click, client, "approve" if i % 2 else "deny") for i, client in enumerate(clients)]
    )
    fault.totals.faults += 49

    done = reverse("operations:detail", args=[operation.public_id])
    winners = [o for o in outcomes if isinstance(o, str) and o.endswith(done)]
    assert len(winners) == 1 and all(isinstance(o, str) for o in outcomes), outcomes
    approval.refresh_from_db()
    expected = ApprovalState.APPROVED if winners[0].startswith("approve") else ApprovalState.DENIED
    assert approval.state == expected
    [operation] = fault.drive([operation])
    assert operation.state == S.COMPLETED, operation.terminal_reason
    submit = operation.calls.get(tool_name="submit_refund")
    assert operation.events.filter(kind="approval.transition").count() == 1
    if expected == ApprovalState.APPROVED:
        assert (submit.state, claims(submit), LedgerEntry.objects.count()) == (C.SUCCEEDED, 1, 1)
    else:
        assert (submit.state, claims(submit), LedgerEntry.objects.count()) == (C.DENIED, 0, 0)
        assert received(operation, submit.provider_call_id)["error"]["code"] == "DENIED"


#: Where the approve click lands relative to ``expires_at`` (seconds); the sweep runs at it.
OFFSETS = (-0.05, -0.03, -0.02, -0.01, 0.0, 0.02)


def _refund_replies(order: str) -> list[Any]:
    draft = {"order_id": order, "amount_cents": 3000, "reason": "damaged_item"}
    submit = {"order_id": order, "draft_id": f"RD-{order}-1", "amount_cents": 3000}
    return [
        r.response(r.call(f"d-{order}", "create_refund_draft", draft)),
        r.response(r.call(f"s-{order}", "submit_refund", submit)),
        r.final(f"Done with {order}."),
    ]


def _expire_soon(approval: ApprovalRequest, lead_s: float) -> datetime:
    """Move the deadline to ``lead_s`` seconds from now on the database clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET expires_at = now() + make_interval(secs => %s) "
            "WHERE id = %s RETURNING expires_at",
            [lead_s, approval.pk],
        )
        row = cursor.fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _at(moment: datetime, then: Callable[[], object]) -> object:
    """Call ``then`` once the wall clock reaches ``moment`` (same host as the database)."""
    time.sleep(max(0.0, moment.timestamp() - time.time()))
    return then()


def _race_the_deadline(approval: ApprovalRequest, user: Any, offset_s: float) -> list[object]:
    """The deadline moves to 0.3 s from now; the sweep runs at it, the click ``offset_s``
    seconds from it. Returns (the click's outcome, how many approvals the sweep expired)."""
    deadline = _expire_soon(approval, 0.3)
    click = partial(_decide, approval, user)
    return race(
        [
            partial(_at, deadline + timedelta(seconds=offset_s), click),
            partial(_at, deadline, approvals_expire_due),
        ]
    )


def test_approve_racing_the_expiry_sweep_at_the_deadline_has_one_winner(
    demo: object, fault: FaultRun
) -> None:
    fault.workers.start(2)
    orders = [f"ORD-70{i}" for i in range(len(OFFSETS))]
    tools = ["create_refund_draft", "submit_refund"]
    for order in orders:
        Order.objects.create(
            tenant_ref="acme", order_id=order, customer_ref="cus_1001", total_cents=9000
        )
    operations = fault.drive(
        [start(demo, _refund_replies(order), tool_names=tools) for order in orders]
    )
    assert {op.state for op in operations} == {S.WAITING_APPROVAL}
    user = operator()
    user.has_perm("approvals.decide_approvalrequest")

    winners = {}
    for operation, offset in zip(operations, OFFSETS, strict=True):
        approval = operation.approvals.get()
        click, swept = _race_the_deadline(approval, user, offset)
        fault.totals.faults += 1
        approval.refresh_from_db()
        winners[operation.public_id] = approval.state
        if approval.state == ApprovalState.APPROVED:
            assert (click, swept) == ("approved", 0)
        else:  # expired by the sweep, or by the click itself finding the deadline passed
            assert approval.state == ApprovalState.EXPIRED
            assert click == "expired", (click, swept)  # recorded by the sweep or not
        assert approval.decided_at is not None
        assert (approval.decided_at < approval.expires_at) == (
            approval.state == ApprovalState.APPROVED
        )

    operations = fault.drive(operations)
    for operation in operations:
        assert operation.state == S.COMPLETED, operation.terminal_reason
        assert operation.events.filter(kind="approval.transition").count() == 1
        submit = operation.calls.get(tool_name="submit_refund")
        paid = LedgerEntry.objects.filter(operation_ref=operation.public_id).count()
        if winners[operation.public_id] == ApprovalState.EXPIRED:  # nothing ran
            assert (submit.state, claims(submit), paid) == (C.EXPIRED, 0, 0)
            assert (
                received(operation, submit.provider_call_id)["error"]["code"] == "APPROVAL_EXPIRED"
            )
        else:
            assert (submit.state, claims(submit), paid) == (C.SUCCEEDED, 1, 1)


def _decide(approval: ApprovalRequest, user: Any) -> str:
    try:
        approval_decide(approval_pk=approval.pk, actor=user, approve=True)
    except ApprovalError as exc:
        return exc.code
    return "approved"
