"""The console's operation page links an operation to its parent and its follow-ups."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests import replies as r
from tests.engine import start
from toolcalls.models import ReplayScript
from toolcalls.services.operations import operation_follow_up

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _page(client: Client, public_id: str) -> str:
    response = client.get(reverse("operations:detail", args=[public_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_operation_page_links_the_chain(demo: Any, django_assert_max_num_queries: Any) -> None:
    parent = start(demo, [r.final("It ships Monday.")])
    follow_ups = [
        operation_follow_up(
            operation_pk=parent.pk,
            requested_by=parent.requested_by,
            input_text=f"Question {n}?",
            replay_script=ReplayScript(
                name="t", family="openai_responses", model="m", replies=[r.final(f"Answer {n}.")]
            ),
        )
        for n in range(3)
    ]
    client = Client()
    client.login(username="support", password="support-demo-pass")
    with django_assert_max_num_queries(13):  # the fork button asks for a permission
        page = _page(client, parent.public_id)
    for follow_up in follow_ups:
        link = reverse("operations:detail", args=[follow_up.public_id])
        assert f'href="{link}" data-testid="chain-follow-up"' in page
    assert page.index(follow_ups[0].public_id) < page.index(follow_ups[2].public_id)
    assert 'data-testid="chain-parent"' not in page
    child = _page(client, follow_ups[0].public_id)
    link = reverse("operations:detail", args=[parent.public_id])
    assert f'href="{link}" data-testid="chain-parent"' in child
    assert 'data-testid="chain-follow-up"' not in child


def test_an_operation_without_a_chain_shows_none(demo: Any) -> None:
    operation = start(demo, [r.final()])
    client = Client()
    client.login(username="support", password="support-demo-pass")
    assert 'data-testid="operation-chain"' not in _page(client, operation.public_id)
