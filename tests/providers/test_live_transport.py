"""Every fixture case travels over real HTTP through the official SDK and back into the adapter:
the live transport must hand the adapter the same reply the fixture holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers.errors import TransportError
from providers.fake_server import ReplayServer
from providers.families import ADAPTERS
from providers.live import LiveSettings, live_transport
from tests.conftest import FIXTURES
from tests.providers.conformance import check, read_case

CASES = sorted((FIXTURES / "providers").rglob("*.json"))


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer()
    replay.start()
    yield replay
    replay.stop()


def _transport(server: ReplayServer, family: str, *, stream: bool):  # type: ignore[no-untyped-def]
    provider = ADAPTERS[family].provider
    settings = LiveSettings(api_key="test-key", base_url=server.base_url(provider), timeout_s=10)
    return live_transport(family, settings, stream=stream)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_round_trip_through_the_sdk(server: ReplayServer, path: Path) -> None:
    case = read_case(path)
    family = case["family"]
    model = f"model-{uuid.uuid4().hex[:12]}"
    server.script(model=model, family=family, replies=[case])
    adapter = ADAPTERS[family]
    body = adapter.build_request(
        model=model, conversation=adapter.start_conversation(user_input="hi"), tools=[]
    )
    seen: list[object] = []
    reply = _transport(server, family, stream=case["kind"] == "stream").send(
        request=body, turn=0, model=model, on_event=seen.append
    )
    check(adapter.parse_reply(reply), adapter.parse_reply(reply), case["expect"])
    if case["kind"] == "stream":
        assert seen == case["events"]  # every event reached the progress hook, in order
    request = server.received[-1]
    assert request.streamed is (case["kind"] == "stream")
    assert request.headers.get(
        "authorization", request.headers.get("x-api-key", request.headers.get("x-goog-api-key"))
    )


def test_no_server_is_a_retryable_transport_error() -> None:
    settings = LiveSettings(api_key="k", base_url="http://127.0.0.1:9/v1", timeout_s=2)
    with pytest.raises(TransportError) as exc:
        live_transport("openai_responses", settings, stream=False).send(
            request={"model": "m", "input": []}, turn=0, model="m"
        )
    assert exc.value.retryable is True
