"""Approval requests: open (from the engine), decide, expire, and resume after approval.

Lock order follows the engine's: operation, then call, then approval. Expiry is decided by the
database clock (``Now()``), at decision time and by the periodic sweep.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from approvals.models import ApprovalRequest
from toolcalls import registry
from toolcalls.diffs import arguments_diff
from toolcalls.envelopes import ErrorCode, error
from toolcalls.errors import CallgateError
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolError, ToolSpec
from toolcalls.services.audit import audit_record
from toolcalls.services.results import call_finish, call_set_settle, tool_context
from toolcalls.services.transitions import call_transition, row_transition
from toolcalls.services.validation import arguments_normalize, call_check
from toolcalls.states import APPROVAL_TRANSITIONS, OPERATION_TERMINAL, ApprovalState, CallState

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


class ApprovalError(CallgateError):
    """A decision that cannot be made. ``code``: ``not_permitted``, ``self_approval``,
    ``already_decided``, ``superseded``, ``expired``, ``reason_required`` or ``invalid_edit``."""


def approval_request_open(
    *,
    operation: Operation,
    call: ToolCall,
    spec: ToolSpec,
    canonical_arguments: str,
    reason: str,
) -> ApprovalRequest:
    """Park ``call`` for a human: the engine's one way into this app. Runs inside the engine's
    transaction that moved the call to WAITING_APPROVAL (operation and call rows locked)."""
    now = timezone.now()
    approval = ApprovalRequest.objects.create(
        call=call,
        operation=operation,
        tenant=operation.tenant,
        tool_name=call.tool_name,
        risk=spec.risk,
        canonical_arguments=canonical_arguments,
        arguments_sha256=call.arguments_sha256,
        schema_version=spec.schema_version,
        policy_revision=spec.approval.revision,
        reason=reason,
        amount_cents=_amount(spec, call.arguments),
        requested_by_id=operation.requested_by_id,
        created_at=now,
        expires_at=now + timedelta(seconds=settings.CALLGATE_APPROVAL_TTL_S),
    )
    audit_record(
        operation=operation,
        kind="approval.requested",
        actor="engine",
        call=call,
        approval_ref=approval.public_id,
        to_state=ApprovalState.PENDING,
        details={
            "tool": call.tool_name,
            "arguments_sha256": approval.arguments_sha256,
            "reason": reason,
            "expires_at": approval.expires_at.isoformat(),
        },
    )
    return approval


def _amount(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> int | None:
    value = (arguments or {}).get(spec.amount_field) if spec.amount_field else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _locked(approval_pk: int) -> tuple[Operation, ToolCall, ApprovalRequest]:
    operation_pk = ApprovalRequest.objects.values_list("operation_id", flat=True).get(
        pk=approval_pk
    )
    operation = Operation.objects.select_for_update().select_related("tenant").get(pk=operation_pk)
    approval = (
        ApprovalRequest.objects.select_for_update(of=("self",))
        .annotate(db_now=Now())
        .get(pk=approval_pk)
    )
    call = ToolCall.objects.select_for_update().select_related("turn").get(pk=approval.call_id)
    return operation, call, approval


def approval_decide(
    *,
    approval_pk: int,
    actor: User,
    approve: bool,
    reason: str = "",
    arguments: Any = None,
) -> ApprovalRequest:
    """Approve or deny; exactly one decision wins (row lock). Raises :class:`ApprovalError`.

    The requester may not decide their own request; a denial needs a reason (it is sent to the
    model). ``arguments`` (approve only) replaces the call's arguments: they are validated again
    (schema, authorization, policy revision, and the tool's precondition, which resume checks
    once more; else ``invalid_edit``), the diff, new digest and editor are audited, and the
    model is told the call ran with edited arguments. An approval past ``expires_at`` (database
    time) is marked EXPIRED and the call gets an ``APPROVAL_EXPIRED`` result;
    ``ApprovalError("expired")`` is raised after that commits. An approval whose operation already
    ended is ``superseded``. On approve, ``resume_operation`` is queued after commit.
    """
    if approve and arguments is not None:
        _edit_precheck(approval_pk, actor, arguments)
    expired = False
    with transaction.atomic(durable=True):
        operation, call, approval = _locked(approval_pk)
        _check_decider(approval, actor)
        if operation.state in OPERATION_TERMINAL:
            raise ApprovalError(
                "superseded", f"The operation already ended ({operation.state}); nothing to decide."
            )
        if approval.db_now >= approval.expires_at:  # type: ignore[attr-defined]
            _expire(operation, call, approval, actor="system")
            expired = True
        elif approve:
            if arguments is not None:
                _edit(operation, call, approval, actor, arguments)
            _decide(operation, call, approval, actor, ApprovalState.APPROVED, reason)
            call_transition(
                operation=operation,
                call=call,
                to_state=CallState.APPROVED,
                actor=_actor(actor),
                approval_ref=approval.public_id,
            )
            # robust: a lost wake-up is the recovery sweep's, never the decider's error.
            transaction.on_commit(partial(_enqueue_resume, call.pk), robust=True)
        else:
            if not reason.strip():
                raise ApprovalError("reason_required", "A denial needs a reason for the model.")
            _decide(operation, call, approval, actor, ApprovalState.DENIED, reason)
            call_finish(
                operation=operation,
                call=call,
                to_state=CallState.DENIED,
                model_result=error(
                    ErrorCode.DENIED,
                    f"An operator denied this call; it did not run. Reason: {reason.strip()}",
                ),
                actor=_actor(actor),
            )
            call_set_settle(operation=operation, turn_id=call.turn_id, actor=_actor(actor))
    if expired:
        raise ApprovalError(
            "expired", f"This approval expired at {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC."
        )
    return approval


def _edit_precheck(approval_pk: int, actor: User, arguments: Any) -> None:
    """Before any lock: an edit that validates but that the tool's precondition already refuses
    (a refund beyond its draft) is ``invalid_edit`` now, with the approval still pending, rather
    than an approval used up on a call that fails at resume. The precondition may ask another
    system, so it runs outside the decision's transaction; resume checks it again."""
    approval = ApprovalRequest.objects.select_related("operation__tenant", "call").get(
        pk=approval_pk
    )
    _check_decider(approval, actor)  # who may not decide learns nothing about the edit
    spec = registry.get(approval.tool_name)
    if spec is None or spec.precondition is None or not isinstance(arguments, Mapping):
        return
    normalized = arguments_normalize(arguments=arguments, arguments_error=False, raw_arguments=None)
    verdict = call_check(
        operation=approval.operation, tool_name=approval.tool_name, arguments=normalized
    )
    if verdict.rejected or normalized.value is None:
        return  # refused with its own message inside the transaction
    try:
        spec.precondition(tool_context(approval.operation, approval.call), normalized.value)
    except ToolError as exc:
        raise ApprovalError("invalid_edit", exc.message) from None


def _edit(
    operation: Operation, call: ToolCall, approval: ApprovalRequest, actor: User, arguments: Any
) -> None:
    """Replace the call's arguments with an operator's edit, after the validation chain."""
    normalized = arguments_normalize(
        arguments=arguments if isinstance(arguments, Mapping) else None,
        arguments_error=not isinstance(arguments, Mapping),
        raw_arguments=None,
    )
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=normalized)
    if verdict.rejected:
        raise ApprovalError("invalid_edit", verdict.error_message)
    assert verdict.spec is not None and normalized.value is not None
    if verdict.spec.approval.revision != approval.policy_revision:
        raise ApprovalError("invalid_edit", "The approval policy changed; it must be asked again.")
    if normalized.sha256 == approval.arguments_sha256:
        return
    diff = arguments_diff(call.arguments, normalized.value)
    if not approval.original_arguments:
        approval.original_arguments = approval.canonical_arguments
        approval.original_sha256 = approval.arguments_sha256
    old_sha256 = approval.arguments_sha256
    approval.canonical_arguments = normalized.canonical
    approval.arguments_sha256 = normalized.sha256
    approval.amount_cents = _amount(verdict.spec, normalized.value)
    approval.edited_by = actor
    approval.save(
        update_fields=[
            "original_arguments",
            "original_sha256",
            "canonical_arguments",
            "arguments_sha256",
            "amount_cents",
            "edited_by",
        ]
    )
    call.arguments = normalized.value
    call.arguments_sha256 = normalized.sha256
    call.arguments_edited = True
    call.save(update_fields=["arguments", "arguments_sha256", "arguments_edited", "updated_at"])
    audit_record(
        operation=operation,
        kind="approval.arguments_edited",
        actor=_actor(actor),
        call=call,
        approval_ref=approval.public_id,
        details={
            "tool": call.tool_name,
            "diff": diff,
            "old_sha256": old_sha256,
            "arguments_sha256": normalized.sha256,
            "policy": verdict.approval_reason or "no approval needed for the edited arguments",
        },
    )


def _check_decider(approval: ApprovalRequest, actor: User) -> None:
    if (
        not actor.has_perm(DECIDE_PERMISSION)
        or not approval.tenant.members.filter(pk=actor.pk).exists()
    ):
        raise ApprovalError("not_permitted", "You may not decide approvals for this tenant.")
    if approval.state != ApprovalState.PENDING:
        raise ApprovalError("already_decided", f"This approval is already {approval.state}.")
    if approval.requested_by_id == actor.pk:
        raise ApprovalError(
            "self_approval", "You requested this call; another operator must decide."
        )


def _actor(user: User) -> str:
    return f"user:{user.get_username()}"


def _decide(
    operation: Operation,
    call: ToolCall,
    approval: ApprovalRequest,
    actor: User,
    state: str,
    reason: str,
) -> None:
    approval.decided_by_id = actor.pk
    approval.decided_at = approval.db_now  # type: ignore[attr-defined]
    approval.decision_reason = reason.strip()
    row_transition(
        operation=operation,
        row=approval,
        table=APPROVAL_TRANSITIONS,
        kind="approval",
        to_state=state,
        actor=_actor(actor),
        approval_ref=approval.public_id,
        details={"call_id": call.call_id, "tool": call.tool_name, "reason": reason.strip()},
        update_fields=["decided_by", "decided_at", "decision_reason"],
    )


def _expire(operation: Operation, call: ToolCall, approval: ApprovalRequest, *, actor: str) -> None:
    approval.decided_at = approval.db_now  # type: ignore[attr-defined]
    row_transition(
        operation=operation,
        row=approval,
        table=APPROVAL_TRANSITIONS,
        kind="approval",
        to_state=ApprovalState.EXPIRED,
        actor=actor,
        approval_ref=approval.public_id,
        details={"call_id": call.call_id, "expires_at": approval.expires_at.isoformat()},
        update_fields=["decided_at"],
    )
    call_finish(
        operation=operation,
        call=call,
        to_state=CallState.EXPIRED,
        model_result=error(
            ErrorCode.APPROVAL_EXPIRED, "Nobody approved this call in time; it did not run."
        ),
        actor=actor,
    )
    call_set_settle(operation=operation, turn_id=call.turn_id, actor=actor)


def approvals_expire_due() -> int:
    """Expire every PENDING approval past ``expires_at`` (database time); returns how many."""
    due = ApprovalRequest.objects.filter(state=ApprovalState.PENDING, expires_at__lte=Now())
    count = 0
    for approval_pk in due.values_list("pk", flat=True):
        with transaction.atomic(durable=True):
            operation, call, approval = _locked(approval_pk)
            if approval.state == ApprovalState.PENDING and approval.db_now >= approval.expires_at:  # type: ignore[attr-defined]
                _expire(operation, call, approval, actor="system:expiry-sweep")
                count += 1
    return count


def _enqueue_resume(call_pk: int) -> None:
    from approvals import tasks

    tasks.resume_operation.delay(call_pk)
