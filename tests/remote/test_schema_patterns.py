"""A served schema's patterns are matched in linear time (RE2): a pattern that backtracks
catastrophically in Python's ``re`` no longer holds the dispatch step (and its operation's lock)
for minutes, and one RE2 cannot match (a backreference, lookaround) is the tool's recorded
problem, so the tool cannot be enabled. Real servers on 127.0.0.1: the fixture MCP server
process and an HTTP tool in a thread of the test."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.support import error_of, post
from tests.remote.conftest import ScriptedHttp, ScriptedMcp
from tests.remote.test_remote_tools import enable, mcp_tool, register_http, register_mcp, run
from tests.remote.test_schema_references import http_server, http_tool
from toolcalls.remote.models import RemoteTool
from toolcalls.remote.services import RemoteError
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

#: Backtracks in Python's ``re`` for 2**n steps on ``n`` a's and a ``!``.
NESTED = "(a+)+$"
#: 10,000 a's: linear matching takes a blink; backtracking would never end.
LONG = "a" * 10_000 + "!"
BACKREFERENCE = r"(a)\1"
LOOKAHEAD = "^(?!admin)"


def coded(pattern: str) -> dict[str, Any]:
    """An object schema whose string ``x`` must match ``pattern``."""
    return {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}


def keyed(pattern: str) -> dict[str, Any]:
    """An object schema whose keys matching ``pattern`` hold integers."""
    return {"type": "object", "patternProperties": {pattern: {"type": "integer"}}}


def rejected_message(demo: Any, schema: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The error the model gets for a call of ``ledger__pay`` (enabled, then served with
    ``schema``) with ``arguments``; the operation completes and nothing is sent."""
    RemoteTool.objects.update(input_schema=schema)
    operation = run(demo, "ledger__pay", arguments)
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.REJECTED, "INVALID_ARGUMENTS")
    return str((refused.model_result or {})["error"]["message"])


def test_a_pattern_that_backtracks_in_python_is_matched_in_linear_time_at_dispatch(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    enable(register_http(demo, scripted_http), "pay")
    message = rejected_message(demo, coded(NESTED), {"x": LONG})
    assert f"x: {LONG!r} does not match {NESTED!r}" in message
    assert scripted_http.requests == []


def test_a_pattern_property_that_backtracks_in_python_is_matched_in_linear_time(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    """``patternProperties`` itself, and ``additionalProperties: false`` at the top (which asks
    which keys the patterns match) both match the long key."""
    enable(register_http(demo, scripted_http), "pay")
    message = rejected_message(demo, keyed(NESTED), {LONG: 1})
    assert f"{LONG!r} does not match any of the regexes: {NESTED!r}" in message
    assert scripted_http.requests == []


@pytest.mark.parametrize(
    ("schema", "place"),
    [
        (coded(BACKREFERENCE), f"properties/x: pattern {BACKREFERENCE!r}"),
        (keyed(LOOKAHEAD), f"(root): patternProperties {LOOKAHEAD!r}"),
        (
            {"type": "object", "$defs": {"code": coded(BACKREFERENCE)}},
            f"$defs/code/properties/x: pattern {BACKREFERENCE!r}",
        ),
    ],
)
def test_an_http_tool_with_a_pattern_re2_cannot_match_is_refused(
    demo: Any, schema: dict[str, Any], place: str
) -> None:
    answer = post(http_server(demo), "/remote-servers/ledger/tools", http_tool(schema))
    message = error_of(answer, 400, "invalid_tool")["message"]
    assert place in message and "cannot be matched in linear time" in message
    assert not RemoteTool.objects.exists()


@pytest.mark.parametrize(
    ("schema", "place"),
    [
        (coded(BACKREFERENCE), f"properties/x: pattern {BACKREFERENCE!r}"),
        (keyed(LOOKAHEAD), f"(root): patternProperties {LOOKAHEAD!r}"),
    ],
)
def test_a_listed_tool_with_a_pattern_re2_cannot_match_is_kept_with_its_problem(
    demo: Any, scripted_mcp: ScriptedMcp, schema: dict[str, Any], place: str
) -> None:
    scripted_mcp.script([mcp_tool("lookup", schema), mcp_tool("other")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    lookup = server.tools.get(remote_name="lookup")
    assert lookup.problem.startswith("the input schema cannot be used: ")
    assert place in lookup.problem and not lookup.enabled
    with pytest.raises(RemoteError) as refused:
        enable(server, "lookup")
    assert refused.value.code == "invalid_tool" and place in refused.value.message
    assert enable(server, "other").enabled


def test_a_call_meeting_a_stored_pattern_re2_cannot_match_is_rejected_and_goes_on(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    """A schema stored before patterns were checked: the call is rejected, not crashed."""
    enable(register_http(demo, scripted_http), "pay")
    message = rejected_message(demo, coded(BACKREFERENCE), {"x": "aa"})
    assert "pattern that cannot be matched in linear time" in message
    assert scripted_http.requests == []
