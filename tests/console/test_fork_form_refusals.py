"""The operation page's fork form says what is wrong, by field: a model name over 100
characters or holding a NUL is not reported as a missing turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.engine import bundled_replies, start
from toolcalls.models import Operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def operation(demo: Any) -> Operation:
    return start(demo, bundled_replies("refund_approve"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"from_turn": "0", "model": "m" * 101}, "Model: A model name is at most 100 characters."),
        ({"from_turn": "0", "model": "gpt\x00x"}, "Model: Null characters are not allowed."),
        ({"model": "gpt-4.1"}, "Turn: Choose a turn of this operation."),
        ({"from_turn": "-1"}, "Turn: Choose a turn of this operation."),
    ],
)
def test_a_refused_fork_names_the_field_and_why(operation: Operation, data, message) -> None:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    url = reverse("operations:fork", args=[operation.public_id])
    response = client.post(url, data, follow=True)
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert shown == [message]
    assert Operation.objects.count() == 1  # nothing forked
