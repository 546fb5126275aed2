"""Which URLs Callgate may call (webhooks, remote tools): http(s) only, without credentials, and
public addresses unless the caller's setting allows private ones (no request to the host's own
network: a tenant must not reach inside through a URL it registers)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


class UrlRefused(Exception):
    """The URL may not be called: not http(s), credentials in it, or a non-public address.
    Permanent."""


def url_check(url: str, *, allow_private: bool) -> None:
    """Raise :class:`UrlRefused` unless ``url`` is http(s) with a host (and no credentials)
    whose every address is public (``allow_private`` lifts the address rule). Resolves the
    host: ``OSError`` when that fails (worth retrying)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UrlRefused(f"only http and https URLs with a host are called, not {url!r}")
    if parts.username is not None or parts.password is not None:
        # They would be sent as Basic auth and shown wherever the URL is: the signature or the
        # configured headers are the receiver's credential.
        raise UrlRefused("a URL Callgate calls may not carry a user name or password")
    if allow_private:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except ValueError as exc:  # a bad port, or a host name IDNA cannot encode: never retried
        raise UrlRefused(f"invalid URL {url!r}: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise UrlRefused(
                f"{parts.hostname} resolves to {address}, which is not a public address"
            )
