"""What a registration or a review gives must mean something: an HTTP server signs its requests
with a secret it must be given (an MCP server takes none); an MCP server has a URL or a command,
one of them; an approval condition goes only with approval 'condition' and compares an argument
the schema declares a number."""

from __future__ import annotations

from typing import Any

import pytest

from tests.remote.conftest import ScriptedMcp
from tests.remote.test_remote_tools import ADMIN, OBJECT, enable, mcp_tool, register_mcp
from toolcalls.remote.services import RemoteError, ServerForm, remote_server_register

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("form", "message"),
    [
        (ServerForm(name="ledger", kind="http"), "give it a signing_secret"),
        (ServerForm(name="shop", kind="mcp"), "one of them, not both"),
        (
            ServerForm(name="shop", kind="mcp", url="http://x.test/mcp", signing_secret="s"),
            "an MCP server takes no signing_secret",
        ),
    ],
)
def test_a_server_is_refused_what_it_cannot_use(demo: Any, form: ServerForm, message: str) -> None:
    with pytest.raises(RemoteError, match=message) as refused:
        remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    assert refused.value.code == "invalid_server"


@pytest.mark.parametrize(
    ("review", "message"),
    [
        ({"approval": "never", "approval_condition": "amount_cents > 2500"}, "goes only with"),
        ({"approval": "condition", "approval_condition": "order_id == 5"}, "declare it one"),
        ({"approval": "condition", "approval_condition": "amount_cents > 1" + "0" * 20}, "15"),
    ],
)
def test_a_review_is_refused_a_condition_it_would_not_use(
    demo: Any, scripted_mcp: ScriptedMcp, review: dict[str, Any], message: str
) -> None:
    scripted_mcp.script([mcp_tool("pay", OBJECT)])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    with pytest.raises(RemoteError, match=message) as refused:
        enable(server, "pay", risk="write", **review)
    assert refused.value.code == "invalid_review"
    assert not server.tools.get().enabled
