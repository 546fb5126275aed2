"""A step's writes in one statement on PostgreSQL: its audit events and each row it changed;
a new row and a read that goes with it; a new row unless it repeats a unique one.

Each ``UPDATE`` and the events' ``INSERT`` are compiled by Django as they would be on their own
(the same SQL and parameters as ``save(update_fields=...)`` and ``bulk_create``) and become the
data-modifying ``WITH`` queries of one statement, whose own ``SELECT`` returns the events' ids
and how many rows each ``UPDATE`` matched. The parts touch different rows (a step saves each row
once), so it does not matter that they run on one snapshot. Other databases (SQLite, the
embedded demo) have no data-modifying ``WITH``: there the parts run one after another.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import DatabaseError, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.constants import OnConflict

from toolcalls.compiled import Compiled, insert_sql, update_sql
from toolcalls.models import AuditEvent

#: A changed row and the names of the fields to save (``auto_now`` fields included).
Change = tuple[models.Model, Sequence[str]]


def rows_write(
    events: list[AuditEvent],
    changes: Sequence[Change],
    inserts: Sequence[models.Model] = (),
    *,
    additions: Sequence[models.Model] = (),
) -> None:
    """Insert ``inserts`` (new rows: with the ids given them, which :func:`row_insert_reading`
    reserves, or else without, their ids not read back), ``events`` (their ids set afterwards)
    and ``additions`` (new rows, no ids wanted back; one that would repeat a unique row is left
    out), and save each of ``changes``, in one statement on PostgreSQL (its foreign keys are
    checked at its end, so an event may name a row inserted with it). Raises ``DatabaseError``
    when a changed row matched no row (as ``save(update_fields=...)`` does)."""
    new, added = _by_shape(inserts), _by_shape(additions)
    parts = len(changes) + bool(events) + len(new) + len(added)
    if not parts:
        return
    connection = connections[AuditEvent.objects.db]
    if connection.vendor != "postgresql" or parts == 1:
        _separately(events, changes, new, added)
        return
    statement, params = _statement(connection, events, changes, new, added)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        found = cursor.fetchone()
    if any(count != 1 for count in found[: len(changes)]):
        raise DatabaseError("a step's changed row matched no row")
    given = [row for row in inserts if row.pk is not None]
    if given:
        _inserted(given, [row.pk for row in given], connection.alias)
    if events:
        in_order = sorted(events, key=lambda event: event.seq)
        _inserted(in_order, found[-1], connection.alias)


def _statement(
    connection: BaseDatabaseWrapper,
    events: list[AuditEvent],
    changes: Sequence[Change],
    new: list[list[models.Model]],
    added: list[list[models.Model]],
) -> tuple[str, list[Any]]:
    """:func:`rows_write`'s statement: its ``SELECT`` gives how many rows each ``UPDATE``
    matched, then the events' ids in ``seq`` order."""
    quote = connection.ops.quote_name
    parts: list[str] = []
    params: list[Any] = []
    results: list[str] = []
    for number, (row, names) in enumerate(changes):
        update, update_params = update_sql(row, names, row._state.db or connection.alias)
        parts.append(f"u{number} AS ({update} RETURNING 1)")
        params.extend(update_params)
        results.append(f"(SELECT count(*) FROM u{number})")
    for number, rows in enumerate(new):
        insert, insert_params = _insert(rows, with_pk=rows[0].pk is not None)
        parts.append(f"n{number} AS ({insert})")
        params.extend(insert_params)
    for number, rows in enumerate(added):
        insert, insert_params = _insert(rows, ignore_conflicts=True)
        parts.append(f"a{number} AS ({insert})")
        params.extend(insert_params)
    if events:
        insert, insert_params = _insert(list(events))
        parts.append(f"e AS ({insert} RETURNING {quote('id')}, {quote('seq')})")
        params.extend(insert_params)
        results.append(f"(SELECT array_agg({quote('id')} ORDER BY {quote('seq')}) FROM e)")
    return f"WITH {', '.join(parts)} SELECT {', '.join(results) or 'NULL'}", params


def _separately(
    events: list[AuditEvent],
    changes: Sequence[Change],
    new: list[list[models.Model]],
    added: list[list[models.Model]],
) -> None:
    for rows in new:
        type(rows[0])._default_manager.bulk_create(rows)
    for rows in added:
        type(rows[0])._default_manager.bulk_create(rows, ignore_conflicts=True)
    if events:
        AuditEvent.objects.bulk_create(events)
    for row, names in changes:
        row.save(update_fields=names)


def row_insert_reading(
    row: models.Model,
    rows: Compiled[tuple[Any, ...]],
    values: Mapping[str, Any],
    *,
    reserve: tuple[type[models.Model], int] | None = None,
) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Insert ``row`` (new; its id set afterwards) and return what ``rows`` (a ``values_list``
    query whose first column is never NULL) reads with ``values``, in one statement on
    PostgreSQL; with ``reserve`` (a model and a count), the same statement also takes that many
    ids from the model's id sequence, for rows :func:`rows_write` inserts later (returned second;
    none elsewhere).

    The read runs on the statement's snapshot, taken when it starts: inside a step, after the
    step's locks, so it sees every committed change, as a statement of its own would; it does
    not see ``row``."""
    model = type(row)
    db = model._default_manager.db
    if connections[db].vendor != "postgresql":
        row.save(force_insert=True, using=db)
        return rows.run(using=db, **values), []
    quote = connections[db].ops.quote_name
    insert, params = _insert([row])
    select, select_params = rows.sql(using=db, **values)
    pk = quote(model._meta.pk.attname)  # type: ignore[union-attr]
    ids, ids_params = "NULL", []
    if reserve is not None:
        reserved, count = reserve
        ids = _RESERVE
        ids_params = [quote(reserved._meta.db_table), reserved._meta.pk.column, count]  # type: ignore[union-attr]
    statement = (
        f"WITH i AS ({insert} RETURNING {pk}) "
        f"SELECT i.{pk}, {ids}, r.* FROM i LEFT JOIN ({select}) r ON TRUE"
    )
    with connections[db].cursor() as cursor:
        cursor.execute(statement, [*params, *ids_params, *select_params])
        found = cursor.fetchall()
    _inserted([row], [found[0][0]], db)
    read = [tuple(values[2:]) for values in found if values[2] is not None]
    return read, list(found[0][1] or [])


def rows_insert(rows: Sequence[models.Model]) -> None:
    """Insert ``rows`` (new, of one model) as ``bulk_create`` does, their ids set afterwards in
    their order, through a statement compiled once per shape (:func:`insert_sql`; no signals,
    as with ``bulk_create``)."""
    _returning(rows, ignore_conflicts=False)


def row_insert_new(row: models.Model) -> bool:
    """Insert ``row`` (new; its id set afterwards) unless it would repeat a unique row, in one
    statement (``ON CONFLICT DO NOTHING … RETURNING``): ``True`` when it was inserted. A row
    it would repeat is left as it is; on PostgreSQL, one another transaction is inserting is
    waited for (the insert goes ahead if that transaction rolls back)."""
    return bool(_returning([row], ignore_conflicts=True))


def _returning(rows: Sequence[models.Model], *, ignore_conflicts: bool) -> list[int]:
    """Insert ``rows`` and mark those inserted saved, with their ids; returns those ids."""
    model = type(rows[0])
    db = model._default_manager.db
    connection = connections[db]
    insert, params = _insert(list(rows), ignore_conflicts=ignore_conflicts)
    pk = connection.ops.quote_name(model._meta.pk.column)  # type: ignore[union-attr, arg-type]
    with connection.cursor() as cursor:
        cursor.execute(f"{insert} RETURNING {pk}", params)
        ids = [found for (found,) in cursor.fetchall()]
    if ids:
        _inserted(rows, ids, db)
    return ids


#: ``count`` ids from the sequence of a table's id column (table, column, count).
_RESERVE = "(SELECT array_agg(nextval(pg_get_serial_sequence(%s, %s))) FROM generate_series(1, %s))"


def _by_shape(rows: Sequence[models.Model]) -> list[list[models.Model]]:
    """``rows`` grouped by model and by whether they have an id, in the order each group first
    appears: the rows one ``INSERT`` writes."""
    groups: dict[tuple[type[models.Model], bool], list[models.Model]] = {}
    for row in rows:
        groups.setdefault((type(row), row.pk is None), []).append(row)
    return list(groups.values())


def _insert(
    rows: list[models.Model], *, with_pk: bool = False, ignore_conflicts: bool = False
) -> tuple[str, Sequence[Any]]:
    """``bulk_create(rows)``'s ``INSERT`` (every concrete field but the id, unless ``with_pk``;
    ``pre_save`` applied, so ``auto_now_add`` fields take the time now; with
    ``ignore_conflicts``, ``ON CONFLICT DO NOTHING``), compiled once per shape
    (:func:`insert_sql`)."""
    model = type(rows[0])
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    return insert_sql(
        rows, _fields(model, with_pk), model._default_manager.db, on_conflict=on_conflict
    )


@functools.cache
def _fields(model: type[models.Model], with_pk: bool) -> tuple[Field[Any, Any], ...]:
    """The fields :func:`_insert` writes of ``model``'s rows."""
    opts = model._meta
    return tuple(
        f for f in opts.local_concrete_fields if (with_pk or f is not opts.pk) and not f.generated
    )


def _inserted(rows: Sequence[models.Model], ids: Sequence[int], db: str) -> None:
    """Mark ``rows`` saved in ``db``, with the ids the database gave them (in their order)."""
    for row, pk in zip(rows, ids, strict=True):
        row.pk = pk
        row._state.adding = False
        row._state.db = db
