"""A model name goes into some providers' request paths, so every way in holds it to one rule
(``operations.MODEL_NAME``, the whole text): starting an operation, an agent's definition (the
admin's too), a fork from the console (the API's fields state the same pattern). A trailing
line feed, which a ``$`` lets through, is refused too."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.engine import bundled_replies, start
from toolcalls.services.agents import AgentError, agent_definition_check
from toolcalls.services.operations import OperationError, model_problem

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

BAD = ["gpt-5\n", "../../x", "gpt 5", "-x", "x" * 101, "☃"]


def test_the_rule() -> None:
    assert not model_problem("gpt-5.1") and not model_problem("models/gemini-2.5:latest")
    for name in BAD:
        assert model_problem(name), name


def test_every_way_in_refuses_a_name_the_rule_refuses(demo: Any) -> None:
    for name in BAD:
        if len(name) <= 100:  # the test's replay script holds the model name too
            with pytest.raises(OperationError) as refused:
                start(demo, [], model=name)
            assert refused.value.code == "invalid_model"
        definition = {"family": "openai_responses", "model": name}
        with pytest.raises(AgentError, match="model"):
            agent_definition_check(tenant=demo.tenant, definition=definition)  # type: ignore[arg-type]
    original = start(demo, bundled_replies("refund_approve"))
    console = Client()
    assert console.login(username="operator", password="operator-demo-pass")
    url = reverse("operations:fork", args=[original.public_id])
    shown = console.post(url, {"from_turn": 0, "model": "gpt 5"}, follow=True).content.decode()
    assert "a model name is 1 to 100 of" in shown
    assert original.forks.count() == 0
