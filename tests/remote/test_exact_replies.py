"""An HTTP tool's reply is read as exact JSON, as the API reads request bodies: a member name
given twice (which value did the tool mean?) or a number JSON cannot carry exactly is no usable
answer, never a guess. A real server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp, send
from tests.remote.test_remote_tools import enable, register_http, run
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b'{"status": "paid", "status": "refused"}', "status: given twice"),
        (b'{"amount_cents": 9007199254740993}', "amount_cents: 9007199254740993 is beyond"),
        (b"[" * 5000 + b"]" * 5000, "the reply is not JSON"),
    ],
)
def test_a_reply_no_reader_takes_exactly_is_a_bad_reply(
    demo: Any, scripted_http: ScriptedHttp, reply: bytes, said: str
) -> None:
    scripted_http.reply = lambda handler, _body: send(handler, 200, reply)
    enable(register_http(demo, scripted_http), "pay")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert failed.state == CallState.FAILED
    retried = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert retried and all(said in detail["detail"] for detail in retried[1:]), retried
