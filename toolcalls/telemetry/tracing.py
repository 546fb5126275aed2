"""Traces of operations, following the OpenTelemetry GenAI semantic conventions (semconv 1.37+,
"Semantic conventions for generative AI systems": spans ``invoke_agent``, ``chat {model}``,
``execute_tool {tool}``; attributes ``gen_ai.*``; errors as ``error.type``).

One trace per operation: :func:`operation_context` opens it with a short root span when the
operation is created and returns the W3C trace context (``{"traceparent": …}``) the operation
stores, so every later span, in any process, after any approval pause, is a child of that root.
Only the opentelemetry API is used; the process chooses the tracer (:func:`tracer_use`, from
``config.observability``). With none chosen every function returns at once: tracing is off.

Recorded: IDs (operation, call, approval, provider response), model, provider, token counts,
finish reasons, outcomes, attempts, who decided an approval and how long it waited. Never:
digests, idempotency keys, tenant or subject references, policy revisions, protected audit data.
Tool arguments and model-facing results only with ``CALLGATE_TRACE_CONTENT``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from providers.base import Outcome, ParsedReply
from toolcalls.binding import canonical_json

_tracer: Tracer | None = None
_propagator = TraceContextTextMapPropagator()

#: ``gen_ai.provider.name`` of each provider (semconv's well-known values; Google's Gemini API
#: is ``gcp.gemini``).
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "google": "gcp.gemini"}
#: Reply outcomes that end a chat span in error (``error.type`` is the raw reason or outcome).
_ERRORS = frozenset({Outcome.API_FAILURE, Outcome.MALFORMED})


def tracer_use(tracer: Tracer | None) -> None:
    """Trace with ``tracer`` from now on (``None``: tracing off). Called once per process."""
    global _tracer
    _tracer = tracer


def active() -> bool:
    """Whether this process traces."""
    return _tracer is not None


def provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` for one of Callgate's provider names."""
    return PROVIDER_NAMES.get(provider, provider)


def _parent(trace_context: Mapping[str, str]) -> Context | None:
    """The operation's root as parent; ``None`` (the current context) for an operation created
    while tracing was off."""
    return _propagator.extract(dict(trace_context)) if trace_context else None


def operation_context(
    *, operation_id: str, provider: str, model: str, forked_from: str | None
) -> dict[str, str]:
    """Open the trace of a new operation: a root span ``invoke_agent`` (a child of the current
    span, such as the API request that starts it), ended at once; returns its W3C trace
    context to store on the operation (``{}`` when tracing is off)."""
    if _tracer is None:
        return {}
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider_name(provider),
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": operation_id,
    }
    if forked_from:
        attributes["callgate.forked_from"] = forked_from
    span = _tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes)
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    span.end()
    return carrier


def chat_start(
    *, trace_context: Mapping[str, str], operation_id: str, provider: str, model: str, turn: int
) -> Span:
    """Start the span of one model request (``chat {model}``, a client span)."""
    assert _tracer is not None
    return _tracer.start_span(
        f"chat {model}",
        context=_parent(trace_context),
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(provider),
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": operation_id,
            "callgate.turn": turn,
        },
    )


def chat_end(span: Span, parsed: ParsedReply) -> None:
    """Record the reply on its span and end it."""
    attributes: dict[str, Any] = {"callgate.outcome": parsed.outcome.value}
    if parsed.response_id:
        attributes["gen_ai.response.id"] = parsed.response_id
    if parsed.raw_reason:
        attributes["gen_ai.response.finish_reasons"] = [parsed.raw_reason]
    if parsed.usage:
        attributes["gen_ai.usage.input_tokens"] = parsed.usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = parsed.usage.output_tokens
    span.set_attributes(attributes)
    if parsed.outcome in _ERRORS:
        _error(span, parsed.raw_reason or parsed.outcome.value, parsed.error_message or "")
    span.end()


def failed(span: Span, exc: Exception) -> None:
    """End ``span`` for a request that raised ``exc`` instead of answering."""
    span.record_exception(exc)
    _error(span, type(exc).__name__, str(exc))
    span.end()


def tool_start(
    *,
    trace_context: Mapping[str, str],
    operation_id: str,
    tool: str,
    call_id: str,
    provider_call_id: str,
    attempt: int,
    arguments: Mapping[str, Any],
) -> Span:
    """Start the span of one run of a tool's handler (``execute_tool {tool}``)."""
    assert _tracer is not None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": provider_call_id,
        "gen_ai.conversation.id": operation_id,
        "callgate.call.id": call_id,
        "callgate.tool.attempt": attempt,
    }
    if settings.CALLGATE_TRACE_CONTENT:
        attributes["gen_ai.tool.call.arguments"] = canonical_json(arguments).decode()
    return _tracer.start_span(
        f"execute_tool {tool}",
        context=_parent(trace_context),
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    )


def tool_end(
    span: Span, *, outcome: str, error_type: str, message: str, result: Mapping[str, Any] | None
) -> None:
    """Record how the run ended (``outcome``: ok, tool_error, crash or timeout; ``error_type``
    empty on success; ``result`` the model-facing result, recorded only with
    ``CALLGATE_TRACE_CONTENT``) and end the span."""
    span.set_attribute("callgate.tool.outcome", outcome)
    if result is not None and settings.CALLGATE_TRACE_CONTENT:
        span.set_attribute("gen_ai.tool.call.result", canonical_json(result).decode())
    if error_type:
        _error(span, error_type, message)
    span.end()


def approval_span(
    *,
    trace_context: Mapping[str, str],
    operation_id: str,
    approval_id: str,
    tool: str,
    provider_call_id: str,
    decision: str,
    decided_by: str,
    requested_at: datetime,
    decided_at: datetime,
) -> None:
    """Record an approval's wait, from request to decision, as a span ``approval {tool}`` with
    the request and the decision as its events (times: aware datetimes)."""
    if _tracer is None:
        return
    wait_s = max((decided_at - requested_at).total_seconds(), 0.0)
    identity = {"callgate.approval.id": approval_id, "gen_ai.tool.call.id": provider_call_id}
    span = _tracer.start_span(
        f"approval {tool}",
        context=_parent(trace_context),
        kind=SpanKind.INTERNAL,
        start_time=_ns(requested_at),
        attributes={
            **identity,
            "gen_ai.tool.name": tool,
            "gen_ai.conversation.id": operation_id,
            "callgate.approval.decision": decision,
            "callgate.approval.decided_by": decided_by,
            "callgate.approval.wait_s": wait_s,
        },
    )
    span.add_event("callgate.approval.requested", identity, timestamp=_ns(requested_at))
    decided = {**identity, "callgate.approval.decision": decision}
    span.add_event("callgate.approval.decided", decided, timestamp=_ns(decided_at))
    span.end(end_time=_ns(decided_at))


def _error(span: Span, error_type: str, message: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message[:200] or None))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
