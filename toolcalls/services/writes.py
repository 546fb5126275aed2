"""A step's writes in one statement on PostgreSQL: its audit events and each row it changed.

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
from django.db.models import Q, sql

from toolcalls.models import AuditEvent

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
        update, update_params = _update(row, names)
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
        _inserted(events, found[-1])


def _separately(events: list[AuditEvent], changes: Sequence[Change]) -> None:
    if events:
        AuditEvent.objects.bulk_create(events)
    for row, names in changes:
        row.save(update_fields=names)


def _update(row: models.Model, names: Sequence[str]) -> tuple[str, Sequence[object]]:
    """``save(update_fields=names)``'s ``UPDATE`` of ``row`` (``pre_save`` applied, so
    ``auto_now`` fields take the time now), compiled."""
    model = type(row)
    fields = [model._meta.get_field(name) for name in names]
    query = sql.UpdateQuery(model)
    query.add_q(Q(pk=row.pk))
    query.add_update_values({field.name: field.pre_save(row, False) for field in fields})  # type: ignore[union-attr]
    return query.get_compiler(row._state.db or "default").as_sql()


def _insert(events: list[models.Model]) -> tuple[str, Sequence[object]]:
    """``bulk_create(events)``'s ``INSERT`` (every concrete field but the id), compiled."""
    opts = AuditEvent._meta
    fields = [field for field in opts.concrete_fields if field is not opts.pk]
    query = sql.InsertQuery(AuditEvent)
    query.insert_values(fields, events)
    [(insert, params)] = query.get_compiler(AuditEvent.objects.db).as_sql()
    return insert, params


def _inserted(events: list[AuditEvent], ids: Sequence[int]) -> None:
    """Mark ``events`` saved, with the ids the database gave them (in ``seq`` order)."""
    for event, pk in zip(sorted(events, key=lambda event: event.seq), ids, strict=True):
        event.pk = pk
        event._state.adding = False
        event._state.db = AuditEvent.objects.db
