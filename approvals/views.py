"""The operator console: approval queue, approval detail, decide (GET confirm + POST)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from approvals import selectors
from approvals.forms import DecisionForm
from approvals.models import ApprovalRequest
from approvals.services import DECIDE_PERMISSION, ApprovalError, approval_decide
from toolcalls import registry
from toolcalls.http import AuthenticatedHttpRequest
from toolcalls.states import ApprovalState

DECISIONS = ("approve", "deny")


def _approval(request: AuthenticatedHttpRequest, public_id: str) -> ApprovalRequest:
    try:
        return selectors.approval_get(user=request.user, public_id=public_id)
    except ApprovalRequest.DoesNotExist:
        raise Http404("No such approval in your tenants.") from None


def _blocker(request: AuthenticatedHttpRequest, approval: ApprovalRequest) -> str | None:
    """Why this user cannot decide this approval now, or ``None``."""
    if approval.state != ApprovalState.PENDING:
        return f"This approval is already {approval.state.lower()}; it can no longer be decided."
    if not request.user.has_perm(DECIDE_PERMISSION):
        return "You can read approvals but not decide them."
    if approval.requested_by_id == request.user.pk:
        return "You requested this call; another operator must decide it."
    return None


@login_required
def queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    pending = list(selectors.approvals_pending(user=request.user)[:100])
    return render(request, "approvals/queue.html", {"approvals": pending})


@login_required
def detail(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    approval = _approval(request, public_id)
    spec = registry.get(approval.tool_name)
    context = {
        "approval": approval,
        "spec": spec,
        "arguments_pretty": json.dumps(json.loads(approval.canonical_arguments), indent=2),
        "model_said": selectors.approval_model_said(approval=approval),
        "siblings": selectors.approval_siblings(approval=approval),
        "blocker": _blocker(request, approval),
    }
    return render(request, "approvals/detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def decide(request: AuthenticatedHttpRequest, public_id: str, decision: str) -> HttpResponse:
    if decision not in DECISIONS:
        raise Http404("Unknown decision.")
    approval = _approval(request, public_id)
    if _blocker(request, approval):  # the detail page says why
        return redirect("approvals:detail", public_id=public_id)
    form = DecisionForm(request.POST if request.method == "POST" else None, decision=decision)
    if request.method == "POST" and form.is_valid():
        try:
            approval_decide(
                approval_pk=approval.pk,
                actor=request.user,
                approve=decision == "approve",
                reason=form.cleaned_data["reason"],
            )
        except ApprovalError as exc:
            messages.error(request, exc.message)
            return redirect("approvals:detail", public_id=public_id)
        verb = "Approved" if decision == "approve" else "Denied"
        messages.success(request, f"{verb} {approval.tool_name} ({approval.public_id}).")
        return redirect("operations:detail", public_id=approval.operation.public_id)
    context = {"approval": approval, "decision": decision, "form": form}
    return render(request, "approvals/decide.html", context)
