"""A page cursor edited by hand in any paged console list (the queue in each order, the decisions
history, the operations list, the escalations, search) shows the first page, saying the link is
no longer valid, as a filter not understood is named and ignored: a time at the calendar's edge
once in UTC, a time without its offset, a whole number beyond 64 bits, text the database cannot
hold, a cursor of another length. Never a 500."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.engine import bundled_replies, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

LISTS = [
    ("approvals:queue", {}),
    ("approvals:queue", {"sort": "age"}),
    ("approvals:queue", {"sort": "risk"}),
    ("approvals:queue", {"sort": "amount"}),
    ("approvals:decisions", {}),
    ("operations:list", {}),
    ("operations:escalations", {}),
    ("search", {"q": "op_"}),
]


def _cursor(*values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode()


EARLIEST = ["t", "0001-01-01T00:00:00+14:00"]
LATEST = ["t", "9999-12-31T23:59:59-14:00"]
DAMAGED = [
    _cursor(EARLIEST, ["v", 1]),
    _cursor(LATEST, ["v", 1]),
    _cursor(["v", 1], EARLIEST, ["v", 1]),
    _cursor(["v", 3], LATEST, ["v", 1]),
    _cursor(["t", "2026-01-01T00:00:00"], ["v", 1]),
    _cursor(["t", "2026-01-01T00:00:00+00:00"], ["v", 2**70]),
    _cursor(["v", "a\x00b"], ["v", 1]),
    base64.urlsafe_b64encode(b'[["v", "\\ud800"], ["v", 1]]').decode(),
]


REFUSED = "That page link is no longer valid; showing the first page."
#: The lists that page (the escalations list shows every escalated operation at once).
PAGED = [(name, params) for name, params in LISTS if name != "operations:escalations"]


def test_a_damaged_cursor_in_any_paged_list_shows_the_first_page(demo: Any) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    client = Client(raise_request_exception=False)
    assert client.login(username="operator", password="operator-demo-pass")
    for name, params in LISTS:
        for cursor in DAMAGED:
            response = client.get(reverse(name), {**params, "after": cursor})
            assert response.status_code == 200, (name, params, cursor)
            page = response.content.decode()
            if (name, params) in PAGED:
                assert REFUSED in page, (name, params, cursor)
                if name == "approvals:queue":
                    assert operation.approvals.get().public_id in page


@pytest.mark.parametrize(("name", "params"), PAGED)
def test_a_cursor_of_another_length_or_cut_short_says_so(
    demo: Any, name: str, params: dict[str, str]
) -> None:
    start(demo, bundled_replies("refund_approve"))
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    # No list orders by one key or by four.
    one_key, four_keys = _cursor(["v", 1]), _cursor(["v", 2], EARLIEST, ["v", 1], ["v", 0])
    for cursor in (one_key, four_keys, DAMAGED[0][:-6], "not a cursor"):
        response = client.get(reverse(name), {**params, "after": cursor})
        assert response.status_code == 200 and REFUSED in response.content.decode()
    clean = client.get(reverse(name), params).content.decode()
    assert REFUSED not in clean and 'data-testid="first-page"' not in clean
