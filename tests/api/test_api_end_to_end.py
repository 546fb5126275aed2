"""The refund through the REST API with a real Celery worker process on PostgreSQL + Redis.

A backend service starts the operation and polls it; a second service of the same tenant
approves; every turn, execution and resume runs in the worker.
"""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from approvals.states import ApprovalState
from tests.api.support import DECIDE, READ, WRITE, create_body, get, keyed_client, post
from tests.conftest import wait_for
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.services import DemoSeed
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

S = OperationState


def _poll(client: APIClient, operation_id: str, *states: str) -> dict[str, Any]:
    """GET the operation until it reaches one of ``states`` (a few requests a second)."""

    def reached() -> dict[str, Any] | None:
        time.sleep(0.2)
        response = get(client, f"/operations/{operation_id}")
        assert response.status_code == 200, response.content
        body: dict[str, Any] = response.json()
        return body if body["state"] in states else None

    return cast(dict[str, Any], wait_for(reached, timeout_s=60, what=f"{operation_id} → {states}"))


def test_refund_started_polled_and_approved_through_the_api(demo: DemoSeed, celery_worker) -> None:
    cache.clear()
    service, _ = keyed_client(demo.tenant, READ, WRITE, name="checkout")
    reviewer, _ = keyed_client(demo.tenant, READ, DECIDE, name="review")

    created = post(service, "/operations", create_body("refund_approve"))
    assert created.status_code == 201, created.content
    operation_id = created.json()["id"]

    parked = _poll(service, operation_id, S.WAITING_APPROVAL, S.FAILED, S.COMPLETED)
    assert parked["state"] == S.WAITING_APPROVAL, parked["terminal_reason"]
    assert LedgerEntry.objects.count() == 0
    (approval,) = get(reviewer, "/approvals").json()["results"]
    assert (approval["operation"], approval["tool"]) == (operation_id, "submit_refund")

    decided = post(reviewer, f"/approvals/{approval['id']}/decide", {"decision": "approve"})
    assert decided.status_code == 200, decided.content
    assert decided.json()["state"] == ApprovalState.APPROVED

    done = _poll(service, operation_id, S.COMPLETED, S.FAILED, S.CANCELLED)
    assert done["state"] == S.COMPLETED, done["terminal_reason"]
    assert "has been submitted" in done["final_text"]
    ledger = LedgerEntry.objects.get()
    assert (ledger.operation_ref, ledger.amount_cents) == (operation_id, 4999)
    calls = get(service, f"/operations/{operation_id}/calls").json()["results"]
    assert [c["state"] for c in calls] == ["SUCCEEDED"] * 3
    submit = next(c for c in calls if c["tool"] == "submit_refund")
    assert ledger.idempotency_key == submit["idempotency_key"]
