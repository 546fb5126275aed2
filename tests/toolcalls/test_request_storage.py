"""Each conversation item is stored once, with the turn that first sent it; every turn's request
body is rebuilt exactly as it was sent; retention prunes bodies and the audit chain still
verifies."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from providers.families import ADAPTERS, get_adapter
from tests.engine import bundled_replies, operator
from toolcalls.actors import RETENTION
from toolcalls.models import Operation, ReplayScript, ToolCall
from toolcalls.services import turns
from toolcalls.services.audit_verify import audit_chain_walk
from toolcalls.services.operations import operation_start
from toolcalls.services.retention import bodies_prunable, bodies_prune
from toolcalls.states import AuditKind, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], dict[str, Any]]:
    """Every request body a transport was given, by (operation ID, turn)."""
    bodies: dict[tuple[str, int], dict[str, Any]] = {}
    request = turns._request

    def recording(claim: turns.TurnClaim) -> Any:
        bodies[(claim.operation_id, claim.turn)] = claim.request_body
        return request(claim)

    monkeypatch.setattr(turns, "_request", recording)
    return bodies


def _refund(demo: Any, family: str, **options: Any) -> Operation:
    """The bundled approved refund in ``family``, approved at once, run to its end."""
    replies = bundled_replies("refund_approve", family)
    script = ReplayScript.objects.create(name="t", family=family, model="m", replies=replies)
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family=family,
        model="m",
        input_text="Please refund my order.",
        replay_script=script,
        **options,
    )
    approval = ApprovalRequest.objects.get(operation=operation)
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, reason="ok")
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    return operation


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_every_turn_is_rebuilt_as_sent_and_each_item_stored_once(demo, sent, family) -> None:
    operation = _refund(demo, family, instructions="Refund only what the order allows.")
    field = get_adapter(family).conversation_field
    stored = list(operation.turns.order_by("index"))
    assert len(stored) >= 4
    for turn in stored:
        assert turn.request_body == sent[(operation.public_id, turn.index)]
    last = stored[-1].request_body
    items = sum(len(turn.request_items) for turn in stored)
    assert items == len(last[field]) - len(stored[-1].request_frame[field])
    assert items < sum(len(sent[(operation.public_id, t.index)][field]) for t in stored)


def test_a_retried_request_stores_no_item_twice(demo, sent) -> None:
    failure = {"kind": "http_error", "http_status": 503, "headers": {}, "body": {"error": {}}}
    replies = bundled_replies("refusal")
    script = ReplayScript.objects.create(
        name="t", family="openai_responses", model="m", replies=[failure, *replies]
    )
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family="openai_responses",
        model="m",
        input_text="hi",
        replay_script=script,
        budgets={"max_turns": 5},
    )
    operation.refresh_from_db()
    first, retry = operation.turns.order_by("index")[:2]
    assert first.request_items and retry.request_items == []
    assert retry.request_body == sent[(operation.public_id, retry.index)]


def test_retention_prunes_bodies_and_the_audit_chain_still_verifies(demo) -> None:
    ended = _refund(demo, "openai_chat", instructions="Be brief.")
    results = dict(ToolCall.objects.filter(operation=ended).values_list("pk", "result_sha256"))
    later = timezone.now() + timedelta(seconds=1)
    assert bodies_prunable(ended_before=ended.updated_at) == []
    assert bodies_prunable(ended_before=later) == [ended.pk]

    assert bodies_prune(operation_pk=ended.pk, ended_before=later, actor=RETENTION) is True
    ended.refresh_from_db()
    assert ended.conversation == [] and ended.bodies_pruned_at is not None
    for turn in ended.turns.all():
        assert (turn.request_frame, turn.request_items, turn.reply) == ({}, [], None)
        assert turn.outcome and turn.input_tokens  # what happened stays
    after = dict(ToolCall.objects.filter(operation=ended).values_list("pk", "result_sha256"))
    assert after == results
    assert ended.events.filter(kind=AuditKind.OPERATION_BODIES_PRUNED).count() == 1
    [walk] = audit_chain_walk(operation_public_id=ended.public_id)
    assert walk.first_break is None
    assert bodies_prune(operation_pk=ended.pk, ended_before=later, actor=RETENTION) is False


def test_the_command_prunes_only_operations_past_retention(demo) -> None:
    ended = _refund(demo, "openai_responses")
    out = StringIO()
    call_command("prune_bodies", "--older-than-days", "0", "--dry-run", stdout=out)
    assert out.getvalue().startswith("1 operations")
    call_command("prune_bodies", stdout=out)  # default retention: 90 days
    assert Operation.objects.get(pk=ended.pk).bodies_pruned_at is None
    Operation.objects.filter(pk=ended.pk).update(updated_at=timezone.now() - timedelta(days=91))
    call_command("prune_bodies", stdout=out)
    assert "pruned 1 operations" in out.getvalue()
    assert Operation.objects.get(pk=ended.pk).bodies_pruned_at is not None


@pytest.mark.parametrize("days", ["1000000", "99999999999", "-1", "x"])
def test_a_retention_out_of_range_is_a_clear_error(days: str) -> None:
    """A day count no date can be taken back by was an OverflowError's traceback."""
    refused = r"argument --older-than-days: must be (a whole number )?from 0 to 36500 days"
    with pytest.raises(CommandError, match=refused):
        call_command("prune_bodies", "--older-than-days", days, "--dry-run", stdout=StringIO())


@pytest.mark.parametrize("days", [1000000, -5])
def test_a_retention_setting_out_of_range_is_named_as_the_setting(days: int, settings: Any) -> None:
    """Without --older-than-days, the refusal names the setting the number came from."""
    settings.CALLGATE_BODY_RETENTION_DAYS = days
    refused = rf"^CALLGATE_BODY_RETENTION_DAYS must be from 0 to 36500 days, not {days} \("
    with pytest.raises(CommandError, match=refused):
        call_command("prune_bodies", "--dry-run", stdout=StringIO())
