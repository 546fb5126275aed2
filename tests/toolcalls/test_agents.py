"""Agent profiles: numbered immutable revisions, how an operation runs with one, and the approval
overrides a revision adds to its tools' policies (never looser than the tool's own)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction

from approvals.services import approval_decide
from tests import replies as r
from tests.api.support import other_tenant
from tests.engine import operator
from toolcalls import catalogue, registry
from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.models import AgentRevision, Operation, ReplayScript
from toolcalls.services.agents import (
    AgentDefinition,
    agent_create,
    agent_revise,
    agent_revision_get,
)
from toolcalls.services.operations import operation_start
from toolcalls.states import AuditKind, CallState, OperationState

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")
DRAFT = {"order_id": "ORD-1001", "amount_cents": 2000, "reason": "damaged_item"}


def _agent(demo: Any, name: str = "refunds", **definition: Any) -> AgentRevision:
    base = AgentDefinition(
        family="openai_responses", model="gpt-5.1", instructions="You handle refunds."
    )
    base.update(definition)  # type: ignore[typeddict-item]
    return agent_create(tenant=demo.tenant, name=name, definition=base, actor=ACTOR)


def _start(demo: Any, agent: AgentRevision, replies: list[Any], **options: Any) -> Operation:
    script = ReplayScript.objects.create(
        name="test", family=agent.family, model=agent.model, replies=replies
    )
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        input_text="Please refund my order.",
        agent=agent,
        replay_script=script,
        **options,
    )
    operation.refresh_from_db()
    return operation


def test_each_change_is_a_new_numbered_revision_keeping_what_it_leaves_out(demo: Any) -> None:
    first = _agent(demo, tool_names=["get_order"], budgets={"max_turns": 5})
    second = agent_revise(
        profile=first.profile, changes={"instructions": "Be brief."}, actor=ACTOR, note="shorter"
    )
    assert (first.label, second.label) == ("refunds@1", "refunds@2")
    assert (second.instructions, second.note, second.created_by) == (
        "Be brief.",
        "shorter",
        "system:test",
    )
    assert (second.tool_names, second.budgets) == (["get_order"], {"max_turns": 5})
    first.refresh_from_db()
    assert first.instructions == "You handle refunds."
    assert first.profile.latest_revision == 2


def test_a_revision_that_changes_nothing_keeps_the_latest(demo: Any) -> None:
    """Saving a definition unchanged made a new, identical revision each time."""
    first = _agent(demo, settings={"temperature": 0.2, "max_output_tokens": 500})
    same = AgentDefinition(
        instructions="You handle refunds.",
        settings={"max_output_tokens": 500, "temperature": 0.2},  # another key order
        tool_names=list(first.tool_names),
    )
    kept = agent_revise(profile=first.profile, changes=same, actor=ACTOR, note="no change")
    assert kept.pk == first.pk and kept.label == "refunds@1" and kept.note == ""
    assert agent_revise(profile=first.profile, changes={}, actor=ACTOR).pk == first.pk
    first.profile.refresh_from_db()
    assert first.profile.latest_revision == 1
    changed = agent_revise(profile=first.profile, changes={"model": "gpt-5.2"}, actor=ACTOR)
    assert changed.label == "refunds@2"


def test_a_new_agent_is_offered_every_tool_of_its_tenant_by_default(demo: Any) -> None:
    assert _agent(demo).tool_names == catalogue.tool_names(demo.tenant)


def test_revisions_are_immutable(demo: Any) -> None:
    revision = _agent(demo)
    with pytest.raises(PermissionError):
        AgentRevision.objects.filter(pk=revision.pk).update(model="other")
    with pytest.raises(PermissionError):
        AgentRevision.objects.filter(pk=revision.pk).delete()
    with pytest.raises(PermissionError):
        revision.delete()
    # The database refuses what the ORM was not asked: a save, raw SQL.
    for statement in (
        "UPDATE toolcalls_agentrevision SET model = 'other' WHERE id = %s",
        "DELETE FROM toolcalls_agentrevision WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="immutable"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [revision.pk])
    revision.model = "other"
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        revision.save()
    assert AgentRevision.objects.get(pk=revision.pk).model == "gpt-5.1"


@pytest.mark.parametrize(
    ("definition", "code"),
    [
        ({"family": "openai_completions"}, "unknown_family"),
        ({"model": ""}, "invalid_agent"),
        ({"tool_names": ["get_order", "launch_rocket"]}, "unknown_tool"),
        ({"budgets": {"max_turns": 100_000}}, "bad_budget"),
        ({"budgets": {"max_wishes": 3}}, "bad_budget"),
        ({"settings": {"temperature": "hot"}}, "unsupported_setting"),
        ({"settings": {"colour": "blue"}}, "unsupported_setting"),
        ({"approval_overrides": {"submit_refund": {"policy": "never"}}}, "invalid_agent"),
        ({"approval_overrides": {"submit_refund": "always"}}, "invalid_agent"),
        ({"approval_overrides": {"submit_refund": {"policy": "always", "x": 1}}}, "invalid_agent"),
        (
            {"approval_overrides": {"get_order": {"policy": "above_threshold", "threshold": 5}}},
            "invalid_agent",
        ),
        (
            {"approval_overrides": {"submit_refund": {"policy": "above_threshold"}}},
            "invalid_agent",
        ),
        (
            {
                "approval_overrides": {
                    "submit_refund": {"policy": "above_threshold", "threshold": -1}
                }
            },
            "invalid_agent",
        ),
        (
            {
                "approval_overrides": {
                    "submit_refund": {"policy": "above_threshold", "threshold": True}
                }
            },
            "invalid_agent",
        ),
        (
            {
                "tool_names": ["get_order"],
                "approval_overrides": {"submit_refund": {"policy": "always"}},
            },
            "invalid_agent",
        ),
    ],
)
def test_a_definition_that_could_not_start_an_operation_is_refused(
    demo: Any, definition: dict[str, Any], code: str
) -> None:
    with pytest.raises(CallgateError) as refused:
        _agent(demo, **definition)
    assert refused.value.code == code
    assert not AgentRevision.objects.exists()


@pytest.mark.parametrize("name", ["", "Refunds", "-refunds", "refunds@2", "a" * 41, "re funds"])
def test_an_agent_name_is_a_slug(demo: Any, name: str) -> None:
    with pytest.raises(CallgateError) as refused:
        _agent(demo, name=name)
    assert refused.value.code == "invalid_agent"
    assert refused.value.details["fields"].keys() == {"name"}


def test_a_name_is_taken_once_per_tenant(demo: Any) -> None:
    _agent(demo)
    with pytest.raises(CallgateError) as refused:
        _agent(demo)
    assert refused.value.code == "agent_exists"
    other = other_tenant()
    assert agent_create(
        tenant=other,
        name="refunds",
        definition={"family": "openai_chat", "model": "m", "tool_names": []},
        actor=ACTOR,
    ).label == ("refunds@1")


def test_a_reference_names_the_latest_revision_or_one_by_number(demo: Any) -> None:
    first = _agent(demo)
    second = agent_revise(profile=first.profile, changes={"model": "gpt-5.2"}, actor=ACTOR)
    assert agent_revision_get(tenant=demo.tenant, reference="refunds") == second
    assert agent_revision_get(tenant=demo.tenant, reference="refunds@1") == first
    for unknown in ("refunds@3", "refunds@0", "returns", "refunds@", "@1", "refunds@x"):
        with pytest.raises(CallgateError) as refused:
            agent_revision_get(tenant=demo.tenant, reference=unknown)
        assert refused.value.code == "unknown_agent"
        assert refused.value.details["fields"].keys() == {"agent"}
    with pytest.raises(CallgateError):
        agent_revision_get(tenant=other_tenant(), reference="refunds")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_an_operation_runs_with_its_revision_and_records_it(demo: Any) -> None:
    agent = _agent(demo, tool_names=["get_order"], budgets={"max_turns": 4})
    agent_revise(profile=agent.profile, changes={"instructions": "Newer."}, actor=ACTOR)
    operation = _start(
        demo,
        agent,
        [r.final("Hello.")],
        messages=[{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}],
        budgets={"max_turns": 3},
        metadata={"ticket": "T-1"},
    )
    assert operation.state == OperationState.COMPLETED
    assert operation.agent_revision == agent
    assert (operation.family, operation.model) == ("openai_responses", "gpt-5.1")
    assert (operation.instructions, operation.tool_names) == ("You handle refunds.", ["get_order"])
    assert operation.budgets["max_turns"] == 3
    body = operation.turns.get(index=0).request_body
    assert body["instructions"] == "You handle refunds."
    assert [tool["name"] for tool in body["tools"]] == ["get_order"]
    assert [item["content"] for item in body["input"]] == ["Hi", "Hello!", operation.input_text]
    created = operation.events.get(kind=AuditKind.OPERATION_CREATED)
    assert created.details["agent"] == "refunds@1"


@pytest.mark.parametrize(
    ("options", "fields"),
    [
        ({"family": "openai_chat"}, {"family"}),
        ({"model": "gpt-4o"}, {"model"}),
        ({"instructions": "Ignore all that."}, {"instructions"}),
        ({"tool_names": ["get_order"]}, {"tool_names"}),
        ({"budgets": {"max_turns": 9}}, {"budgets.max_turns"}),
        ({"model": "m", "budgets": {"max_turns": 6, "max_tool_calls": 1}},
         {"model", "budgets.max_turns"}),
    ],
)  # fmt: skip
def test_what_the_revision_fixes_the_request_may_not_change(
    demo: Any, options: dict[str, Any], fields: set[str]
) -> None:
    agent = _agent(demo, budgets={"max_turns": 5})
    with pytest.raises(CallgateError) as refused:
        _start(demo, agent, [r.final()], **options)
    assert refused.value.code == "agent_conflict"
    assert set(refused.value.details["fields"]) == fields
    assert not Operation.objects.exists()


def test_a_tool_the_tenant_may_no_longer_use_stops_its_agents(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent(demo, tool_names=["get_order"])
    monkeypatch.setattr(catalogue, "tool_names", lambda tenant: ["submit_refund"])
    with pytest.raises(CallgateError) as refused:
        _start(demo, agent, [r.final()])
    assert refused.value.code == "unknown_tool"


# --- approval overrides -------------------------------------------------------------------------


def _drafting(demo: Any, agent: AgentRevision) -> Operation:
    """An operation of ``agent`` whose model drafts a $20.00 refund, then ends."""
    replies = [r.response(r.call("d1", "create_refund_draft", DRAFT)), r.final()]
    return _start(demo, agent, replies)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize(
    ("override", "parks"),
    [
        ({"policy": "always"}, True),
        ({"policy": "above_threshold", "threshold": 1999}, True),
        ({"policy": "above_threshold", "threshold": 2000}, False),
    ],
)
def test_an_override_adds_approvals_to_a_tool(
    demo: Any, override: dict[str, Any], parks: bool
) -> None:
    agent = _agent(demo, approval_overrides={"create_refund_draft": override})
    operation = _drafting(demo, agent)
    (draft,) = operation.calls.all()
    if parks:
        assert (operation.state, draft.state) == (
            OperationState.WAITING_APPROVAL,
            CallState.WAITING_APPROVAL,
        )
        approval = operation.approvals.get()
        assert approval.policy_revision == "never-v1+refunds@1"
    else:
        assert (operation.state, draft.state) == (OperationState.COMPLETED, CallState.SUCCEEDED)


def test_an_override_is_never_looser_than_the_tool(demo: Any) -> None:
    """A higher threshold than the tool's own adds nothing: the tool's policy still applies."""
    agent = _agent(
        demo,
        approval_overrides={"submit_refund": {"policy": "above_threshold", "threshold": 10_000}},
    )
    operation = Operation(agent_revision=agent, tenant=demo.tenant)
    spec = catalogue.tool_spec(operation, "submit_refund")
    tool = registry.get("submit_refund")
    assert spec is not None and tool is not None
    assert spec.approval.revision == "refund-threshold-v1+refunds@1"
    for amount in (2600, 9000, 10_001):
        arguments = {"order_id": "ORD-1001", "draft_id": "RD-1", "amount_cents": amount}
        assert spec.approval.reason_for(arguments) is not None
        assert tool.approval.reason_for(arguments) is not None
    assert spec.approval.reason_for({"amount_cents": 100}) is None
    # Without an override for it, a tool keeps its own policy.
    assert catalogue.tool_spec(operation, "get_order") == registry.get("get_order")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_a_call_parked_under_one_revision_resumes_against_it_after_a_newer_one(
    demo: Any,
) -> None:
    first = _agent(demo)
    always = {"create_refund_draft": {"policy": "always"}}
    agent_revise(profile=first.profile, changes={"instructions": "Be kind."}, actor=ACTOR)
    third = agent_revise(profile=first.profile, changes={"approval_overrides": always}, actor=ACTOR)
    operation = _drafting(demo, third)
    assert operation.state == OperationState.WAITING_APPROVAL
    # Revision 4 drops the override: the parked call still answers to revision 3's policy.
    fourth = agent_revise(profile=first.profile, changes={"approval_overrides": {}}, actor=ACTOR)
    assert fourth.label == "refunds@4"
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    draft = operation.calls.get()
    assert (draft.state, draft.policy_revision) == (CallState.SUCCEEDED, "never-v1+refunds@3")
    resumed = operation.events.get(kind=AuditKind.CALL_TRANSITION, to_state=CallState.EXECUTING)
    assert resumed.details["agent_revision"] == "refunds@3"
    assert resumed.details["policy_revision"] == "never-v1+refunds@3"
