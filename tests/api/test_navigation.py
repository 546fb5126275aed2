"""Getting around: an operation's approvals, the ended flag, filters by subject and metadata,
approvals by operation, the cursor beside ``next``, and one name per API key everywhere."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.test import APIClient

from tests.api.support import (
    API,
    DECIDE,
    READ,
    WRITE,
    create,
    create_body,
    error_of,
    fields_of,
    get,
    keyed_client,
    post,
)
from tests.replies import final
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Operation
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, DECIDE, name="checkout")[0]


@pytest.fixture
def reviewer(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, DECIDE, name="review")[0]


def _ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_an_operation_lists_its_approvals_in_every_state(
    client: APIClient, reviewer: APIClient
) -> None:
    first, second = create(client)["id"], create(client)["id"]
    (pending,) = _ids(get(client, f"/operations/{first}/approvals"))
    assert (
        post(reviewer, f"/approvals/{pending}/decide", {"decision": "approve"}).status_code == 200
    )
    listed = get(client, f"/operations/{first}/approvals").json()
    assert [(a["id"], a["state"], a["operation"]) for a in listed["results"]] == [
        (pending, "APPROVED", first)
    ]
    assert listed["cursor"] is None and listed["next"] is None
    assert _ids(get(client, f"/operations/{second}/approvals")) != [pending]
    assert _ids(get(client, f"/operations/{second}/approvals", {"limit": 1}))
    done = create(client, replies=[final()])["id"]
    assert _ids(get(client, f"/operations/{done}/approvals")) == []
    error_of(get(client, "/operations/op_nope/approvals"), 404, "not_found")


def test_approvals_filter_by_operation(client: APIClient) -> None:
    first, second = create(client)["id"], create(client)["id"]
    everything = _ids(get(client, "/approvals"))
    assert len(everything) == 2
    (of_first,) = _ids(get(client, "/approvals", {"operation": first}))
    (of_second,) = _ids(get(client, "/approvals", {"operation": second}))
    assert {of_first, of_second} == set(everything)
    # An ID the tenant has no operation of is refused, as an unknown state is, not listed empty.
    error_of(get(client, "/approvals", {"operation": "op_nope"}), 400, "invalid_request")
    assert set(_ids(get(client, "/approvals", {"operation": ""}))) == {of_first, of_second}
    assert _ids(get(client, "/approvals", {"operation": first, "state": "DENIED"})) == []


def test_ended_says_whether_anything_more_will_happen(client: APIClient) -> None:
    parked = create(client)
    assert parked["ended"] is False
    cancelled = post(client, f"/operations/{parked['id']}/cancel", {"reason": "left"}).json()
    assert (cancelled["state"], cancelled["ended"]) == (S.CANCELLED, True)
    done = create(client, replies=[final()])
    assert (done["state"], done["ended"]) == (S.COMPLETED, True)
    escalated = create(client, budgets={"max_turns": 1})
    assert (escalated["state"], escalated["ended"]) == (S.ESCALATED, False)


def test_operations_filter_by_subject_ref(client: APIClient) -> None:
    mine = create(client, replies=[final()], subject_ref="cus_1001")["id"]
    theirs = create(client, replies=[final()], subject_ref="cus_2002")["id"]
    assert _ids(get(client, "/operations", {"subject_ref": "cus_1001"})) == [mine]
    assert _ids(get(client, "/operations", {"subject_ref": "cus_2002"})) == [theirs]
    assert _ids(get(client, "/operations", {"subject_ref": "cus_9999"})) == []


def test_operations_filter_by_metadata_pairs(client: APIClient) -> None:
    def started(metadata: dict[str, str]) -> str:
        return create(client, replies=[final()], metadata=metadata)["id"]

    a = started({"ticket": "T-1", "team": "refunds"})
    b = started({"ticket": "T-2", "team": "refunds", "url": "https://x.example/a:b"})
    started({})

    def listed(*pairs: str) -> list[str]:
        query = "&".join(f"metadata={pair}" for pair in pairs)
        return _ids(client.get(f"{API}/operations?{query}"))

    assert listed("ticket:T-1") == [a]
    assert listed("team:refunds") == [b, a]
    assert listed("team:refunds", "ticket:T-2") == [b]
    assert listed("team:refunds", "ticket:T-3") == []
    assert listed("url:https://x.example/a:b") == [b]  # split at the first colon only
    assert listed("ticket:") == []
    for wrong in ("ticket", ":T-1"):
        response = client.get(f"{API}/operations?metadata={wrong}")
        assert set(fields_of(error_of(response, 400, "invalid_request"))) == {"metadata"}


@pytest.mark.parametrize("key", ["a:b", "", " ", "\u200b", "k" * 101])
def test_a_metadata_key_no_filter_could_ask_for_is_refused(client: APIClient, key: str) -> None:
    """A key with a colon (the filter splits at the first one), or without a visible character,
    or over 100 characters, is 400 naming it; nothing starts."""
    response = post(client, "/operations", create_body(metadata={"ok": "1", key: "v"}))
    error = error_of(response, 400, "invalid_request")
    field = f"metadata.{key}" if key else "metadata"  # an empty name adds nothing to the path
    assert set(fields_of(error)) == {field}
    assert "no colon" in fields_of(error)[field][0]
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    "key", ["team\u202e", "\u2066team\u2069", "te\tam", "team\u200d", "team\u3164"]
)
def test_a_metadata_key_with_a_character_that_does_not_show_is_refused(
    client: APIClient, key: str
) -> None:
    """A key people read must show what it holds: a bidirectional control, a control or a
    character that shows nothing would let ``team`` pass for another ``team``. 400 naming it;
    nothing starts."""
    response = post(client, "/operations", create_body(metadata={"team": "a", key: "b"}))
    error = error_of(response, 400, "invalid_request")
    assert set(fields_of(error)) == {f"metadata.{key}"}
    assert "only characters that show" in fields_of(error)[f"metadata.{key}"][0]
    assert not Operation.objects.exists()


def test_a_metadata_key_may_hold_plain_spaces_and_any_script(client: APIClient) -> None:
    labels = {"support team": "refunds", "équipe": "remboursements", "فريق": "المبالغ"}
    assert create(client, replies=[final()], metadata=labels)["metadata"] == labels


def test_cursor_is_the_next_pages_cursor(client: APIClient) -> None:
    ids = [create(client, replies=[final()])["id"] for _ in range(3)]
    seen: list[str] = []
    page = get(client, "/operations", {"limit": 2}).json()
    while True:
        seen += [row["id"] for row in page["results"]]
        if page["cursor"] is None:
            assert page["next"] is None
            break
        assert parse_qs(urlsplit(page["next"]).query)["cursor"] == [page["cursor"]]
        page = get(client, "/operations", {"limit": 2, "cursor": page["cursor"]}).json()
    assert seen == ids[::-1]


def test_one_name_per_api_key_in_the_audit_and_the_api(
    client: APIClient, reviewer: APIClient
) -> None:
    operation_id = create(client)["id"]
    (approval,) = get(client, f"/operations/{operation_id}/approvals").json()["results"]
    decided = post(reviewer, f"/approvals/{approval['id']}/decide", {"decision": "approve"}).json()
    assert (decided["requested_by"], decided["decided_by"]) == (
        "service:checkout",
        "service:review",
    )
    events = get(client, f"/operations/{operation_id}/events", {"limit": 500}).json()["results"]
    actors = {event["actor"] for event in events}
    assert {"service:checkout", "service:review"} <= actors
    assert all(a.startswith(("service:", "system:")) for a in actors), actors
    operation = Operation.objects.get(public_id=operation_id)
    assert set(operation.events.values_list("actor", flat=True)) == actors
