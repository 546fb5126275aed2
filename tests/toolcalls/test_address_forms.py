"""The address rule of :mod:`toolcalls.addresses` for IPv6 addresses carrying an IPv4 address
(judged by both), for host names resolving to them, and the URL's shape (port, host name)
checked whether private addresses are allowed or not."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from toolcalls.addresses import UrlRefused, url_check

LOOPBACK, PRIVATE, LINK_LOCAL, PUBLIC = "127.0.0.1", "10.1.2.3", "169.254.169.254", "8.8.8.8"


def mapped(v4: str) -> str:  # RFC 4291 section 2.5.5.2
    return f"::ffff:{v4}"


def compatible(v4: str) -> str:  # RFC 4291 section 2.5.5.1
    return str(ipaddress.IPv6Address(int(ipaddress.IPv4Address(v4))))


def nat64(v4: str) -> str:  # RFC 6052, the well-known prefix 64:ff9b::/96
    return str(ipaddress.IPv6Address(f"64:ff9b::{v4}"))


def sixtofour(v4: str) -> str:  # RFC 3056: 2002:V4ADDR::/48
    return str(ipaddress.IPv6Address((0x2002 << 112) | (int(ipaddress.IPv4Address(v4)) << 80)))


def translated(v4: str) -> str:  # RFC 2765 section 2.1: ::ffff:0:0:0/96
    return str(ipaddress.IPv6Address(f"::ffff:0:{v4}"))


FORMS = [mapped, compatible, nat64, sixtofour, translated]
NOT_PUBLIC = [LOOPBACK, PRIVATE, LINK_LOCAL]
# Teredo (2001::/32, RFC 4380; server 65.54.227.120, client 192.0.2.45) and local-use NAT64
# (64:ff9b:1::/48, RFC 8215) are not globally reachable, whatever they carry.
NEVER_PUBLIC = [
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "64:ff9b:1::7f00:1",
    "64:ff9b:1::808:808",
    "64:ff9b:1:808:8:800::",
]


def url(address: str) -> str:
    return f"http://[{address}]:8443/hooks"


@pytest.mark.parametrize("v4", NOT_PUBLIC)
@pytest.mark.parametrize("form", FORMS, ids=lambda form: form.__name__)
def test_an_address_carrying_a_non_public_ipv4_address_is_refused(form: Any, v4: str) -> None:
    with pytest.raises(UrlRefused, match="not a public address"):
        url_check(url(form(v4)), allow_private=False)
    url_check(url(form(v4)), allow_private=True)


@pytest.mark.parametrize("form", FORMS, ids=lambda form: form.__name__)
def test_an_address_carrying_a_public_ipv4_address_passes(form: Any) -> None:
    url_check(url(form(PUBLIC)), allow_private=False)


@pytest.mark.parametrize("address", NEVER_PUBLIC)
def test_teredo_and_local_use_nat64_addresses_are_refused(address: str) -> None:
    with pytest.raises(UrlRefused, match="not a public address"):
        url_check(url(address), allow_private=False)
    url_check(url(address), allow_private=True)


@pytest.mark.parametrize("hidden", [nat64(LOOPBACK), sixtofour(PRIVATE), compatible(LINK_LOCAL)])
def test_a_host_name_is_judged_by_every_address_it_resolves_to(
    monkeypatch: pytest.MonkeyPatch, hidden: str
) -> None:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        assert (host, port) == ("hooks.example.com", 443)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (nat64(PUBLIC), port, 0, 0)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (hidden, port, 0, 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(UrlRefused, match=f"resolves to {hidden}, which is not a public"):
        url_check("https://hooks.example.com/hooks", allow_private=False)


BAD_SHAPES = [
    ("http://127.0.0.1:99999/ok", "Port out of range"),
    ("https://93.184.215.14:65536/hooks", "Port out of range"),
    ("http://127.0.0.1:http/ok", "Port could not be cast"),
    ("http://93.184.215.14:0/hooks", "port 0 is reserved"),
    ("http://hooks..example.com/hooks", "label empty or too long"),
    (f"http://{'a' * 64}.example.com/hooks", "label empty or too long"),
]


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize(("bad", "why"), BAD_SHAPES)
def test_a_bad_port_or_host_name_is_refused_whether_private_addresses_are_allowed_or_not(
    bad: str, why: str, allow_private: bool
) -> None:
    with pytest.raises(UrlRefused, match=f"invalid URL .*{why}"):
        url_check(bad, allow_private=allow_private)


def test_the_highest_port_passes() -> None:
    url_check("http://127.0.0.1:65535/ok", allow_private=True)
    url_check("https://93.184.215.14:65535/hooks", allow_private=False)
