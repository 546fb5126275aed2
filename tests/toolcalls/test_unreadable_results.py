"""A local tool that answers with a result Callgate cannot record (not plain JSON): a read fails,
but a side effect ran, so its outcome is unknown and its key stays held, as for a remote tool's
unreadable reply: it is never run again on the strength of a failure that did not happen."""

from __future__ import annotations

from typing import Any

import pytest

from tests import replies as r
from tests.engine import start
from toolcalls.models import IdempotencyRecord
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

#: Not plain JSON: an integer beyond ±(2**53-1), and a set.
UNREADABLE = [{"ledger_ref": 2**64 + 12345}, {"refs": {1, 2}}]


def _run(demo: Any, tool: Any, result: Any, **fields: Any) -> Any:
    runs: list[int] = []

    def handler(ctx: Any, args: Any) -> Any:
        runs.append(1)
        return result

    tool(name="voucher", handler=handler, **fields)
    replies = [r.response(r.call("v", "voucher", {})), r.final()]
    operation = start(demo, replies, tool_names=["voucher"])
    operation.refresh_from_db()
    return operation, operation.calls.get(), runs


@pytest.mark.parametrize("result", UNREADABLE)
def test_a_side_effect_answering_what_cannot_be_recorded_has_an_unknown_outcome(
    demo, tool, result
) -> None:
    key = {"risk": "write", "idempotency_key": lambda ctx, args: "voucher:one"}
    operation, call, runs = _run(demo, tool, result, **key)
    # Was: FAILED TOOL_FAILED and the key released, so the same intent ran again.
    assert call.state == CallState.UNKNOWN_OUTCOME and runs == [1]
    assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.IN_FLIGHT
    assert operation.state == OperationState.ESCALATED
    assert "cannot be recorded" in operation.terminal_reason


@pytest.mark.parametrize("result", UNREADABLE)
def test_a_read_answering_what_cannot_be_recorded_fails(demo, tool, result) -> None:
    operation, call, runs = _run(demo, tool, result)
    assert (call.state, call.error_code) == (CallState.FAILED, "TOOL_FAILED")
    assert operation.state == OperationState.COMPLETED and runs == [1]
