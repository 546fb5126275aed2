"""Absent values are ``null`` (never ``""``) and date-times are RFC 3339 in UTC ending in ``Z``,
in every kind of row the API returns."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.api.support import DECIDE, READ, WRITE, create, get, keyed_client, post
from toolcalls.demo.services import DemoSeed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
DATE_TIMES = {"created_at", "updated_at", "deadline_at", "expires_at", "decided_at"}


def _rows(demo: DemoSeed) -> dict[str, list[dict[str, Any]]]:
    """Every kind of row of a refund that was approved and completed."""
    client, _ = keyed_client(demo.tenant, READ, WRITE, name="checkout")
    reviewer, _ = keyed_client(demo.tenant, READ, DECIDE, name="review")
    operation_id = create(client)["id"]
    (approval,) = get(client, f"/operations/{operation_id}/approvals").json()["results"]
    pending = get(client, f"/approvals/{approval['id']}").json()
    post(reviewer, f"/approvals/{approval['id']}/decide", {"decision": "approve"})
    listed = {
        name: get(client, f"/operations/{operation_id}/{name}").json()["results"]
        for name in ("turns", "calls", "events", "approvals")
    }
    return {"operation": [get(client, f"/operations/{operation_id}").json()], **listed} | {
        "pending": [pending]
    }


def test_no_row_says_empty_string_for_nothing(demo: DemoSeed) -> None:
    rows = _rows(demo)
    for kind, found in rows.items():
        for row in found:
            blank = [name for name, value in row.items() if value == ""]
            assert not blank, (kind, blank, row)
    # The blanks there are: a call without an error code, an event of no approval.
    assert any(call["error_code"] is None for call in rows["calls"])
    assert any(event["approval"] is None for event in rows["events"])
    assert rows["pending"][0]["decision_reason"] is None


def test_no_audit_event_detail_says_empty_string_for_nothing(demo: DemoSeed) -> None:
    """The refund was approved without a reason: its decision's event says so by null."""
    events = _rows(demo)["events"]
    for event in events:
        blank = [name for name, value in event["details"].items() if value == ""]
        assert not blank, (event["kind"], blank, event["details"])
    (decided,) = [event for event in events if event["kind"] == "approval.transition"]
    assert decided["details"]["reason"] is None


def test_every_date_time_is_utc_with_z(demo: DemoSeed) -> None:
    for kind, found in _rows(demo).items():
        for row in found:
            for name in DATE_TIMES & set(row):
                value = row[name]
                assert value is None or RFC3339_UTC.fullmatch(value), (kind, name, value)


def test_a_date_time_in_an_event_s_details_is_utc_with_z(demo: DemoSeed) -> None:
    """The approval's expiry in its event, as in its row and its webhook."""
    events = _rows(demo)["events"]
    (requested,) = [event for event in events if event["kind"] == "approval.requested"]
    assert RFC3339_UTC.fullmatch(requested["details"]["expires_at"]), requested["details"]
