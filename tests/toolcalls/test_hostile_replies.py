"""Model output that is legal JSON but hostile or odd never crashes the loop, never loses the
operation, and never reaches a tool in an altered form."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from providers.payload import MAX_COUNT
from tests import replies as r
from tests.conftest import provider_settings
from tests.engine import start
from toolcalls import registry
from toolcalls.demo.models import LedgerEntry, RefundDraft
from toolcalls.models import IdempotencyRecord
from toolcalls.registry import ToolContext, ToolSpec
from toolcalls.services.operations import operation_start
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState


def _rejections(operation: Any) -> dict[str, str]:
    return {
        c.provider_call_id: c.error_code
        for c in operation.calls.all()
        if c.state == CallState.REJECTED
    }


def test_arguments_json_cannot_carry_exactly_are_invalid_and_the_loop_goes_on(demo) -> None:
    draft = '"order_id":"ORD-1002","amount_cents":{},"reason":"other"'
    calls = [
        r.call("huge", "create_refund_draft", "{" + draft.format(9007199254740993) + "}"),
        r.call("inf", "create_refund_draft", "{" + draft.format("1e400") + "}"),
        r.call("dup", "get_order", '{"order_id":"ORD-9999","order_id":"ORD-1002"}'),
        r.call("deep", "get_order", '{"order_id":' + "[" * 5000 + "]" * 5000 + "}"),
        r.call("nul", "get_order", '{"order_id":"ORD-1002\\u0000"}'),
    ]
    operation = start(demo, [r.response(*calls), r.final()])
    assert operation.state == S.COMPLETED
    assert _rejections(operation) == dict.fromkeys(
        ["huge", "inf", "dup", "deep", "nul"], "INVALID_ARGUMENTS"
    )
    dup = operation.calls.get(provider_call_id="dup")
    assert "repeat a member name" in (dup.model_result or {})["error"]["message"]
    assert RefundDraft.objects.count() == 0


def _live(demo: Any, family: str, model: str) -> Any:
    """An operation of the demo customer on the live transport (the local provider endpoint
    the test scripted), as it ended."""
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family=family,
        model=model,
        input_text="Check ORD-1002.",
        transport="live",
    )
    operation.refresh_from_db()
    return operation


def _anthropic(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    body = {
        "id": f"msg_{stop_reason}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return {"kind": "response", "http_status": 200, "body": body}


@pytest.mark.parametrize("amount", [1e20, 2.0**53, -1e300])
def test_parsed_arguments_json_cannot_carry_exactly_are_invalid_not_a_crash(
    demo, replay_server, settings, amount
) -> None:
    """A family that sends arguments as an object (no text to read again) with a number beyond
    ±(2**53-1) written as a float: its canonical form read back was an integer no digest takes,
    which crashed the turn."""
    settings.CALLGATE_PROVIDERS = provider_settings(replay_server)
    arguments = {"order_id": "ORD-1002", "amount_cents": amount, "reason": "other"}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "create_refund_draft"}
    replies = [
        _anthropic([{**tool_use, "input": arguments}], "tool_use"),
        _anthropic([{"type": "text", "text": "Done."}], "end_turn"),
    ]
    replay_server.script(model="claude-test", family="anthropic_messages", replies=replies)
    operation = _live(demo, "anthropic_messages", "claude-test")
    assert operation.state == S.COMPLETED
    assert _rejections(operation) == {"toolu_1": "INVALID_ARGUMENTS"}
    message = (operation.calls.get().model_result or {})["error"]["message"]
    assert "amount_cents: " in message and "is beyond ±9007199254740991" in message
    assert RefundDraft.objects.count() == 0


def test_nul_and_huge_identifiers_are_stored_without_crashing(
    demo, replay_server, settings
) -> None:
    # A scenario file cannot hold NUL (the database cannot store it), so the replies come from
    # the local provider endpoint through the live transport.
    settings.CALLGATE_PROVIDERS = provider_settings(replay_server)
    long_id = "call_" + "x" * 500
    text = "Order ORD-1002 \x00 is fine."
    reply = r.response(r.message(text), r.call(long_id, "get_order", {"order_id": "ORD-1002"}))
    replay_server.script(
        model="nul-model", family="openai_responses", replies=[reply, r.final("Done \x00.")]
    )
    operation = _live(demo, "openai_responses", "nul-model")
    assert operation.state == S.COMPLETED
    assert operation.calls.get().provider_call_id == long_id
    assert operation.turns.get(index=0).text == "Order ORD-1002 \ufffd is fine."
    assert operation.final_text == "Done \ufffd."


def test_numbers_equal_in_json_are_one_intent(demo) -> None:
    draft = {"order_id": "ORD-1003", "amount_cents": 30, "reason": "other"}
    as_float = '{"order_id":"ORD-1003","amount_cents":30.0,"reason":"other"}'
    operation = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", draft)),
            r.response(r.call("g1", "get_order", {"order_id": "ORD-1003"})),
            r.response(r.call("d2", "create_refund_draft", as_float)),
            r.final(),
        ],
    )
    drafts = operation.calls.filter(tool_name="create_refund_draft").order_by("turn__index")
    assert [c.state for c in drafts] == [CallState.SUCCEEDED, CallState.SUPPRESSED]
    assert operation.calls.get(provider_call_id="d2").arguments == draft  # canonical: 30, not 30.0
    assert RefundDraft.objects.count() == 1


@override_settings(CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS=100_000)
def test_a_refused_request_releases_its_key_for_the_corrected_one(demo) -> None:
    submit = {"order_id": "ORD-1003", "draft_id": "RD-ORD-1003-1", "amount_cents": 2000}
    draft = {"order_id": "ORD-1003", "amount_cents": 2000, "reason": "other"}
    operation = start(
        demo,
        [
            r.response(r.call("s1", "submit_refund", submit)),  # the draft does not exist yet
            r.response(r.call("d1", "create_refund_draft", draft)),
            r.response(r.call("s2", "submit_refund", submit)),
            r.final(),
        ],
    )
    states = {c.provider_call_id: (c.state, c.error_code) for c in operation.calls.all()}
    assert states == {
        "s1": (CallState.FAILED, "DRAFT_MISMATCH"),
        "d1": (CallState.SUCCEEDED, ""),
        "s2": (CallState.SUCCEEDED, ""),
    }
    assert LedgerEntry.objects.count() == 1


@override_settings(CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS=100_000)
def test_one_customers_stored_result_never_answers_another_customer(demo) -> None:
    submit = {"order_id": "ORD-1002", "draft_id": "RD-ORD-1002-1", "amount_cents": 20}
    draft = {"order_id": "ORD-1002", "amount_cents": 20, "reason": "other"}
    owner = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", draft)),
            r.response(r.call("s1", "submit_refund", submit)),
            r.final(),
        ],
    )
    assert owner.calls.get(provider_call_id="s1").state == CallState.SUCCEEDED
    other = start(
        demo,
        [r.response(r.call("s2", "submit_refund", submit)), r.final()],
        subject_ref="cus_2002",
    )
    call = other.calls.get()  # refused before anything runs: the order is not this customer's
    assert (call.state, call.error_code) == (CallState.REJECTED, "UNAUTHORIZED")
    assert "RF-" not in json.dumps(call.model_result)
    assert LedgerEntry.objects.count() == 1


def test_a_call_whose_twin_has_an_unknown_outcome_does_nothing(demo, monkeypatch) -> None:
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
        idempotency_key=lambda ctx, args: "slow:one-intent",
        revisions={"input": "1", "output": "1", "effect": "1", "handler": "1"},
    )
    monkeypatch.setitem(registry._REGISTRY, spec.name, spec)
    try:
        first = start(
            demo, [r.response(r.call("a", "slow_write", {})), r.final()], tool_names=["slow_write"]
        )
        assert first.state == S.ESCALATED
        second = start(
            demo, [r.response(r.call("b", "slow_write", {})), r.final()], tool_names=["slow_write"]
        )
        call = second.calls.get()
        assert (call.state, call.error_code) == (CallState.REJECTED, "IDEMPOTENCY_KEY_IN_FLIGHT")
        assert second.state == S.COMPLETED
        assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.IN_FLIGHT
    finally:
        release.set()


def test_odd_usage_counts_never_count_fewer_tokens_than_claimed(demo) -> None:
    """A claim beyond what a turn can hold counts as the most it holds (a budget still trips);
    a negative one is no count."""
    reply = r.response(r.call("g1", "get_order", {"order_id": "ORD-1001"}))
    reply["body"]["usage"] = {"input_tokens": 10**30, "output_tokens": -5}
    operation = start(demo, [reply, r.final()], budgets={"max_input_tokens": 100_000})
    assert (operation.input_tokens, operation.output_tokens) == (MAX_COUNT, 0)
    assert operation.state == S.ESCALATED
    assert operation.terminal_reason.startswith("MAX_INPUT_TOKENS")


def test_retry_after_beyond_the_limit_fails_instead_of_waiting_for_ever(demo) -> None:
    operation = start(
        demo, [r.http_error(429, "rate_limit_exceeded", retry_after="99999999999"), r.final()]
    )
    assert operation.state == S.FAILED
    assert "asked to wait" in operation.terminal_reason
    unreadable = start(
        demo, [r.http_error(429, "rate_limit_exceeded", retry_after="nan"), r.final()]
    )
    assert unreadable.state == S.COMPLETED  # an unreadable delay is ignored; backoff applies


@pytest.mark.parametrize("digits", [300, 400])
def test_a_huge_retry_after_is_shown_bounded_never_copied(demo, digits: int) -> None:
    huge = "9" * digits
    operation = start(demo, [r.http_error(429, "rate_limit_exceeded", retry_after=huge), r.final()])
    assert operation.state == S.FAILED
    assert operation.terminal_reason == (
        "API_FAILURE rate_limit_exceeded: rate_limit_exceeded happened "
        "(the provider asked to wait 86400 s)"
    )
    failed = operation.events.get(to_state=S.FAILED)
    assert failed.details["reason"] == operation.terminal_reason
    assert "9999999" not in json.dumps([e.details for e in operation.events.all()])
