"""The console's pages say what they may load (``Content-Security-Policy``).

The console escapes every text it did not write; the policy is the second wall, should one ever
slip through: a page runs only the scripts and styles Callgate serves itself (no inline script,
no inline style, no ``javascript:`` URL, no plugin), sends its forms only to Callgate, and no
other site may frame it. The console's templates hold no inline script or style, so nothing of
its own is refused. The admin and the API's browsable document (``/api/docs/``), which are
Django's and the document viewer's pages with inline scripts of their own, are left as they
are, and so are Django's own debugging pages (``DEBUG``: an error's page with its inline
styles and scripts).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

#: Paths whose pages are the console's own (its templates).
_CONSOLE_PREFIXES = ("/console/", "/login/", "/logout/")


class ContentPolicyMiddleware:
    """Add :data:`POLICY` to every response of a console page (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        debugging = settings.DEBUG and response.status_code >= 400
        if request.path_info.startswith(_CONSOLE_PREFIXES) and not debugging:
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
