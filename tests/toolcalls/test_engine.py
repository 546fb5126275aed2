"""The loop, run in-process on PostgreSQL: every branch ends in a named state."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, sent_outputs, start, transitions
from toolcalls import registry
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import IdempotencyRecord, ModelTurn, Operation, ToolCall
from toolcalls.registry import ToolContext, ToolSpec
from toolcalls.services import turns
from toolcalls.services.transports import transport_for
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
GET_ORDER = r.call("call_get", "get_order", {"order_id": "ORD-1001"})


def test_final_text_completes_and_no_tool_call_alone_never_does(demo) -> None:
    operation = start(demo, [r.final("Hello.")])
    assert operation.state == S.COMPLETED
    assert operation.final_text == "Hello."
    empty = start(demo, [r.response()])  # completed, but neither text nor calls
    assert empty.state == S.FAILED
    assert empty.terminal_reason.startswith("MALFORMED_REPLY")


def test_refund_approved_runs_once_and_returns_every_result(demo) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == S.WAITING_APPROVAL
    assert LedgerEntry.objects.count() == 0
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    assert "has been submitted" in operation.final_text
    assert LedgerEntry.objects.filter(operation_ref=operation.public_id).count() == 1
    calls = list(operation.calls.order_by("turn__index"))
    assert [c.state for c in calls] == [CallState.SUCCEEDED] * 3
    for index, call in enumerate(calls, start=1):
        assert sent_outputs(operation, index)[-1:] == [call.provider_call_id]
    assert transitions(operation)[-2:] == [
        (S.RESULTS_READY, S.MODEL_REQUESTED),
        (S.MODEL_REQUESTED, S.COMPLETED),
    ]


def test_unknown_tool_and_bad_arguments_get_error_envelopes(demo) -> None:
    operation = start(
        demo,
        [
            r.response(
                r.call("c1", "delete_everything", {}),
                r.call("c2", "get_order", '{"order_id": "ORD-1001"}}'),  # not JSON: rejected
                r.call("c3", "get_order", {"order_id": 1001}),  # schema: wrong type
                r.call("c4", "get_order", {"order_id": "ORD-1001", "extra": True}),
                r.call("c5", "get_order", {"order_id": "ORD-1001"}),
            ),
            r.final(),
        ],
    )
    assert operation.state == S.COMPLETED
    codes = {
        c.provider_call_id: (c.state, (c.model_result or {}).get("status"), c.error_code)
        for c in operation.calls.all()
    }
    assert codes == {
        "c1": (CallState.REJECTED, "error", "UNKNOWN_TOOL"),
        "c2": (CallState.REJECTED, "error", "INVALID_ARGUMENTS"),
        "c3": (CallState.REJECTED, "error", "INVALID_ARGUMENTS"),
        "c4": (CallState.REJECTED, "error", "INVALID_ARGUMENTS"),
        "c5": (CallState.SUCCEEDED, "ok", ""),
    }
    assert sorted(sent_outputs(operation, 1)) == ["c1", "c2", "c3", "c4", "c5"]


def test_truncated_refused_and_permanent_failures_are_terminal(demo) -> None:
    cut = start(demo, bundled_replies("max_tokens"))
    assert (cut.state, cut.calls.count()) == (S.INCOMPLETE, 1)  # only get_order ran
    refused = start(demo, bundled_replies("refusal"))
    assert refused.state == S.REFUSED
    failed = start(demo, [r.http_error(400, "invalid_request_error")])
    assert failed.state == S.FAILED
    assert "invalid_request_error" in failed.terminal_reason


def test_retryable_failures_retry_with_backoff_then_succeed(demo) -> None:
    operation = start(
        demo,
        [
            r.http_error(429, "rate_limit_exceeded", retry_after="0"),
            r.http_error(503, "server_error"),
            r.final(),
        ],
    )
    assert operation.state == S.COMPLETED
    assert list(operation.turns.values_list("outcome", flat=True)) == [
        "API_FAILURE",
        "API_FAILURE",
        "FINAL_TEXT",
    ]
    assert operation.retry_count == 0


def test_a_retried_request_after_a_denial_answers_the_denial(demo) -> None:
    # The retry sends no result anew but carries the denial: the scripted model reads it there
    # (the refund scenario's ``error`` branch), as a model reads the request.
    replies = bundled_replies("refund_approve")
    replies.insert(-1, r.http_error(503, "server_error"))
    operation = start(demo, replies)
    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=False, reason="No photo.")
    operation.refresh_from_db()
    outcomes = list(operation.turns.order_by("index").values_list("outcome", flat=True))
    assert outcomes[-2:] == ["API_FAILURE", "FINAL_TEXT"]
    assert operation.state == S.COMPLETED
    assert "no money has been moved" in operation.final_text


@override_settings(CALLGATE_MODEL_MAX_RETRIES=2)
def test_retries_are_bounded(demo) -> None:
    operation = start(demo, [r.http_error(503, "server_error")] * 4)
    assert operation.state == S.FAILED
    assert operation.turn_count == 3
    assert "retries spent" in operation.terminal_reason


def test_exhausted_scenario_fails_clearly(demo) -> None:
    operation = start(demo, [r.response(GET_ORDER)])
    assert operation.state == S.FAILED
    assert "scenario exhausted" in operation.terminal_reason


def test_reply_repeating_a_call_id_runs_nothing(demo) -> None:
    # Results are matched by call ID, so such a reply cannot be answered unambiguously.
    operation = start(demo, [r.response(GET_ORDER, GET_ORDER), r.final()])
    assert operation.state == S.FAILED
    assert "repeats a call ID" in operation.terminal_reason
    assert operation.calls.count() == 0


def test_same_intent_with_a_new_call_id_is_suppressed(demo) -> None:
    draft = {"order_id": "ORD-1002", "amount_cents": 1000, "reason": "damaged_item"}
    operation = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", draft)),
            r.response(GET_ORDER),  # new information, so d2 is not a mere repeat
            r.response(r.call("d2", "create_refund_draft", draft)),
            r.final(),
        ],
    )
    assert operation.state == S.COMPLETED
    first, second = operation.calls.filter(tool_name="create_refund_draft").order_by("turn__index")
    assert (first.state, second.state) == (CallState.SUCCEEDED, CallState.SUPPRESSED)
    assert second.model_result == first.model_result
    assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.DONE


def test_handler_timeout_on_a_side_effect_is_unknown_outcome_and_escalates(
    demo, monkeypatch
) -> None:
    release = threading.Event()

    def hang(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {}

    spec = ToolSpec(
        name="slow_write",
        description="Hangs.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        schema_version="slow-v1",
        risk="write",
        timeout_ms=50,
        handler=hang,
        idempotency_key=lambda ctx, args: f"slow:{ctx.operation_id}",
        revisions={"input": "1", "output": "1", "effect": "1", "handler": "1"},
    )
    monkeypatch.setitem(registry._REGISTRY, spec.name, spec)
    try:
        replies = [r.response(r.call("s1", "slow_write", {})), r.final()]
        operation = start(demo, replies, tool_names=["slow_write"])
        assert operation.state == S.ESCALATED
        assert operation.calls.get().state == CallState.UNKNOWN_OUTCOME
        assert operation.terminal_reason == (
            f"UNKNOWN_OUTCOME: slow_write ({operation.calls.get().public_id}) timed out (no "
            "answer within 50 ms), and no reconciler can tell whether it took effect"
        )
        assert not IdempotencyRecord.objects.filter(state=IdempotencyRecord.State.DONE).exists()
    finally:
        release.set()


def test_tampered_result_fails_the_operation_before_it_reaches_the_model(demo) -> None:
    donor = start(demo, [r.response(GET_ORDER), r.final()], tool_names=["get_order"])
    submit = {"order_id": "ORD-1003", "draft_id": "RD-X", "amount_cents": 99999}
    tampered = start(demo, [r.response(r.call("t1", "submit_refund", submit)), r.final()])
    call = tampered.calls.get()
    assert call.state == CallState.WAITING_APPROVAL
    # Substitute another call's well-formed, correctly digested result for this call's one.
    other = donor.calls.get()
    with transaction.atomic():
        ToolCall.objects.filter(pk=call.pk).update(
            state=CallState.DENIED,
            model_result=other.model_result,
            result_sha256=other.result_sha256,
            binding_sha256=other.binding_sha256,
            protected_audit=other.protected_audit,
        )
        Operation.objects.filter(pk=tampered.pk).update(state=S.RESULTS_READY)
    turns.turn_run(operation_pk=tampered.pk)
    tampered.refresh_from_db()
    assert tampered.state == S.FAILED
    assert tampered.terminal_reason.startswith("BINDING_MISMATCH")
    assert tampered.turns.count() == 1  # nothing was sent to the model


def test_a_stale_worker_cannot_record_its_reply(demo) -> None:
    fresh = start(demo, [r.final("only")], tool_names=[])
    # Simulate: a claim whose lease was then taken over by another worker.
    Operation.objects.filter(pk=fresh.pk).update(state=S.MODEL_REQUESTED, lease_token="other")
    claim = turns.TurnClaim(
        operation_pk=fresh.pk,
        operation_id=fresh.public_id,
        lease_token="mine",
        family="openai_responses",
        model="m",
        turn=0,
        request_body={},
        conversation_length=0,
        transport=transport_for(fresh),
    )
    reply, parsed = turns._request(claim)
    turns._record(claim, reply, parsed, 1)
    fresh.refresh_from_db()
    assert fresh.state == S.MODEL_REQUESTED
    assert ModelTurn.objects.filter(operation=fresh).count() == 1
    assert fresh.events.filter(kind="turn.stale_reply_refused").exists()


def test_conversation_and_audit_never_carry_protected_data_to_the_model(demo) -> None:
    operation = start(demo, bundled_replies("refund_deny"))
    approval_decide(
        approval_pk=operation.approvals.get().pk,
        actor=operator(),
        approve=False,
        reason="No photo.",
    )
    operation.refresh_from_db()
    sent = json.dumps([t.request_body for t in operation.turns.all()])
    for call in operation.calls.all():
        assert call.binding_sha256 and call.binding_sha256 not in sent
        assert call.request_sha256 not in sent
    assert "refund-threshold-v1" not in sent
    assert demo.tenant.slug not in sent
    assert operation.state == S.COMPLETED
    denied = operation.calls.get(tool_name="submit_refund")
    assert denied.model_result == {
        "status": "error",
        "error": {
            "code": "DENIED",
            "message": "An operator denied this call; it did not run. Reason: No photo.",
        },
    }
    assert LedgerEntry.objects.count() == 0
