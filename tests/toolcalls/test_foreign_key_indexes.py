"""Every foreign key of ours is served by an index that starts with its column: its own, or a
composite one (the six keys whose own index went, ``db_index=False``, rely on that). Deleting a
referenced row and following a key both need it; a composite index dropped later must not leave
a key scanning its table."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection, models

pytestmark = pytest.mark.django_db

_OURS = ("toolcalls", "approvals", "remote", "webhooks", "console", "api", "demo")


def _leading_columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {c["columns"][0] for c in constraints.values() if c["index"] or c["unique"]}


def test_every_foreign_key_leads_an_index() -> None:
    unserved = []
    for model in apps.get_models():
        if model._meta.app_label not in _OURS or not model._meta.managed:
            continue
        leading = _leading_columns(model._meta.db_table)
        for field in model._meta.local_fields:
            if isinstance(field, models.ForeignKey) and field.column not in leading:
                unserved.append(f"{model._meta.db_table}.{field.column}")
    assert unserved == []
