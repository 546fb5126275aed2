"""Scenarios of the fault suite and the test's side of running them: start operations on
scripted replies, be beat (recovery sweep and approval expiry from the test process), and wait
until every operation has settled.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connections

from approvals.services import approvals_expire_due
from tests import replies as r
from tests.engine import start
from tests.faults.harness import Payments, RedisServer, Totals, Workers, poll
from toolcalls.models import Operation, ToolCall
from toolcalls.services.recovery import recovery_sweep
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState

S = OperationState
#: Tools offered to the model in the suite's own scenarios.
TOOLS = ["pay_refund", "lookup_payment", "get_order"]
SETTLED = (*OPERATION_TERMINAL, S.ESCALATED, S.WAITING_APPROVAL)
BUSY = (CallState.PROPOSED, CallState.APPROVED, CallState.EXECUTING)
T = TypeVar("T")


def order_id(number: int) -> str:
    """Order IDs of the payments scenarios (never the demo shop's)."""
    return f"ORD-5{number:03d}"


def pay_replies(order: str, amount_cents: int = 1500, *, lookup: bool = False) -> list[Any]:
    """The model pays a refund (and, with ``lookup``, looks the order's refunds up in the same
    reply), then says it is done."""
    calls = [
        r.call(f"pay-{order}", "pay_refund", {"order_id": order, "amount_cents": amount_cents})
    ]
    if lookup:
        calls.append(r.call(f"look-{order}", "lookup_payment", {"order_id": order}))
    return [r.response(*calls), r.final(f"Refunded {order}.")]


def start_payment(demo: Any, order: str, amount_cents: int = 1500, **kw: Any) -> Operation:
    return start(demo, pay_replies(order, amount_cents, **kw), tool_names=TOOLS)


def beat() -> None:
    """What Celery beat runs, run here: the database says what is stranded, not the broker."""
    recovery_sweep()
    approvals_expire_due()


def unsettled(operation_pks: Iterable[int]) -> list[str]:
    """Operations still moving: not terminal, escalated or parked, a call still runnable or
    running, or a model request claimed."""
    pks = list(operation_pks)
    busy = set(
        ToolCall.objects.filter(operation_id__in=pks, state__in=BUSY).values_list(
            "operation_id", flat=True
        )
    )
    return [
        f"{op.public_id}:{op.state}"
        for op in Operation.objects.filter(pk__in=pks)
        if op.state not in SETTLED or op.pk in busy or op.lease_token
    ]


def received(operation: Operation, call_id: str) -> dict[str, Any]:
    """The result envelope the model received for ``call_id``."""
    for turn in operation.turns.order_by("index"):
        for item in turn.request_body.get("input", []):
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                return dict(json.loads(item["output"]))
    raise AssertionError(f"{call_id} was never answered")


def call_path(call: ToolCall) -> list[tuple[str, str]]:
    """The call's transitions, in order."""
    events = call.events.filter(kind="call.transition").order_by("seq")
    return [(e.from_state, e.to_state) for e in events]


def claims(call: ToolCall) -> int:
    """How many times a worker claimed the call (moved it to EXECUTING)."""
    return sum(1 for _, to_state in call_path(call) if to_state == CallState.EXECUTING)


@dataclass
class FaultRun:
    """One fault test's processes: its workers, the suite's Redis and payments provider."""

    workers: Workers
    redis: RedisServer
    payments: Payments
    totals: Totals

    def drive(
        self,
        operations: Sequence[Operation],
        *,
        timeout_s: float = 90,
        keep_workers: int = 0,
    ) -> list[Operation]:
        """Be beat until every operation has settled; with ``keep_workers``, also restart dead
        workers (like a supervisor) so that many stay alive. Returns the operations, fresh."""
        pks = [operation.pk for operation in operations]

        def tick() -> None:
            beat()
            if keep_workers:
                self.workers.replace_dead(keep_workers)

        poll(
            lambda: not unsettled(pks),
            timeout_s=timeout_s,
            what="the operations to settle",
            tick=tick,
            interval_s=0.2,
            diagnose=lambda: f"unsettled: {unsettled(pks)}\n{self.workers.logs()}",
        )
        for operation in operations:
            operation.refresh_from_db()
        return list(operations)

    def wait(self, predicate: Any, *, what: str, timeout_s: float = 60) -> Any:
        """Wait for ``predicate`` without being beat (nothing recovers meanwhile)."""
        return poll(predicate, timeout_s=timeout_s, what=what, diagnose=lambda: self.workers.logs())


def race(contenders: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Run every contender in its own thread, released together by a barrier; returns each
    one's result or exception, in order. Each thread closes its own database connection."""
    barrier = threading.Barrier(len(contenders))
    outcomes: list[T | BaseException] = [RuntimeError("did not run")] * len(contenders)

    def run(index: int, contender: Callable[[], T]) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes[index] = contender()
        except BaseException as exc:  # reported to the test, which decides what is expected
            outcomes[index] = exc
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=(index, contender), name=f"contender-{index}")
        for index, contender in enumerate(contenders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes
