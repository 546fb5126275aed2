"""The operations list's date filters at the calendar's edges: a day whose start or end is no
instant a datetime holds (in the viewer's time zone) is a filter not understood, never a 500;
every other day bounds ``created_at`` as a UTC instant, which any database backend takes. A
first day after the last is ignored, and the page says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.factories import OperationFactory
from toolcalls.console.forms import OperationFilterForm

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

NOT_UNDERSTOOD = "Some filters were not understood and are ignored: "


@pytest.mark.parametrize(
    ("zone", "query"),
    [
        ("UTC", {"created_to": "9999-12-31"}),
        ("Pacific/Kiritimati", {"created_to": "9999-12-31"}),
        ("Pacific/Pago_Pago", {"created_to": "9999-12-31"}),
        ("Pacific/Pago_Pago", {"created_from": "0001-01-01"}),  # local mean time, UTC+12:37
    ],
)
def test_a_day_at_the_calendars_edge_is_not_understood(demo, zone: str, query: dict) -> None:
    operation = OperationFactory.create(tenant=demo.tenant)
    client = Client(raise_request_exception=False)  # a crash shows as the 500 a browser gets
    assert client.login(username="support", password="support-demo-pass")
    client.post(reverse("console-settings"), {"timezone": zone})
    response = client.get(reverse("operations:list"), query)
    page = response.content.decode()
    label = {"created_from": "Created from", "created_to": "Created to"}[next(iter(query))]
    assert response.status_code == 200 and f"{NOT_UNDERSTOOD}{label}." in page
    assert operation.public_id in page  # an invalid form filters nothing


@pytest.mark.parametrize(
    ("zone", "query", "bounds"),
    [
        ("UTC", {"created_from": "0001-01-01"}, (datetime.min.replace(tzinfo=UTC), None)),
        ("UTC", {"created_to": "9999-12-30"}, (None, datetime(9999, 12, 31, tzinfo=UTC))),
        (
            "Pacific/Kiritimati",  # local mean time, UTC-10:29:20
            {"created_from": "0001-01-01", "created_to": "0001-01-01"},
            (datetime(1, 1, 1, 10, 29, 20, tzinfo=UTC), datetime(1, 1, 2, 10, 29, 20, tzinfo=UTC)),
        ),
        (
            "Pacific/Pago_Pago",
            {"created_from": "9999-12-31"},
            (datetime(9999, 12, 31, 11, tzinfo=UTC), None),
        ),
        (
            "Pacific/Pago_Pago",
            {"created_to": "9999-12-30"},
            (None, datetime(9999, 12, 31, 11, tzinfo=UTC)),
        ),
    ],
)
def test_other_days_bound_created_at_in_utc(zone: str, query: dict, bounds: tuple) -> None:
    with timezone.override(zone):
        filters = OperationFilterForm(query, tools=[]).filters()
    assert (filters.created_from, filters.created_to) == bounds
    assert all(b.tzinfo is UTC for b in (filters.created_from, filters.created_to) if b)


def test_a_first_day_after_the_last_is_ignored_and_the_page_says_why(demo) -> None:
    operation = OperationFactory.create(tenant=demo.tenant)
    today = timezone.localdate()
    client = Client()
    assert client.login(username="support", password="support-demo-pass")
    query = {"created_from": str(today + timedelta(days=1)), "created_to": str(today)}
    page = client.get(reverse("operations:list"), query).content.decode()
    assert "Created from is ignored: it is after the last day." in page
    assert NOT_UNDERSTOOD not in page
    assert operation.public_id in page  # the last day still applies, and today is in it
    assert f'name="created_to" value="{today}"' in page
    assert 'name="created_from" value=' not in page  # shown blank: the filter is not applied
