"""schemathesis hooks for the API run (``SCHEMATHESIS_HOOKS``; the fuzzing and stateful phases
run them, the examples and boundary phases do not).

- A list's ``cursor`` is opaque and signed: only a value a page returned is accepted, which no
  schema can describe, so generated requests leave it out (tests/api/test_api_conventions.py
  covers altered and foreign cursors).
- A well-formed ``Idempotency-Key`` is made unique per request, as a client makes it: a key
  generated twice for two different bodies is a 409, and the second request would test nothing.
"""

import re
import uuid
from typing import Any

import django
import schemathesis

django.setup()  # the header's rules are read from the API's module, which loads models

from toolcalls.api.idempotency import HEADER, MAX_KEY_LENGTH  # noqa: E402

_WELL_FORMED = re.compile(r"\S(.*\S)?", re.DOTALL)


@schemathesis.hook
def map_query(ctx: Any, query: dict[str, Any] | None) -> dict[str, Any] | None:
    if query:
        query.pop("cursor", None)
    return query


@schemathesis.hook
def map_headers(ctx: Any, headers: dict[str, Any] | None) -> dict[str, Any] | None:
    key = (headers or {}).get(HEADER)
    if (
        headers
        and isinstance(key, str)
        and len(key) <= MAX_KEY_LENGTH
        and _WELL_FORMED.fullmatch(key)
    ):
        headers[HEADER] = uuid.uuid4().hex
    return headers
