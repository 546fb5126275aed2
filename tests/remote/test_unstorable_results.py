"""A tool's answer holding what PostgreSQL cannot store (NUL, an unpaired surrogate, escaped in
its JSON) is recorded at once with U+FFFD in their place, audited: a side effect that answered
is applied, never left running until its lease runs out and sent again. An HTTP tool on
127.0.0.1, PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp
from tests.remote.test_remote_tools import answer, enable, register_http, run
from toolcalls.models import IdempotencyRecord
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.mark.parametrize("escaped", [rb"x\u0000y", rb"x\ud800y"])
def test_a_result_with_what_cannot_be_stored_succeeds_with_replacements(
    demo: Any, scripted_http: ScriptedHttp, escaped: bytes
) -> None:
    scripted_http.reply = answer(200, b'{"a": "' + escaped + b'", "b\\u0000": 1}')
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    paid = operation.calls.get()
    assert paid.state == CallState.SUCCEEDED
    assert (paid.model_result or {})["data"] == {"a": "x\ufffdy", "b\ufffd": 1}
    assert operation.state == OperationState.COMPLETED
    assert len(scripted_http.requests) == 1
    assert IdempotencyRecord.objects.get(call=paid).state == IdempotencyRecord.State.DONE
    assert "replaced" in (paid.protected_audit or {})["handler"]


def test_an_error_answer_with_nul_is_a_tool_error_at_once(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    body = b'{"error": {"code": "BAD\\u0000", "message": "no\\u0000pe"}}'
    scripted_http.reply = answer(422, body)
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    refused = operation.calls.get()
    assert refused.state == CallState.FAILED
    assert (refused.model_result or {})["error"] == {"code": "BAD\ufffd", "message": "no\ufffdpe"}
    assert len(scripted_http.requests) == 1
