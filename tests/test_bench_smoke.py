"""The bench's plumbing, without timing anything: its JSON file and its data generator."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from approvals import selectors
from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from bench import report
from toolcalls.demo.services import DemoSeed
from toolcalls.states import CallState, OperationState


def test_json_holds_exactly_the_bench_keys(tmp_path: Path) -> None:
    figures: dict[str, float | None] = {
        key: float(number) for number, key in enumerate(report.KEYS)
    }
    figures["worker_rss_mb"] = None  # not measured: written as null
    path = tmp_path / "bench.json"

    written = report.json_write(path, {**figures, "not_a_bench_key": 1.0})

    assert json.loads(path.read_text()) == written
    assert list(written) == list(report.KEYS)
    assert written["worker_rss_mb"] is None
    assert written["turn_ms_p50"] == 0.0


def test_table_shows_each_target_and_whether_it_is_met() -> None:
    figures = {"turn_ms_p50": 3.0, "baseline_turn_ms_p50": 4.0, "queries_per_turn": 13.0}

    lines = {line.split()[0]: line for line in report.table(figures).splitlines()[2:]}

    assert "<= baseline_turn_ms_p50" in lines["turn_ms_p50"]
    assert lines["turn_ms_p50"].split()[-1] == "yes"
    assert "NO" in lines["queries_per_turn"].split()
    assert "n/a" in lines["worker_rss_mb"].split()


def test_percentile_interpolates() -> None:
    assert report.percentile([], 50) is None
    assert report.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert report.percentile([5.0], 99) == 5.0


@pytest.mark.django_db
def test_seed_approvals_fills_the_queue_and_the_history(demo: DemoSeed) -> None:
    out = StringIO()

    call_command(
        "seed_approvals", pending=7, decided=5, decided_per_operation=2, batch_size=3, stdout=out
    )

    pending = ApprovalRequest.objects.filter(tenant=demo.tenant, state=ApprovalState.PENDING)
    decided = ApprovalRequest.objects.filter(tenant=demo.tenant).exclude(
        state=ApprovalState.PENDING
    )
    assert pending.count() == 7 and decided.count() == 5
    assert "Seeded 7 pending and 5 decided" in out.getvalue()
    for approval in pending.select_related("call", "operation"):
        assert approval.call.state == CallState.WAITING_APPROVAL
        assert approval.operation.state == OperationState.WAITING_APPROVAL
        assert approval.call.arguments_sha256 == approval.arguments_sha256
    assert decided.values("operation").distinct().count() == 3
    operator = demo.tenant.members.get(username="operator")
    page = selectors.approvals_queue(user=operator, filters=selectors.QueueFilters(), size=5)
    assert len(page.rows) == 5 and page.next_cursor
