"""What the migrations that install PostgreSQL's triggers share (not a migration: the loader
passes over modules whose names start with ``_``). Keep it as it is: migrations run it."""

from collections.abc import Callable
from typing import Any


def on_postgresql(sql: str) -> Callable[[Any, Any], None]:
    """A ``RunPython`` function that runs ``sql`` on PostgreSQL and does nothing elsewhere."""

    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            # params=None: the SQL is sent as is (its % are PL/pgSQL placeholders).
            schema_editor.execute(sql, params=None)

    return run
