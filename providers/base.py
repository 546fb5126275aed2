"""Provider-neutral shapes that every adapter produces and consumes.

The engine sees only these dataclasses. Provider JSON stays inside the adapter modules; the
conversation the engine stores between turns is an opaque list of provider-native items that only
the adapter of the operation's family reads or extends.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class Outcome(enum.StrEnum):
    """What one model reply means for the loop.

    Every family classifies in the same order; the first that applies decides:

    1. an HTTP error, or a failure reported inside an HTTP 200 (a stream error event, a failed
       response object): API_FAILURE;
    2. a stream that ended before its family's completion marker: TRUNCATED;
    3. a refusal or safety block: REFUSAL;
    4. a limit cut the reply, or a call's argument text stops mid-document: TRUNCATED;
    5. a turn the provider paused and continues when it is sent back: PAUSED;
    6. a reason the family marks as unusable, or one it does not know: MALFORMED;
    7. calls in a reply that ended normally: TOOL_PROPOSALS;
    8. text with an explicit completion: FINAL_TEXT;
    9. anything else (a normal ending with neither text nor calls): MALFORMED.

    A call whose arguments are not one JSON object does not change the outcome; the call
    carries ``arguments_error`` and the dispatcher rejects it.
    """

    FINAL_TEXT = "FINAL_TEXT"
    TOOL_PROPOSALS = "TOOL_PROPOSALS"
    REFUSAL = "REFUSAL"
    TRUNCATED = "TRUNCATED"
    PAUSED = "PAUSED"
    API_FAILURE = "API_FAILURE"
    MALFORMED = "MALFORMED"


@dataclass(frozen=True)
class WireReply:
    """One provider reply exactly as it travelled.

    ``kind`` is ``response`` (HTTP 200 JSON ``body``), ``stream`` (``events``: a list of
    ``{"event": name | None, "data": parsed JSON}``) or ``http_error`` (non-2xx ``body``).
    ``headers`` keys are lower-case.
    """

    kind: str
    http_status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    events: Sequence[Mapping[str, Any]] | None = None

    @classmethod
    def from_case(cls, case: Mapping[str, Any]) -> WireReply:
        """Build from a fixture-format mapping (``kind``, ``http_status``, ``headers``, ...)."""
        return cls(
            kind=case["kind"],
            http_status=int(case["http_status"]),
            headers={k.lower(): str(v) for k, v in (case.get("headers") or {}).items()},
            body=case.get("body"),
            events=case.get("events"),
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable form stored on a turn (the same shape ``from_case`` reads)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "http_status": self.http_status,
            "headers": dict(self.headers),
        }
        if self.events is not None:
            data["events"] = list(self.events)
        else:
            data["body"] = self.body
        return data


@dataclass(frozen=True)
class ProposedCall:
    """One tool call the model proposed.

    ``call_id`` is the provider's call ID, or one the adapter derived from the reply when the
    provider sent none (``synthesized`` is then true). ``arguments`` is the decoded JSON object, or
    ``None`` with ``arguments_error`` set when the raw text is not exactly one JSON object.
    ``item_id`` is the provider's item/block ID when it differs from the call ID (Responses
    ``fc_…``).
    """

    call_id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None
    arguments_error: bool = False
    item_id: str | None = None
    synthesized: bool = False


@dataclass(frozen=True)
class Usage:
    """Token counts of one reply (tokens)."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ParsedReply:
    """The normalized reading of one :class:`WireReply`.

    ``calls`` is empty unless ``outcome`` is TOOL_PROPOSALS, so nothing from a truncated, refused
    or failed reply can reach a tool. ``assistant_items`` are the provider-native items to append
    to the conversation if it continues from this reply (reasoning items, thinking blocks,
    signatures included). ``retryable`` and ``retry_after_s`` (seconds) are set for API_FAILURE
    only. ``malformed_call`` is set for MALFORMED only: the model wrote a tool call that could
    not be formed (Gemini's ``MALFORMED_FUNCTION_CALL`` finish, a call without a name), a
    sampling fault the same request may not repeat.
    """

    outcome: Outcome
    raw_reason: str | None
    response_id: str | None
    text: str | None
    calls: tuple[ProposedCall, ...] = ()
    usage: Usage | None = None
    continuation: frozenset[str] = frozenset()
    assistant_items: tuple[Any, ...] = ()
    retryable: bool | None = None
    retry_after_s: float | None = None
    error_message: str | None = None
    malformed_call: bool = False


@dataclass(frozen=True)
class ToolDeclaration:
    """A tool offered to the model: registry name, description and JSON Schema of arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def declared(self, schema_field: str = "parameters") -> dict[str, Any]:
        """``{"name", "description", schema_field: parameters}``, the core every family's tool
        declaration wraps or extends (the schema under the family's own field name)."""
        return {
            "name": self.name,
            "description": self.description,
            schema_field: dict(self.parameters),
        }


@dataclass(frozen=True)
class ToolResultMessage:
    """The model-facing result of one call: ``model_result`` only, never protected audit data.

    ``is_error`` marks an error envelope (Anthropic sends it as ``is_error``). ``synthesized``
    says the call ID was made up by the adapter, so it must not be sent as if the provider had
    issued it (Gemini results then match by name and order). ``cut_from_bytes``: the size of
    the call's result before it was cut to fit the request's size budget (``None``: sent whole).
    """

    call_id: str
    name: str
    model_result: Mapping[str, Any]
    is_error: bool
    synthesized: bool = False
    cut_from_bytes: int | None = None


@dataclass(frozen=True)
class Message:
    """One earlier message of the conversation in provider-neutral form: ``role`` is ``user``
    or ``assistant``, ``text`` what was said."""

    role: str
    text: str


@dataclass(frozen=True)
class ModelSettings:
    """How the model should answer, in provider-neutral terms; ``None`` leaves a setting to the
    provider's default.

    ``max_output_tokens`` (tokens), ``temperature`` (0 to 2), ``top_p`` (0 to 1),
    ``reasoning_effort`` (``none``, ``minimal``, ``low``, ``medium``, ``high``, ``xhigh``,
    ``max``: each family takes the values its API defines), ``thinking_budget_tokens`` (tokens,
    for families that budget thinking instead), ``tool_choice`` (``auto``, ``required``,
    ``none``, or one offered tool's name) and ``parallel_tool_calls``. Each adapter maps them to
    its family's own fields, and refuses (:class:`UnsupportedSetting`) one its family cannot
    honour (docs/settings.md has the table).
    """

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    thinking_budget_tokens: int | None = None
    tool_choice: str | None = None
    parallel_tool_calls: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The settings that are set, by name (the stored and displayed form)."""
        return {name: value for name, value in vars(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelSettings:
        """Read the stored form back; raises :class:`UnsupportedSetting` for an unknown name or
        a value of the wrong JSON type (a number where a number goes, and so on)."""
        kinds: dict[str, type | tuple[type, ...]] = {
            "max_output_tokens": int,
            "temperature": (int, float),
            "top_p": (int, float),
            "reasoning_effort": str,
            "thinking_budget_tokens": int,
            "tool_choice": str,
            "parallel_tool_calls": bool,
        }
        for name, value in data.items():
            kind = kinds.get(name)
            if kind is None:
                raise UnsupportedSetting(name, f"unknown setting {name!r}")
            wrong_bool = isinstance(value, bool) and kind is not bool
            if value is not None and (wrong_bool or not isinstance(value, kind)):
                raise UnsupportedSetting(name, f"{name} has a value of the wrong type")
        return cls(**data)


#: No settings: every one left to the provider's default.
NO_SETTINGS = ModelSettings()


class UnsupportedSetting(ValueError):
    """A setting the family cannot honour (or a value it refuses). ``setting`` names it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting
        self.message = message


#: Default byte limit (UTF-8) on the argument text of one streamed call: 1 MiB.
DEFAULT_MAX_ARGUMENT_BYTES = 1024 * 1024


class StreamAssembler(Protocol):
    """Assembles one streamed reply, event by event.

    Calls are handed over only from ``finish()``, and only when the family's completion marker
    arrived; a stream that ends without it is TRUNCATED, never "closed with a brace".
    """

    def feed(self, event: Mapping[str, Any]) -> str | None:
        """Consume one SSE event (``{"event": name | None, "data": parsed JSON}``). Returns a
        progress note (the name of a tool the model started to call) or ``None``. Never raises
        for malformed events."""
        ...

    def finish(self) -> ParsedReply:
        """Classify everything fed so far."""
        ...


class ProviderAdapter(Protocol):
    """What the engine needs from one API family (each family's ``adapter`` module, on the
    skeleton of :class:`providers.adapter.FamilyAdapter`).

    Adapters are stateless and pure: no I/O, no clock, no randomness, so re-parsing the same
    payload yields the same calls and IDs. The provider's own rules for the next request are not
    part of the adapter: they live in the family's ``rules`` module, which only the replay
    transport reads.
    """

    provider: str
    family: str
    revision: str
    #: The request body's field that holds the conversation (after anything the adapter puts
    #: before it, such as a developer message).
    conversation_field: str

    def start_conversation(self, *, user_input: str, messages: Sequence[Message] = ()) -> list[Any]:
        """Return the opening conversation (provider-native items): the earlier ``messages``,
        then the user's request."""
        ...

    def check_settings(self, settings: ModelSettings, *, tool_names: Sequence[str]) -> None:
        """Raise :class:`UnsupportedSetting` for a setting this family cannot honour (or a
        ``tool_choice`` naming none of ``tool_names``); checked before an operation starts."""
        ...

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        """Return the JSON request body for the next model request, with ``instructions``
        (the system prompt; empty: none) and ``settings`` in the family's own fields."""
        ...

    def parse_reply(
        self, reply: WireReply, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ParsedReply:
        """Classify ``reply`` and extract text, calls, usage and continuation items.

        Total: never raises, whatever the payload; unreadable payloads are MALFORMED.
        """
        ...

    def stream_assembler(self, *, max_argument_bytes: int) -> StreamAssembler:
        """A fresh assembler for one streamed reply of this family."""
        ...

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        """Return ``conversation`` extended with the assistant items of ``reply``."""
        ...

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        """Return ``conversation`` plus one result per call, shaped as the provider wants."""
        ...

    def for_history(self, reply: ParsedReply, renames: Mapping[str, str]) -> ParsedReply:
        """Return ``reply`` as it goes into the history: the calls whose IDs are keys of
        ``renames`` carry the new IDs (in its calls and its assistant items), and no call shows
        arguments or a name the provider would refuse (see ``history_name``)."""
        ...

    def history_name(self, name: str) -> str:
        """The tool name a call shows in the history (and its result carries): ``name`` when
        the provider's name rule accepts it, else a stand-in it accepts."""
        ...
