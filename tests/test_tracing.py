"""Traces of the refund with an approval, through a real Celery worker: one trace per operation,
every span a child of the operation's root, with the GenAI semantic conventions' names and
attributes.

The test process (the web tier: it starts the operation and decides the approval) records into
the SDK's in-memory exporter; the worker process exports over OTLP to the local receiver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from approvals.services import approval_decide
from tests import replies as r
from tests.conftest import REPO, database_url, wait_for
from tests.engine import bundled_replies, start
from tests.otlp import OtlpReceiver, ReceivedSpan
from toolcalls.models import Operation
from toolcalls.states import OperationState
from toolcalls.telemetry import tracing

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

#: Recorded by the test process, never by the worker.
IN_PROCESS = {"invoke_agent", "approval submit_refund"}
#: Attribute names that would carry protected audit data.
PROTECTED = ("sha256", "digest", "idempotency", "tenant", "subject", "policy")


@pytest.fixture
def memory_spans() -> Iterator[InMemorySpanExporter]:
    """Trace this process into memory for the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.tracer_use(provider.get_tracer("tests"))
    yield exporter
    tracing.tracer_use(None)


def _in_memory(exporter: InMemorySpanExporter) -> list[ReceivedSpan]:
    return [
        ReceivedSpan(
            name=span.name,
            trace_id=f"{span.context.trace_id:032x}",
            span_id=f"{span.context.span_id:016x}",
            parent_id=f"{span.parent.span_id:016x}" if span.parent else "",
            attributes=dict(span.attributes or {}),
            events=[event.name for event in span.events],
            status_code=span.status.status_code.value,
        )
        for span in exporter.get_finished_spans()
    ]


def _ours(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    """The worker's spans of the trace, its Celery task spans left out."""
    return [
        span
        for span in receiver.spans
        if span.trace_id == trace_id and "gen_ai.operation.name" in span.attributes
    ]


def _approve(operation: Operation) -> None:
    approval = operation.approvals.get()
    operator = get_user_model().objects.get(username="operator")
    approval_decide(approval_pk=approval.pk, actor=operator, approve=True)


def test_the_refund_is_one_trace_across_the_worker_and_the_approval(
    demo, celery_worker, otlp_receiver, memory_spans
) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    assert set(operation.trace_context) == {"traceparent"}
    state = OperationState
    wait_for(lambda: _refreshed(operation).state == state.WAITING_APPROVAL, what="the park")
    _approve(operation)
    wait_for(lambda: _refreshed(operation).state == state.COMPLETED, what="completion")
    local = _in_memory(memory_spans)
    (root,) = [span for span in local if span.name == "invoke_agent"]
    expected = 4 + 3  # four model requests, three tool runs
    remote = wait_for(
        lambda: len(_ours(otlp_receiver, root.trace_id)) >= expected and otlp_receiver.spans,
        what="the worker's spans",
    )
    assert remote
    spans = local + _ours(otlp_receiver, root.trace_id)
    assert {span.trace_id for span in spans} == {root.trace_id}
    assert all(span.parent_id == root.span_id for span in spans if span is not root)
    names = sorted(span.name for span in spans)
    assert names == sorted(
        [
            "invoke_agent",
            *["chat gpt-5.1-test"] * 4,
            "execute_tool get_order",
            "execute_tool create_refund_draft",
            "execute_tool submit_refund",
            "approval submit_refund",
        ]
    )
    _root_attributes(root, operation)
    _chat_attributes([span for span in spans if span.name.startswith("chat ")], operation)
    _tool_attributes([s for s in spans if s.name.startswith("execute_tool ")], operation)
    _approval_attributes(next(s for s in spans if s.name.startswith("approval ")), operation)
    for span in spans:
        assert not [key for key in span.attributes if any(p in key for p in PROTECTED)]


def test_a_fork_from_the_command_line_is_one_trace_through_the_worker(
    demo, celery_worker, otlp_receiver
) -> None:
    """The command's process opens the fork's trace (exported over OTLP, as the worker's
    spans are); the worker's spans of the fork are children of that root."""
    original = start(demo, bundled_replies("refund_approve"))
    parked = OperationState.WAITING_APPROVAL
    wait_for(lambda: _refreshed(original).state == parked, what="the park")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "TEST_DATABASE_URL": database_url(),
        "TEST_CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp_receiver.endpoint,
    }
    command = [sys.executable, "manage.py", "fork_operation", original.public_id]
    ran = subprocess.run(
        [*command, "--from-turn", "0"], env=env, cwd=REPO, check=True, capture_output=True
    )
    fork = Operation.objects.get(public_id=ran.stdout.decode().strip())
    wait_for(lambda: _refreshed(fork).state == parked, what="the fork's park")
    assert original.trace_context == {}  # the test process does not trace here
    trace_id = fork.trace_context["traceparent"].split("-")[1]
    expected = 1 + 3 + 1  # the root, three model requests, get_order run again
    wait_for(lambda: len(_ours(otlp_receiver, trace_id)) >= expected, what="the fork's spans")
    spans = _ours(otlp_receiver, trace_id)
    (root,) = [span for span in spans if span.name == "invoke_agent"]
    assert root.attributes["callgate.forked_from"] == original.public_id
    assert all(span.parent_id == root.span_id for span in spans if span is not root)
    names = sorted(span.name for span in spans if span is not root)
    assert names == sorted(["execute_tool get_order", *["chat gpt-5.1-test"] * 3])


def _refreshed(operation: Operation) -> Operation:
    operation.refresh_from_db()
    return operation


def _root_attributes(root: ReceivedSpan, operation: Operation) -> None:
    assert root.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5.1-test",
        "gen_ai.conversation.id": operation.public_id,
    }


def _chat_attributes(chats: list[ReceivedSpan], operation: Operation) -> None:
    turns = {turn.index: turn for turn in operation.turns.all()}
    assert sorted(span.attributes["callgate.turn"] for span in chats) == sorted(turns)
    for span in chats:
        turn = turns[span.attributes["callgate.turn"]]
        expected: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-5.1-test",
            "gen_ai.conversation.id": operation.public_id,
            "gen_ai.response.id": turn.response_id,
            "gen_ai.response.finish_reasons": (turn.raw_reason,),
            "gen_ai.usage.input_tokens": turn.input_tokens,
            "gen_ai.usage.output_tokens": turn.output_tokens,
            "callgate.outcome": turn.outcome,
        }
        assert {key: span.attributes.get(key) for key in expected} == expected


def _tool_attributes(tools: list[ReceivedSpan], operation: Operation) -> None:
    for span in tools:
        call = operation.calls.get(public_id=span.attributes["callgate.call.id"])
        assert span.attributes == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool_name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call.provider_call_id,
            "gen_ai.conversation.id": operation.public_id,
            "callgate.call.id": call.public_id,
            "callgate.tool.attempt": 1,
            "callgate.tool.outcome": "ok",
        }  # no arguments or results: CALLGATE_TRACE_CONTENT is off


def _approval_attributes(span: ReceivedSpan, operation: Operation) -> None:
    approval = operation.approvals.get()
    attributes = span.attributes
    assert attributes["callgate.approval.id"] == approval.public_id
    assert attributes["callgate.approval.decision"] == "APPROVED"
    assert attributes["callgate.approval.decided_by"] == "user:operator"
    assert approval.decided_at is not None
    wait_s = (approval.decided_at - approval.created_at).total_seconds()
    assert attributes["callgate.approval.wait_s"] == pytest.approx(wait_s, abs=0.5)
    assert span.events == ["callgate.approval.requested", "callgate.approval.decided"]


def test_a_failed_model_request_is_an_error_span(demo, eager_tasks, memory_spans) -> None:
    start(demo, [r.http_error(429, "rate_limit_exceeded")] * 5, tool_names=[])
    chats = [span for span in _in_memory(memory_spans) if span.name.startswith("chat ")]
    assert chats
    assert all(span.status_code == StatusCode.ERROR.value for span in chats)
    assert all(span.attributes["error.type"] for span in chats)


def test_a_failed_tool_run_is_an_error_span(demo, eager_tasks, memory_spans) -> None:
    lookup = r.response(r.call("c1", "get_order", {"order_id": "ORD-9999"}))
    start(demo, [lookup, r.final()], tool_names=["get_order"])
    (span,) = [s for s in _in_memory(memory_spans) if s.name == "execute_tool get_order"]
    assert span.status_code == StatusCode.ERROR.value
    assert span.attributes["error.type"] == "ORDER_NOT_FOUND"
    assert span.attributes["callgate.tool.outcome"] == "tool_error"
    assert "gen_ai.tool.call.result" not in span.attributes  # CALLGATE_TRACE_CONTENT is off


@override_settings(CALLGATE_TRACE_CONTENT=True)
def test_arguments_and_results_are_recorded_only_when_asked(
    demo, eager_tasks, memory_spans
) -> None:
    lookup = r.response(r.call("c1", "get_order", {"order_id": "ORD-1001"}))
    operation = start(demo, [lookup, r.final()], tool_names=["get_order"])
    (span,) = [s for s in _in_memory(memory_spans) if s.name == "execute_tool get_order"]
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"order_id": "ORD-1001"}
    call = operation.calls.get()
    assert call.model_result is not None
    result = json.loads(span.attributes["gen_ai.tool.call.result"])
    assert result == call.model_result["data"]


def test_an_operation_created_untraced_has_no_trace_context(demo, eager_tasks) -> None:
    assert start(demo, [r.final()], tool_names=[]).trace_context == {}
