"""The engine's side of human decisions: park a call, apply a decision, expire, resume.

Every call transition a decision causes happens here. The approvals app keeps the approval
record; the engine reaches it only through the desk that app registers at start-up
(:mod:`toolcalls.services.desk`: ``open`` a request for a parked call; read back the ``terms``
that were approved), so the engine imports nothing of it and the app calls the engine once per
decision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from toolcalls import catalogue
from toolcalls.actors import ENGINE, Actor
from toolcalls.compiled import Compiled
from toolcalls.envelopes import ErrorCode, error
from toolcalls.errors import CallgateError
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolError, ToolSpec
from toolcalls.services.desk import approval_desk
from toolcalls.services.enqueue import enqueue_resume
from toolcalls.services.execution import call_execute
from toolcalls.services.results import call_finish, tool_context
from toolcalls.services.transitions import call_transition
from toolcalls.services.unit import MODEL_INPUT, Step
from toolcalls.services.validation import arguments_normalize, call_check
from toolcalls.states import CallState


class ApprovalError(CallgateError):
    """A decision that cannot be made. ``code``: ``not_permitted``, ``self_approval``,
    ``already_decided``, ``superseded``, ``expired``, ``reason_required``, ``invalid_edit``
    (``details["fields"]`` naming ``arguments`` when the edited arguments are refused) or
    ``precondition_failed``."""


def _arguments_refused(message: str) -> ApprovalError:
    """``invalid_edit``: the operator's replacement arguments are refused, for ``message``."""
    return ApprovalError("invalid_edit", message, details={"fields": {"arguments": [message]}})


@dataclass(frozen=True)
class ArgumentsEdit:
    """An operator's replacement arguments after the validation chain: ``value`` (canonical
    form decoded), ``canonical`` text, ``sha256``, the tool's ``spec`` and the policy's reason
    for approval of the new arguments (``None``: they would need none)."""

    value: dict[str, Any]
    canonical: str
    sha256: str
    spec: ToolSpec
    approval_reason: str | None


def call_park(
    step: Step, call: ToolCall, *, spec: ToolSpec, canonical_arguments: str, reason: str
) -> None:
    """Park ``call`` for a human (WAITING_APPROVAL) and have an approval opened for it."""
    details = {"reason": reason}
    call_transition(step, call, to_state=CallState.WAITING_APPROVAL, actor=ENGINE, details=details)
    desk = approval_desk()
    desk.open(step, call, spec=spec, canonical_arguments=canonical_arguments, reason=reason)


def arguments_edit_check(
    *, operation: Operation, call: ToolCall, arguments: Any, policy_revision: str
) -> ArgumentsEdit:
    """Run the validation chain on an operator's replacement ``arguments`` for ``call``.

    Raises :class:`ApprovalError` (``invalid_edit``) when the chain rejects them or the tool's
    approval policy is no longer ``policy_revision`` (the request must be asked again)."""
    normalized = arguments_normalize(
        arguments=arguments if isinstance(arguments, Mapping) else None,
        arguments_error=not isinstance(arguments, Mapping),
        raw_arguments=None,
    )
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=normalized)
    if verdict.rejected:
        raise _arguments_refused(verdict.error_message)
    assert verdict.spec is not None and normalized.value is not None
    _edit_in_scope(verdict.spec, call, normalized.value)
    if verdict.spec.approval.revision != policy_revision:
        raise ApprovalError("invalid_edit", "The approval policy changed; it must be asked again.")
    return ArgumentsEdit(
        normalized.value,
        normalized.canonical,
        normalized.sha256,
        verdict.spec,
        verdict.approval_reason,
    )


def precondition_refusal(
    *, operation: Operation, call: ToolCall, arguments: Mapping[str, Any]
) -> ToolError | None:
    """The :class:`ToolError` the tool's business precondition (``ToolSpec.precondition``)
    raises for ``call`` with ``arguments`` now, or ``None`` when it holds or the tool (as the
    operation's catalogue has it) has none. The precondition may ask another system: call this
    outside any transaction."""
    spec = catalogue.tool_spec(operation, call.tool_name)
    if spec is None or spec.precondition is None:
        return None
    try:
        spec.precondition(tool_context(operation, call), arguments)
    except ToolError as exc:
        return exc
    return None


def _edit_in_scope(spec: ToolSpec, call: ToolCall, edited: Mapping[str, Any]) -> None:
    """An edit changes how much or why, never which, nor more: the arguments naming the
    intent (``ToolSpec.edit_kept``, else ``search_fields``: a refund's order and draft) stay as
    the model proposed them, and those it may only lower (``ToolSpec.edit_lowered``: a remote
    refund's amount) are at most as proposed; else ``invalid_edit``. Another target or a larger
    effect is another intent, for the model to propose."""
    proposed = call.arguments or {}
    kept = spec.search_fields if spec.edit_kept is None else spec.edit_kept
    moved = [name for name in kept if edited.get(name) != proposed.get(name)]
    if moved:
        names = ", ".join(moved)
        raise _arguments_refused(
            f"An edit may change how much or why, not which: {names} must stay as proposed."
        )
    raised = [name for name in spec.edit_lowered if _raised(proposed.get(name), edited.get(name))]
    if raised:
        limits = ", ".join(f"{name} at most {json.dumps(proposed.get(name))}" for name in raised)
        message = f"An edit may lower how much, not raise it: {limits}, as proposed."
        raise _arguments_refused(message)


def _raised(proposed: Any, edited: Any) -> bool:
    """Whether ``edited`` is more than ``proposed``: a larger number, or any change where either
    is not a number (a boolean is none)."""
    numbers = all(
        isinstance(value, int | float) and not isinstance(value, bool)
        for value in (proposed, edited)
    )
    return edited > proposed if numbers else edited != proposed


def arguments_edit_precondition(*, operation: Operation, call: ToolCall, arguments: Any) -> None:
    """Before any lock: an edit that validates but that the tool's precondition already refuses
    (a refund beyond its draft) is ``invalid_edit`` now, with the approval still pending, rather
    than an approval used up on a call that fails at resume. The precondition may ask another
    system, so it runs outside the decision's transaction; resume checks it again."""
    if not isinstance(arguments, Mapping):
        return
    normalized = arguments_normalize(arguments=arguments, arguments_error=False, raw_arguments=None)
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=normalized)
    if verdict.rejected or normalized.value is None or verdict.spec is None:
        return  # refused with its own message inside the transaction
    _edit_in_scope(verdict.spec, call, normalized.value)
    refusal = precondition_refusal(operation=operation, call=call, arguments=normalized.value)
    if refusal is not None:
        raise _arguments_refused(refusal.message)


def call_decide(
    step: Step,
    call: ToolCall,
    *,
    approve: bool,
    actor: Actor,
    approval_ref: str,
    reason: str = "",
    edit: ArgumentsEdit | None = None,
) -> None:
    """Apply a human decision to the parked ``call``: approve (with ``edit``'s arguments, when
    given; the call is resumed after commit) or deny (the model hears ``reason``)."""
    if not approve:
        message = f"An operator denied this call; it did not run. Reason: {reason.strip()}"
        result = error(ErrorCode.DENIED, message)
        call_finish(step, call, to_state=CallState.DENIED, model_result=result, actor=actor)
        return
    if edit is not None:
        call.arguments = edit.value
        call.arguments_sha256 = edit.sha256
        call.arguments_edited = True
        step.change(call, "arguments", "arguments_sha256", "arguments_edited")
    call_transition(step, call, to_state=CallState.APPROVED, actor=actor, approval_ref=approval_ref)
    enqueue_resume(step, call_pk=call.pk)


def call_expire(step: Step, call: ToolCall, *, actor: Actor) -> None:
    """Nobody decided in time: the parked ``call`` ends EXPIRED and the model is told."""
    message = "Nobody approved this call in time; it did not run."
    result = error(ErrorCode.APPROVAL_EXPIRED, message)
    call_finish(step, call, to_state=CallState.EXPIRED, model_result=result, actor=actor)


def call_resume(*, call_pk: int) -> None:
    """Revalidate an approved call against current context, then execute it.

    The tool's business precondition runs first, outside any lock (it may ask another system);
    then, under the claim's locks, the approval must still be APPROVED, decided before expiry,
    with unchanged argument digest, schema version and policy revision (a tenant's approval
    override is part of it), the tool still enabled for the tenant, and the call must pass the
    validation chain again. Any failure rejects the call with ``APPROVAL_STALE`` (or the
    chain's own code) and nothing runs.
    """
    call, problem = _RESUMED.get(call_pk=call_pk), None
    if call.state == CallState.APPROVED:
        refusal = precondition_refusal(
            operation=call.operation, call=call, arguments=call.arguments or {}
        )
        problem = (refusal.code, refusal.message) if refusal else None
    call_execute(call_pk=call_pk, precheck=partial(_still_approved, problem=problem))


def _resumed(call_pk: int) -> QuerySet[ToolCall]:
    """The call to resume with its operation and tenant, without the operation's model input."""
    deferred = (f"operation__{name}" for name in MODEL_INPUT)
    return ToolCall.objects.select_related("operation__tenant").defer(*deferred).filter(pk=call_pk)


_RESUMED: Compiled[ToolCall] = Compiled(_resumed, call_pk=int)


def _still_approved(
    operation: Operation, call: ToolCall, *, problem: tuple[str, str] | None
) -> tuple[str, str] | None:
    terms = approval_desk().terms(call)
    stale = ErrorCode.APPROVAL_STALE
    if not terms.approved or terms.decided_at is None:
        return stale, "The approval for this call is no longer valid; it did not run."
    if terms.decided_at >= terms.expires_at:
        return ErrorCode.APPROVAL_EXPIRED, "The approval came after its expiry; it did not run."
    if operation.deadline_at and timezone.now() >= operation.deadline_at:
        message = "The task's deadline passed before this call could run; it did not run."
        return ErrorCode.APPROVAL_EXPIRED, message
    if not catalogue.enabled(operation, call.tool_name):
        return stale, "The tool was disabled after approval was requested; it did not run."
    arguments = arguments_normalize(
        arguments=call.arguments, arguments_error=call.arguments is None, raw_arguments=None
    )
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=arguments)
    if verdict.spec is None:
        # Approved for a tool the tenant's catalogue no longer holds (a remote tool disabled,
        # or changed on its server since).
        return stale, "The tool is no longer available as approved; it did not run."
    if verdict.rejected:
        return verdict.error_code, verdict.error_message
    assert verdict.spec is not None
    if arguments.sha256 != terms.arguments_sha256:
        return stale, "The arguments changed after approval was requested; it did not run."
    if verdict.spec.schema_version != terms.schema_version:
        return stale, "The tool's schema changed after approval was requested; it did not run."
    if verdict.spec.approval.revision != terms.policy_revision:
        return stale, "The approval policy changed after approval was requested; it did not run."
    return problem
