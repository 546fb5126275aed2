"""The request fields of an operation (instructions, messages, settings, agent) end to end, and
the agent profiles API: revisions, how a request combines with one, tenant isolation."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.support import (
    AGENTS_READ,
    AGENTS_WRITE,
    READ,
    WRITE,
    create,
    create_body,
    error_of,
    fields_of,
    get,
    keyed_client,
    other_tenant,
    post,
)
from tests.engine import bundled_replies
from tests.providers.settings_cases import INSTRUCTIONS, MAPPED, MESSAGES
from tests.replies import final
from toolcalls.actors import Actor
from toolcalls.binding import digest
from toolcalls.demo.services import DemoSeed
from toolcalls.models import AgentRevision, Operation
from toolcalls.services.catalogue import tenant_tool_set
from toolcalls.states import AuditKind

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]
SYSTEM = Actor.system("tests")
AGENT = {
    "name": "refunds",
    "family": "openai_responses",
    "model": "gpt-5.1",
    "instructions": "You are the refund desk of Acme.",
    "settings": {"temperature": 0.2, "max_output_tokens": 800},
    "tools": ["get_order", "create_refund_draft", "submit_refund"],
    "budgets": {"max_turns": 6},
    "approval_overrides": {"create_refund_draft": {"policy": "always"}},
}
REVISION_FIELDS = {
    "name", "revision", "family", "model", "instructions", "settings", "tools", "budgets",
    "approval_overrides", "note", "created_by", "created_at",
}  # fmt: skip


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    scopes = (READ, WRITE, AGENTS_READ, AGENTS_WRITE)
    return keyed_client(demo.tenant, *scopes, name="billing")[0]


def _agent(client: APIClient, **changes: Any) -> dict[str, Any]:
    response = post(client, "/agents", {**AGENT, **changes})
    assert response.status_code == 201, response.content
    return response.json()


def _from_agent(**fields: Any) -> dict[str, Any]:
    """A replay request body that names an agent instead of a family and model (``fields``
    added or replaced)."""
    body = create_body(replies=[final("Hello.")])
    del body["family"], body["model"]
    return {**body, **fields}


def _start(client: APIClient, **fields: Any) -> dict[str, Any]:
    """Start an operation from :func:`_from_agent`'s body; its representation (asserts 201)."""
    response = post(client, "/operations", _from_agent(**fields))
    assert response.status_code == 201, response.content
    return response.json()


# --- the request fields of an operation -------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "settings", "landed"),
    MAPPED,
    ids=[f"{family}-{index}" for index, (family, _, _) in enumerate(MAPPED)],
)
def test_instructions_and_settings_land_in_the_first_request_of_each_family(
    client: APIClient, family: str, settings: dict[str, Any], landed: dict[str, Any]
) -> None:
    body = create_body(
        family=family,
        model="model-under-test",
        replies=bundled_replies("refusal", family),
        tools=["get_order", "submit_refund"],
        instructions=INSTRUCTIONS,
        messages=[{"role": m.role, "text": m.text} for m in MESSAGES],
        settings=settings,
    )
    response = post(client, "/operations", body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["instructions"], data["settings"]) == (INSTRUCTIONS, settings)
    assert data["messages"] == body["messages"]
    operation = Operation.objects.get(public_id=data["id"])
    sent = operation.turns.get(index=0).request_body
    for field, value in landed.items():
        assert sent[field] == value, field
    if family == "openai_chat":
        assert sent["messages"][0] == {"role": "developer", "content": INSTRUCTIONS}
    created = operation.events.get(kind=AuditKind.OPERATION_CREATED).details
    asked = {key: created[key] for key in ("instructions_sha256", "messages", "settings")}
    assert asked == {
        "instructions_sha256": digest(INSTRUCTIONS),
        "messages": len(MESSAGES),
        "settings": settings,
    }


@pytest.mark.parametrize(
    ("family", "setting", "value"),
    [
        ("anthropic_messages", "temperature", 0.5),
        ("openai_responses", "thinking_budget_tokens", 2048),
        ("gemini_generate", "parallel_tool_calls", True),
        ("openai_chat", "tool_choice", "launch_rocket"),
        ("openai_responses", "reasoning_effort", "extreme"),
    ],
)
def test_a_setting_the_family_cannot_honour_is_400_naming_it(
    client: APIClient, family: str, setting: str, value: Any
) -> None:
    body = create_body(
        family=family, replies=bundled_replies("refusal", family), settings={setting: value}
    )
    error = error_of(post(client, "/operations", body), 400, "invalid_request")
    assert set(fields_of(error)) == {f"settings.{setting}"}, error
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"settings": {"temperature": "warm"}}, {"settings.temperature"}),
        ({"settings": {"max_output_tokens": 1.5}}, {"settings.max_output_tokens"}),
        ({"settings": {"parallel_tool_calls": "yes"}}, {"settings.parallel_tool_calls"}),
        ({"settings": {"colour": "blue"}}, {"settings.colour"}),
        ({"messages": [{"role": "system", "text": "x"}]}, {"messages.0.role"}),
        ({"messages": [{"role": "user"}]}, {"messages.0.text"}),
        ({"messages": [{"role": "user", "text": "x", "name": "a"}]}, {"messages.0.name"}),
        ({"messages": "hello"}, {"messages"}),
        ({"instructions": 5}, {"instructions"}),
        ({"family": None, "model": None}, {"family", "model"}),
    ],
)
def test_request_fields_are_validated_strictly(
    client: APIClient, fields: dict[str, Any], named: set[str]
) -> None:
    body = {k: v for k, v in create_body(replies=[final()], **fields).items() if v is not None}
    error = error_of(post(client, "/operations", body), 400, "invalid_request")
    assert set(fields_of(error)) == named, error
    assert not Operation.objects.exists()


def test_an_operation_without_agent_or_parent_says_null(client: APIClient) -> None:
    data = create(client, replies=[final()])
    assert (data["agent"], data["parent"], data["instructions"]) == (None, None, None)
    assert (data["messages"], data["settings"]) == ([], {})
    (listed,) = get(client, "/operations").json()["results"]
    assert listed["agent"] is None


# --- agent profiles ---------------------------------------------------------------------------


def test_create_read_and_revise_an_agent(client: APIClient) -> None:
    created = _agent(client, note="first")
    assert set(created) == {"name", "latest_revision", "created_at", "updated_at", "latest"}
    latest = created["latest"]
    assert set(latest) == REVISION_FIELDS
    assert (created["name"], created["latest_revision"], latest["revision"]) == ("refunds", 1, 1)
    assert latest["settings"] == {"temperature": 0.2, "max_output_tokens": 800}
    assert (latest["note"], latest["created_by"]) == ("first", "service:billing")
    response = post(client, "/agents/refunds/revisions", {"instructions": "Be brief."})
    assert response.status_code == 201, response.content
    second = response.json()
    assert (second["revision"], second["instructions"]) == (2, "Be brief.")
    assert second["tools"] == AGENT["tools"] and second["budgets"] == {"max_turns": 6}
    assert get(client, "/agents/refunds").json()["latest"] == second
    first = get(client, "/agents/refunds/revisions/1").json()
    assert first["instructions"] == AGENT["instructions"]
    listed = get(client, "/agents/refunds/revisions").json()["results"]
    assert [r["revision"] for r in listed] == [1, 2]
    (profile,) = get(client, "/agents").json()["results"]
    assert (profile["latest_revision"], profile["latest"]["revision"]) == (2, 2)
    for missing in ("/agents/refunds/revisions/3", "/agents/refunds/revisions/x", "/agents/nope"):
        error_of(get(client, missing), 404, "not_found")


def test_a_revision_that_changes_nothing_is_200_with_the_latest(client: APIClient) -> None:
    """No identical revision: the answer says nothing was made (200, not 201), with the latest."""
    _agent(client)
    latest = get(client, "/agents/refunds/revisions/1").json()
    for unchanged in ({}, {"note": "a note alone"}, {"settings": AGENT["settings"]}):
        response = post(client, "/agents/refunds/revisions", unchanged)
        assert response.status_code == 200, response.content
        assert response.json() == latest
    assert AgentRevision.objects.count() == 1


def test_a_revision_read_as_null_is_sent_back_as_it_was_read(client: APIClient) -> None:
    """A revision's instructions and note read ``null`` when none: ``null`` is taken back."""
    _agent(client)
    response = post(client, "/agents/refunds/revisions", {"instructions": None, "note": None})
    assert response.status_code == 201, response.content
    assert (response.json()["instructions"], response.json()["note"]) == (None, None)
    again = {name: response.json()[name] for name in ("instructions", "note", "settings")}
    assert post(client, "/agents/refunds/revisions", again).status_code == 200


def test_a_mapping_given_in_a_revision_replaces_the_latest_s_whole(client: APIClient) -> None:
    """As docs/api.md says: a field left out keeps its value, a field given replaces it."""
    _agent(client)
    response = post(client, "/agents/refunds/revisions", {"settings": {"temperature": 0.1}})
    assert response.status_code == 201, response.content
    assert response.json()["settings"] == {"temperature": 0.1}
    assert response.json()["budgets"] == {"max_turns": 6}


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"name": "Refunds!"}, {"name"}),
        ({"family": "openai_completions"}, {"family"}),
        ({"model": None}, {"model"}),
        ({"settings": {"temperature": 7}}, {"settings.temperature"}),
        ({"approval_overrides": {"submit_refund": {"policy": "never"}}},
         {"approval_overrides.submit_refund"}),
        ({"approval_overrides": {"get_order": {"policy": "above_threshold", "threshold": 1}}},
         {"approval_overrides.get_order"}),
        ({"budgets": {"max_turns": "six"}}, {"budgets.max_turns"}),
        ({"budgets": {"max_parallel": 2.0}}, {"budgets.max_parallel"}),
        ({"tools": ["get_order", "submit_refund", "get_order"]}, {"tools"}),
        ({"colour": "blue"}, {"colour"}),
    ],
)  # fmt: skip
def test_a_bad_definition_is_400_naming_the_field(
    client: APIClient, changes: dict[str, Any], named: set[str]
) -> None:
    body = {k: v for k, v in {**AGENT, **changes}.items() if v is not None}
    error = error_of(post(client, "/agents", body), 400, "invalid_request")
    assert set(fields_of(error)) == named, error
    assert not AgentRevision.objects.exists()


def test_a_budget_above_the_server_limit_is_bad_budget_naming_it(client: APIClient) -> None:
    response = post(client, "/agents", {**AGENT, "budgets": {"max_turns": 100_000}})
    assert set(fields_of(error_of(response, 400, "bad_budget"))) == {"budgets.max_turns"}
    assert not AgentRevision.objects.exists()


def test_a_tool_the_tenant_may_not_use_is_refused_as_for_operations(client: APIClient) -> None:
    error = error_of(
        post(client, "/agents", {**AGENT, "tools": ["launch_rocket"]}), 400, "invalid_request"
    )
    assert set(fields_of(error)) == {"tools"}


def test_a_name_is_taken_once(client: APIClient) -> None:
    _agent(client)
    error_of(post(client, "/agents", AGENT), 409, "agent_exists")


def test_a_bad_change_keeps_the_latest_revision(client: APIClient) -> None:
    _agent(client)
    response = post(client, "/agents/refunds/revisions", {"settings": {"top_p": 3}})
    assert set(fields_of(error_of(response, 400, "invalid_request"))) == {"settings.top_p"}
    assert get(client, "/agents/refunds").json()["latest_revision"] == 1


def test_another_tenants_agents_are_404_and_never_listed(client: APIClient) -> None:
    _agent(client)
    outsider, _ = keyed_client(other_tenant(), READ, WRITE, AGENTS_READ, AGENTS_WRITE)
    assert get(outsider, "/agents").json()["results"] == []
    for path in ("/agents/refunds", "/agents/refunds/revisions", "/agents/refunds/revisions/1"):
        error_of(get(outsider, path), 404, "not_found")
    error_of(post(outsider, "/agents/refunds/revisions", {}), 404, "not_found")
    error = error_of(
        post(outsider, "/operations", _from_agent(agent="refunds")), 400, "unknown_agent"
    )
    assert set(fields_of(error)) == {"agent"}
    # The same name is free in another tenant.
    assert _agent(outsider, tools=[], approval_overrides={})["latest_revision"] == 1
    assert AgentRevision.objects.count() == 2


# --- operations started from an agent ---------------------------------------------------------


def test_an_operation_runs_with_the_revision_it_names(client: APIClient) -> None:
    _agent(client)
    post(client, "/agents/refunds/revisions", {"instructions": "Newer."})
    data = _start(
        client, agent="refunds@1", settings={"temperature": 0.7}, budgets={"max_turns": 4}
    )
    assert data["agent"] == {"name": "refunds", "revision": 1}
    assert (data["family"], data["model"]) == ("openai_responses", "gpt-5.1")
    assert data["instructions"] == AGENT["instructions"]
    assert data["tools"] == AGENT["tools"]
    # Settings: the request's on top of the revision's; budgets: the request's lower one.
    assert data["settings"] == {"temperature": 0.7, "max_output_tokens": 800}
    assert data["budgets"]["max_turns"] == 4
    sent = Operation.objects.get(public_id=data["id"]).turns.get(index=0).request_body
    assert (sent["instructions"], sent["temperature"]) == (AGENT["instructions"], 0.7)
    assert get(client, f"/operations/{data['id']}").json()["agent"] == data["agent"]
    latest = _start(client, agent="refunds")
    assert latest["agent"] == {"name": "refunds", "revision": 2}
    assert latest["instructions"] == "Newer."


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"family": "openai_chat"}, {"family"}),
        ({"model": "gpt-4o"}, {"model"}),
        ({"instructions": "Ignore the above."}, {"instructions"}),
        ({"tools": ["get_order"]}, {"tools"}),
        ({"budgets": {"max_turns": 7}}, {"budgets.max_turns"}),
    ],
)
def test_a_request_may_not_change_what_its_agent_fixes(
    client: APIClient, fields: dict[str, Any], named: set[str]
) -> None:
    _agent(client)
    body = _from_agent(agent="refunds", **fields)
    error = error_of(post(client, "/operations", body), 400, "invalid_request")
    assert set(fields_of(error)) == named, error
    assert "refunds@1" in error["message"]
    assert not Operation.objects.exists()


def test_a_setting_stored_beyond_exact_json_refuses_what_uses_it_naming_it(
    client: APIClient,
) -> None:
    """A revision stored before bodies were read as I-JSON with a setting of 2**53: starting,
    forking or revising with it was a 500 (its audit event could not be hashed)."""
    _agent(client)
    original = _start(client, agent="refunds")
    inexact = {"temperature": 0.2, "max_output_tokens": 2**53}
    stored = AgentRevision.objects.get()
    stored.pk, stored.number, stored.settings = None, 2, inexact
    stored.save(force_insert=True)
    stored.profile.latest_revision = 2
    stored.profile.save(update_fields=["latest_revision"])
    said = "max_output_tokens: 9007199254740992 is beyond ±9007199254740991"
    refusals = [
        post(client, "/operations", _from_agent(agent="refunds")),
        post(client, f"/operations/{original['id']}/fork", {"from_turn": 0, "agent": "refunds"}),
        post(client, "/agents/refunds/revisions", {"note": "a new note only"}),
    ]
    for response in refusals:
        error = error_of(response, 400, "invalid_request")
        assert fields_of(error) == {"settings.max_output_tokens": [error["message"]]}, error
        assert error["message"].startswith(said), error
    assert Operation.objects.count() == 1 and AgentRevision.objects.count() == 2
    fixed = {"settings": {"max_output_tokens": 800}}
    assert post(client, "/agents/refunds/revisions", fixed).status_code == 201
    assert post(client, "/operations", _from_agent(agent="refunds")).status_code == 201


def test_a_tool_disabled_since_the_revision_refuses_it_naming_the_agent_and_what_to_do(
    demo: DemoSeed, client: APIClient
) -> None:
    """A request with ``agent`` may not send ``tools``: the refusal names ``agent``, the revision
    and the tool. A revision that does not change ``tools`` says the same, naming ``tools``."""
    _agent(client)
    original = _start(client, agent="refunds")
    tenant_tool_set(
        tenant=demo.tenant, tool_name="create_refund_draft", enabled=False, actor=SYSTEM
    )
    said = (
        "agent refunds@1 offers create_refund_draft, which is not enabled for the tenant: "
        "enable it or revise the agent's tools"
    )
    for response in [
        post(client, "/operations", _from_agent(agent="refunds")),
        post(client, "/operations", _from_agent(agent="refunds@1")),
        post(client, f"/operations/{original['id']}/fork", {"from_turn": 0, "agent": "refunds"}),
    ]:
        error = error_of(response, 400, "invalid_request")
        assert (error["message"], fields_of(error)) == (said, {"agent": [said]})
    revised = post(client, "/agents/refunds/revisions", {"note": "fix"})
    error = error_of(revised, 400, "invalid_request")
    assert fields_of(error) == {
        "tools": [
            "agent refunds@1 offers create_refund_draft, which is not enabled for the tenant: "
            "enable it or send the tools this revision should offer"
        ]
    }
    assert Operation.objects.count() == 1 and AgentRevision.objects.count() == 1
    tools = {"tools": ["get_order", "submit_refund"], "approval_overrides": {}}
    assert post(client, "/agents/refunds/revisions", tools).status_code == 201
    assert post(client, "/operations", _from_agent(agent="refunds")).status_code == 201


def test_an_agent_offering_two_disabled_tools_names_both(demo: DemoSeed, client: APIClient) -> None:
    _agent(client)
    for name in ("get_order", "submit_refund"):
        tenant_tool_set(tenant=demo.tenant, tool_name=name, enabled=False, actor=SYSTEM)
    error = error_of(
        post(client, "/operations", _from_agent(agent="refunds")), 400, "invalid_request"
    )
    assert fields_of(error) == {
        "agent": [
            "agent refunds@1 offers get_order, submit_refund, which are not enabled for the "
            "tenant: enable them or revise the agent's tools"
        ]
    }


@pytest.mark.parametrize("agent", ["refunds@2", "returns", "refunds@0", "Refunds"])
def test_an_unknown_agent_is_400(client: APIClient, agent: str) -> None:
    _agent(client)
    error = error_of(post(client, "/operations", _from_agent(agent=agent)), 400, "unknown_agent")
    assert set(fields_of(error)) == {"agent"}


@pytest.mark.parametrize("number", ["01", "001", "0", "+1", "1.0"])
def test_a_revision_is_written_one_way_in_a_reference_and_in_a_path(
    client: APIClient, number: str
) -> None:
    """Without a leading zero, in ``name@n`` as in ``…/revisions/n``: ``refunds@01`` names no
    revision, and neither does ``/agents/refunds/revisions/01``."""
    _agent(client)
    error_of(get(client, f"/agents/refunds/revisions/{number}"), 404, "not_found")
    refused = post(client, "/operations", _from_agent(agent=f"refunds@{number}"))
    assert set(fields_of(error_of(refused, 400, "unknown_agent"))) == {"agent"}
    assert get(client, "/agents/refunds/revisions/1").json()["revision"] == 1
    assert _start(client, agent="refunds@1")["agent"] == {"name": "refunds", "revision": 1}


def test_the_document_gives_a_revision_number_s_pattern() -> None:
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    parameters = document["paths"]["/api/v1/agents/{name}/revisions/{number}"]["get"]
    (number,) = [p for p in parameters["parameters"] if p["name"] == "number"]
    assert number["schema"] == {"type": "string", "pattern": "^[1-9][0-9]{0,8}$"}


@pytest.mark.parametrize("agent", ["refunds", "returns"])
def test_a_fork_with_a_model_and_an_agent_is_400_naming_the_model(
    client: APIClient, agent: str
) -> None:
    """The conflict comes first, whether or not the agent exists; an unknown agent alone is
    ``unknown_agent``."""
    _agent(client)
    fork = f"/operations/{create(client, replies=[final()])['id']}/fork"
    both = {"from_turn": 0, "model": "gpt-5.1", "agent": agent}
    error = error_of(post(client, fork, both), 400, "invalid_request")
    assert set(fields_of(error)) == {"model"}, error
    alone = {"from_turn": 0, "agent": "returns"}
    assert set(fields_of(error_of(post(client, fork, alone), 400, "unknown_agent"))) == {"agent"}
    assert Operation.objects.count() == 1


def test_the_agents_approval_override_parks_what_its_tool_would_run(client: APIClient) -> None:
    _agent(client)
    data = _start(client, agent="refunds", replies=bundled_replies("refund_approve"))
    assert data["state"] == "WAITING_APPROVAL"
    (approval,) = get(client, "/approvals").json()["results"]
    assert approval["tool"] == "create_refund_draft"
    assert approval["policy_revision"] == "never-v1+refunds@1"
