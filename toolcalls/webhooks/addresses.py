"""Which webhook URLs may be called: http(s) only, and public addresses unless
``CALLGATE_WEBHOOK_ALLOW_PRIVATE`` is set (no request to the host's own network)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class WebhookRefused(Exception):
    """The endpoint URL may not be called: not http(s), or a non-public address. Permanent."""


def webhook_url_check(url: str) -> None:
    """Raise :class:`WebhookRefused` unless ``url`` is http(s) with a host (and no credentials)
    whose every address is public (``CALLGATE_WEBHOOK_ALLOW_PRIVATE`` lifts the address rule).
    Resolves the host: ``OSError`` when that fails (worth retrying)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused(f"only http and https URLs with a host are called, not {url!r}")
    if parts.username is not None or parts.password is not None:
        # They would be sent as Basic auth and shown wherever the URL is: the signature is the
        # endpoint's credential.
        raise WebhookRefused("a webhook URL may not carry a user name or password")
    if settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except ValueError as exc:  # a bad port, or a host name IDNA cannot encode: never retried
        raise WebhookRefused(f"invalid URL {url!r}: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise WebhookRefused(
                f"{parts.hostname} resolves to {address}, which is not a public address"
            )
