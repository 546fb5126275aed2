"""Start and cancel operations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict, Unpack

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from providers.base import Message, ModelSettings, ProviderAdapter, UnsupportedSetting
from providers.families import get_adapter
from toolcalls import catalogue, telemetry
from toolcalls.actors import Actor
from toolcalls.binding import digest
from toolcalls.errors import CallgateError
from toolcalls.guards import BudgetError, budgets_for
from toolcalls.models import Operation, ReplayScript, Tenant
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.transitions import operation_transition
from toolcalls.services.transports import live_settings
from toolcalls.services.unit import Step, lease_clear, operation_step
from toolcalls.states import OPERATION_TERMINAL, AuditKind, OperationState


class OperationError(CallgateError):
    """Bad input to an operation service. ``code`` is machine-readable."""


@dataclass(frozen=True)
class Fork:
    """Where a forked operation starts (:func:`toolcalls.services.forks.operation_fork`): turn
    ``turn`` (its index) of ``operation``, with the ``conversation`` that turn's request
    carried (provider-native items)."""

    operation: Operation
    turn: int
    conversation: list[Any]


class StartOptions(TypedDict, total=False):
    """The optional arguments of :func:`operation_start`.

    ``tool_names``: default every tool the tenant may use (:mod:`toolcalls.catalogue`); each
    must be one of them. ``transport``:
    ``replay`` (the default; needs ``replay_script``, and an unsaved one is saved with the
    operation, so a refused start keeps nothing) or ``live`` (the family's provider needs an
    API key in ``CALLGATE_PROVIDERS``). ``stream``: default ``CALLGATE_LIVE_STREAMING``.
    ``budgets``: guard overrides within ``CALLGATE_GUARD_LIMITS`` (:mod:`toolcalls.guards`).
    ``instructions``: the system prompt. ``messages``: earlier conversation, ``{"role":
    "user" | "assistant", "text"}`` mappings in order, before ``input_text``. ``settings``:
    :class:`~providers.base.ModelSettings` by name, each one the family must honour.
    ``metadata``: strings kept with the operation. ``actor``: who the audit trail names
    (default: ``requested_by``, as a user). ``fork``: start from another operation's turn
    (:class:`Fork`): its conversation, and turn numbers going on from there.
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


def operation_start(
    *,
    tenant: Tenant,
    requested_by: User,
    subject_ref: str,
    family: str,
    model: str,
    input_text: str,
    **options: Unpack[StartOptions],
) -> Operation:
    """Create a PENDING operation and queue its first turn after commit (options:
    :class:`StartOptions`). Raises :class:`OperationError` (``unknown_family``,
    ``unknown_tool``, ``invalid_messages``, ``unsupported_setting``, ``bad_budget``,
    ``unknown_transport``, ``no_script``, ``no_credentials``).
    """
    adapter = _adapter(family)
    names = _tool_names(tenant, options.get("tool_names"))
    effective = _budgets(options.get("budgets"))
    script = options.get("replay_script")
    transport = options.get("transport", Operation.Transport.REPLAY)
    _check_transport(transport, script, adapter.provider)
    stream = options.get("stream")
    operation = Operation(
        tenant=tenant,
        requested_by=requested_by,
        subject_ref=subject_ref,
        family=family,
        model=model,
        transport=transport,
        stream=settings.CALLGATE_LIVE_STREAMING if stream is None else stream,
        replay_script=script,
        tool_names=names,
        budgets=effective,
        metadata=dict(options.get("metadata") or {}),
        deadline_at=timezone.now() + timedelta(seconds=effective["deadline_s"]),
        **_request(adapter, input_text, options, names),
    )
    _fork(operation, options.get("fork"))
    return _created(operation, options.get("actor") or Actor.user(requested_by))


def _adapter(family: str) -> ProviderAdapter:
    try:
        return get_adapter(family)
    except LookupError as exc:
        raise OperationError("unknown_family", str(exc)) from None


def _tool_names(tenant: Tenant, tool_names: Sequence[str] | None) -> list[str]:
    available = catalogue.tool_names(tenant)
    names = list(tool_names) if tool_names is not None else available
    unknown = [name for name in names if name not in available]
    if unknown:
        raise OperationError("unknown_tool", f"not available: {', '.join(unknown)}")
    return names


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
        "settings": _settings(adapter, options.get("settings"), tool_names).as_dict(),
        "conversation": adapter.start_conversation(user_input=input_text, messages=messages),
    }


def _messages(messages: Sequence[Mapping[str, str]]) -> list[Message]:
    roles = ("user", "assistant")
    if not all(m.get("role") in roles and isinstance(m.get("text"), str) for m in messages):
        raise OperationError(
            "invalid_messages", 'each message needs a role ("user" or "assistant") and a text'
        )
    return [Message(role=m["role"], text=m["text"]) for m in messages]


def _settings(
    adapter: ProviderAdapter, settings: Mapping[str, Any] | None, tool_names: Sequence[str]
) -> ModelSettings:
    try:
        model_settings = ModelSettings.from_dict(settings or {})
        adapter.check_settings(model_settings, tool_names=tool_names)
    except UnsupportedSetting as exc:
        raise OperationError(
            "unsupported_setting", exc.message, details={"setting": exc.setting}
        ) from None
    return model_settings


def _budgets(budgets: Mapping[str, Any] | None) -> dict[str, float | int]:
    try:
        return budgets_for(budgets)
    except BudgetError as exc:
        raise OperationError("bad_budget", str(exc)) from None


def _check_transport(transport: str, replay_script: ReplayScript | None, provider: str) -> None:
    if transport not in Operation.Transport.values:
        known = ", ".join(Operation.Transport.values)
        raise OperationError("unknown_transport", f"transport must be one of: {known}")
    if transport == Operation.Transport.REPLAY and replay_script is None:
        raise OperationError("no_script", "the replay transport needs a replay script")
    if transport == Operation.Transport.LIVE and live_settings(provider) is None:
        raise OperationError("no_credentials", f"no API key configured for {provider}")


def _created(operation: Operation, actor: Actor) -> Operation:
    """Save the new operation (and its unsaved replay script), audit it and wake a worker for
    its first turn."""
    with transaction.atomic(durable=True):
        script = operation.replay_script
        if script is not None and script._state.adding:
            script.save()
            operation.replay_script = script
        operation.trace_context = telemetry.operation_traced(operation)
        operation.save(force_insert=True)
        step = Step(operation)
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
                "tools": operation.tool_names,
                "transport": operation.transport,
                "budgets": operation.budgets,
                **_fork_details(operation),
            },
        )
        enqueue_turn(step, operation_pk=operation.pk)
        step.flush()
    return operation


def _fork(operation: Operation, fork: Fork | None) -> None:
    """Start ``operation`` where ``fork`` says: the original's turn, its conversation."""
    if fork is not None:
        operation.forked_from, operation.from_turn = fork.operation, fork.turn
        operation.conversation, operation.turn_count = fork.conversation, fork.turn


def _fork_details(operation: Operation) -> dict[str, Any]:
    forked = operation.forked_from
    return {"forked_from": forked.public_id, "from_turn": operation.from_turn} if forked else {}


def operation_cancel(*, operation_pk: int, actor: Actor, reason: str) -> Operation:
    """Cancel an operation that has not ended (CANCELLED). Calls already running finish and are
    recorded, but nothing new starts; pending approvals are superseded. Raises
    :class:`OperationError` (``already_ended``)."""
    with operation_step(operation_pk, related=()) as step:
        if step is None:
            raise Operation.DoesNotExist(f"no operation {operation_pk}")
        operation = step.operation
        if operation.state in OPERATION_TERMINAL:
            raise OperationError(
                "already_ended", f"the operation already ended ({operation.state})"
            )
        lease_clear(step, operation)
        reason = f"CANCELLED: {reason}"
        operation_transition(step, to_state=OperationState.CANCELLED, actor=actor, reason=reason)
    return operation
