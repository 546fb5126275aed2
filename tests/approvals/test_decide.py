"""Decisions: one wins, four eyes, expiry by database time, revalidation at resume."""

from __future__ import annotations

import json
import traceback
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models.sql import compiler
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from approvals import services as approvals_services
from approvals.models import ApprovalRequest
from approvals.services import ApprovalError, approval_decide, approvals_expire_due
from approvals.states import ApprovalState
from tests.engine import bundled_replies, operator, start
from tests.factories import TenantFactory, UserFactory
from toolcalls.demo.models import LedgerEntry, Order
from toolcalls.models import ReplayScript, ToolCall
from toolcalls.services.operations import operation_start
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def parked(demo):  # type: ignore[no-untyped-def]
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == OperationState.WAITING_APPROVAL
    return operation


def _decide(operation, user, approve=True, reason=""):  # type: ignore[no-untyped-def]
    return approval_decide(
        approval_pk=operation.approvals.get().pk, actor=user, approve=approve, reason=reason
    )


def test_requester_cannot_approve_their_own_request(parked) -> None:
    requester = get_user_model().objects.get(username="requester")
    assert requester.has_perm("approvals.decide_approvalrequest")  # an operator, but the requester
    with pytest.raises(ApprovalError) as exc:
        _decide(parked, requester)
    assert exc.value.code == "self_approval"
    assert parked.approvals.get().state == ApprovalState.PENDING


def test_only_operators_of_the_tenant_decide(parked) -> None:
    support = get_user_model().objects.get(username="support")
    with pytest.raises(ApprovalError, match="not decide") as exc:
        _decide(parked, support)
    assert exc.value.code == "not_permitted"
    outsider = UserFactory.create(username="outsider")
    outsider.groups.add(*operator().groups.all())
    TenantFactory.create(slug="other").members.add(outsider)
    for approve in (True, False):  # refused before any lock, and under the decision's locks
        with pytest.raises(ApprovalError, match="for this tenant") as exc:
            _decide(parked, outsider, approve=approve, reason="No.")
        assert exc.value.code == "not_permitted"
    assert parked.approvals.get().state == ApprovalState.PENDING


def test_the_deciders_membership_is_read_with_the_approval(parked) -> None:
    with CaptureQueriesContext(connection) as captured:
        _decide(parked, operator())
    sql = [query["sql"] for query in captured.captured_queries]
    # The requester's membership comes with the resumed call's operation; the decider's ...
    members = [s for s in sql if '"toolcalls_tenant_members"' in s and "requester_member" not in s]
    # ... twice (before the locks and under them), each time in the approval's own read.
    assert len(members) == 2
    assert all(s.startswith('SELECT "approvals_approvalrequest"') for s in members)
    assert all('AS "decider_member"' in s for s in members)


def test_one_decision_wins(parked) -> None:
    _decide(parked, operator(), approve=False, reason="No.")
    second = UserFactory.create(username="second-operator")
    second.groups.add(*operator().groups.all())
    parked.tenant.members.add(second)
    with pytest.raises(ApprovalError) as exc:
        _decide(parked, second, approve=True)
    assert exc.value.code == "already_decided"
    assert LedgerEntry.objects.count() == 0


#: Reasons a person cannot see: white space, and format characters that ``str.strip`` keeps
#: (zero-width space, word joiner, byte-order mark, Mongolian vowel separator).
INVISIBLE_REASONS = ["   ", "\u200b", "\u2060", "\ufeff", "\u180e", " \u200b\n\u2060\t"]


@pytest.mark.parametrize("reason", INVISIBLE_REASONS)
def test_denial_needs_a_reason_a_person_can_see(parked, reason) -> None:
    with pytest.raises(ApprovalError) as exc:
        _decide(parked, operator(), approve=False, reason=reason)
    assert exc.value.code == "reason_required"
    assert parked.approvals.get().state == ApprovalState.PENDING
    _decide(parked, operator(), approve=False, reason="\u200bPhoto first.")
    assert parked.approvals.get().decision_reason == "\u200bPhoto first."


def test_approval_past_expiry_by_database_time_expires_and_nothing_runs(parked) -> None:
    # Move expiry into the past by the database's own clock.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET expires_at = now() - interval '1 second'"
        )
    with pytest.raises(ApprovalError) as exc:
        _decide(parked, operator())
    assert exc.value.code == "expired"
    parked.refresh_from_db()
    call = parked.calls.get(tool_name="submit_refund")
    assert call.state == CallState.EXPIRED
    assert call.model_result["error"]["code"] == "APPROVAL_EXPIRED"
    assert parked.approvals.get().state == ApprovalState.EXPIRED
    # The model is told, and the scripted model answers with its closing text.
    last_request = parked.turns.get(index=3).request_body["input"]
    assert '"APPROVAL_EXPIRED"' in last_request[-1]["output"]
    assert parked.state == OperationState.COMPLETED
    assert LedgerEntry.objects.count() == 0


@override_settings(CALLGATE_APPROVAL_TTL_S=0)
def test_sweep_expires_due_approvals(demo) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    assert approvals_expire_due() == 1
    assert approvals_expire_due() == 0
    assert operation.approvals.get().state == ApprovalState.EXPIRED


def test_arguments_changed_after_request_are_not_executed(parked) -> None:
    call = parked.calls.get(tool_name="submit_refund")
    ToolCall.objects.filter(pk=call.pk).update(arguments={**call.arguments, "amount_cents": 8000})
    _decide(parked, operator())
    call.refresh_from_db()
    assert call.state == CallState.REJECTED
    assert call.model_result["error"]["code"] == "APPROVAL_STALE"
    assert "arguments changed" in call.model_result["error"]["message"]
    assert LedgerEntry.objects.count() == 0
    assert Order.objects.get(order_id="ORD-1001").refunded_cents == 0


def test_policy_revision_changed_after_request_is_not_executed(parked) -> None:
    ApprovalRequest.objects.update(policy_revision="refund-threshold-v0")
    _decide(parked, operator())
    call = parked.calls.get(tool_name="submit_refund")
    assert call.state == CallState.REJECTED
    assert "policy changed" in call.model_result["error"]["message"]
    assert LedgerEntry.objects.count() == 0


def test_order_refunded_elsewhere_while_pending_refuses_the_approval(parked) -> None:
    Order.objects.filter(order_id="ORD-1001").update(refunded_cents=12000)
    with pytest.raises(ApprovalError) as refused:
        _decide(parked, operator())
    assert refused.value.code == "precondition_failed"
    assert "Only 999 cents can still be refunded" in refused.value.message
    assert parked.approvals.get().state == ApprovalState.PENDING
    call = parked.calls.get(tool_name="submit_refund")
    assert call.state == CallState.WAITING_APPROVAL
    assert not parked.events.filter(kind="approval.transition").exists()


def test_order_refunded_elsewhere_after_the_decisions_check_blocks_execution(
    parked, monkeypatch
) -> None:
    """The decision's check of the precondition is advice; resume checks it again."""
    monkeypatch.setattr(approvals_services, "precondition_failure", lambda **kwargs: None)
    Order.objects.filter(order_id="ORD-1001").update(refunded_cents=12000)
    _decide(parked, operator())
    call = parked.calls.get(tool_name="submit_refund")
    assert call.state == CallState.REJECTED
    assert call.error_code == "REFUND_EXCEEDS_REMAINING"
    assert LedgerEntry.objects.count() == 0


def test_decision_is_audited_with_the_decider(parked) -> None:
    _decide(parked, operator())
    approval = parked.approvals.get()
    assert approval.decided_by.username == "operator"
    assert approval.decided_at <= approval.expires_at
    event = parked.events.get(kind="approval.transition")
    assert (event.actor, event.from_state, event.to_state) == (
        "user:operator",
        "PENDING",
        "APPROVED",
    )
    assert approval.expires_at - approval.created_at == timedelta(hours=1)


@pytest.mark.parametrize("second_approves", [True, False])
def test_two_operators_deciding_at_once_one_wins(parked, second_approves) -> None:
    import threading

    from django.db import connections

    other = UserFactory.create(username="second-operator")
    other.groups.add(*operator().groups.all())
    parked.tenant.members.add(other)
    approval = parked.approvals.get()
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def decide(user, approve: bool) -> None:  # type: ignore[no-untyped-def]
        barrier.wait()
        try:
            approval_decide(approval_pk=approval.pk, actor=user, approve=approve, reason="race")
            outcomes.append("won")
        except ApprovalError as exc:
            outcomes.append(exc.code)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=decide, args=(operator(), True)),
        threading.Thread(target=decide, args=(other, second_approves)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["already_decided", "won"]
    approval.refresh_from_db()
    decisions = parked.events.filter(kind="approval.transition")
    assert decisions.count() == 1 and approval.state in (
        ApprovalState.APPROVED,
        ApprovalState.DENIED,
    )
    assert LedgerEntry.objects.count() == (1 if approval.state == ApprovalState.APPROVED else 0)


def test_the_resume_reads_the_requester_with_the_locked_operation(parked) -> None:
    requester = parked.requested_by_id
    with CaptureQueriesContext(connection) as captured:
        _decide(parked, operator())
    parked.refresh_from_db()
    assert parked.state == OperationState.COMPLETED
    sql = [query["sql"] for query in captured.captured_queries]
    # The resumed call's claim locks the operation by the call's id, with the requester and
    # whether they belong to the tenant.
    locks = [s for s in sql if s.startswith('SELECT "toolcalls_operation"') and "FOR UPDATE" in s]
    [claim_lock] = [s for s in locks if '"auth_user"' in s and '"toolcalls_toolcall"' in s]
    assert '"toolcalls_tenant_members"' in claim_lock
    # Nothing asks for the requester or their membership on its own.
    assert not [s for s in sql if s.startswith('SELECT "auth_user"') and f"= {requester}" in s]
    members = [s for s in sql if s.startswith('SELECT 1 AS "a" FROM "toolcalls_tenant_members"')]
    assert not [s for s in members if f'"user_id" = {requester}' in s]
    # Their permissions come with it too: authorizing the call asks for none on its own.
    assert '"auth_permission"' in claim_lock
    asked = [s for s in sql if '"auth_permission"' in s and s not in locks]
    assert not [s for s in asked if f'"user_id" = {requester})' in s]


_ROOT = Path(__file__).resolve().parents[2]


def _compiled_where(run: Any) -> list[str]:
    """The project module (innermost frame outside the libraries) of each query Django compiles
    while ``run()`` runs."""
    where: list[str] = []

    def spying(original: Any) -> Any:
        def as_sql(self: Any, *args: Any, **kwargs: Any) -> Any:
            frames = [Path(f.filename) for f in traceback.extract_stack()]
            ours = [f for f in frames if _ROOT in f.parents and ".venv" not in f.parts]
            where.append(str(ours[-2].relative_to(_ROOT)))  # [-1]: this function
            return original(self, *args, **kwargs)

        return as_sql

    kinds = ("SQLCompiler", "SQLInsertCompiler", "SQLUpdateCompiler", "SQLDeleteCompiler")
    with ExitStack() as stack:
        for kind in (getattr(compiler, name) for name in kinds):
            stack.enter_context(mock.patch.object(kind, "as_sql", spying(kind.__dict__["as_sql"])))
        run()
    return where


def test_a_refund_compiles_no_query_of_the_engines_after_the_first(demo) -> None:
    """Start, park, decide, resume and complete: after one refund has run, the next compiles
    only what the tools ask themselves (every engine and approval query is compiled once).
    The same operator decides both, so Django's permission cache on the user answers the
    second time."""
    deciding = operator()
    _decide(start(demo, bundled_replies("refund_approve")), deciding)
    Order.objects.create(
        tenant_ref=demo.tenant.slug,
        order_id="ORD-7701",
        customer_ref="cus_1001",
        description="Headphones",
        total_cents=12999,
    )
    text = json.dumps(bundled_replies("refund_approve")).replace("ORD-1001", "ORD-7701")
    script = ReplayScript.objects.create(
        name="test", family="openai_responses", model="gpt-5.1-test", replies=json.loads(text)
    )
    requester = get_user_model().objects.get(username="requester")
    operations = []

    def refund() -> None:
        operation = operation_start(
            tenant=demo.tenant,
            requested_by=requester,
            subject_ref="cus_1001",
            family="openai_responses",
            model="gpt-5.1-test",
            input_text="Please refund my order.",
            replay_script=script,
        )
        operations.append(operation)
        _decide(operation, deciding)

    where = _compiled_where(refund)
    operations[0].refresh_from_db()
    assert operations[0].state == OperationState.COMPLETED
    assert any(module.startswith("toolcalls/demo/") for module in where)  # the spy sees them
    ours = [m for m in where if not m.startswith(("toolcalls/demo/", "tests/"))]
    assert ours == []
