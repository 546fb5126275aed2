"""Run a scenario headless: start it, print every audit event as it appears, act as the demo
operator when asked, and summarise. Used by ``run_scenario``, ``demo_refund`` and ``demo_setup``.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from approvals.states import ApprovalState
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.remote import served_names
from toolcalls.demo.scenario import scenario_read, scenario_store, scenario_tools_renamed
from toolcalls.demo.services import CUSTOMER_REF, demo_seed
from toolcalls.errors import CallgateError
from toolcalls.models import AuditEvent, Operation
from toolcalls.services.operations import operation_start
from toolcalls.services.watching import Wait, operation_watch
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState

#: Demo operator's denial reason, sent to the model.
DENY_REASON = "Refunds for cosmetic damage need a photo first."
#: Seconds between reads where nothing says when the operation changes (no Redis: the demo).
POLL_S = 0.05


class ScenarioTimeout(CallgateError):
    """The operation neither finished nor parked within the allowed time."""

    def __init__(self, message: str) -> None:
        super().__init__("scenario_timeout", message)


@dataclass(frozen=True)
class RunOptions:
    """``decision`` is ``"approve"``, ``"deny"`` or ``None`` (stop when parked); ``tools`` is
    ``local`` (the tools deployed with Callgate) or the kind of the demo's remote server
    (``mcp``, ``http``) whose tools the operation is offered instead."""

    decision: str | None = None
    tools: str = "local"
    requester: str = "requester"
    operator: str = "operator"
    subject_ref: str = CUSTOMER_REF
    timeout_s: float = 60.0


def scenario_run(*, path: Path, options: RunOptions, out: Callable[[str], None]) -> Operation:
    """Run the scenario at ``path`` on the current database; returns the operation in its final
    (terminal, escalated or parked) state. Raises ``ScenarioError`` or :class:`ScenarioTimeout`."""
    scenario = scenario_read(path)
    names = served_names(options.tools) if options.tools != "local" else None
    if names:
        scenario = scenario_tools_renamed(scenario, names)
    seed = demo_seed()
    users = get_user_model().objects
    script = scenario_store(name=path.name, scenario=scenario)
    operation = operation_start(
        tenant=seed.tenant,
        requested_by=users.get(username=options.requester),
        subject_ref=options.subject_ref,
        family=scenario["family"],
        model=scenario["model"],
        input_text=scenario["input"],
        replay_script=script,
        budgets=scenario.get("budgets"),
        tool_names=list(names.values()) if names else None,
        instructions=scenario.get("instructions", ""),
        messages=scenario.get("messages"),
        settings=scenario.get("settings"),
    )
    out(f"operation {operation.public_id} started ({scenario['family']}, {path.name})")
    operator = users.get(username=options.operator)
    return _watch(operation, options, operator, out)


def _watch(
    operation: Operation, options: RunOptions, operator: Any, out: Callable[[str], None]
) -> Operation:
    """Print the operation's events as they come and decide its approvals as ``options`` say,
    until it ends, escalates or parks with nothing left to do; woken by each committed step
    (``operation_watch``), reading at least every second all the same."""
    with operation_watch(operation_pk=operation.pk, poll_s=POLL_S) as wait:
        return _follow(operation, options, operator, out, wait)


def _follow(
    operation: Operation,
    options: RunOptions,
    operator: Any,
    out: Callable[[str], None],
    wait: Wait,
) -> Operation:
    deadline = time.monotonic() + options.timeout_s
    last_seq = 0
    while True:
        for event in AuditEvent.objects.filter(operation=operation, seq__gt=last_seq).order_by(
            "seq"
        ):
            out(describe(event))
            last_seq = event.seq
        operation.refresh_from_db()
        if operation.state in OPERATION_TERMINAL or operation.state == OperationState.ESCALATED:
            return operation
        if operation.state == OperationState.WAITING_APPROVAL:
            pending = list(operation.approvals.filter(state=ApprovalState.PENDING))
            if options.decision and pending:
                for approval in pending:
                    _decide(approval, operator, options.decision, out)
                continue
            if not options.decision and _quiet(operation):
                return operation
        left = deadline - time.monotonic()
        if left < 0:
            raise ScenarioTimeout(
                f"{operation.public_id} still {operation.state} after {options.timeout_s:.0f} s"
            )
        wait(min(left, 1.0))


def _quiet(operation: Operation) -> bool:
    busy = (CallState.PROPOSED, CallState.APPROVED, CallState.EXECUTING)
    return not operation.calls.filter(state__in=busy).exists()


def _decide(
    approval: ApprovalRequest, operator: Any, decision: str, out: Callable[[str], None]
) -> None:
    out(f"{operator.get_username()} (operator) decides {approval.public_id}: {decision}")
    approval_decide(
        approval_pk=approval.pk,
        actor=operator,
        approve=decision == "approve",
        reason="" if decision == "approve" else DENY_REASON,
    )


def printable(text: str) -> str:
    """``text`` safe for a terminal: control and format characters (NUL, escapes, bidi
    overrides) written as ``\\uXXXX``; line breaks and tabs kept."""
    return "".join(
        f"\\u{ord(char):04x}"
        if unicodedata.category(char) in ("Cc", "Cf") and char not in "\n\t"
        else char
        for char in text
    )


def describe(event: AuditEvent) -> str:
    """One line per audit event: sequence, kind, state change and the facts that matter
    (call ID, tool, argument digest prefix, outcome, attempt)."""
    details = event.details
    change = f"{event.from_state or '·'} -> {event.to_state}" if event.to_state else ""
    facts = {
        "provider_call_id": details.get("provider_call_id"),
        "tool": details.get("tool"),
        "args_sha256": (details.get("arguments_sha256") or "")[:16] or None,
        "turn": details.get("turn"),
        "outcome": details.get("outcome"),
        "attempt": details.get("attempt") if event.kind == "call.transition" else None,
        "reason": details.get("reason"),
    }
    text = " ".join(f"{key}={value}" for key, value in facts.items() if value not in (None, ""))
    return printable(f"{event.seq:>3} {event.kind:<22} {change:<36} {text}".rstrip())


def summary(operation: Operation) -> dict[str, Any]:
    """The JSON summary of ``run_scenario --json``."""
    calls = operation.calls.order_by("turn__index", "position")
    refunds = LedgerEntry.objects.filter(operation_ref=operation.public_id).select_related("order")
    return {
        "operation_id": operation.public_id,
        "state": operation.state,
        "terminal_reason": operation.terminal_reason or None,
        "final_text": operation.final_text or None,
        "turns": operation.turn_count,
        "calls": [
            {
                "provider_call_id": call.provider_call_id,
                "tool": call.tool_name,
                "state": call.state,
                "model_result": call.model_result,
            }
            for call in calls
        ],
        "ledger_refunds": [
            {
                "refund_id": entry.refund_id,
                "order_id": entry.order.order_id,
                "amount_cents": entry.amount_cents,
                "idempotency_key": entry.idempotency_key,
            }
            for entry in refunds
        ],
    }
