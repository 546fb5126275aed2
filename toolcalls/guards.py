"""Loop protection (docs/design.md §8): the budgets and checks that stop a tool-calling loop
from running on, and the reasons an operation escalates.

Budgets live on each operation (``Operation.budgets``): the defaults of
``settings.CALLGATE_GUARDS``, overridden per operation within ``CALLGATE_GUARD_LIMITS``. Checks
that end a turn run before each model request (:func:`turn_trip`); checks on proposed calls run
in dispatch, where a tripped budget rejects the call with an envelope and marks the operation to
escalate at the next turn boundary, once the call set has its results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from django.conf import settings

from toolcalls.errors import CallgateError
from toolcalls.states import CallState

if TYPE_CHECKING:
    # Types only: the settings hold their guard defaults to :func:`budget_checked` before the
    # app registry (and so any model) can load.
    from toolcalls.models import Operation, ToolCall

#: Guard name → (machine-readable reason code, unit for messages).
GUARDS: dict[str, tuple[str, str]] = {
    "max_turns": ("MAX_TURNS", "model turns"),
    "max_tool_calls": ("MAX_TOOL_CALLS", "tool calls"),
    "max_calls_per_tool": ("MAX_CALLS_PER_TOOL", "calls of one tool"),
    "deadline_s": ("DEADLINE", "seconds"),
    "max_input_tokens": ("MAX_INPUT_TOKENS", "input tokens"),
    "max_output_tokens": ("MAX_OUTPUT_TOKENS", "output tokens"),
    "max_cost_usd": ("MAX_COST", "USD"),
    "max_parallel": ("MAX_PARALLEL", "parallel executions"),
    "max_no_progress_turns": ("NO_PROGRESS", "call sets without a new result"),
}


def tripped_guard(reason: str) -> str | None:
    """The guard named by an escalation ``reason`` (its code prefix, e.g. ``MAX_TOOL_CALLS: …``
    → ``max_tool_calls``); ``None`` for any other reason."""
    code = reason.partition(":")[0]
    return next((name for name, (known, _) in GUARDS.items() if known == code), None)


#: Budgets that count whole things; the others (seconds, USD) may be fractional.
FRACTIONAL = frozenset({"deadline_s", "max_cost_usd"})


class BudgetError(CallgateError, ValueError):
    """A budget override that is unknown, not a positive number (a whole one where it counts
    things), or above its limit (``bad_budget``); ``details["fields"]`` names it as the
    services' ``budgets`` option holds it (``budgets.<name>``)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__("bad_budget", message, details={"fields": {f"budgets.{name}": [message]}})


@dataclass(frozen=True)
class Trip:
    """A guard that stopped the loop: ``guard`` (a key of :data:`GUARDS` or ``repeat``) and a
    ``reason`` starting with the reason code, for people and the audit trail."""

    guard: str
    reason: str


def budgets_for(overrides: Mapping[str, Any] | None = None) -> dict[str, float | int]:
    """Effective budgets: the defaults with ``overrides`` applied. Raises :class:`BudgetError`."""
    budgets = dict(settings.CALLGATE_GUARDS)
    limits = settings.CALLGATE_GUARD_LIMITS
    for name, value in (overrides or {}).items():
        if name not in GUARDS:
            raise BudgetError(name, f"unknown budget {name!r}; known: {', '.join(GUARDS)}")
        budgets[name] = budget_checked(name, value, limit=limits[name])
    return budgets


def budget_checked(name: str, value: object, *, limit: float) -> float | int:
    """``value`` as budget ``name`` holds it: a positive number, whole (an ``int``) where it
    counts things, at most ``limit``. The one rule for an operation's override and for the
    default the settings read (``CALLGATE_GUARDS``). Raises :class:`BudgetError`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise BudgetError(name, f"{name} must be a positive number, not {value!r}")
    if name not in FRACTIONAL:
        if value != int(value):
            raise BudgetError(name, f"{name} must be a whole number, not {value!r}")
        value = int(value)
    if value > limit:
        raise BudgetError(name, f"{name} may be at most {limit}")
    return value


def cost_micros(*, model: str, input_tokens: int, output_tokens: int) -> int:
    """Cost of one reply in micro-USD from ``CALLGATE_MODEL_PRICES`` (USD per million tokens,
    the longest matching model-name prefix); 0 for a model the table does not know."""
    prices = settings.CALLGATE_MODEL_PRICES
    matches = [prefix for prefix in prices if model.startswith(prefix)]
    if not matches:
        return 0
    input_price, output_price = prices[max(matches, key=len)]
    # USD per million tokens is micro-USD per token.
    return round(input_tokens * input_price + output_tokens * output_price)


def turn_trip(operation: Operation, *, now: datetime) -> Trip | None:
    """The guard that forbids another model request, checked before each one; ``None`` if none."""
    if operation.guard_tripped:
        return Trip("pending", operation.guard_tripped)
    budgets = operation.budgets
    used = {
        "max_turns": operation.turn_count,
        "max_input_tokens": operation.input_tokens,
        "max_output_tokens": operation.output_tokens,
        "max_cost_usd": operation.cost_micros / 1_000_000,
        "max_no_progress_turns": operation.no_progress_turns,
    }
    if operation.deadline_at and now >= operation.deadline_at:
        return Trip(
            "deadline_s",
            f"DEADLINE: the deadline {operation.deadline_at:%Y-%m-%d %H:%M:%S} UTC passed",
        )
    for name, value in used.items():
        if value >= budgets[name]:
            code, unit = GUARDS[name]
            return Trip(name, f"{code}: {value:g} {unit} used, limit {budgets[name]:g}")
    return None


def call_budget_problem(
    operation: Operation, tool_name: str, *, tool_limit: int | None = None
) -> Trip | None:
    """Whether one more call of ``tool_name`` exceeds a tool-call budget (counters are the
    operation's before this call). ``tool_limit``: the tool's own limit of calls per operation
    (``ToolSpec.max_calls``, from the tenant's catalogue), applied below ``max_calls_per_tool``;
    an extension of that budget does not lift it."""
    budgets = operation.budgets
    if operation.tool_call_count >= budgets["max_tool_calls"]:
        limit = budgets["max_tool_calls"]
        return Trip("max_tool_calls", f"MAX_TOOL_CALLS: the limit of {limit:g} tool calls")
    per_tool = int(operation.calls_per_tool.get(tool_name, 0))
    limit = min(budgets["max_calls_per_tool"], tool_limit or budgets["max_calls_per_tool"])
    if per_tool >= limit:
        return Trip(
            "max_calls_per_tool", f"MAX_CALLS_PER_TOOL: the limit of {limit:g} calls of {tool_name}"
        )
    return None


class PastCall(NamedTuple):
    """What the guards and the call-ID check need of a call an earlier turn proposed."""

    provider_call_id: str
    tool_name: str
    arguments_sha256: str
    turn_index: int
    position: int
    state: str
    error_code: str


def repeat_trip(history: Sequence[PastCall], call: ToolCall) -> Trip | None:
    """Duplicate detection on tool + canonical arguments, against the operation's earlier calls
    (``history``, every call of an earlier turn).

    A call identical to an earlier one, with no other call succeeding since, learns nothing new:
    the first such repeat is answered ``NO_PROGRESS``; a repeat of that repeat escalates.
    Identical calls within one reply are not repeats of each other.
    """
    if not call.arguments_sha256:
        return None
    index, same = call.turn.index, (call.tool_name, call.arguments_sha256)
    earlier = [p for p in history if p.turn_index < index]
    identical = [p for p in earlier if (p.tool_name, p.arguments_sha256) == same]
    if not identical:
        return None
    previous = max(identical, key=lambda p: (p.turn_index, p.position))
    if any(
        p.state == CallState.SUCCEEDED
        and p.turn_index > previous.turn_index
        and (p.tool_name, p.arguments_sha256) != same
        for p in earlier
    ):
        return None
    guard = "repeat_escalate" if previous.error_code == "NO_PROGRESS" else "repeat"
    return Trip(
        guard,
        f"NO_PROGRESS: {call.tool_name} was proposed again with the same arguments and nothing "
        "new happened since",
    )


def progress_made(calls: Sequence[ToolCall], earlier: Set[str]) -> bool:
    """Whether a finished call set brought new information: a successful result whose digest
    is not in ``earlier`` (the result digests of the operation's earlier successful calls)."""
    return any(c.result_sha256 not in earlier for c in calls if c.state == CallState.SUCCEEDED)
