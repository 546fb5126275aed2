"""Results: give each call its one envelope, bind it, and hand a complete call set back.

Binding (DESIGN.md §7): every finished call stores ``binding_sha256`` over the fields of
:class:`toolcalls.binding.Binding`. Before results go back to the model the binding is computed
again from current trusted context and compared value by value; any difference fails the
operation with ``BINDING_MISMATCH``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from providers.base import ToolResultMessage
from toolcalls import registry
from toolcalls.binding import Binding, digest, request_digest
from toolcalls.envelopes import is_error
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.registry import ToolContext
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.transitions import call_transition, operation_transition
from toolcalls.states import CALL_FINISHED, OPERATION_TERMINAL, CallState, OperationState


class BindingMismatch(Exception):
    """A stored result no longer matches its call's trusted context. ``call`` is the call row."""

    def __init__(self, call: ToolCall, fields: Sequence[str]) -> None:
        super().__init__(f"binding mismatch on {call.public_id}: {', '.join(fields)}")
        self.call = call
        self.fields = list(fields)


def tool_context(operation: Operation, call: ToolCall) -> ToolContext:
    """The trusted context a call runs under (the idempotency key as stored on the call)."""
    return ToolContext(
        tenant_ref=operation.tenant.slug,
        subject_ref=operation.subject_ref,
        operation_id=operation.public_id,
        call_id=call.call_id,
        idempotency_key=call.idempotency_key,
    )


def binding_for(
    *, operation: Operation, turn: ModelTurn, call: ToolCall, model_result: Mapping[str, Any]
) -> Binding:
    """The binding of ``model_result`` to ``call``, computed from rows Callgate wrote and the
    current registry (never from the stored digests)."""
    spec = registry.get(call.tool_name)
    arguments = call.arguments if call.arguments is not None else call.raw_arguments
    key = ""
    if spec and spec.idempotency_key and call.idempotency_key:
        key = spec.idempotency_key(tool_context(operation, call), call.arguments or {})
    return Binding(
        provider=turn.provider,
        family=turn.family,
        response_id=turn.response_id,
        call_id=call.call_id,
        operation_id=operation.public_id,
        idempotency_key=key,
        adapter_revision=turn.adapter_revision,
        tenant_ref=operation.tenant.slug,
        subject_ref=operation.subject_ref,
        tool_name=call.tool_name,
        tool_revisions={**spec.revisions, "schema": spec.schema_version} if spec else {},
        policy_revision=spec.approval.revision if spec else "",
        request_sha256=request_digest(
            tool=call.tool_name,
            schema_version=spec.schema_version if spec else "",
            arguments=arguments,
            call_id=call.call_id,
            response_id=turn.response_id,
        ),
        result_sha256=digest(model_result),
    )


def call_finish(
    *,
    operation: Operation,
    call: ToolCall,
    to_state: str,
    model_result: Mapping[str, Any],
    actor: str,
    audit: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Give ``call`` its result envelope and final state, with digests and protected audit.

    The caller holds the operation and call row locks. ``audit`` (handler-provided, never sent
    to the model) is kept in ``protected_audit``.
    """
    binding = binding_for(operation=operation, turn=call.turn, call=call, model_result=model_result)
    call.model_result = dict(model_result)
    call.result_sha256 = binding.result_sha256
    call.request_sha256 = binding.request_sha256
    call.binding_sha256 = binding.sha256()
    call.protected_audit = {"binding": binding.as_dict(), "handler": dict(audit or {})}
    if is_error(model_result):
        call.error_code = model_result["error"]["code"]
    call_transition(
        operation=operation,
        call=call,
        to_state=to_state,
        actor=actor,
        details={"outcome": call.error_code or "ok", **(details or {})},
        update_fields=[
            "model_result",
            "result_sha256",
            "request_sha256",
            "binding_sha256",
            "protected_audit",
            "error_code",
        ],
    )


def _target_state(states: Sequence[str]) -> str:
    if any(state == CallState.UNKNOWN_OUTCOME for state in states):
        return OperationState.ESCALATED
    if any(state == CallState.WAITING_APPROVAL for state in states):
        return OperationState.WAITING_APPROVAL
    if all(state in CALL_FINISHED for state in states):
        return OperationState.RESULTS_READY
    return OperationState.EXECUTING


def call_set_settle(*, operation: Operation, turn_id: int, actor: str) -> None:
    """Derive the operation's state from the states of its current call set and move it there.

    Any call with an unknown outcome escalates; any call waiting for a human parks the set; every
    call finished makes the results ready and wakes a worker to send them. The caller holds the
    operation row lock.
    """
    if operation.state == OperationState.ESCALATED or operation.state in OPERATION_TERMINAL:
        return
    states = list(ToolCall.objects.filter(turn_id=turn_id).values_list("state", flat=True))
    target = _target_state(states)
    if target == operation.state:
        return
    reason = ""
    if target == OperationState.ESCALATED:
        reason = "UNKNOWN_OUTCOME: a side effect ended without a known outcome"
    operation_transition(operation=operation, to_state=target, actor=actor, reason=reason)
    if target == OperationState.RESULTS_READY:
        enqueue_turn(operation_pk=operation.pk)


def call_set_results(*, operation: Operation) -> list[ToolResultMessage]:
    """The model-facing results of the operation's latest call set, after checking each binding.

    Raises :class:`BindingMismatch` when a stored digest differs from the one recomputed now, and
    ``ValueError`` when a call has no result (a set is only returned complete).
    """
    turn = operation.turns.filter(calls__isnull=False).order_by("-index").first()
    if turn is None:
        raise ValueError(f"{operation.public_id} has no call set to return")
    calls = list(turn.calls.order_by("position"))
    results = []
    for call in calls:
        if call.state not in CALL_FINISHED or call.model_result is None:
            raise ValueError(f"{call.public_id} has no result yet ({call.state})")
        _verify(operation=operation, turn=turn, call=call)
        results.append(
            ToolResultMessage(
                call_id=call.call_id,
                name=call.tool_name,
                model_result=call.model_result,
                is_error=is_error(call.model_result),
                synthesized=call.call_id_synthesized,
            )
        )
    return results


def _verify(*, operation: Operation, turn: ModelTurn, call: ToolCall) -> None:
    assert call.model_result is not None
    expected = binding_for(
        operation=operation, turn=turn, call=call, model_result=call.model_result
    )
    stored = (call.protected_audit or {}).get("binding", {})
    fields = [name for name, value in expected.as_dict().items() if stored.get(name) != value]
    if expected.sha256() != call.binding_sha256:
        fields.append("binding_sha256")
    if expected.result_sha256 != call.result_sha256:
        fields.append("result_sha256")
    if fields:
        raise BindingMismatch(call, sorted(set(fields)))
