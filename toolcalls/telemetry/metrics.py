"""Prometheus metrics of the loop (``prometheus-client``), served at ``/metrics``.

Counters and histograms are updated where the work happens, in whichever process does it; with
``PROMETHEUS_MULTIPROC_DIR`` set (gunicorn and Celery, before any process starts) every process
writes its values there and :func:`exposition` adds them up. Gauges of what is open now
(operations by state, pending approvals) are read from the database at each scrape instead, so
they are right whichever process changed them. Nothing is recorded unless
``CALLGATE_METRICS_TOKEN`` is set (:func:`active`).

Token usage and model-request duration follow the OpenTelemetry GenAI metrics
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` (names, attributes and
bucket boundaries), written the Prometheus way (dots as underscores, seconds).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from providers.base import Outcome, ParsedReply
from toolcalls import catalogue
from toolcalls.guards import tripped_guard
from toolcalls.models import AuditEvent, Operation, ToolCall
from toolcalls.states import CALL_FINISHED, OPERATION_ACTIVE, AuditKind, CallState, OperationState
from toolcalls.telemetry import tracing

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)

OPERATION_TRANSITIONS = Counter(
    "callgate_operation_transitions",
    "Operations that entered a state (PENDING: created), by state and API family.",
    ["state", "family"],
    registry=REGISTRY,
)
MODEL_TURNS = Counter(
    "callgate_model_turns",
    "Model requests made, by API family, model and normalized outcome.",
    ["family", "model", "outcome"],
    registry=REGISTRY,
)
_GEN_AI = ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"]
MODEL_DURATION = Histogram(
    "gen_ai_client_operation_duration_seconds",
    "Duration of model requests, seconds (gen_ai.client.operation.duration).",
    [*_GEN_AI, "error_type"],
    buckets=tuple(round(0.01 * 2**n, 2) for n in range(14)),  # 0.01 s doubling to 81.92 s
    registry=REGISTRY,
)
TOKEN_USAGE = Histogram(
    "gen_ai_client_token_usage",
    "Tokens per model request, by token type (gen_ai.client.token.usage).",
    ["gen_ai_token_type", *_GEN_AI],
    buckets=tuple(4**n for n in range(14)),
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "callgate_tool_calls",
    "Tool calls that ended, by tool and outcome (the call's final state).",
    ["tool", "outcome"],
    registry=REGISTRY,
)
APPROVAL_WAIT = Histogram(
    "callgate_approval_wait_seconds",
    "Seconds from an approval's request to its decision, by decision.",
    ["decision"],
    buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600),
    registry=REGISTRY,
)
ESCALATIONS = Counter(
    "callgate_escalations",
    "Operations handed to a human, by the guard that tripped (unknown_outcome: a side effect "
    "nobody could reconcile).",
    ["guard"],
    registry=REGISTRY,
)
PROVIDER_RETRIES = Counter(
    "callgate_provider_retries",
    "Model requests retried after a retryable provider failure, by status (the failure's raw "
    "reason, the provider's error code or status).",
    ["status"],
    registry=REGISTRY,
)
WEBHOOK_DELIVERIES = Counter(
    "callgate_webhook_deliveries",
    "Webhook delivery attempts, by outcome: delivered, retry (to be sent again) or failed.",
    ["outcome"],
    registry=REGISTRY,
)


def active() -> bool:
    """Whether metrics are recorded and served (``CALLGATE_METRICS_TOKEN`` set)."""
    return bool(settings.CALLGATE_METRICS_TOKEN)


def model_turn(
    *, family: str, model: str, provider: str, parsed: ParsedReply, seconds: float
) -> None:
    """Count one model request of ``family`` and its duration (``seconds``) and tokens."""
    MODEL_TURNS.labels(family=family, model=model, outcome=parsed.outcome.value).inc()
    gen_ai = {
        "gen_ai_operation_name": "chat",
        "gen_ai_provider_name": tracing.provider_name(provider),
        "gen_ai_request_model": model,
    }
    failed = parsed.outcome in (Outcome.API_FAILURE, Outcome.MALFORMED)
    error_type = (parsed.raw_reason or parsed.outcome.value) if failed else ""
    MODEL_DURATION.labels(**gen_ai, error_type=error_type).observe(seconds)
    if parsed.usage:
        TOKEN_USAGE.labels(gen_ai_token_type="input", **gen_ai).observe(parsed.usage.input_tokens)
        TOKEN_USAGE.labels(gen_ai_token_type="output", **gen_ai).observe(parsed.usage.output_tokens)


def audit_count(event: AuditEvent, *, approval_wait_s: float | None) -> None:
    """Count what ``event`` records: an operation entering a state (an escalation by its
    guard, a provider retry by its status), a call ending, an approval decided after
    ``approval_wait_s`` seconds."""
    details = event.details
    if event.kind in (AuditKind.OPERATION_CREATED, AuditKind.OPERATION_TRANSITION):
        family = event.operation.family
        OPERATION_TRANSITIONS.labels(state=event.to_state, family=family).inc()
        if event.to_state == OperationState.ESCALATED:
            ESCALATIONS.labels(guard=_guard(details)).inc()
        elif event.to_state == OperationState.MODEL_REQUESTED and "retry" in details:
            PROVIDER_RETRIES.labels(status=str(details.get("raw_reason") or "none")).inc()
    elif event.kind == AuditKind.CALL_TRANSITION and event.to_state in CALL_FINISHED:
        call = event.call
        assert call is not None, "a call transition names its call"
        # A name the model made up is not a label: its values would be unbounded.
        known = catalogue.tool_spec(event.operation, call.tool_name) is not None
        tool = call.tool_name if known else "(unknown)"
        TOOL_CALLS.labels(tool=tool, outcome=event.to_state.lower()).inc()
    elif approval_wait_s is not None:
        APPROVAL_WAIT.labels(decision=event.to_state.lower()).observe(approval_wait_s)


def _guard(details: Mapping[str, Any]) -> str:
    """The guard an escalation names (one tripped at a call is only named in its reason)."""
    guard = details.get("guard")
    if guard and guard != "pending":
        return str(guard)
    named = tripped_guard(str(details.get("reason") or ""))
    return named or ("unknown_outcome" if "call" in details else "other")


def webhook_delivery(*, outcome: str) -> None:
    """Count one webhook delivery attempt (``outcome``: delivered, retry or failed)."""
    if active():
        WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()


class OpenWork(Collector):
    """Gauges of open work, read from the database at each scrape: operations in each
    non-ended state by API family, and calls waiting for a human by tool. Ended operations are
    counted by ``callgate_operation_transitions`` instead (their number only grows). With the
    database out of reach they are left out of the scrape (the process's own counters are not),
    and ``callgate_open_work_read`` says 0."""

    def describe(self) -> list[Metric]:
        return []  # nothing to query at registration

    def collect(self) -> Iterator[Metric]:
        read = GaugeMetricFamily(
            "callgate_open_work_read",
            "Whether the open-work gauges were read from the database at this scrape "
            "(0: it did not answer, and they are left out).",
        )
        try:
            gauges = [_operations_open(), _approvals_pending()]
        except DatabaseError as exc:
            log.warning("metrics: open work not read, the database did not answer: %s", exc)
            read.add_metric([], 0)
            yield read
            return
        read.add_metric([], 1)
        yield from [*gauges, read]


def _operations_open() -> GaugeMetricFamily:
    operations = GaugeMetricFamily(
        "callgate_operations",
        "Operations not yet ended, by state and API family.",
        labels=["state", "family"],
    )
    rows = (
        Operation.objects.filter(state__in=OPERATION_ACTIVE)
        .values_list("state", "family")
        .annotate(n=Count("pk"))
    )
    for state, family, n in rows:
        operations.add_metric([state, family], n)
    return operations


def _approvals_pending() -> GaugeMetricFamily:
    pending = GaugeMetricFamily(
        "callgate_approvals_pending",
        "Calls waiting for a human decision, by tool.",
        labels=["tool"],
    )
    waiting = (
        # A parked call of an ended operation waits for no one (its approval is superseded).
        ToolCall.objects.filter(
            state=CallState.WAITING_APPROVAL, operation__state__in=OPERATION_ACTIVE
        )
        .order_by()
        .values_list("tool_name")
        .annotate(n=Count("pk"))
    )
    for tool, n in waiting:
        pending.add_metric([tool], n)
    return pending


def exposition() -> bytes:
    """Every metric in the Prometheus text format (version 0.0.4): this process's, or with
    ``PROMETHEUS_MULTIPROC_DIR`` every process's, and the open-work gauges."""
    scrape = CollectorRegistry(auto_describe=True)
    scrape.register(OpenWork())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(scrape)
        return generate_latest(scrape)
    return generate_latest(REGISTRY) + generate_latest(scrape)
