"""The results of one request are bounded as a whole: over the budget, the largest results are
cut first (deterministically) with a marker telling the model, and the full outputs stay on
the calls for support."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from providers.base import ToolResultMessage
from tests import replies as r
from tests.engine import start
from toolcalls import registry
from toolcalls.binding import canonical_json
from toolcalls.envelopes import error, ok
from toolcalls.registry import ToolSpec
from toolcalls.services.results import request_budget, request_result_budget
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _size(model_result: Any) -> int:
    return len(canonical_json(model_result))


def _result(n: int, data_bytes: int) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=f"c{n}", name="read", model_result=ok({"blob": "x" * data_bytes}), is_error=False
    )


def test_results_within_the_budget_go_as_they_are() -> None:
    results = [_result(0, 100), _result(1, 200)]
    assert request_budget(results, budget_bytes=10_000) == results


def test_results_over_the_budget_are_cut_largest_first_within_it() -> None:
    results = [_result(0, 100), _result(1, 5_000), _result(2, 3_000), _result(3, 200)]
    sent = request_budget(results, budget_bytes=4_000)
    assert sum(_size(m.model_result) for m in sent) <= 4_000
    assert [m.model_result for m in sent[::3]] == [results[0].model_result, results[3].model_result]
    for cut, original in zip(sent[1:3], results[1:3], strict=True):
        marker = cut.model_result["data"]
        assert marker["truncated"] is True
        assert marker["original_bytes"] == _size(original.model_result)
        assert "size budget" in marker["note"]
        assert cut.cut_from_bytes == _size(original.model_result)
        assert cut.call_id == original.call_id and cut.model_result["status"] == "ok"
    # Deterministic: the same set is always cut alike.
    assert request_budget(results, budget_bytes=4_000) == sent


def test_an_error_result_over_the_budget_stays_an_error() -> None:
    big = ToolResultMessage(
        call_id="e", name="read", model_result=error("TOOL_FAILED", "y" * 3_000), is_error=True
    )
    (sent,) = request_budget([big], budget_bytes=1_000)
    assert sent.model_result["status"] == "error" and sent.is_error
    assert sent.model_result["error"]["code"] == "TOOL_FAILED"
    assert _size(sent.model_result) <= 1_000


@override_settings(
    CALLGATE_MAX_REQUEST_RESULT_BYTES=50_000,
    CALLGATE_MODEL_REQUEST_RESULT_BYTES={"gpt-5.1": 30_000, "gpt-5.1-mini": 8_000},
)
def test_the_budget_is_per_model_by_longest_prefix() -> None:
    assert request_result_budget("gpt-5.1-mini-2025") == 8_000
    assert request_result_budget("gpt-5.1-2025") == 30_000
    assert request_result_budget("claude-x") == 50_000


def _blob(ctx: Any, arguments: Any) -> dict[str, Any]:
    return {"part": arguments["part"], "blob": "z" * 30_000}


BLOB = ToolSpec(
    name="read_blob",
    description="Returns a large document.",
    parameters={
        "type": "object",
        "properties": {"part": {"type": "integer"}},
        "required": ["part"],
        "additionalProperties": False,
    },
    schema_version="blob-v1",
    risk="read",
    timeout_ms=5_000,
    handler=_blob,
)


@override_settings(CALLGATE_MAX_REQUEST_RESULT_BYTES=40_000, CALLGATE_MAX_PARALLEL=15)
def test_fifteen_large_results_fit_one_request_and_the_full_outputs_stay(demo, monkeypatch) -> None:
    monkeypatch.setitem(registry._REGISTRY, BLOB.name, BLOB)
    calls = [r.call(f"blob_{n}", "read_blob", {"part": n}) for n in range(15)]
    operation = start(demo, [r.response(*calls), r.final()], tool_names=["read_blob"])
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    body = operation.turns.get(index=1).request_body
    outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    assert len(outputs) == 15
    assert sum(len(o.encode()) for o in outputs) <= 40_000
    assert all(json.loads(o)["data"]["truncated"] for o in outputs)
    for call in operation.calls.all():
        # Support still reads the whole output; the model got the marked preview.
        assert call.state == CallState.SUCCEEDED
        assert call.model_result and len(call.model_result["data"]["blob"]) == 30_000
    claimed = operation.events.filter(kind="operation.transition", to_state="MODEL_REQUESTED")
    cut = [e.details["results_cut"] for e in claimed if "results_cut" in e.details]
    assert len(cut) == 1 and len(cut[0]) == 15
