"""What must hold after every fault test, whatever was killed, paused or lost on the way.

Read from the database (the source of truth) and the payments provider's ledger:

- every operation is terminal, parked (WAITING_APPROVAL with nothing running), escalated, or
  holds an unexpired lease on itself or one of its calls — otherwise it is *lost*;
- at most one applied effect per idempotency key in the payments ledger, and per order (the
  suite pays each order at most once, so a second effect under another key is a duplicate too);
  at most one demo ``LedgerEntry`` per key and per draft;
- every effect the provider applied is known to Callgate as done (a call under that key
  SUCCEEDED or SUPPRESSED, or its outcome is left to a human: UNKNOWN_OUTCOME while ESCALATED);
- no payment was sent again for an intent already applied: the provider never had to answer
  from its idempotency store (its idempotency is the last line of defence, not Callgate's);
- at most one ``ModelTurn`` per (operation, index) (a unique constraint: asserted all the same);
- exactly one decision per decided approval, none for a pending one, agreeing with its state;
- every call of every call set that went back to the model has exactly one result, bound to
  it: the request of the following turn carries one output per call ID, equal to the stored
  ``model_result`` of a finished call;
- ``audit_chain_verify()`` finds no break.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import AuditEvent, ModelTurn, Operation, ToolCall
from toolcalls.services.audit_verify import audit_chain_verify
from toolcalls.states import CALL_FINISHED, OPERATION_TERMINAL, CallState

BUSY = (CallState.PROPOSED, CallState.APPROVED, CallState.EXECUTING)
PAY_TOOL = "pay_refund"


@dataclass
class Findings:
    operations: int = 0
    duplicates: int = 0
    lost: int = 0
    problems: list[str] = field(default_factory=list)

    def duplicate(self, message: str, count: int = 1) -> None:
        self.duplicates += count
        self.problems.append(f"DUPLICATE: {message}")

    def missing(self, message: str, count: int = 1) -> None:
        self.lost += count
        self.problems.append(f"LOST: {message}")

    def wrong(self, message: str) -> None:
        self.problems.append(message)


def invariants_check(*, ledger: Mapping[str, Sequence[Mapping[str, Any]]]) -> Findings:
    """Check every invariant over the whole test database and the provider's ``ledger``
    (``{"requests": [...], "effects": [...]}``)."""
    findings = Findings(operations=Operation.objects.count())
    _operations_settled(findings)
    _payments(findings, ledger["effects"])
    _resent(findings, ledger["requests"])
    _demo_ledger(findings)
    _turns_unique(findings)
    _approvals_decided_once(findings)
    _results_returned(findings)
    for chain_break in audit_chain_verify():
        findings.wrong(f"audit chain: {chain_break}")
    return findings


def _operations_settled(findings: Findings) -> None:
    now = timezone.now()
    busy = set(ToolCall.objects.filter(state__in=BUSY).values_list("operation_id", flat=True))
    leased = set(
        ToolCall.objects.filter(lease_expires_at__gt=now).values_list("operation_id", flat=True)
    )
    for operation in Operation.objects.all():
        if operation.state in OPERATION_TERMINAL or operation.state == "ESCALATED":
            continue
        parked = operation.state == "WAITING_APPROVAL" and not operation.lease_token
        if parked and operation.pk not in busy:
            continue
        if (operation.lease_expires_at and operation.lease_expires_at > now) or (
            operation.pk in leased
        ):
            continue
        states = list(operation.calls.values_list("provider_call_id", "state"))
        findings.missing(f"{operation.public_id} is stranded in {operation.state}, calls {states}")


def _excess(counts: Counter[Any]) -> int:
    return sum(n - 1 for n in counts.values() if n > 1)


def _payments(findings: Findings, effects: Iterable[Mapping[str, Any]]) -> None:
    effects = list(effects)
    by_key = Counter(effect["key"] for effect in effects)
    by_order = Counter(effect["order_id"] for effect in effects)
    excess = max(_excess(by_key), _excess(by_order))
    if excess:
        repeated = {k: n for k, n in by_key.items() if n > 1} or {
            o: n for o, n in by_order.items() if n > 1
        }
        findings.duplicate(f"payments applied more than once: {repeated}", excess)
    calls: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key, state, operation_state in ToolCall.objects.filter(
        tool_name=PAY_TOOL, idempotency_key__in=list(by_key)
    ).values_list("idempotency_key", "state", "operation__state"):
        calls[key].append((state, operation_state))
    for key in by_key:
        known = any(
            state in (CallState.SUCCEEDED, CallState.SUPPRESSED)
            or (state == CallState.UNKNOWN_OUTCOME and operation_state == "ESCALATED")
            for state, operation_state in calls[key]
        )
        if not known:
            findings.missing(f"payment {key} was applied but no call knows it: {calls[key]}")


def _resent(findings: Findings, requests: Iterable[Mapping[str, Any]]) -> None:
    replayed = [r["key"] for r in requests if r["method"] == "POST" and r["replayed"]]
    if replayed:
        findings.duplicate(
            f"payments sent again after they were applied (answered from the provider's "
            f"idempotency store): {replayed}",
            len(replayed),
        )


def _demo_ledger(findings: Findings) -> None:
    rows = list(LedgerEntry.objects.values_list("idempotency_key", "draft_id"))
    excess = max(_excess(Counter(k for k, _ in rows)), _excess(Counter(d for _, d in rows)))
    if excess:
        findings.duplicate(f"demo refunds paid more than once: {rows}", excess)


def _turns_unique(findings: Findings) -> None:
    repeated = (
        ModelTurn.objects.values("operation_id", "index").annotate(n=Count("id")).filter(n__gt=1)
    )
    for row in repeated:
        findings.duplicate(f"model turn {row} stored {row['n']} times", row["n"] - 1)


def _approvals_decided_once(findings: Findings) -> None:
    decisions: dict[str, list[str]] = defaultdict(list)
    for ref, to_state in AuditEvent.objects.filter(kind="approval.transition").values_list(
        "approval_ref", "to_state"
    ):
        decisions[ref].append(to_state)
    for approval in ApprovalRequest.objects.all():
        made = decisions.get(approval.public_id, [])
        expected = [] if approval.state == ApprovalState.PENDING else [approval.state]
        if len(made) > 1:
            findings.duplicate(f"{approval.public_id} decided {len(made)} times: {made}")
        elif made != expected:
            findings.wrong(f"{approval.public_id} is {approval.state} but decided {made}")


def _results_returned(findings: Findings) -> None:
    """Each call set that went back to the model: one output per call, its own stored result."""
    turns = {
        (turn.operation_id, turn.index): turn
        for turn in ModelTurn.objects.select_related("operation").only(
            "operation_id",
            "index",
            "family",
            "request_frame",
            "request_items",
            "operation__family",
        )
    }
    calls: dict[tuple[int, int], list[ToolCall]] = defaultdict(list)
    for call in ToolCall.objects.select_related("turn").only(
        "provider_call_id", "state", "model_result", "turn__operation_id", "turn__index"
    ):
        calls[(call.turn.operation_id, call.turn.index)].append(call)
    for (operation_pk, index), call_set in calls.items():
        following = turns.get((operation_pk, index + 1))
        if following is None:
            continue  # not returned (yet): parked, escalated or ended first
        if following.operation.family != "openai_responses":
            findings.wrong(f"cannot read the results of family {following.operation.family}")
            continue
        outputs = _outputs(following.request_body)
        for call in call_set:
            sent = outputs.get(call.provider_call_id, [])
            where = f"call {call.provider_call_id} of turn {index} (operation {operation_pk})"
            if not sent:
                findings.missing(f"{where} went back to the model without a result")
            elif len(sent) > 1:
                findings.duplicate(f"{where} went back with {len(sent)} results", len(sent) - 1)
            elif call.state not in CALL_FINISHED or sent[0] != call.model_result:
                findings.wrong(f"{where} went back with {sent[0]}, not its own {call.state} result")


def _outputs(request_body: Mapping[str, Any]) -> dict[str, list[Any]]:
    outputs: dict[str, list[Any]] = defaultdict(list)
    for item in request_body.get("input", []):
        if isinstance(item, Mapping) and item.get("type") == "function_call_output":
            outputs[str(item.get("call_id"))].append(json.loads(item["output"]))
    return outputs
