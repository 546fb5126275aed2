"""Follow-ups: ``POST /api/v1/operations/{id}/messages`` continues an ended operation as a new,
linked one; effects already done are answered from their idempotency records."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from approvals.services import approval_decide
from tests import replies as r
from tests.api.support import (
    READ,
    WRITE,
    create,
    error_of,
    fields_of,
    get,
    keyed_client,
    other_tenant,
    post,
)
from tests.engine import bundled_replies, operator, start
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Operation, ReplayScript
from toolcalls.services.catalogue import tenant_tool_set
from toolcalls.services.operations import OperationError, operation_follow_up
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
#: The refund the bundled scenario submits (its draft is the order's first).
SUBMIT = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, name="billing")[0]


def _approve(operation_id: str) -> Operation:
    operation = Operation.objects.get(public_id=operation_id)
    approval = operation.approvals.get(state="PENDING")
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    return operation


def _follow_up(client: APIClient, operation_id: str, replies: list[dict[str, Any]]) -> Any:
    body = {"input": "Did it go through? Submit it again if not.", "replies": replies}
    return post(client, f"/operations/{operation_id}/messages", body)


def test_a_follow_up_gets_a_repeated_refund_from_its_idempotency_record(
    client: APIClient,
) -> None:
    parent = _approve(create(client)["id"])
    assert parent.state == S.COMPLETED
    refund = parent.calls.get(tool_name="submit_refund")
    replies = [r.response(r.call("call_again", "submit_refund", SUBMIT)), r.final("Done once.")]
    response = _follow_up(client, parent.public_id, replies)
    assert response.status_code == 201, response.content
    follow_up = response.json()
    assert (follow_up["parent"], follow_up["state"]) == (parent.public_id, S.WAITING_APPROVAL)
    assert (follow_up["family"], follow_up["model"]) == (parent.family, parent.model)
    assert follow_up["tools"] == parent.tool_names
    done = _approve(follow_up["id"])
    assert done.state == S.COMPLETED
    again = done.calls.get()
    assert again.state == CallState.SUPPRESSED
    assert again.model_result == refund.model_result
    assert LedgerEntry.objects.count() == 1
    shown = get(client, f"/operations/{parent.public_id}").json()
    assert (shown["state"], shown["follow_ups"], shown["parent"]) == (
        S.COMPLETED,
        [done.public_id],
        None,
    )


def test_the_follow_up_carries_the_conversation_and_the_final_reply(
    client: APIClient, demo: DemoSeed
) -> None:
    parent = start(demo, [r.final("Your order ships Monday.")], instructions="Answer briefly.")
    follow_up = _followed(parent, "And the other order?", [r.final("That one shipped.")])
    assert follow_up.state == S.COMPLETED
    body = follow_up.turns.get(index=0).request_body
    assert body["instructions"] == "Answer briefly."
    assert body["input"][: len(parent.conversation)] == parent.conversation
    reply, asked = body["input"][len(parent.conversation) :]
    assert (reply["role"], reply["content"][0]["text"]) == ("assistant", "Your order ships Monday.")
    assert asked == {"type": "message", "role": "user", "content": "And the other order?"}
    assert follow_up.messages == [
        {"role": "user", "text": parent.input_text},
        {"role": "assistant", "text": "Your order ships Monday."},
    ]
    parent_events = list(parent.events.order_by("seq").values_list("kind", "details"))
    assert parent_events[-1] == ("operation.followed_up", {"follow_up": follow_up.public_id})
    created = follow_up.events.get(seq=1)
    assert created.details["parent"] == parent.public_id


def test_a_truncated_reply_goes_on_as_text_never_as_a_call(demo: DemoSeed) -> None:
    parent = start(demo, bundled_replies("max_tokens"))
    assert parent.state == S.INCOMPLETE
    follow_up = _followed(parent, "Go on.", [r.final("Done.")])
    added = follow_up.turns.get(index=0).request_body["input"][len(parent.conversation) :]
    assert all(item.get("type") != "function_call" for item in added)
    assert added[-1]["content"] == "Go on."


@pytest.mark.parametrize(
    ("scenario", "ended"), [("refusal", S.REFUSED), ("max_tokens", S.INCOMPLETE)]
)
def test_a_refused_or_incomplete_operation_can_be_followed_up_and_stays_as_it_ended(
    client: APIClient, scenario: str, ended: str
) -> None:
    parent = create(client, scenario)
    assert parent["state"] == ended
    response = _follow_up(client, parent["id"], [r.final("Here is what I can do.")])
    assert response.status_code == 201, response.content
    follow_up = response.json()
    assert (follow_up["parent"], follow_up["state"]) == (parent["id"], S.COMPLETED)
    shown = get(client, f"/operations/{parent['id']}").json()
    assert (shown["state"], shown["follow_ups"]) == (ended, [follow_up["id"]])


def test_only_an_operation_that_ended_with_an_answer_can_be_followed_up(
    client: APIClient,
) -> None:
    parked = create(client)
    error = error_of(_follow_up(client, parked["id"], [r.final()]), 409, "not_followable")
    assert error["details"] == {"state": S.WAITING_APPROVAL}
    post(client, f"/operations/{parked['id']}/cancel", {"reason": "not needed"})
    error = error_of(_follow_up(client, parked["id"], [r.final()]), 409, "not_followable")
    assert error["details"] == {"state": S.CANCELLED}
    assert Operation.objects.count() == 1


def test_replies_go_with_the_replay_transport(client: APIClient) -> None:
    parent = _approve(create(client)["id"])
    response = post(client, f"/operations/{parent.public_id}/messages", {"input": "More?"})
    assert set(fields_of(error_of(response, 400, "invalid_request"))) == {"replies"}


def test_a_follow_ups_replies_are_checked_as_the_operations_are(client: APIClient) -> None:
    parent = _approve(create(client)["id"])
    wrong = {**r.final(), "http_status": 503}
    error = error_of(_follow_up(client, parent.public_id, [wrong]), 400, "invalid_request")
    assert fields_of(error) == {
        "replies": [
            "0/http_status: a response reply has a 2xx status, not 503: an error status is an "
            "http_error"
        ]
    }
    assert not parent.follow_ups.exists()


def test_a_tool_disabled_since_refuses_the_follow_up(client: APIClient, demo: DemoSeed) -> None:
    parent = _approve(create(client)["id"])
    actor = Actor.system("tests")
    tenant_tool_set(tenant=demo.tenant, tool_name="get_order", enabled=False, actor=actor)
    error = error_of(_follow_up(client, parent.public_id, [r.final()]), 400, "invalid_request")
    assert set(fields_of(error)) == {"tools"}
    with pytest.raises(OperationError):
        operation_follow_up(
            operation_pk=parent.pk, requested_by=parent.requested_by, input_text="More?"
        )


def test_another_tenants_operation_cannot_be_followed_up(client: APIClient) -> None:
    parent = _approve(create(client)["id"])
    outsider, _ = keyed_client(other_tenant(), READ, WRITE, name="globex")
    error_of(_follow_up(outsider, parent.public_id, [r.final()]), 404, "not_found")
    assert not parent.follow_ups.exists()


def test_follow_ups_chain(client: APIClient) -> None:
    parent = _approve(create(client)["id"])
    first = _follow_up(client, parent.public_id, [r.final("First.")]).json()
    second = _follow_up(client, parent.public_id, [r.final("Second.")]).json()
    third = _follow_up(client, first["id"], [r.final("Third.")]).json()
    assert get(client, f"/operations/{parent.public_id}").json()["follow_ups"] == [
        first["id"],
        second["id"],
    ]
    assert get(client, f"/operations/{first['id']}").json()["follow_ups"] == [third["id"]]
    listed = {op["id"]: op for op in get(client, "/operations").json()["results"]}
    assert listed[third["id"]]["parent"] == first["id"]


def _followed(parent: Operation, text: str, replies: list[dict[str, Any]]) -> Operation:
    """A follow-up of ``parent`` through the service, run on ``replies``, as stored."""
    script = ReplayScript(name="follow-up", family="openai_responses", model="m", replies=replies)
    follow_up = operation_follow_up(
        operation_pk=parent.pk,
        requested_by=parent.requested_by,
        input_text=text,
        replay_script=script,
    )
    follow_up.refresh_from_db()
    return follow_up
