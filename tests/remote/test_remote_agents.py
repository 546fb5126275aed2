"""An agent profile's approval override on a remote tool: accepted as on a deployed tool and
applied by the engine (a call of it waits for a person), through the API. A real HTTP tool on
127.0.0.1, in a thread of the test."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from tests.api.support import (
    AGENTS_WRITE,
    READ,
    WRITE,
    error_of,
    fields_of,
    get,
    keyed_client,
    post,
)
from tests.engine import operator
from tests.remote.conftest import ScriptedHttp
from tests.remote.test_remote_tools import answer, enable, register_http
from tests.replies import call, final, response
from toolcalls.actors import Actor
from toolcalls.demo.services import DemoSeed
from toolcalls.remote.models import RemoteTool
from toolcalls.remote.services import remote_tool_disable
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

TOOL = "ledger__pay"
AGENT = {"family": "openai_responses", "model": "gpt-5.1", "tools": [TOOL]}


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, AGENTS_WRITE, name="billing")[0]


@pytest.fixture
def paying(demo: DemoSeed, scripted_http: ScriptedHttp) -> ScriptedHttp:
    """A write HTTP tool reviewed to need no approval, which pays."""
    scripted_http.reply = answer(200, b'{"paid": true}')
    enable(register_http(demo, scripted_http), "pay", risk="write")
    return scripted_http


def _run(client: APIClient, agent: str, amount: int = 1200) -> dict[str, Any]:
    """An operation of ``agent`` whose model pays ``amount`` cents for ORD-1, as the API shows
    it once the replay has run as far as it can."""
    replies = [response(call("c1", TOOL, {"order_id": "ORD-1", "amount_cents": amount})), final()]
    body = {
        "agent": agent,
        "input": "Pay order ORD-1.",
        "subject_ref": "cus_1001",
        "transport": "replay",
        "replies": replies,
    }
    started = post(client, "/operations", body)
    assert started.status_code == 201, started.content
    return started.json()


def test_an_always_override_on_a_remote_tool_parks_its_call_for_a_person(
    client: APIClient, paying: ScriptedHttp
) -> None:
    overrides = {TOOL: {"policy": "always"}}
    made = post(client, "/agents", {**AGENT, "name": "payer", "approval_overrides": overrides})
    assert made.status_code == 201, made.content
    assert made.json()["latest"]["approval_overrides"] == overrides

    operation = _run(client, "payer")
    assert operation["state"] == OperationState.WAITING_APPROVAL
    assert paying.requests == []  # nothing was sent: it waits for a person
    (approval,) = get(client, "/approvals", {"operation": operation["id"]}).json()["results"]
    assert approval["tool"] == TOOL
    assert approval["policy_revision"].endswith("+payer@1")

    pending = ApprovalRequest.objects.get(public_id=approval["id"])
    approval_decide(approval_pk=pending.pk, actor=operator(), approve=True, reason="")
    done = get(client, f"/operations/{operation['id']}").json()
    assert done["state"] == OperationState.COMPLETED
    (paid,) = get(client, f"/operations/{operation['id']}/calls").json()["results"]
    assert paid["state"] == CallState.SUCCEEDED
    assert len(paying.requests) == 1


def test_without_the_override_the_same_call_runs_at_once(
    client: APIClient, paying: ScriptedHttp
) -> None:
    made = post(client, "/agents", {**AGENT, "name": "payer"})
    assert made.status_code == 201, made.content
    assert _run(client, "payer")["state"] == OperationState.COMPLETED
    assert len(paying.requests) == 1


def test_a_threshold_override_needs_the_remote_tools_amount(
    demo: DemoSeed, client: APIClient, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = answer(200, b'{"paid": true}')
    server = register_http(demo, scripted_http)
    enable(server, "pay", risk="write")  # approval: never, so no amount
    threshold = {TOOL: {"policy": "above_threshold", "threshold": 1000}}
    body = {**AGENT, "name": "payer", "approval_overrides": threshold}
    error = error_of(post(client, "/agents", body), 400, "invalid_request")
    assert fields_of(error) == {
        f"approval_overrides.{TOOL}": ["this tool has no amount to compare with a threshold"]
    }
    condition = "amount_cents > 5000"
    enable(server, "pay", risk="write", approval="condition", approval_condition=condition)
    made = post(client, "/agents", body)
    assert made.status_code == 201, made.content
    assert _run(client, "payer", amount=900)["state"] == OperationState.COMPLETED
    assert _run(client, "payer", amount=1200)["state"] == OperationState.WAITING_APPROVAL


def test_a_threshold_override_whose_tool_lost_its_amount_fails_closed(
    demo: DemoSeed, client: APIClient, scripted_http: ScriptedHttp
) -> None:
    """Reviewed again without an amount, the tool keeps the agent's threshold override: every
    call of it then waits for a person, never none."""
    scripted_http.reply = answer(200, b'{"paid": true}')
    server = register_http(demo, scripted_http)
    condition = "amount_cents > 5000"
    enable(server, "pay", risk="write", approval="condition", approval_condition=condition)
    threshold = {TOOL: {"policy": "above_threshold", "threshold": 1000}}
    made = post(client, "/agents", {**AGENT, "name": "payer", "approval_overrides": threshold})
    assert made.status_code == 201, made.content
    enable(server, "pay", risk="write")  # approval: never
    assert _run(client, "payer", amount=100)["state"] == OperationState.WAITING_APPROVAL
    assert scripted_http.requests == []


def test_an_override_of_a_tool_the_agent_does_not_offer_is_still_refused(
    client: APIClient, paying: ScriptedHttp
) -> None:
    body = {
        **AGENT,
        "name": "payer",
        "tools": ["get_order"],
        "approval_overrides": {TOOL: {"policy": "always"}},
    }
    error = error_of(post(client, "/agents", body), 400, "invalid_request")
    assert fields_of(error) == {f"approval_overrides.{TOOL}": ["not one of the agent's tools"]}


def test_a_remote_tool_disabled_since_the_revision_refuses_it_naming_the_agent(
    client: APIClient, paying: ScriptedHttp
) -> None:
    assert post(client, "/agents", {**AGENT, "name": "payer"}).status_code == 201
    remote_tool_disable(tool_pk=RemoteTool.objects.get(name=TOOL).pk, actor=Actor.system("test"))
    body = {"agent": "payer", "input": "Pay.", "subject_ref": "cus_1001", "replies": [final()]}
    error = error_of(
        post(client, "/operations", {**body, "transport": "replay"}), 400, "invalid_request"
    )
    said = (
        f"agent payer@1 offers {TOOL}, which is not enabled for the tenant: enable it or revise "
        "the agent's tools"
    )
    assert fields_of(error) == {"agent": [said]}
    assert paying.requests == []
