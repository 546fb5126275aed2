"""The refund scenario for every API family, through the replay transport and through the
official SDKs against the local provider endpoints, streamed and not, with a real worker."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model

from approvals.services import approval_decide
from providers.families import ADAPTERS
from tests.conftest import provider_settings, wait_for
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.scenario import bundled_path
from toolcalls.models import Operation, ReplayScript
from toolcalls.services.operations import operation_start
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

MODES = ["replay", "replay-stream", "live", "live-stream"]


def _state(operation: Operation, *states: str) -> bool:
    operation.refresh_from_db()
    return operation.state in states


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_refund_completes(family, mode, demo, celery_worker, replay_server, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CALLGATE_PROVIDERS = provider_settings(replay_server)
    streamed = mode.endswith("stream")
    name = "refund_approve_stream" if streamed else "refund_approve"
    scenario = json.loads(bundled_path(family=family, name=name).read_text())
    users = get_user_model().objects
    common = {
        "tenant": demo.tenant,
        "requested_by": users.get(username="requester"),
        "subject_ref": "cus_1001",
        "family": family,
        "input_text": scenario["input"],
    }
    if mode.startswith("live"):
        model = f"{scenario['model']}-{uuid.uuid4().hex[:8]}"
        replay_server.script(model=model, family=family, replies=scenario["replies"])
        operation = operation_start(**common, model=model, transport="live", stream=streamed)
    else:
        script = ReplayScript.objects.create(
            name=name, family=family, model=scenario["model"], replies=scenario["replies"]
        )
        operation = operation_start(**common, model=scenario["model"], replay_script=script)
    parked = (OperationState.WAITING_APPROVAL, OperationState.FAILED, OperationState.COMPLETED)
    wait_for(lambda: _state(operation, *parked), what=f"{family}/{mode} to park")
    assert operation.state == OperationState.WAITING_APPROVAL, operation.terminal_reason
    approval_decide(
        approval_pk=operation.approvals.get().pk, actor=users.get(username="operator"), approve=True
    )
    wait_for(
        lambda: _state(operation, OperationState.COMPLETED, OperationState.FAILED),
        what="completion",
    )
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert "has been submitted" in operation.final_text
    calls = list(operation.calls.order_by("turn__index"))
    assert [(c.tool_name, c.state) for c in calls] == [
        ("get_order", CallState.SUCCEEDED),
        ("create_refund_draft", CallState.SUCCEEDED),
        ("submit_refund", CallState.SUCCEEDED),
    ]
    assert LedgerEntry.objects.filter(operation_ref=operation.public_id).count() == 1
    turns = list(operation.turns.order_by("index"))
    assert {t.transport for t in turns} == {"live" if mode.startswith("live") else "replay"}
    if mode.startswith("live"):
        assert all(t.sdk_version for t in turns)
        sent = [
            r for r in replay_server.received if model in r.path or r.body.get("model") == model
        ]
        assert len(sent) == 4 and all(r.streamed is streamed for r in sent)
