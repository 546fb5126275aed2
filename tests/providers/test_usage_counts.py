"""Token counts as a provider reports them: never fewer than it claims, so a token or cost
budget is never passed unseen; nonsense counts nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest

from providers.base import WireReply
from providers.families import get_adapter
from providers.payload import MAX_COUNT, count
from tests import replies as r


@pytest.mark.parametrize(
    ("value", "counted"),
    [
        (120, 120),
        (0, 0),
        (1.5, 2),  # a fraction is rounded up
        (10**20, MAX_COUNT),  # more than the column holds counts as the most it holds
        (1e20, MAX_COUNT),
        (math.inf, MAX_COUNT),
        (-5, 0),
        (math.nan, 0),
        (True, 0),
        ("120", 0),
        (None, 0),
    ],
)
def test_a_count_is_never_fewer_than_claimed(value: Any, counted: int) -> None:
    assert count(value) == counted


def test_a_reply_claiming_an_impossible_usage_counts_the_most_a_turn_holds() -> None:
    reply = r.response(r.message("done"))
    reply["body"]["usage"] = {"input_tokens": 10**20, "output_tokens": 1.5}
    wire = WireReply(kind="response", http_status=200, body=reply["body"])
    parsed = get_adapter("openai_responses").parse_reply(wire)
    assert parsed.usage is not None
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (MAX_COUNT, 2)
