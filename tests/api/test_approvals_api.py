"""Approvals endpoints: the pending queue, one approval, and decisions (approve, approve with
edited arguments, deny) with the four-eyes rule, over HTTP with API keys."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from approvals.states import ApprovalState
from tests import replies as r
from tests.api.support import (
    API,
    DECIDE,
    READ,
    WRITE,
    create,
    error_of,
    fields_of,
    get,
    keyed_client,
    other_tenant,
    post,
)
from tests.factories import UserFactory
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry, Order, RefundDraft
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Tenant, ToolCall
from toolcalls.remote import services as remote
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
ADMIN = Actor.system("test")
APPROVAL_FIELDS = {
    "id", "state", "superseded", "operation", "call", "provider_call_id", "tool", "risk",
    "arguments", "arguments_sha256", "original_arguments", "amount_cents", "reason",
    "schema_version", "policy_revision", "requested_by", "created_at", "expires_at", "decided_by",
    "decided_at", "decision_reason",
}  # fmt: skip


@pytest.fixture
def requester(demo: DemoSeed) -> APIClient:
    """The service that starts operations (it may decide approvals too, but not its own)."""
    return keyed_client(demo.tenant, READ, WRITE, DECIDE, name="checkout")[0]


@pytest.fixture
def operator(demo: DemoSeed) -> APIClient:
    """A second service of the same tenant that decides approvals."""
    return keyed_client(demo.tenant, READ, DECIDE, name="review")[0]


def _parked(
    client: APIClient, scenario: str = "refund_approve", **overrides: Any
) -> tuple[str, dict[str, Any]]:
    """Start a refund that parks for approval; its operation ID and pending approval."""
    operation = create(client, scenario, **overrides)
    assert operation["state"] == S.WAITING_APPROVAL
    results = get(client, "/approvals").json()["results"]
    (approval,) = [a for a in results if a["operation"] == operation["id"]]
    return operation["id"], approval


def _decide(client: APIClient, approval_id: str, **body: Any) -> Any:
    return post(client, f"/approvals/{approval_id}/decide", body)


def test_pending_approval_shape(requester: APIClient) -> None:
    operation_id, approval = _parked(requester)
    assert set(approval) == APPROVAL_FIELDS
    assert approval["id"].startswith("apr_")
    assert approval["state"] == ApprovalState.PENDING
    assert approval["operation"] == operation_id
    assert (approval["tool"], approval["risk"], approval["amount_cents"]) == (
        "submit_refund",
        "irreversible",
        4999,
    )
    assert approval["arguments"]["order_id"] == "ORD-1001"
    assert approval["arguments"]["amount_cents"] == 4999
    assert len(approval["arguments_sha256"]) == 64
    assert approval["original_arguments"] is None
    assert approval["requested_by"] == "service:checkout"
    assert approval["decided_by"] is None and approval["decided_at"] is None
    assert get(requester, f"/approvals/{approval['id']}").json() == approval
    error_of(get(requester, "/approvals/apr_nope"), 404, "not_found")


def test_list_is_pending_by_default_and_filters(requester: APIClient, operator: APIClient) -> None:
    _, first = _parked(requester)
    _, second = _parked(requester)

    def listed(**params: str) -> list[str]:
        response = get(requester, "/approvals", params)
        assert response.status_code == 200, response.content
        return [a["id"] for a in response.json()["results"]]

    # Soonest expiry first.
    assert listed() == [first["id"], second["id"]]
    assert _decide(operator, first["id"], decision="approve").status_code == 200
    assert listed() == [second["id"]]
    assert listed(state="") == [second["id"]]  # an empty filter is no filter
    assert listed(state=ApprovalState.APPROVED) == [first["id"]]
    assert listed(state=ApprovalState.DENIED) == []
    assert listed(tool="submit_refund") == [second["id"]]
    assert listed(tool="get_order") == []
    assert listed(risk="irreversible") == [second["id"]]
    assert listed(risk="read") == []
    paged = get(requester, "/approvals", {"limit": 1, "state": "APPROVED"}).json()
    assert [a["id"] for a in paged["results"]] == [first["id"]] and paged["next"] is None


def test_an_unknown_tool_filter_is_400_as_an_unknown_state_is(requester: APIClient) -> None:
    """A name the tenant's approvals can never hold is refused, not answered with an empty
    list: the same code and shape as an unknown ``state`` or ``risk``."""
    _parked(requester)
    for name, value in (("state", "NOPE"), ("risk", "nope"), ("tool", "submit_refunds")):
        error = error_of(get(requester, "/approvals", {name: value}), 400, "invalid_request")
        assert set(fields_of(error)) == {name}, error
    typo = get(requester, "/approvals", {"tool": "submit_refunds"})
    error = error_of(typo, 400, "invalid_request")
    assert fields_of(error)["tool"][0].startswith("tool must be one of: create_refund_draft, ")
    assert get(requester, "/approvals", {"tool": ""}).status_code == 200  # empty: no filter


def test_the_tool_filter_takes_every_tool_the_tenant_has_had(
    requester: APIClient, demo: DemoSeed
) -> None:
    """Known: a deployed tool (enabled for the tenant or not), a remote tool of the tenant
    (enabled or not), and a tool only the tenant's approvals still name (no longer deployed);
    another tenant's remote tool is not."""
    _register_remote_tools(demo.tenant, "shop", "void")
    _register_remote_tools(other_tenant(), "theirs", "secret")
    _, approval = _parked(requester)
    ApprovalRequest.objects.filter(public_id=approval["id"]).update(tool_name="refund_v0")

    def listed(tool: str) -> list[str]:
        response = get(requester, "/approvals", {"tool": tool})
        assert response.status_code == 200, response.content
        return [a["id"] for a in response.json()["results"]]

    assert listed("refund_v0") == [approval["id"]]
    assert listed("get_order") == listed("shop__void") == []
    theirs = get(requester, "/approvals", {"tool": "theirs__secret"})
    error = error_of(theirs, 400, "invalid_request")
    assert "shop__void" in fields_of(error)["tool"][0]
    assert "theirs__secret" not in fields_of(error)["tool"][0]


def test_a_tool_name_no_approval_holds_is_looked_up_by_state_and_name(
    requester: APIClient,
) -> None:
    """The lookup behind a refused name names every state, so it probes index
    ``approval_tool_queue`` (state, tool name) once a state instead of reading all of it: a
    bogus name costs a tenant with a million approvals nothing more than one with none."""
    with CaptureQueriesContext(connection) as captured:
        error_of(get(requester, "/approvals", {"tool": "nope"}), 400, "invalid_request")
    [lookup] = [q["sql"] for q in captured.captured_queries if '"tool_name" =' in q["sql"]]
    assert '"approvals_approvalrequest"."state" IN' in lookup, lookup


def test_an_operation_filter_names_one_of_the_tenant_s_operations(requester: APIClient) -> None:
    operation_id, approval = _parked(requester)
    listed = get(requester, "/approvals", {"operation": operation_id}).json()["results"]
    assert [a["id"] for a in listed] == [approval["id"]]
    outsider, _ = keyed_client(other_tenant(), READ)
    refusals = [
        get(requester, "/approvals", {"operation": "op_nope"}),
        get(outsider, "/approvals", {"operation": operation_id}),  # never told apart
    ]
    errors = [error_of(refused, 400, "invalid_request") for refused in refusals]
    assert errors[0]["message"] == errors[1]["message"]
    assert set(fields_of(errors[0])) == {"operation"}


def _register_remote_tools(tenant: Tenant, server_name: str, *names: str) -> None:
    """An HTTP tool server of ``tenant`` with ``names`` registered, none enabled."""
    form = remote.ServerForm(name=server_name, kind="http", signing_secret="secret")
    server = remote.remote_server_register(tenant=tenant, form=form, actor=ADMIN)
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
    for name in names:
        tool = remote.HttpToolForm(name, name, schema, url=f"http://127.0.0.1:9/{name}")
        remote.remote_http_tool_register(server_pk=server.pk, form=tool, actor=ADMIN)


def test_a_filtered_list_pages_under_its_filters(requester: APIClient) -> None:
    """``next`` keeps the filters its cursor was signed for; without them it is refused."""
    _, first = _parked(requester)
    _, second = _parked(requester)
    filters = {"state": "PENDING", "tool": "submit_refund", "risk": "irreversible"}
    page = get(requester, "/approvals", {**filters, "limit": 1}).json()
    assert [a["id"] for a in page["results"]] == [first["id"]]
    following = requester.get(page["next"]).json()
    assert [a["id"] for a in following["results"]] == [second["id"]]
    cursor = {"cursor": page["cursor"]}
    error_of(get(requester, "/approvals", cursor), 400, "invalid_cursor")
    error_of(
        get(requester, "/approvals", {"tool": "submit_refund", **cursor}), 400, "invalid_cursor"
    )


def test_approve_resumes_and_refunds_once(requester: APIClient, operator: APIClient) -> None:
    operation_id, approval = _parked(requester)
    response = _decide(operator, approval["id"], decision="approve", reason="looks right")
    assert response.status_code == 200, response.content
    decided = response.json()
    assert decided["state"] == ApprovalState.APPROVED
    assert decided["decided_by"] == "service:review"
    assert decided["decided_by"] != decided["requested_by"]
    assert decided["decision_reason"] == "looks right" and decided["decided_at"]
    operation = get(requester, f"/operations/{operation_id}").json()
    assert operation["state"] == S.COMPLETED
    assert "has been submitted" in operation["final_text"]
    ledger = LedgerEntry.objects.get()
    assert (ledger.operation_ref, ledger.amount_cents) == (operation_id, 4999)


def test_a_person_s_decision_is_named_as_the_audit_trail_names_them(
    requester: APIClient, demo: DemoSeed
) -> None:
    _operation_id, approval = _parked(requester)
    operator = get_user_model().objects.get(username="operator")
    approval_decide(approval_pk=ApprovalRequest.objects.get().pk, actor=operator, approve=True)
    read = get(requester, f"/approvals/{approval['id']}").json()
    assert (read["requested_by"], read["decided_by"]) == ("service:checkout", "user:operator")


def test_the_list_reads_its_rows_in_the_same_statements_however_many(
    requester: APIClient,
) -> None:
    _parked(requester)
    with CaptureQueriesContext(connection) as one:
        assert len(get(requester, "/approvals").json()["results"]) == 1
    _parked(requester)
    _parked(requester)
    with CaptureQueriesContext(connection) as three:
        assert len(get(requester, "/approvals").json()["results"]) == 3
    assert len(three.captured_queries) == len(one.captured_queries)


def test_approve_with_edited_arguments(requester: APIClient, operator: APIClient) -> None:
    operation_id, approval = _parked(requester)
    edited = {**approval["arguments"], "amount_cents": 3000}
    response = _decide(operator, approval["id"], decision="approve", arguments=edited)
    assert response.status_code == 200, response.content
    decided = response.json()
    assert decided["arguments"] == edited
    assert decided["original_arguments"] == approval["arguments"]
    assert decided["amount_cents"] == 3000
    assert decided["arguments_sha256"] != approval["arguments_sha256"]
    calls = get(requester, f"/operations/{operation_id}/calls").json()["results"]
    submit = next(c for c in calls if c["tool"] == "submit_refund")
    assert submit["arguments_edited"] is True and submit["arguments"] == edited
    assert LedgerEntry.objects.get().amount_cents == 3000


@pytest.mark.parametrize(
    "arguments",
    [
        {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": "lots"},
        {"order_id": "ORD-1001", "amount_cents": 3000},
    ],
)
def test_an_invalid_edit_is_400_and_leaves_the_approval_pending(
    requester: APIClient, operator: APIClient, arguments: dict[str, Any]
) -> None:
    _, approval = _parked(requester)
    error = error_of(
        _decide(operator, approval["id"], decision="approve", arguments=arguments),
        400,
        "invalid_edit",
    )
    assert fields_of(error) == {"arguments": [error["message"]]}
    assert get(operator, f"/approvals/{approval['id']}").json()["state"] == ApprovalState.PENDING
    assert not LedgerEntry.objects.exists()


def test_an_edit_cannot_move_a_refund_to_another_order_or_draft(
    requester: APIClient, operator: APIClient
) -> None:
    """An edit changes how much or why, never which: not even to the same customer's open
    draft of another order (another operation's, say)."""
    _, approval = _parked(requester)
    other = Order.objects.get(order_id="ORD-1003")
    RefundDraft.objects.create(
        tenant_ref=other.tenant_ref, draft_id="RD-ORD-1003-1", order=other, amount_cents=3000
    )
    moved = {"order_id": "ORD-1003", "draft_id": "RD-ORD-1003-1", "amount_cents": 3000}
    error = error_of(
        _decide(operator, approval["id"], decision="approve", arguments=moved), 400, "invalid_edit"
    )
    assert "order_id, draft_id must stay as proposed" in error["message"]
    assert fields_of(error) == {"arguments": [error["message"]]}
    assert get(operator, f"/approvals/{approval['id']}").json()["state"] == ApprovalState.PENDING
    lowered = {**approval["arguments"], "amount_cents": 3000}  # how much may change
    assert (
        _decide(operator, approval["id"], decision="approve", arguments=lowered).status_code == 200
    )
    assert [(e.order.order_id, e.amount_cents) for e in LedgerEntry.objects.all()] == [
        ("ORD-1001", 3000)
    ]


def test_approving_what_the_tools_precondition_refuses_is_409_and_decides_nothing(
    requester: APIClient, operator: APIClient
) -> None:
    """The console's disabled Approve, over the API: a draft another request paid (here the
    same draft for a smaller amount) is refused; the same refund asked again is approved, and
    its stored result answers it."""
    _, paid = _parked(requester)
    assert _decide(operator, paid["id"], decision="approve").status_code == 200
    smaller = {**paid["arguments"], "amount_cents": 3000}
    replies = [r.response(r.call("s2", "submit_refund", smaller)), r.final()]
    _, other = _parked(requester, replies=replies)
    error = error_of(_decide(operator, other["id"], decision="approve"), 409, "precondition_failed")
    assert "already paid by another request" in error["message"]
    assert get(operator, f"/approvals/{other['id']}").json()["state"] == ApprovalState.PENDING
    again_id, again = _parked(requester)
    assert _decide(operator, again["id"], decision="approve").status_code == 200
    assert get(requester, f"/operations/{again_id}").json()["state"] == S.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_deny_needs_a_reason(requester: APIClient, operator: APIClient) -> None:
    operation_id, approval = _parked(requester, "refund_deny")
    error_of(_decide(operator, approval["id"], decision="deny"), 400, "reason_required")
    blanks = ("\u2800\u3164", "\u115f\u1160", "\u034f\ufe0f", "\U000e0100")
    for invisible in ("  ", "\u200b", "\u2060", "\ufeff", "\u180e", "\u200b \u2060", *blanks):
        response = _decide(operator, approval["id"], decision="deny", reason=invisible)
        error_of(response, 400, "reason_required")
    error = error_of(
        _decide(operator, approval["id"], decision="deny", reason="no", arguments={}),
        400,
        "invalid_request",
    )
    assert set(fields_of(error)) == {"arguments"}
    error = error_of(_decide(operator, approval["id"], decision="maybe"), 400, "invalid_request")
    assert set(fields_of(error)) == {"decision"}
    response = _decide(operator, approval["id"], decision="deny", reason="Send a photo first.")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == ApprovalState.DENIED
    assert response.json()["decision_reason"] == "Send a photo first."
    operation = get(requester, f"/operations/{operation_id}").json()
    assert operation["state"] == S.COMPLETED
    assert "did not approve" in operation["final_text"]
    assert not LedgerEntry.objects.exists()


@pytest.mark.parametrize("none", ["left out", None, ""])
def test_a_decision_without_a_reason_records_a_null_reason(
    requester: APIClient, operator: APIClient, none: Any
) -> None:
    """A reason left out, ``null`` or ``""`` is none: an approval is decided and its audit
    event says ``"reason": null``, a denial is refused for want of one."""
    operation_id, approval = _parked(requester)
    body = {} if none == "left out" else {"reason": none}
    error_of(_decide(operator, approval["id"], decision="deny", **body), 400, "reason_required")
    response = _decide(operator, approval["id"], decision="approve", **body)
    assert response.status_code == 200, response.content
    assert response.json()["decision_reason"] is None
    events = get(requester, f"/operations/{operation_id}/events").json()["results"]
    (decided,) = [e for e in events if e["kind"] == "approval.transition"]
    assert decided["to_state"] == ApprovalState.APPROVED
    assert "reason" in decided["details"] and decided["details"]["reason"] is None


@pytest.mark.parametrize(
    ("body", "place"),
    [
        ('{"decision": "deny", "reason": "no", "decision": "approve"}', "decision"),
        (
            '{"decision": "approve", "arguments": {"order_id": "ORD-1001", "draft_id": '
            '"RD-ORD-1001-1", "amount_cents": 1000, "amount_cents": 4999}}',
            "arguments/amount_cents",
        ),
    ],
)
def test_a_member_name_given_twice_decides_nothing(
    requester: APIClient, operator: APIClient, body: str, place: str
) -> None:
    """JSON readers keep the last of two members of one name, so the first would be approved
    while the second is what ran: the body is refused as one that is not JSON is."""
    _, approval = _parked(requester)
    response = operator.post(
        f"{API}/approvals/{approval['id']}/decide",
        body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="twice",
    )
    error = error_of(response, 400, "malformed_request")
    assert f"{place}: given twice in one object" in error["message"]
    assert get(operator, f"/approvals/{approval['id']}").json()["state"] == ApprovalState.PENDING
    assert not LedgerEntry.objects.exists()


def test_decided_twice_is_409(requester: APIClient, operator: APIClient) -> None:
    _, approval = _parked(requester)
    assert _decide(operator, approval["id"], decision="approve").status_code == 200
    error = error_of(_decide(operator, approval["id"], decision="approve"), 409, "already_decided")
    assert "APPROVED" in error["message"]
    error_of(
        _decide(operator, approval["id"], decision="deny", reason="late"), 409, "already_decided"
    )
    assert LedgerEntry.objects.count() == 1


def test_an_expired_approval_is_410(requester: APIClient, operator: APIClient) -> None:
    operation_id, approval = _parked(requester)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET expires_at = now() WHERE public_id = %s",
            [approval["id"]],
        )
    error = error_of(_decide(operator, approval["id"], decision="approve"), 410, "expired")
    assert "expired" in error["message"]
    assert get(operator, f"/approvals/{approval['id']}").json()["state"] == ApprovalState.EXPIRED
    assert not LedgerEntry.objects.exists()
    calls = get(requester, f"/operations/{operation_id}/calls").json()["results"]
    assert next(c for c in calls if c["tool"] == "submit_refund")["state"] == "EXPIRED"


def test_an_approval_past_its_expiry_reads_expired_before_the_sweep_records_it(
    requester: APIClient, operator: APIClient
) -> None:
    _, late = _parked(requester)
    _, waiting = _parked(requester)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET expires_at = now() - interval '1 second' "
            "WHERE public_id = %s",
            [late["id"]],
        )
    assert ApprovalRequest.objects.get(public_id=late["id"]).state == ApprovalState.PENDING
    read = get(operator, f"/approvals/{late['id']}").json()
    assert (read["state"], read["superseded"], read["decided_at"]) == ("EXPIRED", False, None)

    def listed(state: str) -> list[str]:
        return [a["id"] for a in get(operator, "/approvals", {"state": state}).json()["results"]]

    assert listed("PENDING") == [waiting["id"]]  # what can still be decided
    assert listed("EXPIRED") == [late["id"]]
    # Cancelled after its expiry: expired, not superseded, as the sweep will record it.
    operation_id = late["operation"]
    assert post(requester, f"/operations/{operation_id}/cancel", {"reason": "x"}).status_code == 200
    read = get(operator, f"/approvals/{late['id']}").json()
    assert (read["state"], read["superseded"]) == ("EXPIRED", False)
    assert listed("EXPIRED") == [late["id"]] and listed("PENDING") == [waiting["id"]]
    error_of(_decide(operator, late["id"], decision="approve"), 410, "expired")  # and recorded
    assert ApprovalRequest.objects.get(public_id=late["id"]).state == ApprovalState.EXPIRED
    assert listed("EXPIRED") == [late["id"]]


def test_an_approval_of_a_cancelled_operation_is_superseded(
    requester: APIClient, operator: APIClient
) -> None:
    operation_id, approval = _parked(requester)
    assert approval["superseded"] is False
    assert post(requester, f"/operations/{operation_id}/cancel", {"reason": "x"}).status_code == 200
    error_of(_decide(operator, approval["id"], decision="approve"), 409, "superseded")
    assert not LedgerEntry.objects.exists()
    # Not in the pending list (as in the console); read by ID or listed by its state, it says
    # so, with when its operation ended and no one deciding.
    assert get(operator, "/approvals").json()["results"] == []
    read = get(operator, f"/approvals/{approval['id']}").json()
    assert (read["state"], read["superseded"]) == (ApprovalState.SUPERSEDED, True)
    assert read["decided_at"] is not None and read["decided_by"] is None
    listed = get(operator, "/approvals", {"state": "SUPERSEDED"}).json()["results"]
    assert [a["id"] for a in listed] == [approval["id"]]
    assert listed[0] == read


def test_four_eyes_the_requesting_key_cannot_decide(
    requester: APIClient, operator: APIClient
) -> None:
    _, approval = _parked(requester)
    error = error_of(_decide(requester, approval["id"], decision="approve"), 403, "self_approval")
    assert "another operator" in error["message"]
    error_of(_decide(requester, approval["id"], decision="deny", reason="no"), 403, "self_approval")
    assert get(requester, f"/approvals/{approval['id']}").json()["state"] == ApprovalState.PENDING
    assert _decide(operator, approval["id"], decision="approve").status_code == 200
    assert LedgerEntry.objects.count() == 1


def test_a_key_revoked_while_its_refund_waits_has_nothing_run(operator: APIClient) -> None:
    requester, key = keyed_client(Tenant.objects.get(slug="acme"), READ, WRITE, name="checkout")
    operation_id, approval = _parked(requester)
    admin = Client()
    admin.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    changelist = reverse("admin:api_apikey_changelist")
    assert admin.post(changelist, {"action": "revoke", "_selected_action": [key.pk]}).status_code
    assert _decide(operator, approval["id"], decision="approve").status_code == 200
    call = ToolCall.objects.get(operation__public_id=operation_id, tool_name="submit_refund")
    assert (call.state, call.error_code) == ("REJECTED", "UNAUTHORIZED")
    assert "no longer active" in (call.model_result or {})["error"]["message"]
    assert not LedgerEntry.objects.exists()
