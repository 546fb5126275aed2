"""The refund with its tools out of process: the demo's MCP server and HTTP tool server as real
processes on 127.0.0.1, every API family, in-process tasks and a real Celery worker."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from providers.families import ADAPTERS
from tests.conftest import wait_for
from tests.remote.conftest import ServerProcess, http_url, mcp_url
from toolcalls.demo.models import LedgerEntry
from toolcalls.demo.remote import demo_remote_register, served_names
from toolcalls.demo.services import demo_seed
from toolcalls.models import Operation
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool
from toolcalls.states import CallState, OperationState


def _demo_refund(*args: str) -> list[str]:
    out = StringIO()
    call_command("demo_refund", *args, stdout=out)
    return out.getvalue().splitlines()


def _refunded_once(kind: str) -> None:
    operation = Operation.objects.get()
    assert operation.state == OperationState.COMPLETED
    submit = operation.calls.get(tool_name=served_names(kind)["submit_refund"])
    assert submit.state == CallState.SUCCEEDED
    assert (submit.model_result or {})["data"]["refund_id"] == "RF-RD-ORD-1001-1"
    entry = LedgerEntry.objects.get()
    assert (entry.amount_cents, entry.operation_ref) == (4999, operation.public_id)
    assert entry.idempotency_key == submit.idempotency_key
    assert operation.approvals.get().state == "APPROVED"


@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_refund_with_mcp_tools_in_every_family(family: str, demo_mcp_server: ServerProcess) -> None:
    lines = _demo_refund(
        "--provider", family, "--tools", "mcp", "--tools-url", mcp_url(demo_mcp_server),
        "--approve",
    )  # fmt: skip
    assert lines[-1].startswith("final state: COMPLETED")
    _refunded_once("mcp")
    tools = RemoteTool.objects.filter(enabled=True)
    assert sorted(tools.values_list("name", flat=True)) == sorted(served_names("mcp").values())
    assert RemoteEvent.objects.filter(kind="tool_enabled").count() == 3


@pytest.mark.usefixtures("eager_tasks")
@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_refund_with_http_tools_in_every_family(
    family: str, demo_http_tools: ServerProcess
) -> None:
    lines = _demo_refund(
        "--provider", family, "--tools", "http", "--tools-url", http_url(demo_http_tools),
        "--approve",
    )  # fmt: skip
    assert lines[-1].startswith("final state: COMPLETED")
    _refunded_once("http")


@pytest.mark.usefixtures("eager_tasks")
def test_denied_refund_pays_nothing(demo_http_tools: ServerProcess) -> None:
    lines = _demo_refund("--tools", "http", "--tools-url", http_url(demo_http_tools), "--deny")
    assert lines[-1].startswith("final state: COMPLETED")
    assert not LedgerEntry.objects.exists()


@pytest.mark.worker
@pytest.mark.parametrize("kind", ["mcp", "http"])
def test_refund_through_a_celery_worker(
    kind: str, celery_worker: object, demo_mcp_server: ServerProcess, demo_http_tools: ServerProcess
) -> None:
    from toolcalls.demo.remote import demo_remote_register
    from toolcalls.demo.runner import RunOptions, scenario_run
    from toolcalls.demo.scenario import bundled_path
    from toolcalls.demo.services import demo_seed

    demo_seed()
    url = mcp_url(demo_mcp_server) if kind == "mcp" else http_url(demo_http_tools)
    demo_remote_register(kind=kind, url=url)
    operation = scenario_run(
        path=bundled_path(family="openai_responses", name="refund_approve"),
        options=RunOptions(decision="approve", tools=kind, timeout_s=60),
        out=lambda line: None,
    )
    wait_for(
        lambda: Operation.objects.get(pk=operation.pk).state == OperationState.COMPLETED,
        what="the refund to complete on the worker",
    )
    _refunded_once(kind)


@pytest.mark.usefixtures("transactional_db")
@pytest.mark.parametrize("kind", ["mcp", "http"])
def test_a_tools_url_that_is_no_url_registers_nothing(kind: str) -> None:
    with pytest.raises(CommandError, match=r"^the demo tool server's URL: only http and https"):
        _demo_refund("--tools", kind, "--tools-url", "notaurl", "--approve")
    assert not RemoteServer.objects.exists() and not Operation.objects.exists()


@pytest.mark.usefixtures("transactional_db")
@pytest.mark.parametrize("given", ["notaurl", "http://127.0.0.1:9/"])
def test_a_tools_url_other_than_the_registered_one_is_refused(given: str) -> None:
    """The server registered earlier was used whatever --tools-url said."""
    demo_seed()
    demo_remote_register(kind="http", url="http://127.0.0.1:8766/")
    refused = f"^acme has shop-http registered at http://127.0.0.1:8766, not {given}; "
    with pytest.raises(CommandError, match=refused):
        _demo_refund("--tools", "http", "--tools-url", given, "--approve")
    assert not Operation.objects.exists()
