"""An operation's reason names what the provider said and leaves out what it did not say: a
provider error without a code, a message or a finish reason never reads ``None``."""

from __future__ import annotations

from typing import Any

import pytest

from providers.families import ADAPTERS
from tests import replies as r
from tests.engine import start, start_family

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _http_error(status: int, body: Any) -> dict[str, Any]:
    return {"kind": "http_error", "http_status": status, "headers": {}, "body": body}


def _response(body: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "response", "http_status": 200, "body": body}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (_http_error(400, {"error": {"message": "Bad input."}}), "API_FAILURE: Bad input."),
        (_http_error(400, {}), "API_FAILURE: HTTP 400"),
        (_http_error(400, {"error": {"code": "bad_thing"}}), "API_FAILURE bad_thing: HTTP 400"),
        (_response({"status": "failed", "error": {}}), "API_FAILURE"),
        (_response({"status": "failed", "error": {"message": "Lost."}}), "API_FAILURE: Lost."),
        (_response({"status": "incomplete"}), "TRUNCATED: the reply was cut off"),
        (
            _response({"status": "incomplete", "incomplete_details": {"reason": "max_tokens"}}),
            "TRUNCATED: the reply was cut off (max_tokens)",
        ),
        (
            _response({"id": "resp_1"}),
            f"MALFORMED_REPLY: {ADAPTERS['openai_responses'].revision}: the response is not "
            "finished (no status)",
        ),
    ],
)
def test_a_part_the_provider_left_out_is_left_out_of_the_reason(
    demo, reply: dict[str, Any], reason: str
) -> None:
    operation = start(demo, [reply, r.final()])
    assert operation.terminal_reason == reason


def test_a_refusal_without_a_finish_reason_says_only_that_the_model_declined(demo) -> None:
    refusal = _response({"choices": [{"message": {"role": "assistant", "refusal": "No."}}]})
    operation = start_family(demo, "openai_chat", [refusal])
    assert operation.terminal_reason == "REFUSAL: the model declined"


def test_a_malformed_reply_without_a_reason_ends_with_the_problem(demo) -> None:
    operation = start_family(demo, "anthropic_messages", [_response({"content": []})])
    revision = ADAPTERS["anthropic_messages"].revision
    assert operation.terminal_reason == (
        f"MALFORMED_REPLY: {revision}: no stop_reason, and neither text nor calls"
    )
