"""A refused request body is logged as one warning line (:mod:`config.log_filters`): a path
with a line break in it stays one line, and no line is written where warnings are not."""

from __future__ import annotations

import logging
import sys

from django.core.exceptions import TooManyFieldsSent
from django.test import RequestFactory

from config.log_filters import OversizedRequestFilter

NAME = "django.security.TooManyFieldsSent"


def _refusal(path: str) -> logging.LogRecord:
    try:
        raise TooManyFieldsSent("Too many fields.")
    except TooManyFieldsSent:
        record = logging.LogRecord(
            NAME, logging.ERROR, __file__, 1, "Too many fields.", (), sys.exc_info()
        )
    request = RequestFactory().post("/")
    request.path = path  # as a server may pass it, line break and all
    record.request = request  # as Django's ``extra`` gives it
    return record


def test_a_path_with_a_line_break_stays_one_line() -> None:
    record = _refusal("/console/a\nb/")
    assert OversizedRequestFilter().filter(record)
    assert record.getMessage() == "Bad request (Too many fields.): /console/a\\nb/"
    assert (record.levelname, record.exc_info) == ("WARNING", None)


def test_no_line_where_warnings_are_not_logged() -> None:
    logger = logging.getLogger(NAME)
    level = logger.level
    logger.setLevel(logging.ERROR)  # LOG_LEVEL=ERROR
    try:
        assert not OversizedRequestFilter().filter(_refusal("/console/approvals/bulk/"))
    finally:
        logger.setLevel(level)
