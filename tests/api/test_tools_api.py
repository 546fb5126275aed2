"""``/api/v1/tools``: the key's tenant's catalogue, read and changed; other tenants' settings
are neither visible nor used."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.response import Response
from rest_framework.test import APIClient

from tests.api.support import (
    API,
    MANAGE,
    READ,
    WRITE,
    create_body,
    error_of,
    fields_of,
    get,
    keyed_client,
    other_tenant,
    post,
)
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Tenant, TenantTool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def client(demo: DemoSeed) -> APIClient:
    return keyed_client(demo.tenant, READ, WRITE, MANAGE, name="admin-service")[0]


def _send(client: APIClient, method: str, name: str, body: Any) -> Response:
    return client.generic(method, f"{API}/tools/{name}", json.dumps(body), "application/json")


def test_the_list_is_what_the_tenant_may_use(client: APIClient) -> None:
    assert [t["name"] for t in get(client, "/tools").json()] == [
        "create_refund_draft",
        "get_order",
        "submit_refund",
    ]
    disabled = _send(client, "PUT", "create_refund_draft", {"enabled": False})
    assert disabled.status_code == 200, disabled.content
    assert disabled.json()["enabled"] is False
    assert [t["name"] for t in get(client, "/tools").json()] == ["get_order", "submit_refund"]
    one = get(client, "/tools/create_refund_draft").json()
    assert (one["enabled"], one["risk"]) == (False, "write")
    assert one["parameters"]["additionalProperties"] is False


def test_put_sets_every_override_and_patch_those_given(client: APIClient) -> None:
    before = get(client, "/tools/submit_refund").json()
    assert before["overrides"] == {"max_calls": None, "approval": None, "approval_threshold": None}
    body = {"enabled": True, "max_calls": 2, "approval": "threshold", "approval_threshold": 1000}
    put = _send(client, "PUT", "submit_refund", body)
    assert put.status_code == 200, put.content
    tool = put.json()
    assert tool["overrides"] == {
        "max_calls": 2,
        "approval": "threshold",
        "approval_threshold": 1000,
    }
    assert tool["approval"]["revision"] != before["approval"]["revision"]
    patched = _send(client, "PATCH", "submit_refund", {"max_calls": 3}).json()
    assert patched["overrides"] == {
        "max_calls": 3,
        "approval": "threshold",
        "approval_threshold": 1000,
    }
    # The threshold goes with the policy a PATCH replaces.
    always = _send(client, "PATCH", "submit_refund", {"approval": "always"}).json()
    assert always["overrides"] == {"max_calls": 3, "approval": "always", "approval_threshold": None}
    _send(client, "PATCH", "submit_refund", {"approval": "threshold", "approval_threshold": 900})
    spec = _send(client, "PATCH", "submit_refund", {"approval": None})
    assert spec.status_code == 200, spec.content
    assert spec.json()["overrides"] == {
        "max_calls": 3,
        "approval": None,
        "approval_threshold": None,
    }
    reset = _send(client, "PUT", "submit_refund", {"enabled": True}).json()
    assert reset["overrides"] == before["overrides"]
    assert reset["approval"] == before["approval"]


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("get_order", {"enabled": True, "approval": "threshold", "approval_threshold": 1},
         "approval"),
        ("submit_refund", {"enabled": True, "approval": "threshold", "approval_threshold": 2500},
         "approval_threshold"),
        ("submit_refund", {"enabled": True, "max_calls": 10_000}, "max_calls"),
        ("submit_refund", {"enabled": True, "max_calls": 0}, "max_calls"),
        ("submit_refund", {"enabled": True, "approval": "never"}, "approval"),
        ("submit_refund", {}, "enabled"),
    ],
)  # fmt: skip
def test_an_override_the_spec_does_not_allow_is_400_naming_it(
    client: APIClient, name: str, body: dict[str, Any], field: str
) -> None:
    error = error_of(_send(client, "PUT", name, body), 400, "invalid_request")
    assert set(fields_of(error)) == {field}
    assert get(client, f"/tools/{name}").json()["overrides"]["approval"] is None


def test_an_unregistered_tool_is_404(client: APIClient) -> None:
    error_of(get(client, "/tools/launch_rocket"), 404, "not_found")
    error_of(_send(client, "PUT", "launch_rocket", {"enabled": True}), 404, "not_found")


def test_an_operation_may_not_offer_a_disabled_tool(client: APIClient) -> None:
    _send(client, "PUT", "get_order", {"enabled": False})
    response = post(client, "/operations", create_body(tools=["get_order"]))
    error = error_of(response, 400, "invalid_request")
    assert list(fields_of(error)) == ["tools"]
    assert "get_order" in fields_of(error)["tools"][0]


def test_another_tenants_catalogue_is_neither_seen_nor_used(
    demo: DemoSeed, client: APIClient
) -> None:
    outsider, _ = keyed_client(other_tenant(), READ, WRITE, MANAGE, name="globex")
    assert get(outsider, "/tools").json() == []
    assert get(outsider, "/tools/submit_refund").json()["enabled"] is False
    error_of(
        post(outsider, "/operations", create_body(tools=["get_order"])), 400, "invalid_request"
    )
    changed = _send(outsider, "PUT", "submit_refund", {"enabled": True, "approval": "always"})
    assert changed.json()["overrides"]["approval"] == "always"
    mine = get(client, "/tools/submit_refund").json()
    assert (mine["enabled"], mine["overrides"]["approval"]) == (True, None)
    globex = Tenant.objects.get(slug="globex")
    assert list(TenantTool.objects.filter(tenant=globex).values_list("tool_name", flat=True)) == [
        "submit_refund"
    ]
    assert TenantTool.objects.get(tenant=demo.tenant, tool_name="submit_refund").approval == ""


def test_changes_name_the_key_that_made_them(demo: DemoSeed, client: APIClient) -> None:
    _send(client, "PATCH", "get_order", {"max_calls": 4})
    row = TenantTool.objects.get(tenant=demo.tenant, tool_name="get_order")
    assert (row.max_calls, row.updated_by) == (4, "service:admin-service")
