"""The operation page shows what the model was asked with: agent revision, instructions,
earlier messages, settings and the tools it offers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.replies import final
from toolcalls.actors import Actor
from toolcalls.models import ReplayScript
from toolcalls.services.agents import agent_create
from toolcalls.services.operations import operation_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _page(public_id: str) -> str:
    client = Client()
    assert client.login(username="support", password="support-demo-pass")
    response = client.get(f"/console/operations/{public_id}/")
    assert response.status_code == 200
    return response.content.decode()


def _start(demo: Any, **options: Any) -> str:
    script = ReplayScript.objects.create(name="t", family="f", model="m", replies=[final()])
    return operation_start(
        tenant=demo.tenant,
        requested_by=get_user_model().objects.get(username="requester"),
        subject_ref="cus_1001",
        input_text="Please refund my order.",
        replay_script=script,
        **options,
    ).public_id


def test_the_page_shows_the_agent_revision_instructions_and_settings(demo: Any) -> None:
    agent = agent_create(
        tenant=demo.tenant,
        name="refunds",
        definition={
            "family": "openai_responses",
            "model": "gpt-5.1",
            "instructions": "You are the <refund> desk.",
            "settings": {"temperature": 0.3},
            "tool_names": ["get_order", "submit_refund"],
        },
        actor=Actor.system("test"),
    )
    page = _page(
        _start(
            demo,
            agent=agent,
            messages=[{"role": "user", "text": "Hi"}],
            settings={"max_output_tokens": 700},
        )
    )
    assert '<dd data-testid="agent-revision"><code>refunds@1</code></dd>' in page
    assert "You are the &lt;refund&gt; desk." in page
    assert "<strong>user</strong>: <bdi>Hi</bdi>" in page
    assert "<code>temperature</code></th><td><code><bdi>0.3</bdi></code>" in page
    assert "<code>max_output_tokens</code></th><td><code><bdi>700</bdi></code>" in page
    assert '<dd data-testid="tools"><code>get_order</code>, <code>submit_refund</code></dd>' in page


def test_without_an_agent_or_settings_the_page_says_so(demo: Any) -> None:
    page = _page(_start(demo, family="openai_responses", model="gpt-5.1"))
    assert '<dd data-testid="agent-revision">none</dd>' in page
    assert "the provider's defaults" in page
    # Without a list of its own an operation offers every tool of its tenant's catalogue.
    tools = "<code>create_refund_draft</code>, <code>get_order</code>, <code>submit_refund</code>"
    assert f'<dd data-testid="tools">{tools}</dd>' in page
