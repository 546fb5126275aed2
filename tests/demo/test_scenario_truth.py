"""Every bundled scenario tells the truth about the refund: after a denial the model never claims
one was made and the ledger has none; after an approval exactly one refund is paid and named."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from providers.base import WireReply
from providers.families import ADAPTERS
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.scenario import BUNDLED_DIR, bundled_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

SCENARIOS = sorted(BUNDLED_DIR.rglob("*.json"))
#: What a claim that money was refunded looks like in the bundled final texts.
CLAIMS_A_REFUND = re.compile(r"has been submitted|refund RF-|\brefunded\b", re.IGNORECASE)


def _run(path: Path, decision: str) -> dict[str, Any]:
    out = StringIO()
    call_command("run_scenario", str(path), f"--{decision}", "--json", stdout=out)
    summary: dict[str, Any] = json.loads(out.getvalue().splitlines()[-1])
    return summary


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_bundled_scenario_explains_a_denial_and_an_approval_truthfully(path: Path) -> None:
    denied = _run(path, "deny")
    parked = any(call["state"] == "DENIED" for call in denied["calls"])
    # Every refund scenario parks submit_refund for approval; the failure branches never do.
    assert parked == path.stem.startswith("refund_")
    text = denied["final_text"] or ""
    assert not CLAIMS_A_REFUND.search(text), text
    assert denied["ledger_refunds"] == []
    assert not LedgerEntry.objects.filter(operation_ref=denied["operation_id"]).exists()
    if not parked:
        return
    assert denied["state"] == "COMPLETED" and "no money has been moved" in text
    approved = _run(path, "approve")
    assert approved["state"] == "COMPLETED"
    [refund] = approved["ledger_refunds"]
    assert LedgerEntry.objects.filter(operation_ref=approved["operation_id"]).count() == 1
    assert "has been submitted" in approved["final_text"]
    assert refund["refund_id"] in approved["final_text"]


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_the_streamed_refund_ends_like_the_plain_one_in_both_branches(family: str) -> None:
    """The streamed scenario's last reply branches like the plain one's, with the same text."""
    adapter = ADAPTERS[family]

    def last(name: str) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(bundled_path(family=family, name=name).read_text())[
            "replies"
        ][-1]
        return reply["after_results"]

    plain, streamed = last("refund_approve"), last("refund_approve_stream")
    for branch in ("ok", "error"):
        expected, got = (
            adapter.parse_reply(WireReply.from_case(case[branch])) for case in (plain, streamed)
        )
        assert streamed[branch]["kind"] == "stream"
        assert (got.outcome, got.text) == (expected.outcome, expected.text)
