"""One situation, one error code: a client branches on ``error.code``, so a situation answers
the same code whichever endpoint meets it and whenever it is met."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db.models.functions import Now
from rest_framework.test import APIClient, APIRequestFactory

from approvals.models import ApprovalRequest
from approvals.services import approvals_expire_due
from approvals.states import ApprovalState
from tests.api import support
from tests.api.support import API, DECIDE, READ, WRITE, create, error_of, get, keyed_client, post
from tests.replies import final
from toolcalls.api.views import OperationsView
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Operation
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]
OPERATION_ACTION = "/api/v1/operations/{public_id}/"

S = OperationState
ACTIONS = {"cancel": {"reason": "again"}, "extend": {}, "stop": {"reason": "again"}}


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    """A service that starts operations and decides approvals, but not its own."""
    return keyed_client(demo.tenant, READ, WRITE, DECIDE, name="billing")[0]


def _ended(client: APIClient, how: str) -> dict[str, Any]:
    """An operation that ended ``how``: COMPLETED by the model, CANCELLED while it waited for
    an approval, STOPPED once it escalated."""
    if how == S.COMPLETED:
        return create(client, replies=[final()])
    if how == S.CANCELLED:
        operation = create(client)
        path = f"/operations/{operation['id']}/cancel"
    else:
        operation = create(client, budgets={"max_turns": 1})
        path = f"/operations/{operation['id']}/stop"
    response = post(client, path, {"reason": "done with it"})
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("how", [S.COMPLETED, S.CANCELLED, S.STOPPED])
@pytest.mark.parametrize("action", list(ACTIONS))
def test_an_operation_that_ended_is_already_ended_for_cancel_extend_and_stop(
    client: APIClient, how: str, action: str
) -> None:
    operation = _ended(client, how)
    assert (operation["state"], operation["ended"]) == (how, True)
    response = post(client, f"/operations/{operation['id']}/{action}", ACTIONS[action])
    error = error_of(response, 409, "already_ended")
    assert error["message"] == f"the operation already ended ({how})"
    assert get(client, f"/operations/{operation['id']}").json()["state"] == how


#: Bodies each action refuses as input (400) while the operation runs.
WRONG_BODIES = {
    "cancel": [{}, {"reason": "   "}, {"reason": 5}, {"why": "again"}],
    "extend": [{"budgets": {"max_turns": 5.0}}, {"budgets": {"max_turns": 0}}, {"budget": {}}],
    "stop": [{}, {"reason": "\u200b"}, {"reason": None}, {"reason": "x" * 1001}],
}


@pytest.mark.parametrize("how", [S.COMPLETED, S.CANCELLED, S.STOPPED])
@pytest.mark.parametrize(
    ("action", "body"), [(action, body) for action in ACTIONS for body in WRONG_BODIES[action]]
)
def test_an_operation_that_ended_is_already_ended_whatever_the_body_says(
    client: APIClient, how: str, action: str, body: dict[str, Any]
) -> None:
    """The state is the refusal that holds whatever the request says: a client that left
    out the reason learns the operation ended, not to send a reason that would change nothing."""
    operation = _ended(client, how)
    response = post(client, f"/operations/{operation['id']}/{action}", body)
    error = error_of(response, 409, "already_ended")
    assert error["message"] == f"the operation already ended ({how})"
    assert get(client, f"/operations/{operation['id']}").json()["state"] == how


@pytest.mark.parametrize("action", ["extend", "stop"])
def test_a_running_operation_that_did_not_escalate_is_not_escalated(
    client: APIClient, action: str
) -> None:
    operation = create(client)
    assert (operation["state"], operation["ended"]) == (S.WAITING_APPROVAL, False)
    response = post(client, f"/operations/{operation['id']}/{action}", ACTIONS[action])
    error_of(response, 409, "not_escalated")


# --- an approval that expired ------------------------------------------------------------------


@pytest.fixture
def operator(demo: DemoSeed) -> APIClient:
    """A second service, which decides the first one's approvals."""
    return keyed_client(demo.tenant, READ, DECIDE, name="review")[0]


def _expired_approval(client: APIClient, *, swept: bool) -> dict[str, Any]:
    """A refund's approval past its expiry by the database's clock; recorded EXPIRED by the
    expiry sweep when ``swept``, else still PENDING as recorded."""
    operation = create(client)
    (approval,) = get(client, "/approvals", {"operation": operation["id"]}).json()["results"]
    rows = ApprovalRequest.objects.filter(public_id=approval["id"])
    rows.update(expires_at=Now() - timedelta(seconds=1))
    if swept:
        assert approvals_expire_due() == 1
    return approval


def _decision(
    client: APIClient, approval: dict[str, Any], decision: str, reason: str = "late"
) -> Any:
    body = {"decision": decision, "reason": reason}
    return post(client, f"/approvals/{approval['id']}/decide", body)


@pytest.mark.parametrize("swept", [False, True], ids=["before the sweep", "after the sweep"])
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_an_approval_that_expired_is_410_expired_whenever_it_is_decided(
    client: APIClient, operator: APIClient, swept: bool, decision: str
) -> None:
    approval = _expired_approval(client, swept=swept)
    first = error_of(_decision(operator, approval, decision), 410, "expired")
    stored = ApprovalRequest.objects.select_related("operation").get(public_id=approval["id"])
    assert stored.state == ApprovalState.EXPIRED  # recorded, by the sweep or by this decision
    expiry = f"{stored.expires_at:%Y-%m-%d %H:%M:%S}"
    assert first["message"] == f"This approval expired at {expiry} UTC."
    for again in ("approve", "deny"):
        error = error_of(_decision(operator, approval, again), 410, "expired")
        assert error["message"] == first["message"]
    assert not LedgerEntry.objects.exists()


@pytest.mark.parametrize("swept", [False, True], ids=["before the sweep", "after the sweep"])
def test_its_requester_deciding_an_approval_that_expired_is_410_expired_too(
    client: APIClient, swept: bool
) -> None:
    """Expired comes before who may decide it (four-eyes), as before any state it could be in."""
    approval = _expired_approval(client, swept=swept)
    error_of(_decision(client, approval, "approve"), 410, "expired")


def test_a_decision_a_person_made_is_409_already_decided(
    client: APIClient, operator: APIClient
) -> None:
    operation = create(client)
    (approval,) = get(client, "/approvals", {"operation": operation["id"]}).json()["results"]
    assert _decision(operator, approval, "deny").status_code == 200
    rows = ApprovalRequest.objects.filter(public_id=approval["id"])
    rows.update(expires_at=Now() - timedelta(seconds=1))  # past it now, but decided in time
    for again in ("approve", "deny"):
        error = error_of(_decision(operator, approval, again), 409, "already_decided")
        assert "DENIED" in error["message"]


# --- what the client accepts, what it sends -----------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;q=0",
        "application/json; q=0.000",
        "application/*;q=0",
        "*/*;q=0",
        "application/json;q=0, */*",  # the most specific range that matches JSON refuses it
        "application/json;q=0, text/html",
    ],
)
def test_an_accept_header_that_refuses_json_is_406_not_acceptable(
    client: APIClient, accept: str
) -> None:
    error = error_of(client.get(f"{API}/tools", HTTP_ACCEPT=accept), 406, "not_acceptable")
    assert error["message"] == "Could not satisfy the request Accept header."
    refused = client.post(
        f"{API}/operations", support.create_body(), format="json", HTTP_ACCEPT=accept,
        HTTP_IDEMPOTENCY_KEY="refused",
    )  # fmt: skip
    error_of(refused, 406, "not_acceptable")
    assert not Operation.objects.exists()  # refused before anything was done


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "application/json;q=0.001",
        "*/*;q=0, application/json",
        "application/*;q=0, application/json;q=0.5",
        "application/json;q=0, application/json",  # equally specific: the one taking it wins
        "text/html, */*;q=0.1",
    ],
)
def test_an_accept_header_that_takes_json_is_answered_in_json(
    client: APIClient, accept: str
) -> None:
    response = client.get(f"{API}/tools", HTTP_ACCEPT=accept)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"


def test_the_event_stream_refused_is_406_not_acceptable(client: APIClient) -> None:
    operation = create(client)
    path = f"{API}/operations/{operation['id']}/events/stream"
    for accept in ("text/event-stream;q=0, */*", "text/*;q=0, application/json"):
        refused = client.get(path, HTTP_ACCEPT=accept)
        error = error_of(refused, 406, "not_acceptable")
        assert error["message"] == "This endpoint answers in text/event-stream only."


def test_a_body_without_a_content_type_is_415_saying_so(client: APIClient) -> None:
    body = b'{"input": "hi"}'
    response = client.generic(
        "POST", f"{API}/operations", body, content_type="", HTTP_IDEMPOTENCY_KEY="no-type"
    )
    error = error_of(response, 415, "unsupported_media_type")
    assert error["message"] == (
        "The request has a body but no Content-Type header; send Content-Type: application/json."
    )
    other = client.post(
        f"{API}/operations", body, content_type="text/plain", HTTP_IDEMPOTENCY_KEY="plain"
    )
    error = error_of(other, 415, "unsupported_media_type")
    assert error["message"] == (
        'Unsupported media type "text/plain" in request; send Content-Type: application/json.'
    )
    assert not Operation.objects.exists()


def test_a_body_whose_server_passed_no_content_type_is_415_saying_so(demo: DemoSeed) -> None:
    """As gunicorn passes a request without the header: no ``CONTENT_TYPE`` at all (PEP 3333)."""
    _, key = support.new_key(demo.tenant, READ, WRITE)
    request = APIRequestFactory().generic(
        "POST", f"{API}/operations", b'{"input": "hi"}', content_type="",
        HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_IDEMPOTENCY_KEY="absent",
    )  # fmt: skip
    del request.META["CONTENT_TYPE"]
    response = OperationsView.as_view()(request)
    response.render()
    assert response.status_code == 415
    error = response.data["error"]
    assert error["code"] == "unsupported_media_type"
    assert error["message"].startswith("The request has a body but no Content-Type header;")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=latin-1",
        "application/json; charset=bogus",
        "*/*",
        "application/*",
    ],
)
def test_a_body_not_declared_as_utf_8_json_is_415_and_not_read(
    client: APIClient, content_type: str
) -> None:
    """A charset other than UTF-8 would be decoded as declared (UTF-8 text read as latin-1:
    "café" stored as "cafÃ©"); a media range matches any parser. Neither is read as JSON."""
    body = support.create_body(input="Refund my café order, please.")
    raw = json.dumps(body, ensure_ascii=False).encode()
    response = client.post(
        f"{API}/operations", raw, content_type=content_type, HTTP_IDEMPOTENCY_KEY="typed"
    )
    error = error_of(response, 415, "unsupported_media_type")
    assert error["message"].endswith(" Content-Type: application/json.")
    if "charset" in content_type:
        assert error["message"].startswith("A JSON body is read as UTF-8 (RFC 8259), not in")
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=UTF-8", 'application/json; charset="utf8"']
)
def test_json_declared_as_utf_8_is_read(client: APIClient, content_type: str) -> None:
    body = support.create_body(input="Refund my café order, please.")
    raw = json.dumps(body, ensure_ascii=False).encode()
    response = client.post(
        f"{API}/operations", raw, content_type=content_type, HTTP_IDEMPOTENCY_KEY="utf-8"
    )
    assert response.status_code == 201, response.content
    assert response.json()["input"] == "Refund my café order, please."


def test_the_document_says_which_409_each_operation_action_answers() -> None:
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for action, codes in [
        ("cancel", ["already_ended"]),
        ("extend", ["already_ended", "not_escalated", "needs_resolution", "still_over"]),
        ("stop", ["already_ended", "not_escalated"]),
    ]:
        conflict = document["paths"][OPERATION_ACTION + action]["post"]["responses"]["409"]
        said = re.findall(r"`([a-z_]+)`:", conflict["description"])
        assert said == codes, (action, conflict["description"])


def test_the_document_says_what_deciding_an_approval_answers_409_and_410() -> None:
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    responses = document["paths"]["/api/v1/approvals/{public_id}/decide"]["post"]["responses"]
    conflict, gone = responses["409"]["description"], responses["410"]["description"]
    assert re.findall(r"`([a-z_]+)`:", conflict) == [
        "already_decided",
        "superseded",
        "precondition_failed",
    ]
    assert gone.startswith("`expired`:") and "whether the expiry sweep has recorded it" in gone


def test_the_document_says_what_406_and_415_mean() -> None:
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    responses = document["paths"]["/api/v1/operations"]["post"]["responses"]
    assert "refuses them with `q=0`" in responses["406"]["description"]
    assert "without a `Content-Type` header" in responses["415"]["description"]
    assert "a charset other than UTF-8" in responses["415"]["description"]


# --- how long a reason may be --------------------------------------------------------------------


def test_a_reason_ending_an_operation_is_at_most_1000_characters_kept_whole(
    client: APIClient,
) -> None:
    """As a decision's: its ``terminal_reason`` and the audit event hold all of it."""
    operation = create(client)
    path = f"/operations/{operation['id']}/cancel"
    refused = error_of(post(client, path, {"reason": "x" * 1001}), 400, "invalid_request")
    assert list(refused["details"]["fields"]) == ["reason"]
    reason = "r" * 990 + "0123456789"
    cancelled = post(client, path, {"reason": reason}).json()
    assert cancelled["terminal_reason"] == f"CANCELLED: {reason}"
    events = get(client, f"/operations/{operation['id']}/events").json()["results"]
    (ended,) = [e for e in events if e["to_state"] == S.CANCELLED and "reason" in e["details"]]
    assert ended["details"]["reason"] == f"CANCELLED: {reason}"


def test_a_reason_deciding_an_approval_is_at_most_1000_characters(
    client: APIClient, operator: APIClient
) -> None:
    operation = create(client)
    (approval,) = get(client, "/approvals", {"operation": operation["id"]}).json()["results"]
    body = {"decision": "deny", "reason": "x" * 1001}
    refused = post(operator, f"/approvals/{approval['id']}/decide", body)
    assert list(error_of(refused, 400, "invalid_request")["details"]["fields"]) == ["reason"]
    denied = _decision(operator, approval, "deny", reason="d" * 1000)
    assert denied.json()["decision_reason"] == "d" * 1000


def test_the_document_gives_every_reason_one_limit() -> None:
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schemas = document["components"]["schemas"]
    ending = schemas["ReasonRequest"]["properties"]["reason"]
    deciding = schemas["DecisionRequest"]["properties"]["reason"]
    assert (ending["maxLength"], deciding["maxLength"]) == (1000, 1000)
    assert ending["description"].startswith("Why, for people: up to 1000 characters, kept whole")
    assert deciding["description"].startswith("Why: up to 1000 characters")
