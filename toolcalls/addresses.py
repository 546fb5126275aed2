"""Which URLs Callgate may call (webhooks, remote tools): http(s) only, without credentials, a
valid port and host name, and public addresses unless the caller's setting allows private ones
(no request to the host's own network: a tenant must not reach inside through a URL it
registers). An IPv6 address that carries an IPv4 address is judged by both."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import SplitResult, urlsplit

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 forms carrying an IPv4 address in their last 32 bits that ``ipaddress`` does not decode.
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291 section 2.5.5.1, deprecated
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 section 2.1
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 section 2.1 (SIIT)
# Local-use NAT64 (RFC 8215): its prefix length, so where the IPv4 address sits, is the
# operator's choice; the IANA IPv6 special-purpose registry lists it as not globally reachable.
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")


class UrlRefused(Exception):
    """The URL may not be called: not http(s), credentials in it, a bad port or host name, or a
    non-public address. Permanent."""


def url_check(url: str, *, allow_private: bool) -> None:
    """Raise :class:`UrlRefused` unless ``url`` is http(s) with a valid port and host name (and
    no credentials) whose every address is public (``allow_private`` lifts the address rule
    only). Resolves the host unless ``allow_private``: ``OSError`` when that fails (worth
    retrying)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UrlRefused(f"only http and https URLs with a host are called, not {url!r}")
    if parts.username is not None or parts.password is not None:
        # They would be sent as Basic auth and shown wherever the URL is: the signature or the
        # configured headers are the receiver's credential.
        raise UrlRefused("a URL Callgate calls may not carry a user name or password")
    port = _port(parts, url)
    _host_name_check(parts.hostname, url)
    if not allow_private:
        _public_only(parts.hostname, port)


def _port(parts: SplitResult, url: str) -> int:
    """The port ``url`` (split into ``parts``) is called on, its scheme's default when none is
    given. Raise :class:`UrlRefused` when it is not a number from 1 to 65535 (port 0 is
    reserved: RFC 6335 section 6)."""
    try:
        port = parts.port
    except ValueError as exc:  # not a number, or out of 0-65535
        raise UrlRefused(f"invalid URL {url!r}: {exc}") from exc
    if port == 0:
        raise UrlRefused(f"invalid URL {url!r}: port 0 is reserved")
    return port or (443 if parts.scheme == "https" else 80)


def _host_name_check(hostname: str, url: str) -> None:
    """Raise :class:`UrlRefused` when the IDNA codec the resolver uses (RFC 3490) cannot encode
    ``hostname``: a label empty or longer than 63 characters."""
    try:
        hostname.encode("idna")
    except UnicodeError as exc:
        raise UrlRefused(f"invalid URL {url!r}: {exc}") from exc


def _public_only(host: str, port: int) -> None:
    """Raise :class:`UrlRefused` unless every address ``host`` resolves to is public;
    ``OSError`` when it does not resolve."""
    public_address(host, port)


def public_address(host: str, port: int) -> str:
    """The first address ``host`` resolves to for TCP on ``port``, once every address it
    resolves to is public (:func:`address_public`). Raises :class:`UrlRefused` when one is not;
    ``OSError`` when ``host`` does not resolve."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    for info in infos:
        if not address_public(str(info[4][0])):
            raise UrlRefused(f"{host} resolves to {info[4][0]}, which is not a public address")
    return str(infos[0][4][0])


def address_public(address: str) -> bool:
    """Whether the IP address ``address`` (text, an IPv6 zone allowed) is public, as
    :func:`url_check` requires every address of a host to be."""
    return _is_public(ipaddress.ip_address(address.split("%", 1)[0]))


def _is_public(address: _IPAddress) -> bool:
    """Whether ``address`` is globally reachable and unicast (``ipaddress``, after the IANA
    special-purpose registries), and so is every IPv4 address it carries. An IPv4-mapped
    address (RFC 4291 section 2.5.5.2) is the IPv4 address itself and judged by it alone; a
    Teredo address (2001::/32, RFC 4380) is never globally reachable, whatever it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return True
    carried = _carried_ipv4(address)
    return address not in _NAT64_LOCAL_USE and (carried is None or _is_public(carried))


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address ``address`` carries, if any: 6to4 (RFC 3056), NAT64 well-known prefix
    (RFC 6052), IPv4-compatible (RFC 4291) or IPv4-translated (RFC 2765)."""
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in form for form in (_NAT64_WELL_KNOWN, _IPV4_COMPATIBLE, _IPV4_TRANSLATED)):
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None
