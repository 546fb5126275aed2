"""Authorization, the step of the validation chain before the approval policy: whether a call
may run for the operation's requester and subject, now.

Checked at dispatch (before a call is parked or queued) and again at resume (before an approved
call runs), so a requester deactivated, removed from the tenant or stripped of a permission
while their call waited for a human no longer has it run. Pure reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolcalls.models import Operation, Tenant
from toolcalls.registry import RISK_PERMISSIONS, ToolContext, ToolSpec

_WHO = "The person or service this task runs for"


def call_authorize(
    *, operation: Operation, spec: ToolSpec, arguments: Mapping[str, Any]
) -> str | None:
    """Why ``spec`` may not run with ``arguments`` for ``operation``, as a message for the model
    (it names no tenant, user or permission), or ``None``.

    In order: the tenant is active; the requester (``requested_by``: a person, or the service
    user of the API key that started the operation, deactivated when the key is revoked) is
    active and a member of the tenant; holds the permission of the tool's risk class
    (:data:`~toolcalls.registry.RISK_PERMISSIONS`, directly or through a group); and the tool's
    ``authorize`` hook lets the operation's subject use what the arguments name.
    """
    if not operation.tenant.is_active:
        return "This account may not use tools right now."
    requester = operation.requested_by
    if not requester.is_active:
        return f"{_WHO} is no longer active; the call did not run."
    if not _requester_member(operation):
        return f"{_WHO} no longer belongs to this account; the call did not run."
    permission = RISK_PERMISSIONS.get(spec.risk)
    if permission and not requester.has_perm(permission):
        return f"{_WHO} may not use {spec.risk} tools; the call did not run."
    if spec.authorize is None:
        return None
    context = ToolContext(
        tenant_ref=operation.tenant.slug,
        subject_ref=operation.subject_ref,
        operation_id=operation.public_id,
        provider_call_id="",
    )
    return spec.authorize(context, arguments)


def _requester_member(operation: Operation) -> bool:
    """Whether the requester belongs to the operation's tenant: the ``requester_member`` its
    step read with it (``operation_step(requester=True)``), else asked now and kept on the
    instance for the step's other calls."""
    member: bool | None = getattr(operation, "requester_member", None)
    if member is None:
        rows = Tenant.members.through.objects
        member = rows.filter(
            tenant_id=operation.tenant_id, user_id=operation.requested_by_id
        ).exists()
        operation.requester_member = member  # type: ignore[attr-defined]
    return member
