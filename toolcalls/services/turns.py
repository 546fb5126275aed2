"""One model turn: claim → request → record (docs/design.md §3, "One turn").

The claim (a step of its own, or riding in the call record that completes the set before it:
docs/engine.md) fences the operation with a lease token and builds the request body; the model
request runs outside any transaction; the record (a step) refuses a stale lease, stores the turn
and moves the operation by the reply's normalized outcome.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import DatabaseError, Error, close_old_connections
from django.db.models import Q
from django.utils import timezone

from providers.base import ModelSettings, Outcome, ParsedReply, ToolResultMessage, WireReply
from providers.errors import TransportError
from providers.families import get_adapter
from providers.transports import ModelTransport, OnEvent
from toolcalls import catalogue, faultpoints, telemetry
from toolcalls.actors import ENGINE
from toolcalls.guards import cost_micros, turn_trip
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.reasons import with_detail
from toolcalls.services.connections import record_retrying, transient
from toolcalls.services.dispatch import call_set_dispatch
from toolcalls.services.enqueue import Claimed, enqueue_turn
from toolcalls.services.escalations import operation_escalate
from toolcalls.services.results import BindingMismatch, call_set_results
from toolcalls.services.transitions import operation_transition
from toolcalls.services.transports import MissingCredentials, transport_for
from toolcalls.services.unit import (
    Step,
    lease_clear,
    lease_free,
    lease_held,
    lease_take,
    model_input_load,
    operation_step,
)
from toolcalls.states import AuditKind, OperationState
from toolcalls.storage import storable

log = logging.getLogger("callgate.progress")
_CLAIMABLE = (OperationState.PENDING, OperationState.MODEL_REQUESTED, OperationState.RESULTS_READY)


@dataclass(frozen=True)
class TurnClaim:
    operation_pk: int
    operation_id: str
    lease_token: str
    family: str
    model: str
    turn: int
    request_body: dict[str, Any]
    #: Items of the conversation the body carries (at the end of its conversation field).
    conversation_length: int
    transport: ModelTransport
    trace_context: Mapping[str, str] = field(default_factory=dict)  # empty: untraced


def turn_run(*, operation_pk: int) -> None:
    """Advance the operation by one model request if it is waiting for one; otherwise a no-op
    (duplicate deliveries and wake-ups for finished work are harmless)."""
    claim = _claim(operation_pk)
    if claim is not None:
        turn_continue(claim)


def turn_claim_woken(step: Step, operation_pk: int) -> Claimed | None:
    """The claimer of ``toolcalls.run_turn`` (``enqueue.WakeUp.claim``): claim the next model
    turn of the step's operation in ``step``, when it waits for one and no worker holds it, as
    :func:`turn_run` would in a step of its own. The step's changes are not written yet: the
    results to send come from the call set it holds. ``None`` when it is not claimable here."""
    operation = step.operation
    if operation.pk != operation_pk or not _claimable_now(operation):
        return None
    model_input_load(operation)  # a call step does not read it
    claim = _claim_in(step)
    return Claimed(partial(turn_continue, claim) if claim is not None else None)


def turn_continue(claim: TurnClaim) -> None:
    """The claimed turn's model request, outside any transaction, and its record."""
    faultpoints.reach("turn.after_claim")
    started = time.monotonic()
    reply, parsed = _request(claim)
    latency_ms = int((time.monotonic() - started) * 1000)
    faultpoints.reach("turn.before_record")
    try:
        record_retrying(partial(_record, claim, reply, parsed, latency_ms), what=claim.operation_id)
    except DatabaseError as exc:
        if transient(exc):
            # The database stayed out of reach: the claim stands, its lease runs out and the
            # recovery sweep hands the turn out again (the poison-turn cut-off bounds that).
            raise
        # The database refused the reply as it is: a permanent property of this reply, so the
        # operation fails instead of retrying it forever.
        _fail_unstorable(claim, exc)


def _claimable(now: datetime) -> Q:
    """Operations waiting for a model request that no worker holds at ``now``."""
    return lease_free(now) & Q(state__in=_CLAIMABLE)


def _claimable_now(operation: Operation) -> bool:
    """:func:`_claimable`, of an operation a step holds."""
    now = timezone.now()
    lease_free = operation.lease_expires_at is None or operation.lease_expires_at <= now
    return lease_free and operation.state in _CLAIMABLE


def _claim(operation_pk: int) -> TurnClaim | None:
    with operation_step(operation_pk, where=_claimable, related=_CLAIM_RELATED) as step:
        if step is None:
            return None  # finished, parked, or another worker holds the lease
        return _claim_in(step)


def _claim_in(step: Step) -> TurnClaim | None:
    """Claim the turn of the step's operation (claimable, locked); ``None`` when the claim
    escalated, failed or parked it instead."""
    operation = step.operation
    now = timezone.now()
    trip = turn_trip(operation, now=now) if operation.state != OperationState.PENDING else None
    if trip:
        operation_escalate(step, reason=trip.reason, actor=ENGINE, guard=trip.guard)
        return None
    results = _results_appended(step)
    if results is None or _poisoned(step):
        return None
    try:
        transport = transport_for(operation)
    except MissingCredentials as exc:
        _fail_before_request(step, f"NO_CREDENTIALS: {exc}")
        return None
    return _claimed(step, transport, results)


_CLAIM_RELATED = ("tenant", "replay_script")


def _results_appended(step: Step) -> list[ToolResultMessage] | None:
    """The finished call set's results, appended to the conversation when the operation is
    RESULTS_READY (else none); ``None`` when they could not be and the operation failed."""
    operation = step.operation
    if operation.state != OperationState.RESULTS_READY:
        return []
    try:
        results = call_set_results(operation=operation, calls=_latest_set_held(step))
        adapter = get_adapter(operation.family)
        conversation = adapter.append_results(conversation=operation.conversation, results=results)
    except BindingMismatch as exc:
        details = {"call": exc.call.public_id, "fields": exc.fields}
        _fail_results(step, f"BINDING_MISMATCH: {exc}", details)
        return None
    except Error:
        raise  # the database failed, not the results (PEP 249): the claim is tried again
    except Exception as exc:
        # A stored result that cannot be read or shaped fails every claim the same way: the
        # operation would stay RESULTS_READY for ever, so it fails now, with what went wrong.
        _fail_results(step, f"UNLOADABLE_RESULT: {type(exc).__name__}: {exc}"[:500], {})
        return None
    operation.conversation = conversation
    return results


def _latest_set_held(step: Step) -> list[ToolCall] | None:
    """The operation's latest call set when the step holds it (a claim inside the step that
    finished it: its rows are not written yet), else ``None``."""
    calls = step.held_set()
    if calls and calls[0].turn.index == step.operation.turn_count - 1:
        return calls
    return None


def _fail_results(step: Step, reason: str, details: Mapping[str, Any]) -> None:
    operation_transition(
        step, to_state=OperationState.FAILED, actor=ENGINE, reason=reason, details=details
    )


def _poisoned(step: Step) -> bool:
    """Count this claim; a turn claimed too often and never recorded fails the operation."""
    operation = step.operation
    operation.turn_attempts += 1
    if operation.turn_attempts <= settings.CALLGATE_MAX_TURN_ATTEMPTS:
        return False
    # Only an operation already in MODEL_REQUESTED can have unrecorded claims. The last dead
    # claim's lease goes with it: an ended operation is held by no worker.
    lease_clear(step, operation)
    operation_transition(
        step,
        to_state=OperationState.FAILED,
        actor=ENGINE,
        reason=f"POISON_TURN: turn {operation.turn_count} was claimed "
        f"{operation.turn_attempts - 1} times and never recorded",
    )
    return True


def _claimed(step: Step, transport: ModelTransport, results: list[ToolResultMessage]) -> TurnClaim:
    """Lease the operation to this worker, in MODEL_REQUESTED, and build the request. The
    conversation (with any results appended) and the claim count are saved only now: a claim
    that failed the operation keeps them as they were."""
    operation = step.operation
    token = lease_take(step, operation)
    operation.wake_at = None
    step.change(operation, "conversation", "turn_attempts", "wake_at")
    if operation.state != OperationState.MODEL_REQUESTED:
        details: dict[str, Any] = {"turn": operation.turn_count}
        cut = {r.call_id: r.cut_from_bytes for r in results if r.cut_from_bytes is not None}
        if cut:
            details["results_cut"] = cut  # call ID: bytes before the request budget cut it
        operation_transition(
            step, to_state=OperationState.MODEL_REQUESTED, actor=ENGINE, details=details
        )
    body = get_adapter(operation.family).build_request(
        model=operation.model,
        conversation=operation.conversation,
        tools=catalogue.declarations(operation),
        instructions=operation.instructions,
        settings=ModelSettings.from_dict(operation.settings),
    )
    return TurnClaim(
        operation_pk=operation.pk,
        operation_id=operation.public_id,
        lease_token=token,
        family=operation.family,
        model=operation.model,
        turn=operation.turn_count,
        request_body=body,
        conversation_length=len(operation.conversation),
        transport=transport,
        trace_context=operation.trace_context,
    )


def _fail_before_request(step: Step, reason: str) -> None:
    if step.operation.state != OperationState.MODEL_REQUESTED:  # FAILED is reached from there
        operation_transition(step, to_state=OperationState.MODEL_REQUESTED, actor=ENGINE)
    operation_transition(step, to_state=OperationState.FAILED, actor=ENGINE, reason=reason)


@telemetry.model_request
def _request(claim: TurnClaim) -> tuple[WireReply | None, ParsedReply]:
    """The model request; runs outside any transaction and holds no lock."""
    try:
        reply = claim.transport.send(
            request=claim.request_body,
            turn=claim.turn,
            model=claim.model,
            on_event=_progress(claim),
        )
    except TransportError as exc:
        failure = ParsedReply(
            outcome=Outcome.API_FAILURE,
            raw_reason=exc.code,
            response_id=None,
            text=None,
            retryable=exc.retryable,
            error_message=str(exc),
        )
        return None, failure
    adapter = get_adapter(claim.family)
    return reply, adapter.parse_reply(reply, max_argument_bytes=settings.CALLGATE_STREAM_MAX_BYTES)


def _progress(claim: TurnClaim) -> OnEvent:
    """Log "preparing to call X" as a streamed call starts; nothing runs before the done event."""
    adapter = get_adapter(claim.family)
    assembler = adapter.stream_assembler(max_argument_bytes=settings.CALLGATE_STREAM_MAX_BYTES)

    def on_event(event: Mapping[str, Any]) -> None:
        tool = assembler.feed(event)
        if tool:
            log.info("progress operation_id=%s preparing to call %s", claim.operation_id, tool)

    return on_event


def _record(
    claim: TurnClaim, reply: WireReply | None, parsed: ParsedReply, latency_ms: int
) -> None:
    with operation_step(claim.operation_pk, requester=True) as step:
        assert step is not None
        operation = step.operation
        if (
            not lease_held(operation, claim.lease_token)
            or operation.state != OperationState.MODEL_REQUESTED
        ):
            step.audit(
                kind=AuditKind.TURN_STALE_REPLY_REFUSED,
                actor=ENGINE,
                details={"turn": claim.turn, "outcome": parsed.outcome.value},
            )
            return
        turn = _store_turn(step, claim, reply, parsed, latency_ms)
        _advance(step, turn, parsed)
        step.flush()
        faultpoints.reach("turn.in_record")  # inside the transaction, before it commits


def _fail_unstorable(claim: TurnClaim, exc: DatabaseError) -> None:
    close_old_connections()
    with operation_step(claim.operation_pk, related=()) as step:
        if step is None or not lease_held(step.operation, claim.lease_token):
            return
        lease_clear(step, step.operation)
        operation_transition(
            step,
            to_state=OperationState.FAILED,
            actor=ENGINE,
            reason=f"UNSTORABLE_REPLY: {type(exc).__name__}: {exc}"[:500],
        )


def _store_turn(
    step: Step,
    claim: TurnClaim,
    reply: WireReply | None,
    parsed: ParsedReply,
    latency_ms: int,
) -> ModelTurn:
    adapter = get_adapter(claim.family)
    usage = parsed.usage
    turn = ModelTurn(
        operation=step.operation,
        index=claim.turn,
        response_id=storable(parsed.response_id or ""),
        outcome=parsed.outcome.value,
        raw_reason=storable(parsed.raw_reason or ""),
        text=storable(parsed.text or ""),
        error_message=storable(parsed.error_message or ""),
        **_request_stored(step, claim, adapter.conversation_field),
        reply=storable(reply.as_dict()) if reply else None,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        provider=adapter.provider,
        family=adapter.family,
        model=claim.model,
        adapter_revision=adapter.revision,
        transport=claim.transport.name,
        sdk_version=claim.transport.sdk_version,
        latency_ms=latency_ms,
    )
    if parsed.calls:
        # The calls' checks read the operation's earlier ones; their rows go in with the step.
        step.insert_reading_history(turn, calls=len(parsed.calls))
    else:
        step.insert([turn])  # nothing in the step needs its id: it goes in with the step
    _count(step, turn, claim.model)
    return turn


def _request_stored(step: Step, claim: TurnClaim, field: str) -> dict[str, Any]:
    """The request body as a turn stores it: a frame whose conversation field keeps only what
    the adapter put before the conversation, and the conversation items no earlier turn
    stored (``ModelTurn.request_body`` joins them again). Storage grows with the items, not
    with the square of the turns."""
    operation, sent = step.operation, claim.request_body[field]
    start = len(sent) - claim.conversation_length
    new_items = sent[start + operation.conversation_stored :]
    operation.conversation_stored = claim.conversation_length
    step.change(operation, "conversation_stored")
    frame = {**claim.request_body, field: sent[:start]}
    return {"request_frame": frame, "request_items": new_items}


def _count(step: Step, turn: ModelTurn, model: str) -> None:
    """Add the recorded turn to the operation's counters and end the claim's lease."""
    operation = step.operation
    operation.turn_count += 1
    operation.input_tokens += turn.input_tokens
    operation.output_tokens += turn.output_tokens
    operation.cost_micros += cost_micros(
        model=model, input_tokens=turn.input_tokens, output_tokens=turn.output_tokens
    )
    operation.turn_attempts = 0
    step.change(
        operation, "turn_count", "input_tokens", "output_tokens", "cost_micros", "turn_attempts"
    )
    lease_clear(step, operation)


_FINAL = {
    Outcome.FINAL_TEXT: (OperationState.COMPLETED, ""),
    Outcome.REFUSAL: (OperationState.REFUSED, "REFUSAL: the model declined"),
    Outcome.TRUNCATED: (OperationState.INCOMPLETE, "TRUNCATED: the reply was cut off"),
}


def _advance(step: Step, turn: ModelTurn, parsed: ParsedReply) -> None:
    """Move the operation by the reply's outcome. Only FINAL_TEXT completes."""
    operation = step.operation
    details = {
        "turn": turn.index,
        "outcome": parsed.outcome.value,
        "raw_reason": parsed.raw_reason,
        "response_id": parsed.response_id,
    }
    move = partial(_move, step, details)
    if parsed.outcome is not Outcome.API_FAILURE and operation.retry_count:
        operation.retry_count = 0
        step.change(operation, "retry_count")
    outcome = parsed.outcome
    if outcome in _FINAL:
        state, reason = _FINAL[outcome]
        if outcome is not Outcome.TRUNCATED:
            operation.final_text = storable(parsed.text or "")
            step.change(operation, "final_text")
        move(state, reason and with_detail(reason, parsed.raw_reason))
    elif outcome is Outcome.MALFORMED:
        _malformed(step, turn, parsed, move)
    elif outcome is Outcome.PAUSED:
        _continue(step, parsed)
        move(OperationState.MODEL_REQUESTED)
        enqueue_turn(step, operation_pk=operation.pk)
    elif outcome is Outcome.API_FAILURE:
        _api_failure(step, parsed, move)
    else:
        _proposals(step, turn, parsed, move)


Move = Callable[..., None]


def _move(
    step: Step, details: Mapping[str, Any], to_state: str, reason: str = "", **extra: Any
) -> None:
    operation_transition(
        step, to_state=to_state, actor=ENGINE, reason=reason, details={**details, **extra}
    )


def _continue(step: Step, parsed: ParsedReply) -> None:
    """Append the reply to the conversation."""
    operation = step.operation
    adapter = get_adapter(operation.family)
    conversation = adapter.append_reply(conversation=operation.conversation, reply=parsed)
    operation.conversation = storable(conversation)
    step.change(operation, "conversation")


def _malformed(step: Step, turn: ModelTurn, parsed: ParsedReply, move: Move) -> None:
    """A malformed call is asked for again, the same request, while
    ``CALLGATE_MALFORMED_CALL_RETRIES`` allows; any other malformed reply fails at once."""
    operation = step.operation
    retry = _malformed_streak(operation, turn) if parsed.malformed_call else 0
    if 0 < retry <= settings.CALLGATE_MALFORMED_CALL_RETRIES:
        move(OperationState.MODEL_REQUESTED, malformed_retry=retry, error=parsed.error_message)
        enqueue_turn(step, operation_pk=operation.pk)
        return
    problem = parsed.error_message or "a reply with neither usable text nor a tool call"
    move(OperationState.FAILED, with_detail(f"MALFORMED_REPLY: {problem}", parsed.raw_reason))


def _malformed_streak(operation: Operation, turn: ModelTurn) -> int:
    """Malformed turns since the last usable reply, ``turn`` (malformed, being recorded)
    included. A failed request in between does not end the streak: each turn type keeps its own
    bound. Only a malformed call is ever retried, so every earlier malformed turn of a streak
    was one."""
    streak = 1
    earlier = operation.turns.filter(index__lt=turn.index).order_by("-index")
    for outcome in earlier.values_list("outcome", flat=True):
        if outcome == Outcome.MALFORMED:
            streak += 1
        elif outcome != Outcome.API_FAILURE:
            break
    return streak


def _api_failure(step: Step, parsed: ParsedReply, move: Move) -> None:
    operation = step.operation
    message = _failure_text(parsed)
    wait = parsed.retry_after_s
    if wait is not None and wait > settings.CALLGATE_RETRY_AFTER_MAX_S:
        move(OperationState.FAILED, f"{message} (the provider asked to wait {wait:.0f} s)")
        return
    if not parsed.retryable or operation.retry_count >= settings.CALLGATE_MODEL_MAX_RETRIES:
        spent = " (retries spent)" if parsed.retryable else ""
        move(OperationState.FAILED, message + spent)
        return
    operation.retry_count += 1
    delay_s = retry_delay_s(attempt=operation.retry_count, retry_after_s=parsed.retry_after_s)
    operation.wake_at = timezone.now() + timedelta(seconds=delay_s)
    step.change(operation, "retry_count", "wake_at")
    move(OperationState.MODEL_REQUESTED, retry=operation.retry_count, delay_s=delay_s)
    enqueue_turn(step, operation_pk=operation.pk, countdown_s=delay_s)


def _failure_text(parsed: ParsedReply) -> str:
    """``API_FAILURE <reason>: <message>``: the provider's reason (its error code, type or
    status), then its message; a part it did not give is left out with its separator."""
    head = f"API_FAILURE {parsed.raw_reason}" if parsed.raw_reason else "API_FAILURE"
    return f"{head}: {parsed.error_message}" if parsed.error_message else head


def retry_delay_s(*, attempt: int, retry_after_s: float | None) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): the provider's ``retry_after_s`` when
    given, else exponential backoff from ``CALLGATE_RETRY_BASE_MS`` capped at
    ``CALLGATE_RETRY_CAP_MS``, with 25 % jitter downwards (as the official SDKs do)."""
    if retry_after_s is not None:
        return retry_after_s
    base = settings.CALLGATE_RETRY_BASE_MS * 2 ** (attempt - 1)
    capped = min(base, settings.CALLGATE_RETRY_CAP_MS) / 1000
    return capped * random.uniform(0.75, 1.0)


def _proposals(step: Step, turn: ModelTurn, parsed: ParsedReply, move: Move) -> None:
    call_ids = [call.call_id for call in parsed.calls]
    if len(set(call_ids)) != len(call_ids):
        # Results are matched to calls by ID; a reply that repeats an ID cannot be answered
        # unambiguously, so nothing in it may run.
        move(OperationState.FAILED, "MALFORMED_REPLY: the reply repeats a call ID")
        return
    renames = _recurring(step, turn, parsed)
    parsed = get_adapter(step.operation.family).for_history(parsed, renames)
    _continue(step, parsed)
    # VALIDATING lasts only as long as this transaction: the row is saved once, at the end of
    # the step, in the state dispatch settles the call set in. The audit keeps what was renamed.
    renamed = {"renamed_call_ids": renames} if renames else {}
    move(OperationState.VALIDATING, calls=len(parsed.calls), **renamed)
    call_set_dispatch(step, turn=turn, calls=parsed.calls)


def _recurring(step: Step, turn: ModelTurn, parsed: ParsedReply) -> dict[str, str]:
    """New IDs for the calls of ``parsed`` whose ID an earlier call of the operation already
    has (:func:`recurring_call_renames`); the adapter puts them in the calls and in the history
    alike (``for_history``), so each result answers the ID its call carries on the wire.

    Some models number their calls per reply (``call_0`` every turn), and Gemini may send the
    same ID-less reply twice (the same derived IDs): a call must stay addressable on its own,
    and a request may not hold two results for one ID, so the recurrence is renamed before the
    reply is stored or anything runs.
    """
    call_ids = [call.call_id for call in parsed.calls]
    taken = {past.provider_call_id for past in step.history()}
    return recurring_call_renames(call_ids=call_ids, taken=taken, turn=turn.index)


def recurring_call_renames(
    *, call_ids: Sequence[str], taken: Set[str], turn: int
) -> dict[str, str]:
    """``{old: new}`` for each of ``call_ids`` already in ``taken``: the new ID is
    ``cg<turn>_<old>`` (``_2``, ``_3``… appended while that is taken too). Deterministic, so the
    same reply at the same turn is always renamed alike; the old ID ends the new one, where a
    positional match reads it (Gemini's derived IDs end in the part position)."""
    used = set(taken) | set(call_ids)
    renames: dict[str, str] = {}
    for old in call_ids:
        if old not in taken:
            continue
        new = base = storable(f"cg{turn}_{old}")
        suffix = 2
        while new in used:
            new, suffix = f"{base}_{suffix}", suffix + 1
        used.add(new)
        renames[old] = new
    return renames
