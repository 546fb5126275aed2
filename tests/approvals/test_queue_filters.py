"""The queue's "expiring within 15 minutes" filter takes what the console sends (the ticked box's
"on", the "1" of its own links, nothing) and calls anything else a filter not understood."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from approvals.selectors import QueueFilters
from tests.factories import small_and_large

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _queue(query: dict[str, str]) -> str:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    response = client.get(reverse("approvals:queue"), query)
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    "query", [{"expiring": "on"}, QueueFilters(expiring=True).query()], ids=["box", "link"]
)
def test_expiring_keeps_what_expires_soon(demo, query: dict[str, str]) -> None:
    soon, later = small_and_large(demo.tenant)
    page = _queue(query)
    assert soon.public_id in page and later.public_id not in page
    assert "not understood" not in page and " checked" in page


@pytest.mark.parametrize("value", ["", "maybe", "true", "yes"])
def test_expiring_filters_nothing_unless_sent_as_the_console_sends_it(demo, value: str) -> None:
    soon, later = small_and_large(demo.tenant)
    page = _queue({"expiring": value})
    assert soon.public_id in page and later.public_id in page
    understood = value == ""
    assert (
        "Some filters were not understood and are ignored: Expiring within 15 minutes." in page
    ) != understood
    assert not re.search(r'<input[^>]*name="expiring"[^>]*checked', page)  # nothing filtered
