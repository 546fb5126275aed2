"""Resume after approval: revalidate the approved call against current context, then run it."""

from __future__ import annotations

from functools import partial

from approvals.models import ApprovalRequest
from toolcalls import registry
from toolcalls.envelopes import ErrorCode
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolError
from toolcalls.services.execution import call_execute
from toolcalls.services.results import tool_context
from toolcalls.services.validation import arguments_normalize, call_check
from toolcalls.states import ApprovalState, CallState


def approval_resume(*, call_pk: int) -> None:
    """Revalidate an approved call against current context, then execute it.

    The tool's business precondition runs first, outside any lock (it may ask another system);
    then, under the claim's locks, the approval must still be APPROVED, decided before expiry,
    with unchanged argument digest, schema version and policy revision, and the call must pass
    the validation chain again. Any failure rejects the call with ``APPROVAL_STALE`` (or the
    chain's own code) and nothing runs.
    """
    call = ToolCall.objects.select_related("operation__tenant").get(pk=call_pk)
    precondition_problem = None
    spec = registry.get(call.tool_name)
    if spec and spec.precondition and call.state == CallState.APPROVED:
        try:
            spec.precondition(tool_context(call.operation, call), call.arguments or {})
        except ToolError as exc:
            precondition_problem = (exc.code, exc.message)
    call_execute(call_pk=call_pk, precheck=partial(_still_approved, problem=precondition_problem))


def _still_approved(
    operation: Operation, call: ToolCall, *, problem: tuple[str, str] | None
) -> tuple[str, str] | None:
    approval = ApprovalRequest.objects.select_for_update().get(call=call)
    stale = ErrorCode.APPROVAL_STALE
    if approval.state != ApprovalState.APPROVED or approval.decided_at is None:
        return stale, "The approval for this call is no longer valid; it did not run."
    if approval.decided_at >= approval.expires_at:
        return ErrorCode.APPROVAL_EXPIRED, "The approval came after its expiry; it did not run."
    arguments = arguments_normalize(
        arguments=call.arguments, arguments_error=call.arguments is None, raw_arguments=None
    )
    verdict = call_check(operation=operation, tool_name=call.tool_name, arguments=arguments)
    if verdict.rejected:
        return verdict.error_code, verdict.error_message
    assert verdict.spec is not None
    if arguments.sha256 != approval.arguments_sha256:
        return stale, "The arguments changed after approval was requested; it did not run."
    if verdict.spec.schema_version != approval.schema_version:
        return stale, "The tool's schema changed after approval was requested; it did not run."
    if verdict.spec.approval.revision != approval.policy_revision:
        return stale, "The approval policy changed after approval was requested; it did not run."
    return problem
