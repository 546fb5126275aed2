"""The console names an API key's service as the API and the audit trail do, ``service:<key
name>``, never by its service user's internal username: in the approval queue (and its requester
filter), the decisions history (and its filter), an approval's and an operation's page and the
operations list, each list in as many queries however many services' rows it shows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from tests.api.support import DECIDE, READ, WRITE, create, get, keyed_client, post
from tests.engine import bundled_replies, start
from toolcalls.api.models import ApiKey
from toolcalls.demo.services import DemoSeed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def billing(demo: DemoSeed) -> tuple[APIClient, ApiKey]:
    """The service that starts operations, with its key named ``billing``."""
    return keyed_client(demo.tenant, READ, WRITE, DECIDE, name="billing")


@pytest.fixture
def review(demo: DemoSeed) -> APIClient:
    """A second service of the tenant, deciding approvals with its key named ``review``."""
    return keyed_client(demo.tenant, READ, DECIDE, name="review")[0]


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def _parked(client: APIClient) -> tuple[str, str]:
    """Start a refund through the API that parks for approval: its operation and approval IDs."""
    operation = create(client, "refund_approve")
    approvals = get(client, "/approvals", {"operation": operation["id"]}).json()["results"]
    return operation["id"], approvals[0]["id"]


def _page(client: Client, name: str, *args: str, **query: str) -> str:
    response = client.get(reverse(name, args=args), query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_queue_names_the_requesting_key_and_filters_by_that_name(
    demo: DemoSeed, billing: tuple[APIClient, ApiKey]
) -> None:
    client, key = billing
    _operation, by_service = _parked(client)
    by_person = start(demo, bundled_replies("refund_approve")).approvals.get().public_id
    internal = key.service_user.get_username()
    operator = _client("operator")
    queue = _page(operator, "approvals:queue")
    assert "service:billing <small>(acme)</small>" in queue and internal not in queue
    assert "requester <small>(acme)</small>" in queue  # a person, by username as before

    def found(requester: str) -> list[str]:
        text = _page(operator, "approvals:queue", requester=requester)
        return [public_id for public_id in (by_service, by_person) if public_id in text]

    assert found("service:billing") == [by_service]
    assert found(internal) == []
    assert found("requester") == found("user:requester") == [by_person]


def test_operation_pages_and_list_name_the_requesting_key(
    billing: tuple[APIClient, ApiKey],
) -> None:
    client, key = billing
    operation, _approval = _parked(client)
    internal = key.service_user.get_username()
    support = _client("support")
    page = _page(support, "operations:detail", operation)
    assert "<dt>Requested by</dt><dd>service:billing, " in page and internal not in page
    listed = _page(support, "operations:list")
    assert '<td data-label="Requested by">service:billing</td>' in listed
    assert internal not in listed


def test_a_keys_decision_and_edit_are_named_by_the_key(
    billing: tuple[APIClient, ApiKey], review: APIClient
) -> None:
    client, key = billing
    operation, approval = _parked(client)
    arguments = get(client, f"/approvals/{approval}").json()["arguments"]
    edited = {**arguments, "amount_cents": 3000}
    body = {"decision": "approve", "reason": "ok", "arguments": edited}
    assert post(review, f"/approvals/{approval}/decide", body).status_code == 200
    deciders = [ApiKey.objects.get(name="review").service_user, key.service_user]
    internals = [user.get_username() for user in deciders]
    operator = _client("operator")
    decided = _page(operator, "approvals:decisions")
    assert '<td data-label="By">service:review</td>' in decided
    assert approval in _page(operator, "approvals:decisions", decided_by="service:review")
    assert approval in _page(operator, "approvals:decisions", decided_by="service:Review")
    assert approval not in _page(operator, "approvals:decisions", decided_by=internals[0])
    detail = _page(operator, "approvals:detail", approval)
    assert "Approved by service:review at" in detail
    assert "(edited by service:review)" in detail
    assert "<dt>Requested by</dt><dd>service:billing for" in detail
    page = _page(operator, "operations:detail", operation)
    assert "APPROVED</span> by service:review" in page
    for text in (decided, detail, page):
        assert not any(internal in text for internal in internals)


def _listed(client: Client, name: str) -> tuple[int, str]:
    """A list page's queries and its text."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse(name))
    assert response.status_code == 200
    return len(queries.captured_queries), response.content.decode()


def test_the_lists_name_every_keys_row_in_as_many_queries_however_many(
    billing: tuple[APIClient, ApiKey], review: APIClient
) -> None:
    client, _key = billing
    lists = {
        "approvals:queue": "service:billing <small>",
        "approvals:decisions": '<td data-label="By">service:review</td>',
        "operations:list": '<td data-label="Requested by">service:billing</td>',
    }

    def shown(rows: int) -> list[int]:
        """Each list's queries, once it names the key of each of its ``rows`` rows."""
        operator = _client("operator")
        counts = []
        for name, named in lists.items():
            queries, text = _listed(operator, name)
            expected = rows * 2 if name == "operations:list" else rows
            assert text.count(named) == expected, name
            counts.append(queries)
        return counts

    def parked_and_denied() -> None:
        _parked(client)
        _operation, approval = _parked(client)
        body = {"decision": "deny", "reason": "no"}
        assert post(review, f"/approvals/{approval}/decide", body).status_code == 200

    parked_and_denied()
    one = shown(1)
    for _ in range(3):
        parked_and_denied()
    assert shown(4) == one
