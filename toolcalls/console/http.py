"""Request typing for views behind ``login_required``."""

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedHttpRequest(HttpRequest):
    """An ``HttpRequest`` whose ``user`` is signed in (views decorated with ``login_required``)."""

    user: User
