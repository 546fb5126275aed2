"""Keyset pages for long lists (the approval queue, operations, decisions): each page continues
after the last row of the one before, on an index, so a page costs the same at row 100,000 as
at row 1. Offsets are never used: ``OFFSET n`` reads and drops ``n`` rows. The way back is the
same index read backwards from a page's first row: the page before it is found by the row
before its rows, so every link is an ``after`` cursor."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Model, Q, QuerySet

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Key:
    """One sort key: a field or annotation holding no NULLs, and its direction."""

    field: str
    descending: bool = False

    def after(self, value: Any) -> Q:
        return Q(**{f"{self.field}__{'lt' if self.descending else 'gt'}": value})

    def from_(self, value: Any) -> Q:
        return Q(**{f"{self.field}__{'lte' if self.descending else 'gte'}": value})


@dataclass(frozen=True)
class Page(Generic[M]):
    """One page of rows. ``next_cursor`` continues after its last row (``None``: the end).
    ``first`` is false when rows come before this page; the page before it then starts after
    ``previous_cursor``, or is the first page when that is ``None``. ``refused``: the cursor
    asked for was damaged (edited, cut, from another order), so this is the first page."""

    rows: list[M]
    next_cursor: str | None
    first: bool = True
    previous_cursor: str | None = None
    refused: bool = False


def keyset_page(
    rows: QuerySet[M], *, keys: Sequence[Key], cursor: str | None, size: int
) -> Page[M]:
    """``size`` rows of ``rows`` ordered by ``keys`` (the last one unique, such as ``pk``),
    starting after ``cursor`` (from an earlier page; a damaged one gives the first page,
    ``refused``). A page after a cursor reads up to ``size + 1`` rows' keys before its first
    row too, on the same index backwards, to link the page before it."""
    position = _decode(cursor, len(keys)) if cursor else None
    following = rows
    if position is not None:
        try:
            following = _after(rows, keys, position)
        except (ValueError, TypeError, ValidationError):
            # Values of the wrong type for their keys are a damaged cursor too.
            position = None
    found = list(following.order_by(*ordering(keys))[: size + 1])
    more = len(found) > size
    following_cursor = cursor_after(found[size - 1], keys) if more else None
    if position is None:
        return Page(found[:size], following_cursor, refused=bool(cursor))
    return _with_previous(rows, keys, Page(found[:size], following_cursor), size)


def _with_previous(rows: QuerySet[M], keys: Sequence[Key], page: Page[M], size: int) -> Page[M]:
    """``page`` (after a cursor) with where the page before it starts: after the row ``size + 1``
    rows before its first row, or from the first row with fewer before it. An empty ``page``
    (the rows after its cursor are gone) counts back from the end. No row before it makes it the
    first page (``first``)."""
    backwards = [Key(key.field, descending=not key.descending) for key in keys]
    earlier = _after(rows, backwards, _values(page.rows[0], keys)) if page.rows else rows
    fields = [key.field for key in keys]
    found = list(earlier.order_by(*ordering(backwards)).values_list(*fields)[: size + 1])
    if not found:
        return page
    previous = _cursor(list(found[size])) if len(found) > size else None
    return Page(page.rows, page.next_cursor, first=False, previous_cursor=previous)


def ordering(keys: Sequence[Key]) -> list[str]:
    """``keys`` as ``order_by`` arguments."""
    return [f"-{key.field}" if key.descending else key.field for key in keys]


def _after(rows: QuerySet[M], keys: Sequence[Key], position: list[Any]) -> QuerySet[M]:
    # The first key's ``>=`` bounds the index scan; the OR alone would be a filter over every
    # earlier row.
    after = Q()
    for index, key in enumerate(keys):
        equal = {k.field: value for k, value in zip(keys[:index], position, strict=False)}
        after |= Q(**equal) & key.after(position[index])
    return rows.filter(keys[0].from_(position[0])).filter(after)


def cursor_after(row: Model, keys: Sequence[Key]) -> str:
    """The cursor of the page that starts after ``row`` (read with the same ``keys``)."""
    return _cursor(_values(row, keys))


def _values(row: Model, keys: Sequence[Key]) -> list[Any]:
    return [getattr(row, key.field) for key in keys]


def _cursor(values: list[Any]) -> str:
    """The cursor of the position ``values`` (one per key): URL-safe base64 of a JSON list of
    ``["t", ISO 8601 time]`` or ``["v", JSON value]`` pairs, read back by :func:`_decode`."""
    tagged = [["t", v.isoformat()] if isinstance(v, datetime) else ["v", v] for v in values]
    return base64.urlsafe_b64encode(json.dumps(tagged).encode()).decode()


def _decode(cursor: str, length: int) -> list[Any] | None:
    """The ``length`` values of ``cursor``, or ``None`` for a damaged one: anything but what
    :func:`cursor_after` writes and the database can compare (a time without its offset or
    beyond the calendar once in UTC, a whole number beyond 64 bits, text with NUL or an
    unpaired surrogate)."""
    try:
        tagged = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        values = [_moment(v) if tag == "t" else v for tag, v in tagged]
    except (ValueError, TypeError, OverflowError):
        return None
    valid = all(_comparable(value) for value in values)
    return values if valid and len(values) == length else None


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("a cursor's time has its offset")
    moment.astimezone(UTC)  # OverflowError past the calendar's ends
    return moment


def _comparable(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    if isinstance(value, str):
        return "\x00" not in value and value.encode(errors="replace").decode() == value
    return isinstance(value, datetime)
