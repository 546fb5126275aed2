"""Start, follow up and cancel operations."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict, Unpack

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from providers.base import (
    Message,
    ModelSettings,
    Outcome,
    ProviderAdapter,
    UnsupportedSetting,
    WireReply,
)
from providers.families import get_adapter
from toolcalls import catalogue, telemetry
from toolcalls.actors import Actor
from toolcalls.binding import InexactJson, digest, exact_check
from toolcalls.errors import CallgateError
from toolcalls.guards import BudgetError, budgets_for
from toolcalls.models import AgentRevision, Operation, ReplayScript, Tenant
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.scripts import replies_check
from toolcalls.services.transitions import operation_refuse_ended, operation_transition
from toolcalls.services.transports import live_settings
from toolcalls.services.unit import Step, lease_clear, operation_step
from toolcalls.services.writes import rows_insert
from toolcalls.states import AuditKind, OperationState


class OperationError(CallgateError):
    """Bad input to an operation service. ``code`` is machine-readable."""


@dataclass(frozen=True)
class Fork:
    """Where a forked operation starts (:func:`toolcalls.services.forks.operation_fork`): turn
    ``turn`` (its index) of ``operation``, with the ``conversation`` that turn's request
    carried (provider-native items); ``author``, the user who forked it, if one did
    (``Operation.started_by``: may not decide its approvals, as its requester may not)."""

    operation: Operation
    turn: int
    conversation: list[Any]
    author: User | None = None


class StartOptions(TypedDict, total=False):
    """The optional arguments of :func:`operation_start`.

    ``tool_names``: default every tool the tenant may use (:mod:`toolcalls.catalogue`); each
    must be one of them. ``transport``:
    ``replay`` (the default; needs ``replay_script``, and an unsaved one is checked and saved with
    the operation, so a refused start keeps nothing) or ``live`` (the family's provider needs an
    API key in ``CALLGATE_PROVIDERS``). ``stream``: default ``CALLGATE_LIVE_STREAMING``.
    ``budgets``: guard overrides within ``CALLGATE_GUARD_LIMITS`` (:mod:`toolcalls.guards`).
    ``instructions``: the system prompt. ``messages``: earlier conversation, ``{"role":
    "user" | "assistant", "text"}`` mappings in order, before ``input_text``. ``settings``:
    :class:`~providers.base.ModelSettings` by name, each one the family must honour.
    ``metadata``: strings kept with the operation. ``actor``: who the audit trail names
    (default: ``requested_by``, as a user). ``fork``: start from another operation's turn
    (:class:`Fork`): its conversation, and turn numbers going on from there. ``agent``: the
    agent revision to run with (:func:`with_agent` says how it combines with the other options).
    """

    tool_names: Sequence[str] | None
    replay_script: ReplayScript | None
    transport: str
    stream: bool | None
    budgets: Mapping[str, Any] | None
    instructions: str
    messages: Sequence[Mapping[str, str]] | None
    settings: Mapping[str, Any] | None
    metadata: Mapping[str, str] | None
    actor: Actor | None
    fork: Fork | None
    agent: AgentRevision | None


def operation_start(
    *,
    tenant: Tenant,
    requested_by: User,
    subject_ref: str,
    input_text: str,
    family: str = "",
    model: str = "",
    **options: Unpack[StartOptions],
) -> Operation:
    """Create a PENDING operation and queue its first turn after commit (options:
    :class:`StartOptions`; ``family`` and ``model`` only without an ``agent``). Raises
    :class:`OperationError` (``unknown_family``, ``invalid_model``, ``unknown_tool``,
    ``invalid_messages``,
    ``unsupported_setting`` naming ``details["setting"]``, ``bad_budget``, ``unknown_transport``,
    ``no_script``, ``no_credentials``, ``agent_conflict``; ``unknown_tool`` with
    ``details["fields"]["agent"]`` when the agent offers a tool the tenant may no longer use), and
    :class:`~toolcalls.services.scripts.ScriptError` (``invalid_replies``) for a script made with
    the operation whose replies the replay transport could not serve."""
    agent = options.get("agent")
    if agent is not None:
        family, model, options = with_agent(agent, family=family, model=model, options=options)
        if missing := tools_unavailable(tenant, agent.tool_names):
            message = agent_tools_refusal(agent, missing, instead="revise the agent's tools")
            raise OperationError("unknown_tool", message, details={"fields": {"agent": [message]}})
    operation = _operation(
        tenant=tenant,
        requested_by=requested_by,
        subject_ref=subject_ref,
        family=family,
        model=model,
        input_text=input_text,
        options=options,
    )
    _fork(operation, options.get("fork"))
    return _created(operation, options.get("actor") or Actor.user(requested_by))


def _operation(
    *,
    tenant: Tenant,
    requested_by: User,
    subject_ref: str,
    family: str,
    model: str,
    input_text: str,
    options: StartOptions,
) -> Operation:
    """The unsaved operation :func:`operation_start` asks for, every input checked."""
    adapter = family_adapter(family)
    if problem := model_problem(model):
        raise OperationError("invalid_model", problem, details={"fields": {"model": [problem]}})
    names = tool_names_check(tenant, options.get("tool_names"))
    effective = budgets_check(options.get("budgets"))
    transport, script = _transport(options, adapter)
    stream = options.get("stream")
    return Operation(
        tenant=tenant,
        requested_by=requested_by,
        subject_ref=subject_ref,
        family=family,
        model=model,
        transport=transport,
        stream=settings.CALLGATE_LIVE_STREAMING if stream is None else stream,
        replay_script=script,
        agent_revision=options.get("agent"),
        tool_names=names,
        budgets=effective,
        metadata=dict(options.get("metadata") or {}),
        deadline_at=timezone.now() + timedelta(seconds=effective["deadline_s"]),
        **_request(adapter, input_text, options, names),
    )


def with_agent(
    agent: AgentRevision, *, family: str, model: str, options: StartOptions
) -> tuple[str, str, StartOptions]:
    """The family, model and options of an operation started from ``agent``: its family,
    model, instructions and tools (the request may not give them), its settings with the
    request's on top (per setting: the request's wins), and its budgets, which the request may
    lower but not raise. Raises :class:`OperationError` (``agent_conflict``, with
    ``details["fields"]``: option name, or ``budgets.<name>``, → messages)."""
    given = {
        "family": bool(family),
        "model": bool(model),
        "instructions": "instructions" in options,
        "tool_names": options.get("tool_names") is not None,
    }
    message = f"set by the agent profile {agent.label}; start without an agent to choose it"
    conflicts = {name: [message] for name, present in given.items() if present}
    budgets = dict(agent.budgets)
    for name, value in (options.get("budgets") or {}).items():
        if _number(value) and _number(budgets.get(name)) and value > budgets[name]:
            limit = f"at most {budgets[name]}, the agent profile {agent.label}'s budget"
            conflicts[f"budgets.{name}"] = [limit]
        budgets[name] = value
    if conflicts:
        raise OperationError(
            "agent_conflict",
            f"The request conflicts with the agent profile {agent.label}.",
            details={"fields": conflicts},
        )
    merged = StartOptions(**options)
    merged["instructions"] = agent.instructions
    merged["tool_names"] = agent.tool_names
    merged["settings"] = {**agent.settings, **(options.get("settings") or {})}
    merged["budgets"] = budgets
    return agent.family, agent.model, merged


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: A model name as providers write them (ECMA 262 for the API's schema). It goes into some
#: providers' request paths (Gemini's ``models/{model}:generateContent``): nothing else may.
MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$"
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}")


def model_problem(model: object) -> str:
    """Why ``model`` is no model name (:data:`MODEL_NAME`, the whole text), or ``""``."""
    if isinstance(model, str) and _MODEL_NAME.fullmatch(model):
        return ""
    return "a model name is 1 to 100 of A-Z a-z 0-9 . _ : / -, starting with a letter or digit"


def family_adapter(family: str) -> ProviderAdapter:
    """The adapter of API ``family``; raises :class:`OperationError` (``unknown_family``)."""
    try:
        return get_adapter(family)
    except LookupError as exc:
        raise OperationError("unknown_family", str(exc)) from None


def tools_unavailable(tenant: Tenant, tool_names: Sequence[str]) -> list[str]:
    """Those of ``tool_names`` ``tenant`` may not use now (disabled in its catalogue, or a
    remote tool no longer enabled), in their order."""
    available = set(catalogue.tool_names(tenant))
    return [name for name in tool_names if name not in available]


def agent_tools_refusal(agent: AgentRevision, missing: Sequence[str], *, instead: str) -> str:
    """The refusal of agent revision ``agent`` offering ``missing`` (:func:`tools_unavailable`),
    saying what to do: ``"agent uk1@1 offers mine__echo, which is not enabled for the tenant:
    enable it or <instead>"``."""
    which, them = ("which is", "it") if len(missing) == 1 else ("which are", "them")
    offers = f"agent {agent.label} offers {', '.join(missing)}"
    return f"{offers}, {which} not enabled for the tenant: enable {them} or {instead}"


def tool_names_check(tenant: Tenant, tool_names: Sequence[str] | None) -> list[str]:
    """``tool_names`` (default: every tool ``tenant`` may use); raises :class:`OperationError`
    (``unknown_tool``) naming those it may not use."""
    if tool_names is None:
        return catalogue.tool_names(tenant)
    unknown = tools_unavailable(tenant, tool_names)
    if unknown:
        raise OperationError("unknown_tool", f"not available: {', '.join(unknown)}")
    return list(tool_names)


def _request(
    adapter: ProviderAdapter, input_text: str, options: StartOptions, tool_names: Sequence[str]
) -> dict[str, Any]:
    """The operation's fields that shape every model request: what the user asked, the
    instructions, earlier messages and settings, and the opening conversation."""
    messages = _messages(options.get("messages") or ())
    return {
        "input_text": input_text,
        "instructions": options.get("instructions", ""),
        "messages": [{"role": m.role, "text": m.text} for m in messages],
        "settings": settings_check(adapter, options.get("settings"), tool_names).as_dict(),
        "conversation": adapter.start_conversation(user_input=input_text, messages=messages),
    }


def _messages(messages: Sequence[Mapping[str, str]]) -> list[Message]:
    roles = ("user", "assistant")
    if not all(m.get("role") in roles and isinstance(m.get("text"), str) for m in messages):
        raise OperationError(
            "invalid_messages", 'each message needs a role ("user" or "assistant") and a text'
        )
    return [Message(role=m["role"], text=m["text"]) for m in messages]


def settings_check(
    adapter: ProviderAdapter, settings: Mapping[str, Any] | None, tool_names: Sequence[str]
) -> ModelSettings:
    """``settings`` as :class:`ModelSettings` the family honours; raises
    :class:`OperationError` (``unsupported_setting``, ``details["setting"]`` naming it), also
    for a number no audit event can hold exactly (beyond ±(2**53-1): an agent revision may have
    stored one before bodies were read as I-JSON)."""
    try:
        exact_check(settings or {})
    except InexactJson as exc:
        details = {"setting": str(exc.path[0])}
        raise OperationError("unsupported_setting", str(exc), details=details) from None
    try:
        model_settings = ModelSettings.from_dict(settings or {})
        adapter.check_settings(model_settings, tool_names=tool_names)
    except UnsupportedSetting as exc:
        raise OperationError(
            "unsupported_setting", exc.message, details={"setting": exc.setting}
        ) from None
    return model_settings


def budgets_check(budgets: Mapping[str, Any] | None) -> dict[str, float | int]:
    """The effective budgets with ``budgets`` applied (:func:`toolcalls.guards.budgets_for`);
    raises :class:`OperationError` (``bad_budget``, ``details["fields"]`` naming
    ``budgets.<name>``)."""
    try:
        return budgets_for(budgets)
    except BudgetError as exc:
        raise OperationError("bad_budget", exc.message, details=exc.details) from None


def _transport(options: StartOptions, adapter: ProviderAdapter) -> tuple[str, ReplayScript | None]:
    """The transport and replay script ``options`` ask for, checked for ``adapter``'s provider;
    a script not saved yet is made now, so its replies are checked for the family here (one
    saved before was checked where it was made)."""
    transport = options.get("transport", Operation.Transport.REPLAY)
    replay_script = options.get("replay_script")
    if transport not in Operation.Transport.values:
        known = ", ".join(Operation.Transport.values)
        raise OperationError("unknown_transport", f"transport must be one of: {known}")
    if transport == Operation.Transport.REPLAY and replay_script is None:
        raise OperationError("no_script", "the replay transport needs a replay script")
    if replay_script is not None and replay_script._state.adding:
        replies_check(replies=replay_script.replies, family=adapter.family)
    provider = adapter.provider
    if transport == Operation.Transport.LIVE and live_settings(provider) is None:
        raise OperationError("no_credentials", f"no API key configured for {provider}")
    return transport, replay_script


def _created(operation: Operation, actor: Actor) -> Operation:
    """Save the new operation (and its unsaved replay script), audit it (and, for a follow-up,
    its parent) and wake a worker for its first turn."""
    with transaction.atomic(durable=True):
        if operation.parent is not None:
            _followed_up(operation, actor)
        script = operation.replay_script
        if script is not None and script._state.adding:
            script.save()
            operation.replay_script = script
        operation.trace_context = telemetry.operation_traced(operation)
        rows_insert([operation])
        step = Step(operation)
        parent = {"parent": operation.parent.public_id} if operation.parent else {}
        step.audit(
            kind=AuditKind.OPERATION_CREATED,
            actor=actor,
            to_state=OperationState.PENDING,
            details={
                "family": operation.family,
                "model": operation.model,
                "instructions_sha256": digest(operation.instructions),
                "messages": len(operation.messages),
                "settings": operation.settings,
                **({"agent": operation.agent_revision.label} if operation.agent_revision else {}),
                "tools": operation.tool_names,
                "transport": operation.transport,
                "budgets": operation.budgets,
                **parent,
                **_fork_details(operation),
            },
        )
        enqueue_turn(step, operation_pk=operation.pk)
        step.flush()
    return operation


def _followed_up(operation: Operation, actor: Actor) -> None:
    """On the parent of ``operation`` (locked; its state and result stay as they are): an audit
    event naming its new follow-up."""
    assert operation.parent is not None
    parent = Operation.objects.select_for_update(of=("self",)).get(pk=operation.parent.pk)
    step = Step(parent)
    followed = {"follow_up": operation.public_id}
    step.audit(kind=AuditKind.OPERATION_FOLLOWED_UP, actor=actor, details=followed)
    step.flush()


#: The states a follow-up may start from: the model had its say.
FOLLOWABLE = (OperationState.COMPLETED, OperationState.REFUSED, OperationState.INCOMPLETE)


def operation_follow_up(
    *,
    operation_pk: int,
    requested_by: User,
    input_text: str,
    replay_script: ReplayScript | None = None,
    actor: Actor | None = None,
) -> Operation:
    """Start a follow-up of ended operation ``operation_pk`` (:data:`FOLLOWABLE`): a new
    PENDING operation with it as ``parent``, configured as it is (:func:`_follow_up_options`),
    its conversation going on with ``input_text`` (:func:`_follow_up_conversation`);
    ``replay_script``: its replies (replay transport). The parent stays as it ended; an audit
    event on each names the other. Effects already done are answered from their idempotency
    records. Raises ``Operation.DoesNotExist`` and :class:`OperationError`: ``not_followable``
    (``details.state``) and :func:`operation_start`'s codes (``unknown_tool``: a tool disabled
    since)."""
    parent = Operation.objects.select_related("tenant").get(pk=operation_pk)
    if parent.state not in FOLLOWABLE:  # terminal states never change: no lock needed to see it
        message = f"only an operation that ended with an answer can be followed up ({parent.state})"
        raise OperationError("not_followable", message, details={"state": parent.state})
    operation = _operation(
        tenant=parent.tenant,
        requested_by=requested_by,
        subject_ref=parent.subject_ref,
        family=parent.family,
        model=parent.model,
        input_text=input_text,
        options=_follow_up_options(parent, replay_script),
    )
    operation.parent = parent
    operation.agent_revision = parent.agent_revision  # its approval overrides go on too
    operation.conversation = _follow_up_conversation(parent, input_text)
    return _created(operation, actor or Actor.user(requested_by))


def _follow_up_options(parent: Operation, replay_script: ReplayScript | None) -> StartOptions:
    """The parent's transport, stream, tools, budgets, instructions, settings and metadata;
    as earlier messages, the parent's, its input and its final text."""
    answer = [{"role": "assistant", "text": parent.final_text}] if parent.final_text else []
    return {
        "tool_names": parent.tool_names,
        "replay_script": replay_script,
        "transport": parent.transport,
        "stream": parent.stream,
        "budgets": parent.budgets,
        "instructions": parent.instructions,
        "messages": [*parent.messages, {"role": "user", "text": parent.input_text}, *answer],
        "settings": parent.settings,
        "metadata": parent.metadata,
    }


def _follow_up_conversation(parent: Operation, input_text: str) -> list[Any]:
    """The parent's conversation, its last reply and the new user message, provider-native.

    A completed or refused reply goes back as the provider sent it (reasoning items, thought
    signatures and all, as the family needs them); a truncated one as its text alone, if any,
    since a cut-off call must never reach the model as a call."""
    adapter = get_adapter(parent.family)
    last = (
        parent.turns.filter(outcome__in=_ENDINGS)
        .order_by("-index")
        .only("outcome", "reply", "text")
    )
    turn = last.first()
    reply: list[Any] = []
    earlier: list[Message] = []
    if turn is not None and turn.reply is not None and turn.outcome != Outcome.TRUNCATED:
        parsed = adapter.parse_reply(WireReply.from_case(turn.reply))
        reply = adapter.append_reply(conversation=[], reply=parsed)
    elif turn is not None and turn.text:
        earlier = [Message(role="assistant", text=turn.text)]
    opening = adapter.start_conversation(user_input=input_text, messages=earlier)
    return [*parent.conversation, *reply, *opening]


_ENDINGS = (Outcome.FINAL_TEXT, Outcome.REFUSAL, Outcome.TRUNCATED)


def _fork(operation: Operation, fork: Fork | None) -> None:
    """Start ``operation`` where ``fork`` says: the original's turn, its conversation."""
    if fork is not None:
        operation.forked_from, operation.from_turn = fork.operation, fork.turn
        operation.conversation, operation.turn_count = fork.conversation, fork.turn
        operation.started_by = fork.author


def _fork_details(operation: Operation) -> dict[str, Any]:
    forked = operation.forked_from
    return {"forked_from": forked.public_id, "from_turn": operation.from_turn} if forked else {}


def operation_cancel(*, operation_pk: int, actor: Actor, reason: str) -> Operation:
    """Cancel an operation that has not ended (CANCELLED). Calls already running finish and are
    recorded, but nothing new starts; pending approvals are superseded. Raises
    :class:`~toolcalls.services.transitions.OperationEnded` (``already_ended``)."""
    with operation_step(operation_pk, related=()) as step:
        if step is None:
            raise Operation.DoesNotExist(f"no operation {operation_pk}")
        operation = step.operation
        operation_refuse_ended(operation)
        lease_clear(step, operation)
        reason = f"CANCELLED: {reason}"
        operation_transition(step, to_state=OperationState.CANCELLED, actor=actor, reason=reason)
    return operation
