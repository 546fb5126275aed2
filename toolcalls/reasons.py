"""Reason codes: the machine-readable head of an operation's ``terminal_reason``.

The engine writes every escalation and terminal reason as ``"<CODE>: <message>"`` (``API_FAILURE``
is followed by the provider's reason, then the colon). :func:`reason_code` reads the code back,
so the API, the webhooks and the console show it beside the message without a second stored
field. ``docs/error-codes.md`` explains each code of :data:`REASON_CODES`.
"""

from __future__ import annotations

import re

#: Every code the engine writes into ``terminal_reason``.
REASON_CODES = frozenset(
    {
        # ESCALATED: a guard tripped (toolcalls.guards) or a side effect's outcome is unknown.
        "MAX_TURNS",
        "MAX_TOOL_CALLS",
        "MAX_CALLS_PER_TOOL",
        "DEADLINE",
        "MAX_INPUT_TOKENS",
        "MAX_OUTPUT_TOKENS",
        "MAX_COST",
        "NO_PROGRESS",
        "UNKNOWN_OUTCOME",
        # REFUSED, INCOMPLETE: the model's own ending.
        "REFUSAL",
        "TRUNCATED",
        # FAILED.
        "MALFORMED_REPLY",
        "BINDING_MISMATCH",
        "POISON_TURN",
        "UNSTORABLE_REPLY",
        "UNLOADABLE_RESULT",
        "NO_CREDENTIALS",
        "API_FAILURE",
        # Ended by a person or a service.
        "CANCELLED",
        "STOPPED",
    }
)

_HEAD = re.compile(r"[A-Z][A-Z0-9_]*[A-Z0-9](?=[: ]|$)")


def reason_code(reason: str) -> str | None:
    """The code that ``reason`` (an operation's ``terminal_reason``) starts with, e.g.
    ``"MAX_TURNS"`` for ``"MAX_TURNS: 8 model turns used, limit 8"``; ``None`` for no reason."""
    match = _HEAD.match(reason)
    return match.group(0) if match else None


def with_detail(text: str, detail: str | None) -> str:
    """``"<text> (<detail>)"``, or ``text`` alone when there is no ``detail`` (``None`` or
    empty): a part the provider did not give is left out of a reason, never written as
    ``None``."""
    return f"{text} ({detail})" if detail else text
