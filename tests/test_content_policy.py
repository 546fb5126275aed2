"""The console's pages carry a Content-Security-Policy that refuses inline script and style and
framing, and hold nothing of their own that it would refuse; the admin and the API document's
viewer, which have inline scripts, are left without it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from config.content_policy import POLICY
from tests.engine import bundled_replies, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
_INLINE_STYLE = re.compile(r"<style\b|\sstyle=|\son[a-z]+=|javascript:", re.IGNORECASE)


def _operator() -> Client:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    return client


def test_console_pages_refuse_inline_script_style_and_framing(demo) -> None:
    parked = start(demo, bundled_replies("refund_approve"))
    approval = parked.approvals.get()
    client = _operator()
    pages = [
        reverse("approvals:queue"),
        reverse("approvals:decisions"),
        reverse("approvals:detail", args=[approval.public_id]),
        reverse("approvals:decide", args=[approval.public_id, "approve"]),
        reverse("operations:list"),
        reverse("operations:detail", args=[parked.public_id]),
        reverse("search") + "?q=no-such-thing",
        reverse("console-tools"),
        reverse("console-settings"),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        policy = response["Content-Security-Policy"]
        assert policy == POLICY, url
        assert "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        html = response.content.decode()
        assert not _INLINE_SCRIPT.search(html), url
        assert not _INLINE_STYLE.search(html), url

    sign_in = Client().get(reverse("login"))
    assert sign_in["Content-Security-Policy"] == POLICY


def test_the_admin_and_the_api_document_viewer_keep_their_inline_scripts(demo) -> None:
    get_user_model().objects.create_superuser("root", password="root-secret-pass-1")
    client = Client()
    assert client.login(username="root", password="root-secret-pass-1")
    for url in ("/admin/", "/api/docs/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "Content-Security-Policy" not in response, url
