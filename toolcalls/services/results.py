"""Results: give each call its one envelope, bind it, and hand a complete call set back.

Binding (docs/design.md §7): every finished call stores ``binding_sha256`` over the fields of
:class:`toolcalls.binding.Binding`, and the tool and policy revisions it settled under. Before
results go back to the model the binding is computed again from current trusted context (with
those revisions) and compared value by value; any difference fails the operation with
``BINDING_MISMATCH``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NotRequired, TypedDict, Unpack

from django.conf import settings
from django.db.models import QuerySet, Subquery

from providers.base import ToolResultMessage
from providers.families import get_adapter
from toolcalls import catalogue
from toolcalls.actors import Actor
from toolcalls.binding import Binding, canonical_json, digest, request_digest
from toolcalls.compiled import Compiled
from toolcalls.envelopes import ErrorCode, error, is_error, ok
from toolcalls.errors import CallgateError
from toolcalls.guards import progress_made
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.registry import ToolContext, ToolSpec
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.scheduling import call_set_start_ready
from toolcalls.services.transitions import call_transition, operation_transition
from toolcalls.services.unit import Step
from toolcalls.states import CALL_FINISHED, OPERATION_TERMINAL, CallState, OperationState
from toolcalls.storage import storable


class BindingMismatch(CallgateError):
    """A stored result no longer matches its call's trusted context (``binding_mismatch``).
    ``call`` is the call row, ``fields`` the binding fields that differ."""

    def __init__(self, call: ToolCall, fields: Sequence[str]) -> None:
        message = f"binding mismatch on {call.public_id}: {', '.join(fields)}"
        super().__init__("binding_mismatch", message, details={"fields": list(fields)})
        self.call = call
        self.fields = list(fields)


def tool_context(operation: Operation, call: ToolCall) -> ToolContext:
    """The trusted context a call runs under (the idempotency key as stored on the call)."""
    return ToolContext(
        tenant_ref=operation.tenant.slug,
        subject_ref=operation.subject_ref,
        operation_id=operation.public_id,
        provider_call_id=call.provider_call_id,
        idempotency_key=call.idempotency_key,
        call_id=call.public_id,
    )


def binding_for(
    *, operation: Operation, turn: ModelTurn, call: ToolCall, model_result: Mapping[str, Any]
) -> Binding:
    """The binding of ``model_result`` to ``call``, computed from rows Callgate wrote and the
    catalogue (never from the stored digests); revisions as :func:`bound_revisions` says."""
    spec = catalogue.tool_spec(operation, call.tool_name)
    revisions, policy_revision = bound_revisions(operation, call)
    arguments = call.arguments if call.arguments is not None else call.raw_arguments
    key = ""
    if spec and spec.idempotency_key and call.idempotency_key:
        key = spec.idempotency_key(tool_context(operation, call), call.arguments or {})
    return Binding(
        provider=turn.provider,
        family=turn.family,
        response_id=turn.response_id,
        call_id=call.provider_call_id,
        operation_id=operation.public_id,
        idempotency_key=key,
        adapter_revision=turn.adapter_revision,
        tenant_ref=operation.tenant.slug,
        subject_ref=operation.subject_ref,
        tool_name=call.tool_name,
        tool_revisions=revisions,
        policy_revision=policy_revision,
        request_sha256=request_digest(
            tool=call.tool_name,
            schema_version=revisions.get("schema", ""),
            arguments=arguments,
            call_id=call.provider_call_id,
            response_id=turn.response_id,
        ),
        result_sha256=digest(model_result),
    )


def _current_revisions(operation: Operation, tool_name: str) -> tuple[dict[str, str], str]:
    """The tool's revisions with its ``schema`` version, and its policy revision, as the
    catalogue resolves them for ``operation`` now (none for a name it does not know)."""
    spec = catalogue.tool_spec(operation, tool_name)
    if spec is None:
        return {}, ""
    return {**spec.revisions, "schema": spec.schema_version}, spec.approval.revision


def bound_revisions(operation: Operation, call: ToolCall) -> tuple[dict[str, str], str]:
    """(tool revisions with ``schema``, policy revision) ``call``'s result is bound to: those
    stored on it when it settled, so a later deploy does not unbind a result that already ran;
    for a call settled before they were stored, the catalogue's current ones (as its digests
    were computed)."""
    if call.tool_revisions is None:
        return _current_revisions(operation, call.tool_name)
    return dict(call.tool_revisions), call.policy_revision


class CallEnd(TypedDict):
    """A call's end: its final state (``to_state``), the ``model_result`` envelope, who
    decided it (``actor``), and optionally the handler's ``audit`` (kept in
    ``protected_audit``, never sent to the model) and ``details`` for the audit event."""

    to_state: str
    model_result: Mapping[str, Any]
    actor: Actor
    audit: NotRequired[Mapping[str, Any] | None]
    details: NotRequired[Mapping[str, Any] | None]


def call_result(step: Step, call: ToolCall, **outcome: Unpack[CallEnd]) -> None:
    """Give ``call`` (held by ``step``) its result envelope and final state, with digests and
    protected audit; the set is not settled (see :func:`call_finish`)."""
    model_result = outcome["model_result"]
    if call.arguments_edited:
        # The model proposed other arguments; it must know what actually ran.
        model_result = {
            **model_result,
            "note": "An operator edited the arguments before this call ran.",
            "arguments": call.arguments,
        }
    operation = step.operation
    call.tool_revisions, call.policy_revision = _current_revisions(operation, call.tool_name)
    binding = binding_for(operation=operation, turn=call.turn, call=call, model_result=model_result)
    call.model_result = dict(model_result)
    call.result_sha256 = binding.result_sha256
    call.request_sha256 = binding.request_sha256
    call.binding_sha256 = binding.sha256()
    handler = dict(outcome.get("audit") or {})
    call.protected_audit = {"binding": binding.as_dict(), "handler": handler}
    if is_error(model_result):
        call.error_code = model_result["error"]["code"]
    step.change(call, *_RESULT_FIELDS)
    details = {"outcome": call.error_code or "ok", **(outcome.get("details") or {})}
    actor = outcome["actor"]
    call_transition(step, call, to_state=outcome["to_state"], actor=actor, details=details)


_RESULT_FIELDS = (
    "tool_revisions",
    "policy_revision",
    "model_result",
    "result_sha256",
    "request_sha256",
    "binding_sha256",
    "protected_audit",
    "error_code",
)


def call_finish(
    step: Step, call: ToolCall, *, resume: bool = False, **outcome: Unpack[CallEnd]
) -> None:
    """Finish a call, settle its set, start what is ready: :func:`call_result`, then
    :func:`call_set_advance` (``resume`` as there)."""
    call_result(step, call, **outcome)
    call_set_advance(step, turn_id=call.turn_id, actor=outcome["actor"], resume=resume)


def _target_state(states: Sequence[str]) -> str:
    # An unknown outcome keeps the set EXECUTING while the reconciler asks; escalation, when it
    # is needed, is explicit (execution and reconciliation services).
    if any(state == CallState.WAITING_APPROVAL for state in states):
        return OperationState.WAITING_APPROVAL
    if all(state in CALL_FINISHED for state in states):
        return OperationState.RESULTS_READY
    return OperationState.EXECUTING


def call_set_settle(step: Step, *, turn_id: int, actor: Actor, resume: bool = False) -> None:
    """Derive the operation's state from the states of its current call set and move it there.

    Any call waiting for a human parks the set; every call finished makes the results ready,
    counts whether the set made progress, and wakes a worker to send them. An ESCALATED
    operation moves only when ``resume`` (a human resolved what escalated it).
    """
    operation = step.operation
    if operation.state in OPERATION_TERMINAL or (
        operation.state == OperationState.ESCALATED and not resume
    ):
        return
    calls = step.call_set(turn_id)
    target = _target_state([call.state for call in calls])
    if target == operation.state:
        return
    if target == OperationState.RESULTS_READY:
        progress = progress_made(calls, step.earlier_results(turn_id))
        operation.no_progress_turns = 0 if progress else operation.no_progress_turns + 1
        step.change(operation, "no_progress_turns")
    operation_transition(step, to_state=target, actor=actor)
    if target == OperationState.RESULTS_READY:
        enqueue_turn(step, operation_pk=operation.pk)


def call_set_advance(step: Step, *, turn_id: int, actor: Actor, resume: bool = False) -> None:
    """Settle the set (:func:`call_set_settle`), then hand its next ready calls to workers
    (nothing starts for an operation that ended)."""
    call_set_settle(step, turn_id=turn_id, actor=actor, resume=resume)
    if step.operation.state not in OPERATION_TERMINAL:
        call_set_start_ready(step, turn_id=turn_id)


def call_set_results(
    *, operation: Operation, calls: Sequence[ToolCall] | None = None
) -> list[ToolResultMessage]:
    """The model-facing results of the operation's latest call set, after checking each binding,
    held to the request's size budget (:func:`request_budget`; the calls keep their whole
    results). ``calls``: that set, in position order, with their turn, as the caller's step
    holds it (its changes not yet written); by default it is read.

    Raises :class:`BindingMismatch` when a stored digest differs from the one recomputed now, and
    ``ValueError`` when a call has no result (a set is only returned complete).
    """
    if calls is None:
        calls = _LATEST_SET.run(operation_pk=operation.pk)
    if not calls:
        raise ValueError(f"{operation.public_id} has no call set to return")
    turn = calls[0].turn
    # The name a call shows in the history (a stand-in for one the provider would refuse),
    # so results paired by name still pair.
    history_name = get_adapter(operation.family).history_name
    results = []
    for call in calls:
        if call.state not in CALL_FINISHED or call.model_result is None:
            raise ValueError(f"{call.public_id} has no result yet ({call.state})")
        _verify(operation=operation, turn=turn, call=call)
        results.append(
            ToolResultMessage(
                call_id=call.provider_call_id,
                name=history_name(call.tool_name),
                model_result=call.model_result,
                is_error=is_error(call.model_result),
                synthesized=call.provider_call_id_synthesized,
            )
        )
    return request_budget(results, budget_bytes=request_result_budget(operation.model))


def _latest_set(operation_pk: int) -> QuerySet[ToolCall]:
    """The calls of the operation's latest set, in order, with their turn: one query; the
    turn's request and reply bodies (the whole conversation) are not needed to bind results."""
    latest = (
        ToolCall.objects.filter(operation_id=operation_pk)
        .order_by("-turn__index")
        .values("turn_id")[:1]
    )
    return (
        ToolCall.objects.filter(turn_id=Subquery(latest))
        .select_related("turn")
        .defer("turn__request_frame", "turn__request_items", "turn__reply")
        .order_by("position")
    )


_LATEST_SET: Compiled[ToolCall] = Compiled(_latest_set, operation_pk=int)


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
    rejected (``RESULT_TOO_LARGE``); a result that is not plain JSON fails (``TOOL_FAILED``).
    NUL and unpaired surrogates in its strings, which PostgreSQL cannot store, become U+FFFD
    (audited as ``replaced``): the tool did its work, and its result says so."""
    limit = spec.max_result_bytes or settings.CALLGATE_MAX_RESULT_BYTES
    stored = storable(data)
    replaced = {"replaced": "NUL or unpaired surrogates, by U+FFFD"} if stored != data else {}
    try:
        text = canonical_json(stored).decode()
    except (ValueError, TypeError, RecursionError) as exc:
        message = "The tool returned a result that is not plain JSON."
        return CallState.FAILED, error(ErrorCode.TOOL_FAILED, message), {"detail": str(exc)}
    size = len(text.encode())
    if size <= limit:
        return CallState.SUCCEEDED, ok(json.loads(text)), replaced
    audit = {"result_bytes": size, "limit_bytes": limit, **replaced}
    if spec.oversize == "reject":
        message = f"The result was {size} bytes, over the limit of {limit} bytes."
        return CallState.FAILED, error(ErrorCode.RESULT_TOO_LARGE, message), audit
    preview = text.encode()[: max(limit // 2, 1)].decode(errors="ignore")
    marked = {"truncated": True, "original_bytes": size, "preview": preview}
    return CallState.SUCCEEDED, ok(marked), audit


def request_result_budget(model: str) -> int:
    """Bytes of results one request to ``model`` may carry: ``CALLGATE_MODEL_REQUEST_RESULT_BYTES``
    for the longest model-name prefix it holds, else ``CALLGATE_MAX_REQUEST_RESULT_BYTES``."""
    table = settings.CALLGATE_MODEL_REQUEST_RESULT_BYTES
    matches = [prefix for prefix in table if model.startswith(prefix)]
    if not matches:
        return int(settings.CALLGATE_MAX_REQUEST_RESULT_BYTES)
    return int(table[max(matches, key=len)])


CUT_NOTE = (
    "This result was cut to fit the size budget of one request; only its beginning is shown. "
    "Ask for less (a narrower query, fewer items) if you need the rest."
)


def request_budget(
    results: Sequence[ToolResultMessage], *, budget_bytes: int
) -> list[ToolResultMessage]:
    """``results`` held to ``budget_bytes`` (bytes of canonical JSON of the envelopes, summed).

    Within the budget they go as they are. Over it, each result gets a fair share: results
    smaller than their share go whole, and each larger one is cut to the share left (so the
    largest are cut first, and most) into a marked preview (:func:`_cut`), with
    ``cut_from_bytes`` set. Deterministic: the same results and budget give the same request.
    A budget too small even for the markers leaves each cut result as its bare marker.
    """
    sizes = [len(canonical_json(result.model_result)) for result in results]
    if sum(sizes) <= budget_bytes:
        return list(results)
    shares = dict.fromkeys(range(len(results)), 0)
    left, order = budget_bytes, sorted(range(len(results)), key=lambda n: (sizes[n], n))
    for rank, n in enumerate(order):
        share = left // (len(order) - rank)
        shares[n] = min(sizes[n], share)
        left -= shares[n]
    return [
        result if sizes[n] <= shares[n] else _cut(result, sizes[n], shares[n])
        for n, result in enumerate(results)
    ]


def _cut(result: ToolResultMessage, size: int, share: int) -> ToolResultMessage:
    """``result`` as a marked preview of its canonical JSON within ``share`` bytes (an error
    stays an error, its message the preview)."""
    text = canonical_json(result.model_result).decode()
    preview = text.encode()[:share].decode(errors="ignore")
    while True:
        if result.is_error:
            code = str(result.model_result.get("error", {}).get("code", ErrorCode.TOOL_FAILED))
            envelope = error(code, f"{CUT_NOTE} Original size: {size} bytes. {preview}")
        else:
            marker = {"truncated": True, "original_bytes": size, "note": CUT_NOTE}
            envelope = ok({**marker, "preview": preview})
        excess = len(canonical_json(envelope)) - share
        if excess <= 0 or not preview:
            return replace(result, model_result=envelope, cut_from_bytes=size)
        preview = preview.encode()[: max(len(preview.encode()) - excess, 0)].decode(errors="ignore")
