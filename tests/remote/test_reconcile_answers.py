"""What an HTTP tool's reconcile URL may answer about a lost outcome: only ``{"applied": true,
"result": {...}}`` is success; an applied answer without a result object cannot tell, and the
operation escalates for a human. A real HTTP tool on 127.0.0.1, in a thread of the test."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp, send
from tests.remote.test_remote_tools import enable, register_http, run
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def lost_then(reconciled: Any) -> Any:
    """A tool whose answer to the call is lost (502) and whose reconcile URL says ``reconciled``."""

    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        if handler.command == "POST":
            send(handler, 502, b"{}")
        else:
            send(handler, 200, json.dumps(reconciled).encode())

    return reply


@pytest.mark.parametrize(
    "reconciled",
    [
        {"applied": True},
        {"applied": True, "result": None},
        {"applied": True, "result": [1]},
        {"applied": True, "result": "paid"},
    ],
)
def test_an_applied_answer_without_a_result_object_cannot_tell_and_escalates(
    demo: Any, scripted_http: ScriptedHttp, reconciled: dict[str, Any]
) -> None:
    scripted_http.reply = lost_then(reconciled)
    enable(register_http(demo, scripted_http, reconcile=True), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    lost = operation.calls.get()
    assert (lost.state, lost.model_result) == (CallState.UNKNOWN_OUTCOME, None)
    assert operation.state == OperationState.ESCALATED
    assert [request[0] for request in scripted_http.requests] == ["POST", "GET"]
