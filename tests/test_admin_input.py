"""What the admin's forms take: JSON read as the API reads a body (I-JSON, at most 64 levels
deep, text the database can store), the API's own rules for the values, and names that show;
bad input is a form error, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from tests.factories import TenantFactory
from tests.test_admin import superuser, url
from toolcalls.admin import ExactJsonField
from toolcalls.models import AgentProfile, Tenant, TenantTool
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.typed_json import TOO_DEEP, UNSTORABLE

pytestmark = pytest.mark.django_db(transaction=True)  # the remote services open durable blocks
__all__ = ["superuser"]  # the fixture, used by name

DEEP_ARRAY = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
LONE_SURROGATE = '{"type": "object", "description": "\\ud800"}'


@pytest.fixture
def tenant() -> Tenant:
    return TenantFactory.create(slug="alpha")


@pytest.fixture
def server(tenant: Tenant) -> RemoteServer:
    return RemoteServer.objects.create(tenant=tenant, name="ledger", kind="http")


@pytest.fixture
def tool(server: RemoteServer) -> RemoteTool:
    schema = {"type": "object", "properties": {"k": {"type": "string"}}}
    return RemoteTool.objects.create(
        tenant=server.tenant,
        server=server,
        remote_name="pay",
        name="ledger__pay",
        input_schema=schema,
        served_sha256="0" * 64,
        url="http://127.0.0.1:9/pay",
    )


def _server_add(client: Client, tenant: Tenant, headers: str) -> Any:
    body = {
        "tenant": tenant.pk,
        "name": "shop",
        "kind": "http",
        "signing_secret": "s",
        "headers": headers,
    }
    return client.post(reverse("admin:remote_remoteserver_add"), body)


def _tool_add(client: Client, server: RemoteServer, input_schema: str) -> Any:
    body = {"server": server.pk, "name": "refund", "input_schema": input_schema}
    return client.post(reverse("admin:remote_remotetool_add"), {**body, "url": "http://x.test/r"})


def _review(client: Client, tool: RemoteTool, **fields: str) -> Any:
    body = {"enabled": "on", "risk": "read", "timeout_ms": "1000", "approval": "never", **fields}
    return client.post(reverse("admin:remote_remotetool_change", args=[tool.pk]), body)


def _errors(response: Any, field: str) -> list[str]:
    assert response.status_code == 200, response.status_code
    return list(response.context["form"].errors.get(field, []))


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT])
def test_deep_json_is_a_form_error_on_every_remote_form(
    superuser: Client, tool: RemoteTool, text: str
) -> None:
    assert _errors(_server_add(superuser, tool.tenant, text), "headers") == [TOO_DEEP]
    assert _errors(_tool_add(superuser, tool.server, text), "input_schema") == [TOO_DEEP]
    assert _errors(_review(superuser, tool, key_context=text), "key_context") == [TOO_DEEP]
    assert _errors(_review(superuser, tool, key_arguments=text), "key_arguments") == [TOO_DEEP]
    assert not RemoteServer.objects.filter(name="shop").exists()
    assert RemoteTool.objects.get().enabled is False


def test_json_is_read_as_deep_as_the_api_reads_a_body() -> None:
    field = ExactJsonField(kind=list)
    value = field.clean("[" * 64 + "]" * 64)
    for _ in range(63):
        (value,) = value
    assert value == []
    with pytest.raises(ValidationError) as refused:
        field.clean("[" * 65 + "]" * 65)
    assert refused.value.messages == [TOO_DEEP]


def test_text_the_database_cannot_store_is_a_form_error(
    superuser: Client, server: RemoteServer
) -> None:
    response = _tool_add(superuser, server, LONE_SURROGATE)
    assert _errors(response, "input_schema") == [UNSTORABLE]
    assert "\\ud800" in response.content.decode()  # shown again as typed
    headers = _server_add(superuser, server.tenant, '{"X-A": "\\u0000"}')
    assert _errors(headers, "headers") == [UNSTORABLE]
    assert not RemoteTool.objects.exists()


def test_a_header_given_twice_or_too_long_is_refused_by_the_service_rule(
    superuser: Client, tenant: Tenant
) -> None:
    twice = _errors(_server_add(superuser, tenant, '{"X-A": "1", "X-A": "2"}'), "headers")
    assert len(twice) == 1 and "given twice" in twice[0] and "X-A" in twice[0]
    long = _errors(_server_add(superuser, tenant, json.dumps({"X-A": "v" * 2001})), "__all__")
    assert long == ["the value of the header 'X-A' is longer than 2000 characters"]
    assert not RemoteServer.objects.exists()
    response = _server_add(superuser, tenant, json.dumps({"X-A": "v" * 2000}))
    assert response.status_code == 302
    assert RemoteServer.objects.get().headers == {"X-A": "v" * 2000}


@pytest.mark.parametrize(
    ("field", "names"), [("key_context", ["subject_ref"] * 2), ("key_arguments", ["k", "k"])]
)
def test_a_key_name_given_twice_is_refused_by_the_service_rule(
    superuser: Client, tool: RemoteTool, field: str, names: list[str]
) -> None:
    fields = {"key_context": "[]", "key_arguments": '["k"]', field: json.dumps(names)}
    errors = _errors(_review(superuser, tool, **fields), "__all__")
    assert errors == [f"{field} names {names[0]} more than once"]
    assert RemoteTool.objects.get().enabled is False


def test_deep_agent_settings_are_a_form_error(superuser: Client, tenant: Tenant) -> None:
    body = {
        "tenant": tenant.pk,
        "name": "refunds",
        "family": "openai_responses",
        "model": "gpt-5.1",
        "settings": DEEP_ARRAY,
        "revisions-TOTAL_FORMS": "0",
        "revisions-INITIAL_FORMS": "0",
    }
    response = superuser.post(url(AgentProfile, "add"), body)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["settings"] == [TOO_DEEP]


def test_a_tenant_name_must_show(superuser: Client) -> None:
    body = {"slug": "hidden", "name": "\u200b", "is_active": "on"}
    response = superuser.post(url(Tenant, "add"), body)
    assert response.status_code == 200
    assert "name" in response.context["adminform"].form.errors
    assert not Tenant.objects.filter(slug="hidden").exists()


@pytest.mark.parametrize(
    ("threshold", "says"),
    [
        ("", 'approval "threshold" needs approval_threshold: a whole number at least 0'),
        ("-5", "greater than or equal to 0"),
        ("1e20", "Enter a whole number."),
    ],
)
def test_a_missing_or_unreadable_threshold_says_what_is_wrong(
    superuser: Client, tenant: Tenant, threshold: str, says: str
) -> None:
    TenantTool.objects.filter(tenant=tenant).delete()
    body = {"tenant": tenant.pk, "tool_name": "submit_refund", "enabled": "on"}
    body |= {"approval": "threshold", "approval_threshold": threshold}
    response = superuser.post(url(TenantTool, "add"), body)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["approval_threshold"]
    assert len(errors) == 1 and says in errors[0], errors
    assert not TenantTool.objects.filter(tenant=tenant).exists()
