"""The API's request body parser (``DEFAULT_PARSER_CLASSES``)."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding

from toolcalls.binding import InexactJson, exact_json_loads


class ExactJSONParser(JSONParser):
    """A JSON body read as I-JSON (:func:`toolcalls.binding.exact_json_loads`): a member name
    given twice in one object, which DRF's parser reads as its last value (a decision of
    ``{"decision": "deny", "reason": "no", "decision": "approve"}`` approved), and a number
    beyond ±(2**53-1), which no canonical form holds, are refused as a body that is not JSON
    is: ``ParseError`` (400 ``malformed_request``), the message naming the place."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            return exact_json_loads(codecs.getreader(encoding)(stream).read())
        except InexactJson as exc:
            raise ParseError(f"The body cannot be read exactly as sent: {exc}.") from None
        except ValueError as exc:  # as DRF's JSONParser says it
            raise ParseError(f"JSON parse error - {exc}") from None
