"""``/metrics``: protected by its bearer token, and after the demo refund (with a provider retry,
an escalation and a webhook delivery beside it) every series the README lists is there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from approvals.services import approval_decide
from tests import replies as r
from tests.conftest import REPO, wait_for
from tests.engine import bundled_replies, start
from tests.webhooks.test_webhooks import endpoint
from tests.webhooks.test_webhooks import receiver as receiver  # the fixture
from toolcalls.models import Operation
from toolcalls.states import OperationState

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-test-token"
S = OperationState


def _scrape(token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = Client().get("/metrics", headers=headers)
    return response.status_code, response.content.decode()


def _ended(operation: Operation, *states: str) -> bool:
    operation.refresh_from_db()
    return operation.state in states


def test_metrics_are_off_without_a_token() -> None:
    assert _scrape()[0] == 404


@override_settings(CALLGATE_METRICS_TOKEN=TOKEN)
def test_metrics_need_the_token() -> None:
    assert _scrape(None)[0] == 401
    assert _scrape("wrong")[0] == 401
    assert Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@override_settings(CALLGATE_METRICS_TOKEN=TOKEN)
def test_every_series_is_there_after_the_demo_refund(demo, inprocess_worker, receiver) -> None:
    endpoint(demo.tenant, receiver.url)
    refund = start(demo, bundled_replies("refund_approve"))
    retried = start(demo, [r.http_error(503, "overloaded"), r.final()], tool_names=[])
    lookup = r.response(r.call("c1", "get_order", {"order_id": "ord_1001"}))
    escalated = start(demo, [lookup, r.final()], budgets={"max_turns": 1})
    wait_for(lambda: _ended(refund, S.WAITING_APPROVAL), what="the refund to park")
    status, text = _scrape()
    assert status == 200
    assert 'callgate_approvals_pending{tool="submit_refund"} 1.0' in text
    operator = get_user_model().objects.get(username="operator")
    approval_decide(approval_pk=refund.approvals.get().pk, actor=operator, approve=True)
    wait_for(lambda: _ended(refund, S.COMPLETED), what="the refund to complete")
    wait_for(lambda: _ended(retried, S.COMPLETED), what="the retried operation")
    wait_for(lambda: _ended(escalated, S.ESCALATED), what="the escalation")
    wait_for(lambda: len(receiver.received) > 0, what="a webhook delivery")
    wait_for(lambda: "callgate_webhook_deliveries_total" in _scrape()[1], what="its count")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(_scrape()[1])
        for sample in family.samples
    }
    expected = [
        ("callgate_operations", {"state": "ESCALATED", "family": "openai_responses"}),
        ("callgate_operation_transitions_total", {"state": "COMPLETED"}),
        ("callgate_model_turns_total", {"outcome": "TOOL_PROPOSALS"}),
        ("gen_ai_client_operation_duration_seconds_count", {"gen_ai_operation_name": "chat"}),
        ("gen_ai_client_token_usage_count", {"gen_ai_token_type": "input"}),
        ("gen_ai_client_token_usage_count", {"gen_ai_token_type": "output"}),
        ("callgate_tool_calls_total", {"tool": "submit_refund", "outcome": "succeeded"}),
        ("callgate_approval_wait_seconds_count", {"decision": "approved"}),
        ("callgate_escalations_total", {"guard": "max_turns"}),
        ("callgate_provider_retries_total", {"status": "overloaded"}),
        ("callgate_webhook_deliveries_total", {"outcome": "delivered"}),
    ]
    for name, labels in expected:
        found = [
            value
            for (sample, have), value in samples.items()
            if sample == name and labels.items() <= dict(have).items()
        ]
        assert found and sum(found) > 0, (name, labels)
    # The duration's boundaries are the GenAI conventions' advised ones, in seconds.
    duration = "gen_ai_client_operation_duration_seconds_bucket"
    boundaries = {dict(have)["le"] for (sample, have) in samples if sample == duration}
    advised = "0.01 0.02 0.04 0.08 0.16 0.32 0.64 1.28 2.56 5.12 10.24 20.48 40.96 81.92 +Inf"
    assert boundaries == set(advised.split())


RECORD = """
import django
django.setup()
from toolcalls.telemetry import metrics
metrics.webhook_delivery(outcome="delivered")
"""


@pytest.mark.django_db
def test_counts_of_every_process_are_added_up(tmp_path, monkeypatch) -> None:
    """Two processes (as gunicorn or Celery workers) count into PROMETHEUS_MULTIPROC_DIR; the
    scrape adds their counts up."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "CALLGATE_METRICS_TOKEN": TOKEN,
    }
    for _ in range(2):
        subprocess.run([sys.executable, "-c", RECORD], env=env, cwd=REPO, check=True)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    with override_settings(CALLGATE_METRICS_TOKEN=TOKEN):
        status, text = _scrape()
    assert status == 200
    assert 'callgate_webhook_deliveries_total{outcome="delivered"} 2.0' in text
    assert "# TYPE callgate_operations gauge" in text


@override_settings(CALLGATE_METRICS_TOKEN=TOKEN)
def test_a_scrape_with_the_database_out_of_reach_keeps_the_process_s_counters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The open-work gauges are read from the database; without it the scrape still answers
    with this process's counters, ``callgate_open_work_read`` 0 (it was a 500)."""

    def unreachable(*args: object, **kwargs: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(Operation.objects, "filter", unreachable)
    status, text = _scrape()
    assert status == 200
    assert "callgate_open_work_read 0.0" in text
    assert "# TYPE callgate_operation_transitions_total counter" in text
    assert "callgate_operations{" not in text
    monkeypatch.undo()
    assert "callgate_open_work_read 1.0" in _scrape()[1]
