"""A remote tool's call in the console and the API like any other: parked in the approval queue
with its amount, on the operation page, in the operation's API representation."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.api.support import get, keyed_client
from tests.remote.conftest import ScriptedMcp
from tests.remote.test_remote_tools import enable, mcp_tool, register_mcp, run
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def test_a_parked_remote_call_shows_in_the_console_and_the_api(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")])
    condition = {"approval": "condition", "approval_condition": "amount_cents > 2500"}
    enable(register_mcp(demo.tenant, scripted_mcp.url), "pay", risk="irreversible", **condition)
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001", "amount_cents": 4999})
    assert operation.state == OperationState.WAITING_APPROVAL
    approval = operation.approvals.get()
    console = Client()
    assert console.login(username="operator", password="operator-demo-pass")
    queue = console.get(reverse("approvals:queue")).content.decode()
    assert "shop__pay" in queue and "49.99" in queue
    detail = console.get(reverse("approvals:detail", args=[approval.public_id]))
    assert "amount_cents 4999 &gt; 2500" in detail.content.decode()
    page = console.get(reverse("operations:detail", args=[operation.public_id]))
    assert page.status_code == 200 and "shop__pay" in page.content.decode()
    client, _ = keyed_client(demo.tenant, "operations:read")
    assert get(client, f"/operations/{operation.public_id}").json()["state"] == "WAITING_APPROVAL"
    (parked,) = get(client, f"/operations/{operation.public_id}/calls").json()["results"]
    assert (parked["tool"], parked["state"]) == ("shop__pay", "WAITING_APPROVAL")
