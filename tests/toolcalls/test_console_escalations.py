"""Operators act on escalated operations from the operation page; support staff cannot."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests import replies as r
from tests.engine import start
from toolcalls import registry
from toolcalls.registry import ToolContext, ToolSpec
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
LOOKUPS = [r.response(r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"})) for i in (1, 2, 3)]


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def test_the_page_shows_budgets_and_the_escalation_panel(demo) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    page = _client("operator").get(reverse("operations:detail", args=[operation.public_id]))
    text = page.content.decode()
    assert 'data-testid="escalation"' in text and "MAX_TURNS" in text
    assert 'data-testid="guards"' in text
    support = _client("support").get(reverse("operations:detail", args=[operation.public_id]))
    assert 'data-testid="escalation"' not in support.content.decode()


def test_operator_extends_and_the_operation_resumes(demo) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    url = reverse("operations:extend", args=[operation.public_id])
    response = _client("operator").post(url, {"max_turns": "10", "note": "customer waiting"})
    assert response.status_code == 302
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    assert operation.budgets["max_turns"] == 10
    event = operation.events.filter(from_state=S.ESCALATED).get()
    assert event.actor == "user:operator"
    assert event.details["extended"] == {"max_turns": 10}
    # The reason it stopped is history now: kept in the trail, no longer on the operation.
    assert operation.terminal_reason == ""
    escalated = operation.events.get(to_state=S.ESCALATED)
    assert escalated.details["reason"].startswith("MAX_TURNS")


def test_an_extension_that_changes_nothing_needed_is_refused(demo) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    client = _client("operator")
    response = client.post(reverse("operations:extend", args=[operation.public_id]), {})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "still over a budget" in page
    operation.refresh_from_db()
    assert operation.state == S.ESCALATED


@pytest.mark.parametrize(
    ("action", "data", "message"),
    [
        ("extend", {"max_turns": "10", "note": "n" * 501}, "Note: Ensure this value has at most"),
        ("extend", {"max_turns": "-1"}, "max_turns (model turns): Ensure this value is greater"),
        ("stop", {"reason": ""}, "Reason: This field is required."),
        ("stop", {"reason": "r" * 1001}, "Reason: Ensure this value has at most 1000"),
    ],
)  # fmt: skip
def test_a_refused_form_says_what_is_wrong(demo, action, data, message) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    client = _client("operator")
    response = client.post(reverse(f"operations:{action}", args=[operation.public_id]), data)
    assert response.status_code == 302
    assert message in client.get(response["Location"]).content.decode()
    operation.refresh_from_db()
    assert operation.state == S.ESCALATED


def test_operator_stops_and_support_cannot(demo) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    url = reverse("operations:stop", args=[operation.public_id])
    assert _client("support").post(url, {"reason": "no"}).status_code == 403
    assert _client("operator").post(url, {"reason": "Handled by phone."}).status_code == 302
    operation.refresh_from_db()
    assert (operation.state, operation.terminal_reason) == (S.STOPPED, "STOPPED: Handled by phone.")


def test_a_stop_reason_of_1000_characters_is_kept_whole(demo) -> None:
    operation = start(demo, [*LOOKUPS, r.final()], budgets={"max_turns": 1})
    reason = "r" * 990 + "0123456789"
    url = reverse("operations:stop", args=[operation.public_id])
    assert _client("operator").post(url, {"reason": reason}).status_code == 302
    operation.refresh_from_db()
    assert operation.terminal_reason == f"STOPPED: {reason}"


def _hanging_write(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Register ``hanging_write``, a write whose handler outlives its 50 ms timeout (its
    outcome unknown, the operation escalated) until the event returned is set."""
    release = threading.Event()

    def hang(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {}

    spec = ToolSpec(
        name="hanging_write",
        description="Hangs.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        schema_version="v1",
        risk="write",
        timeout_ms=50,
        handler=hang,
        idempotency_key=lambda ctx, args: "hanging:one",
        revisions={"input": "1", "output": "1", "effect": "1", "handler": "1"},
    )
    monkeypatch.setitem(registry._REGISTRY, spec.name, spec)
    return release


def test_a_lost_call_of_a_stopped_operation_is_still_recorded_there(demo, monkeypatch) -> None:
    release = _hanging_write(monkeypatch)
    try:
        replies = [r.response(r.call("h", "hanging_write", {})), r.final()]
        operation = start(demo, replies, tool_names=["hanging_write"])
        client = _client("operator")
        stop = reverse("operations:stop", args=[operation.public_id])
        assert client.post(stop, {"reason": "Handled by phone."}).status_code == 302
        page = client.get(reverse("operations:detail", args=[operation.public_id])).content
        assert b'data-testid="lost-outcomes"' in page and b"hanging:one" in page
        support = _client("support").get(reverse("operations:detail", args=[operation.public_id]))
        assert b'data-testid="lost-outcomes"' not in support.content
        call = operation.calls.get()
        url = reverse("operations:resolve", args=[operation.public_id, call.public_id])
        assert client.post(url, {"resolution": "not_applied"}).status_code == 302
        call.refresh_from_db()
        operation.refresh_from_db()
        assert (call.state, operation.state) == (CallState.FAILED, S.STOPPED)
        page = client.get(reverse("operations:detail", args=[operation.public_id])).content
        assert b'data-testid="lost-outcomes"' not in page
    finally:
        release.set()


def test_operator_records_an_unknown_outcome(demo, monkeypatch) -> None:
    release = _hanging_write(monkeypatch)
    try:
        replies = [r.response(r.call("h", "hanging_write", {})), r.final()]
        operation = start(demo, replies, tool_names=["hanging_write"])
        call = operation.calls.get()
        client = _client("operator")
        page = client.get(reverse("operations:detail", args=[operation.public_id])).content.decode()
        assert "is unknown" in page and "hanging:one" in page
        url = reverse("operations:resolve", args=[operation.public_id, call.public_id])
        assert (
            client.post(url, {"resolution": "applied", "note": "seen in the ledger"}).status_code
            == 302
        )
        call.refresh_from_db()
        operation.refresh_from_db()
        assert call.state == CallState.SUCCEEDED and operation.state == S.COMPLETED
    finally:
        release.set()
