"""Logging filters the settings' ``LOGGING`` names (:func:`config.settings.base.logging_config`)."""

from __future__ import annotations

import logging

#: The refusals of a request body Django cannot read (``SuspiciousOperation`` subclasses), each
#: logged by ``django.security.<name>``: a form too large, or with too many fields or files.
OVERSIZED_REQUESTS = ("RequestDataTooBig", "TooManyFieldsSent", "TooManyFilesSent")


class OversizedRequestFilter(logging.Filter):
    """A refused request body as one WARNING line without a traceback, worded as Django's other
    refusals of a request (``Bad request (Request body exceeded …): /console/approvals/bulk/``,
    the path escaped as Django escapes it there, so a line break in it stays one line). Django
    logs it at ERROR with the exception: an error alert and a page of traceback for what a
    client sent, which the console answers with its 400 page (nothing of Callgate's went
    wrong). Dropped, as any warning, where the logger does not take warnings (``LOG_LEVEL``
    ERROR or above)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        request = getattr(record, "request", None)
        if request is not None:
            path = request.path.encode("unicode_escape").decode("ascii")
            record.msg, record.args = "Bad request (%s): %s", (record.getMessage(), path)
        return logging.getLogger(record.name).isEnabledFor(logging.WARNING)
