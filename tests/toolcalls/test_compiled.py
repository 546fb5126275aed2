"""Hot-path queries compiled once: the same rows as the queryset, new values every run, and no
query compilation after the first."""

from __future__ import annotations

from datetime import datetime, timedelta
from unittest import mock

import psycopg
import pytest
from django.db import connection
from django.db.models import Q, sql
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import OperationFactory, ToolCallFactory
from toolcalls.models import Operation, ToolCall
from toolcalls.services.compiled import Compiled, update_sql

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


def test_the_first_run_runs_one_statement_and_the_second_compiles_nothing() -> None:
    operation = OperationFactory.create()
    fresh: Compiled[Operation] = Compiled(
        lambda operation_pk: Operation.objects.filter(pk=operation_pk), operation_pk=int
    )
    with CaptureQueriesContext(connection) as captured:
        fresh.run(operation_pk=operation.pk)
    assert len(captured.captured_queries) == 1  # the markers' query is compiled, never run
    _WITH_TENANT.run(operation_pk=operation.pk)
    with mock.patch.object(SQLCompiler, "pre_sql_setup", side_effect=AssertionError("compiled")):
        [row] = _WITH_TENANT.run(operation_pk=operation.pk)
    assert row.pk == operation.pk


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
