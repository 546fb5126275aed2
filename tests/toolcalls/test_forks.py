"""Forking an operation from a turn: the fork starts from that turn's conversation, asks the
approvals policy requires again, and every effect the original already settled is answered
from its idempotency record: on the demo ledger, nothing happens twice, in every API family."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.services import ApprovalError, approval_decide
from providers.families import ADAPTERS
from tests.api.support import DECIDE, READ, WRITE, error_of, keyed_client, post
from tests.engine import bundled_replies, operator, start_family
from tests.factories import UserFactory
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry, RefundDraft
from toolcalls.models import Operation
from toolcalls.services.agents import AgentDefinition, agent_create
from toolcalls.services.forks import operation_fork
from toolcalls.services.operations import OperationError
from toolcalls.services.retention import bodies_prune
from toolcalls.states import AuditKind, CallState, OperationState

pytestmark = pytest.mark.django_db(transaction=True)

S = OperationState
FORKER = Actor.system("test")


def _refunded(demo, family: str) -> Operation:  # type: ignore[no-untyped-def]
    operation = start_family(demo, family, bundled_replies("refund_approve", family))
    _approve(operation)
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED, operation.terminal_reason
    return operation


def _approve(operation: Operation) -> None:
    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)


def _other_operator(demo):  # type: ignore[no-untyped-def]
    """An operator of the demo tenant who neither requested nor forked anything."""
    user = UserFactory.create(username="operator2")
    user.groups.add(Group.objects.get(name="operators"))
    demo.tenant.members.add(user)
    return user


def _proposing(operation: Operation, tool: str) -> int:
    return operation.calls.get(tool_name=tool).turn.index


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_a_fork_runs_no_settled_effect_twice(demo, eager_tasks, family: str) -> None:
    original = _refunded(demo, family)
    draft_turn = _proposing(original, "create_refund_draft")
    fork = operation_fork(operation_pk=original.pk, from_turn=draft_turn, actor=FORKER)
    fork.refresh_from_db()
    # The submit needs an operator again: policy is asked again, whatever the original got.
    assert fork.state == S.WAITING_APPROVAL
    assert (fork.forked_from_id, fork.from_turn) == (original.pk, draft_turn)
    assert fork.turns.order_by("index").first().index == draft_turn  # type: ignore[union-attr]
    first = fork.turns.get(index=draft_turn).request_body
    assert first == original.turns.get(index=draft_turn).request_body
    _approve(fork)
    fork.refresh_from_db()
    assert fork.state == S.COMPLETED, fork.terminal_reason
    assert LedgerEntry.objects.count() == 1
    assert RefundDraft.objects.count() == 1
    for tool in ("create_refund_draft", "submit_refund"):
        settled = original.calls.get(tool_name=tool)
        again = fork.calls.get(tool_name=tool)
        assert (settled.state, again.state) == (CallState.SUCCEEDED, CallState.SUPPRESSED)
        assert again.model_result == settled.model_result
        event = again.events.get(to_state=CallState.SUPPRESSED)
        assert event.details["settled_by"] == settled.public_id  # the fork's timeline says so
    created = fork.events.get(kind=AuditKind.OPERATION_CREATED)
    assert created.details["forked_from"] == original.public_id
    assert created.details["from_turn"] == draft_turn


@pytest.mark.parametrize("family", ["anthropic_messages", "gemini_generate", "openai_responses"])
def test_a_fork_after_a_denial_answers_the_denial(demo, eager_tasks, family: str) -> None:
    original = start_family(demo, family, bundled_replies("refund_approve", family))
    approval = original.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=False, reason="No photo.")
    original.refresh_from_db()
    assert "no money has been moved" in original.final_text
    after = _proposing(original, "submit_refund") + 1
    fork = operation_fork(operation_pk=original.pk, from_turn=after, actor=FORKER)
    fork.refresh_from_db()
    # Its first request adds no result: it ends with the denial, which the scripted model reads
    # from it (the refund scenario's ``error`` branch), as from the original's.
    first = fork.turns.get(index=after).request_body
    assert first == original.turns.get(index=after).request_body
    assert (fork.state, fork.final_text) == (S.COMPLETED, original.final_text)
    assert not LedgerEntry.objects.exists()


def test_a_fork_may_use_another_model_from_the_first_turn(demo, eager_tasks) -> None:
    original = _refunded(demo, "openai_chat")
    fork = operation_fork(operation_pk=original.pk, from_turn=0, actor=FORKER, model="other")
    fork.refresh_from_db()
    assert fork.model == "other"
    assert fork.turns.get(index=0).request_body["model"] == "other"
    _approve(fork)
    fork.refresh_from_db()
    assert fork.state == S.COMPLETED
    assert LedgerEntry.objects.count() == 1
    ran = fork.calls.filter(state=CallState.SUCCEEDED).values_list("tool_name", flat=True)
    assert list(ran) == ["get_order"]  # a read runs again; the effects do not


def test_a_fork_needs_the_turn_and_its_conversation(demo, eager_tasks) -> None:
    original = _refunded(demo, "openai_responses")
    with pytest.raises(OperationError) as refused:
        operation_fork(operation_pk=original.pk, from_turn=99, actor=FORKER)
    assert refused.value.code == "unknown_turn"
    later = timezone.now() + timedelta(seconds=1)
    assert bodies_prune(operation_pk=original.pk, ended_before=later, actor=FORKER)
    with pytest.raises(OperationError) as pruned:
        operation_fork(operation_pk=original.pk, from_turn=0, actor=FORKER)
    assert pruned.value.code == "bodies_pruned"
    assert Operation.objects.count() == 1


def test_the_command_forks_and_prints_the_new_operation(demo, eager_tasks, capsys) -> None:
    original = _refunded(demo, "anthropic_messages")
    call_command("fork_operation", original.public_id, "--from-turn", "2", "--model", "m2")
    fork = Operation.objects.get(forked_from=original)
    assert fork.public_id in capsys.readouterr().out
    assert (fork.from_turn, fork.model) == (2, "m2")
    with pytest.raises(CommandError, match="no turn 9"):
        call_command("fork_operation", original.public_id, "--from-turn", "9")
    with pytest.raises(CommandError, match="no operation"):
        call_command("fork_operation", "op_missing", "--from-turn", "0")


def test_the_api_forks_an_operation_of_the_key_tenant(demo, eager_tasks) -> None:
    original = _refunded(demo, "openai_responses")
    client, _ = keyed_client(demo.tenant, READ, WRITE, name="billing")
    path = f"/operations/{original.public_id}/fork"
    response = post(client, path, {"from_turn": 2, "model": "gpt-5.1-next"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["model"], body["state"]) == ("gpt-5.1-next", S.WAITING_APPROVAL)
    fork = Operation.objects.get(public_id=body["id"])
    assert (fork.forked_from_id, fork.from_turn) == (original.pk, 2)
    assert fork.events.get(kind=AuditKind.OPERATION_CREATED).actor == "service:billing"
    error_of(post(client, path, {"from_turn": 7}), 400, "unknown_turn")
    error_of(post(client, path, {"from_turn": -1}), 400, "invalid_request")
    error_of(post(client, path, {"turn": 1}), 400, "invalid_request")
    for model in ("../../x?y#z", "gpt 5", "x" * 101):
        body = error_of(
            post(client, path, {"from_turn": 0, "model": model}), 400, "invalid_request"
        )
        assert list(body["details"]["fields"]) == ["model"], model
    error_of(post(client, "/operations/op_nope/fork", {"from_turn": 0}), 404, "not_found")
    reader, _ = keyed_client(demo.tenant, READ, name="reader")
    error_of(post(reader, path, {"from_turn": 0}), 403, "forbidden")


def test_who_forks_an_operation_may_not_decide_its_approvals(demo, eager_tasks) -> None:
    original = _refunded(demo, "openai_responses")
    draft_turn = _proposing(original, "create_refund_draft")
    fork = operation_fork(
        operation_pk=original.pk, from_turn=draft_turn, actor=FORKER, author=operator()
    )
    approval = fork.approvals.get()
    assert fork.started_by == operator()
    with pytest.raises(ApprovalError) as refused:
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)
    assert refused.value.code == "self_approval"
    client, key = keyed_client(demo.tenant, READ, WRITE, DECIDE, name="billing")
    response = post(client, f"/operations/{original.public_id}/fork", {"from_turn": draft_turn})
    forked = Operation.objects.get(public_id=response.json()["id"])
    assert forked.started_by == key.service_user
    decision = {"decision": "approve"}
    path = f"/approvals/{forked.approvals.get().public_id}/decide"
    error_of(post(client, path, decision), 403, "self_approval")
    approval.refresh_from_db()
    assert approval.state == "PENDING"


def test_the_console_forks_from_a_turn(demo, eager_tasks) -> None:
    original = _refunded(demo, "gemini_generate")
    console = Client()
    assert console.login(username="operator", password="operator-demo-pass")
    page = console.get(reverse("operations:detail", args=[original.public_id]))
    assert b'data-testid="fork-turn-2"' in page.content
    url = reverse("operations:fork", args=[original.public_id])
    response = console.post(url, {"from_turn": 2, "model": ""})
    fork = Operation.objects.get(forked_from=original)
    assert response.status_code == 302
    assert response["Location"] == reverse("operations:detail", args=[fork.public_id])
    assert fork.events.get(kind=AuditKind.OPERATION_CREATED).actor == "user:operator"
    shown = console.get(response["Location"])
    assert original.public_id.encode() in shown.content and b"Forked from" in shown.content
    queue = console.get(reverse("approvals:queue")).content.decode()
    assert "your fork: another operator decides" in queue  # who forked it may not decide it
    assert f'value="{fork.approvals.get().public_id}"' not in queue
    # The submit, asked again, is answered from the original's record.
    approval_decide(approval_pk=fork.approvals.get().pk, actor=_other_operator(demo), approve=True)
    settled = original.calls.get(tool_name="submit_refund").public_id
    timeline = console.get(response["Location"]).content.decode()
    assert f"<span>settled by</span> <bdi>{settled}</bdi>" in timeline
    refused = console.post(url, {"from_turn": 9}, follow=True)
    assert b"has no turn 9" in refused.content
    support = Client()
    assert support.login(username="support", password="support-demo-pass")
    assert b"fork-turn-" not in support.get(page.wsgi_request.path).content
    assert support.post(url, {"from_turn": 2}).status_code == 403


def test_a_fork_may_run_with_an_agent_revision(demo, eager_tasks) -> None:
    original = _refunded(demo, "openai_responses")
    definition: AgentDefinition = {
        "family": "openai_responses",
        "model": "gpt-5.1-agent",
        "instructions": "Refund only what the order allows.",
        "tool_names": original.tool_names,
    }
    revision = agent_create(tenant=demo.tenant, name="refunds", definition=definition, actor=FORKER)
    fork = operation_fork(operation_pk=original.pk, from_turn=0, actor=FORKER, agent=revision)
    fork.refresh_from_db()
    assert (fork.agent_revision, fork.model) == (revision, "gpt-5.1-agent")
    assert fork.instructions == "Refund only what the order allows."
    assert fork.turns.get(index=0).request_body["instructions"] == fork.instructions
    with pytest.raises(OperationError) as refused:
        operation_fork(
            operation_pk=original.pk, from_turn=0, actor=FORKER, model="x", agent=revision
        )
    assert refused.value.code == "agent_conflict"
    assert refused.value.message.endswith("sets the model: leave the model out")
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    both = {"from_turn": 0, "model": "x", "agent": "refunds"}
    body = error_of(
        post(client, f"/operations/{original.public_id}/fork", both), 400, "invalid_request"
    )
    assert list(body["details"]["fields"]) == ["model"]  # as docs/api.md says
    call_command("fork_operation", original.public_id, "--from-turn", "0", "--agent", "refunds@1")
    assert Operation.objects.filter(forked_from=original, agent_revision=revision).count() == 2
    other = agent_create(
        tenant=demo.tenant,
        name="claude",
        definition={**definition, "family": "anthropic_messages", "model": "claude-x"},
        actor=FORKER,
    )
    forks = Operation.objects.count()
    with pytest.raises(OperationError, match="another API family cannot read") as refused:
        operation_fork(operation_pk=original.pk, from_turn=1, actor=FORKER, agent=other)
    assert refused.value.details["fields"].keys() == {"agent"}
    body = error_of(
        post(client, f"/operations/{original.public_id}/fork", {"from_turn": 1, "agent": "claude"}),
        400,
        "invalid_request",
    )
    assert list(body["details"]["fields"]) == ["agent"]
    assert Operation.objects.count() == forks
