"""How a request reaches a provider and a reply comes back.

``ReplayTransport`` serves scripted wire payloads in order (the embedded default and the tests).
It is stateless: the caller passes ``sequence``, the number of replies already recorded for the
operation, so any worker can serve the next reply and a retried request gets the same one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from providers.base import Outcome, ProviderAdapter, WireReply
from providers.errors import TransportError


class ModelTransport(Protocol):
    """Sends one request body and returns the provider's reply; raises :class:`TransportError`
    when no reply could be obtained."""

    name: str

    def send(self, *, request: Mapping[str, Any], sequence: int) -> WireReply:
        """Send ``request`` (the adapter's JSON body) as the operation's ``sequence``-th request."""
        ...


class ReplayTransport:
    """Replays a scenario's ``replies`` (fixture-format mappings) one per request.

    Before serving reply *n* it checks that the request carries exactly one result for every
    call of the last non-failure reply before *n*, and answers a wrong pairing with that
    provider's own HTTP 400 (from ``adapter.pairing_error``). A request past the last reply
    raises ``TransportError(code="scenario_exhausted")``.
    """

    name = "replay"

    def __init__(self, *, adapter: ProviderAdapter, replies: Sequence[Mapping[str, Any]]) -> None:
        self._adapter = adapter
        self._replies = list(replies)

    def send(self, *, request: Mapping[str, Any], sequence: int) -> WireReply:
        if sequence >= len(self._replies):
            raise TransportError(
                f"scenario exhausted: request #{sequence + 1} but the scenario has only "
                f"{len(self._replies)} replies",
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
            return self._adapter.pairing_error(request=request, previous=previous)
        return None
