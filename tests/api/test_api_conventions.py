"""What every endpoint shares: API-key authentication, scopes, tenant isolation, the four-eyes
rule for services, ``Idempotency-Key`` on POSTs, the one error shape, the per-key rate limit and
the OpenAPI documentation."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import URLPattern
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from kombu.exceptions import OperationalError as KombuOperationalError
from rest_framework.test import APIClient

from approvals.api import urls as approvals_api_urls
from approvals.models import ApprovalRequest
from tests.api.support import (
    AGENTS_READ,
    AGENTS_WRITE,
    ALL_SCOPES,
    API,
    AUDIT,
    DECIDE,
    MANAGE,
    READ,
    WRITE,
    create,
    create_body,
    error_of,
    fields_of,
    get,
    keyed_client,
    new_key,
    other_tenant,
    post,
)
from tests.conftest import REPO
from tests.factories import TenantFactory
from tests.replies import final
from toolcalls import tasks
from toolcalls.actors import ENGINE
from toolcalls.api import urls as api_urls
from toolcalls.api import views
from toolcalls.api.auth import api_key_create, api_keys_revoke
from toolcalls.api.models import ApiKey, IdempotentRequest
from toolcalls.api.request_ids import RequestIdFilter
from toolcalls.demo.services import DemoSeed
from toolcalls.errors import CallgateError
from toolcalls.models import AgentRevision, Operation
from toolcalls.remote.models import RemoteTool
from toolcalls.remote.services import (
    HttpToolForm,
    ServerForm,
    remote_http_tool_register,
    remote_server_register,
)
from toolcalls.services.agents import AgentDefinition, agent_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

#: (method, path with ``{op}``/``{apr}`` for a parked refund and its approval, ``{agent}`` for an
#: agent profile, scope it needs).
ENDPOINTS: list[tuple[str, str, str]] = [
    ("GET", "/operations", READ),
    ("POST", "/operations", WRITE),
    ("GET", "/operations/{op}", READ),
    ("POST", "/operations/{op}/cancel", WRITE),
    ("POST", "/operations/{op}/extend", WRITE),
    ("POST", "/operations/{op}/stop", WRITE),
    ("GET", "/operations/{op}/turns", READ),
    ("GET", "/operations/{op}/calls", READ),
    ("GET", "/operations/{op}/events", READ),
    ("GET", "/operations/{op}/approvals", READ),
    ("GET", "/operations/{op}/events/stream", READ),
    ("GET", "/approvals", READ),
    ("GET", "/approvals/{apr}", READ),
    ("POST", "/approvals/{apr}/decide", DECIDE),
    ("POST", "/operations/{op}/messages", WRITE),
    ("GET", "/tools", READ),
    ("GET", "/agents", AGENTS_READ),
    ("POST", "/agents", AGENTS_WRITE),
    ("GET", "/agents/{agent}", AGENTS_READ),
    ("GET", "/agents/{agent}/revisions", AGENTS_READ),
    ("POST", "/agents/{agent}/revisions", AGENTS_WRITE),
    ("GET", "/agents/{agent}/revisions/1", AGENTS_READ),
    ("GET", "/tools/{tool}", READ),
    ("PUT", "/tools/{tool}", MANAGE),
    ("PATCH", "/tools/{tool}", MANAGE),
    ("GET", "/remote-servers", MANAGE),
    ("POST", "/remote-servers", MANAGE),
    ("GET", "/remote-servers/{server}", MANAGE),
    ("POST", "/remote-servers/{server}/discover", MANAGE),
    ("POST", "/remote-servers/{server}/tools", MANAGE),
    ("POST", "/remote-servers/{server}/tools/{remote_tool}/enable", MANAGE),
    ("POST", "/remote-servers/{server}/tools/{remote_tool}/disable", MANAGE),
]
#: A valid body for each POST (starting an operation: a refund on scripted replies).
BODIES: dict[str, dict[str, Any]] = {
    "/cancel": {"reason": "test"},
    "/stop": {"reason": "test"},
    "/extend": {},
    "/decide": {"decision": "approve"},
    "/agents": {"name": "another-agent", "family": "openai_chat", "model": "gpt-5.1"},
    "/revisions": {"instructions": "Be brief."},
    "/messages": {"input": "And the other order?"},
    "/remote-servers": {"name": "ledger", "kind": "http", "signing_secret": "s"},
    "/tools": {"name": "refund", "input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/r"},
    "/enable": {"risk": "read", "timeout_ms": 2000, "approval": "never"},
}
#: The body of each PUT and PATCH (a tool's settings).
SETTINGS = {"enabled": True}
#: Object endpoints (for tenant isolation; every tenant has each registered tool, in its own
#: catalogue).
OBJECT_ENDPOINTS = [e for e in ENDPOINTS if "{op}" in e[1] or "{apr}" in e[1]]


@pytest.fixture
def parked(demo: DemoSeed) -> dict[str, str]:
    """A refund of ``acme`` waiting for approval: ``op`` and ``apr`` IDs; an agent profile,
    and an HTTP server ``shop`` with its tool ``pay`` awaiting review."""
    client, _ = keyed_client(demo.tenant, READ, WRITE, name="checkout")
    operation = create(client)
    (approval,) = get(client, "/approvals").json()["results"]
    definition = AgentDefinition(family="openai_responses", model="gpt-5.1")
    agent_create(tenant=demo.tenant, name="refunds", definition=definition, actor=ENGINE)
    form = ServerForm(name="shop", kind="http", signing_secret="s")
    server = remote_server_register(tenant=demo.tenant, form=form, actor=ENGINE)
    pay = HttpToolForm("pay", "", {"type": "object"}, "http://127.0.0.1:9/pay")
    remote_http_tool_register(server_pk=server.pk, form=pay, actor=ENGINE)
    ids = {"op": operation["id"], "apr": approval["id"], "tool": "get_order"}
    return ids | {"agent": "refunds", "server": "shop", "remote_tool": "pay"}


def _call(client: APIClient, method: str, path: str, ids: dict[str, str]) -> Any:
    url = path.format(**ids)
    if method == "GET":
        return get(client, url)
    if method in ("PUT", "PATCH"):
        return client.generic(method, f"{API}{url}", json.dumps(SETTINGS), "application/json")
    suffix = "/" + url.rsplit("/", 1)[-1]
    body = BODIES.get(suffix, create_body() if url == "/operations" else {})
    return post(client, url, body)


def _id(endpoint: tuple[str, str, str]) -> str:
    return f"{endpoint[0]} {endpoint[1]}"


def _call_with(
    client: APIClient, method: str, path: str, ids: dict[str, str], query: str = "", **extra: Any
) -> Any:
    """``_call`` with a query string, and ``extra`` fields added to a POST's body."""
    url = path.format(**ids)
    if method == "GET":
        return client.get(f"{API}{url}?{query}")
    suffix = "/" + url.rsplit("/", 1)[-1]
    body = BODIES.get(suffix, create_body() if url == "/operations" else {})
    if method in ("PUT", "PATCH"):
        body = SETTINGS
    return client.generic(
        method,
        f"{API}{url}?{query}",
        json.dumps({**body, **extra}),
        "application/json",
        HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
    )


# --- authentication and scopes ----------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=_id)
def test_every_endpoint_needs_a_key(parked: dict[str, str], endpoint: tuple[str, str, str]) -> None:
    method, path, _ = endpoint
    response = _call(APIClient(), method, path, parked)
    error = error_of(response, 401, "unauthenticated")
    assert error["message"]
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=_id)
def test_every_endpoint_refuses_a_key_without_its_scope(
    demo: DemoSeed, parked: dict[str, str], endpoint: tuple[str, str, str]
) -> None:
    method, path, scope = endpoint
    client, _ = keyed_client(demo.tenant, *[s for s in ALL_SCOPES if s != scope])
    error = error_of(_call(client, method, path, parked), 403, "forbidden")
    assert scope in error["message"]
    # Refused before anything happened.
    assert Operation.objects.get().state == "WAITING_APPROVAL"
    assert ApprovalRequest.objects.get().state == "PENDING"


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e[0] == "GET"], ids=_id)
def test_head_needs_the_scope_of_get(
    demo: DemoSeed, parked: dict[str, str], endpoint: tuple[str, str, str]
) -> None:
    _, path, scope = endpoint
    client, _ = keyed_client(demo.tenant, *[s for s in ALL_SCOPES if s != scope])
    assert client.head(f"{API}{path.format(**parked)}").status_code == 403
    reader, _ = keyed_client(demo.tenant, scope)
    assert reader.head(f"{API}{path.format(**parked)}").status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "Bearer cg_{prefix}_{secret}x",
        "Bearer cg_000000000000_{secret}",
        "Bearer cg_{prefix}",
        "Bearer {secret}",
        "Token cg_{prefix}_{secret}",
        "Bearer cg_{prefix}\x00_{secret}",
        "Bearer cg_\x00_{secret}",
        "Bearer",
        "Bearer ",
    ],
)
def test_a_wrong_key_is_401(demo: DemoSeed, header: str) -> None:
    key, secret = _raw_key(demo)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.format(prefix=key.prefix, secret=secret))
    response = get(client, "/tools")
    error_of(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == "Bearer"


def test_the_scheme_is_case_insensitive(demo: DemoSeed) -> None:
    key, secret = _raw_key(demo)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"bearer cg_{key.prefix}_{secret}")
    assert get(client, "/tools").status_code == 200


def test_a_revoked_key_is_401(demo: DemoSeed) -> None:
    client, key = keyed_client(demo.tenant, READ)
    assert get(client, "/tools").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    error = error_of(get(client, "/tools"), 401, "unauthenticated")
    assert "revoked" in error["message"]


def test_a_used_key_records_when(demo: DemoSeed) -> None:
    client, key = keyed_client(demo.tenant, READ)
    assert key.last_used_at is None
    assert get(client, "/tools").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None


def _raw_key(demo: DemoSeed) -> tuple[ApiKey, str]:
    """A key and its secret (the part after ``cg_<prefix>_``)."""
    key, full = new_key(demo.tenant, READ, name="raw")
    return key, full.removeprefix(f"cg_{key.prefix}_")


def test_an_unknown_scope_cannot_be_granted(demo: DemoSeed) -> None:
    with pytest.raises(CallgateError, match="unknown scopes: operations:delete"):
        api_key_create(tenant=demo.tenant, name="x", scopes=[READ, "operations:delete"])
    with pytest.raises(CallgateError, match="at least one scope"):
        api_key_create(tenant=demo.tenant, name="x", scopes=[])
    with pytest.raises(CallgateError, match="name the service"):
        api_key_create(tenant=demo.tenant, name="  ", scopes=[READ])
    assert not ApiKey.objects.exists()


def test_a_key_name_names_one_key_of_the_tenant(demo: DemoSeed) -> None:
    """The audit trail names a key's service by the key's name: a tenant's keys, revoked ones
    too, never share one, told apart by letter case or compatibility forms only; another
    tenant may use it."""
    key, _ = api_key_create(tenant=demo.tenant, name="  billing ", scopes=[READ])
    assert key.name == "billing"
    api_key_create(tenant=demo.tenant, name="Ärger", scopes=[READ])
    api_key_create(tenant=demo.tenant, name="Straße", scopes=[READ])
    api_keys_revoke(keys=ApiKey.objects.filter(pk=key.pk))
    taken = {
        "Billing": "named 'billing', revoked: a revoked key keeps its name",
        "ärger": "named 'Ärger'$",
        "STRASSE": "named 'Straße'$",
        "".join(chr(ord(c) + 0xFEE0) for c in "BILLING"): "named 'billing', revoked",  # NFKC
    }
    for name, said in taken.items():
        with pytest.raises(CallgateError, match=f"acme already has a key {said}") as refused:
            api_key_create(tenant=demo.tenant, name=name, scopes=[READ])
        assert refused.value.code == "key_exists"
    api_key_create(tenant=TenantFactory.create(slug="globex"), name="billing", scopes=[READ])
    assert ApiKey.objects.filter(name="billing").count() == 2


def test_a_key_name_taken_while_the_key_is_created_is_refused(
    demo: DemoSeed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another key of the same name committed between the name check and the insert: the
    database's constraint refuses the insert, and the caller gets ``key_exists`` naming the
    other key, not a database error."""
    import threading

    from django.db import connections

    from toolcalls.api import auth

    checked = auth._name_free

    def meanwhile(tenant: Any, name: str) -> None:
        checked(tenant, name)
        monkeypatch.setattr(auth, "_name_free", checked)

        def create() -> None:
            try:
                api_key_create(tenant=tenant, name="BILLING", scopes=[READ])
            finally:
                connections.close_all()

        other = threading.Thread(target=create)
        other.start()
        other.join()

    monkeypatch.setattr(auth, "_name_free", meanwhile)
    with pytest.raises(CallgateError, match="acme already has a key named 'BILLING'") as refused:
        api_key_create(tenant=demo.tenant, name="billing", scopes=[READ])
    assert refused.value.code == "key_exists"
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["BILLING"]


@pytest.mark.parametrize(
    "name", ["\u200b", "bill\u200bing", "tab\there", "new\nline", "no\u00a0break", "x" * 101]
)
def test_a_key_name_shows_every_character_on_one_line(demo: DemoSeed, name: str) -> None:
    with pytest.raises(CallgateError, match="a key's name has") as refused:
        api_key_create(tenant=demo.tenant, name=name, scopes=[READ])
    assert refused.value.code == "invalid_request"
    assert not ApiKey.objects.exists()


def test_the_migration_renames_a_tenants_later_keys_of_a_taken_name(demo: DemoSeed) -> None:
    executor = MigrationExecutor(connection)
    before, after = [("api", "0003_webhooks_move_out")], [("api", "0004_api_key_name_unique")]
    executor.migrate(before)
    first, _ = new_key(demo.tenant, READ, name="billing")
    second, _ = new_key(demo.tenant, READ, name="second")
    elsewhere, _ = new_key(TenantFactory.create(slug="globex"), READ, name="billing")
    ApiKey.objects.filter(pk=second.pk).update(name="Billing")  # as it could be before
    MigrationExecutor(connection).migrate(after)
    names = dict(ApiKey.objects.values_list("pk", "name"))
    assert names[first.pk] == names[elsewhere.pk] == "billing"
    assert names[second.pk] == f"Billing (cg_{second.prefix})"


# --- tenants and four-eyes --------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", OBJECT_ENDPOINTS, ids=_id)
def test_another_tenants_objects_are_404(
    parked: dict[str, str], endpoint: tuple[str, str, str]
) -> None:
    method, path, _ = endpoint
    outsider, _ = keyed_client(other_tenant(), *ALL_SCOPES)
    error_of(_call(outsider, method, path, parked), 404, "not_found")
    assert Operation.objects.get(public_id=parked["op"]).state == "WAITING_APPROVAL"


def test_another_tenants_objects_are_never_listed(parked: dict[str, str]) -> None:
    outsider, _ = keyed_client(other_tenant(), *ALL_SCOPES)
    own = create(outsider, replies=[final()])
    listed = get(outsider, "/operations").json()["results"]
    assert [o["id"] for o in listed] == [own["id"]]
    for state in ("PENDING", "APPROVED", "DENIED", "EXPIRED"):
        assert get(outsider, "/approvals", {"state": state}).json()["results"] == []
    assert get(outsider, "/operations", {"state": "WAITING_APPROVAL"}).json()["results"] == []


def test_a_key_cannot_decide_what_it_requested(demo: DemoSeed) -> None:
    service, _ = keyed_client(demo.tenant, *ALL_SCOPES, name="all-in-one")
    reviewer, _ = keyed_client(demo.tenant, DECIDE, name="reviewer")
    operation = create(service)
    (approval,) = get(service, "/approvals").json()["results"]
    url = f"/approvals/{approval['id']}/decide"
    error_of(post(service, url, {"decision": "approve"}), 403, "self_approval")
    response = post(reviewer, url, {"decision": "approve"})
    assert response.status_code == 200, response.content
    assert get(service, f"/operations/{operation['id']}").json()["state"] == "COMPLETED"


# --- idempotency ------------------------------------------------------------------------------


def test_the_same_key_and_body_replay_the_first_response(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])
    first = post(client, "/operations", body, idempotency_key="order-42")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    again = post(client, "/operations", body, idempotency_key="order-42")
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Operation.objects.count() == 1


def test_the_same_key_with_another_body_is_409(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    post(client, "/operations", create_body(replies=[final()]), idempotency_key="k")
    response = post(client, "/operations", create_body(replies=[final("Hi.")]), idempotency_key="k")
    error_of(response, 409, "idempotency_key_reused")
    # The same key on another path is another request too.
    error_of(
        post(client, "/operations/op_x/cancel", {}, idempotency_key="k"),
        409,
        "idempotency_key_reused",
    )
    assert Operation.objects.count() == 1


def test_an_error_response_is_remembered_too(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(tools=["launch_rocket"])
    first = error_of(post(client, "/operations", body, idempotency_key="e"), 400, "invalid_request")
    again = post(client, "/operations", body, idempotency_key="e")
    replayed = error_of(again, 400, "invalid_request")
    assert replayed == first | {"request_id": again["Request-Id"]}
    assert again["Idempotent-Replayed"] == "true"


def test_a_post_without_idempotency_key_is_400(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    for value in (None, "", "   "):
        extra = {} if value is None else {"HTTP_IDEMPOTENCY_KEY": value}
        response = client.post(f"{API}/operations", create_body(), format="json", **extra)
        error_of(response, 400, "idempotency_key_required")
    too_long = post(client, "/operations", create_body(), idempotency_key="k" * 256)
    error_of(too_long, 400, "invalid_request")
    assert not Operation.objects.exists()
    assert not IdempotentRequest.objects.exists()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("k1,k2", "more than once"),  # two headers, as gunicorn and Django's server join them
        ("k1, k2", "more than once"),
        ("a\x01b", "control character U+0001"),
        ("a\x7fb", "control character U+007F"),
        ("a\tb", "control character U+0009"),
    ],
)
def test_an_idempotency_key_sent_twice_or_with_a_control_character_is_400(
    demo: DemoSeed, value: str, said: str
) -> None:
    """Two keys were stored as the one key ``k1,k2``, and a key with a control character was
    taken (and shown) as sent."""
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    response = post(client, "/operations", create_body(replies=[final()]), idempotency_key=value)
    error = error_of(response, 400, "invalid_request")
    assert said in error["message"], error
    assert list(fields_of(error)) == ["Idempotency-Key"]
    assert not Operation.objects.exists()
    assert not IdempotentRequest.objects.exists()


def test_a_key_still_in_flight_is_409(demo: DemoSeed) -> None:
    client, key = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])
    first = post(client, "/operations", body, idempotency_key="warm-up")
    IdempotentRequest.objects.create(
        api_key=key,
        key="busy",
        request_sha256=IdempotentRequest.objects.get(key="warm-up").request_sha256,
    )
    assert first.status_code == 201
    busy = post(client, "/operations", body, idempotency_key="busy")
    error_of(busy, 409, "idempotency_key_in_flight")
    assert busy["Retry-After"] == "1"
    assert Operation.objects.count() == 1


def test_a_key_left_in_flight_by_a_dead_request_is_taken_over(
    demo: DemoSeed, settings: Any
) -> None:
    settings.CALLGATE_API_IN_FLIGHT_S = 60
    client, key = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])
    post(client, "/operations", body, idempotency_key="warm-up")
    fingerprint = IdempotentRequest.objects.get(key="warm-up").request_sha256
    dead = IdempotentRequest.objects.create(api_key=key, key="dead", request_sha256=fingerprint)
    IdempotentRequest.objects.filter(pk=dead.pk).update(
        created_at=timezone.now() - timedelta(seconds=61)
    )
    # Another body under the abandoned key is still refused.
    other = create_body(replies=[final("Hi.")])
    error_of(
        post(client, "/operations", other, idempotency_key="dead"), 409, "idempotency_key_reused"
    )
    taken = post(client, "/operations", body, idempotency_key="dead")
    assert taken.status_code == 201 and "Idempotent-Replayed" not in taken
    assert post(client, "/operations", body, idempotency_key="dead").json() == taken.json()
    assert Operation.objects.count() == 2


def test_a_broker_outage_after_commit_is_not_an_error_a_client_would_retry(
    demo: DemoSeed, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise KombuOperationalError("connection refused")

    monkeypatch.setattr(tasks.run_turn, "apply_async", broker_down)
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])
    first = post(client, "/operations", body, idempotency_key="outage")
    assert first.status_code == 201, first.content  # committed: the sweep wakes it later
    again = post(client, "/operations", body, idempotency_key="outage")
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert Operation.objects.count() == 1


def test_idempotency_keys_are_per_api_key(demo: DemoSeed) -> None:
    one, _ = keyed_client(demo.tenant, READ, WRITE)
    two, _ = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])
    first = post(one, "/operations", body, idempotency_key="shared")
    second = post(two, "/operations", body, idempotency_key="shared")
    assert (first.status_code, second.status_code) == (201, 201)
    assert "Idempotent-Replayed" not in second
    assert first.json()["id"] != second.json()["id"]
    assert Operation.objects.count() == 2


def test_a_server_error_is_not_remembered(demo: DemoSeed, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = create_body(replies=[final()])

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the database fell over")

    with monkeypatch.context() as patch:
        patch.setattr(views, "operation_start", broken)
        response = post(client, "/operations", body, idempotency_key="retry-me")
        error = error_of(response, 500, "internal_error")
        assert "fell over" not in error["message"]
    assert not IdempotentRequest.objects.exists()
    retried = post(client, "/operations", body, idempotency_key="retry-me")
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried


# --- the one error shape ----------------------------------------------------------------------


def test_other_failures_take_the_one_shape(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    error_of(client.delete(f"{API}/operations"), 405, "method_not_allowed")
    error_of(client.put(f"{API}/tools", {}, format="json"), 405, "method_not_allowed")
    form = client.post(
        f"{API}/operations", {"family": "x"}, format="multipart", HTTP_IDEMPOTENCY_KEY="f"
    )
    error_of(form, 415, "unsupported_media_type")
    error_of(client.get(f"{API}/tools", HTTP_ACCEPT="application/xml"), 406, "not_acceptable")
    error_of(get(client, "/operations", {"cursor": "garbage"}), 400, "invalid_cursor")


def _nested(depth: int) -> str:
    return '{"x":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("path", "fragment", "field"),
    [
        ("/operations?family=openai%00responses", None, "query"),
        ("/operations?state%00=COMPLETED", None, "state\x00"),  # an unknown parameter
        ("/operations?cursor=%00", None, "query"),
        ("/approvals?tool=submit%00refund", None, "query"),
        ("/operations/op_%00/events", None, "path"),
        ("/approvals/apr_%00", None, "path"),
        ("/operations", r'"metadata": {"ticket\u0000": "T-1"}', "metadata"),
        ("/operations", r'"metadata": {"ticket": "T-\ud800"}', "metadata.ticket"),
        ("/operations", r'"input": "hi\u0000there"', "input"),
        ("/operations", r'"family": "openai\u0000responses"', "family"),
        ("/operations", r'"budgets": {"\ud800": 1}', "budgets"),
        ("/operations", r'"replies": [{"kind": "response", "body": "\ud83d"}]', "replies.0.body"),
        ("/operations", f'"metadata": {_nested(100)}', None),
        ("/operations", f'"replies": [{_nested(5000)}]', None),
    ],
)
def test_what_the_database_cannot_hold_is_400_not_500(
    demo: DemoSeed, path: str, fragment: str | None, field: str | None
) -> None:
    """NUL and unpaired surrogates (PostgreSQL can neither compare nor store them), named by
    their place (a body field by its dotted path), and bodies nested deeper than any provider
    reply are refused before any query. ``fragment`` (raw JSON, escapes as written) replaces a
    field of a valid start request."""
    client, _ = keyed_client(demo.tenant, *ALL_SCOPES)
    if fragment is None:
        response = client.get(f"{API}{path}")
    else:
        replaced = fragment.split('"')[1]
        body = {k: v for k, v in create_body(replies=[final()]).items() if k != replaced}
        raw = json.dumps(body)[:-1] + f", {fragment}}}"
        response = client.post(
            f"{API}{path}", raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
        )
    if field is None:
        error_of(response, 400, "malformed_request")
    else:
        error = error_of(response, 400, "invalid_request")
        assert list(error["details"]["fields"]) == [field], error
    assert not Operation.objects.exists()
    assert not IdempotentRequest.objects.exists()


#: JSON no reader takes exactly (I-JSON, RFC 7493): a member name given twice in one object
#: (DRF's parser kept the last) and numbers beyond ±(2**53-1), whole or not (an audit event
#: holding one could not be hashed: a 500). Each ``fragment`` (raw JSON) is added to a valid
#: start request, with the place its refusal names.
NOT_EXACT = [
    ('"subject_ref": "cus_2002"', "subject_ref: given twice"),
    ('"settings": {"temperature": 0.2, "temperature": 1.5}', "settings/temperature: given twice"),
    ('"messages": [{"role": "user", "text": "a", "role": "assistant"}]', "messages/0/role: given"),
    ('"settings": {"max_output_tokens": 9007199254740992}', "settings/max_output_tokens: 9007"),
    ('"settings": {"max_output_tokens": 100000000000000000000}', "settings/max_output_tokens: 1"),
    ('"settings": {"max_output_tokens": 1e20}', "settings/max_output_tokens: 1e+20"),
    ('"settings": {"thinking_budget_tokens": -1e300}', "settings/thinking_budget_tokens: -1e"),
    ('"metadata": {"n": "1", "n": "2"}, "budgets": {"max_turns": 1e400}', "metadata/n: given"),
]


@pytest.mark.parametrize(("fragment", "named"), NOT_EXACT)
def test_json_no_reader_takes_exactly_is_malformed_and_starts_nothing(
    demo: DemoSeed, fragment: str, named: str
) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    raw = json.dumps(create_body(replies=[final()]))[:-1] + f", {fragment}}}"
    response = client.post(
        f"{API}/operations", raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
    )
    error = error_of(response, 400, "malformed_request")
    assert error["message"].startswith(f"The body cannot be read exactly as sent: {named}"), error
    assert not Operation.objects.exists()


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        (
            "/agents",
            '{"name": "big", "family": "openai_responses", "model": "gpt-5.1", '
            '"settings": {"max_output_tokens": 9007199254740992}}',
            "settings/max_output_tokens",
        ),
        (
            "/remote-servers/ledger/tools",
            '{"name": "pay", "url": "http://127.0.0.1:9/pay", "input_schema": {"type": "object", '
            '"properties": {"a": {"type": "integer", "maximum": 1' + "0" * 30 + "}}}}",
            "input_schema/properties/a/maximum",
        ),
        (
            "/remote-servers/ledger/tools",
            '{"name": "pay", "url": "http://127.0.0.1:9/pay", "input_schema": {"type": "object", '
            '"properties": {"a": {"type": "integer", "maximum": 1e30}}}}',
            "input_schema/properties/a/maximum",
        ),
    ],
)
def test_every_body_is_read_exactly(demo: DemoSeed, path: str, body: str, named: str) -> None:
    client, _ = keyed_client(demo.tenant, *ALL_SCOPES)
    assert (
        post(
            client, "/remote-servers", {"name": "ledger", "kind": "http", "signing_secret": "s"}
        ).status_code
        == 201
    )
    response = client.post(
        f"{API}{path}", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
    )
    error = error_of(response, 400, "malformed_request")
    assert f"{named}: " in error["message"] and "RFC 7493" in error["message"], error
    assert not AgentRevision.objects.exists() and not RemoteTool.objects.exists()


def test_a_chunked_body_the_server_would_read_as_none_is_malformed_not_missing_fields(
    demo: DemoSeed,
) -> None:
    """A body sent chunked is not taken as ``{}`` (which named every required field as missing,
    as if the client had left them out)."""
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = json.dumps(create_body(replies=[final()]))
    # As gunicorn and Django's development server pass a chunked body: no length, so Django
    # reads none of it.
    chunked = {"CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked"}
    headers = {"HTTP_IDEMPOTENCY_KEY": "k", **chunked}
    response = client.post(f"{API}/operations", body, content_type="application/json", **headers)
    assert error_of(response, 400, "malformed_request")["message"].startswith("Transfer-Encoding")
    assert not Operation.objects.exists()
    assert not IdempotentRequest.objects.exists()


def test_an_empty_body_declared_json_is_no_body(demo: DemoSeed) -> None:
    """What a generated client sends for an optional body left out: an action that takes none
    runs, one that needs fields names them."""
    client, _ = keyed_client(demo.tenant, READ, WRITE, "tools:manage")
    empty = client.generic("PATCH", f"{API}/tools/get_order", "", "application/json")
    assert empty.status_code == 200, empty.content
    response = client.post(
        f"{API}/operations", "", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
    )
    assert "subject_ref" in fields_of(error_of(response, 400, "invalid_request"))


def test_an_idempotency_key_with_nul_is_400(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    response = post(client, "/operations", create_body(replies=[final()]), idempotency_key="a\x00")
    error_of(response, 400, "invalid_request")
    assert not Operation.objects.exists()


# --- strict input -----------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=_id)
def test_every_endpoint_refuses_an_unknown_query_parameter(
    demo: DemoSeed, parked: dict[str, str], endpoint: tuple[str, str, str]
) -> None:
    error = _refused(demo, parked, endpoint, "stat=COMPLETED&limit=1")
    assert "stat" in error["message"]
    # Paged lists take limit; every other endpoint names it too.
    method, path, _ = endpoint
    paged = method == "GET" and path.endswith("s") and path not in ("/tools", "/remote-servers")
    assert set(fields_of(error)) == ({"stat"} if paged else {"stat", "limit"})


def _refused(
    demo: DemoSeed,
    parked: dict[str, str],
    endpoint: tuple[str, str, str],
    query: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """The 400 ``invalid_request`` error of ``endpoint`` called with ``query`` and ``extra``
    body fields; asserts that nothing happened."""
    method, path, _ = endpoint
    client, _ = keyed_client(demo.tenant, *ALL_SCOPES)
    events = Operation.objects.get(public_id=parked["op"]).events.count()
    error = error_of(
        _call_with(client, method, path, parked, query, **extra), 400, "invalid_request"
    )
    assert Operation.objects.count() == 1
    assert Operation.objects.get(public_id=parked["op"]).events.count() == events
    return error


@pytest.mark.parametrize(
    ("path", "query", "named"),
    [
        ("/operations", "state=COMPLETED&state=FAILED", {"state"}),
        ("/operations", "limit=1&limit=50&family=openai_chat", {"limit"}),
        ("/operations", "subject_ref=a&subject_ref=b&created_after=&created_after=",
         {"subject_ref", "created_after"}),
        ("/operations/{op}/events", "cursor=a&cursor=b", {"cursor"}),
        ("/approvals", "tool=get_order&tool=submit_refund", {"tool"}),
        ("/operations/{op}/approvals", "limit=1&limit=1", {"limit"}),
    ],
)  # fmt: skip
def test_a_query_parameter_given_twice_is_400_not_its_last_value(
    demo: DemoSeed, parked: dict[str, str], path: str, query: str, named: set[str]
) -> None:
    error = _refused(demo, parked, ("GET", path, READ), query)
    assert "more than once" in error["message"]
    assert set(fields_of(error)) == named


def test_a_repeatable_query_parameter_may_be_given_twice(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    operation = create(client, replies=[final()], metadata={"ticket": "T-1", "team": "refunds"})
    response = get(client, "/operations", {"metadata": ["ticket:T-1", "team:refunds"]})
    assert [row["id"] for row in response.json()["results"]] == [operation["id"]]


@pytest.mark.parametrize("path", ["/health/live", "/health/ready"])
def test_health_refuses_an_unknown_query_parameter(path: str) -> None:
    error = error_of(APIClient().get(f"{API}{path}?verbose=1"), 400, "invalid_request")
    assert set(fields_of(error)) == {"verbose"}


@pytest.mark.parametrize("endpoint", [e for e in ENDPOINTS if e[0] != "GET"], ids=_id)
def test_every_body_refuses_an_unknown_field(
    demo: DemoSeed, parked: dict[str, str], endpoint: tuple[str, str, str]
) -> None:
    (message,) = fields_of(_refused(demo, parked, endpoint, colour="blue"))["colour"]
    assert message.startswith("Unknown field; this body takes:")


#: A value of the wrong JSON type in each body (endpoint, extra fields, the input they name):
#: DRF alone would store 2 as "2" and take "true" as true.
WRONG_TYPES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/operations", {"model": 2}, "model"),
    ("POST", "/operations", {"stream": "true"}, "stream"),
    ("POST", "/operations", {"stream": 1}, "stream"),
    ("POST", "/operations", {"transport": 1}, "transport"),
    ("POST", "/operations", {"subject_ref": 1001}, "subject_ref"),
    ("POST", "/operations", {"tools": ["get_order", 7]}, "tools.1"),
    ("POST", "/operations", {"metadata": {"ticket": 4821}}, "metadata.ticket"),
    ("POST", "/operations", {"settings": {"reasoning_effort": 1}}, "settings.reasoning_effort"),
    ("POST", "/operations/{op}/cancel", {"reason": False}, "reason"),
    ("POST", "/operations/{op}/extend", {"note": ["late"]}, "note"),
    ("POST", "/operations/{op}/extend", {"budgets": {"max_turns": "9"}}, "budgets.max_turns"),
    ("POST", "/operations/{op}/extend", {"budgets": {"max_turns": 5.0}}, "budgets.max_turns"),
    ("POST", "/agents", {"budgets": {"max_parallel": 2.0}}, "budgets.max_parallel"),
    ("POST", "/operations/{op}/messages", {"input": 5}, "input"),
    ("POST", "/operations/{op}/fork", {"from_turn": "0"}, "from_turn"),
    ("POST", "/operations/{op}/fork", {"from_turn": 0.0}, "from_turn"),
    ("POST", "/approvals/{apr}/decide", {"decision": True}, "decision"),
    ("POST", "/agents", {"model": 2}, "model"),
    ("POST", "/agents/{agent}/revisions", {"note": 3}, "note"),
    ("PUT", "/tools/{tool}", {"enabled": "true"}, "enabled"),
    ("PATCH", "/tools/{tool}", {"max_calls": "2"}, "max_calls"),
    ("POST", "/remote-servers", {"headers": {"X-Key": 7}}, "headers.X-Key"),
]


#: Text that may not be blank, given with nothing a person can see (white space, or format
#: characters that DRF's trimming keeps): each endpoint, extra fields, the input they name.
BLANK_TEXT: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/operations", {"input": "   "}, "input"),
    ("POST", "/operations", {"input": "\u200b"}, "input"),
    ("POST", "/operations", {"subject_ref": "\u2060"}, "subject_ref"),
    ("POST", "/operations", {"messages": [{"role": "user", "text": " \ufeff"}]}, "messages.0.text"),
    ("POST", "/operations", {"metadata": {"ticket": "\u180e"}}, "metadata.ticket"),
    ("POST", "/operations", {"tools": ["get_order", "\u200b"]}, "tools.1"),
    ("POST", "/operations/{op}/cancel", {"reason": "\u200b\u2060"}, "reason"),
    ("POST", "/operations/{op}/stop", {"reason": "\ufeff"}, "reason"),
    ("POST", "/operations/{op}/messages", {"input": "\n\u200b"}, "input"),
]


@pytest.mark.parametrize(
    ("case", "said"),
    [(case, "Must be a JSON ") for case in WRONG_TYPES]
    + [(case, "This field may not be blank.") for case in BLANK_TEXT],
    ids=lambda value: f"{value[1]} {json.dumps(value[2])}" if isinstance(value, tuple) else "",
)
def test_every_body_refuses_a_value_of_the_wrong_json_type_or_blank_text(
    demo: DemoSeed, parked: dict[str, str], case: tuple[str, str, dict[str, Any], str], said: str
) -> None:
    method, path, extra, named = case
    fields = fields_of(_refused(demo, parked, (method, path, WRITE), **extra))
    assert set(fields) == {named}, fields
    assert fields[named][0].startswith(said), fields


def test_text_with_a_visible_character_is_kept_as_sent(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    data = create(client, input="\u200b Refund ORD-1001, please. ", subject_ref="cus_1001")
    assert data["input"] == "\u200b Refund ORD-1001, please. "


def test_a_typo_in_a_field_name_starts_nothing(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    response = post(client, "/operations", create_body(budget={"max_turns": 1}))
    assert set(fields_of(error_of(response, 400, "invalid_request"))) == {"budget"}
    assert not Operation.objects.exists()


def test_a_typo_in_a_filter_name_lists_nothing(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    create(client)
    for query in ("stat=COMPLETED", "subject_rf=cus_9999", "State=COMPLETED"):
        response = client.get(f"{API}/operations?{query}")
        name = query.split("=")[0]
        assert set(fields_of(error_of(response, 400, "invalid_request"))) == {name}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (["not", "an", "object"], {"body"}),
        ({"budgets": {"max_turns": "many"}}, {"budgets.max_turns"}),
        ({"tools": ["get_order", ""]}, {"tools.1"}),
        ({"transport": "live", "replies": [{"kind": "response"}]}, {"replies"}),
    ],
)
def test_details_name_every_wrong_input_by_its_path(
    demo: DemoSeed, body: Any, fields: set[str]
) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    payload = body if isinstance(body, list) else create_body(**body)
    error = error_of(post(client, "/operations", payload), 400, "invalid_request")
    assert error["details"].keys() == {"fields"}
    assert set(fields_of(error)) == fields


def test_every_error_has_the_same_details_shape(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    wrong_inputs = [
        get(client, "/operations", {"limit": "0"}),
        get(client, "/operations", {"limit": "\u00b2"}),  # a digit to isdigit, not to int
        get(client, "/operations", {"limit": "\uff11"}),  # a full-width 1
        get(client, "/operations", {"state": "bogus"}),
        get(client, "/operations", {"created_after": "yesterday"}),
        get(client, "/operations", {"metadata": "no-colon"}),
        get(client, "/operations", {"subject_ref": "\x00"}),
        post(client, "/operations", create_body(model="-bad model")),
        post(client, "/operations", create_body(), idempotency_key="k" * 256),
    ]
    for response in wrong_inputs:
        error = error_of(response, 400, "invalid_request")
        assert error["details"].keys() == {"fields"} and fields_of(error), error
    no_inputs = [get(client, "/operations/op_nope"), get(APIClient(), "/operations")]
    for response in no_inputs:
        assert response.json()["error"]["details"] == {}


# --- request IDs --------------------------------------------------------------------------------


def test_every_response_carries_a_generated_request_id(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ)
    responses = [
        get(client, "/tools"),
        get(client, "/operations/op_nope"),
        get(APIClient(), "/health/live"),
        APIClient().get("/api/v2/anything"),
        APIClient().get("/api/schema/"),
    ]
    ids = [response["Request-Id"] for response in responses]
    assert all(re.fullmatch(r"req_[0-9a-f]{32}", value) for value in ids), ids
    assert len(set(ids)) == len(ids)
    assert responses[3].json()["error"]["request_id"] == ids[3]


@pytest.mark.parametrize("header", ["HTTP_REQUEST_ID", "HTTP_X_REQUEST_ID"])
def test_a_well_formed_request_id_of_the_caller_is_kept(demo: DemoSeed, header: str) -> None:
    client, _ = keyed_client(demo.tenant, READ)
    response = client.get(f"{API}/operations/op_nope", **{header: "trace-4821.a:b_c"})
    assert response["Request-Id"] == "trace-4821.a:b_c"
    assert error_of(response, 404, "not_found")["request_id"] == "trace-4821.a:b_c"


@pytest.mark.parametrize("value", ["", "has space", "-leading-dash", "x" * 129, "ünïcode"])
def test_a_malformed_request_id_is_replaced(demo: DemoSeed, value: str) -> None:
    client, _ = keyed_client(demo.tenant, READ)
    response = client.get(f"{API}/tools", HTTP_REQUEST_ID=value)
    assert response.status_code == 200
    assert re.fullmatch(r"req_[0-9a-f]{32}", response["Request-Id"])


def test_log_lines_name_the_request(demo: DemoSeed) -> None:
    """The console handler's filter stamps every record written while a request is served,
    Django's own line about the response included."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(RequestIdFilter())
    logging.getLogger().addHandler(handler)
    try:
        client, _ = keyed_client(demo.tenant, READ)
        client.get(f"{API}/operations/op_nope", HTTP_REQUEST_ID="trace-log-1")
    finally:
        logging.getLogger().removeHandler(handler)
    (line,) = [r for r in records if r.name == "django.request"]
    assert line.request_id == "trace-log-1"  # type: ignore[attr-defined]
    assert "Not Found" in line.getMessage()
    config = settings_logging()
    assert "request_id" in config["handlers"]["console"]["filters"]
    assert "%(request_id)s" in config["formatters"]["text"]["format"]
    assert "request_id" in config["formatters"]["json"]["fmt"]


def test_outside_a_request_log_lines_say_dash() -> None:
    record = logging.LogRecord("engine", logging.INFO, "", 0, "tick", None, None)
    assert RequestIdFilter().filter(record)
    assert record.request_id == "-"  # type: ignore[attr-defined]


def test_under_debug_a_django_line_is_logged_once(tmp_path: Path) -> None:
    """The embedded demo runs with DEBUG, where Django's own console handler writes too: each
    of Django's lines (a 4xx's "Bad Request", say) comes out once, in the project's format."""
    script = (
        "import django, logging; django.setup(); "
        "logging.getLogger('django.request').warning('Bad Request: /api/v1/nowhere')"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'logging.sqlite3'}",
        "CELERY_BROKER_URL": "",
    }
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if "Bad Request: /api/v1/nowhere" in line]
    assert len(lines) == 1 and "WARNING django.request [-]" in lines[0]


def settings_logging() -> dict[str, Any]:
    from django.conf import settings

    return settings.LOGGING  # type: ignore[no-any-return]


# --- rate limit -------------------------------------------------------------------------------


@pytest.fixture
def tiny_rate(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Two requests a minute per key (the rate is read when the throttle is built)."""
    monkeypatch.setattr(views.ApiKeyThrottle, "rate", "2/min", raising=False)
    cache.clear()
    yield
    cache.clear()


@pytest.mark.usefixtures("tiny_rate")
def test_over_the_rate_is_429_with_retry_after(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    other, _ = keyed_client(demo.tenant, READ)
    assert get(client, "/tools").status_code == 200
    assert get(client, "/operations").status_code == 200
    response = get(client, "/tools")
    error = error_of(response, 429, "rate_limited")
    assert error["message"]
    assert 1 <= int(response["Retry-After"]) <= 60
    error_of(post(client, "/operations", create_body()), 429, "rate_limited")
    assert not Operation.objects.exists()
    # Per key: another key of the same tenant is not slowed down; health is never throttled.
    assert get(other, "/tools").status_code == 200
    assert get(APIClient(), "/health/live").status_code == 200


@pytest.mark.usefixtures("tiny_rate")
def test_rate_limit_headers_say_where_the_key_stands(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    first, second, refused = (get(client, "/tools") for _ in range(3))
    assert first["RateLimit-Limit"] == second["RateLimit-Limit"] == "2"
    assert (first["RateLimit-Remaining"], second["RateLimit-Remaining"]) == ("1", "0")
    assert 59 <= int(first["RateLimit-Reset"]) <= 60
    assert refused.status_code == 429
    assert refused["RateLimit-Remaining"] == "0"
    assert 1 <= int(refused["RateLimit-Reset"]) <= 60
    # Errors and POSTs carry them too; health, which is not throttled, does not.
    cache.clear()
    assert error_of(get(client, "/operations/op_nope"), 404, "not_found")
    assert get(client, "/operations/op_nope")["RateLimit-Remaining"] == "0"
    assert "RateLimit-Limit" not in get(APIClient(), "/health/live")


# --- OpenAPI ----------------------------------------------------------------------------------


def _documented_paths() -> dict[str, set[str]]:
    """Every endpoint of ``toolcalls.api.urls`` and ``approvals.api.urls`` as an OpenAPI path →
    its HTTP methods."""
    paths: dict[str, set[str]] = {}
    for pattern in [*api_urls.urlpatterns, *approvals_api_urls.urlpatterns]:
        assert isinstance(pattern, URLPattern)
        route = re.sub(r"<str:(\w+)>", r"{\1}", str(pattern.pattern))
        view = pattern.callback.view_class  # type: ignore[attr-defined]
        methods = {m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)}
        paths[f"{API}/{route}"] = methods
    return paths


def test_the_schema_is_valid_openapi_3_and_lists_every_endpoint() -> None:
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    documented = {path: set(ops) for path, ops in schema["paths"].items()}
    assert documented == _documented_paths()
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key `cg_<prefix>_<secret>`, bound to one tenant and its scopes.",
    }
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert "200" in operation["responses"] or "201" in operation["responses"], path
            if method == "post":
                headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
                assert headers["Idempotency-Key"]["required"] is True, path
            if "/health/" not in path:
                assert operation["security"] == [{"ApiKey": []}], path
                assert {"401", "403", "429"} <= set(operation["responses"]), path
            else:
                assert operation["security"] == [], path  # needs no key, and says so
    assert schema["servers"] == [{"url": "/", "description": "The server serving this document"}]


def test_an_unknown_api_path_is_404_in_the_one_shape(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    client.enforce_csrf_checks = True  # as a real client meets them
    unknown = client.get(f"{API}/opération")
    error_of(unknown, 404, "not_found")
    known = client.get(f"{API}/operations/op_nope")
    # Written as every other answer of the API: compact, UTF-8.
    assert unknown.content.startswith(b'{"error":{"code":"not_found","message":"No endpoint')
    assert "/api/v1/opération.".encode() in unknown.content
    assert known.content.startswith(b'{"error":{"code":"not_found"')
    # A trailing-slash typo on a POST, and the API's roots, are 404 too (not CSRF or redirects).
    for path in (f"{API}/operations/", f"{API}/health/live/", API, "/api", "/api/v2/x"):
        error_of(client.post(path, {}, format="json"), 404, "not_found")


def test_a_body_over_the_upload_limit_is_413(demo: DemoSeed, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    error_of(post(client, "/operations", create_body(input="x" * 2000)), 413, "payload_too_large")


def test_the_yaml_schema_is_served_too() -> None:
    response = APIClient().get("/api/schema/")
    assert response.status_code == 200
    assert response.content.startswith(b"openapi: 3.")


def test_swagger_ui_is_served_to_anonymous_visitors() -> None:
    assert APIClient().get("/api/docs/").status_code == 200


def test_swagger_ui_is_served_from_local_assets() -> None:
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assets += re.findall(r"""["'](/static/[^"']+)["']""", html)
    assert any("swagger-ui-bundle.js" in a for a in assets), assets
    local = [a for a in assets if a.startswith("/static/")]
    assert local and all(a.startswith("/static/drf_spectacular_sidecar/") for a in local), local
    for asset in local:
        assert finders.find(asset.removeprefix("/static/")), asset
    assert not re.search(r"https?://", html), re.findall(r"https?://\S+", html)
    for cdn in ("cdn", "unpkg", "jsdelivr", "cloudflare"):
        assert cdn not in html.lower()
    assert "/api/schema/" in html


def test_every_scope_is_used_by_some_endpoint() -> None:
    assert {scope for _, _, scope in ENDPOINTS} | {AUDIT} == set(ALL_SCOPES)
