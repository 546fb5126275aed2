"""Text from users, callers, models and tools is shown as it is: a bidirectional control
(U+202E RIGHT-TO-LEFT OVERRIDE and its kin) is a visible marker instead of reordering the text
around it, the whole value is isolated (``<bdi>``) so nothing spills into the next cell, and the
text is escaped before the markers go in. Form fields keep the exact value."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import ApprovalRequestFactory, OperationFactory, pending_approval
from tests.replies import final
from toolcalls.models import Operation, ReplayScript
from toolcalls.services.operations import operation_start
from toolcalls.text import shown_html

RLO = "\u202e"
PDF = "\u202c"
#: How each control reads on the page.
RLO_SHOWN = '<span class="control" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>'
PDF_SHOWN = '<span class="control" title="U+202C POP DIRECTIONAL FORMATTING">⟨U+202C⟩</span>'
EVIL_REF = f"cus_{RLO}evil"
EVIL_REF_SHOWN = f"<bdi>cus_{RLO_SHOWN}evil</bdi>"
DENIAL = f"Denied: {RLO}DEVORPPA{PDF} per policy"
DENIAL_SHOWN = f"<bdi>Denied: {RLO_SHOWN}DEVORPPA{PDF_SHOWN} per policy</bdi>"
INPUT = f"Refund {RLO}00.001${PDF} please."
INPUT_SHOWN = f"<bdi>Refund {RLO_SHOWN}00.001${PDF_SHOWN} please.</bdi>"
#: Every Unicode bidirectional control.
CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: A form field's value or content, which keeps the text exactly as it is.
_FIELDS = re.compile(r'value="[^"]*"|<textarea[^>]*>[^<]*</textarea>')


def _get(username: str, url: str) -> str:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _no_raw_controls(page: str) -> None:
    """No bidirectional control reaches the page outside a form field."""
    shown = _FIELDS.sub("", page)
    assert not [c for c in CONTROLS if c in shown], "a raw bidirectional control is on the page"


def _operation(demo: Any, **fields: Any) -> Operation:
    requester = get_user_model().objects.get(username="requester")
    return OperationFactory.create(tenant=demo.tenant, requested_by=requester, **fields)


def test_each_control_is_a_marker_with_its_name() -> None:
    shown = str(shown_html(CONTROLS))
    assert shown.startswith("<bdi>") and shown.endswith("</bdi>")
    assert not [c for c in CONTROLS if c in shown]
    for code in ("061C", "200E", "200F", "202A", "202B", "202C", "202D", "202E", "2066", "2069"):
        assert f"⟨U+{code}⟩</span>" in shown
    assert 'title="U+2067 RIGHT-TO-LEFT ISOLATE"' in shown
    assert 'title="U+061C ARABIC LETTER MARK"' in shown


def test_the_text_is_escaped_before_the_markers_go_in() -> None:
    shown = str(shown_html(f'<script>alert("x")</script>{RLO}<span class="control">&amp;'))
    assert shown == (
        "<bdi>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
        f"{RLO_SHOWN}&lt;span class=&quot;control&quot;&gt;&amp;amp;</bdi>"
    )
    assert str(shown_html("plain")) == "<bdi>plain</bdi>"
    assert str(shown_html(None)) == "<bdi></bdi>"
    assert str(shown_html(1999)) == "<bdi>1999</bdi>"


def test_the_decisions_history_shows_a_denial_reason_as_written(demo: Any) -> None:
    operator = get_user_model().objects.get(username="operator")
    ApprovalRequestFactory.create(
        call__turn__operation=_operation(demo, subject_ref=EVIL_REF, state="COMPLETED"),
        state="DENIED",
        decided_by=operator,
        decided_at=datetime.now(UTC),
        decision_reason=DENIAL,
        summary=[["customer_id", EVIL_REF], ["order_id", "ORD-1001"]],
    )
    page = _get("support", "/console/approvals/decided/")
    assert DENIAL_SHOWN in page
    assert EVIL_REF_SHOWN in page
    _no_raw_controls(page)


def test_the_approval_page_shows_refs_input_and_arguments_as_written(demo: Any) -> None:
    operation = _operation(demo, subject_ref=EVIL_REF, input_text=INPUT, state="WAITING_APPROVAL")
    arguments = {"amount_cents": 4999, "customer_id": EVIL_REF, "order_id": "ORD-1001"}
    approval = ApprovalRequestFactory.create(
        call__turn__operation=operation,
        call__arguments=arguments,
        summary=[["customer_id", EVIL_REF], ["order_id", "ORD-1001"]],
        canonical_arguments=json.dumps(arguments, ensure_ascii=False, separators=(",", ":")),
    )
    page = _get("operator", f"/console/approvals/{approval.public_id}/")
    assert f"<code>{EVIL_REF_SHOWN}</code> (acme)" in page
    assert INPUT_SHOWN in page
    canonical = (
        f"<bdi>{{&quot;amount_cents&quot;:4999,&quot;customer_id&quot;:&quot;cus_{RLO_SHOWN}evil"
    )
    assert f'<pre data-testid="canonical-arguments">{canonical}&quot;,' in page
    _no_raw_controls(page)


def test_the_queue_and_the_decide_page_show_the_summary_as_written(demo: Any) -> None:
    operation = _operation(demo, subject_ref=EVIL_REF, input_text=INPUT, state="WAITING_APPROVAL")
    approval = ApprovalRequestFactory.create(
        call__turn__operation=operation,
        summary=[["customer_id", EVIL_REF], ["order_id", "ORD-1001"]],
    )
    queue = _get("operator", "/console/approvals/")
    assert f"{EVIL_REF_SHOWN} · <bdi>ORD-1001</bdi></a>" in queue
    _no_raw_controls(queue)
    decide = _get("operator", f"/console/approvals/{approval.public_id}/deny/")
    assert f"<dt>Customer id</dt><dd>{EVIL_REF_SHOWN}</dd>" in decide
    _no_raw_controls(decide)


def test_the_operation_page_and_lists_show_user_and_model_text_as_written(demo: Any) -> None:
    operation = _operation(
        demo,
        subject_ref=EVIL_REF,
        input_text=INPUT,
        final_text=f"Refunded {RLO}99.94${PDF}.",
        state="COMPLETED",
        messages=[{"role": "user", "text": f"earlier {RLO}txet"}],
    )
    page = _get("support", f"/console/operations/{operation.public_id}/")
    assert f"{operation.tenant.slug} / <code>{EVIL_REF_SHOWN}</code>" in page
    assert INPUT_SHOWN in page
    assert f"<bdi>Refunded {RLO_SHOWN}99.94${PDF_SHOWN}.</bdi>" in page
    assert f"<bdi>earlier {RLO_SHOWN}txet</bdi>" in page
    _no_raw_controls(page)
    listed = _get("support", "/console/operations/")
    assert f"<code>{EVIL_REF_SHOWN}</code> <small>(acme)</small>" in listed
    _no_raw_controls(listed)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_the_search_echoes_the_query_as_written_and_keeps_it_in_the_field(demo: Any) -> None:
    script = ReplayScript.objects.create(name="t", family="f", model="m", replies=[final()])
    for _ in range(2):  # two, so the search lists them instead of opening the one
        operation_start(
            tenant=demo.tenant,
            requested_by=get_user_model().objects.get(username="requester"),
            subject_ref=EVIL_REF,
            input_text=INPUT,
            replay_script=script,
            family="openai_responses",
            model="gpt-5.1",
        )
    page = _get("support", f"/console/search/?q=cus_{RLO}nothing")
    assert f"matches “<bdi>cus_{RLO_SHOWN}nothing</bdi>”" in page
    assert f'value="cus_{RLO}nothing"' in page  # the search box keeps what was typed
    _no_raw_controls(page)
    found = _get("support", f"/console/search/?q={EVIL_REF}")
    assert f"<code>{EVIL_REF_SHOWN}</code>" in found
    _no_raw_controls(found)


def test_an_escalation_reason_is_shown_as_written(demo: Any) -> None:
    _operation(demo, state="ESCALATED", terminal_reason=f"UNKNOWN_OUTCOME: {RLO}tuo emit")
    page = _get("operator", "/console/operations/escalated/")
    assert f"<bdi>UNKNOWN_OUTCOME: {RLO_SHOWN}tuo emit</bdi>" in page
    _no_raw_controls(page)


@pytest.mark.parametrize(
    ("state", "reason", "shown"),
    [
        ("CANCELLED", "CANCELLED: customer withdrew", "<bdi>customer withdrew</bdi>"),
        ("STOPPED", "STOPPED: withdrawn", "<bdi>withdrawn</bdi>"),
        (
            "ESCALATED",
            "MAX_TURNS: 8 model turns used, limit 8",
            '<code data-testid="reason-code">MAX_TURNS</code>'
            " <bdi>8 model turns used, limit 8</bdi>",
        ),
    ],
)
def test_the_outcome_names_the_reason_code_once(
    demo: Any, state: str, reason: str, shown: str
) -> None:
    """The badge already says CANCELLED or STOPPED; a code that says more (why it escalated) is
    shown beside the reason's text, never before the whole reason again."""
    operation = _operation(demo, state=state, terminal_reason=reason)
    page = _get("support", f"/console/operations/{operation.public_id}/")
    assert f'<p data-testid="reason">{shown}</p>' in page
    assert reason not in page.split('data-testid="escalation"')[0]


def test_a_queue_row_without_a_summary_shows_its_id_once(demo: Any) -> None:
    approval = pending_approval(demo.tenant)
    page = _get("operator", "/console/approvals/")
    assert page.count(f">{approval.public_id}<") == 1
