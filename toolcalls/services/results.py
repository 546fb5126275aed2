"""Results: give each call its one envelope, bind it, and hand a complete call set back.

Binding (DESIGN.md §7): every finished call stores ``binding_sha256`` over the fields of
:class:`toolcalls.binding.Binding`. Before results go back to the model the binding is computed
again from current trusted context and compared value by value; any difference fails the
operation with ``BINDING_MISMATCH``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Subquery

from providers.base import ToolResultMessage
from toolcalls import registry
from toolcalls.binding import Binding, canonical_json, digest, request_digest
from toolcalls.envelopes import ErrorCode, error, is_error, ok
from toolcalls.guards import progress_made
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.registry import ToolContext, ToolSpec
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
    update_fields: Sequence[str] = (),
    save_operation: bool = True,
) -> None:
    """Give ``call`` its result envelope and final state, with digests and protected audit.

    The caller holds the operation and call row locks. ``audit`` (handler-provided, never sent
    to the model) is kept in ``protected_audit``; ``update_fields`` names other call fields the
    caller changed; ``save_operation`` as for ``call_transition``.
    """
    if call.arguments_edited:
        # The model proposed other arguments; it must know what actually ran.
        model_result = {
            **model_result,
            "note": "An operator edited the arguments before this call ran.",
            "arguments": call.arguments,
        }
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
            *update_fields,
        ],
        save_operation=save_operation,
    )


def _target_state(states: Sequence[str]) -> str:
    # An unknown outcome keeps the set EXECUTING while the reconciler asks; escalation, when it
    # is needed, is explicit (execution and reconciliation services).
    if any(state == CallState.WAITING_APPROVAL for state in states):
        return OperationState.WAITING_APPROVAL
    if all(state in CALL_FINISHED for state in states):
        return OperationState.RESULTS_READY
    return OperationState.EXECUTING


def call_set_settle(
    *,
    operation: Operation,
    turn_id: int,
    actor: str,
    resume: bool = False,
    calls: Sequence[ToolCall] | None = None,
    update_fields: Sequence[str] = (),
) -> None:
    """Derive the operation's state from the states of its current call set and move it there.

    Any call waiting for a human parks the set; every call finished makes the results ready,
    counts whether the set made progress, and wakes a worker to send them. An ESCALATED
    operation moves only when ``resume`` (a human resolved what escalated it). The caller holds
    the operation row lock; ``calls`` are the set's rows when the caller holds them current;
    ``update_fields`` names operation fields the caller changed and left for this to save (with
    the transition, or alone when the state stays).
    """
    if operation.state in OPERATION_TERMINAL or (
        operation.state == OperationState.ESCALATED and not resume
    ):
        _save(operation, update_fields)
        return
    if calls is None:
        calls = list(ToolCall.objects.filter(turn_id=turn_id))
    target = _target_state([call.state for call in calls])
    if target == operation.state:
        _save(operation, update_fields)
        return
    fields = list(update_fields)
    if target == OperationState.RESULTS_READY:
        progress = progress_made(operation, calls)
        operation.no_progress_turns = 0 if progress else operation.no_progress_turns + 1
        fields.append("no_progress_turns")
    operation_transition(operation=operation, to_state=target, actor=actor, update_fields=fields)
    if target == OperationState.RESULTS_READY:
        enqueue_turn(operation_pk=operation.pk)


def _save(operation: Operation, fields: Sequence[str]) -> None:
    if fields:
        operation.save(update_fields=sorted({*fields, "updated_at"}))


def call_set_results(*, operation: Operation) -> list[ToolResultMessage]:
    """The model-facing results of the operation's latest call set, after checking each binding.

    Raises :class:`BindingMismatch` when a stored digest differs from the one recomputed now, and
    ``ValueError`` when a call has no result (a set is only returned complete).
    """
    latest = (
        ToolCall.objects.filter(operation=operation).order_by("-turn__index").values("turn_id")[:1]
    )
    # One query for the set and its turn; the turn's request and reply bodies (the whole
    # conversation) are not needed to bind results.
    calls = list(
        ToolCall.objects.filter(turn_id=Subquery(latest))
        .select_related("turn")
        .defer("turn__request_body", "turn__reply")
        .order_by("position")
    )
    if not calls:
        raise ValueError(f"{operation.public_id} has no call set to return")
    turn = calls[0].turn
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


def success_envelope(spec: ToolSpec, data: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(state, model_result, audit) for a handler's ``data``, held to the tool's result-size
    limit (bytes of canonical JSON): a larger result is truncated to a marked preview, or
    rejected (``RESULT_TOO_LARGE``); a result that is not plain JSON fails (``TOOL_FAILED``)."""
    limit = spec.max_result_bytes or settings.CALLGATE_MAX_RESULT_BYTES
    try:
        text = canonical_json(data).decode()
    except (ValueError, TypeError, RecursionError) as exc:
        message = "The tool returned a result that is not plain JSON."
        return CallState.FAILED, error(ErrorCode.TOOL_FAILED, message), {"detail": str(exc)}
    size = len(text.encode())
    if size <= limit:
        return CallState.SUCCEEDED, ok(json.loads(text)), {}
    audit = {"result_bytes": size, "limit_bytes": limit}
    if spec.oversize == "reject":
        message = f"The result was {size} bytes, over the limit of {limit} bytes."
        return CallState.FAILED, error(ErrorCode.RESULT_TOO_LARGE, message), audit
    preview = text.encode()[: max(limit // 2, 1)].decode(errors="ignore")
    marked = {"truncated": True, "original_bytes": size, "preview": preview}
    return CallState.SUCCEEDED, ok(marked), audit
