"""``ReplayTransport``: scripted wire payloads served in order (the embedded default and tests).

It is stateless: the caller passes ``turn``, the turn index (the number of replies already
recorded for the operation), so any worker can serve the next reply and a retried request gets
the same one. Before
answering, it applies the provider's own request rules (each family's ``rules`` module, read by
nothing else), so a request the real provider would refuse gets the provider's 400 here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from providers.anthropic_messages import rules as anthropic_messages_rules
from providers.base import Outcome, ParsedReply, ProviderAdapter, WireReply
from providers.errors import TransportError
from providers.gemini_generate import rules as gemini_generate_rules
from providers.gemini_interactions import rules as gemini_interactions_rules
from providers.openai_chat import rules as openai_chat_rules
from providers.openai_responses import rules as openai_responses_rules
from providers.sent_results import SENT_RESULTS
from providers.transports import OnEvent

_REPLY: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "http_status"],
    "properties": {
        "kind": {"enum": ["response", "stream", "http_error"]},
        "http_status": {"type": "integer", "minimum": 100, "maximum": 599},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {},
        "events": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {"event": {"type": ["string", "null"]}},
            },
        },
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
#: on the results the request sends back (``after_results``).
REPLY_SCHEMA: dict[str, Any] = {
    "if": {"required": ["after_results"]},
    "then": _BRANCHING_REPLY,
    "else": _REPLY,
}


@dataclass(frozen=True)
class _Kind:
    """What a reply of one kind is: ``name`` in a message, the ``statuses`` it travels with (and
    ``status_text`` naming them), the field that ``carries`` what it says (``body`` or
    ``events``), and ``instead``, what a status of another kind belongs to."""

    name: str
    statuses: range
    status_text: str
    carries: str
    instead: str


#: A model's reply (a body or a stream) travels with a 2xx, an HTTP error with a 4xx or 5xx (what
#: the SDKs raise as an error, ``APIStatusError``).
_KINDS = {
    "response": _Kind(
        "a response reply", range(200, 300), "a 2xx", "body", "an error status is an http_error"
    ),
    "stream": _Kind(
        "a stream reply", range(200, 300), "a 2xx", "events", "an error status is an http_error"
    ),
    "http_error": _Kind(
        "an http_error reply",
        range(400, 600),
        "a 4xx or 5xx",
        "body",
        "a model's reply is a response or a stream",
    ),
}
#: The fields a reply carries what it says in, as a message names them.
_CARRIED = {"body": "a body", "events": "events"}


@dataclass(frozen=True)
class ScriptProblem:
    """One wrong part of a replay script: ``path``, the keys and indexes from the list of replies
    down to it (``(3, "http_status")``), and what is wrong there."""

    path: tuple[str | int, ...]
    message: str


def script_problems(
    replies: Sequence[Mapping[str, Any]], adapter: ProviderAdapter
) -> list[ScriptProblem]:
    """What is wrong with ``replies`` (each of :data:`REPLY_SCHEMA`'s shape) beyond their shape,
    in order. Each reply (each branch of a branching one) travels with a status of its kind and
    carries a body or events as its kind does, a response's body a JSON object; and a response
    or a stream is one of the replies of ``adapter``'s family: read by the adapter (pure:
    nothing is sent or run), it is not MALFORMED without a reason of the provider's, which
    every reply of the family names (its status, finish or stop reason). A reply the model may
    send (a refusal, a cut-off stream, a malformed call, an unknown finish reason) is a valid
    script; so is an HTTP error's body of any JSON (a gateway's text)."""
    problems = []
    for index, reply in enumerate(replies):
        branches = reply.get("after_results")
        cases = branches.items() if isinstance(branches, Mapping) else [(None, reply)]
        for branch, case in cases:
            problem = _case_problem(case, adapter)
            if problem is not None:
                where = (index, "after_results", branch) if branch else (index,)
                problems.append(ScriptProblem((*where, *problem.path), problem.message))
    return problems


def _case_problem(case: Mapping[str, Any], adapter: ProviderAdapter) -> ScriptProblem | None:
    kind, status = _KINDS[case["kind"]], case["http_status"]
    if status not in kind.statuses:
        message = f"{kind.name} has {kind.status_text} status, not {status}: {kind.instead}"
        return ScriptProblem(("http_status",), message)
    if kind.carries not in case:
        other = "events" if kind.carries == "body" else "body"
        says = f"{_CARRIED[kind.carries]}, not {_CARRIED[other]}"
        return ScriptProblem((other,), f"{kind.name} carries {says}")
    if case["kind"] == "response" and not isinstance(case["body"], Mapping):
        return ScriptProblem(("body",), f"{kind.name}'s body is a JSON object")
    if case["kind"] == "http_error":
        return None
    parsed = adapter.parse_reply(WireReply.from_case(case))
    if parsed.outcome is Outcome.MALFORMED and parsed.raw_reason is None:
        said = f": {parsed.error_message}" if parsed.error_message else ""
        return ScriptProblem((kind.carries,), f"not a reply of the {adapter.family} family{said}")
    return None


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
    then answers with ``error`` when any result the request sends back (after its last model
    turn, read as the family writes it: :data:`providers.sent_results.SENT_RESULTS`) is an error
    envelope (a denied approval, a failed tool) and with ``ok`` otherwise. It reads the request
    alone, as a provider does: a fork's first request, or a retried one, carries the results it
    continues from although none were added to it.

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
        sent = SENT_RESULTS[self._adapter.family](request)
        branch = "error" if any(result.is_error for result in sent) else "ok"
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
