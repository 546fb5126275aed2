"""Every fixture case travels over real HTTP through the official SDK and back into the adapter:
the live transport must hand the adapter the same reply the fixture holds."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from providers.base import ModelSettings
from providers.errors import TransportError
from providers.fake_server import Received, ReplayServer
from providers.families import ADAPTERS
from providers.live import LiveSettings, live_transport
from tests.conftest import FIXTURES
from tests.providers.conformance import check, read_case
from tests.providers.settings_cases import MAPPED, request_body

CASES = sorted((FIXTURES / "providers").rglob("*.json"))


def _received(server: ReplayServer, model: str) -> Received:
    """The latest request for ``model`` (in the body, or in the path for Gemini): the server is
    the session's, shared with other tests."""
    return next(
        request
        for request in reversed(server.received)
        if model in request.path or request.body.get("model") == model
    )


def _transport(server: ReplayServer, family: str, *, stream: bool):  # type: ignore[no-untyped-def]
    provider = ADAPTERS[family].provider
    settings = LiveSettings(api_key="test-key", base_url=server.base_url(provider), timeout_s=10)
    return live_transport(family, settings, stream=stream)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_round_trip_through_the_sdk(replay_server: ReplayServer, path: Path) -> None:
    case = read_case(path)
    family = case["family"]
    model = f"model-{uuid.uuid4().hex[:12]}"
    replay_server.script(model=model, family=family, replies=[case])
    adapter = ADAPTERS[family]
    body = adapter.build_request(
        model=model, conversation=adapter.start_conversation(user_input="hi"), tools=[]
    )
    seen: list[object] = []
    reply = _transport(replay_server, family, stream=case["kind"] == "stream").send(
        request=body, turn=0, model=model, on_event=seen.append
    )
    check(adapter.parse_reply(reply), adapter.parse_reply(reply), case["expect"])
    if case["kind"] == "stream":
        assert seen == case["events"]  # every event reached the progress hook, in order
    request = _received(replay_server, model)
    assert request.streamed is (case["kind"] == "stream")
    assert request.headers.get(
        "authorization", request.headers.get("x-api-key", request.headers.get("x-goog-api-key"))
    )


def _first_case(family: str, kind: str) -> dict[str, Any]:
    return next(
        case
        for case in map(read_case, CASES)
        if case["family"] == family
        and case["kind"] == kind
        and case["expect"]["outcome"] != "API_FAILURE"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("family", "settings", "fields"), MAPPED, ids=lambda v: str(v)[:40])
def test_instructions_and_settings_reach_the_provider_unchanged(
    replay_server: ReplayServer,
    family: str,
    settings: dict[str, Any],
    fields: dict[str, Any],
    stream: bool,
) -> None:
    """The SDK call carries the body as the adapter built it: every setting's field, the
    instructions and the earlier messages, nothing renamed or dropped (streaming adds only the
    transport's own ``stream`` fields)."""
    model = f"model-{uuid.uuid4().hex[:12]}"
    replay_server.script(
        model=model,
        family=family,
        replies=[_first_case(family, "stream" if stream else "response")],
    )
    body = request_body(family, ModelSettings(**settings), model=model)
    reply = _transport(replay_server, family, stream=stream).send(request=body, turn=0, model=model)
    assert reply.http_status == 200, reply.body
    received = dict(_received(replay_server, model).body)
    if stream:
        assert received.pop("stream", True) is True
        received.pop("stream_options", None)
    assert received == {key: value for key, value in body.items() if not _in_the_url(family, key)}


def _in_the_url(family: str, key: str) -> bool:
    """generateContent takes the model in the URL path, not in the body."""
    return family == "gemini_generate" and key == "model"


def test_no_server_is_a_retryable_transport_error() -> None:
    settings = LiveSettings(api_key="k", base_url="http://127.0.0.1:9/v1", timeout_s=2)
    with pytest.raises(TransportError) as exc:
        live_transport("openai_responses", settings, stream=False).send(
            request={"model": "m", "input": []}, turn=0, model="m"
        )
    assert exc.value.retryable is True
