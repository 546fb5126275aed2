"""A remote server's definition is checked before anything is tried: headers no HTTP request may
carry and a command where stdio is not allowed are refused at registration (``invalid_server``,
naming the header); good headers go with every request; a server stored with bad headers fails
its calls before anything is sent, saying why. Real servers on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.api.support import MANAGE, error_of, keyed_client, post
from tests.factories import UserFactory
from tests.remote.conftest import ScriptedHttp, ScriptedMcp, free_port
from tests.remote.test_remote_tools import (
    ADMIN,
    answer,
    enable,
    mcp_tool,
    register_http,
    register_mcp,
    run,
)
from toolcalls.remote.clients import MAX_HEADER_VALUE
from toolcalls.remote.models import RemoteServer
from toolcalls.remote.services import (
    RemoteError,
    ServerForm,
    remote_server_discover,
    remote_server_register,
)
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

#: Headers no request may carry, and the name each refusal names.
BAD_HEADERS = [
    pytest.param({"X-A": "b\r\nX-Evil: 1"}, "X-A", id="CRLF in the value"),
    pytest.param({"X-A": "b\nX-Evil: 1"}, "X-A", id="LF in the value"),
    pytest.param({"X-A": "b\x01"}, "X-A", id="a control character in the value"),
    pytest.param({"X-A": "b\x7f"}, "X-A", id="DEL in the value"),
    pytest.param({"X-A": "caf\u00e9"}, "X-A", id="not ASCII"),
    pytest.param({"X-A": " b"}, "X-A", id="a leading space"),
    pytest.param({"X-A": "b\t"}, "X-A", id="a trailing tab"),
    pytest.param({"X A:": "b"}, "X A:", id="a name with a space and a colon"),
    pytest.param({"X A": "b"}, "X A", id="a name with a space"),
    pytest.param({"X@A": "b"}, "X@A", id="a name with a delimiter"),
    pytest.param({"X-\u00c4": "b"}, "X-\u00c4", id="a name not ASCII"),
    pytest.param({"Host": "evil.example"}, "Host", id="Host"),
    pytest.param({"content-length": "0"}, "content-length", id="Content-Length"),
    pytest.param({"Transfer-Encoding": "chunked"}, "Transfer-Encoding", id="Transfer-Encoding"),
    pytest.param({"Content-Type": "text/plain"}, "Content-Type", id="Content-Type"),
    pytest.param({"Idempotency-Key": "k"}, "Idempotency-Key", id="Idempotency-Key"),
    pytest.param({"callgate-signature": "v1=0"}, "callgate-signature", id="Callgate-Signature"),
    pytest.param({"Mcp-Session-Id": "s"}, "Mcp-Session-Id", id="Mcp-Session-Id"),
    pytest.param({"X-Key": "a", "x-key": "b"}, "x-key", id="a name given twice"),
]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://user:pw@127.0.0.1:{port}/mcp", "may not carry a user name or password"),
        ("ftp://127.0.0.1:{port}/mcp", "only http and https URLs"),
        ("http://127.0.0.1:99999/mcp", "invalid URL"),
    ],
    ids=["credentials", "not http", "port"],
)
def test_an_mcp_url_breaking_the_address_rules_is_refused_without_trying_it(
    demo: Any, url: str, said: str
) -> None:
    """``invalid_server`` (400), as the docs say of what is refused without trying it; nobody
    listens on the port, so a try would be ``server_unreachable`` (422)."""
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "shop-u", "kind": "mcp", "url": url.format(port=free_port())}
    message = error_of(post(client, "/remote-servers", body), 400, "invalid_server")["message"]
    assert said in message, message
    assert not RemoteServer.objects.exists()


def test_a_header_value_past_the_limit_is_refused_by_the_service(demo: Any) -> None:
    """The API's field refuses it first (``invalid_request``); the admin reaches the service."""
    form = ServerForm(name="shop-l", kind="http", headers={"X-A": "v" * (MAX_HEADER_VALUE + 1)})
    with pytest.raises(RemoteError, match="'X-A' is longer than 2000") as refused:
        remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    assert refused.value.code == "invalid_server"
    assert not RemoteServer.objects.exists()


@pytest.mark.parametrize(("headers", "name"), BAD_HEADERS)
@pytest.mark.parametrize("kind", ["http", "mcp"])
def test_a_bad_header_is_refused_at_registration_naming_it(
    demo: Any, kind: str, headers: dict[str, str], name: str
) -> None:
    """Nothing is tried: the MCP server's address has nobody listening (else 422)."""
    client, _ = keyed_client(demo.tenant, MANAGE)
    body: dict[str, Any] = {"name": "shop-i", "kind": kind, "headers": headers}
    if kind == "mcp":
        body["url"] = f"http://127.0.0.1:{free_port()}/mcp"
    message = error_of(post(client, "/remote-servers", body), 400, "invalid_server")["message"]
    assert repr(name) in message, message
    assert "Evil" not in message and "evil" not in message  # a value is never shown
    assert not RemoteServer.objects.exists()


def test_a_nul_in_a_header_value_is_refused_by_the_service(demo: Any) -> None:
    """The API refuses NUL in any string (``invalid_request``); the admin and the command
    reach the service with it."""
    form = ServerForm(name="shop-n", kind="http", headers={"X-A": "b\x00c"})
    with pytest.raises(RemoteError, match="'X-A'") as refused:
        remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    assert refused.value.code == "invalid_server"
    assert not RemoteServer.objects.exists()


def test_the_admin_refuses_a_bad_header_naming_it(demo: Any) -> None:
    root = Client()
    root.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    form = {
        "tenant": demo.tenant.pk,
        "name": "shop-j",
        "kind": "http",
        "signing_secret": "s",
        "headers": '{"X A": "b"}',
    }
    page = root.post(reverse("admin:remote_remoteserver_add"), form)
    assert page.status_code == 200
    assert "the header name &#x27;X A&#x27; is not an HTTP token" in page.content.decode()
    assert not RemoteServer.objects.exists()


def test_good_headers_are_accepted_and_sent_with_every_request(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    headers = {"Authorization": "Bearer t0k3n/+=", "X-Odd_Name.v2!#$%&'*+^`|~": "a b\tc"}
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "ledger", "kind": "http", "signing_secret": "s", "headers": headers}
    created = post(client, "/remote-servers", body)
    assert created.status_code == 201, created.content
    assert created.json()["header_names"] == sorted(headers)
    tool = {"name": "pay", "input_schema": {"type": "object"}, "url": f"{scripted_http.url}/pay"}
    assert post(client, "/remote-servers/ledger/tools", tool).status_code == 201
    scripted_http.reply = answer(200, b'{"paid": true}')
    enable(RemoteServer.objects.get(), "pay")
    operation = run(demo, "ledger__pay", {})
    assert operation.calls.get().state == CallState.SUCCEEDED
    ((_, _, sent, _),) = scripted_http.requests
    assert {name: sent[name] for name in headers} == headers


def test_an_mcp_server_over_stdio_where_not_allowed_is_a_bad_definition(demo: Any) -> None:
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "shop-z", "kind": "mcp", "command": ["/bin/sh", "-c", "id"]}
    refused = error_of(post(client, "/remote-servers", body), 400, "invalid_server")
    assert refused["message"] == "MCP servers over stdio are not allowed here"
    assert not RemoteServer.objects.exists()


# --- a server stored with headers the rules now refuse ------------------------------------------


def stored_with(server: RemoteServer, headers: dict[str, str]) -> None:
    """Give ``server`` headers as a row saved before the rules could hold them."""
    RemoteServer.objects.filter(pk=server.pk).update(headers=headers)


@pytest.mark.parametrize(
    ("risk", "headers", "name"),
    [
        ("irreversible", {"X A": "b"}, "X A"),
        ("write", {"X-A": "b\r\nX-Evil: 1"}, "X-A"),
        ("read", {"X A:": "b"}, "X A:"),
    ],
)
def test_a_call_with_bad_stored_headers_fails_before_anything_is_sent(
    demo: Any, scripted_http: ScriptedHttp, risk: str, headers: dict[str, str], name: str
) -> None:
    """Not a lost run: a side effect is not UNKNOWN_OUTCOME, a read is not tried again."""
    server = register_http(demo, scripted_http)
    enable(server, "pay", risk=risk)
    stored_with(server, headers)
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert (failed.state, failed.error_code, failed.attempt) == (
        CallState.FAILED,
        "TOOL_UNAVAILABLE",
        1,
    )
    assert repr(name) in (failed.protected_audit or {})["handler"]["detail"]
    assert operation.state != OperationState.ESCALATED
    assert scripted_http.requests == []


def test_an_mcp_server_with_bad_stored_headers_is_refused_without_trying(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "pay", risk="write")
    stored_with(server, {"X-Api-Key": "k\x01"})
    with pytest.raises(RemoteError, match="'X-Api-Key'") as refused:
        remote_server_discover(server_pk=server.pk, actor=ADMIN)
    assert refused.value.code == "invalid_server"
    operation = run(demo, "shop__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert (failed.state, failed.error_code) == (CallState.FAILED, "TOOL_UNAVAILABLE")
    assert "'X-Api-Key'" in (failed.protected_audit or {})["handler"]["detail"]
