"""Start and cancel operations."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User
from django.db import transaction

from providers.families import get_adapter
from toolcalls import registry
from toolcalls.models import Operation, ReplayScript, Tenant
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_turn
from toolcalls.states import OperationState


class OperationError(ValueError):
    """Bad input to an operation service. ``code`` is machine-readable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


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
) -> Operation:
    """Create a PENDING operation and queue its first turn after commit.

    ``tool_names`` (default: every registered tool) must all be registered. Raises
    :class:`OperationError` (``unknown_family``, ``unknown_tool``, ``no_transport``).
    """
    try:
        adapter = get_adapter(family)
    except LookupError as exc:
        raise OperationError("unknown_family", str(exc)) from None
    names = list(tool_names) if tool_names is not None else registry.names()
    unknown = [name for name in names if registry.get(name) is None]
    if unknown:
        raise OperationError("unknown_tool", f"not registered: {', '.join(unknown)}")
    if replay_script is None:
        raise OperationError(
            "no_transport", "a replay script is required: replay is the only transport"
        )
    with transaction.atomic(durable=True):
        operation = Operation.objects.create(
            tenant=tenant,
            requested_by=requested_by,
            subject_ref=subject_ref,
            family=family,
            model=model,
            transport="replay",
            replay_script=replay_script,
            input_text=input_text,
            tool_names=names,
            conversation=adapter.start_conversation(user_input=input_text),
        )
        audit_record(
            operation=operation,
            kind="operation.created",
            actor=f"user:{requested_by.get_username()}",
            to_state=OperationState.PENDING,
            details={"family": family, "model": model, "tools": names},
        )
        enqueue_turn(operation_pk=operation.pk)
    return operation
