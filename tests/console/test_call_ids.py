"""People see Callgate's own call ID (``tc_…``) as the call's ID, and the provider's beside it
labelled as the provider's, on the approval and the operation pages."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.engine import bundled_replies, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def test_pages_show_callgates_call_id_and_the_providers_apart(demo) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    approval = operation.approvals.get()
    call = approval.call
    assert call.public_id.startswith("tc_") and call.provider_call_id.startswith("call_")
    client = Client()
    assert client.login(username="support", password="support-demo-pass")
    page = client.get(f"/console/approvals/{approval.public_id}/").content.decode()
    assert f'<code data-testid="call-id">{call.public_id}</code>' in page
    assert "Provider call ID" in page and call.provider_call_id in page
    page = client.get(f"/console/operations/{operation.public_id}/").content.decode()
    assert f"<code>{call.public_id}</code></small>" in page
    assert f"<dt>Provider call ID</dt><dd><code><bdi>{call.provider_call_id}</bdi></code>" in page
