"""Operations endpoints: start, list, retrieve, cancel, extend, stop, turns, calls, events, tools
and health, over HTTP with API keys. Replay operations run in-process (``eager_tasks``)."""

from __future__ import annotations

import base64
import itertools
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.api.support import (
    AUDIT,
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
from toolcalls.actors import Actor
from toolcalls.api import views
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Operation, ReplayScript
from toolcalls.services.agents import AgentDefinition, agent_create
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
SYSTEM = Actor.system("tests")
OPERATION_FIELDS = {
    "id", "state", "ended", "tenant", "subject_ref", "family", "model", "transport", "stream",
    "input", "tools", "budgets", "counters", "deadline_at", "final_text", "terminal_reason",
    "reason_code", "metadata", "parent", "follow_ups", "created_at", "updated_at", "agent",
    "instructions", "messages", "settings",
}  # fmt: skip


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, name="billing")[0]


def _escalated(client: APIClient) -> dict[str, Any]:
    """A refund that stops after one model turn (``max_turns: 1``) and escalates."""
    operation = create(client, budgets={"max_turns": 1})
    assert operation["state"] == S.ESCALATED, operation
    return operation


# --- create ---------------------------------------------------------------------------------


def test_create_returns_the_operation_the_replay_ran(client: APIClient) -> None:
    body = create_body(
        tools=["get_order", "create_refund_draft", "submit_refund"],
        budgets={"max_turns": 8, "max_cost_usd": 1.5},
        metadata={"ticket": "T-4821"},
    )
    response = post(client, "/operations", body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert set(data) == OPERATION_FIELDS
    assert data["id"].startswith("op_")
    assert data["tenant"] == "acme"
    assert (data["family"], data["model"], data["transport"]) == (
        "openai_responses",
        "gpt-5.1",
        "replay",
    )
    assert data["input"] == body["input"]
    assert data["tools"] == ["get_order", "create_refund_draft", "submit_refund"]
    assert data["budgets"]["max_turns"] == 8 and data["budgets"]["max_cost_usd"] == 1.5
    assert data["metadata"] == {"ticket": "T-4821"}
    # The scripted model ran in-process up to the refund that needs an operator.
    assert data["state"] == S.WAITING_APPROVAL
    assert data["counters"]["turns"] == 3 and data["counters"]["tool_calls"] == 3
    assert data["final_text"] is None and data["terminal_reason"] is None
    assert data["reason_code"] is None and data["ended"] is False
    operation = Operation.objects.get(public_id=data["id"])
    assert operation.requested_by.api_keys.get().name == "billing"


def test_create_defaults_to_every_registered_tool(client: APIClient) -> None:
    data = create(client, replies=[final("Hello!")])
    assert data["state"] == S.COMPLETED and data["final_text"] == "Hello!"
    assert {"get_order", "create_refund_draft", "submit_refund"} <= set(data["tools"])


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"family": None, "model": None, "input": None, "subject_ref": None},
         {"family", "model", "input", "subject_ref"}),
        ({"model": "-bad model"}, {"model"}),
        ({"input": ""}, {"input"}),
        ({"transport": "carrier-pigeon"}, {"transport"}),
        ({"replies": None}, {"replies"}),
        ({"replies": []}, {"replies"}),
        ({"replies": [{"kind": "nonsense"}]}, {"replies"}),
        ({"transport": "live"}, {"replies"}),
        ({"budgets": {"max_turns": "many"}}, {"budgets"}),
        ({"budgets": {"max_turns": True}}, {"budgets"}),
        ({"budgets": {"max_turns": "5"}}, {"budgets"}),
        ({"budgets": {"max_wishes": 3}}, {"budgets"}),
        ({"tools": "get_order"}, {"tools"}),
        ({"tools": ["get_order", "launch_rocket"]}, {"tools"}),
        ({"metadata": {"ticket": ["T-1"]}}, {"metadata"}),
    ],
)  # fmt: skip
def test_create_validation_errors_name_the_fields(
    client: APIClient, overrides: dict[str, Any], fields: set[str]
) -> None:
    body = {k: v for k, v in create_body(**overrides).items() if v is not None}
    error = error_of(post(client, "/operations", body), 400, "invalid_request")
    assert {name.split(".")[0] for name in fields_of(error)} == fields, error
    assert not Operation.objects.exists()


def test_a_tool_named_twice_is_400_naming_tools(client: APIClient) -> None:
    tools = ["get_order", "submit_refund", "get_order"]
    error = error_of(post(client, "/operations", create_body(tools=tools)), 400, "invalid_request")
    assert fields_of(error) == {
        "tools": ["Each name may be given once; given more than once: get_order."]
    }
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    ("replies", "message"),
    [
        ([], "(root): [] should be non-empty"),
        ([{"kind": "nonsense"}], "0: "),
    ],
)
def test_a_wrong_reply_is_named_by_where_it_is_and_nothing_else(
    client: APIClient, replies: list[Any], message: str
) -> None:
    error = error_of(
        post(client, "/operations", create_body(replies=replies)), 400, "invalid_request"
    )
    [said] = fields_of(error)["replies"]
    assert said.startswith(message), said


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (
            {"kind": "response", "http_status": 500, "body": {"error": {"message": "boom"}}},
            "1/http_status: a response reply has a 2xx status, not 500: an error status is an "
            "http_error",
        ),
        (
            {"kind": "http_error", "http_status": 200, "body": {}},
            "1/http_status: an http_error reply has a 4xx or 5xx status, not 200: a model's reply "
            "is a response or a stream",
        ),
        (
            {"kind": "response", "http_status": 200, "body": {"choices": []}},
            "1/body: not a reply of the openai_responses family: ",
        ),
    ],
)
def test_a_reply_that_could_only_fail_is_refused_before_anything_starts(
    client: APIClient, reply: dict[str, Any], said: str
) -> None:
    body = create_body(replies=[final("Hello."), reply])
    error = error_of(post(client, "/operations", body), 400, "invalid_request")
    [field] = fields_of(error)["replies"]
    assert field.startswith(said), field
    assert error["message"] == f"replies/{field}"
    assert not Operation.objects.exists()
    assert not ReplayScript.objects.exists()


def test_replies_are_checked_for_the_family_of_the_agent(client: APIClient, demo: DemoSeed) -> None:
    definition: AgentDefinition = {"family": "anthropic_messages", "model": "claude-test"}
    agent_create(tenant=demo.tenant, name="claude", definition=definition, actor=SYSTEM)
    body = {k: v for k, v in create_body(replies=[final()]).items() if k not in ("family", "model")}
    error = error_of(
        post(client, "/operations", {**body, "agent": "claude"}), 400, "invalid_request"
    )
    assert fields_of(error)["replies"][0].startswith(
        "0/body: not a reply of the anthropic_messages"
    )


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"budgets": {"max_turns": 1000}}, "bad_budget"),
        ({"budgets": {"max_turns": -1}}, "bad_budget"),
        ({"transport": "live", "replies": None}, "no_credentials"),
    ],
)
def test_create_refusals_of_the_service_keep_its_code(
    client: APIClient, overrides: dict[str, Any], code: str
) -> None:
    body = {k: v for k, v in create_body(**overrides).items() if v is not None}
    error = error_of(post(client, "/operations", body), 400, code)
    assert error["message"]
    assert not Operation.objects.exists()
    assert not ReplayScript.objects.exists()  # a refused start keeps nothing


@pytest.mark.parametrize("value", [1000, -1, 0])
def test_a_bad_budget_keeps_its_code_and_names_the_budget(client: APIClient, value: Any) -> None:
    body = create_body(budgets={"max_cost_usd": 1.5, "max_turns": value})
    error = error_of(post(client, "/operations", body), 400, "bad_budget")
    assert fields_of(error) == {"budgets.max_turns": [error["message"]]}
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    "budgets",
    [{"max_turns": 3.0}, {"max_parallel": 2.0}, {"max_turns": 2.5}, {"max_tool_calls": 1e1}],
)
def test_a_budget_that_counts_takes_a_json_integer(
    client: APIClient, budgets: dict[str, float]
) -> None:
    """As every integer field: 3.0 was stored as 3 (and 2.5 refused as bad_budget); the
    schema says integer, docs/api.md not 5.0."""
    response = post(client, "/operations", create_body(budgets=budgets))
    error = error_of(response, 400, "invalid_request")
    (name,) = budgets
    assert fields_of(error) == {f"budgets.{name}": ["Must be a JSON integer, not a number."]}
    assert not Operation.objects.exists()
    wrong = post(client, "/operations", create_body(budgets={"max_turns": "3"}))
    assert fields_of(error_of(wrong, 400, "invalid_request")) == {
        "budgets.max_turns": ["Must be a JSON integer, not a string."]
    }
    given = {"max_turns": 8, "max_cost_usd": 2.0, "deadline_s": 600.5}  # 2.0: not a count
    data = create(client, budgets=given)
    assert {name: data["budgets"][name] for name in given} == given


def test_unknown_family_is_refused_with_the_families_it_knows(client: APIClient) -> None:
    error = error_of(
        post(client, "/operations", create_body(family="openai_completions")),
        400,
        "invalid_request",
    )
    assert list(fields_of(error)) == ["family"]
    assert not Operation.objects.exists()


def test_a_body_that_is_not_json_is_malformed(client: APIClient) -> None:
    response = client.post(
        "/api/v1/operations",
        data="{not json",
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )
    error_of(response, 400, "malformed_request")


# --- list -----------------------------------------------------------------------------------


def test_list_is_newest_first_and_paged_by_cursor(client: APIClient) -> None:
    ids = [create(client, replies=[final(f"Hello {n}.")])["id"] for n in range(5)]
    seen: list[str] = []
    page = get(client, "/operations", {"limit": 2})
    while True:
        assert page.status_code == 200, page.content
        body = page.json()
        assert set(body) == {"next", "previous", "cursor", "results"}
        assert len(body["results"]) <= 2
        seen += [row["id"] for row in body["results"]]
        if not body["next"]:
            break
        page = client.get(body["next"])
    assert seen == ids[::-1]


def test_list_filters_by_state_family_and_creation_time(client: APIClient) -> None:
    parked = create(client)["id"]
    done = create(client, replies=[final()])["id"]

    def listed(**params: str) -> list[str]:
        response = get(client, "/operations", params)
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert listed(state=S.WAITING_APPROVAL) == [parked]
    assert listed(state=S.COMPLETED) == [done]
    assert listed(state=S.FAILED) == []
    assert listed(family="openai_responses") == [done, parked]
    assert listed(family="anthropic_messages") == []
    Operation.objects.filter(public_id=parked).update(created_at=timezone.now() - timedelta(days=2))
    yesterday = (timezone.now() - timedelta(days=1)).isoformat()
    assert listed(created_after=yesterday) == [done]
    assert listed(created_before=yesterday) == [parked]
    assert listed(created_after=yesterday, state=S.WAITING_APPROVAL) == []


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("yesterday", "must be an ISO 8601 date-time"),
        ("2025-13-01T00:00:00Z", "must be an ISO 8601 date-time"),
        ("2025-02-30T10:00:00Z", "must be an ISO 8601 date-time"),
        ("9999-12-31T23:59:59-14:00", "is out of range"),  # past year 9999 in UTC
        ("0001-01-01T00:00:00+14:00", "is out of range"),  # before year 1 in UTC
    ],
)
def test_a_bad_date_filter_is_400(client: APIClient, value: str, said: str) -> None:
    for name in ("created_after", "created_before"):
        error = error_of(get(client, "/operations", {name: value}), 400, "invalid_request")
        assert list(fields_of(error)) == [name]
        assert error["message"].startswith(f"{name} {said}"), error


@pytest.mark.parametrize(
    ("name", "value"), [("state", "bogus"), ("state", "completed"), ("family", "openai")]
)
def test_an_unknown_filter_value_is_400_not_an_empty_list(
    client: APIClient, name: str, value: str
) -> None:
    error = error_of(get(client, "/operations", {name: value}), 400, "invalid_request")
    assert list(fields_of(error)) == [name]
    assert "must be one of" in error["message"]


def test_a_cursor_from_another_list_or_tampered_with_is_400(client: APIClient) -> None:
    first, second = (create(client, replies=[final()])["id"] for _ in range(2))
    events = get(client, f"/operations/{first}/events", {"limit": 1}).json()
    foreign = parse_qs(urlsplit(events["next"]).query)["cursor"][0]  # a position by seq
    page = get(client, "/operations", {"limit": 1}).json()
    own = parse_qs(urlsplit(page["next"]).query)["cursor"][0]
    encoded, signature = own.rsplit(":", 1)
    position = base64.b64encode(b"p=2999-01-01+00%3A00%3A00%2B00%3A00").decode()
    forged = f"{position}:{signature}"  # a well-formed position under another signature
    unsigned = base64.b64encode(b"p=abc").decode()
    for cursor in (foreign, forged, encoded, unsigned, "garbage"):
        error_of(get(client, "/operations", {"cursor": cursor}), 400, "invalid_cursor")
    # The same position is refused by another list of the same ordering, taken by its own.
    other = f"/operations/{second}/events"
    error_of(get(client, other, {"cursor": foreign}), 400, "invalid_cursor")
    assert get(client, f"/operations/{first}/events", {"cursor": foreign}).status_code == 200
    assert get(client, "/operations", {"cursor": own}).json()["results"][0]["id"] == first


def test_a_cursor_belongs_to_its_lists_filters(client: APIClient) -> None:
    """A cursor is signed for its path and its filters (every query parameter but ``cursor``
    and ``limit``, in any order): ``next`` and ``previous`` keep them, ``limit`` may change,
    and under other filters the cursor is 400 ``invalid_cursor``."""
    labels = {"team": "refunds", "ticket": "T-1"}
    ids = [create(client, replies=[final()], metadata=labels)["id"] for _ in range(3)]
    plain = get(client, "/operations", {"limit": 1}).json()["cursor"]
    empty = {"state": "", "family": "", "subject_ref": "", "cursor": plain}
    unfiltered = get(client, "/operations", empty)
    assert unfiltered.status_code == 200  # an empty filter is no filter
    assert [row["id"] for row in unfiltered.json()["results"]] == ids[1::-1]
    for filters in ({"state": S.REFUSED}, {"state": S.COMPLETED}):
        error_of(get(client, "/operations", {**filters, "cursor": plain}), 400, "invalid_cursor")
    query = "limit=1&metadata=ticket%3AT-1&state=COMPLETED&metadata=team%3Arefunds"
    page = client.get(f"/api/v1/operations?{query}").json()
    assert client.get(page["next"]).json()["results"][0]["id"] == ids[1]
    reordered = "metadata=team%3Arefunds&state=COMPLETED&metadata=ticket%3AT-1&limit=5"
    cursor = urlencode({"cursor": page["cursor"]})
    later = client.get(f"/api/v1/operations?{reordered}&{cursor}")
    assert [row["id"] for row in later.json()["results"]] == ids[1::-1]
    twice = client.get(f"/api/v1/operations?{reordered}&metadata=team%3Arefunds&{cursor}")
    assert twice.status_code == 200, twice.content  # a value given twice is one filter
    back = client.get(client.get(page["next"]).json()["previous"]).json()
    assert [row["id"] for row in back["results"]] == [ids[2]]
    for other in ("state=COMPLETED", "metadata=team%3Arefunds&state=COMPLETED", ""):
        response = client.get(f"/api/v1/operations?{other}&{cursor}")
        error_of(response, 400, "invalid_cursor")


@pytest.mark.parametrize("limit", ["0", "-5", "abc", "201", "1.5"])
def test_a_limit_out_of_range_is_400(client: APIClient, limit: str) -> None:
    error = error_of(get(client, "/operations", {"limit": limit}), 400, "invalid_request")
    assert list(fields_of(error)) == ["limit"]
    assert "from 1 to 200" in error["message"]


def test_a_date_without_offset_is_read_in_the_server_time_zone(client: APIClient) -> None:
    done = create(client, replies=[final()])["id"]
    response = get(client, "/operations", {"created_before": "2999-01-01T00:00:00"})
    assert response.status_code == 200, response.content
    assert [row["id"] for row in response.json()["results"]] == [done]


# --- retrieve, cancel -----------------------------------------------------------------------


def test_retrieve(client: APIClient) -> None:
    created = create(client)
    response = get(client, f"/operations/{created['id']}")
    assert response.status_code == 200
    assert response.json() == created
    error_of(get(client, "/operations/op_doesnotexist"), 404, "not_found")


def test_cancel_then_cancel_again_is_409(client: APIClient) -> None:
    operation = create(client)
    error = error_of(
        post(client, f"/operations/{operation['id']}/cancel", {}), 400, "invalid_request"
    )
    assert set(fields_of(error)) == {"reason"}
    response = post(client, f"/operations/{operation['id']}/cancel", {"reason": "customer left"})
    assert response.status_code == 200, response.content
    assert response.json()["state"] == S.CANCELLED
    assert response.json()["terminal_reason"] == "CANCELLED: customer left"
    again = post(client, f"/operations/{operation['id']}/cancel", {"reason": "again"})
    error = error_of(again, 409, "already_ended")
    assert "CANCELLED" in error["message"]
    error_of(post(client, "/operations/op_nope/cancel", {"reason": "x"}), 404, "not_found")


# --- extend, stop ---------------------------------------------------------------------------


def test_extend_an_escalated_operation_resumes_it(client: APIClient) -> None:
    operation = _escalated(client)
    url = f"/operations/{operation['id']}/extend"
    refused = error_of(post(client, url, {"budgets": {"max_turns": 1000}}), 400, "bad_budget")
    assert set(fields_of(refused)) == {"budgets.max_turns"}
    refused = error_of(post(client, url, {"budgets": {"max_turns": 5.0}}), 400, "invalid_request")
    assert fields_of(refused) == {"budgets.max_turns": ["Must be a JSON integer, not a number."]}
    error_of(post(client, url, {"budgets": {"max_turns": 1}}), 409, "still_over")
    response = post(client, url, {"budgets": {"max_turns": 10}, "note": "customer is waiting"})
    assert response.status_code == 200, response.content
    # It resumed where it stopped and ran on to the refund that needs an operator.
    data = get(client, f"/operations/{operation['id']}").json()
    assert data["state"] == S.WAITING_APPROVAL
    assert data["budgets"]["max_turns"] == 10
    error_of(post(client, url, {"budgets": {"max_turns": 20}}), 409, "not_escalated")


@pytest.mark.parametrize("none", ["left out", None, ""])
def test_an_extension_without_a_note_records_a_null_note(client: APIClient, none: Any) -> None:
    operation = _escalated(client)
    body = {"budgets": {"max_turns": 10}} | ({} if none == "left out" else {"note": none})
    response = post(client, f"/operations/{operation['id']}/extend", body)
    assert response.status_code == 200, response.content
    events = get(client, f"/operations/{operation['id']}/events").json()["results"]
    (extended,) = [e for e in events if "extended" in e["details"]]
    assert extended["details"] == {"extended": {"max_turns": 10}, "note": None}


def test_stop_an_escalated_operation(client: APIClient) -> None:
    operation = _escalated(client)
    url = f"/operations/{operation['id']}/stop"
    error_of(post(client, url, {"reason": "   "}), 400, "invalid_request")
    response = post(client, url, {"reason": "the customer withdrew"})
    assert response.status_code == 200, response.content
    assert response.json()["state"] == S.STOPPED
    assert response.json()["terminal_reason"] == "STOPPED: the customer withdrew"
    error_of(post(client, url, {"reason": "again"}), 409, "already_ended")


@pytest.mark.parametrize(("action", "body"), [("extend", {}), ("stop", {"reason": "why"})])
def test_extend_and_stop_need_an_escalated_operation(
    client: APIClient, action: str, body: dict[str, Any]
) -> None:
    operation = create(client)
    error = error_of(
        post(client, f"/operations/{operation['id']}/{action}", body), 409, "not_escalated"
    )
    assert "WAITING_APPROVAL" in error["message"]
    assert get(client, f"/operations/{operation['id']}").json()["state"] == S.WAITING_APPROVAL


# --- turns, calls, events -------------------------------------------------------------------


def test_turns_in_order(client: APIClient) -> None:
    operation = create(client)
    response = get(client, f"/operations/{operation['id']}/turns")
    assert response.status_code == 200, response.content
    turns = response.json()["results"]
    assert [t["turn"] for t in turns] == [0, 1, 2]
    assert {t["outcome"] for t in turns} == {"TOOL_PROPOSALS"}
    assert all(t["usage"]["input_tokens"] > 0 for t in turns)
    assert "request_body" not in turns[0] and "reply" not in turns[0]


def test_calls_show_protected_audit_only_with_the_audit_scope(demo: DemoSeed) -> None:
    reader, _ = keyed_client(demo.tenant, READ, WRITE)
    auditor, _ = keyed_client(demo.tenant, READ, AUDIT)
    operation = create(reader)
    url = f"/operations/{operation['id']}/calls"
    calls = get(reader, url).json()["results"]
    assert [c["tool"] for c in calls] == ["get_order", "create_refund_draft", "submit_refund"]
    assert [c["state"] for c in calls] == ["SUCCEEDED", "SUCCEEDED", "WAITING_APPROVAL"]
    assert all(c["id"].startswith("tc_") for c in calls)
    assert all("protected_audit" not in c for c in calls)
    audited = get(auditor, url).json()["results"]
    assert all("protected_audit" in c for c in audited)
    assert any(c["protected_audit"] for c in audited)
    assert [{k: v for k, v in c.items() if k != "protected_audit"} for c in audited] == calls


def test_events_are_the_hash_chain_in_order(client: APIClient) -> None:
    operation = create(client)
    events: list[dict[str, Any]] = []
    page = get(client, f"/operations/{operation['id']}/events", {"limit": 5})
    while True:
        assert page.status_code == 200, page.content
        events += page.json()["results"]
        if not page.json()["next"]:
            break
        page = client.get(page.json()["next"])
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["kind"] == "operation.created"
    for earlier, later in itertools.pairwise(events):
        assert later["prev_hash"] == earlier["hash"]
    transitions = [e for e in events if e["kind"] == "operation.transition"]
    assert transitions[-1]["to_state"] == S.WAITING_APPROVAL
    assert any((e["approval"] or "").startswith("apr_") for e in events)
    assert all(e["approval"] != "" and e["from_state"] != "" for e in events)


@pytest.mark.parametrize("nested", ["turns", "calls", "events"])
def test_nested_lists_of_an_unknown_operation_are_404(client: APIClient, nested: str) -> None:
    error_of(get(client, f"/operations/op_nope/{nested}"), 404, "not_found")


# --- tools, health --------------------------------------------------------------------------


def test_tools_catalogue(client: APIClient) -> None:
    response = get(client, "/tools")
    assert response.status_code == 200, response.content
    tools = {tool["name"]: tool for tool in response.json()}
    assert {"get_order", "create_refund_draft", "submit_refund"} <= set(tools)
    submit = tools["submit_refund"]
    assert set(submit) == {
        "name", "description", "parameters", "schema_version", "risk", "timeout_ms", "approval",
        "enabled", "overrides",
    }  # fmt: skip
    assert submit["risk"] == "irreversible"
    assert submit["parameters"]["required"] == ["order_id", "draft_id", "amount_cents"]
    assert set(submit["approval"]) == {"policy", "revision"}
    assert tools["get_order"]["risk"] == "read"


def test_health_needs_no_key() -> None:
    anonymous = APIClient()
    live = get(anonymous, "/health/live")
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    ready = get(anonymous, "/health/ready")
    assert ready.status_code == 200, ready.content
    assert ready.json() == {"status": "ok", "checks": {"database": True, "broker": True}}


def test_readiness_is_503_when_the_broker_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "_broker_ok", lambda: False)
    ready = get(APIClient(), "/health/ready")
    assert ready.status_code == 503
    assert ready["Retry-After"] == "5"
    assert ready.json() == {"status": "unavailable", "checks": {"database": True, "broker": False}}
