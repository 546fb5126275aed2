"""``for_history``: what each family's adapter puts into the history for a reply, given the
engine's renames of recurring call IDs; thought signatures and every other field untouched."""

from __future__ import annotations

import json

import pytest

from providers.adapter import STAND_IN_NAME
from providers.base import WireReply
from providers.families import ADAPTERS, get_adapter
from tests.engine import bundled_replies


def _first_reply(family: str):  # type: ignore[no-untyped-def]
    case = bundled_replies("refund_approve", family)[0]
    return get_adapter(family).parse_reply(WireReply.from_case(case))


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_a_renamed_call_carries_its_new_id_in_the_call_and_the_history(family) -> None:
    adapter = get_adapter(family)
    parsed = _first_reply(family)
    (call,) = parsed.calls
    renamed = adapter.for_history(parsed, {call.call_id: "cg1_renamed"})
    assert [c.call_id for c in renamed.calls] == ["cg1_renamed"]
    before = json.dumps(list(parsed.assistant_items))
    after = json.dumps(list(renamed.assistant_items))
    if call.synthesized:  # a made-up ID is never sent: the history stays as it came
        assert after == before
    else:
        assert call.call_id not in after and "cg1_renamed" in after
        assert after.replace("cg1_renamed", call.call_id) == before


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_a_reply_with_nothing_to_change_goes_into_the_history_as_it_came(family) -> None:
    parsed = _first_reply(family)
    assert get_adapter(family).for_history(parsed, {}) == parsed


@pytest.mark.parametrize(
    ("family", "name", "shown"),
    [
        ("openai_chat", "get_order", "get_order"),
        ("openai_chat", "functions.get_order", STAND_IN_NAME),
        ("openai_responses", "x" * 65, STAND_IN_NAME),
        ("anthropic_messages", "get order", STAND_IN_NAME),
        ("gemini_generate", "default_api:get_order", "default_api:get_order"),
        ("gemini_generate", "1st_tool", STAND_IN_NAME),
        ("gemini_interactions", "get_order()", STAND_IN_NAME),
    ],
)
def test_history_names_follow_each_family_rule(family, name, shown) -> None:
    assert get_adapter(family).history_name(name) == shown
