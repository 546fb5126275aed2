"""Audit-chain verification: intact chains pass; edited, removed and relinked events and a
stale head are each reported at their first broken link; PostgreSQL refuses UPDATE and DELETE."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import ProgrammingError, connection, transaction

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, operator, start
from toolcalls.models import AuditEvent, Operation
from toolcalls.services.audit import MASK, absent_as_null, event_hash, mask_secrets
from toolcalls.services.audit_verify import BreakKind, ChainBreak, audit_chain_verify
from toolcalls.states import AuditKind

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

TRIGGER = "toolcalls_auditevent_append_only"


@contextmanager
def trigger_disabled() -> Iterator[None]:
    """Tamper as someone with the table owner's rights would: switch the trigger off."""
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE toolcalls_auditevent DISABLE TRIGGER {TRIGGER}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE toolcalls_auditevent ENABLE TRIGGER {TRIGGER}")


def raw(sql: str, *params: Any) -> None:
    with trigger_disabled(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def verify(*args: str) -> tuple[int, str, str]:
    """``verify_audit_chain`` → (exit code, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_audit_chain", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def parked(demo: Any) -> Operation:
    """A refund parked at WAITING_APPROVAL, plus an unrelated completed operation."""
    start(demo, [r.final("Hello.")])
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.audit_seq >= 5
    return operation


def only_break(operation: Operation) -> ChainBreak:
    breaks = audit_chain_verify()
    assert [b.operation for b in breaks] == [operation.public_id]
    return breaks[0]


def test_intact_chains_verify(demo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    start(demo, [r.final("Hello.")])
    assert audit_chain_verify() == []
    monkeypatch.setattr("toolcalls.management.commands.verify_audit_chain.PROGRESS_EVERY", 5)
    code, out, err = verify()
    assert code == 0
    assert out.strip() == f"OK: 2 operations, {AuditEvent.objects.count()} events verified"
    assert "events, " in err


@pytest.mark.parametrize(
    "change",
    [
        "details = details || '{\"amount_cents\": 1}'::jsonb",
        "actor = 'user:operator'",
    ],
)
def test_an_edited_event_is_found(parked: Operation, change: str) -> None:
    raw(f"UPDATE toolcalls_auditevent SET {change} WHERE operation_id = %s AND seq = 3", parked.pk)
    found = only_break(parked)
    assert (found.seq, found.kind) == (3, BreakKind.EDITED)
    code, out, _ = verify()
    assert code == 1
    assert f"BROKEN {parked.public_id} #3 edited:" in out
    assert "FAILED: 1 of 2 operations broken" in out


def test_an_edited_and_rehashed_event_breaks_the_next_link(parked: Operation) -> None:
    event = AuditEvent.objects.select_related("call").get(operation=parked, seq=3)
    event.actor = "user:operator"
    call_id = event.call.public_id if event.call else None
    rehashed = event_hash(event, operation_id=parked.public_id, call_id=call_id)
    raw(
        "UPDATE toolcalls_auditevent SET actor = %s, hash = %s WHERE id = %s",
        event.actor,
        rehashed,
        event.pk,
    )
    found = only_break(parked)
    assert (found.seq, found.kind) == (4, BreakKind.RELINKED)


def test_a_removed_event_is_found(parked: Operation) -> None:
    raw("DELETE FROM toolcalls_auditevent WHERE operation_id = %s AND seq = 2", parked.pk)
    found = only_break(parked)
    assert (found.seq, found.kind) == (2, BreakKind.MISSING)
    code, out, _ = verify()
    assert code == 1
    assert f"BROKEN {parked.public_id} #2 missing:" in out


def test_removed_last_events_leave_the_head_dangling(parked: Operation) -> None:
    last = parked.audit_seq
    raw(
        "DELETE FROM toolcalls_auditevent WHERE operation_id = %s AND seq >= %s",
        parked.pk,
        last - 1,
    )
    found = only_break(parked)
    assert (found.seq, found.kind) == (last - 1, BreakKind.HEAD_MISMATCH)
    assert f"events #{last - 1} to #{last} not stored" in found.message
    code, out, _ = verify()
    assert code == 1
    assert f"BROKEN {parked.public_id} #{last - 1} head_mismatch:" in out


def test_an_operation_without_any_event_left_is_found(parked: Operation) -> None:
    raw("DELETE FROM toolcalls_auditevent WHERE operation_id = %s", parked.pk)
    found = only_break(parked)
    assert (found.seq, found.kind) == (1, BreakKind.HEAD_MISMATCH)


def test_postgresql_refuses_update_and_delete(parked: Operation) -> None:
    statements = [
        "UPDATE toolcalls_auditevent SET actor = 'x' WHERE operation_id = %s",
        "DELETE FROM toolcalls_auditevent WHERE operation_id = %s",
    ]
    # RAISE EXCEPTION's SQLSTATE (P0001) reaches Django as ProgrammingError.
    for sql in statements:
        with (
            pytest.raises(ProgrammingError, match="audit events are append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, [parked.pk])
    assert AuditEvent.objects.filter(operation=parked).count() == parked.audit_seq
    assert audit_chain_verify() == []


@pytest.mark.parametrize(
    "sql", ["TRUNCATE toolcalls_auditevent CASCADE", "TRUNCATE toolcalls_operation CASCADE"]
)
def test_postgresql_refuses_truncate(parked: Operation, sql: str) -> None:
    """Only a session that opted in (``callgate.audit_truncate = 'allow'``, as the test settings
    do for the suite's flushes between tests) may empty the trail; any other is refused."""
    with (
        pytest.raises(ProgrammingError, match="audit events are append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("SET LOCAL callgate.audit_truncate = ''")
        cursor.execute(sql)
    assert AuditEvent.objects.filter(operation=parked).count() == parked.audit_seq
    assert audit_chain_verify() == []


def test_flush_says_the_audit_trail_refuses_it(parked: Operation) -> None:
    """Django's own refusal guessed at a missing database or table and bad SQL."""
    with connection.cursor() as cursor:
        cursor.execute("SET callgate.audit_truncate = ''")
    try:
        with pytest.raises(CommandError) as refused:
            call_command("flush", interactive=False, verbosity=0)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET callgate.audit_truncate = 'allow'")
    message = str(refused.value)
    assert message.startswith(f"Database {connection.settings_dict['NAME']} couldn't be flushed:")
    assert "audit events are append-only" in message and "Possible reasons" not in message
    assert AuditEvent.objects.filter(operation=parked).count() == parked.audit_seq


def test_operation_option_limits_the_check(parked: Operation) -> None:
    other = Operation.objects.exclude(pk=parked.pk).get()
    raw("DELETE FROM toolcalls_auditevent WHERE operation_id = %s AND seq = 2", parked.pk)
    assert audit_chain_verify(operation_public_id=other.public_id) == []
    code, out, _ = verify("--operation", other.public_id)
    assert (code, out.strip()) == (0, f"OK: 1 operations, {other.audit_seq} events verified")
    code, out, _ = verify("--operation", parked.public_id)
    assert code == 1
    assert out.startswith(f"BROKEN {parked.public_id} #2 missing:")


def test_an_unknown_operation_is_an_error(parked: Operation) -> None:
    with pytest.raises(CommandError, match="unknown operation: op_nope"):
        call_command("verify_audit_chain", "--operation", "op_nope", stdout=StringIO())


def test_events_recorded_with_blank_details_before_still_verify(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events recorded when an absent detail was ``""`` keep it, as their hash covers it; the
    chain verifies across them and the events recorded since, whose absent details are null."""
    before = start(demo, bundled_replies("refund_approve"))
    with monkeypatch.context() as then:
        then.setattr("toolcalls.services.audit.absent_as_null", dict)
        approval_decide(approval_pk=before.approvals.get().pk, actor=operator(), approve=True)
    since = start(demo, bundled_replies("refund_approve"))
    approval_decide(approval_pk=since.approvals.get().pk, actor=operator(), approve=True)
    reasons = [
        AuditEvent.objects.get(operation=operation, kind=AuditKind.APPROVAL_TRANSITION).details
        for operation in (before, since)
    ]
    assert [details["reason"] for details in reasons] == ["", None]
    assert audit_chain_verify() == []


def test_absent_details_are_null_but_nested_blanks_are_data() -> None:
    details = {"reason": "", "note": "ok", "count": 0, "arguments": {"memo": ""}, "names": [""]}
    assert absent_as_null(details) == {
        "reason": None,
        "note": "ok",
        "count": 0,
        "arguments": {"memo": ""},
        "names": [""],
    }


def test_secrets_are_masked_but_token_counts_are_kept() -> None:
    details = {
        "budgets": {"max_input_tokens": 1000, "max_output_tokens": 200},
        "headers": [{"Authorization": "Bearer x", "x-api-key": "k"}],
        "access_token": "t",
        "refreshToken": "t",
        "password": "p",
    }
    assert mask_secrets(details) == {
        "budgets": {"max_input_tokens": 1000, "max_output_tokens": 200},
        "headers": [{"Authorization": MASK, "x-api-key": MASK}],
        "access_token": MASK,
        "refreshToken": MASK,
        "password": MASK,
    }
