"""The support views: one operation (its outcome, turns, calls and audit timeline, and the
escalation actions), the operations list, the search, the tenants' tools, and a person's
settings."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from approvals.models import ApprovalRequest
from approvals.selectors import operation_approvals, operation_currency
from toolcalls import selectors
from toolcalls.actors import Actor
from toolcalls.console.diagram import operation_diagram
from toolcalls.console.forms import (
    ExtendForm,
    ForkForm,
    OperationFilterForm,
    ResolveForm,
    SettingsForm,
    StopForm,
)
from toolcalls.console.http import AuthenticatedHttpRequest, id_or_404, refusals_shown
from toolcalls.console.preferences import viewer_timezone, viewer_timezone_set
from toolcalls.console.search import operation_search
from toolcalls.models import Operation
from toolcalls.services.escalations import operation_extend, operation_stop
from toolcalls.services.forks import operation_fork
from toolcalls.services.reconcile import call_resolve
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState
from toolcalls.storage import storable

RESOLVE_PERMISSION = "toolcalls.resolve_operation"
#: Forking starts an operation.
FORK_PERMISSION = "toolcalls.add_operation"


def _operation(request: AuthenticatedHttpRequest, public_id: str) -> Operation:
    try:
        return selectors.operation_get(user=request.user, public_id=id_or_404(public_id))
    except Operation.DoesNotExist:
        raise Http404("No such operation in your tenants.") from None


@login_required
def operation_detail(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    operation = _operation(request, public_id)
    can_resolve = request.user.has_perm(RESOLVE_PERMISSION)
    escalated = operation.state == OperationState.ESCALATED
    timeline = list(selectors.operation_timeline(operation=operation))
    turns = selectors.operation_turns_with_cost(operation=operation)
    ended = operation.state in OPERATION_TERMINAL
    lost = [c for item in turns for c in item["calls"] if c.state == CallState.UNKNOWN_OUTCOME]
    path = [(e.from_state, e.to_state) for e in timeline if e.kind == "operation.transition"]
    approvals = _approvals_of(operation)
    context = {
        "operation": operation,
        "outcome": selectors.operation_outcome(operation=operation, turns=turns),
        "approvals": approvals,
        "currency": operation_currency(
            operation=operation,
            approvals=approvals,
            calls=[call for item in turns for call in item["calls"]],
        ),
        "turns": turns,
        "timeline": timeline,
        "diagram": operation_diagram(transitions=path, current=operation.state),
        "guards": selectors.operation_guards(operation=operation),
        "can_resolve": can_resolve and escalated,
        "ended_lost": can_resolve and ended and bool(lost),
        "lost_calls": lost,
        "extend_form": ExtendForm(budgets=operation.budgets) if can_resolve and escalated else None,
        "stop_form": StopForm() if can_resolve and escalated else None,
        "resolve_form": ResolveForm() if can_resolve and (escalated or ended) else None,
        "can_fork": request.user.has_perm(FORK_PERMISSION),
    }
    return render(request, "toolcalls/operation_detail.html", context)


def _approvals_of(operation: Operation) -> list[ApprovalRequest]:
    """The operation's approvals (``operation_approvals``), each holding ``operation`` itself, so
    the state each shows (``shown_state``, ``superseded``) reads no operation again."""
    approvals = operation_approvals(operation=operation)
    for approval in approvals:
        approval.operation = operation
    return approvals


@login_required
def operations(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every operation of the user's tenants, newest first, filtered and keyset-paged."""
    form = OperationFilterForm(
        request.GET or None, tools=selectors.filter_choices(user=request.user).tools
    )
    page = selectors.operations_list(
        user=request.user, filters=form.filters(), cursor=request.GET.get("after")
    )
    context = {"form": form, "page": page, "filters": form.query()}
    return render(request, "toolcalls/operations.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def console_settings(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The viewer's own console settings (the time zone dates are shown in)."""
    form = SettingsForm(
        request.POST if request.method == "POST" else None,
        initial={"timezone": viewer_timezone(request=request)},
    )
    if request.method == "POST" and form.is_valid():
        viewer_timezone_set(request=request, user=request.user, name=form.cleaned_data["timezone"])
        messages.success(request, f"Dates are shown in {form.cleaned_data['timezone']}.")
        return redirect("console-settings")
    return render(request, "toolcalls/settings.html", {"form": form})


@login_required
def tools(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The tools each of the viewer's tenants may use, with the tenant's overrides (read-only;
    the admin and ``/api/v1/tools`` change them)."""
    catalogues = selectors.tool_catalogues(user=request.user)
    return render(request, "toolcalls/tools.html", {"catalogues": catalogues})


@login_required
def escalations(request: AuthenticatedHttpRequest) -> HttpResponse:
    operations = selectors.operations_escalated(user=request.user)
    return render(request, "toolcalls/escalations.html", {"operations": operations})


def _act(request: AuthenticatedHttpRequest, public_id: str) -> Operation:
    if not request.user.has_perm(RESOLVE_PERMISSION):
        raise PermissionDenied("You may not act on escalated operations.")
    return _operation(request, public_id)


def _done(request: AuthenticatedHttpRequest, operation: Operation, text: str) -> HttpResponse:
    messages.success(request, text)
    return redirect("operations:detail", public_id=operation.public_id)


def _refused(request: AuthenticatedHttpRequest, operation: Operation, text: str) -> HttpResponse:
    messages.error(request, text)
    return redirect("operations:detail", public_id=operation.public_id)


def _form_refused(
    request: AuthenticatedHttpRequest, operation: Operation, form: forms.Form
) -> HttpResponse:
    """Refuse an invalid ``form``, saying what is wrong with each field, by its label."""
    problems = []
    for name, errors in form.errors.items():
        text = " ".join(str(error) for error in errors)
        problems.append(f"{form[name].label}: {text}" if name in form.fields else text)
    return _refused(request, operation, " ".join(problems))


@login_required
@require_POST
@refusals_shown("operations:detail")
def operation_extend_view(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    operation = _act(request, public_id)
    form = ExtendForm(request.POST, budgets=operation.budgets)
    if not form.is_valid():
        return _form_refused(request, operation, form)
    operation_extend(
        operation_pk=operation.pk,
        actor=Actor.user(request.user),
        budgets=form.changes(),
        note=form.cleaned_data["note"],
    )
    return _done(request, operation, "Budget extended; the operation goes on.")


@login_required
@require_POST
@refusals_shown("operations:detail")
def operation_stop_view(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    operation = _act(request, public_id)
    form = StopForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, operation, form)
    operation_stop(
        operation_pk=operation.pk,
        actor=Actor.user(request.user),
        reason=form.cleaned_data["reason"],
    )
    return _done(request, operation, "Operation stopped.")


@login_required
@require_POST
@refusals_shown("operations:detail")
def call_resolve_view(
    request: AuthenticatedHttpRequest, public_id: str, call_public_id: str
) -> HttpResponse:
    operation = _act(request, public_id)
    call = get_object_or_404(operation.calls, public_id=id_or_404(call_public_id))
    form = ResolveForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, operation, form)
    call_resolve(
        call_pk=call.pk,
        actor=Actor.user(request.user),
        resolution=form.cleaned_data["resolution"],
        note=form.cleaned_data["note"],
    )
    return _done(request, operation, f"Recorded the outcome of {call.tool_name}.")


@login_required
@require_POST
@refusals_shown("operations:detail")
def operation_fork_view(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    if not request.user.has_perm(FORK_PERMISSION):
        raise PermissionDenied("You may not start operations.")
    operation = _operation(request, public_id)
    form = ForkForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, operation, form)
    turn = form.cleaned_data["from_turn"]
    fork = operation_fork(
        operation_pk=operation.pk,
        from_turn=turn,
        actor=Actor.user(request.user),
        author=request.user,
        model=form.cleaned_data["model"] or None,
    )
    return _done(request, fork, f"Forked from turn {turn} of {operation.public_id}.")


@login_required
def search(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Find an operation by any ID; one match goes straight to it. Text no ID can hold (a NUL,
    a lone surrogate) is answered with a message instead of a search."""
    query = request.GET.get("q", "").strip()[:200]
    if storable(query) != query:
        error = "Search text cannot contain NUL characters; nothing was searched."
        return render(request, "toolcalls/search.html", {"query": "", "error": error})
    results = operation_search(user=request.user, query=query, cursor=request.GET.get("after"))
    if len(results.page.rows) == 1 and results.count == 1 and not request.GET.get("after"):
        return redirect("operations:detail", public_id=results.page.rows[0].public_id)
    context = {"query": query, "results": results, "filters": {"q": query} if query else {}}
    return render(request, "toolcalls/search.html", context)
