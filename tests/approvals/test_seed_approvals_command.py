"""``manage.py seed_approvals`` refuses what it cannot seed before it writes anything."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from toolcalls.models import Tenant

pytestmark = pytest.mark.django_db


def test_a_tenant_slug_that_is_not_a_slug_is_refused_and_no_tenant_is_created() -> None:
    with pytest.raises(CommandError, match="--tenant 'bad slug!'"):
        call_command("seed_approvals", "--tenant", "bad slug!", "--pending", "1", stdout=StringIO())
    assert not Tenant.objects.filter(slug="bad slug!").exists()


def test_an_unknown_user_is_refused_before_the_tenant_is_created() -> None:
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command(
            "seed_approvals", "--tenant", "fresh", "--requested-by", "nobody", stdout=StringIO()
        )
    assert not Tenant.objects.filter(slug="fresh").exists()
