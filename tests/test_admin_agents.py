"""Agent profiles in the admin: a superuser creates one and changes it (each change a new
revision); revisions are read-only; staff see only their tenants' agents; an operation's page
shows the agent revision it ran with, the operation it follows up and what it asked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from tests.factories import OperationFactory, TenantFactory, UserFactory
from tests.test_admin import change_url, superuser, url
from toolcalls import catalogue
from toolcalls.actors import Actor
from toolcalls.models import AgentProfile, AgentRevision, Tenant
from toolcalls.services.agents import agent_create

pytestmark = pytest.mark.django_db
__all__ = ["superuser"]  # the fixture, used by name


def _form(**fields: Any) -> dict[str, Any]:
    data = {
        "family": "openai_responses",
        "model": "gpt-5.1",
        "instructions": "You handle refunds.",
        "settings": json.dumps({"temperature": 0.2}),
        "tools": json.dumps(["get_order"]),
        "budgets": json.dumps({"max_turns": 5}),
        "approval_overrides": json.dumps({}),
        "note": "",
        "revisions-TOTAL_FORMS": "0",
        "revisions-INITIAL_FORMS": "0",
    }
    return data | fields


@pytest.fixture
def tenant() -> Tenant:
    return TenantFactory.create(slug="alpha")


def test_a_superuser_creates_an_agent_and_each_change_is_a_new_revision(
    superuser: Client, tenant: Tenant
) -> None:
    response = superuser.post(
        url(AgentProfile, "add"), _form(tenant=tenant.pk, name="refunds", note="first")
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    profile = AgentProfile.objects.get(tenant=tenant, name="refunds")
    first = profile.revisions.get()
    assert (first.number, first.tool_names, first.settings) == (
        1,
        ["get_order"],
        {"temperature": 0.2},
    )
    assert (first.note, first.created_by) == ("first", "user:root")
    page = superuser.get(change_url(profile)).content.decode()
    assert "You handle refunds." in page  # the form starts from the latest revision
    changed = _form(
        instructions="Be brief.",
        note="shorter",
        **{"revisions-INITIAL_FORMS": "1", "revisions-TOTAL_FORMS": "1"},
    )
    response = superuser.post(change_url(profile), changed)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert [(r.number, r.instructions) for r in profile.revisions.order_by("number")] == [
        (1, "You handle refunds."),
        (2, "Be brief."),
    ]
    assert superuser.get(url(AgentProfile, "delete", profile.pk)).status_code == 403


def test_saving_an_agent_unchanged_keeps_its_revision_and_says_so(
    superuser: Client, tenant: Tenant
) -> None:
    """It made a new revision identical to the last one, and said it was changed."""
    superuser.post(url(AgentProfile, "add"), _form(tenant=tenant.pk, name="refunds"))
    profile = AgentProfile.objects.get(tenant=tenant, name="refunds")
    shown = superuser.get(change_url(profile)).context["adminform"].form
    as_shown = {name: shown[name].value() for name in ("settings", "tools", "budgets")}
    formset = {"revisions-INITIAL_FORMS": "1", "revisions-TOTAL_FORMS": "1"}
    for note in ("", "just looking"):
        response = superuser.post(
            change_url(profile), _form(note=note, **as_shown, **formset), follow=True
        )
        said = [str(message) for message in response.context["messages"]]
        kept = "Nothing changed: refunds stays at revision 1."
        assert said == [kept + (" The note is kept only with a change." if note else "")]
    assert list(profile.revisions.values_list("number", "note")) == [(1, "")]
    profile.refresh_from_db()
    assert profile.latest_revision == 1
    response = superuser.post(change_url(profile), _form(model="gpt-5.2", **formset), follow=True)
    (said,) = response.context["messages"]
    assert "was changed successfully" in str(said)
    assert profile.revisions.count() == 2


def test_a_bad_definition_is_a_form_error(superuser: Client, tenant: Tenant) -> None:
    for fields, field in [
        ({"tools": json.dumps(["launch_rocket"])}, "tools"),
        ({"tools": json.dumps([1])}, "tools"),
        ({"tools": json.dumps([None, "get_order"])}, "tools"),
        ({"settings": json.dumps({"colour": "blue"})}, "settings"),
        (
            {"approval_overrides": json.dumps({"get_order": {"policy": "never"}})},
            "approval_overrides",
        ),
        ({"name": "Not A Slug"}, "name"),
    ]:
        body = _form(tenant=tenant.pk, name="refunds") | fields
        response = superuser.post(url(AgentProfile, "add"), body)
        assert response.status_code == 200
        assert field in response.context["adminform"].form.errors, fields
    assert not AgentProfile.objects.exists()


def test_the_add_form_starts_blank_and_saves_as_shown(superuser: Client, tenant: Tenant) -> None:
    form = superuser.get(url(AgentProfile, "add")).context["adminform"].form
    shown = {name: form[name].value() for name in ("tools", "settings", "budgets")}
    assert shown == {"tools": "", "settings": "{}", "budgets": "{}"}
    body = _form(tenant=tenant.pk, name="refunds") | shown
    response = superuser.post(url(AgentProfile, "add"), body)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert AgentProfile.objects.get().revisions.get().tool_names == catalogue.tool_names(tenant)


def test_revisions_are_read_only_and_staff_see_only_their_tenants_agents(
    superuser: Client, tenant: Tenant
) -> None:
    definition: Any = {"family": "openai_chat", "model": "m"}
    mine = agent_create(tenant=tenant, name="mine", definition=definition, actor=Actor.system("t"))
    other = TenantFactory.create(slug="bravo")
    theirs = agent_create(
        tenant=other, name="theirs", definition=definition, actor=Actor.system("t")
    )
    response = superuser.post(change_url(mine), {"model": "changed"})
    assert response.status_code == 403
    assert AgentRevision.objects.get(pk=mine.pk).model == "m"
    user: User = UserFactory.create(username="support-alpha", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_agentprofile", "view_agentrevision"])
    )
    tenant.members.add(user)
    staff = Client()
    staff.force_login(user)
    listing = staff.get(url(AgentRevision, "changelist")).content.decode()
    assert "mine@1" in listing and "theirs@1" not in listing
    assert staff.get(change_url(theirs.profile)).status_code == 302
    assert staff.get(change_url(mine.profile)).status_code == 200
    assert (
        staff.post(url(AgentProfile, "add"), _form(tenant=tenant.pk, name="x")).status_code == 403
    )


def test_an_operations_page_shows_its_agent_revision_parent_and_request(
    superuser: Client, tenant: Tenant
) -> None:
    revision = agent_create(
        tenant=tenant,
        name="refunds",
        definition={"family": "openai_responses", "model": "gpt-5.1"},
        actor=Actor.system("test"),
    )
    parent = OperationFactory.create(tenant=tenant)
    operation = OperationFactory.create(
        tenant=tenant,
        parent=parent,
        agent_revision=revision,
        instructions="You handle <refunds>.",
        settings={"max_output_tokens": 700},
    )
    page = superuser.get(change_url(operation)).content.decode()
    assert "refunds@1" in page
    assert parent.public_id in page
    assert "You handle &lt;refunds&gt;." in page
    assert "max_output_tokens" in page
