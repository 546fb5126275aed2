"""Which webhook URLs may be called: the rule of :mod:`toolcalls.addresses`, private addresses
allowed only when ``CALLGATE_WEBHOOK_ALLOW_PRIVATE`` is set."""

from __future__ import annotations

from django.conf import settings

from toolcalls.addresses import url_check


def webhook_url_check(url: str) -> None:
    """Raise :class:`~toolcalls.addresses.UrlRefused` unless ``url`` may receive webhooks;
    ``OSError`` when its host does not resolve (worth retrying)."""
    url_check(url, allow_private=settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE)
