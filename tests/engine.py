"""Start operations on scripted replies for engine tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model

from approvals import services as approvals_services
from tests.factories import (
    ModelTurnFactory,
    OperationFactory,
    ToolCallFactory,
    catalogue_enable_all,
)
from toolcalls.demo.scenario import bundled_path
from toolcalls.guards import budgets_for
from toolcalls.models import Operation, ReplayScript, ToolCall
from toolcalls.services.operations import operation_start
from toolcalls.services.watching import operations_changed


def bundled_replies(name: str, family: str = "openai_responses") -> list[dict[str, Any]]:
    return json.loads(bundled_path(family=family, name=name).read_text())["replies"]


#: A throwaway tool's arguments (none) and revisions, for tests that register their own.
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
REVISIONS = {"input": "1", "output": "1", "effect": "1", "handler": "1"}


def start(demo: Any, replies: list[dict[str, Any]], **overrides: Any) -> Operation:
    """Start an operation for the demo customer, requested by the demo requester (every tool
    registered by now in the demo tenant's catalogue)."""
    catalogue_enable_all(demo.tenant)
    model = overrides.pop("model", "gpt-5.1-test")
    script = ReplayScript.objects.create(
        name="test", family="openai_responses", model=model, replies=replies
    )
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref=overrides.pop("subject_ref", "cus_1001"),
        family="openai_responses",
        model=model,
        input_text="Please refund my order.",
        replay_script=script,
        **overrides,
    )
    operation.refresh_from_db()
    return operation


def start_family(demo: Any, family: str, replies: list[dict[str, Any]]) -> Operation:
    """Start an operation in API ``family`` on ``replies``, for the demo customer."""
    script = ReplayScript.objects.create(name="test", family=family, model="m", replies=replies)
    operation = operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        family=family,
        model="m",
        input_text="Please refund my order.",
        replay_script=script,
    )
    operation.refresh_from_db()
    return operation


def operator() -> Any:
    return get_user_model().objects.get(username="operator")


def change_after_the_decisions_check(monkeypatch: Any, change: Callable[[], None]) -> None:
    """Make ``change`` land just after an approval's own check of the tool's precondition
    (``approvals.services.precondition_failure``) and before the resume's: the decision goes
    through and the resume must find the change."""
    checked = approvals_services.precondition_failure

    def check_then_change(**kwargs: Any) -> Any:
        found = checked(**kwargs)
        change()
        return found

    monkeypatch.setattr(approvals_services, "precondition_failure", check_then_change)


def wakeups_in(callbacks: list[Callable[[], Any]]) -> list[Callable[[], Any]]:
    """The wake-ups among a transaction's on-commit ``callbacks``: not the publication that
    tells watchers its operations changed (``toolcalls.services.watching``)."""
    return [
        callback
        for callback in callbacks
        if not (isinstance(callback, partial) and callback.func is operations_changed)
    ]


def transitions(operation: Operation) -> list[tuple[str, str]]:
    events = operation.events.filter(kind="operation.transition").order_by("seq")
    return [(e.from_state, e.to_state) for e in events]


def sent_outputs(operation: Operation, turn_index: int) -> list[str]:
    """Call IDs of the ``function_call_output`` items in the request that produced turn N."""
    body = operation.turns.get(index=turn_index).request_body
    return [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]


def call_set(*states: str, operation_state: str = "EXECUTING", **fields: Any) -> list[ToolCall]:
    """The calls (in ``states``, by position) of the first turn of a new operation in
    ``operation_state`` with the default budgets; ``fields`` apply to every call."""
    operation = OperationFactory.create(state=operation_state, budgets=budgets_for({}))
    turn = ModelTurnFactory.create(operation=operation, index=0)
    return [
        ToolCallFactory.create(turn=turn, position=n, state=state, **fields)
        for n, state in enumerate(states)
    ]
