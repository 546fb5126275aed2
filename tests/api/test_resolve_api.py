"""Recording a lost outcome through the API (``POST /operations/{id}/calls/{call}/resolve``), the
twin of the console's resolve action: an HTTP tool that answers a write with a 5xx and has no
reconcile URL leaves its call UNKNOWN_OUTCOME and the operation ESCALATED; extending is
``409 needs_resolution``, resolving the call lets the operation go on. A real HTTP tool on
127.0.0.1, in a thread of the test."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.support import READ, WRITE, create, error_of, fields_of, get, keyed_client, post
from tests.remote.conftest import ScriptedHttp, scripted_http  # noqa: F401  (the fixture)
from tests.remote.test_remote_tools import answer, enable, register_http
from tests.replies import call, final, response
from toolcalls.demo.services import DemoSeed
from toolcalls.models import IdempotencyRecord, ToolCall
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
TOOL = "ledger__pay"


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, name="billing")[0]


@pytest.fixture
def lost(demo: DemoSeed, scripted_http: ScriptedHttp) -> ScriptedHttp:  # noqa: F811
    """An irreversible HTTP tool whose every answer is a 503, without a reconcile URL."""
    scripted_http.reply = answer(503, b"{}")
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    return scripted_http


def _escalated(client: APIClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """An operation started through the API whose one call's outcome is unknown: it and the
    call, as the API shows them."""
    replies = [response(call("call_1", TOOL, {"order_id": "ORD-1"})), final("Paid.")]
    operation = create(client, tools=[TOOL], replies=replies)
    assert (operation["state"], operation["reason_code"]) == (S.ESCALATED, "UNKNOWN_OUTCOME")
    (lost_call,) = get(client, f"/operations/{operation['id']}/calls").json()["results"]
    assert lost_call["state"] == CallState.UNKNOWN_OUTCOME
    return operation, lost_call


def _resolve_url(operation: dict[str, Any], lost_call: dict[str, Any]) -> str:
    return f"/operations/{operation['id']}/calls/{lost_call['id']}/resolve"


def test_needs_resolution_names_the_call_then_resolving_it_lets_the_operation_go_on(
    client: APIClient, lost: ScriptedHttp
) -> None:
    operation, lost_call = _escalated(client)
    refused = post(client, f"/operations/{operation['id']}/extend", {})
    error = error_of(refused, 409, "needs_resolution")
    assert error["details"] == {"calls": [lost_call["id"]]}
    assert f"…/calls/{lost_call['id']}/resolve" in error["message"]
    assert TOOL in error["message"]

    body = {"resolution": "not_applied", "note": "no payment in the ledger"}
    resolved = post(client, _resolve_url(operation, lost_call), body)
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["id"] == operation["id"]

    done = get(client, f"/operations/{operation['id']}").json()
    assert (done["state"], done["final_text"], done["reason_code"]) == (S.COMPLETED, "Paid.", None)
    (settled,) = get(client, f"/operations/{operation['id']}/calls").json()["results"]
    assert (settled["state"], settled["error_code"]) == (CallState.FAILED, "NOT_APPLIED")
    assert len(lost.requests) == 1  # nothing was sent again
    events = get(client, f"/operations/{operation['id']}/events").json()["results"]
    (recorded,) = [e for e in events if "resolution" in e["details"]]
    assert recorded["actor"] == "service:billing"
    assert recorded["call"] == lost_call["id"]
    assert recorded["to_state"] == CallState.FAILED
    assert recorded["details"]["resolution"] == "not_applied"
    assert recorded["details"]["note"] == "no payment in the ledger"
    # The call is settled and the operation ended: nothing is left to resolve or extend.
    error_of(post(client, _resolve_url(operation, lost_call), body), 409, "not_unknown_outcome")
    error_of(post(client, f"/operations/{operation['id']}/extend", {}), 409, "already_ended")


@pytest.mark.parametrize(
    ("resolution", "key"),
    [
        ("not_applied", None),
        ("applied", IdempotencyRecord.State.DONE),
        ("unknown", IdempotencyRecord.State.IN_FLIGHT),
    ],
)
def test_a_lost_call_of_an_operation_stopped_meanwhile_is_still_settled(
    client: APIClient, lost: ScriptedHttp, resolution: str, key: Any
) -> None:
    """Its key was held for ever: the same intent, asked again, could never run."""
    operation, lost_call = _escalated(client)
    stopped = post(client, f"/operations/{operation['id']}/stop", {"reason": "By phone."})
    assert stopped.status_code == 200, stopped.content
    resolved = post(client, _resolve_url(operation, lost_call), {"resolution": resolution})
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["state"] == S.STOPPED  # it stays as it ended
    record = IdempotencyRecord.objects.filter(call__public_id=lost_call["id"]).first()
    assert (record.state if record else None) == key
    assert len(lost.requests) == 1  # nothing was sent again


@pytest.mark.parametrize(
    ("resolution", "state", "code", "key"),
    [
        ("applied", CallState.SUCCEEDED, None, IdempotencyRecord.State.DONE),
        ("not_applied", CallState.FAILED, "NOT_APPLIED", None),
        ("unknown", CallState.FAILED, "UNKNOWN_OUTCOME", IdempotencyRecord.State.IN_FLIGHT),
    ],
)
def test_each_resolution_settles_the_call_as_the_console_does(
    client: APIClient, lost: ScriptedHttp, resolution: str, state: str, code: str | None, key: Any
) -> None:
    operation, lost_call = _escalated(client)
    resolved = post(client, _resolve_url(operation, lost_call), {"resolution": resolution})
    assert resolved.status_code == 200, resolved.content
    (settled,) = get(client, f"/operations/{operation['id']}/calls").json()["results"]
    assert (settled["state"], settled["error_code"]) == (state, code)
    record = IdempotencyRecord.objects.filter(call__public_id=lost_call["id"]).first()
    assert (record.state if record else None) == key
    events = get(client, f"/operations/{operation['id']}/events").json()["results"]
    (recorded,) = [e for e in events if "resolution" in e["details"]]
    assert (recorded["details"]["resolution"], recorded["details"]["note"]) == (resolution, None)


def test_a_resolution_is_one_of_three_and_nothing_is_recorded_otherwise(
    client: APIClient, lost: ScriptedHttp
) -> None:
    operation, lost_call = _escalated(client)
    url = _resolve_url(operation, lost_call)
    for body, field in [
        ({}, "resolution"),
        ({"resolution": "done"}, "resolution"),
        ({"resolution": True}, "resolution"),
        ({"resolution": "applied", "note": 5}, "note"),
        ({"resolution": "applied", "note": "x" * 501}, "note"),
        ({"resolution": "applied", "outcome": "applied"}, "outcome"),
    ]:
        error = error_of(post(client, url, body), 400, "invalid_request")
        assert set(fields_of(error)) == {field}, body
    assert ToolCall.objects.get(public_id=lost_call["id"]).state == CallState.UNKNOWN_OUTCOME
    assert get(client, f"/operations/{operation['id']}").json()["state"] == S.ESCALATED


def test_an_unknown_call_or_operation_is_404_and_another_operations_call_too(
    client: APIClient, lost: ScriptedHttp
) -> None:
    operation, lost_call = _escalated(client)
    body = {"resolution": "applied"}
    other = create(client)  # the refund waiting for approval
    for path in [
        f"/operations/{operation['id']}/calls/tc_nosuchcall/resolve",
        f"/operations/op_nosuchoperation/calls/{lost_call['id']}/resolve",
        f"/operations/{other['id']}/calls/{lost_call['id']}/resolve",
    ]:
        error_of(post(client, path, body), 404, "not_found")
    assert ToolCall.objects.get(public_id=lost_call["id"]).state == CallState.UNKNOWN_OUTCOME


def test_a_call_whose_outcome_is_not_unknown_is_409_not_unknown_outcome(
    client: APIClient,
) -> None:
    operation = create(client)  # its submit_refund waits for approval
    calls = get(client, f"/operations/{operation['id']}/calls").json()["results"]
    for one in calls:
        path = f"/operations/{operation['id']}/calls/{one['id']}/resolve"
        error = error_of(post(client, path, {"resolution": "applied"}), 409, "not_unknown_outcome")
        assert one["state"] in error["message"]
    assert get(client, f"/operations/{operation['id']}").json()["state"] == S.WAITING_APPROVAL


def test_a_stopped_operations_lost_call_takes_only_a_resolution(
    client: APIClient, lost: ScriptedHttp
) -> None:
    operation, lost_call = _escalated(client)
    stopped = post(client, f"/operations/{operation['id']}/stop", {"reason": "by phone"})
    assert stopped.status_code == 200, stopped.content
    url = _resolve_url(operation, lost_call)
    for body in [{}, {"resolution": "done"}]:
        assert list(fields_of(error_of(post(client, url, body), 400, "invalid_request"))) == [
            "resolution"
        ]
    assert ToolCall.objects.get(public_id=lost_call["id"]).state == CallState.UNKNOWN_OUTCOME
    unknown = f"/operations/{operation['id']}/calls/tc_nosuchcall/resolve"
    error_of(post(client, unknown, {"resolution": "applied"}), 404, "not_found")


def test_resolving_needs_operations_write_and_a_retry_gets_the_first_answer(
    demo: DemoSeed, client: APIClient, lost: ScriptedHttp
) -> None:
    operation, lost_call = _escalated(client)
    reader = keyed_client(demo.tenant, READ)[0]
    url = _resolve_url(operation, lost_call)
    error = error_of(post(reader, url, {"resolution": "applied"}), 403, "forbidden")
    assert WRITE in error["message"]
    first = post(client, url, {"resolution": "applied"}, idempotency_key="resolve-1")
    assert first.status_code == 200, first.content
    again = post(client, url, {"resolution": "applied"}, idempotency_key="resolve-1")
    assert (again.status_code, again["Idempotent-Replayed"]) == (200, "true")
    assert again.json() == first.json()
    error_of(post(client, url, {"resolution": "applied"}), 409, "not_unknown_outcome")
