"""The engine's side of human decisions: park, check an edit, decide, expire; and the direction
of the dependency (the engine imports nothing of the approvals app)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from approvals.models import ApprovalRequest
from tests.engine import call_set, wakeups_in
from tests.factories import OrderFactory
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.models import ToolCall
from toolcalls.services.approvals import (
    ApprovalError,
    ArgumentsEdit,
    arguments_edit_check,
    call_decide,
    call_expire,
    call_park,
)
from toolcalls.services.unit import call_step
from toolcalls.services.validation import arguments_normalize
from toolcalls.states import CallState, OperationState

pytestmark = pytest.mark.django_db
OPERATOR = Actor.system("test")
Capture = Callable[..., Any]
REFUND = {"order_id": "ORD-1001", "draft_id": "RD-1", "amount_cents": 9999}
ENGINE = Path(__file__).resolve().parents[2] / "toolcalls"


def _call(state: str = CallState.WAITING_APPROVAL) -> ToolCall:
    digest = arguments_normalize(arguments=REFUND, arguments_error=False, raw_arguments=None)
    [call] = call_set(
        state,
        operation_state=OperationState.WAITING_APPROVAL,
        tool_name="submit_refund",
        arguments=REFUND,
        arguments_sha256=digest.sha256,
    )
    OrderFactory.create(tenant_ref=call.operation.tenant.slug)
    return call


def test_parking_a_call_opens_its_approval_through_the_registered_desk() -> None:
    call = _call(CallState.PROPOSED)
    spec = registry.get("submit_refund")
    assert spec is not None
    with call_step(call.pk) as step:
        call_park(step, step.call, spec=spec, canonical_arguments="{}", reason="large")
    approval = ApprovalRequest.objects.get(call=call)
    assert (approval.reason, approval.policy_revision) == ("large", spec.approval.revision)
    call.refresh_from_db()
    assert call.state == CallState.WAITING_APPROVAL
    assert [e.kind for e in call.operation.events.order_by("seq")] == [
        "call.transition",
        "approval.requested",
    ]


def _smaller(call: ToolCall) -> ArgumentsEdit:
    """An operator's edit of ``call``: the same refund, for less."""
    return arguments_edit_check(
        operation=call.operation,
        call=call,
        arguments={**REFUND, "amount_cents": 500},
        policy_revision="refund-threshold-v1",
    )


def test_an_edit_is_checked_like_a_proposal() -> None:
    call = _call()
    edit = _smaller(call)
    assert edit.value["amount_cents"] == 500 and edit.sha256 != call.arguments_sha256
    assert edit.approval_reason is None  # below the threshold now
    with pytest.raises(ApprovalError) as exc:
        arguments_edit_check(
            operation=call.operation, call=call, arguments=["x"], policy_revision="x"
        )
    assert exc.value.code == "invalid_edit"
    with pytest.raises(ApprovalError, match="policy changed"):
        arguments_edit_check(
            operation=call.operation, call=call, arguments=REFUND, policy_revision="old"
        )


def test_an_approval_with_an_edit_replaces_the_arguments_and_resumes_after_commit(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    call = _call()
    edit = _smaller(call)
    with django_capture_on_commit_callbacks() as wakeups, call_step(call.pk) as step:
        call_decide(step, step.call, approve=True, actor=OPERATOR, approval_ref="apr_x", edit=edit)
    call.refresh_from_db()
    assert call.state == CallState.APPROVED and call.arguments_edited
    assert (call.arguments, call.arguments_sha256) == (edit.value, edit.sha256)
    assert call.events.get().approval_ref == "apr_x"
    assert len(wakeups_in(wakeups)) == 1


def test_a_denial_tells_the_model_why_and_settles_the_set() -> None:
    call = _call()
    with call_step(call.pk) as step:
        call_decide(step, step.call, approve=False, actor=OPERATOR, approval_ref="", reason="no")
    call.refresh_from_db()
    call.operation.refresh_from_db()
    assert call.state == CallState.DENIED and call.model_result is not None
    assert call.model_result["error"]["message"].endswith("Reason: no")
    assert call.operation.state == OperationState.RESULTS_READY


def test_an_expired_approval_ends_the_call_expired() -> None:
    call = _call()
    with call_step(call.pk) as step:
        call_expire(step, step.call, actor=OPERATOR)
    call.refresh_from_db()
    assert (call.state, call.error_code) == (CallState.EXPIRED, "APPROVAL_EXPIRED")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_engine_imports_nothing_of_the_approvals_app() -> None:
    modules = [*ENGINE.glob("services/*.py"), *ENGINE.glob("*.py")]
    engine = [p for p in modules if p.name not in ("views.py", "urls.py", "admin.py", "forms.py")]
    assert len(engine) > 20
    offending = {
        str(path.relative_to(ENGINE)): sorted(
            m for m in _imports(path) if m.startswith("approvals")
        )
        for path in engine
    }
    assert {path: found for path, found in offending.items() if found} == {}
