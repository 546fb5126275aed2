"""What every API family's adapter shares: reading a reply by its kind, the HTTP-error and
malformed-reply skeletons, failures reported inside an HTTP 200, and token usage.

A family subclasses :class:`FamilyAdapter` and supplies the hooks: the conversation and request
body, how to classify a JSON body (``parse_body``), its stream assembler, the result shapes,
which fields of its error object name the failure (``error_reason_fields``, ``retry_codes``), and
where its usage object keeps the token counts (a :class:`UsageFields` in the family's reply
module).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from providers.base import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    NO_SETTINGS,
    Message,
    ModelSettings,
    Outcome,
    ParsedReply,
    ProposedCall,
    StreamAssembler,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    WireReply,
)
from providers.errors import retry_after_seconds, status_is_retryable
from providers.payload import count, items, obj, text
from providers.settings import Honoured, check
from providers.streaming import assemble


@dataclass(frozen=True)
class UsageFields:
    """Where a family's usage object keeps its token counts.

    ``input`` names the input count; the output count is the sum of the ``output`` fields
    (thinking tokens are output tokens). With ``only_when_counted`` a usage object holding none
    of these fields reads as no usage at all.
    """

    input: str
    output: tuple[str, ...]
    only_when_counted: bool = False

    def read(self, usage: Any) -> Usage | None:
        """The :class:`Usage` of ``usage`` (a JSON object, else ``None``); a missing or invalid
        count is 0 (:func:`providers.payload.count`)."""
        if not isinstance(usage, Mapping):
            return None
        if self.only_when_counted and not any(key in usage for key in (self.input, *self.output)):
            return None
        return Usage(
            input_tokens=count(usage.get(self.input)),
            output_tokens=sum(count(usage.get(key)) for key in self.output),
        )


def error_reason(error: Mapping[str, Any], fields: Sequence[str]) -> str | None:
    """The first of ``fields`` of an error object that holds a non-empty string (the last one's
    value when none does): OpenAI's ``code``-else-``type``, Anthropic's ``type``, Google's
    ``status``."""
    reason: str | None = None
    for name in fields:
        reason = reason or text(error.get(name))
    return reason


def named(field: str, value: str | None) -> str:
    """What a payload's ``field`` says, as a message names it: ``field 'value'``, or
    ``no field`` when the payload gives none (a message never says ``None``)."""
    return f"{field} {value!r}" if value is not None else f"no {field}"


def api_failure(
    *,
    raw_reason: str | None,
    retryable: bool,
    error_message: str | None,
    response_id: str | None = None,
    usage: Usage | None = None,
    retry_after_s: float | None = None,
) -> ParsedReply:
    """An API_FAILURE reply. It never carries text: whatever arrived before the failure is
    discarded."""
    return ParsedReply(
        outcome=Outcome.API_FAILURE,
        raw_reason=raw_reason,
        response_id=response_id,
        text=None,
        usage=usage,
        retryable=retryable,
        retry_after_s=retry_after_s,
        error_message=error_message,
    )


def malformed(
    revision: str, problem: str, *, response_id: str | None = None, usage: Usage | None = None
) -> ParsedReply:
    """A MALFORMED reply with no text or calls; ``error_message`` names the adapter revision and
    the ``problem``."""
    return ParsedReply(
        outcome=Outcome.MALFORMED,
        raw_reason=None,
        response_id=response_id,
        text=None,
        usage=usage,
        error_message=f"{revision}: {problem}",
    )


#: A tool name every family's name rule accepts, shown in the history in place of one the
#: provider's rule would refuse (the result names the tool the model asked for).
STAND_IN_NAME = "invalid_tool_name"


@dataclass(frozen=True)
class CallEdit:
    """How one call appears in the history when it cannot appear as it came: ``call_id`` a new
    ID (for an ID the provider sent), ``name`` a name the provider accepts, and
    ``empty_arguments`` an empty object in place of arguments that are not one JSON object."""

    call_id: str | None = None
    name: str | None = None
    empty_arguments: bool = False

    def apply(
        self, entry: Mapping[str, Any], *, id_field: str, arguments_field: str, empty: Any
    ) -> dict[str, Any]:
        """``entry`` (a call's object in the provider's items) with this edit made: the ID in
        ``id_field``, the name in ``name``, ``empty`` (``{}`` or ``"{}"``) in
        ``arguments_field``; every other field as it came."""
        edited = dict(entry)
        if self.call_id is not None:
            edited[id_field] = self.call_id
        if self.name is not None:
            edited["name"] = self.name
        if self.empty_arguments:
            edited[arguments_field] = empty
        return edited


@dataclass(frozen=True)
class FlatCalls:
    """Where a family's calls sit when they are items of the assistant's own list (Responses
    ``output``, Anthropic ``content``, Interactions steps): items whose ``type`` is ``item_type``,
    with the call's ID in ``id_field`` and its arguments in ``arguments_field`` (``empty`` is an
    empty object in the family's own form, ``{}`` or ``"{}"``)."""

    item_type: str
    id_field: str
    arguments_field: str
    empty: Any


#: The tool-name rule OpenAI and Anthropic document alike: "Must be a-z, A-Z, 0-9, or contain
#: underscores and dashes, with a maximum length of 64" (``FunctionDefinition.name``, OpenAI API
#: reference; "Define tools", Anthropic tool-use documentation, ``^[a-zA-Z0-9_-]{1,64}$``).
PLAIN_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Gemini's ``FunctionDeclaration.name``: "Must be a-z, A-Z, 0-9, or contain underscores, colons,
#: dots, and dashes, with a maximum length of 64" (Gemini API reference); Vertex AI adds "Must
#: start with a letter or an underscore", which a gateway may apply.
GEMINI_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")


class FamilyAdapter(abc.ABC):
    """The skeleton of a :class:`providers.base.ProviderAdapter`.

    ``parse_reply`` is total: an HTTP error is classified from the family's error object, a
    stream through a fresh assembler, a JSON object body by ``parse_body``; anything else is
    MALFORMED.
    """

    provider: str
    family: str
    revision: str
    #: Fields of the HTTP error body's ``error`` object naming the failure, in order of
    #: preference (see :func:`error_reason`).
    error_reason_fields: tuple[str, ...]
    #: The provider's rule for tool names (a call's name in the history must match it).
    name_pattern: re.Pattern[str] = PLAIN_TOOL_NAME
    #: Where the calls sit, for families whose calls are items of the assistant's list.
    flat_calls: FlatCalls
    #: What the family does with the neutral model settings.
    honoured: Honoured
    #: The request body's field holding the conversation (:meth:`build_request` may put items
    #: of its own before it, never after).
    conversation_field: str = "messages"

    def start_conversation(self, *, user_input: str, messages: Sequence[Message] = ()) -> list[Any]:
        """The opening conversation (provider-native items): the earlier ``messages``, then
        the user's request, each one ``{"role", "content"}`` message unless the family says
        it another way (:meth:`message`)."""
        return [*(self.message(m.role, m.text) for m in messages), self.message("user", user_input)]

    def message(self, role: str, text: str) -> Any:
        """One text message of ``role`` (``user`` or ``assistant``) as the family writes it."""
        return {"role": role, "content": text}

    def check_settings(self, settings: ModelSettings, *, tool_names: Sequence[str]) -> None:
        """Refuse (:class:`providers.base.UnsupportedSetting`) what :attr:`honoured` says this
        family cannot honour, and any value outside the documented ranges
        (:func:`providers.settings.check`); a family with rules on combinations adds them."""
        check(settings, family=self.family, honoured=self.honoured, tool_names=tool_names)

    @abc.abstractmethod
    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        """The JSON request body for the next model request, with ``instructions`` (empty:
        none) and ``settings`` in the family's own fields."""

    @abc.abstractmethod
    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        """Classify the JSON object body of a non-streamed HTTP 200 reply."""

    @abc.abstractmethod
    def stream_assembler(self, *, max_argument_bytes: int) -> StreamAssembler:
        """A fresh assembler for one streamed reply of this family."""

    @abc.abstractmethod
    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        """``conversation`` plus one result per call, shaped as the provider wants."""

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        """``conversation`` extended with the assistant items of ``reply``, as they came."""
        return [*conversation, *reply.assistant_items]

    def for_history(self, reply: ParsedReply, renames: Mapping[str, str]) -> ParsedReply:
        """``reply`` as it goes into the history: each call whose ID is a key of ``renames``
        carries the new ID (in its call and, for an ID the provider sent, in the assistant
        items, so the result answers the ID its call shows); a call whose arguments are not
        one JSON object shows ``{}`` there, and a name the provider's rule refuses
        (``name_pattern``) shows :data:`STAND_IN_NAME`. The provider (or a gateway translating
        the history to another provider) would otherwise refuse every later request; the
        call's result says what was wrong with it."""
        calls = tuple(replace(c, call_id=renames.get(c.call_id, c.call_id)) for c in reply.calls)
        edits = [self._edit(call, renames) for call in reply.calls]
        if not any(edits):
            return replace(reply, calls=calls)
        assistant_items = tuple(self.edit_calls(list(reply.assistant_items), edits))
        return replace(reply, calls=calls, assistant_items=assistant_items)

    def _edit(self, call: ProposedCall, renames: Mapping[str, str]) -> CallEdit | None:
        call_id = None if call.synthesized else renames.get(call.call_id)
        name = self.history_name(call.name)
        edit = CallEdit(
            call_id=call_id,
            name=name if name != call.name else None,
            empty_arguments=call.arguments_error,
        )
        return edit if edit != CallEdit() else None

    def history_name(self, name: str) -> str:
        """``name`` if the provider's name rule accepts it, else :data:`STAND_IN_NAME` (results
        carry the same, so Gemini's pairing by name holds)."""
        return name if self.name_pattern.fullmatch(name) else STAND_IN_NAME

    def edit_calls(self, assistant_items: list[Any], edits: Sequence[CallEdit | None]) -> list[Any]:
        """Copies of ``assistant_items`` with ``edits[n]`` made to the n-th call (in the order
        of :attr:`ParsedReply.calls`); ``None`` leaves a call as it came. Families whose calls
        are items of the list say where (:attr:`flat_calls`); the others override this."""
        shape, queue = self.flat_calls, iter(edits)
        return [
            _edited(item, next(queue, None), shape)
            if obj(item).get("type") == shape.item_type
            else item
            for item in assistant_items
        ]

    def parse_reply(
        self, reply: WireReply, *, max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    ) -> ParsedReply:
        if reply.kind == "http_error":
            return self.parse_http_error(reply)
        if reply.kind == "stream":
            # ``items``: a hostile ``events`` value that is not a list reads as no events.
            return assemble(
                self.stream_assembler(max_argument_bytes=max_argument_bytes), items(reply.events)
            )
        if isinstance(reply.body, Mapping):
            return self.parse_body(reply.body, max_argument_bytes=max_argument_bytes)
        return malformed(self.revision, f"a {reply.kind!r} reply without a JSON object body")

    def parse_http_error(self, reply: WireReply) -> ParsedReply:
        """A non-2xx reply: retryable by status, unless a retry code names a spent quota; the
        delay the provider asked for only when it is retryable."""
        error = obj(obj(reply.body).get("error"))
        reason = error_reason(error, self.error_reason_fields)
        retryable = all(
            status_is_retryable(reply.http_status, code) for code in self.retry_codes(error, reason)
        )
        return api_failure(
            raw_reason=reason,
            retryable=retryable,
            retry_after_s=retry_after_seconds(reply.headers, reply.body) if retryable else None,
            error_message=text(error.get("message")) or f"HTTP {reply.http_status}",
        )

    def retry_codes(self, error: Mapping[str, Any], reason: str | None) -> tuple[str | None, ...]:
        """The codes of an HTTP error checked against the quota codes: the reason itself."""
        return (reason,)


def _edited(item: Mapping[str, Any], edit: CallEdit | None, shape: FlatCalls) -> Mapping[str, Any]:
    if edit is None:
        return item
    return edit.apply(
        item, id_field=shape.id_field, arguments_field=shape.arguments_field, empty=shape.empty
    )
