"""Canonical JSON and digests (RFC 8785, SHA-256)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, fields
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from toolcalls.binding import (
    Binding,
    CanonicalizationError,
    InexactJson,
    canonical_json,
    digest,
    exact_json_loads,
    request_digest,
)


def test_canonical_form_ignores_key_order_and_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1.0, "é"]}) == b'{"a":[1,"\xc3\xa9"],"b":1}'
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})
    assert digest({"a": 2}) == hashlib.sha256(b'{"a":2}').hexdigest()


def test_values_json_cannot_represent_exactly_are_refused() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json({"amount": 2**60})
    for value, said in [
        ({"amount": 2**60}, "amount: 1152921504606846976 is beyond ±9007199254740991"),
        ({"a": [1.5, 1e20]}, "a/1: 1e+20 is beyond ±9007199254740991"),  # rfc8785: "1000…0"
        ({"a": {"b": 2.0**53}}, "a/b: 9007199254740992.0 is beyond ±9007199254740991"),
        ({"a": float("inf")}, "a: a number past ±1.8e308 is beyond ±9007199254740991"),
        ({"a": -float("inf")}, "a: a number past ±1.8e308 is beyond ±9007199254740991"),
        ({"a": float("nan")}, "a: NaN is not a JSON number"),
    ]:
        with pytest.raises(InexactJson) as refused:
            canonical_json(value)
        assert str(refused.value).startswith(said), refused.value
    assert canonical_json({"a": [9007199254740991.0, -1e15, 1e-300]}) == (
        b'{"a":[9007199254740991,-1000000000000000,1e-300]}'
    )
    with pytest.raises(CanonicalizationError):
        canonical_json({"text": "lone \ud800 surrogate"})
    with pytest.raises(CanonicalizationError):
        canonical_json({1: "a key that is not a string"})
    with pytest.raises(CanonicalizationError):
        canonical_json({"\ud800": "a key that is not valid Unicode"})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a": 1, "a": 2}', "a: given twice in one object"),
        ('{"a": {"b": [{"c": 1, "d": 2, "c": 3}]}}', "a/b/0/c: given twice in one object"),
        ('[{"x": 1}, {"y": 1, "y": 1}]', "1/y: given twice in one object"),
        ('{"n": 9007199254740992}', "n: 9007199254740992 is beyond ±9007199254740991"),
        ('{"n": -9007199254740992}', "n: -9007199254740992 is beyond ±9007199254740991"),
        ('{"n": [1e20]}', "n/0: 1e+20 is beyond ±9007199254740991"),
        ('{"n": 1e400}', "n: a number past ±1.8e308 is beyond ±9007199254740991"),
        ('{"n": [0, 1e-400]}', "n/1: a number written non-zero that a double holds only as 0"),
        ('{"n": -0.0001e-330}', "n: a number written non-zero that a double holds only as 0"),
        ("1" + "0" * 40, "(root): 100000000000… (41 digits) is beyond ±9007199254740991"),
        ('{"first": 1e300, "then": {"x": 1, "x": 2}}', "first: 1e+300 is beyond"),
    ],
)
def test_json_no_reader_takes_exactly_is_refused_naming_its_place(text: str, said: str) -> None:
    with pytest.raises(InexactJson) as refused:
        exact_json_loads(text)
    assert str(refused.value).startswith(said), refused.value
    assert isinstance(refused.value, CanonicalizationError | ValueError)


def test_exact_json_is_read_as_json_is() -> None:
    text = '{"a": [1, 2.5, -9007199254740991, 9007199254740991.0, "x", null, true], "b": {}}'
    assert exact_json_loads(text) == json.loads(text)
    text = "[0.0, -0.0, 0e5, 0.000e-400, 5e-324]"  # zero written as zero; the least double
    assert exact_json_loads(text) == json.loads(text)
    assert all(type(number) is float for number in exact_json_loads(text))
    assert exact_json_loads(b'{"a": {"a": {"a": 1}}}') == {"a": {"a": {"a": 1}}}
    for text in ('{"n": NaN}', '{"n": Infinity}', "{not json"):
        with pytest.raises(ValueError, match=r"not JSON|Expecting"):
            exact_json_loads(text)


#: Strings that stress escaping and key order: control characters, quotes, backslashes, text
#: beyond ASCII, characters past U+FFFF (which UTF-16 orders before U+E000..U+FFFF).
_TEXT = st.text(
    alphabet=st.sampled_from(
        [
            "a",
            "B",
            "\x00",
            "\x1f",
            "\x7f",
            '"',
            "\\",
            "\n",
            "é",
            "\u2028",
            "\ue000",
            "\uffff",
            "\U0001f600",
            "\U00010000",
        ]
    )
    | st.characters(),
    max_size=8,
)
_NUMBERS = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1) | st.floats(
    min_value=-(2**53) + 1, max_value=2**53 - 1
)
_JSON = st.recursive(
    st.none() | st.booleans() | _NUMBERS | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=_JSON)
def test_canonical_json_is_byte_for_byte_what_rfc8785_gives(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except ValueError:  # rfc8785 refuses a lone surrogate, in a key with UnicodeEncodeError
        with pytest.raises(CanonicalizationError):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected


def test_request_digest_binds_call_and_response_ids() -> None:
    base: dict[str, Any] = {
        "tool": "t",
        "schema_version": "v1",
        "arguments": {"a": 1},
        "call_id": "c1",
        "response_id": "r1",
    }
    assert request_digest(**base) != request_digest(**dict(base, call_id="c2"))
    assert request_digest(**base) != request_digest(**dict(base, response_id="r2"))
    assert request_digest(**base) != request_digest(**dict(base, arguments={"a": 2}))


def test_a_binding_s_digest_covers_every_field_as_it_always_has() -> None:
    values: dict[str, Any] = {field.name: f"{field.name}-value" for field in fields(Binding)}
    values["tool_revisions"] = {"input": "i1", "schema_version": "v1"}
    binding = Binding(**values)
    assert binding.as_dict() == asdict(binding)
    expected = hashlib.sha256(canonical_json(asdict(binding))).hexdigest()
    assert binding.sha256() == expected
