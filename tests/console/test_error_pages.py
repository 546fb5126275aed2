"""The console's 403, 404 and 500 pages are its own (DEBUG off, as in production): they say what
happened and where to go next, in the console's layout."""

from __future__ import annotations

import logging

import pytest
from django.test import Client, RequestFactory
from django.views.defaults import server_error

from tests import replies as r
from tests.engine import start

pytestmark = pytest.mark.django_db


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def test_an_unknown_operation_is_the_consoles_404_page(demo, settings) -> None:
    settings.DEBUG = False
    response = _client("support").get("/console/operations/op_000000000000000000000000/")
    text = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in text and 'data-testid="search"' in text


def test_an_action_the_user_may_not_take_is_the_consoles_403_page(demo, settings) -> None:
    settings.DEBUG = False
    lookups = [r.response(r.call("g1", "get_order", {"order_id": "ORD-1001"})), r.final()]
    operation = start(demo, lookups, budgets={"max_turns": 1})
    response = _client("support").post(f"/console/operations/{operation.public_id}/stop/")
    text = response.content.decode()
    assert response.status_code == 403
    assert "<h1>Not allowed</h1>" in text and "You may not act on escalated operations." in text


def test_the_500_page_needs_nothing_but_static_files(settings) -> None:
    settings.DEBUG = False
    response = server_error(RequestFactory().get("/console/approvals/"))
    text = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in text and "callgate.css" in text


def test_a_request_that_cannot_be_read_is_the_consoles_400_page(demo, settings) -> None:
    """Too many fields: Django refuses the request before any view; the page says nothing was
    recorded, in the console's layout."""
    settings.DEBUG = False
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    fields = {f"field{number}": "x" for number in range(10)}
    response = _client("operator").post("/console/approvals/bulk/", fields)
    text = response.content.decode()
    assert response.status_code == 400
    assert "<h1>Request not understood</h1>" in text and "callgate.css" in text
    assert "nothing in it was recorded" in text


def test_a_form_without_its_security_token_is_the_consoles_page(demo, settings) -> None:
    settings.DEBUG = False
    client = Client(enforce_csrf_checks=True)
    assert client.login(username="operator", password="operator-demo-pass")
    response = client.post("/console/approvals/bulk/", {"action": "approve"})
    text = response.content.decode()
    assert response.status_code == 403
    assert "<h1>Form not accepted</h1>" in text and "Nothing was recorded" in text
    assert "reload the page" in text and "callgate.css" in text


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        ("DATA_UPLOAD_MAX_NUMBER_FIELDS", "TooManyFieldsSent"),
        ("DATA_UPLOAD_MAX_MEMORY_SIZE", "RequestDataTooBig"),
    ],
)
def test_a_form_too_large_is_one_warning_line(demo, settings, caplog, setting, refusal) -> None:
    """The client's doing, answered with the 400 page: a warning saying what was refused, not
    an error with Django's traceback."""
    settings.DEBUG = False
    setattr(settings, setting, 5)
    fields = {f"field{number}": "x" for number in range(10)}
    with caplog.at_level(logging.INFO):
        response = _client("operator").post("/console/approvals/bulk/", fields)
    assert response.status_code == 400
    (record,) = [r for r in caplog.records if r.name.startswith("django.security.")]
    assert (record.name, record.levelname) == (f"django.security.{refusal}", "WARNING")
    assert record.exc_info is None
    assert record.getMessage().startswith("Bad request (")
    assert record.getMessage().endswith("): /console/approvals/bulk/")
    assert "Traceback" not in caplog.text and "ERROR" not in caplog.text
