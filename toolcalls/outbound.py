"""Outgoing requests held to the address rules where the connection is made, not only before.

:func:`toolcalls.addresses.url_check` resolves a URL's host before anything is sent; the HTTP
client then resolves it again to connect, and a name may answer differently the second time
(DNS rebinding: a public address for the check, ``127.0.0.1`` or ``169.254.169.254`` for the
connection). Where private addresses are refused, the address connected to is held to the rule
itself, before anything is sent on it:

- ``requests`` (HTTP tools, webhooks; :func:`public_session`): each new connection's peer
  address is checked right after the socket connects, before the TLS handshake and the request;
  a refused one is closed and raised as urllib3's ``NewConnectionError`` (nothing was sent).
- ``httpx`` (MCP over HTTP; :func:`request_pinned`): the host is resolved once, every address
  checked, and the request sent to that address, the host name kept for the ``Host`` header and
  TLS (``sni_hostname``, certificate checked against the name).

A request through a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``) is connected by the proxy, which
resolves the name itself: neither check applies to it, and the proxy must refuse private
destinations (docs/security.md).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import httpx2
import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

from toolcalls.addresses import address_public, public_address


class _PublicPeer:
    """A urllib3 connection that refuses a peer whose address is not public, once connected
    and before anything is sent on it."""

    host: str

    def _new_conn(self) -> Any:
        sock = super()._new_conn()  # type: ignore[misc]
        peer = str(sock.getpeername()[0])
        if not address_public(peer):
            sock.close()
            message = f"{self.host} connected to {peer}, which is not a public address"
            raise NewConnectionError(self, message)  # type: ignore[arg-type]
        return sock


class _PublicHTTPConnection(_PublicPeer, HTTPConnection):
    pass


class _PublicHTTPSConnection(_PublicPeer, HTTPSConnection):
    pass


class _PublicHTTPPool(HTTPConnectionPool):
    ConnectionCls = _PublicHTTPConnection


class _PublicHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PublicHTTPSConnection


class _PublicAdapter(HTTPAdapter):
    """Direct connections (not a proxy's) only to public peers."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {  # type: ignore[assignment]
            "http": _PublicHTTPPool,
            "https": _PublicHTTPSPool,
        }


def public_session(*, allow_private: bool) -> requests.Session:
    """A ``requests`` session (close it after use) whose direct connections go only to public
    peers, unless ``allow_private``. A refused peer fails the request as one that could not
    connect (``requests.ConnectionError`` caused by ``NewConnectionError``): nothing was sent."""
    session = requests.Session()
    if not allow_private:
        adapter = _PublicAdapter()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session


async def request_pinned(request: httpx2.Request) -> httpx2.Request:
    """``request`` sent to the one address its host resolves to now, every address the name
    has being public (:func:`toolcalls.addresses.public_address`), the name kept for ``Host``
    (set when the request was built) and for TLS. Raises
    :class:`~toolcalls.addresses.UrlRefused` (an address is not public) or ``OSError`` (the
    name does not resolve), before anything is sent."""
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await anyio.to_thread.run_sync(public_address, url.host, port)
    if url.scheme == "https":
        request.extensions = {**request.extensions, "sni_hostname": url.host}
    request.url = url.copy_with(host=address)
    return request
