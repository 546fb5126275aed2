"""Both scripted models, the replay transport and the fake server, answer a reply that branches
on results (``after_results``) from the request alone: with ``error`` when a result the request
sends back (after the last model turn) is an error, ``ok`` otherwise, whatever was sent before.
Each bundled refund scenario is played through the replay transport and over HTTP through the
live (SDK) transport, every request built by the family's own adapter as Callgate builds it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from providers.base import ProviderAdapter, ToolResultMessage, WireReply
from providers.fake_server import ReplayServer
from providers.families import ADAPTERS
from providers.live import LiveSettings, live_transport
from providers.replay import ReplayTransport
from providers.transports import ModelTransport
from toolcalls import envelopes
from toolcalls.envelopes import ErrorCode

SCENARIOS = Path(envelopes.__file__).parent / "demo" / "scenarios"
REFUNDS = sorted(SCENARIOS.glob("*/refund_approve*.json"))


def _results(
    adapter: ProviderAdapter, reply: WireReply, *, failed: bool
) -> list[ToolResultMessage]:
    """One result per call of ``reply``: an operator's denial when ``failed``, else a success."""
    envelope = (
        envelopes.error(ErrorCode.DENIED, "An operator denied this call.")
        if failed
        else envelopes.ok({"done": True})
    )
    return [
        ToolResultMessage(
            call_id=call.call_id,
            name=call.name,
            model_result=envelope,
            is_error=failed,
            synthesized=call.synthesized,
        )
        for call in adapter.parse_reply(reply).calls
    ]


#: The scripted model a scenario is played against: a transport serving ``scenario`` for
#: ``model``.
Scripted = Callable[[dict[str, Any], str], ModelTransport]


def _replayed(scenario: dict[str, Any], model: str) -> ModelTransport:
    return ReplayTransport(adapter=ADAPTERS[scenario["family"]], replies=scenario["replies"])


def _served(server: ReplayServer) -> Scripted:
    """The fake ``server``, through the live transport."""

    def transport(scenario: dict[str, Any], model: str) -> ModelTransport:
        family, replies = scenario["family"], scenario["replies"]
        server.script(model=model, family=family, replies=replies)
        base_url = server.base_url(ADAPTERS[family].provider)
        settings = LiveSettings(api_key="test-key", base_url=base_url, timeout_s=10)
        return live_transport(family, settings, stream=replies[0]["kind"] == "stream")

    return transport


def _final_text(
    scripted: Scripted, scenario: dict[str, Any], *, failed: Collection[int]
) -> str | None:
    """Play ``scenario`` to its last reply, the results of the replies at the ``failed`` turns
    errors; the text of that last reply."""
    family, model = scenario["family"], f"model-{uuid.uuid4().hex[:12]}"
    replies = scenario["replies"]
    adapter = ADAPTERS[family]
    transport = scripted(scenario, model)
    conversation = adapter.start_conversation(user_input=scenario["input"])
    for turn in range(len(replies)):
        body = adapter.build_request(model=model, conversation=conversation, tools=[])
        reply = transport.send(request=body, turn=turn, model=model)
        parsed = adapter.parse_reply(reply)
        conversation = adapter.append_reply(conversation=conversation, reply=parsed)
        results = _results(adapter, reply, failed=turn in failed)
        conversation = adapter.append_results(conversation=conversation, results=results)
    return parsed.text


def _scripted_text(adapter: ProviderAdapter, branch: dict[str, Any]) -> str | None:
    return adapter.parse_reply(WireReply.from_case(branch)).text


@pytest.mark.parametrize("via", ["replay", "fake_server"])
@pytest.mark.parametrize("path", REFUNDS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_branching_reply_answers_the_variant_of_the_latest_results(
    request: pytest.FixtureRequest, via: str, path: Path
) -> None:
    scripted = (
        _served(request.getfixturevalue("replay_server")) if via == "fake_server" else _replayed
    )
    scenario = json.loads(path.read_text())
    adapter = ADAPTERS[scenario["family"]]
    branches = scenario["replies"][-1]["after_results"]
    ok, error = _scripted_text(adapter, branches["ok"]), _scripted_text(adapter, branches["error"])
    assert ok and error and ok != error
    last = len(scenario["replies"]) - 2  # the turn whose results the branching reply answers
    earlier = range(last)
    assert _final_text(scripted, scenario, failed=[last]) == error  # the submit was denied
    assert _final_text(scripted, scenario, failed=[]) == ok
    assert _final_text(scripted, scenario, failed=earlier) == ok  # older errors do not count
