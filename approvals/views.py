"""The operator console: approval queue, approval detail, decide (GET confirm + POST)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from approvals import selectors
from approvals.forms import BulkDecisionForm, DecisionFilterForm, DecisionForm, QueueFilterForm
from approvals.models import ApprovalRequest, own_by
from approvals.services import (
    DECIDE_PERMISSION,
    ApprovalError,
    approval_decide,
    approvals_decide_each,
    decision_refusal,
)
from approvals.states import ApprovalState
from toolcalls import registry
from toolcalls.console.http import AuthenticatedHttpRequest, id_or_404, refusals_shown
from toolcalls.keyset import Page
from toolcalls.selectors import filter_choices

DECISIONS = ("approve", "deny")


def _approval(request: AuthenticatedHttpRequest, public_id: str) -> ApprovalRequest:
    try:
        return selectors.approval_get(user=request.user, public_id=id_or_404(public_id))
    except ApprovalRequest.DoesNotExist:
        raise Http404("No such approval in your tenants.") from None


def _blocker(request: AuthenticatedHttpRequest, approval: ApprovalRequest) -> str | None:
    """Why this user cannot decide this approval now, or ``None``."""
    refusal = decision_refusal(approval=approval, user=request.user)
    return refusal.message if refusal else None


def _pretty(canonical: str) -> str:
    return json.dumps(json.loads(canonical), indent=2)


def _queue_form(request: AuthenticatedHttpRequest, data: Any) -> QueueFilterForm:
    choices = filter_choices(user=request.user)
    return QueueFilterForm(data or None, tools=choices.tools, tenants=choices.tenants)


def _mine(request: AuthenticatedHttpRequest, page: Page[ApprovalRequest]) -> dict[str, str]:
    """The queue rows the user may not decide for being theirs, public ID → ``"request"`` or
    ``"fork"`` (:func:`~approvals.models.own_by`; the rows carry ``started_by_id``)."""
    mine = {
        approval.public_id: own_by(
            requested_by_id=approval.requested_by_id,
            started_by_id=approval.started_by_id,  # type: ignore[attr-defined]
            user_pk=request.user.pk,
        )
        for approval in page.rows
    }
    return {public_id: own for public_id, own in mine.items() if own}


def _pickable(page: Page[ApprovalRequest], mine: dict[str, str], now: datetime) -> set[str]:
    """Public IDs of the queue rows a user who may decide can tick for a bulk decision: those
    neither theirs (``mine``) nor past their expiry at ``now``. The queue holds only pending
    approvals of the user's tenants; the bulk decision checks each again."""
    return {a.public_id for a in page.rows if a.public_id not in mine and a.expires_at > now}


@login_required
def queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The pending approvals, filtered and sorted; the decide controls (ticks, bulk buttons,
    the approve/deny keys) only for users who may decide."""
    return render(request, "approvals/queue.html", _queue_context(request))


def _queue_context(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    """The queue page's context for the filters, order and page in ``request.GET``."""
    form = _queue_form(request, request.GET)
    filters = form.filters()
    page = selectors.approvals_queue(
        user=request.user, filters=filters, cursor=request.GET.get("after")
    )
    now = timezone.now()
    # The permission decision_refusal checks first: without it every decision is refused.
    can_decide = request.user.has_perm(DECIDE_PERMISSION)
    mine = _mine(request, page)
    return {
        "form": form,
        "page": page,
        "filters": filters.query(),
        "now": now,
        "can_decide": can_decide,
        "mine": mine,
        "pickable": _pickable(page, mine, now) if can_decide else set(),
        # Its links and filters name the queue: the bulk form's refusal shows it at another URL.
        "list_url": reverse("approvals:queue"),
    }


@login_required
def decisions(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Who decided what, when, with what reason: newest first, keyset-paged."""
    form = DecisionFilterForm(request.GET or None, tools=filter_choices(user=request.user).tools)
    page = selectors.approvals_decided(
        user=request.user, filters=form.filters(), cursor=request.GET.get("after")
    )
    context = {"form": form, "page": page, "filters": form.query()}
    return render(request, "approvals/decisions.html", context)


def _preview(approval: ApprovalRequest) -> dict[str, Any] | None:
    """The tool's dry run (``selectors.approval_preview``) while the approval can still be
    decided; ``None`` once it is decided, expired or superseded (nothing would run)."""
    if approval.state != ApprovalState.PENDING or approval.expired_now:
        return None
    return selectors.approval_preview(approval=approval)


@login_required
def detail(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    approval = _approval(request, public_id)
    preview = _preview(approval)
    context = {
        "approval": approval,
        "spec": registry.get(approval.tool_name),
        "arguments_pretty": _pretty(approval.canonical_arguments),
        "original_pretty": _pretty(approval.original_arguments)
        if approval.original_arguments
        else "",
        "model_said": selectors.approval_model_said(approval=approval),
        "siblings": selectors.approval_siblings(approval=approval),
        "earlier": selectors.approval_earlier_proposals(approval=approval),
        "preview": preview,
        "blocker": _blocker(request, approval),
        "approve_blocked": preview.get("error") if preview else None,
        "queue_query": request.GET.urlencode(),
    }
    return render(request, "approvals/detail.html", context)


def _approve_blocked(approval: ApprovalRequest) -> str | None:
    """Why approving is refused by the tool's dry run (its precondition), or ``None``: the
    approval page disables Approve and says why (``approval_decide`` refuses it too)."""
    preview = _preview(approval)
    return preview.get("error") if preview else None


#: Refusals the decide page shows with what the operator typed kept: someone or something else
#: settled the approval first, or the tool's precondition refuses the call now.
_KEPT = frozenset({"already_decided", "superseded", "expired", "precondition_failed"})
#: The status of a decision the page refuses, by refusal code: the user may not decide it
#: (403), or it can no longer be decided as sent (409); a form to correct is 200.
_REFUSED_STATUS = {"not_permitted": 403, "self_approval": 403}


@login_required
@require_http_methods(["GET", "POST"])
@refusals_shown("approvals:detail")
def decide(request: AuthenticatedHttpRequest, public_id: str, decision: str) -> HttpResponse:
    if decision not in DECISIONS:
        raise Http404("Unknown decision.")
    approval = _approval(request, public_id)
    posted = request.method == "POST"
    form = DecisionForm(
        request.POST if posted else None,
        decision=decision,
        arguments=_pretty(approval.canonical_arguments),
    )
    blocker = decision_refusal(approval=approval, user=request.user)
    if not posted and (blocker or (decision == "approve" and _approve_blocked(approval))):
        return redirect("approvals:detail", public_id=public_id)  # the detail page says why
    refused = blocker
    if blocker:
        form.is_valid()
        form.add_error(None, f"Not recorded: {blocker.message}")
    elif posted and form.is_valid():
        try:
            return _decided(request, approval, decision, form)
        except ApprovalError as exc:
            if exc.code == "invalid_edit":
                form.add_error("arguments", exc.message)
            elif exc.code == "reason_required":  # the form's own check knows only white space
                form.add_error("reason", exc.message)
            elif exc.code in _KEPT:
                form.add_error(None, f"Not recorded: {exc.message}")
                refused = exc
            else:
                raise  # shown on the approval page by refusals_shown
    context = {
        "approval": approval,
        "decision": decision,
        "form": form,
        "arguments_pretty": _pretty(approval.canonical_arguments),
        "queue_query": request.GET.urlencode(),
    }
    status = _REFUSED_STATUS.get(refused.code, 409) if refused else 200
    return render(request, "approvals/decide.html", context, status=status)


def _decided(
    request: AuthenticatedHttpRequest,
    approval: ApprovalRequest,
    decision: str,
    form: DecisionForm,
) -> HttpResponse:
    """Record the decision, then go to the operation (its outcome on top), or with "& next" to
    the next approval of the queue the operator came from (the same filters and order)."""
    approval_decide(
        approval_pk=approval.pk,
        actor=request.user,
        approve=decision == "approve",
        reason=form.cleaned_data["reason"],
        arguments=form.cleaned_data.get("arguments"),
    )
    edited = " with edited arguments" if form.cleaned_data.get("arguments") else ""
    verb = "Approved" if decision == "approve" else "Denied"
    messages.success(request, f"{verb} {approval.tool_name}{edited} ({approval.public_id}).")
    if "next" not in request.POST:
        return redirect("operations:detail", public_id=approval.operation.public_id)
    queue_form = _queue_form(request, request.GET)
    following = selectors.approval_next(
        user=request.user, filters=queue_form.filters(), after=approval
    )
    query = f"?{request.GET.urlencode()}" if request.GET else ""
    if following is None:
        messages.info(request, "That was the last approval you can decide in this queue.")
        return redirect(reverse("approvals:queue") + query)
    return redirect(reverse("approvals:detail", args=[following]) + query)


@login_required
@require_POST
def bulk(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Approve or deny the approvals ticked in the queue, each decided on its own with every
    check a single decision has (the tool's precondition included for approvals); the page
    reports each result, and each ticked ID outside the user's tenants as not in them. The
    queue's filters come in the query string; a form refused (nothing ticked, a decision sent
    twice …) decides nothing and shows the queue again with them, saying why, the reason typed
    and the ticks kept."""
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        return _bulk_refused(request, form)
    approvals, not_found = selectors.approvals_ticked(
        user=request.user, public_ids=form.cleaned_data["approval"]
    )
    results = approvals_decide_each(
        approval_pks=[a.pk for a in approvals],
        actor=request.user,
        approve=form.cleaned_data["decision"] == "approve",
        reason=form.cleaned_data["reason"],
    )
    report = [(a, exc.message if exc else None) for a, exc in zip(approvals, results, strict=True)]
    context = {"report": report, "not_found": not_found, "decision": form.cleaned_data["decision"]}
    return render(request, "approvals/bulk.html", context)


def _bulk_refused(request: AuthenticatedHttpRequest, form: BulkDecisionForm) -> HttpResponse:
    """The queue (its filters from ``request.GET``) with why ``form`` was refused, nothing
    decided, and what was sent kept: the reason and the ticks."""
    problems = " ".join(str(error) for errors in form.errors.values() for error in errors)
    messages.error(request, f"Nothing was decided: {problems}")
    context = {
        **_queue_context(request),
        "bulk_reason": form.data.get("reason", ""),
        "ticked": set(form.ticked()),
    }
    return render(request, "approvals/queue.html", context)
