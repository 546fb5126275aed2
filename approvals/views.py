"""The operator console: approval queue, approval detail, decide (GET confirm + POST)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from approvals import selectors
from approvals.forms import DecisionForm, QueueFilterForm
from approvals.models import ApprovalRequest
from approvals.services import ApprovalError, approval_decide, decision_refusal
from approvals.states import ApprovalState
from toolcalls import registry
from toolcalls.console.http import AuthenticatedHttpRequest, id_or_404, refusals_shown
from toolcalls.models import Tenant

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


@login_required
def queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    tenants = list(Tenant.objects.filter(members=request.user).values_list("slug", flat=True))
    form = QueueFilterForm(request.GET or None, tools=registry.names(), tenants=tenants)
    data = form.cleaned_data if form.is_valid() else {}
    filters = selectors.QueueFilters(
        tool=data.get("tool", ""),
        risk=data.get("risk", ""),
        tenant=data.get("tenant", ""),
        expiring=bool(data.get("expiring")),
    )
    page = selectors.approvals_queue(
        user=request.user, filters=filters, cursor=request.GET.get("after")
    )
    context = {"form": form, "page": page, "filters": filters.query()}
    return render(request, "approvals/queue.html", context)


@login_required
def detail(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    approval = _approval(request, public_id)
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
        "preview": selectors.approval_preview(approval=approval)
        if approval.state == ApprovalState.PENDING
        else None,
        "blocker": _blocker(request, approval),
    }
    return render(request, "approvals/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@refusals_shown("approvals:detail")
def decide(request: AuthenticatedHttpRequest, public_id: str, decision: str) -> HttpResponse:
    if decision not in DECISIONS:
        raise Http404("Unknown decision.")
    approval = _approval(request, public_id)
    if _blocker(request, approval):  # the detail page says why
        return redirect("approvals:detail", public_id=public_id)
    form = DecisionForm(
        request.POST if request.method == "POST" else None,
        decision=decision,
        arguments=_pretty(approval.canonical_arguments),
    )
    if request.method == "POST" and form.is_valid():
        try:
            approval_decide(
                approval_pk=approval.pk,
                actor=request.user,
                approve=decision == "approve",
                reason=form.cleaned_data["reason"],
                arguments=form.cleaned_data.get("arguments"),
            )
        except ApprovalError as exc:
            if exc.code != "invalid_edit":
                raise  # shown on the approval page by refusals_shown
            form.add_error("arguments", exc.message)
            return render(
                request,
                "approvals/decide.html",
                {"approval": approval, "decision": decision, "form": form},
            )
        edited = " with edited arguments" if form.cleaned_data.get("arguments") else ""
        verb = "Approved" if decision == "approve" else "Denied"
        messages.success(request, f"{verb} {approval.tool_name}{edited} ({approval.public_id}).")
        return redirect("operations:detail", public_id=approval.operation.public_id)
    context = {
        "approval": approval,
        "decision": decision,
        "form": form,
        "arguments_pretty": _pretty(approval.canonical_arguments),
    }
    return render(request, "approvals/decide.html", context)
