"""Request typing for views behind ``login_required``, the console's one mapping of
:class:`~toolcalls.errors.CallgateError` to what a person sees, and its check of IDs taken from
URLs."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from toolcalls.errors import CallgateError
from toolcalls.storage import storable


class AuthenticatedHttpRequest(HttpRequest):
    """An ``HttpRequest`` whose ``user`` is signed in (views decorated with ``login_required``)."""

    user: User


View = Callable[..., HttpResponse]


def refusals_shown(page: str) -> Callable[[View], View]:
    """Decorate a console action taking ``public_id``: a :class:`CallgateError` it raises becomes
    an error message on ``page`` (a URL name taking the same ``public_id``), state unchanged."""

    def decorate(view: View) -> View:
        @wraps(view)
        def run(request: HttpRequest, *args: Any, public_id: str, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, public_id=public_id, **kwargs)
            except CallgateError as exc:
                messages.error(request, exc.message)
                return redirect(page, public_id=public_id)

        return run

    return decorate


def id_or_404(value: str) -> str:
    """``value`` (an ID from a URL) if the database could hold it; raises ``Http404`` for one
    holding a NUL or a lone surrogate, which names nothing and would fail the query (a 500)."""
    if storable(value) != value:
        raise Http404("No such ID.")
    return value
