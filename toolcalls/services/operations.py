"""Start and cancel operations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from providers.families import get_adapter
from toolcalls import registry
from toolcalls.errors import CallgateError
from toolcalls.guards import BudgetError, budgets_for
from toolcalls.models import Operation, ReplayScript, Tenant
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.services.transitions import operation_transition
from toolcalls.services.transports import live_settings
from toolcalls.states import OPERATION_TERMINAL, OperationState


class OperationError(CallgateError):
    """Bad input to an operation service. ``code`` is machine-readable."""


def operation_start(
    *,
    tenant: Tenant,
    requested_by: User,
    subject_ref: str,
    family: str,
    model: str,
    input_text: str,
    tool_names: Sequence[str] | None = None,
    replay_script: ReplayScript | None = None,
    transport: str = Operation.Transport.REPLAY,
    stream: bool | None = None,
    budgets: Mapping[str, Any] | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Operation:
    """Create a PENDING operation and queue its first turn after commit.

    ``tool_names`` (default: every registered tool) must all be registered. ``transport`` is
    ``replay`` (needs ``replay_script``; an unsaved one is saved with the operation, so a refused
    start keeps nothing) or ``live`` (the family's provider needs an API key in
    ``CALLGATE_PROVIDERS``); ``stream`` defaults to ``CALLGATE_LIVE_STREAMING``. ``budgets``
    overrides guard defaults within ``CALLGATE_GUARD_LIMITS`` (:mod:`toolcalls.guards`).
    Raises :class:`OperationError`
    (``unknown_family``, ``unknown_tool``, ``no_script``, ``no_credentials``,
    ``unknown_transport``, ``bad_budget``).
    """
    try:
        adapter = get_adapter(family)
    except LookupError as exc:
        raise OperationError("unknown_family", str(exc)) from None
    names = list(tool_names) if tool_names is not None else registry.names()
    unknown = [name for name in names if registry.get(name) is None]
    if unknown:
        raise OperationError("unknown_tool", f"not registered: {', '.join(unknown)}")
    try:
        effective = budgets_for(budgets)
    except BudgetError as exc:
        raise OperationError("bad_budget", str(exc)) from None
    if transport not in Operation.Transport.values:
        known = ", ".join(Operation.Transport.values)
        raise OperationError("unknown_transport", f"transport must be one of: {known}")
    if transport == Operation.Transport.REPLAY and replay_script is None:
        raise OperationError("no_script", "the replay transport needs a replay script")
    if transport == Operation.Transport.LIVE and live_settings(adapter.provider) is None:
        raise OperationError("no_credentials", f"no API key configured for {adapter.provider}")
    with transaction.atomic(durable=True):
        if replay_script is not None and replay_script._state.adding:
            replay_script.save()
        operation = Operation.objects.create(
            tenant=tenant,
            requested_by=requested_by,
            subject_ref=subject_ref,
            family=family,
            model=model,
            transport=transport,
            stream=settings.CALLGATE_LIVE_STREAMING if stream is None else stream,
            replay_script=replay_script,
            input_text=input_text,
            tool_names=names,
            budgets=effective,
            metadata=dict(metadata or {}),
            deadline_at=timezone.now() + timedelta(seconds=effective["deadline_s"]),
            conversation=adapter.start_conversation(user_input=input_text),
        )
        audit_record(
            operation=operation,
            kind="operation.created",
            actor=f"user:{requested_by.get_username()}",
            to_state=OperationState.PENDING,
            details={
                "family": family,
                "model": model,
                "tools": names,
                "transport": transport,
                "budgets": effective,
            },
        )
        enqueue_turn(operation_pk=operation.pk)
    return operation


def operation_cancel(*, operation_pk: int, actor: str, reason: str) -> Operation:
    """Cancel an operation that has not ended (CANCELLED). Calls already running finish and are
    recorded, but nothing new starts; pending approvals are superseded. Raises
    :class:`OperationError` (``already_ended``)."""
    with transaction.atomic(durable=True):
        operation = Operation.objects.select_for_update().get(pk=operation_pk)
        if operation.state in OPERATION_TERMINAL:
            raise OperationError(
                "already_ended", f"the operation already ended ({operation.state})"
            )
        operation.lease_token, operation.lease_expires_at = "", None
        operation_transition(
            operation=operation,
            to_state=OperationState.CANCELLED,
            actor=actor,
            reason=f"CANCELLED: {reason}",
            update_fields=["lease_token", "lease_expires_at"],
        )
    return operation
