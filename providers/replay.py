"""``ReplayTransport``: scripted wire payloads served in order (the embedded default and tests).

It is stateless: the caller passes ``turn``, the turn index (the number of replies already
recorded for the operation), so any worker can serve the next reply and a retried request gets
the same one. Before
answering, it applies the provider's own request rules (each family's ``rules`` module, read by
nothing else), so a request the real provider would refuse gets the provider's 400 here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from providers.anthropic_messages import rules as anthropic_messages_rules
from providers.base import Outcome, ParsedReply, ProviderAdapter, ToolResultMessage, WireReply
from providers.errors import TransportError
from providers.gemini_generate import rules as gemini_generate_rules
from providers.gemini_interactions import rules as gemini_interactions_rules
from providers.openai_chat import rules as openai_chat_rules
from providers.openai_responses import rules as openai_responses_rules
from providers.transports import OnEvent

_REPLY: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "http_status"],
    "properties": {
        "kind": {"enum": ["response", "stream", "http_error"]},
        "http_status": {"type": "integer", "minimum": 100, "maximum": 599},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {},
        "events": {"type": "array", "items": {"type": "object", "required": ["event", "data"]}},
    },
    "oneOf": [{"required": ["body"]}, {"required": ["events"]}],
}
_BRANCHING_REPLY: dict[str, Any] = {
    "type": "object",
    "required": ["after_results"],
    "additionalProperties": False,
    "properties": {
        "after_results": {
            "type": "object",
            "required": ["ok", "error"],
            "additionalProperties": False,
            "properties": {"ok": _REPLY, "error": _REPLY},
        }
    },
}
#: JSON Schema (Draft 2020-12) of one scripted reply of :class:`ReplayTransport`: a fixture-format
#: case (``kind``, ``http_status``, ``headers``, ``body`` or ``events``) or a reply that branches
#: on the results it was sent (``after_results``).
REPLY_SCHEMA: dict[str, Any] = {
    "if": {"required": ["after_results"]},
    "then": _BRANCHING_REPLY,
    "else": _REPLY,
}


class RequestRules(Protocol):
    """A provider's own rules for continuing a conversation (a family's ``rules.request_error``).

    Returns the provider's HTTP 400 when ``request`` breaks them for continuing from
    ``previous`` (every call answered exactly once and nothing extra, results placed and shaped
    as required, continuation items sent back), ``None`` when it is acceptable. Only the replay
    transport applies them: a live provider checks its own.
    """

    def __call__(
        self, *, request: Mapping[str, Any], previous: ParsedReply
    ) -> WireReply | None: ...


#: Each family's request rules, by family name.
REQUEST_RULES: dict[str, RequestRules] = {
    "openai_responses": openai_responses_rules.request_error,
    "openai_chat": openai_chat_rules.request_error,
    "anthropic_messages": anthropic_messages_rules.request_error,
    "gemini_generate": gemini_generate_rules.request_error,
    "gemini_interactions": gemini_interactions_rules.request_error,
}


class ReplayTransport:
    """Replays a scenario's ``replies`` (fixture-format mappings) one per request.

    A reply may instead be ``{"after_results": {"ok": case, "error": case}}``: the scripted model
    then answers with ``error`` when any result it was just sent is an error envelope (a denied
    approval, a failed tool) and with ``ok`` otherwise.

    Before serving reply *n* it checks the request against the last non-failure reply before
    *n* (any variant of it) with the family's :data:`REQUEST_RULES` and answers a request that
    breaks the provider's rules with that provider's own HTTP 400. A request past the last reply
    raises ``TransportError(code="scenario_exhausted")``.
    """

    name = "replay"
    sdk_version = ""

    def __init__(self, *, adapter: ProviderAdapter, replies: Sequence[Mapping[str, Any]]) -> None:
        self._adapter = adapter
        self._rules = REQUEST_RULES[adapter.family]
        self._replies = list(replies)

    def send(
        self,
        *,
        request: Mapping[str, Any],
        turn: int,
        model: str = "",
        on_event: OnEvent | None = None,
        results: Sequence[ToolResultMessage] = (),
    ) -> WireReply:
        if turn >= len(self._replies):
            raise TransportError(
                f"scenario exhausted: request #{turn + 1} but the scenario has only "
                f"{len(self._replies)} {'reply' if len(self._replies) == 1 else 'replies'}",
                code="scenario_exhausted",
                retryable=False,
            )
        problem = self.pairing_problem(request, turn)
        if problem:
            return problem
        variants = _variants(self._replies[turn])
        branch = "error" if any(result.is_error for result in results) else "ok"
        return WireReply.from_case(variants.get(branch) or next(iter(variants.values())))

    def pairing_problem(self, request: Mapping[str, Any], turn: int) -> WireReply | None:
        """The provider's 400 when ``request`` does not continue the conversation of replies
        before ``turn`` (their calls answered as the provider requires); ``None`` if it does."""
        for earlier in reversed(self._replies[:turn]):
            # The reply as a client may put it into the history: a call it refused shows a
            # valid name and arguments there (``for_history``); the provider sees only that.
            previous = [
                self._adapter.for_history(self._adapter.parse_reply(WireReply.from_case(case)), {})
                for case in _variants(earlier).values()
            ]
            if all(reply.outcome is Outcome.API_FAILURE for reply in previous):
                continue
            problems = [self._rules(request=request, previous=p) for p in previous]
            return None if None in problems else problems[0]
        return None


def _variants(reply: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The cases a scripted reply may answer with: itself, or its ``after_results`` branches."""
    branches = reply.get("after_results")
    return dict(branches) if isinstance(branches, Mapping) else {"ok": reply}
