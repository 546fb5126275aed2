"""A bulk decision reports every ticked ID: those naming no approval of the operator's tenants
(unknown, or another tenant's: told apart by nothing) each on a line of their own, beside the
results of those it decided."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest
from tests.engine import bundled_replies, start
from tests.factories import ApprovalRequestFactory
from toolcalls.demo.services import DemoSeed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

NOT_FOUND = "No such approval in your tenants."


def _report(ticked: list[str], decision: str = "approve", reason: str = "") -> list[str]:
    """The rows of the bulk decision's report, as text without tags, one per row."""
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    data = {"approval": ticked, "decision": decision, "reason": reason}
    response = client.post(reverse("approvals:bulk"), data)
    assert response.status_code == 200
    body = response.content.decode().split("<tbody>")[1].split("</tbody>")[0]
    return [" ".join(row.split()) for row in body.split("<tr>")[1:]]


def _parked(demo: DemoSeed) -> ApprovalRequest:
    approval: ApprovalRequest = start(demo, bundled_replies("refund_approve")).approvals.get()
    return approval


def test_every_ticked_id_has_a_line_the_unknown_ones_not_in_your_tenants(demo: DemoSeed) -> None:
    approvals = [_parked(demo) for _ in range(3)]
    ticked = [approval.public_id for approval in approvals]
    rows = _report([*ticked, "apr_nope"])
    assert len(rows) == 4
    for approval, row in zip(approvals, rows[:3], strict=True):
        assert approval.public_id in row and ">approved<" in row
    assert "apr_nope" in rows[3] and NOT_FOUND in rows[3] and ">not decided<" in rows[3]
    for approval in approvals:
        approval.refresh_from_db()
        assert approval.state == "APPROVED"


def test_another_tenants_approval_reads_as_an_unknown_one(demo: DemoSeed) -> None:
    elsewhere = ApprovalRequestFactory.create()
    ticked = [elsewhere.public_id, "apr_nope", "apr_nope", "apr_\u0000"]
    rows = _report(ticked, decision="deny", reason="Not in our books.")
    assert len(rows) == 3  # each ID once; one no database could hold shown as it can be
    [other, unknown, unstorable] = rows
    assert other.replace(elsewhere.public_id, "apr_nope") == unknown
    assert "apr_\ufffd" in unstorable and NOT_FOUND in unstorable
    assert elsewhere.tool_name not in other
    elsewhere.refresh_from_db()
    assert elsewhere.state == "PENDING"
