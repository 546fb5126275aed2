"""The one base of every refusal Callgate raises on purpose.

Each surface maps :class:`CallgateError` once: the REST API to its error shape with a status per
code (``toolcalls.api.errors``), the console to a message on the page, management commands to a
``CommandError``. Programming errors (a bug, an unreachable branch) are not ``CallgateError``s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class CallgateError(Exception):
    """A request Callgate refuses, with a reason a program can act on.

    ``code``: a stable, machine-readable snake_case string (``docs/api.md`` lists the ones the API
    returns); ``message``: one sentence for people; ``details``: a JSON-serialisable mapping,
    empty when there is nothing more to say.
    """

    default_code = "refused"

    def __init__(
        self,
        code: str | None = None,
        message: str = "",
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.code = code or self.default_code
        self.message = message or self.code
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(self.message)
