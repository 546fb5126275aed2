"""Remote tools whose server dies during a side-effecting call: the answer is lost, the outcome
is UNKNOWN_OUTCOME, and it is reconciled (applied / not applied) through the HTTP tool's
reconcile URL or escalated to a human (MCP) — never sent again blind, and the demo ledger never
shows two refunds. The tool server is killed exactly there: a fault point in the demo handler
makes its process exit (``crash``) after the effect committed, or as the request arrives."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.remote.conftest import ServerProcess, manage
from toolcalls.actors import Actor
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.remote import demo_remote_register, demo_review, served_names
from toolcalls.demo.services import demo_seed
from toolcalls.models import Operation
from toolcalls.remote.models import RemoteTool
from toolcalls.remote.services import HttpToolForm, remote_http_tool_register, remote_tool_enable
from toolcalls.states import CallState, OperationState

pytestmark = [
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("eager_tasks"),
]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.stop()


def _server(
    servers: list[ServerProcess], command: str, tmp_path: Path, crash_at: str = ""
) -> ServerProcess:
    points = {f"demo.{crash_at}": "crash"} if crash_at else {}
    env = {"CALLGATE_FAULT_POINTS": json.dumps(points), "CALLGATE_FAULT_DIR": str(tmp_path)}
    server = ServerProcess(manage(command, "--port", "{port}"), env=env)
    servers.append(server.start())
    return server


def _refund(kind: str) -> Operation:
    """Run the demo refund; an escalated one ends the command with an error, which the test
    reads from the operation instead."""
    with contextlib.suppress(CommandError):
        call_command("demo_refund", "--tools", kind, "--approve", stdout=StringIO())
    return Operation.objects.get()


def _register_http(tools: ServerProcess, reconciler: ServerProcess) -> None:
    """The demo's HTTP tools on ``tools``, reconciled by ``reconciler`` (the same ledger): a new
    reconcile URL is a new revision, enabled again with the demo's review."""
    demo_seed()
    server = demo_remote_register(kind="http", url=f"http://127.0.0.1:{tools.port}")
    for tool in RemoteTool.objects.filter(server=server):
        form = HttpToolForm(
            name=tool.remote_name,
            description=tool.description,
            input_schema=tool.input_schema,
            url=tool.url,
            reconcile_url=f"http://127.0.0.1:{reconciler.port}/reconcile/{tool.remote_name}",
        )
        remote_http_tool_register(server_pk=server.pk, form=form, actor=Actor.system("test"))
        review = demo_review(tool.remote_name)
        remote_tool_enable(tool_pk=tool.pk, review=review, actor=Actor.system("test"))


def _submit(operation: Operation, kind: str) -> Any:
    return operation.calls.get(tool_name=served_names(kind)["submit_refund"])


def test_http_tool_killed_after_the_refund_is_reconciled_as_applied(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    tools = _server(servers, "demo_http_tools", tmp_path, "submit_refund.after_effect")
    _register_http(tools, _server(servers, "demo_http_tools", tmp_path))
    operation = _refund("http")
    assert tools.process is not None and tools.process.poll() == 137
    submit = _submit(operation, "http")
    assert submit.state == CallState.SUCCEEDED and submit.attempt == 1
    states = list(submit.events.values_list("to_state", flat=True))
    assert "UNKNOWN_OUTCOME" in states
    assert submit.events.filter(details__reconciled="applied").exists()
    assert operation.state == OperationState.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_http_tool_killed_before_the_refund_is_reconciled_as_not_applied(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    tools = _server(servers, "demo_http_tools", tmp_path, "submit_refund.received")
    _register_http(tools, _server(servers, "demo_http_tools", tmp_path))
    operation = _refund("http")
    submit = _submit(operation, "http")
    assert submit.events.filter(details__reconciled="not applied").exists()
    # Tried again under the same key: the killed server is down, so nothing ran.
    assert (submit.state, submit.error_code) == (CallState.FAILED, "TOOL_UNAVAILABLE")
    assert submit.attempt == 2
    assert operation.state == OperationState.COMPLETED
    assert not LedgerEntry.objects.exists()


def test_mcp_tool_killed_after_the_refund_escalates_and_is_never_sent_again(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    tools = _server(servers, "demo_mcp_server", tmp_path, "submit_refund.after_effect")
    demo_seed()
    demo_remote_register(kind="mcp", url=f"http://127.0.0.1:{tools.port}/mcp")
    operation = _refund("mcp")
    submit = _submit(operation, "mcp")
    assert (submit.state, submit.attempt) == (CallState.UNKNOWN_OUTCOME, 1)
    assert operation.state == OperationState.ESCALATED
    escalated = operation.events.get(to_state=OperationState.ESCALATED)
    assert escalated.details["reason"].startswith("UNKNOWN_OUTCOME")
    assert LedgerEntry.objects.count() == 1
