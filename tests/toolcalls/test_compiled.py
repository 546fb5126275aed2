"""Hot-path queries compiled once: the same rows as the queryset, new values every run, and no
query compilation after the first."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from unittest import mock

import psycopg
import pytest
from django.db import connection
from django.db.models import Model, Q, Value, sql
from django.db.models.constants import OnConflict
from django.db.models.functions import Upper
from django.db.models.sql.compiler import SQLCompiler, SQLInsertCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import OperationFactory, ToolCallFactory
from toolcalls.compiled import Compiled, insert_sql, update_sql
from toolcalls.models import AuditEvent, Operation, ToolCall

pytestmark = pytest.mark.django_db

_WITH_TENANT: Compiled[Operation] = Compiled(
    lambda operation_pk: Operation.objects.select_related("tenant").filter(pk=operation_pk),
    operation_pk=int,
)


def test_a_compiled_query_returns_what_its_queryset_returns_for_each_value() -> None:
    first, second = OperationFactory.create(), OperationFactory.create(final_text="second")
    for operation in (first, second, first):
        [row] = _WITH_TENANT.run(operation_pk=operation.pk)
        expected = Operation.objects.select_related("tenant").get(pk=operation.pk)
        assert row.pk == operation.pk and row.final_text == expected.final_text
        assert row.conversation == expected.conversation
        assert row.tenant.slug == expected.tenant.slug  # the related row, without a query
        assert not row._state.adding and row._state.db == "default"
    assert _WITH_TENANT.run(operation_pk=-1) == []


def test_the_first_run_runs_one_statement_and_the_second_works_out_nothing_again() -> None:
    """No compilation, and neither the columns' converters nor whether they hold a composite key
    are asked of Django again."""
    operation = OperationFactory.create()
    fresh: Compiled[Operation] = Compiled(
        lambda operation_pk: Operation.objects.filter(pk=operation_pk), operation_pk=int
    )
    with CaptureQueriesContext(connection) as captured:
        fresh.run(operation_pk=operation.pk)
    assert len(captured.captured_queries) == 1  # the markers' query is compiled, never run
    _WITH_TENANT.run(operation_pk=operation.pk)
    checks = (
        mock.patch.object(SQLCompiler, name, side_effect=AssertionError(name))
        for name in ("pre_sql_setup", "get_converters", "has_composite_fields")
    )
    with contextlib.ExitStack() as stack:
        for check in checks:
            stack.enter_context(check)
        [row] = _WITH_TENANT.run(operation_pk=operation.pk)
    assert row.pk == operation.pk


def test_get_gives_the_one_row_or_raises_as_querysets_get_does() -> None:
    first, second = OperationFactory.create(), OperationFactory.create()
    assert _WITH_TENANT.get(operation_pk=second.pk).pk == second.pk
    with pytest.raises(Operation.DoesNotExist):
        _WITH_TENANT.get(operation_pk=-1)
    of_tenant: Compiled[Operation] = Compiled(
        lambda tenant_pk: Operation.objects.filter(tenant_id=tenant_pk), tenant_pk=int
    )
    second.tenant = first.tenant
    second.save(update_fields=["tenant"])
    with pytest.raises(Operation.MultipleObjectsReturned):
        of_tenant.get(tenant_pk=first.tenant_id)


def test_a_time_parameter_takes_each_runs_value() -> None:
    operation = OperationFactory.create(lease_expires_at=timezone.now() + timedelta(minutes=1))
    expired: Compiled[int] = Compiled(
        lambda pk, now: Operation.objects.filter(Q(lease_expires_at__lte=now), pk=pk).values_list(
            "pk", flat=True
        ),
        pk=int,
        now=datetime,
    )
    assert expired.run(pk=operation.pk, now=timezone.now()) == []
    later = timezone.now() + timedelta(minutes=2)
    assert expired.run(pk=operation.pk, now=later) == [operation.pk]


def test_values_list_rows_and_the_sql_to_embed() -> None:
    call = ToolCallFactory.create(tool_name="lookup")
    names: Compiled[tuple[str, int]] = Compiled(
        lambda operation_pk: ToolCall.objects.filter(operation_id=operation_pk).values_list(
            "tool_name", "position"
        ),
        operation_pk=int,
    )
    assert names.run(operation_pk=call.operation_id) == [("lookup", call.position)]
    statement, params = names.sql(operation_pk=call.operation_id)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        assert cursor.fetchall() == [("lookup", call.position)]


def test_a_build_that_does_not_use_a_parameter_is_refused() -> None:
    ignoring: Compiled[Operation] = Compiled(lambda pk: Operation.objects.all(), pk=int)
    with pytest.raises(LookupError, match="pk"):
        ignoring.run(pk=1)


def test_an_update_is_djangos_own_with_each_rows_values() -> None:
    operation = OperationFactory.create()
    names = ["final_text", "conversation", "lease_expires_at", "updated_at"]
    for text, expires in (("one", timezone.now()), ("two", None), ("three", None)):
        operation.final_text, operation.lease_expires_at = text, expires
        operation.conversation = [{"role": "user", "content": text}]
        statement, params = update_sql(operation, names, "default")
        query = sql.UpdateQuery(Operation)
        query.add_q(Q(pk=operation.pk))
        query.add_update_values({name: getattr(operation, name) for name in names})
        django_statement, django_params = query.get_compiler("default").as_sql()
        connection.ensure_connection()
        quoting = psycopg.ClientCursor(connection.connection)  # the server binds the real ones
        assert quoting.mogrify(statement, params) == quoting.mogrify(
            django_statement, django_params
        )
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
        operation.refresh_from_db()
        assert (operation.final_text, operation.lease_expires_at) == (text, expires)


def _events(operation: Operation, count: int, text: str) -> list[AuditEvent]:
    return [
        AuditEvent(
            operation=operation,
            seq=number,
            kind="call.transition",
            actor="worker",
            to_state=text,
            details={"text": text, "number": number, "items": [text, None]},
            created_at=timezone.now(),
            hash=f"{number:064x}",
        )
        for number in range(1, count + 1)
    ]


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("on_conflict", [None, OnConflict.IGNORE])
def test_an_insert_is_djangos_own_with_each_runs_values(
    count: int, on_conflict: OnConflict | None
) -> None:
    operation = OperationFactory.create()
    fields = [f for f in AuditEvent._meta.local_concrete_fields if f is not AuditEvent._meta.pk]
    connection.ensure_connection()
    quoting = psycopg.ClientCursor(connection.connection)  # the server binds the real ones
    for run, text in enumerate(("one", "two", "three")):
        rows = _events(operation, count, text)
        for row in rows:
            row.seq += run * count
        statement, params = insert_sql(rows, fields, "default", on_conflict=on_conflict)
        query = sql.InsertQuery(AuditEvent, on_conflict=on_conflict)
        objs: list[Model] = list(rows)
        query.insert_values(fields, objs)
        [(django_statement, django_params)] = query.get_compiler("default").as_sql()
        assert quoting.mogrify(statement, params) == quoting.mogrify(
            django_statement, django_params
        )
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
    stored = AuditEvent.objects.filter(operation=operation).order_by("seq")
    assert [event.to_state for event in stored] == [
        t for t in ("one", "two", "three") for _ in range(count)
    ]
    assert stored.last().details == {"text": "three", "number": count, "items": ["three", None]}  # type: ignore[union-attr]


def test_a_second_insert_of_a_shape_compiles_nothing() -> None:
    operation = OperationFactory.create()
    fields = [f for f in AuditEvent._meta.local_concrete_fields if f is not AuditEvent._meta.pk]
    insert_sql(_events(operation, 2, "one"), fields, "default")
    with mock.patch.object(SQLInsertCompiler, "as_sql", side_effect=AssertionError("compiled")):
        _, params = insert_sql(_events(operation, 2, "two"), fields, "default")
    assert params[fields.index(AuditEvent._meta.get_field("to_state"))] == ["two", "two"]


def test_an_expression_is_compiled_by_django_and_its_statement_never_reused() -> None:
    operation = OperationFactory.create()
    fields = [f for f in AuditEvent._meta.local_concrete_fields if f is not AuditEvent._meta.pk]
    rows = _events(operation, 5, "one")
    rows[0].actor = Upper(Value("worker"))  # type: ignore[assignment]
    statement, _ = insert_sql(rows, fields, "default")
    assert "UPPER" in statement
    statement, _ = insert_sql(_events(operation, 5, "two"), fields, "default")
    assert "UPPER" not in statement
