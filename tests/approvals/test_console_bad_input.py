"""Hostile input in the console (deeply nested edited arguments, arguments no JSON reader takes
exactly, NUL in the search box or in an ID of a URL) is answered with a message or a 404, never a
500, and changes nothing."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from approvals.states import ApprovalState
from tests.engine import bundled_replies, start
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState
from toolcalls.typed_json import TOO_DEEP

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

NUL = "\x00"


def _client(username: str) -> Client:
    # raise_request_exception=False: a crash must show as the 500 a browser would get.
    client = Client(raise_request_exception=False)
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


@pytest.fixture
def parked(demo) -> Operation:  # type: ignore[no-untyped-def]
    return start(demo, bundled_replies("refund_approve"))


def _unchanged(operation: Operation) -> None:
    operation.refresh_from_db()
    approval = operation.approvals.get()
    assert operation.state == OperationState.WAITING_APPROVAL
    assert approval.state == ApprovalState.PENDING and approval.edited_by is None
    assert operation.calls.get(tool_name="submit_refund").state == CallState.WAITING_APPROVAL
    assert not LedgerEntry.objects.exists()


@pytest.mark.parametrize("depth", [100, 950, 5000])
def test_deeply_nested_edited_arguments_are_refused_with_a_message(parked, depth) -> None:
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    nested = "[" * depth + "]" * depth
    arguments = f'{{"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": {nested}}}'
    response = _client("operator").post(url, {"arguments": arguments})
    assert response.status_code == 200
    assert TOO_DEEP.encode() in response.content
    _unchanged(parked)


def test_a_nul_in_edited_arguments_is_refused_with_a_message(parked) -> None:
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    arguments = '{"order_id": "ORD-1001", "draft_id": "RD-\\u0000", "amount_cents": 100}'
    response = _client("operator").post(url, {"arguments": arguments})
    assert response.status_code == 200 and b"NUL" in response.content
    response = _client("operator").post(url, {"arguments": arguments.replace("\\u0000", NUL)})
    assert response.status_code == 200 and b"Null characters are not allowed" in response.content
    _unchanged(parked)


@pytest.mark.parametrize(
    ("amount", "refusal"),
    [
        ('3000, "amount_cents": 4999', "amount_cents: given twice in one object"),
        ("9007199254740992", "amount_cents: 9007199254740992 is beyond ±9007199254740991"),
        ("1e20", "amount_cents: 1e+20 is beyond ±9007199254740991"),
    ],
)
def test_edited_arguments_no_reader_takes_exactly_are_refused_on_the_field(
    parked, amount, refusal
) -> None:
    """A member typed twice was read as its last value (3000 then 4999 approved 4999, recorded
    as no edit); a number beyond ±(2**53-1) has no exact canonical form."""
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    arguments = f'{{"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": {amount}}}'
    response = _client("operator").post(url, {"arguments": arguments})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == ["arguments"] and refusal in errors["arguments"][0], errors
    _unchanged(parked)


MEGABYTE = 1_000_000


@pytest.mark.parametrize("field", ["order_id", "amount_cents"])
def test_an_edited_megabyte_argument_is_on_its_error_page_once(parked, field) -> None:
    """The box keeps what was typed; the schema's error quoting it ("'ZZZ…' does not match",
    "'ZZZ…' is not of type 'integer'") is cut with a note instead of quoting it all again."""
    approval = parked.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    arguments = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 100}
    arguments[field] = "Z" * MEGABYTE
    response = _client("operator").post(url, {"arguments": json.dumps(arguments)})
    assert response.status_code == 200
    block = "Z" * 1000
    assert response.content.decode().count(block) == MEGABYTE // 1000, "on the page once"
    (error,) = response.context["form"].errors["arguments"]
    assert error.endswith("more characters not shown: the arguments are below)"), error[-200:]
    assert len(error) < 700
    _unchanged(parked)


@pytest.mark.parametrize("query", [NUL, f"op_{NUL}", f"{NUL}apr_1"])
def test_a_nul_in_the_search_box_is_answered_with_a_message(parked, query) -> None:
    response = _client("support").get(reverse("search"), {"q": query})
    assert response.status_code == 200
    assert b"cannot contain NUL" in response.content
    assert b'data-testid="no-results"' not in response.content


def test_a_nul_in_an_id_of_a_console_url_is_not_found(parked) -> None:
    approval = parked.approvals.get()
    call = parked.calls.get(tool_name="submit_refund")
    client = _client("operator")
    bad_approval, bad_operation = f"{approval.public_id}{NUL}", f"{parked.public_id}{NUL}"
    gets = [
        reverse("approvals:detail", args=[bad_approval]),
        reverse("approvals:decide", args=[bad_approval, "approve"]),
        reverse("operations:detail", args=[bad_operation]),
    ]
    for url in gets:
        assert client.get(url).status_code == 404, url
    posts = [
        reverse("approvals:decide", args=[bad_approval, "approve"]),
        reverse("approvals:decide", args=[bad_approval, "deny"]),
        reverse("operations:extend", args=[bad_operation]),
        reverse("operations:stop", args=[bad_operation]),
        reverse("operations:resolve", args=[bad_operation, call.public_id]),
        reverse("operations:resolve", args=[parked.public_id, f"{call.public_id}{NUL}"]),
    ]
    for url in posts:
        assert client.post(url, {"reason": "x", "resolution": "applied"}).status_code == 404, url
    _unchanged(parked)


def test_a_nul_in_the_queue_cursor_or_filters_shows_the_queue(parked) -> None:
    client = _client("operator")
    for params in ({"after": NUL}, {"tool": NUL}, {"tenant": f"acme{NUL}"}):
        response = client.get(reverse("approvals:queue"), params)
        assert response.status_code == 200, params
