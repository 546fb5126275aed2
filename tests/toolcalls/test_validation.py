"""The validation chain: strict arguments, then registry → schema → authorization → policy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import OperationFactory, OrderFactory, TenantFactory
from toolcalls.envelopes import ErrorCode
from toolcalls.models import Operation
from toolcalls.services.validation import Verdict, arguments_normalize, call_check

pytestmark = pytest.mark.django_db


def test_equal_numbers_have_one_canonical_form_and_digest() -> None:
    a = arguments_normalize(
        arguments={"n": 30.0, "a": 1}, arguments_error=False, raw_arguments=None
    )
    b = arguments_normalize(arguments={"a": 1, "n": 30}, arguments_error=False, raw_arguments=None)
    assert a.value == b.value == {"a": 1, "n": 30}
    assert a.canonical == b.canonical == '{"a":1,"n":30}'
    assert a.sha256 == b.sha256 and len(a.sha256) == 64


@pytest.mark.parametrize(
    ("raw", "value", "problem"),
    [
        ('{"a": 1, "a": 2}', {"a": 2}, "repeat a member name"),
        ("[1]", None, "exactly one JSON object"),
        ("{not json", None, "must be exactly one JSON object"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", None, "nested too deeply to read"),
        ('{"n": 9007199254740993}', {"n": 9007199254740993}, "cannot be used exactly"),
        ('{"s": "a\\u0000b"}', {"s": "a\x00b"}, "NUL"),
    ],
)
def test_unusable_arguments_say_why(raw: str, value: dict[str, Any] | None, problem: str) -> None:
    result = arguments_normalize(arguments=value, arguments_error=value is None, raw_arguments=raw)
    assert result.value is None and problem in result.problem


@pytest.mark.parametrize("number", [1e20, 2.0**53, -1e300])
def test_a_parsed_number_beyond_exact_json_is_unusable_not_an_error(number: float) -> None:
    """Arguments given as an object (no text to read again): canonical JSON writes 1e20 as
    100000000000000000000, which read back was an integer no digest takes (raised)."""
    result = arguments_normalize(arguments={"n": number}, arguments_error=False, raw_arguments=None)
    assert result.value is None and "n: " in result.problem
    assert "is beyond ±9007199254740991" in result.problem


def _check(operation: Operation, tool: str, arguments: dict[str, Any]) -> Verdict:
    normalized = arguments_normalize(arguments=arguments, arguments_error=False, raw_arguments=None)
    return call_check(operation=operation, tool_name=tool, arguments=normalized)


def test_a_tool_not_offered_to_the_operation_is_unknown() -> None:
    operation = OperationFactory.create(tool_names=["get_order"])
    verdict = _check(operation, "submit_refund", {"order_id": "ORD-1"})
    assert verdict.error_code == ErrorCode.UNKNOWN_TOOL
    assert "get_order" in verdict.error_message


def test_schema_problems_are_listed_for_the_model() -> None:
    operation = OperationFactory.create()
    verdict = _check(operation, "get_order", {"order_id": "nope", "extra": 1})
    assert verdict.error_code == ErrorCode.INVALID_ARGUMENTS
    assert "schema" in verdict.error_message


def test_an_inactive_tenant_may_not_use_tools() -> None:
    operation = OperationFactory.create(tenant=TenantFactory.create(is_active=False))
    verdict = _check(operation, "get_order", {"order_id": "ORD-1001"})
    assert verdict.error_code == ErrorCode.UNAUTHORIZED


def test_the_policy_decides_last_whether_a_human_approves() -> None:
    operation = OperationFactory.create()
    OrderFactory.create(tenant_ref=operation.tenant.slug)
    small = _check(
        operation, "submit_refund", {"order_id": "ORD-1001", "draft_id": "d", "amount_cents": 100}
    )
    large = _check(
        operation, "submit_refund", {"order_id": "ORD-1001", "draft_id": "d", "amount_cents": 9999}
    )
    assert not small.rejected and small.approval_reason is None
    assert not large.rejected and large.approval_reason
    assert large.spec is not None and large.spec.name == "submit_refund"
