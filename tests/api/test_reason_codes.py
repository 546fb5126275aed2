"""``reason_code``: the machine-readable head of an operation's reason, in the API and the
console, and every code the engine can write is known and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from tests.api.support import READ, WRITE, create, get, keyed_client, post
from tests.replies import final
from toolcalls.demo.services import DemoSeed
from toolcalls.guards import GUARDS
from toolcalls.reasons import REASON_CODES, reason_code
from toolcalls.states import OperationState

ROOT = Path(__file__).resolve().parent.parent.parent
S = OperationState
#: Where the engine writes reasons: a literal "CODE: …" or "CODE {field…" (API_FAILURE); SQL
#: built from parts ("WITH {', '.join(…)}") is no reason.
_WRITTEN = re.compile(r"""f?["']([A-Z][A-Z0-9_]*[A-Z0-9])(?:: | \{[a-z_])""")


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("MAX_TURNS: 8 model turns used, limit 8", "MAX_TURNS"),
        ("MALFORMED_REPLY: the reply repeats a call ID", "MALFORMED_REPLY"),
        ("API_FAILURE rate_limit_exceeded: slow down (retries spent)", "API_FAILURE"),
        ("API_FAILURE", "API_FAILURE"),
        ("CANCELLED: customer left", "CANCELLED"),
        ("", None),
        ("free text without a code", None),
    ],
)
def test_reason_code_reads_the_head_of_a_reason(reason: str, code: str | None) -> None:
    assert reason_code(reason) == code


def test_every_code_the_engine_writes_is_known() -> None:
    sources = [
        *sorted((ROOT / "toolcalls" / "services").glob("*.py")),
        ROOT / "toolcalls/guards.py",
    ]
    written = {code for path in sources for code in _WRITTEN.findall(path.read_text())}
    # turn_trip writes each counted budget's code from GUARDS; max_parallel only bounds how
    # many calls run at once and never trips.
    written |= {code for name, (code, _) in GUARDS.items() if name != "max_parallel"}
    assert written == REASON_CODES


def test_every_code_is_documented_next_to_the_envelope_codes() -> None:
    text = (ROOT / "docs" / "error-codes.md").read_text()
    section = text[text.index("## Operation reason codes") :]
    documented = set(re.findall(r"^\| `([A-Z_]+)`(?:, `([A-Z_]+)`)? \|", section, re.M))
    assert {code for pair in documented for code in pair if code} == REASON_CODES


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_the_api_gives_the_code_beside_the_message(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    escalated = create(client, budgets={"max_turns": 1})
    assert escalated["state"] == S.ESCALATED
    assert escalated["reason_code"] == "MAX_TURNS"
    assert escalated["terminal_reason"].startswith("MAX_TURNS: ")
    stopped = post(client, f"/operations/{escalated['id']}/stop", {"reason": "withdrawn"}).json()
    assert (stopped["reason_code"], stopped["terminal_reason"]) == ("STOPPED", "STOPPED: withdrawn")
    parked = create(client)
    cancelled = post(client, f"/operations/{parked['id']}/cancel", {"reason": "left"}).json()
    assert cancelled["reason_code"] == "CANCELLED"
    done = create(client, replies=[final()])
    assert (done["reason_code"], done["terminal_reason"]) == (None, None)
    assert get(client, f"/operations/{done['id']}").json()["reason_code"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_the_console_shows_the_code(demo: DemoSeed) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    escalated = create(client, budgets={"max_turns": 1})
    page = Client()
    assert page.login(username="support", password="support-demo-pass")
    html = page.get(reverse("operations:detail", args=[escalated["id"]])).content.decode()
    assert '<code data-testid="reason-code">MAX_TURNS</code>' in html
