"""Property tests: every adapter reads any payload or stream without raising and always lands
on one of the normalized outcomes, with calls only for TOOL_PROPOSALS."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.base import Outcome, ParsedReply, WireReply
from providers.families import ADAPTERS
from tests.conftest import FIXTURES

CASES = [
    json.loads(path.read_text(encoding="utf-8"))
    for path in sorted((FIXTURES / "providers").rglob("*.json"))
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_normalized(parsed: ParsedReply) -> None:
    assert isinstance(parsed, ParsedReply)
    assert parsed.outcome in Outcome
    if parsed.outcome is not Outcome.TOOL_PROPOSALS:
        assert parsed.calls == ()
    ids = [call.call_id for call in parsed.calls]
    assert all(isinstance(i, str) and i for i in ids)
    for call in parsed.calls:
        assert call.arguments is None or isinstance(call.arguments, dict)
        assert call.arguments_error == (call.arguments is None)
    if parsed.outcome is Outcome.API_FAILURE:
        assert parsed.retryable in (True, False)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _mutate(case: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    payload = copy.deepcopy(case.get("body") if "body" in case else case.get("events"))
    paths = _paths(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        if not path:
            payload = data.draw(json_values)
            break
        parent: Any = payload
        try:
            for step in path[:-1]:
                parent = parent[step]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    key = "body" if "body" in case else "events"
    return {**case, key: payload}


FAMILIES = pytest.mark.parametrize("family", sorted(ADAPTERS))


def _cases(family: str, kind: str | None = None) -> list[dict[str, Any]]:
    found = [c for c in CASES if c["family"] == family and kind in (None, c["kind"])]
    assert found, f"no {kind or ''} fixture cases for {family}"
    return found


@FAMILIES
@PROFILE
@given(data=st.data())
def test_mutated_fixture_payloads(family: str, data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(_cases(family)))
    mutated = _mutate(case, data)
    reply = WireReply.from_case(mutated)
    _assert_normalized(ADAPTERS[case["family"]].parse_reply(reply))


@FAMILIES
@PROFILE
@given(
    kind=st.sampled_from(["response", "stream", "http_error"]),
    status=st.sampled_from([200, 400, 429, 500, 529]),
    body=json_values,
    events=st.lists(
        st.fixed_dictionaries({"event": st.none() | st.text(max_size=30), "data": json_values}),
        max_size=8,
    ),
)
def test_random_payloads(family: str, kind: str, status: int, body: Any, events: list[Any]) -> None:
    reply = WireReply(
        kind=kind, http_status=status, body=body, events=events if kind == "stream" else None
    )
    _assert_normalized(ADAPTERS[family].parse_reply(reply))


@FAMILIES
@PROFILE
@given(data=st.data())
def test_cut_streams_never_hand_over_calls(family: str, data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(_cases(family, "stream")))
    events = case["events"]
    adapter = ADAPTERS[case["family"]]
    whole = adapter.parse_reply(WireReply.from_case(case))
    cut = data.draw(st.integers(0, len(events) - 1))
    parsed = adapter.parse_reply(WireReply.from_case({**case, "events": events[:cut]}))
    _assert_normalized(parsed)
    # Cut before the family's completion marker: nothing is handed over. Cut after it (only
    # trailing events such as a usage chunk lost): the calls are exactly the whole stream's.
    if parsed.outcome not in (Outcome.TRUNCATED, Outcome.API_FAILURE):
        assert (parsed.outcome, parsed.calls) == (whole.outcome, whole.calls)
    else:
        assert parsed.calls == ()


def test_corpus_is_present() -> None:
    assert len(CASES) >= 50, f"fixture corpus not found under {Path(FIXTURES)}"
