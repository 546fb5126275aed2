"""``retry_after_seconds``: the delay a provider asks for, read as RFC 9110 §10.2.3 writes it
(delta-seconds or an HTTP-date) and bounded, whatever the header holds."""

from __future__ import annotations

from typing import Any

import pytest

from providers.errors import MAX_RETRY_AFTER_S, retry_after_seconds

DATE = "Sun, 06 Nov 1994 08:49:37 GMT"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "20"}, 20),
        ({"retry-after": " 20 "}, 20),
        ({"retry-after": "0"}, 0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3),
        # An HTTP-date in each of its three forms, counted from the reply's own Date.
        ({"date": DATE, "retry-after": "Sun, 06 Nov 1994 08:50:07 GMT"}, 30),
        ({"date": DATE, "retry-after": "Sunday, 06-Nov-94 08:50:07 GMT"}, 30),
        ({"date": DATE, "retry-after": "Sun Nov  6 08:50:07 1994"}, 30),
        ({"date": DATE, "retry-after": "Sun, 06 Nov 1994 08:00:00 GMT"}, 0),  # passed: now
        # Longer than a day, in any form, reads as a day.
        ({"retry-after": "9" * 300}, MAX_RETRY_AFTER_S),
        ({"retry-after": "9" * 400}, MAX_RETRY_AFTER_S),
        ({"retry-after-ms": "9" * 300}, MAX_RETRY_AFTER_S),
        ({"date": DATE, "retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, MAX_RETRY_AFTER_S),
    ],
)
def test_a_delay_is_read_and_bounded(headers: dict[str, str], seconds: float) -> None:
    assert retry_after_seconds(headers) == seconds


@pytest.mark.parametrize(
    "value",
    ["", "soon", "nan", "inf", "-5", "+5", "1e3", "0x10", "1,5", "\u0661\u0662", "5 s", "Sun" * 99],
)
def test_anything_else_is_no_delay(value: str) -> None:
    assert retry_after_seconds({"retry-after": value, "date": DATE}) is None


def test_a_date_without_the_replys_date_is_no_delay() -> None:
    assert retry_after_seconds({"retry-after": "Sun, 06 Nov 1994 08:50:07 GMT"}) is None
    assert (
        retry_after_seconds({"retry-after": "Sun, 06 Nov 1994 08:50:07 GMT", "date": "?"}) is None
    )


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [("30s", 30), ("1.5s", 1.5), ("9" * 400 + "s", MAX_RETRY_AFTER_S), ("-1s", None), ("1m", None)],
)
def test_googles_retry_info_is_bounded_too(delay: str, seconds: float | None) -> None:
    detail = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
    body: Any = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [detail]}}
    assert retry_after_seconds({}, body) == seconds
