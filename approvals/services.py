"""Approval requests: open and supersede (for the engine), decide, expire.

The engine owns every call transition (``toolcalls.services.approvals``); this app keeps the
approval record, decides who may decide, and calls the engine once per decision. Locks follow
the engine's order: operation, then call, then approval. Expiry is decided by the database
clock (``Now()``), at decision time and by the periodic sweep.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from approvals.models import ApprovalRequest, own_by
from approvals.states import APPROVAL_TRANSITIONS, ApprovalState
from toolcalls.actors import ENGINE, EXPIRY_SWEEP, Actor
from toolcalls.compiled import Compiled
from toolcalls.diffs import arguments_diff
from toolcalls.models import Operation, Tenant, ToolCall
from toolcalls.registry import ToolError, ToolSpec
from toolcalls.services.approvals import (
    ApprovalError,
    ArgumentsEdit,
    arguments_edit_check,
    arguments_edit_precondition,
    call_decide,
    call_expire,
    precondition_refusal,
)
from toolcalls.services.desk import ApprovalTerms
from toolcalls.services.results import tool_context
from toolcalls.services.transitions import row_transition
from toolcalls.services.unit import Step, call_step
from toolcalls.states import AuditKind
from toolcalls.text import visible
from toolcalls.times import rfc3339

__all__ = [
    "DECIDE_PERMISSION",
    "ApprovalError",
    "approval_decide",
    "approvals_decide_each",
    "approvals_expire_due",
    "approvals_supersede",
]

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


#: The approval of call ``call_pk``, locked: what the resume revalidates against.
_TERMS: Compiled[ApprovalRequest] = Compiled(
    lambda call_pk: ApprovalRequest.objects.select_for_update().filter(call_id=call_pk),
    call_pk=int,
)
#: The call of approval ``approval_pk``: the step deciding it locks that call.
_CALL_OF: Compiled[int] = Compiled(
    lambda approval_pk: ApprovalRequest.objects.filter(pk=approval_pk).values_list(
        "call_id", flat=True
    ),
    approval_pk=int,
)


def _decider_member(user_pk: int) -> Exists:
    """Whether user ``user_pk`` is a member of the approval's tenant (``decision_refusal``)."""
    members = Tenant.members.through.objects.filter(tenant_id=OuterRef("tenant_id"))
    return Exists(members.filter(user_id=user_pk))


#: Approval ``approval_pk`` with its operation, tenant and call, whether user ``user_pk``
#: belongs to its tenant (``decider_member``) and the database's time (``db_now``): what
#: approving it checks first.
_TO_APPROVE: Compiled[ApprovalRequest] = Compiled(
    lambda approval_pk, user_pk: (
        ApprovalRequest.objects.select_related("operation__tenant", "call")
        .annotate(decider_member=_decider_member(user_pk), db_now=Now())
        .filter(pk=approval_pk)
    ),
    approval_pk=int,
    user_pk=int,
)


def _locking(approval_pk: int) -> QuerySet[ApprovalRequest]:
    """Approval ``approval_pk`` locked (itself only), with the database's time (``db_now``)."""
    return (
        ApprovalRequest.objects.select_for_update(of=("self",))
        .annotate(db_now=Now())
        .filter(pk=approval_pk)
    )


_LOCKED: Compiled[ApprovalRequest] = Compiled(_locking, approval_pk=int)
#: As ``_LOCKED``, and whether user ``user_pk`` belongs to its tenant (``decider_member``).
_LOCKED_FOR: Compiled[ApprovalRequest] = Compiled(
    lambda approval_pk, user_pk: _locking(approval_pk).annotate(
        decider_member=_decider_member(user_pk)
    ),
    approval_pk=int,
    user_pk=int,
)
#: The PENDING approvals of operation ``operation_pk``, locked (themselves only), with the
#: database's time (``db_now``) and their call's provider ID, in the order they were asked.
_PENDING_OF: Compiled[ApprovalRequest] = Compiled(
    lambda operation_pk: (
        ApprovalRequest.objects.select_for_update(of=("self",))
        .annotate(db_now=Now(), provider_call_id=F("call__provider_call_id"))
        .filter(operation_id=operation_pk, state=ApprovalState.PENDING)
        .order_by("pk")
    ),
    operation_pk=int,
)
#: A row when user ``user_pk`` is a member of tenant ``tenant_pk``, none when not.
_MEMBERSHIP: Compiled[int] = Compiled(
    lambda tenant_pk, user_pk: Tenant.members.through.objects.filter(
        tenant_id=tenant_pk, user_id=user_pk
    ).values_list("pk", flat=True)[:1],
    tenant_pk=int,
    user_pk=int,
)


class ApprovalDesk:
    """How the engine opens approvals, reads back what was approved and has an ending
    operation's approvals superseded (``toolcalls.services.desk``; registered by
    ``ApprovalsConfig.ready``)."""

    def open(
        self, step: Step, call: ToolCall, *, spec: ToolSpec, canonical_arguments: str, reason: str
    ) -> None:
        approval_request_open(
            step, call, spec=spec, canonical_arguments=canonical_arguments, reason=reason
        )

    def terms(self, call: ToolCall) -> ApprovalTerms:
        approval = _TERMS.get(call_pk=call.pk)
        return ApprovalTerms(
            approved=approval.state == ApprovalState.APPROVED,
            decided_at=approval.decided_at,
            expires_at=approval.expires_at,
            arguments_sha256=approval.arguments_sha256,
            schema_version=approval.schema_version,
            policy_revision=approval.policy_revision,
        )

    def supersede(self, step: Step, *, ended: str) -> None:
        approvals_supersede(step, ended=ended)


def approval_request_open(
    step: Step, call: ToolCall, *, spec: ToolSpec, canonical_arguments: str, reason: str
) -> None:
    """Record the request for a human decision on ``call``, which the engine just parked: the
    approval is inserted with the step's other writes (the call's own insert among them)."""
    operation = step.operation
    now = timezone.now()
    approval = ApprovalRequest(
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
        summary=_summary(spec, operation, call, call.arguments),
        requested_by_id=operation.requested_by_id,
        created_at=now,
        expires_at=_expiry(now, operation),
    )
    step.insert([approval])
    step.audit(
        kind=AuditKind.APPROVAL_REQUESTED,
        actor=ENGINE,
        call=call,
        approval_ref=approval.public_id,
        to_state=ApprovalState.PENDING,
        details={
            "tool": call.tool_name,
            "arguments_sha256": approval.arguments_sha256,
            "reason": reason,
            "expires_at": rfc3339(approval.expires_at),
        },
    )


def approvals_supersede(step: Step, *, ended: str) -> None:
    """The step's operation ends in ``ended`` (a final state): each of its PENDING approvals is
    recorded SUPERSEDED (locked after the operation, ``decided_at`` the database's time, no
    one deciding), with its audit event, in the step that ends the operation. One already past
    its expiry or the operation's deadline is left as it is: it expired first, and the sweep
    (or a decision) records it EXPIRED, as for any other."""
    for approval in _PENDING_OF.run(operation_pk=step.operation.pk):
        approval.operation = step.operation
        if _expired(approval):
            continue
        approval.decided_at = approval.db_now  # type: ignore[attr-defined]
        step.change(approval, "decided_at")
        details = {
            "provider_call_id": approval.provider_call_id,  # type: ignore[attr-defined]
            "tool": approval.tool_name,
            "operation_state": ended,
        }
        _transition(step, approval, ApprovalState.SUPERSEDED, ENGINE, details)


def _expiry(now: datetime, operation: Operation) -> datetime:
    """When an approval opened at ``now`` expires: ``CALLGATE_APPROVAL_TTL_S`` later, and never
    after the operation's deadline (nothing may run after it)."""
    expiry = now + timedelta(seconds=settings.CALLGATE_APPROVAL_TTL_S)
    return min(expiry, operation.deadline_at) if operation.deadline_at else expiry


def _expired(approval: ApprovalRequest) -> bool:
    """Whether ``approval`` (locked by :func:`_locked`) is past its ``decidable_until`` by
    database time."""
    return bool(approval.db_now >= approval.decidable_until)  # type: ignore[attr-defined]


def _amount(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> int | None:
    value = (arguments or {}).get(spec.amount_field) if spec.amount_field else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _summary(
    spec: ToolSpec, operation: Operation, call: ToolCall, arguments: Mapping[str, Any] | None
) -> list[list[Any]]:
    """The tool's summary of the call for people (``ToolSpec.summary``) as ``[field, value]``
    pairs in the tool's order (a JSON object would not keep it), ``[]`` without one."""
    if spec.summary is None or arguments is None:
        return []
    try:
        return [[k, v] for k, v in spec.summary(tool_context(operation, call), arguments).items()]
    except ToolError:
        return []


def decision_refusal(
    *,
    approval: ApprovalRequest,
    user: User,
    member: bool | None = None,
    now: datetime | None = None,
) -> ApprovalError | None:
    """Why ``user`` cannot decide ``approval`` now, or ``None``: the one statement of the
    decider rules, for the console, the API and :func:`approval_decide`. Reads
    ``approval.operation`` (select it with the approval); ``member``, whether ``user`` belongs
    to the approval's tenant when that was read with it, else it is asked now; ``now``, the
    time its expiry is judged by (the database's where the caller read it; this server's
    clock by default). An approval that expired is ``expired`` whether the expiry is recorded
    yet or not; ``superseded``, one recorded SUPERSEDED (its operation ended first);
    ``already_decided`` is an approval a person decided."""
    if not user.has_perm(DECIDE_PERMISSION):
        return ApprovalError("not_permitted", "You can read approvals but not decide them.")
    if member is None:
        member = bool(_MEMBERSHIP.run(tenant_pk=approval.tenant_id, user_pk=user.pk))
    if not member:
        return ApprovalError("not_permitted", "You may not decide approvals for this tenant.")
    if approval.state == ApprovalState.EXPIRED or (
        approval.state == ApprovalState.PENDING
        and (now or timezone.now()) >= approval.decidable_until
    ):
        return _expired_refusal(approval)
    if approval.state == ApprovalState.SUPERSEDED:
        state = approval.operation.state
        message = f"Superseded: the operation already ended ({state}); nothing is left to decide."
        return ApprovalError("superseded", message)
    if approval.state != ApprovalState.PENDING:
        message = f"This approval is already {approval.state}; it can no longer be decided."
        return ApprovalError("already_decided", message)
    own = own_by(
        requested_by_id=approval.requested_by_id,
        started_by_id=approval.operation.started_by_id,
        user_pk=user.pk,
    )
    return ApprovalError("self_approval", _OWN_MESSAGES[own]) if own else None


#: What :func:`decision_refusal` tells the user of an approval that is their own (:func:`own_by`).
_OWN_MESSAGES = {
    "request": "You requested this call; another operator must decide it.",
    "fork": "You started this operation (a fork); another operator must decide its calls.",
}


def _expired_refusal(approval: ApprovalRequest) -> ApprovalError:
    """``expired``, saying when: at its :attr:`~ApprovalRequest.decidable_until`, or when it was
    recorded expired if that came first (its operation's deadline was extended since)."""
    expiry = approval.decidable_until
    if approval.decided_at is not None:
        expiry = min(expiry, approval.decided_at)
    return ApprovalError("expired", f"This approval expired at {expiry:%Y-%m-%d %H:%M:%S} UTC.")


def _unrecorded_expiry(approval: ApprovalRequest, refusal: ApprovalError) -> bool:
    """Whether ``refusal`` is the expiry of ``approval`` that the sweep has not recorded yet:
    deciding it records it (as EXPIRED, the call's ``APPROVAL_EXPIRED``), then refuses."""
    return refusal.code == "expired" and approval.state == ApprovalState.PENDING


#: Why a denial without a visible character in its reason is refused (``reason_required``).
REASON_REQUIRED = "A denial needs a reason for the model."


def approval_decide(
    *,
    approval_pk: int,
    actor: User,
    approve: bool,
    reason: str = "",
    arguments: Any = None,
    audit_as: Actor | None = None,
) -> ApprovalRequest:
    """Approve or deny; exactly one decision wins (row lock). Raises :class:`ApprovalError`.

    ``actor`` decides (:func:`decision_refusal`; ``audit_as`` names them in the audit trail,
    by default as the user). A denial needs a reason (it is sent to the model). An approval is
    refused (``precondition_failed``) while the tool's precondition, which the resume checks
    again, refuses the call: approving could not have its effect. ``arguments`` (approve only)
    replaces the call's arguments: they are validated again (schema, authorization, policy
    revision, and the tool's precondition; else ``invalid_edit``), the diff, new digest and
    editor are audited, and the model is told the call ran with edited arguments. An approval
    past ``expires_at`` (database time) is marked EXPIRED and the call gets an
    ``APPROVAL_EXPIRED`` result; ``ApprovalError("expired")`` is raised after that commits, and
    for an approval recorded EXPIRED before (by the sweep or such a decision) as well. An
    approval recorded SUPERSEDED (its operation ended first) is ``superseded``. On approve, the
    engine resumes the call after commit.
    """
    if approve:
        call_pk = _approve_precheck(approval_pk, actor, arguments)
    else:
        call_pk = _CALL_OF.get(approval_pk=approval_pk)
    who = audit_as or Actor.user(actor)
    with call_step(call_pk) as step:
        approval = _locked(step, approval_pk, decider=actor)
        member = approval.decider_member  # type: ignore[attr-defined]
        now = approval.db_now  # type: ignore[attr-defined]
        refusal = decision_refusal(approval=approval, user=actor, member=member, now=now)
        if refusal is None:
            _decide(step, approval, actor, who, approve, reason, arguments)
        elif _unrecorded_expiry(approval, refusal):
            _expire(step, approval, actor=ENGINE)  # kept: the refusal is raised once committed
        else:
            raise refusal
    if refusal is not None:
        raise refusal
    return approval


def approvals_decide_each(
    *, approval_pks: list[int], actor: User, approve: bool, reason: str = ""
) -> list[ApprovalError | None]:
    """Approve or deny several approvals, each exactly as :func:`approval_decide` does (its own
    transaction, row locks, every revalidation, its audit events): one refused never stops the
    others. Returns, in order, ``None`` for each decided and the :class:`ApprovalError` for each
    refused (already decided, expired, superseded, self-approval, no reason for a denial …)."""
    results: list[ApprovalError | None] = []
    for approval_pk in approval_pks:
        try:
            approval_decide(approval_pk=approval_pk, actor=actor, approve=approve, reason=reason)
        except ApprovalError as exc:
            results.append(exc)
        else:
            results.append(None)
    return results


def _locked(step: Step, approval_pk: int, *, decider: User | None = None) -> ApprovalRequest:
    """The approval, locked after the step's operation and call, with the database's time and,
    given a ``decider``, whether they belong to its tenant (``decider_member``)."""
    if decider is None:
        approval = _LOCKED.get(approval_pk=approval_pk)
    else:
        approval = _LOCKED_FOR.get(approval_pk=approval_pk, user_pk=decider.pk)
    approval.operation = step.operation
    return approval


def _approve_precheck(approval_pk: int, actor: User, arguments: Any) -> int:
    """Before any lock (the tool's precondition may ask another system), whether approving can
    have its effect: the precondition on the approval's arguments (:func:`precondition_failure`)
    or, for an edit, on the operator's (``arguments_edit_precondition``). Returns the call's pk.
    Who may not decide learns nothing about the call. Resume checks the precondition again."""
    approval = _TO_APPROVE.get(approval_pk=approval_pk, user_pk=actor.pk)
    member = approval.decider_member  # type: ignore[attr-defined]
    now = approval.db_now  # type: ignore[attr-defined]
    refusal = decision_refusal(approval=approval, user=actor, member=member, now=now)
    if refusal is not None and _unrecorded_expiry(approval, refusal):
        return approval.call_id  # the locked step records the expiry, then refuses
    if refusal is not None:
        raise refusal
    if arguments is not None:
        operation, call = approval.operation, approval.call
        arguments_edit_precondition(operation=operation, call=call, arguments=arguments)
    elif failure := precondition_failure(approval=approval):
        raise failure
    return approval.call_id


def precondition_failure(*, approval: ApprovalRequest) -> ApprovalError | None:
    """``precondition_failed`` when the tool's precondition refuses the call with the arguments
    ``approval`` asks about (the operator approves those: a call whose stored arguments no
    longer match them is refused at resume), else ``None``. Reads ``approval.operation`` and
    ``approval.call``; outside any transaction."""
    refusal = precondition_refusal(
        operation=approval.operation,
        call=approval.call,
        arguments=json.loads(approval.canonical_arguments),
    )
    if refusal is None:
        return None
    message = f"The tool's precondition refuses this call now: {refusal.message}"
    return ApprovalError("precondition_failed", message)


def _decide(
    step: Step,
    approval: ApprovalRequest,
    actor: User,
    who: Actor,
    approve: bool,
    reason: str,
    arguments: Any,
) -> None:
    call = step.call
    edit = None
    if approve and arguments is not None:
        edit = _edit(step, approval, actor, who, arguments)
    if not approve and not visible(reason):
        raise ApprovalError("reason_required", REASON_REQUIRED)
    state = ApprovalState.APPROVED if approve else ApprovalState.DENIED
    _record(step, approval, actor, who, state, reason)
    call_decide(
        step,
        call,
        approve=approve,
        actor=who,
        approval_ref=approval.public_id,
        reason=reason,
        edit=edit,
    )


def _edit(
    step: Step, approval: ApprovalRequest, actor: User, who: Actor, arguments: Any
) -> ArgumentsEdit | None:
    """Check an operator's replacement arguments and record them on the approval; ``None``
    when they are the arguments already approved for."""
    call = step.call
    edit = arguments_edit_check(
        operation=step.operation,
        call=call,
        arguments=arguments,
        policy_revision=approval.policy_revision,
    )
    if edit.sha256 == approval.arguments_sha256:
        return None
    diff = arguments_diff(call.arguments, edit.value)
    if not approval.original_arguments:
        approval.original_arguments = approval.canonical_arguments
        approval.original_sha256 = approval.arguments_sha256
    old_sha256 = approval.arguments_sha256
    approval.canonical_arguments = edit.canonical
    approval.arguments_sha256 = edit.sha256
    approval.amount_cents = _amount(edit.spec, edit.value)
    approval.summary = _summary(edit.spec, step.operation, call, edit.value)
    approval.edited_by = actor
    step.change(approval, *_EDITED)
    step.audit(
        kind=AuditKind.APPROVAL_ARGUMENTS_EDITED,
        actor=who,
        call=call,
        approval_ref=approval.public_id,
        details={
            "tool": call.tool_name,
            "diff": diff,
            "old_sha256": old_sha256,
            "arguments_sha256": edit.sha256,
            "policy": edit.approval_reason or "no approval needed for the edited arguments",
        },
    )
    return edit


_EDITED = (
    "original_arguments",
    "original_sha256",
    "canonical_arguments",
    "arguments_sha256",
    "amount_cents",
    "summary",
    "edited_by",
)


def _record(
    step: Step,
    approval: ApprovalRequest,
    actor: User,
    who: Actor,
    state: str,
    reason: str,
) -> None:
    """Record the decision on the approval."""
    call = step.call
    approval.decided_by_id = actor.pk
    approval.decided_at = approval.db_now  # type: ignore[attr-defined]
    approval.decision_reason = reason.strip()
    step.change(approval, "decided_by", "decided_at", "decision_reason")
    _transition(
        step,
        approval,
        state,
        who,
        {
            "provider_call_id": call.provider_call_id,
            "tool": call.tool_name,
            "reason": reason.strip(),
        },
    )


def _transition(
    step: Step, approval: ApprovalRequest, state: str, actor: Actor, details: dict[str, Any]
) -> None:
    row_transition(
        step,
        approval,
        table=APPROVAL_TRANSITIONS,
        kind="approval",
        audit_kind=AuditKind.APPROVAL_TRANSITION,
        to_state=state,
        actor=actor,
        approval_ref=approval.public_id,
        details=details,
    )


def _expire(step: Step, approval: ApprovalRequest, *, actor: Actor) -> None:
    call = step.call
    approval.decided_at = approval.db_now  # type: ignore[attr-defined]
    step.change(approval, "decided_at")
    details = {
        "provider_call_id": call.provider_call_id,
        "expires_at": rfc3339(approval.expires_at),
    }
    _transition(step, approval, ApprovalState.EXPIRED, actor, details)
    call_expire(step, call, actor=actor)


def approvals_expire_due() -> int:
    """Expire every PENDING approval past ``expires_at`` or its operation's deadline (database
    time); returns how many. Only PENDING ones: a decided or superseded approval keeps its
    state."""
    due = ApprovalRequest.objects.filter(
        Q(expires_at__lte=Now()) | Q(operation__deadline_at__lte=Now()),
        state=ApprovalState.PENDING,
    )
    count = 0
    for approval_pk, call_pk in due.values_list("pk", "call_id"):
        with call_step(call_pk) as step:
            approval = _locked(step, approval_pk)
            if approval.state == ApprovalState.PENDING and _expired(approval):
                _expire(step, approval, actor=EXPIRY_SWEEP)
                count += 1
    return count
