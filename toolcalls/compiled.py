"""Reads, inserts and updates on the engine's hot path, compiled once per process.

Django builds a query's SQL every time it runs it (joins, the column list, quoting): about a
fifth of a step's time, for SQL that is the same every time. :class:`Compiled` keeps the SQL of
one query shape and runs it again with new values, returning what the queryset would (model
instances with their ``select_related`` rows and annotations, or ``values_list`` rows), through
Django's own iterables. :func:`update_sql` does the same for the single-row ``UPDATE`` a step
writes, :func:`insert_sql` for the ``INSERT`` of its new rows.

A shape is compiled from marker values standing in for its parameters: ``build(**markers)``
must use each parameter as a query value and take nothing else that varies (no ``now()``
inside: pass the time as a parameter). The markers are found in the compiled parameters and
replaced by the values of each run; a parameter the compiled query does not carry is a
programming error (``LookupError`` at the first run).
"""

from __future__ import annotations

import copy
import functools
import itertools
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Q, QuerySet, sql
from django.db.models.constants import OnConflict
from django.db.models.sql.compiler import SQLCompiler

T = TypeVar("T")
_serial = itertools.count(1)


@dataclass(frozen=True)
class _Shape:
    queryset: QuerySet[Any, Any]  # built from the markers; never run itself
    compiler: SQLCompiler  # set up by compiling: its columns and related rows are the shape's
    sql: str
    params: tuple[Any, ...]
    positions: tuple[tuple[int, str], ...]  # (index in params, parameter name)
    #: The columns' converters (``get_converters``), per connection: the same every run.
    converters: weakref.WeakKeyDictionary[BaseDatabaseWrapper, dict[int, Any]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    #: Whether its columns include a composite key's (``has_composite_fields``), once known.
    composite: list[bool] = field(default_factory=list)


class Compiled(Generic[T]):
    """A query shape compiled once per database and process; :meth:`run` runs it.

    ``kinds`` names each parameter of ``build`` and its type (``int``, ``str`` or ``datetime``).
    """

    def __init__(self, build: Callable[..., QuerySet[Any, T]], **kinds: type) -> None:
        self._build = build
        self._kinds = kinds
        self._shapes: dict[str, _Shape] = {}
        self._lock = threading.Lock()

    def run(self, *, using: str = "default", **values: Any) -> list[T]:
        """The rows of the query with ``values`` for its parameters (a list, as ``list(qs)``)."""
        shape = self._shape(using)
        connection = connections[using]
        compiler = copy.copy(shape.compiler)
        compiler.__class__ = _frozen(type(shape.compiler))  # type: ignore[arg-type]
        compiler.connection = connection
        compiler.compiled = (shape.sql, self._params(shape, connection, values))  # type: ignore[attr-defined]
        compiler.converters = shape.converters  # type: ignore[attr-defined]
        compiler.composite = shape.composite  # type: ignore[attr-defined]
        # A shallow copy by hand: ``copy.copy`` of a queryset evaluates it (``__getstate__``).
        queryset = object.__new__(type(shape.queryset))
        queryset.__dict__.update(shape.queryset.__dict__)
        # Not the ``query`` setter: it would make a ``values_list`` query return dicts.
        queryset._query = _Ready(shape.queryset.query, compiler)  # type: ignore[attr-defined]
        return list(queryset._iterable_class(queryset))  # type: ignore[arg-type, call-overload]

    def get(self, *, using: str = "default", **values: Any) -> T:
        """The query's one row, as ``QuerySet.get``: raises the model's ``DoesNotExist`` when
        there is none and ``MultipleObjectsReturned`` when there are several (the query is meant
        to select by a unique key)."""
        rows = self.run(using=using, **values)
        if len(rows) == 1:
            return rows[0]
        model = self._shape(using).queryset.model
        if not rows:
            raise model.DoesNotExist(f"{model._meta.object_name} matching query does not exist.")
        raise model.MultipleObjectsReturned(f"{len(rows)} {model._meta.object_name} rows match.")

    def sql(self, *, using: str = "default", **values: Any) -> tuple[str, list[Any]]:
        """The query's SQL and parameters for ``values``, to embed in a larger statement."""
        shape = self._shape(using)
        return shape.sql, self._params(shape, connections[using], values)

    def _params(
        self, shape: _Shape, connection: BaseDatabaseWrapper, values: dict[str, Any]
    ) -> list[Any]:
        params = list(shape.params)
        for index, name in shape.positions:
            params[index] = _adapted(connection, values[name])
        return params

    def _shape(self, using: str) -> _Shape:
        shape = self._shapes.get(using)
        if shape is None:
            with self._lock:
                shape = self._shapes.get(using) or self._compile(using)
                self._shapes[using] = shape
        return shape

    def _compile(self, using: str) -> _Shape:
        markers = {name: _marker(kind) for name, kind in self._kinds.items()}
        queryset = self._build(**markers).using(using)
        compiler = queryset.query.get_compiler(using=using)
        query_sql, params = compiler.as_sql()
        connection = connections[using]
        wanted = {_adapted(connection, marker): name for name, marker in markers.items()}
        positions = tuple(
            (index, wanted[param])
            for index, param in enumerate(params)
            if _hashable_in(param, wanted)
        )
        missing = set(markers) - {name for _, name in positions}
        if missing:
            raise LookupError(f"the compiled query does not use {sorted(missing)} as values")
        return _Shape(queryset, compiler, query_sql, tuple(params), positions)


class _Ready:
    """A query whose compiler is already set up: the iterables ask it for the compiler and read
    its other attributes (``values_list`` names) from the query it was compiled from."""

    def __init__(self, query: sql.Query, compiler: SQLCompiler) -> None:
        self._query = query
        self._compiler = compiler

    def get_compiler(self, *args: Any, **kwargs: Any) -> SQLCompiler:
        return self._compiler

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)


@functools.cache
def _frozen(compiler_class: type[SQLCompiler]) -> type[SQLCompiler]:
    """``compiler_class`` whose ``as_sql`` returns the SQL and parameters set on it, and whose
    converters (once per connection) and composite-key check are worked out once: the shape's
    columns never change."""

    def as_sql(self: Any, *args: Any, **kwargs: Any) -> tuple[str, list[Any]]:
        return self.compiled  # type: ignore[no-any-return]

    def get_converters(self: Any, expressions: Any) -> dict[int, Any]:
        found = self.converters.get(self.connection)
        if found is None:
            found = self.converters[self.connection] = compiler_class.get_converters(
                self, expressions
            )
        return found  # type: ignore[no-any-return]

    def has_composite_fields(self: Any, expressions: Any) -> bool:
        if not self.composite:
            self.composite.append(compiler_class.has_composite_fields(self, expressions))
        return self.composite[0]  # type: ignore[no-any-return]

    methods = {
        "as_sql": as_sql,
        "get_converters": get_converters,
        "has_composite_fields": has_composite_fields,
    }
    return type(f"Compiled{compiler_class.__name__}", (compiler_class,), methods)


def _marker(kind: type) -> Any:
    """A value of ``kind`` no query uses on its own, different for each parameter."""
    serial = next(_serial)
    if kind is int:
        return -(1 << 62) - serial
    if kind is str:
        return f"\x1fcompiled-parameter-{serial}"
    if kind is datetime:
        return datetime(1901, 2, 3, tzinfo=UTC) + timedelta(microseconds=serial)
    raise TypeError(f"no marker for parameters of type {kind.__name__}")


def _adapted(connection: BaseDatabaseWrapper, value: Any) -> Any:
    """``value`` as the compiler passes it to the driver (datetimes adapted by the backend)."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def _hashable_in(param: Any, wanted: dict[Any, str]) -> bool:
    try:
        return param in wanted
    except TypeError:  # an unhashable parameter (a JSON value) is never a marker
        return False


def update_sql(row: models.Model, names: Sequence[str], using: str) -> tuple[str, list[Any]]:
    """The ``UPDATE`` ``save(update_fields=names)`` runs for ``row`` (``pre_save`` applied, so
    ``auto_now`` fields take the time now), and its parameters.

    Compiled by Django the first time for each model, fields, database and set of NULL fields
    (Django writes ``= NULL`` for those); after that the statement is reused with the values
    Django's compiler passes: each field's ``get_db_prep_save``, then the primary key."""
    model, connection = type(row), connections[using]
    fields = [model._meta.get_field(name) for name in names]
    prepared = [
        field.get_db_prep_save(field.pre_save(row, False), connection=connection)  # type: ignore[union-attr]
        for field in fields
    ]
    key = (model, tuple(names), tuple(value is None for value in prepared), using)
    statement = _UPDATES.get(key)
    if statement is None:
        query = sql.UpdateQuery(model)
        query.add_q(Q(pk=row.pk))
        query.add_update_values({field.name: getattr(row, field.attname) for field in fields})  # type: ignore[union-attr]
        statement, params = query.get_compiler(using).as_sql()
        _UPDATES[key] = statement
        return statement, list(params)
    pk = model._meta.pk.get_db_prep_value(row.pk, connection)  # type: ignore[union-attr]
    return statement, [value for value in prepared if value is not None] + [pk]


#: ``UPDATE`` statements by model, field names, which of them are NULL, and database.
_UPDATES: dict[tuple[type[models.Model], tuple[str, ...], tuple[bool, ...], str], str] = {}


def insert_sql(
    rows: Sequence[models.Model],
    fields: Sequence[Field[Any, Any]],
    using: str,
    *,
    on_conflict: OnConflict | None = None,
) -> tuple[str, list[Any]]:
    """The ``INSERT`` ``bulk_create(rows)`` runs for ``fields`` of ``rows`` (new rows of one
    model; ``pre_save`` applied, so ``auto_now_add`` fields take the time now), and its
    parameters.

    Compiled by Django the first time for each model, fields, conflict handling, number of rows
    and database; after that the statement is reused with the values Django's compiler passes:
    each field's ``get_db_prep_save``, row after row, or one list per field where Django inserts
    several rows through ``UNNEST`` (PostgreSQL). A value that is an expression, and a field that
    makes its own placeholder (``get_placeholder``), are left to Django every time."""
    model, connection = type(rows[0]), connections[using]
    key = (model, tuple(field.attname for field in fields), on_conflict, len(rows), using)
    form = _INSERTS.get(key, _UNSEEN)
    prepared = _prepared(rows, fields, connection) if form is not None else None
    if isinstance(form, _InsertForm) and prepared is not None:
        if form.by_field:
            return form.sql, [list(column) for column in zip(*prepared, strict=True)]
        return form.sql, [value for values in prepared for value in values]
    query = sql.InsertQuery(model, on_conflict=on_conflict)
    query.insert_values(fields, list(rows))
    [(statement, params)] = query.get_compiler(using).as_sql()
    if form is _UNSEEN and prepared is not None:  # compiled from plain values: fits every run
        own = any(hasattr(field, "get_placeholder") for field in fields)
        _INSERTS[key] = None if own else _insert_form(statement, params, len(rows), len(fields))
    return statement, list(params)


def _prepared(
    rows: Sequence[models.Model], fields: Sequence[Field[Any, Any]], connection: BaseDatabaseWrapper
) -> list[list[Any]] | None:
    """Each row's values as Django's insert compiler passes them, or ``None`` when one of them
    is an expression (Django resolves it in the query)."""
    prepared = []
    for row in rows:
        values = [field.pre_save(row, True) for field in fields]
        if any(hasattr(value, "resolve_expression") for value in values):
            return None
        prepared.append(
            [
                field.get_db_prep_save(value, connection=connection)
                for field, value in zip(fields, values, strict=True)
            ]
        )
    return prepared


@dataclass(frozen=True)
class _InsertForm:
    sql: str
    #: One parameter per field, a list of each row's value (``UNNEST``), rather than one per
    #: value, row after row.
    by_field: bool


def _insert_form(
    statement: str, params: Sequence[Any], rows: int, fields: int
) -> _InsertForm | None:
    """How Django laid out ``params`` for ``rows`` rows of ``fields`` fields, or ``None`` when
    it did neither as :func:`insert_sql` would (nothing is then reused)."""
    if len(params) == rows * fields and all(not isinstance(value, list) for value in params):
        return _InsertForm(statement, by_field=False)
    if (
        rows > 1
        and len(params) == fields
        and all(isinstance(column, list) and len(column) == rows for column in params)
    ):
        return _InsertForm(statement, by_field=True)
    return None


#: What ``_INSERTS`` gives for a shape not compiled yet.
_UNSEEN = object()
#: ``INSERT`` statements by model, field names, conflict handling, number of rows and database
#: (``None``: Django compiles it every time).
_INSERTS: dict[
    tuple[type[models.Model], tuple[str, ...], OnConflict | None, int, str], _InsertForm | None
] = {}
