"""A reply the provider ended as a malformed function call (Gemini ``MALFORMED_FUNCTION_CALL``)
is asked for again, up to ``CALLGATE_MALFORMED_CALL_RETRIES`` times, each retry audited; then
the operation fails ``MALFORMED_REPLY`` as any other malformed reply does at once."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from toolcalls.models import Operation, ReplayScript
from toolcalls.services.operations import operation_start
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
MODEL = "gemini-2.5-flash"


def _reply(candidate: dict[str, Any], response_id: str) -> dict[str, Any]:
    return {
        "kind": "response",
        "http_status": 200,
        "body": {
            "candidates": [{"index": 0, **candidate}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10},
            "responseId": response_id,
        },
    }


def malformed_call(n: int) -> dict[str, Any]:
    return _reply(
        {
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "finishMessage": "Malformed function call: get_order(order_id=)",
        },
        f"malformed-{n}",
    )


def final() -> dict[str, Any]:
    content = {"role": "model", "parts": [{"text": "All done."}]}
    return _reply({"content": content, "finishReason": "STOP"}, "final")


def _start(demo: Any, replies: list[dict[str, Any]]) -> Operation:
    script = ReplayScript.objects.create(
        name="test", family="gemini_generate", model=MODEL, replies=replies
    )
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family="gemini_generate",
        model=MODEL,
        input_text="Please refund my order.",
        replay_script=script,
    )
    operation.refresh_from_db()
    return operation


def _retries(operation: Operation) -> list[dict[str, Any]]:
    events = operation.events.filter(
        kind="operation.transition", details__has_key="malformed_retry"
    )
    return [event.details for event in events.order_by("seq")]


def test_a_malformed_function_call_is_asked_for_again_and_the_operation_completes(
    demo: Any,
) -> None:
    operation = _start(demo, [malformed_call(0), malformed_call(1), final()])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert list(operation.turns.order_by("index").values_list("outcome", flat=True)) == [
        "MALFORMED",
        "MALFORMED",
        "FINAL_TEXT",
    ]
    # The same request each time: the malformed reply is not added to the conversation.
    requests = [turn.request_body for turn in operation.turns.order_by("index")]
    assert requests[0] == requests[1] == requests[2]
    retries = _retries(operation)
    assert [(d["malformed_retry"], d["turn"], d["raw_reason"]) for d in retries] == [
        (1, 0, "MALFORMED_FUNCTION_CALL"),
        (2, 1, "MALFORMED_FUNCTION_CALL"),
    ]


@override_settings(CALLGATE_MALFORMED_CALL_RETRIES=1)
def test_malformed_function_call_retries_are_bounded_by_the_setting(demo: Any) -> None:
    operation = _start(demo, [malformed_call(0), malformed_call(1), final()])

    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("MALFORMED_REPLY: ")
    assert "(MALFORMED_FUNCTION_CALL)" in operation.terminal_reason
    assert operation.turn_count == 2
    assert len(_retries(operation)) == 1


@override_settings(CALLGATE_MALFORMED_CALL_RETRIES=0)
def test_no_malformed_function_call_retries_fails_at_once(demo: Any) -> None:
    operation = _start(demo, [malformed_call(0), final()])

    assert operation.state == S.FAILED
    assert operation.turn_count == 1
    assert _retries(operation) == []


def test_other_malformed_replies_still_fail_at_once(demo: Any) -> None:
    empty = _reply({"content": {"role": "model", "parts": []}, "finishReason": "STOP"}, "empty")
    operation = _start(demo, [empty, final()])

    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("MALFORMED_REPLY: ")
    assert operation.turn_count == 1
