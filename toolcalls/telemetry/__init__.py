"""The engine's telemetry: traces (:mod:`.tracing`) and metrics (:mod:`.metrics`), each off
until configured, and the hooks the loop calls, one line each where the work happens:

- :func:`operation_traced` when an operation is created (its trace context, to store);
- :func:`model_request` around a turn's model request (chat span, turn metrics);
- :func:`tool_run` around a handler's run (execute_tool span);
- :func:`audit_observe` on every audit event, as an audit listener (transition counters, the
  approval span), after the recording transaction commits.

With both off each hook costs a flag test or two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial, wraps
from typing import Any, Protocol, TypeVar

from django.db import transaction

from providers.base import ParsedReply, WireReply
from providers.families import get_adapter
from toolcalls.models import AuditEvent, Operation
from toolcalls.registry import ToolError, ToolSpec
from toolcalls.states import AuditKind
from toolcalls.telemetry import metrics, tracing


def operation_traced(operation: Operation) -> dict[str, str]:
    """Open the trace of ``operation`` (being created); its W3C trace context, ``{}`` when
    tracing is off."""
    if not tracing.active():
        return {}
    forked = operation.forked_from
    return tracing.operation_context(
        operation_id=operation.public_id,
        provider=get_adapter(operation.family).provider,
        model=operation.model,
        forked_from=forked.public_id if forked else None,
    )


class TurnRequest(Protocol):
    """What a turn's claim tells about its model request."""

    @property
    def operation_id(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def trace_context(self) -> Mapping[str, str]: ...


T = TypeVar("T", bound=TurnRequest)
Reply = tuple[WireReply | None, ParsedReply]


def model_request(request: Callable[[T], Reply]) -> Callable[[T], Reply]:
    """Decorate a turn's model request: a ``chat {model}`` span around it, and the turn's
    count, duration (seconds) and token usage."""

    @wraps(request)
    def observed(claim: T) -> Reply:
        traced, counted = tracing.active(), metrics.active()
        if not (traced or counted):
            return request(claim)
        provider = get_adapter(claim.family).provider
        span = None
        if traced:
            span = tracing.chat_start(
                trace_context=claim.trace_context,
                operation_id=claim.operation_id,
                provider=provider,
                model=claim.model,
                turn=claim.turn,
            )
        started = time.monotonic()
        try:
            reply, parsed = request(claim)
        except Exception as exc:  # a bug, not a reply: the span says so, the worker goes on
            if span is not None:
                tracing.failed(span, exc)
            raise
        if span is not None:
            tracing.chat_end(span, parsed)
        if counted:
            seconds = time.monotonic() - started
            metrics.model_turn(
                family=claim.family,
                model=claim.model,
                provider=provider,
                parsed=parsed,
                seconds=seconds,
            )
        return reply, parsed

    return observed


class ToolRun(Protocol):
    """What an execution's claim tells about the run."""

    @property
    def spec(self) -> ToolSpec: ...
    @property
    def call_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def trace_context(self) -> Mapping[str, str]: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def context(self) -> Any: ...


class RunOutcome(Protocol):
    """How a handler's run ended (``kind``: ok, tool_error, crash or timeout)."""

    @property
    def kind(self) -> str: ...
    @property
    def data(self) -> Any: ...
    @property
    def tool_error(self) -> ToolError | None: ...
    @property
    def detail(self) -> str: ...


C = TypeVar("C", bound=ToolRun)
R = TypeVar("R", bound=RunOutcome)


def tool_run(run: Callable[[C], R]) -> Callable[[C], R]:
    """Decorate a handler's run: an ``execute_tool {tool}`` span around it."""

    @wraps(run)
    def traced(claim: C) -> R:
        if not tracing.active():
            return run(claim)
        span = tracing.tool_start(
            trace_context=claim.trace_context,
            operation_id=claim.context.operation_id,
            tool=claim.spec.name,
            call_id=claim.call_id,
            provider_call_id=claim.context.provider_call_id,
            attempt=claim.attempt,
            arguments=claim.arguments,
        )
        outcome = run(claim)
        failure = outcome.tool_error
        error_type = "" if outcome.kind == "ok" else (failure.code if failure else outcome.kind)
        message = failure.message if failure else outcome.detail
        result = {"code": failure.code, "message": failure.message} if failure else outcome.data
        tracing.tool_end(
            span, outcome=outcome.kind, error_type=error_type, message=message, result=result
        )
        return outcome

    return traced


def audit_observe(event: AuditEvent) -> None:
    """Audit listener: once the event's transaction commits, count it and, for an approval's
    decision, record the approval's wait (metric and span)."""
    if tracing.active() or metrics.active():
        transaction.on_commit(partial(_observed, event), robust=True)


def _observed(event: AuditEvent) -> None:
    request = _approval_request(event)
    if metrics.active():
        wait_s = (event.created_at - request["created_at"]).total_seconds() if request else None
        metrics.audit_count(event, approval_wait_s=wait_s)
    if request and tracing.active():
        tracing.approval_span(
            trace_context=event.operation.trace_context,
            operation_id=event.operation.public_id,
            approval_id=event.approval_ref,
            tool=request["call__tool_name"],
            provider_call_id=request["call__provider_call_id"],
            decision=event.to_state,
            decided_by=event.actor,
            requested_at=request["created_at"],
            decided_at=event.created_at,
        )


def _approval_request(event: AuditEvent) -> Mapping[str, Any] | None:
    """For an approval's decision: when it was requested and for which call."""
    if event.kind != AuditKind.APPROVAL_TRANSITION or not event.approval_ref:
        return None
    requests = AuditEvent.objects.filter(
        approval_ref=event.approval_ref, kind=AuditKind.APPROVAL_REQUESTED
    )
    return requests.values("created_at", "call__tool_name", "call__provider_call_id").first()
