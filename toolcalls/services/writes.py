"""A step's writes in one statement on PostgreSQL: its audit events and each row it changed;
a new row and a read that goes with it.

Each ``UPDATE`` and the events' ``INSERT`` are compiled by Django as they would be on their own
(the same SQL and parameters as ``save(update_fields=...)`` and ``bulk_create``) and become the
data-modifying ``WITH`` queries of one statement, whose own ``SELECT`` returns the events' ids
and how many rows each ``UPDATE`` matched. The parts touch different rows (a step saves each row
once), so it does not matter that they run on one snapshot. Other databases (SQLite, the
embedded demo) have no data-modifying ``WITH``: there the parts run one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connections, models
from django.db.models import sql

from toolcalls.models import AuditEvent
from toolcalls.services.compiled import Compiled, update_sql

#: A changed row and the names of the fields to save (``auto_now`` fields included).
Change = tuple[models.Model, Sequence[str]]


def rows_write(events: list[AuditEvent], changes: Sequence[Change]) -> None:
    """Insert ``events`` (their ids set afterwards) and save each of ``changes``, in one
    statement on PostgreSQL. Raises ``DatabaseError`` when a changed row matched no row (as
    ``save(update_fields=...)`` does)."""
    if not events and not changes:
        return
    connection = connections[AuditEvent.objects.db]
    if connection.vendor != "postgresql" or len(changes) + bool(events) == 1:
        _separately(events, changes)
        return
    quote = connection.ops.quote_name
    parts: list[str] = []
    params: list[Any] = []
    results: list[str] = []
    for number, (row, names) in enumerate(changes):
        update, update_params = update_sql(row, names, row._state.db or connection.alias)
        parts.append(f"u{number} AS ({update} RETURNING 1)")
        params.extend(update_params)
        results.append(f"(SELECT count(*) FROM u{number})")
    if events:
        insert, insert_params = _insert(list(events))
        parts.append(f"e AS ({insert} RETURNING {quote('id')}, {quote('seq')})")
        params.extend(insert_params)
        results.append(f"(SELECT array_agg({quote('id')} ORDER BY {quote('seq')}) FROM e)")
    statement = f"WITH {', '.join(parts)} SELECT {', '.join(results)}"
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        found = cursor.fetchone()
    if any(count != 1 for count in found[: len(changes)]):
        raise DatabaseError("a step's changed row matched no row")
    if events:
        in_order = sorted(events, key=lambda event: event.seq)
        _inserted(in_order, found[-1], connection.alias)


def _separately(events: list[AuditEvent], changes: Sequence[Change]) -> None:
    if events:
        AuditEvent.objects.bulk_create(events)
    for row, names in changes:
        row.save(update_fields=names)


def row_insert_reading(
    row: models.Model, rows: Compiled[tuple[Any, ...]], **values: Any
) -> list[tuple[Any, ...]]:
    """Insert ``row`` (new; its id set afterwards) and return what ``rows`` (a ``values_list``
    query whose first column is never NULL) reads with ``values``, in one statement on
    PostgreSQL. The read runs on the statement's snapshot, taken when it starts: inside a step,
    after the step's locks, so it sees every committed change, as a statement of its own would;
    it does not see ``row``."""
    model = type(row)
    db = model._default_manager.db
    if connections[db].vendor != "postgresql":
        row.save(force_insert=True, using=db)
        return rows.run(using=db, **values)
    quote = connections[db].ops.quote_name
    insert, params = _insert([row])
    select, select_params = rows.sql(using=db, **values)
    pk = quote(model._meta.pk.attname)  # type: ignore[union-attr]
    statement = (
        f"WITH i AS ({insert} RETURNING {pk}) "
        f"SELECT i.{pk}, r.* FROM i LEFT JOIN ({select}) r ON TRUE"
    )
    with connections[db].cursor() as cursor:
        cursor.execute(statement, [*params, *select_params])
        found = cursor.fetchall()
    _inserted([row], [found[0][0]], db)
    return [tuple(values[1:]) for values in found if values[1] is not None]


def _insert(rows: list[models.Model]) -> tuple[str, Sequence[Any]]:
    """``bulk_create(rows)``'s ``INSERT`` (every concrete field but the id; ``pre_save``
    applied, so ``auto_now_add`` fields take the time now), compiled."""
    model = type(rows[0])
    opts = model._meta
    fields = [f for f in opts.local_concrete_fields if f is not opts.pk and not f.generated]
    query = sql.InsertQuery(model)
    query.insert_values(fields, rows)
    [(insert, params)] = query.get_compiler(model._default_manager.db).as_sql()
    return insert, params


def _inserted(rows: Sequence[models.Model], ids: Sequence[int], db: str) -> None:
    """Mark ``rows`` saved in ``db``, with the ids the database gave them (in their order)."""
    for row, pk in zip(rows, ids, strict=True):
        row.pk = pk
        row._state.adding = False
        row._state.db = db
