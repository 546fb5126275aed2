"""Approval requests: open (from the engine), decide, expire, and resume after approval.

Lock order follows the engine's: operation, then call, then approval. Expiry is decided by the
database clock (``Now()``), at decision time and by the periodic sweep.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from approvals.models import ApprovalRequest
from toolcalls import registry
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolError, ToolSpec
from toolcalls.services.audit import audit_record
from toolcalls.services.execution import call_execute
from toolcalls.services.results import call_finish, call_set_settle, tool_context
from toolcalls.services.transitions import call_transition, row_transition
from toolcalls.services.validation import arguments_normalize, call_check
from toolcalls.states import APPROVAL_TRANSITIONS, ApprovalState, CallState

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


class ApprovalError(Exception):
    """A decision that cannot be made. ``code``: ``not_permitted``, ``self_approval``,
    ``already_decided``, ``expired`` or ``reason_required``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
    *, approval_pk: int, actor: User, approve: bool, reason: str = ""
) -> ApprovalRequest:
    """Approve or deny; exactly one decision wins (row lock). Raises :class:`ApprovalError`.

    The requester may not decide their own request; a denial needs a reason (it is sent to the
    model). An approval past ``expires_at`` (database time) is marked EXPIRED and the call gets
    an ``APPROVAL_EXPIRED`` result; ``ApprovalError("expired")`` is raised after that commits.
    On approve, ``resume_operation`` is queued after commit.
    """
    expired = False
    with transaction.atomic(durable=True):
        operation, call, approval = _locked(approval_pk)
        _check_decider(approval, actor)
        if approval.db_now >= approval.expires_at:  # type: ignore[attr-defined]
            _expire(operation, call, approval, actor="system")
            expired = True
        elif approve:
            _decide(operation, call, approval, actor, ApprovalState.APPROVED, reason)
            call_transition(
                operation=operation,
                call=call,
                to_state=CallState.APPROVED,
                actor=_actor(actor),
                approval_ref=approval.public_id,
            )
            transaction.on_commit(partial(_enqueue_resume, call.pk))
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


def approval_resume(*, call_pk: int) -> None:
    """Revalidate an approved call against current context, then execute it.

    The tool's business precondition runs first, outside any lock (it may ask another system);
    then, under the claim's locks, the approval must still be APPROVED, decided before expiry,
    with unchanged argument digest, schema version and policy revision, and the call must pass
    the validation chain again. Any failure rejects the call with ``APPROVAL_STALE`` (or the
    chain's own code) and nothing runs.
    """
    call = ToolCall.objects.select_related("operation__tenant").get(pk=call_pk)
    precondition_problem = None
    spec = registry.get(call.tool_name)
    if spec and spec.precondition and call.state == CallState.APPROVED:
        try:
            spec.precondition(tool_context(call.operation, call), call.arguments or {})
        except ToolError as exc:
            precondition_problem = (exc.code, exc.message)
    call_execute(call_pk=call_pk, precheck=partial(_still_approved, problem=precondition_problem))


def _still_approved(
    operation: Operation, call: ToolCall, *, problem: tuple[str, str] | None
) -> tuple[str, str] | None:
    approval = ApprovalRequest.objects.select_for_update().get(call=call)
    stale = ErrorCode.APPROVAL_STALE
    if approval.state != ApprovalState.APPROVED or approval.decided_at is None:
        return stale, "The approval for this call is no longer valid; it did not run."
    if approval.decided_at >= approval.expires_at:
        return ErrorCode.APPROVAL_EXPIRED, "The approval came after its expiry; it did not run."
    arguments = arguments_normalize(
        arguments=call.arguments, arguments_error=call.arguments is None, raw_arguments=None
    )
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=arguments)
    if verdict.rejected:
        return verdict.error_code, verdict.error_message
    assert verdict.spec is not None
    if arguments.sha256 != approval.arguments_sha256:
        return stale, "The arguments changed after approval was requested; it did not run."
    if verdict.spec.schema_version != approval.schema_version:
        return stale, "The tool's schema changed after approval was requested; it did not run."
    if verdict.spec.approval.revision != approval.policy_revision:
        return stale, "The approval policy changed after approval was requested; it did not run."
    return problem
