"""The support view of one operation: its state, turns, calls and audit timeline. Read-only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from toolcalls import selectors
from toolcalls.http import AuthenticatedHttpRequest
from toolcalls.models import Operation


@login_required
def operation_detail(request: AuthenticatedHttpRequest, public_id: str) -> HttpResponse:
    try:
        operation = selectors.operation_get(user=request.user, public_id=public_id)
    except Operation.DoesNotExist:
        raise Http404("No such operation in your tenants.") from None
    context = {
        "operation": operation,
        "timeline": selectors.operation_timeline(operation=operation),
    }
    return render(request, "toolcalls/operation_detail.html", context)
