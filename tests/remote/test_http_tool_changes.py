"""An HTTP tool's URLs are part of its revision: registering it again with another ``url`` or
``reconcile_url`` disables it until enabled again, audited, and a call parked before never
reaches either address; a tool stored before its revision covered the URLs keeps running."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.support import MANAGE, keyed_client, post
from tests.engine import operator
from tests.remote.conftest import ScriptedHttp
from tests.remote.test_remote_tools import ADMIN, OBJECT, enable, register_http, run
from toolcalls import catalogue
from toolcalls.models import Operation
from toolcalls.remote import rules
from toolcalls.remote.clients import ServedTool
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool
from toolcalls.remote.services import HttpToolForm, remote_http_tool_register
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def register_again(server: RemoteServer, tool: ScriptedHttp, **urls: str) -> RemoteTool:
    """``ledger``'s ``pay`` as :func:`register_http` registers it, but for ``urls``."""
    fields = {"url": f"{tool.url}/pay", "reconcile_url": "", **urls}
    form = HttpToolForm(name="pay", description="Pay", input_schema=OBJECT, **fields)
    return remote_http_tool_register(server_pk=server.pk, form=form, actor=ADMIN)


def parked(demo: Any, tool: ScriptedHttp) -> tuple[Operation, RemoteServer]:
    """An irreversible payment parked for approval."""
    server = register_http(demo, tool)
    enable(server, "pay", risk="irreversible", approval="always", key_arguments=["order_id"])
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    assert operation.calls.get().state == CallState.WAITING_APPROVAL
    return operation, server


def approve(operation: Operation) -> None:
    from approvals.services import approval_decide

    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, reason="")


@pytest.mark.parametrize("field", ["url", "reconcile_url"])
def test_another_url_disables_the_tool_as_a_change_and_is_audited(
    demo: Any, scripted_http: ScriptedHttp, field: str
) -> None:
    server = register_http(demo, scripted_http)
    enabled = enable(server, "pay", risk="irreversible", approval="always")
    assert register_again(server, scripted_http).enabled  # the same definition: no change
    assert not RemoteEvent.objects.filter(kind="tool_changed").exists()
    elsewhere = f"{scripted_http.url}/elsewhere"
    changed = register_again(server, scripted_http, **{field: elsewhere})
    assert (changed.enabled, changed.changed, getattr(changed, field)) == (False, True, elsewhere)
    assert changed.pinned_sha256 == enabled.pinned_sha256 != changed.served_sha256
    event = RemoteEvent.objects.get(kind="tool_changed", tool=changed)
    assert event.details[field] == elsewhere
    assert event.details["served_sha256"] == changed.served_sha256
    assert "ledger__pay" not in catalogue.tool_names(demo.tenant)


def test_a_call_parked_before_a_new_url_reaches_no_address_when_approved(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    operation, server = parked(demo, scripted_http)
    register_again(server, scripted_http, url=f"{scripted_http.url}/elsewhere")
    approve(operation)
    stale = operation.calls.get()
    assert (stale.state, stale.error_code, stale.attempt) == (
        CallState.REJECTED,
        "APPROVAL_STALE",
        0,
    )
    assert scripted_http.requests == []


def test_a_call_parked_before_a_new_url_is_stale_even_once_it_is_enabled_again(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    operation, server = parked(demo, scripted_http)
    register_again(server, scripted_http, url=f"{scripted_http.url}/elsewhere")
    enable(server, "pay", risk="irreversible", approval="always", key_arguments=["order_id"])
    approve(operation)
    stale = operation.calls.get()
    assert (stale.state, stale.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert scripted_http.requests == []


def test_the_api_answers_a_registration_again_with_what_changed(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    client, _ = keyed_client(demo.tenant, MANAGE)
    assert (
        post(
            client, "/remote-servers", {"name": "ledger", "kind": "http", "signing_secret": "s"}
        ).status_code
        == 201
    )
    body = {"name": "pay", "description": "Pay", "input_schema": OBJECT}
    body["url"] = f"{scripted_http.url}/pay"
    assert post(client, "/remote-servers/ledger/tools", body).status_code == 201
    review = {"risk": "write", "timeout_ms": 2000, "approval": "never"}
    review["key_arguments"] = ["order_id"]
    pinned = post(client, "/remote-servers/ledger/tools/pay/enable", review).json()
    same = post(client, "/remote-servers/ledger/tools", body).json()
    assert (same["enabled"], same["changed"]) == (True, False)
    assert same["pinned_sha256"] == same["served_sha256"] == pinned["pinned_sha256"]
    moved = post(client, "/remote-servers/ledger/tools", {**body, "url": "http://127.0.0.1:9/b"})
    assert moved.status_code == 200, moved.content  # registered before: a change
    assert (moved.json()["enabled"], moved.json()["changed"]) == (False, True)


def test_a_tool_stored_before_its_revision_covered_its_urls_keeps_running(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    server = register_http(demo, scripted_http)
    enable(server, "pay", risk="write")
    served = ServedTool("pay", "Pay", OBJECT, {})
    RemoteTool.objects.filter(server=server).update(  # the revision as it was pinned then
        served_sha256=rules.served_sha256(served), pinned_sha256=rules.served_sha256(served)
    )
    assert register_again(server, scripted_http).enabled  # the same definition: no change
    paid = run(demo, "ledger__pay", {"order_id": "ORD-1"}).calls.get()
    assert paid.state == CallState.SUCCEEDED
    assert [path for _, path, _, _ in scripted_http.requests] == ["/pay"]
    moved = register_again(server, scripted_http, url=f"{scripted_http.url}/elsewhere")
    assert (moved.enabled, moved.changed) == (False, True)
