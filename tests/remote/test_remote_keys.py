"""A remote side-effecting tool's idempotency key holds the subject whatever its review's
``key_context`` says: a stored result answers only calls for the same customer."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.engine import start
from tests.remote.conftest import ScriptedHttp, send
from tests.remote.test_remote_tools import enable, register_http, run
from tests.replies import call, final, response
from toolcalls.binding import digest
from toolcalls.models import Operation
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _echo_subject(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """The tool's answer names whom it ran for, as a real lookup's data would."""
    sent = json.loads(body)
    data = {"subject_ref": sent["subject_ref"], "operation_id": sent["operation_id"]}
    send(handler, 200, json.dumps(data).encode())


def _run_for(demo: Any, subject_ref: str, arguments: dict[str, Any]) -> Operation:
    replies = [response(call("call_1", "ledger__pay", arguments)), final()]
    return start(demo, replies, tool_names=["ledger__pay"], subject_ref=subject_ref)


def test_a_stored_result_is_never_given_to_another_customers_call(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = _echo_subject
    enable(register_http(demo, scripted_http), "pay", risk="write", key_arguments=["order_id"])
    first = _run_for(demo, "cus_1001", {"order_id": "lookup"}).calls.get()
    other = _run_for(demo, "cus_2002", {"order_id": "lookup"})
    theirs = other.calls.get()
    assert theirs.state == CallState.SUCCEEDED  # it ran for its own customer
    assert (theirs.model_result or {})["data"] == {
        "subject_ref": "cus_2002",
        "operation_id": other.public_id,
    }
    assert theirs.idempotency_key != first.idempotency_key
    assert len(scripted_http.requests) == 2
    again = _run_for(demo, "cus_1001", {"order_id": "lookup"}).calls.get()
    assert again.state == CallState.SUPPRESSED  # the same customer's intent still runs once
    assert again.model_result == first.model_result
    assert len(scripted_http.requests) == 2


@pytest.mark.parametrize("key_context", [[], ["subject_ref"], ["subject_ref", "tenant_ref"]])
def test_the_key_holds_the_subject_whatever_key_context_says(
    demo: Any, scripted_http: ScriptedHttp, key_context: list[str]
) -> None:
    scripted_http.reply = _echo_subject
    server = register_http(demo, scripted_http)
    enable(server, "pay", risk="write", key_context=key_context)
    paid = run(demo, "ledger__pay", {"order_id": "ORD-1"}).calls.get()
    trusted = {"tenant_ref": "acme", "subject_ref": "cus_1001"}
    context = {name: trusted[name] for name in key_context}
    form = {
        "tenant_ref": "acme",
        "context": {"subject_ref": "cus_1001", **context},
        "arguments": {"order_id": "ORD-1"},
    }
    # A form that chose the subject keeps the key it had.
    assert paid.idempotency_key == f"ledger__pay:{digest(form)}"
