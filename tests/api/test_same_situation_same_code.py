"""One situation, one error code: a client branches on ``error.code``, so a situation answers
the same code whichever endpoint meets it and whenever it is met."""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.support import READ, WRITE, create, error_of, get, keyed_client, post
from tests.replies import final
from toolcalls.demo.services import DemoSeed
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]
OPERATION_ACTION = "/api/v1/operations/{public_id}/"

S = OperationState
ACTIONS = {"cancel": {"reason": "again"}, "extend": {}, "stop": {"reason": "again"}}


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, name="billing")[0]


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


@pytest.mark.parametrize("action", ["extend", "stop"])
def test_a_running_operation_that_did_not_escalate_is_not_escalated(
    client: APIClient, action: str
) -> None:
    operation = create(client)
    assert (operation["state"], operation["ended"]) == (S.WAITING_APPROVAL, False)
    response = post(client, f"/operations/{operation['id']}/{action}", ACTIONS[action])
    error_of(response, 409, "not_escalated")


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
