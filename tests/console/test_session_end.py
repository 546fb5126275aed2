"""A form sent after its sender's session ended: nothing recorded, and the sign-in page says so."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from approvals.states import ApprovalState
from tests.engine import bundled_replies, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _signed_in_then_ended() -> Client:
    """An operator's browser whose session ended: it still holds its CSRF cookie."""
    client = Client(enforce_csrf_checks=True)
    client.get(reverse("login"))
    token = client.cookies["csrftoken"].value
    credentials = {"username": "operator", "password": "operator-demo-pass"}
    client.post(reverse("login"), {**credentials, "csrfmiddlewaretoken": token})
    del client.cookies[settings.SESSION_COOKIE_NAME]
    return client


def test_a_decision_sent_after_the_session_ended_is_unsent_and_said_so(demo) -> None:
    parked = start(demo, bundled_replies("refund_approve"))
    approval = parked.approvals.get()
    client = _signed_in_then_ended()
    url = reverse("approvals:decide", args=[approval.public_id, "deny"])
    token = client.cookies["csrftoken"].value
    response = client.post(url, {"reason": "Not this one.", "csrfmiddlewaretoken": token})

    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == reverse("login")
    assert parse_qs(location.query) == {"next": [url], "unsent": ["1"]}
    approval.refresh_from_db()
    assert approval.state == ApprovalState.PENDING
    page = client.get(response["Location"]).content.decode()
    assert "nothing was recorded" in page
    assert f'name="next" value="{url}"' in page  # signing in leads back to the form


def test_a_page_asked_for_after_the_session_ended_is_only_sent_to_sign_in(demo) -> None:
    client = _signed_in_then_ended()
    response = client.get(reverse("approvals:queue"))
    assert response.status_code == 302
    assert "unsent" not in response["Location"]
    assert "nothing was recorded" not in client.get(response["Location"]).content.decode()
