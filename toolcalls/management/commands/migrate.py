"""``manage.py migrate``, Django's, creating the embedded SQLite database's directory first."""

from pathlib import Path
from typing import Any

from django.core.management.commands import migrate
from django.db import connections


class Command(migrate.Command):
    def execute(self, *args: Any, **options: Any) -> Any:
        # SQLite creates the file but not its directory, and `make clean` removes var/: the
        # README's `make clean && manage.py migrate` failed with "unable to open database
        # file". Before the system checks, which may read the database too.
        settings_dict = connections[options["database"]].settings_dict
        name = str(settings_dict["NAME"])
        if settings_dict["ENGINE"] == "django.db.backends.sqlite3" and _is_file(name):
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        return super().execute(*args, **options)


def _is_file(name: str) -> bool:
    """Whether SQLite's ``name`` is a file path, not an in-memory database or a URI."""
    return bool(name) and name != ":memory:" and not name.startswith("file:")
