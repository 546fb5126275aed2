"""The API's management commands: a local fake provider for the live transport, API keys and
webhook endpoints."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.api.support import READ, WRITE, error_of, keyed_client, post
from tests.conftest import REPO
from toolcalls.api.models import ApiKey
from toolcalls.demo.services import DemoSeed
from toolcalls.webhooks.models import WebhookEndpoint

pytestmark = [pytest.mark.django_db(transaction=True)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fake_provider() -> Any:
    """``manage.py fake_provider`` in its own process on a free port; yields its output lines."""
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "fake_provider", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.strip())
        if line.startswith("Serving"):
            break
    try:
        yield lines
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_an_operation_runs_over_the_api_against_the_fake_provider(
    demo: DemoSeed, fake_provider: list[str], settings: Any, eager_tasks: None
) -> None:
    urls = dict(line.split("=", 1) for line in fake_provider if line.startswith("CALLGATE_"))
    assert "model 'refund_approve' of anthropic_messages" in " ".join(fake_provider)
    settings.CALLGATE_PROVIDERS = {
        provider: {"api_key": "anything", "base_url": urls[f"CALLGATE_{provider.upper()}_BASE_URL"]}
        for provider in ("openai", "anthropic", "google")
    }
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    body = {
        "family": "anthropic_messages",
        "model": "refund_approve",
        "input": "Please refund my damaged headphones from order ORD-1001.",
        "subject_ref": "cus_1001",
        "transport": "live",
    }
    # Twice: a scenario that served its last reply starts again for the next operation.
    for _ in range(2):
        created = post(client, "/operations", body)
        assert created.status_code == 201, created.content
        operation = client.get(f"/api/v1/operations/{created.json()['id']}").json()
        assert operation["state"] == "WAITING_APPROVAL", operation["terminal_reason"]
    unknown = post(client, "/operations", {**body, "model": "no_such_scenario"})
    assert unknown.status_code == 201
    failed = client.get(f"/api/v1/operations/{unknown.json()['id']}").json()
    assert failed["state"] == "FAILED" and failed["reason_code"] == "API_FAILURE"


def test_api_keys_are_created_listed_and_revoked(
    demo: DemoSeed, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("create_api_key", tenant="acme", name="billing", scopes="operations:read")
    secret = capsys.readouterr().out.splitlines()[1]
    key = ApiKey.objects.get(name="billing")
    assert secret.startswith(f"cg_{key.prefix}_")
    call_command("list_api_keys", tenant="acme")
    (line,) = capsys.readouterr().out.splitlines()
    fields = line.split("\t")
    assert fields[:4] == [key.prefix, "acme", "service:billing", "operations:read"]
    assert fields[5:] == ["used -", "revoked -"]
    assert secret.rsplit("_", 1)[1] not in line
    call_command("revoke_api_key", key.prefix)
    assert capsys.readouterr().out == "revoked\n"
    call_command("revoke_api_key", key.prefix)
    assert capsys.readouterr().out == "already revoked\n"
    with pytest.raises(CommandError, match="no API key"):
        call_command("revoke_api_key", "000000000000")
    with pytest.raises(CommandError, match="acme already has a key named 'billing'"):
        call_command("create_api_key", tenant="acme", name="billing")
    with pytest.raises(CommandError, match=r"no tenant 'nope'; manage.py create_tenant adds one"):
        call_command("list_api_keys", tenant="nope")
    client, _ = keyed_client(demo.tenant, READ)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    error_of(client.get("/api/v1/operations"), 401, "unauthenticated")


def test_webhook_endpoints_are_created_and_listed(
    demo: DemoSeed, capsys: pytest.CaptureFixture[str], settings: Any
) -> None:
    settings.CALLGATE_WEBHOOK_ALLOW_PRIVATE = False
    url = "https://hooks.example.com/callgate"
    call_command(
        "create_webhook_endpoint",
        tenant="acme",
        url=url,
        events="operation.state_changed,approval.requested",
    )
    endpoint = WebhookEndpoint.objects.get()
    assert f"signing secret: {endpoint.secret}" in capsys.readouterr().out
    assert endpoint.events == ["approval.requested", "operation.state_changed"]
    call_command("list_webhook_endpoints")
    assert capsys.readouterr().out == (
        f"{endpoint.pk}\tacme\tactive\tapproval.requested,operation.state_changed\t{url}\n"
    )
    for bad in ({"url": "http://127.0.0.1/x"}, {"url": url, "events": "operation.nope"}):
        with pytest.raises(CommandError):
            call_command("create_webhook_endpoint", tenant="acme", **{"events": "", **bad})
    assert WebhookEndpoint.objects.count() == 1


def test_a_key_is_revoked_by_any_form_people_hold(
    demo: DemoSeed, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole key, ``cg_<prefix>`` (as the help text writes the prefix) and the bare prefix
    name the same key; no answer repeats the secret."""
    keys = []
    for name in ("one", "two", "three"):
        call_command("create_api_key", tenant="acme", name=name, scopes="operations:read")
        keys.append(capsys.readouterr().out.splitlines()[1])
    whole, short, bare = keys
    forms = [whole, f"cg_{short.split('_')[1]}", f" {bare.split('_')[1]} "]
    for given in forms:
        call_command("revoke_api_key", given)
        assert capsys.readouterr().out == "revoked\n"
    assert not ApiKey.objects.filter(revoked_at__isnull=True).exists()
    call_command("revoke_api_key", whole)
    assert capsys.readouterr().out == "already revoked\n"


def test_a_key_that_names_none_is_refused_without_its_secret(demo: DemoSeed) -> None:
    call_command("create_api_key", tenant="acme", name="billing", stdout=StringIO())
    prefix = ApiKey.objects.get().prefix
    forged = f"cg_{prefix}_not-the-secret"
    with pytest.raises(CommandError, match=f"not the one with prefix {prefix}") as refused:
        call_command("revoke_api_key", forged)
    assert "not-the-secret" not in str(refused.value)
    with pytest.raises(CommandError, match=r"^no API key with prefix 000000000000$"):
        call_command("revoke_api_key", "cg_000000000000_some-secret")
    with pytest.raises(CommandError, match=r"^not an API key: give the key") as refused:
        call_command("revoke_api_key", "a-pasted-secret-alone")
    assert "a-pasted-secret-alone" not in str(refused.value)
    assert ApiKey.objects.get().revoked_at is None


def test_listing_webhook_endpoints_of_no_tenant_is_an_error(demo: DemoSeed) -> None:
    """As list_api_keys answers it, where it printed nothing and exited 0."""
    with pytest.raises(CommandError, match=r"^no tenant 'nope'; manage.py create_tenant"):
        call_command("list_webhook_endpoints", tenant="nope")


def test_the_api_document_written_nowhere_is_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "openapi.json"
    refused = f"^cannot write {re.escape(str(target))}: No such file or directory$"
    with pytest.raises(CommandError, match=refused):
        call_command("lint_api_schema", file=str(target), stdout=StringIO(), stderr=StringIO())
