"""Helpers for the REST API tests: keys, clients, requests and the one error shape."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from rest_framework.response import Response
from rest_framework.test import APIClient

from tests.engine import bundled_replies
from toolcalls.api.auth import api_key_create
from toolcalls.api.models import SCOPES, ApiKey
from toolcalls.models import Tenant

API = "/api/v1"
READ, WRITE, DECIDE, AUDIT = "operations:read", "operations:write", "approvals:decide", "audit:read"
MANAGE = "tools:manage"
AGENTS_READ, AGENTS_WRITE = "agents:read", "agents:write"
ALL_SCOPES = list(SCOPES)


_unnamed = itertools.count(1)


def new_key(tenant: Tenant, *scopes: str, name: str = "") -> tuple[ApiKey, str]:
    """A new key of ``tenant`` holding ``scopes``: its row and the full ``cg_…`` key. Unless
    ``name`` is given, the key is named ``svc-<n>`` (a tenant's keys have different names)."""
    name = name or f"svc-{next(_unnamed)}"
    return api_key_create(tenant=tenant, name=name, scopes=list(scopes))


def keyed_client(tenant: Tenant, *scopes: str, name: str = "") -> tuple[APIClient, ApiKey]:
    """A client sending a new key of ``tenant`` holding ``scopes``; and that key's row."""
    key, full = new_key(tenant, *scopes, name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {full}")
    return client, key


def post(
    client: APIClient, path: str, body: Any = None, *, idempotency_key: str | None = None
) -> Response:
    """POST ``body`` as JSON with an ``Idempotency-Key`` (a fresh one unless given)."""
    return client.post(
        f"{API}{path}",
        {} if body is None else body,
        format="json",
        HTTP_IDEMPOTENCY_KEY=idempotency_key or uuid.uuid4().hex,
    )


def get(client: APIClient, path: str, params: dict[str, Any] | None = None) -> Response:
    return client.get(f"{API}{path}", params or {})


def create_body(scenario: str = "refund_approve", **overrides: Any) -> dict[str, Any]:
    """A replay-transport request body for the bundled ``scenario`` (OpenAI Responses)."""
    return {
        "family": "openai_responses",
        "model": "gpt-5.1",
        "input": "Please refund my damaged headphones from order ORD-1001.",
        "subject_ref": "cus_1001",
        "transport": "replay",
        "replies": bundled_replies(scenario),
        **overrides,
    }


def create(client: APIClient, scenario: str = "refund_approve", **overrides: Any) -> dict[str, Any]:
    """Start an operation through the API; returns its representation (asserts 201)."""
    response = post(client, "/operations", create_body(scenario, **overrides))
    assert response.status_code == 201, response.content
    return response.json()


def error_of(response: Response, status: int, code: str) -> dict[str, Any]:
    """Assert ``response`` is the one error shape with ``status`` and ``code``; its ``error``."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details", "request_id"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    assert body["error"]["request_id"] == response["Request-Id"], body
    return body["error"]


def fields_of(error: dict[str, Any]) -> dict[str, list[str]]:
    """The ``details.fields`` of an ``error`` (from :func:`error_of`): name → messages."""
    fields = error["details"]["fields"]
    assert all(isinstance(m, list) and all(isinstance(s, str) for s in m) for m in fields.values())
    return fields


def other_tenant() -> Tenant:
    return Tenant.objects.create(slug="globex", name="Globex")
