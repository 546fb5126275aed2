"""How a request reaches a provider and a reply comes back.

``ReplayTransport`` serves scripted wire payloads in order (the embedded default and the tests).
It is stateless: the caller passes ``sequence``, the number of replies already recorded for the
operation, so any worker can serve the next reply and a retried request gets the same one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from providers.base import Outcome, ProviderAdapter, WireReply
from providers.errors import TransportError

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
        sequence: int,
        model: str,
        on_event: OnEvent | None = None,
    ) -> WireReply:
        """Send ``request`` (the adapter's JSON body) for ``model`` as the operation's
        ``sequence``-th request (0-based; replies already recorded)."""
        ...


class ReplayTransport:
    """Replays a scenario's ``replies`` (fixture-format mappings) one per request.

    Before serving reply *n* it checks that the request carries exactly one result for every
    call of the last non-failure reply before *n*, and answers a wrong pairing with that
    provider's own HTTP 400 (from ``adapter.request_error``). A request past the last reply
    raises ``TransportError(code="scenario_exhausted")``.
    """

    name = "replay"
    sdk_version = ""

    def __init__(self, *, adapter: ProviderAdapter, replies: Sequence[Mapping[str, Any]]) -> None:
        self._adapter = adapter
        self._replies = list(replies)

    def send(
        self,
        *,
        request: Mapping[str, Any],
        sequence: int,
        model: str = "",
        on_event: OnEvent | None = None,
    ) -> WireReply:
        if sequence >= len(self._replies):
            raise TransportError(
                f"scenario exhausted: request #{sequence + 1} but the scenario has only "
                f"{len(self._replies)} {'reply' if len(self._replies) == 1 else 'replies'}",
                code="scenario_exhausted",
                retryable=False,
            )
        problem = self._pairing_problem(request, sequence)
        return problem or WireReply.from_case(self._replies[sequence])

    def _pairing_problem(self, request: Mapping[str, Any], sequence: int) -> WireReply | None:
        for earlier in reversed(self._replies[:sequence]):
            previous = self._adapter.parse_reply(WireReply.from_case(earlier))
            if previous.outcome is Outcome.API_FAILURE:
                continue
            return self._adapter.request_error(request=request, previous=previous)
        return None
