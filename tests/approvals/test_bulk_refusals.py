"""A bulk decision the form refuses decides nothing and says why: nothing ticked, approve and
deny sent together (once read as the last one sent), or a denial without a reason (each
approval refused it on its own, and the ticks were gone). The queue comes back with its filters,
the ticks and the reason typed."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from tests.engine import bundled_replies, start
from tests.factories import pending_approval

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

FILTERS = {"risk": "irreversible", "sort": "amount"}


def _operator() -> Client:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    return client


def _post(data: dict[str, Any]) -> str:
    url = reverse("approvals:bulk") + "?" + urlencode(FILTERS)
    response = _operator().post(url, data)
    assert response.status_code == 200
    return response.content.decode()


def _all_pending() -> bool:
    return not ApprovalRequest.objects.exclude(state=ApprovalState.PENDING).exists()


def test_approve_and_deny_together_decide_nothing(demo: Any) -> None:
    approvals = [pending_approval(demo.tenant) for _ in range(2)]
    ticked = [a.public_id for a in approvals]
    page = _post({"approval": ticked, "decision": ["approve", "deny"], "reason": "typed"})
    assert "Nothing was decided: Choose one decision: approve or deny." in page
    assert _all_pending()
    for public_id in ticked:
        assert f'aria-label="Select {public_id}" checked>' in page
    assert ">typed</textarea>" in page


@pytest.mark.parametrize("reason", ["", "   ", "\u200b"])
def test_a_denial_without_a_reason_decides_nothing_and_keeps_the_ticks(
    demo: Any, reason: str
) -> None:
    approvals = [pending_approval(demo.tenant) for _ in range(2)]
    ticked = [a.public_id for a in approvals]
    page = _post({"approval": ticked, "decision": "deny", "reason": reason})
    assert "Nothing was decided: A denial needs a reason for the model." in page
    assert _all_pending()
    for public_id in ticked:
        assert f'aria-label="Select {public_id}" checked>' in page
    assert '<option value="irreversible" selected>' in page


def test_nothing_ticked_keeps_the_filters_and_the_reason(demo: Any) -> None:
    pending_approval(demo.tenant)
    page = _post({"decision": "deny", "reason": "duplicate of an earlier refund"})
    assert "Nothing was decided: Tick at least one approval." in page
    assert ">duplicate of an earlier refund</textarea>" in page
    assert '<option value="irreversible" selected>' in page
    assert '<option value="amount" selected>' in page
    # The page's own links and filters name the queue, not the bulk action it was sent to.
    assert f'action="{reverse("approvals:queue")}"' in page
    assert f'action="{reverse("approvals:bulk")}?risk=irreversible&amp;sort=amount"' in page
    assert _all_pending()


def test_a_single_decision_is_still_taken(demo: Any) -> None:
    approval = start(demo, bundled_replies("refund_approve")).approvals.get()
    page = _post({"approval": [approval.public_id], "decision": "deny", "reason": "no"})
    assert 'data-testid="bulk-report"' in page
    approval.refresh_from_db()
    assert approval.state == ApprovalState.DENIED
    assert f'href="{reverse("approvals:queue")}?risk=irreversible&amp;sort=amount"' in page
