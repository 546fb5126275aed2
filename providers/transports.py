"""How a request reaches a provider and a reply comes back: the transport interface.

Two kinds implement it: ``providers.replay.ReplayTransport`` (scripted wire payloads; the
embedded default and the tests) and the live transports of ``providers.live`` (the official SDKs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from providers.base import WireReply

#: Called with each streamed event as it arrives, for progress reporting only.
OnEvent = Callable[[Mapping[str, Any]], None]


class ModelTransport(Protocol):
    """Sends one request body and returns the provider's reply; raises :class:`TransportError`
    when no reply could be obtained. ``sdk_version`` names the SDK that carried it ("" if none)."""

    name: str
    sdk_version: str

    def send(
        self,
        *,
        request: Mapping[str, Any],
        turn: int,
        model: str,
        on_event: OnEvent | None = None,
    ) -> WireReply:
        """Send ``request`` (the adapter's JSON body) for ``model`` as the operation's
        turn ``turn`` (the 0-based turn index: replies already recorded). The request is all a
        model reads: the tool results it carries are in the body."""
        ...
