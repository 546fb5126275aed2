"""The API's content negotiation (``DEFAULT_CONTENT_NEGOTIATION_CLASS``)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.utils.mediatypes import _MediaType

#: A qvalue of zero (RFC 9110 §12.4.2: ``0`` with up to three decimals, all zero).
_ZERO = re.compile(r"0(?:\.0{0,3})?")


class RefusalsHonoured(DefaultContentNegotiation):
    """DRF's negotiation, which reads no ``q`` parameter, with the one it matters for: a media
    range of ``q=0`` refuses the types it matches (RFC 9110 §12.5.1), so
    ``Accept: application/json;q=0`` is 406 ``not_acceptable`` rather than JSON. A renderer
    is refused when the most specific range that matches it says ``q=0`` (``*/*;q=0,
    application/json`` still takes JSON); DRF chooses among the others by the ranges that do
    not say it, and answers 406 when none is left."""

    def select_renderer(
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        ranges = [_MediaType(token) for token in super().get_accept_list(request)]
        offered = [r for r in renderers if not _refused(_MediaType(r.media_type), ranges)]
        return super().select_renderer(request, offered, format_suffix)

    def select_parser(self, request: Request, parsers: Sequence[BaseParser]) -> BaseParser | None:
        """DRF's choice, for a body declared as one media type it reads as declared: a media
        range (``*/*``, ``application/*``), which DRF matches to every parser, and JSON in a
        charset other than UTF-8 (:func:`charset_refused`), which would be decoded as declared
        (UTF-8 text read as ``latin-1`` turns "café" into "cafÃ©"), choose none: 415
        ``unsupported_media_type``, nothing read."""
        sent = _MediaType(request.content_type)
        range_sent = "*" in (sent.main_type, sent.sub_type)
        if range_sent or charset_refused(request.content_type) is not None:
            return None
        return super().select_parser(request, parsers)

    def get_accept_list(self, request: Request) -> list[str]:
        """The ``Accept`` header's media ranges but those of ``q=0``, which choose nothing."""
        tokens = super().get_accept_list(request)
        return [token for token in tokens if not _refusing(_MediaType(token))]


def _refusing(media_range: _MediaType) -> bool:
    return bool(_ZERO.fullmatch(media_range.params.get("q", "1").strip()))


def _refused(media_type: _MediaType, ranges: Sequence[_MediaType]) -> bool:
    """Whether the most specific of ``ranges`` matching ``media_type`` says ``q=0`` (of ranges
    equally specific, one that does not say it wins)."""
    matching = [r for r in ranges if r.match(media_type)]
    if not matching:
        return False
    most = max(r.precedence for r in matching)
    return all(_refusing(r) for r in matching if r.precedence == most)


def charset_refused(content_type: str) -> str | None:
    """The ``charset`` parameter of ``content_type`` when one is given that is not UTF-8 (by
    any name Python knows it by: ``utf-8``, ``UTF8``), as sent; ``None`` otherwise. JSON
    exchanged between systems is UTF-8 (RFC 8259 §8.1)."""
    charset: str = _MediaType(content_type).params.get("charset", "")
    if not charset:  # ``charset=`` names none: read as UTF-8, as without it
        return None
    try:
        return None if codecs.lookup(charset).name == "utf-8" else charset
    except LookupError:  # no such encoding
        return charset
