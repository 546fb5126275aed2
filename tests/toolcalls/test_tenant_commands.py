"""``manage.py create_tenant`` and ``add_tenant_member``: what a deployer scripts instead of the
admin. Each may run again; bad input is one line and exit status 1, and nothing is written."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from tests.factories import TenantFactory, UserFactory
from toolcalls.demo.services import USERS, DemoSeed
from toolcalls.management.commands import add_tenant_member
from toolcalls.models import Tenant
from toolcalls.services.tenants import ROLES

pytestmark = pytest.mark.django_db

PASSWORD = "a long and unusual passphrase"
ENV = add_tenant_member.PASSWORD_VARIABLE


def _run(*args: str, **options: Any) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


def _add(username: str, roles: str, *extra: str, tenant: str = "acme", **options: Any) -> str:
    return _run(
        "add_tenant_member",
        *("--tenant", tenant, "--username", username, "--roles", roles, *extra),
        **options,
    )


@pytest.fixture
def acme() -> Tenant:
    return TenantFactory.create(slug="acme", name="Acme", tools=False)


@pytest.fixture
def password(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV, PASSWORD)
    return PASSWORD


def _roles_of(username: str) -> set[str]:
    return set(Group.objects.filter(user__username=username).values_list("name", flat=True))


# create_tenant


def test_a_tenant_is_created_once_and_then_reported_as_existing() -> None:
    assert _run("create_tenant", "--slug", "acme", "--name", " Acme Corp ") == (
        "created: tenant acme (Acme Corp)\n"
    )
    assert _run("create_tenant", "--slug", "acme", "--name", "Acme Corp") == (
        "exists: tenant acme (Acme Corp)\n"
    )
    tenant = Tenant.objects.get()
    assert (tenant.slug, tenant.name, tenant.is_active) == ("acme", "Acme Corp", True)
    assert not tenant.tools.exists()  # its catalogue starts empty


def test_a_slug_taken_under_another_name_is_refused_and_left_as_it_is(acme: Tenant) -> None:
    with pytest.raises(CommandError, match=r"^tenant 'acme' exists, named 'Acme', not 'Acme Inc'$"):
        _run("create_tenant", "--slug", "acme", "--name", "Acme Inc")
    acme.refresh_from_db()
    assert acme.name == "Acme"


def test_an_inactive_tenant_is_reported_as_such(acme: Tenant) -> None:
    acme.is_active = False
    acme.save(update_fields=["is_active"])
    out = _run("create_tenant", "--slug", "acme", "--name", "Acme")
    assert out == "exists: tenant acme (Acme) (inactive: it may not use tools)\n"


@pytest.mark.parametrize("slug", ["bad slug!", "Acme", "acmé", "a" * 51, ""])
def test_a_slug_that_is_not_one_is_refused(slug: str) -> None:
    with pytest.raises(CommandError, match=r"is not a tenant slug: lowercase letters, digits"):
        _run("create_tenant", "--slug", slug, "--name", "Acme")
    assert not Tenant.objects.exists()


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        ("  ", "may not be blank"),
        ("A" * 201, "at most 200 characters"),
        ("Acme\u200bCorp", "only characters that show"),
        ("Acme\tCorp", "only characters that show"),
    ],
)
def test_a_name_that_cannot_be_shown_on_one_line_is_refused(name: str, refusal: str) -> None:
    with pytest.raises(CommandError, match=refusal):
        _run("create_tenant", "--slug", "acme", "--name", name)
    assert not Tenant.objects.exists()


# add_tenant_member: new users


def test_a_new_user_is_created_with_the_password_from_the_environment(
    acme: Tenant, password: str
) -> None:
    out = _add("alice", "operator,requester", "--no-input")
    assert out == "created: user alice in acme as operator, requester\n"
    alice = get_user_model().objects.get(username="alice")
    assert alice.check_password(password)
    assert not alice.is_staff and not alice.is_superuser
    assert list(alice.tenants.all()) == [acme]
    assert _roles_of("alice") == {"operators", "requesters"}
    expected = {*ROLES["operator"].permissions, *ROLES["requester"].permissions}
    assert {perm for perm in expected if alice.has_perm(perm)} == expected
    client = Client()
    assert client.login(username="alice", password=password)
    assert client.get(reverse("approvals:queue")).status_code == 200


def test_each_role_gives_its_permissions_and_no_others(acme: Tenant, password: str) -> None:
    every = {perm for role in ROLES.values() for perm in role.permissions}
    for name, role in ROLES.items():
        _add(f"only-{name}", name, "--no-input")
        user = get_user_model().objects.get(username=f"only-{name}")
        assert {perm for perm in every if user.has_perm(perm)} == set(role.permissions)


def test_the_password_is_never_taken_on_the_command_line(acme: Tenant) -> None:
    with pytest.raises(CommandError, match="unrecognized arguments: --password"):
        _add("alice", "support", "--no-input", "--password", PASSWORD)
    assert not get_user_model().objects.filter(username="alice").exists()


def test_no_input_without_the_password_variable_is_refused(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(CommandError, match=rf"^user 'alice' is new: set {ENV} to their password$"):
        _add("alice", "support", "--no-input")
    assert not get_user_model().objects.filter(username="alice").exists()


@pytest.mark.parametrize(
    ("weak", "objection"), [("short", "too short"), ("password123", "too common"), ("", "short")]
)
def test_a_password_the_validators_refuse_is_refused(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch, weak: str, objection: str
) -> None:
    monkeypatch.setenv(ENV, weak)
    with pytest.raises(CommandError, match=rf"^password refused: .*{objection}") as refused:
        _add("alice", "support", "--no-input")
    assert "\n" not in str(refused.value)
    assert not get_user_model().objects.filter(username="alice").exists()
    assert not acme.members.exists()


# add_tenant_member: the terminal


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def typed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What the person types at each password prompt, in order (fill the list)."""
    answers: list[str] = []

    def getpass(prompt: str = "Password: ") -> str:
        assert prompt in ("Password for bob: ", "Password (again): ")
        if not answers:
            raise KeyboardInterrupt
        return answers.pop(0)

    monkeypatch.setattr(add_tenant_member.getpass, "getpass", getpass)
    yield answers
    assert not answers, "not every answer was asked for"


def test_a_new_users_password_is_asked_for_until_it_is_typed_twice_and_acceptable(
    acme: Tenant, typed: list[str]
) -> None:
    typed.extend(["first attempt ok", "a typo", "short", "short", PASSWORD, PASSWORD])
    err = StringIO()
    out = StringIO()
    call_command(
        "add_tenant_member", "--tenant", "acme", "--username", "bob", "--roles", "support",
        stdin=_Terminal(), stdout=out, stderr=err,
    )  # fmt: skip
    assert out.getvalue() == "created: user bob in acme as support\n"
    lines = err.getvalue().splitlines()
    assert lines[0] == "Error: the two passwords differ."
    assert lines[1].startswith("Error: password refused: This password is too short.")
    assert get_user_model().objects.get(username="bob").check_password(PASSWORD)


def test_three_refused_passwords_or_an_interrupt_change_nothing(
    acme: Tenant, typed: list[str]
) -> None:
    typed.extend(["short", "short"] * 3)
    with pytest.raises(CommandError, match=r"^no password accepted in 3 attempts; nothing changed"):
        _add("bob", "support", stdin=_Terminal())
    with pytest.raises(CommandError, match=r"^cancelled; nothing changed$"):
        _add("bob", "support", stdin=_Terminal())
    assert not get_user_model().objects.filter(username="bob").exists()


def test_without_a_terminal_a_new_user_needs_no_input(acme: Tenant, password: str) -> None:
    """A script that forgot ``--no-input`` is told so; the variable alone is not read."""
    with pytest.raises(CommandError, match=rf"no terminal .*: set {ENV} and pass --no-input$"):
        _add("bob", "support", stdin=StringIO())
    assert not get_user_model().objects.filter(username="bob").exists()


# add_tenant_member: existing users


def test_running_again_changes_nothing_and_never_reads_the_password(
    acme: Tenant, password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add("alice", "operator", "--no-input")
    monkeypatch.setenv(ENV, "another long passphrase")
    assert _add("alice", "operator", "--no-input") == "exists: user alice in acme as operator\n"
    monkeypatch.delenv(ENV)
    # Not even asked for: an existing user needs no password, terminal or not.
    assert _add("alice", "operator", stdin=StringIO()) == "exists: user alice in acme as operator\n"
    assert get_user_model().objects.get(username="alice").check_password(password)


def test_an_existing_user_of_no_tenant_is_added_with_exactly_the_roles(acme: Tenant) -> None:
    """Created by ``createsuperuser`` or in the admin, say: other groups stay."""
    user = UserFactory.create(username="carol")
    user.groups.add(Group.objects.create(name="auditors"))
    assert _add("carol", "support", "--no-input") == (
        "added: user carol in acme as support (before: no role)\n"
    )
    assert _roles_of("carol") == {"support", "auditors"}
    assert user.check_password("pw")


def test_the_roles_of_a_member_of_this_tenant_alone_are_replaced(
    acme: Tenant, password: str
) -> None:
    _add("alice", "operator,requester", "--no-input")
    assert _add("alice", "support", "--no-input") == (
        "changed: user alice in acme as support (before: operator, requester)\n"
    )
    assert _roles_of("alice") == {"support"}
    alice = get_user_model().objects.get(username="alice")
    assert not alice.has_perm("approvals.decide_approvalrequest")


def test_a_member_of_another_tenant_is_added_with_the_same_roles_only(
    acme: Tenant, password: str
) -> None:
    """Django permissions are the user's, in every tenant: other roles here would change what
    they may do in the other tenant, so they are refused."""
    TenantFactory.create(slug="globex", name="Globex", tools=False)
    _add("alice", "operator", "--no-input", tenant="globex")
    refusal = (
        r"^user 'alice' is operator in globex: a user's roles hold in each of their tenants, so "
        r"they cannot be support in acme; give the roles they have there, or another user name$"
    )
    with pytest.raises(CommandError, match=refusal):
        _add("alice", "support", "--no-input")
    assert _roles_of("alice") == {"operators"}
    assert not acme.members.exists()
    assert _add("alice", "operator", "--no-input") == "added: user alice in acme as operator\n"
    assert set(Tenant.objects.filter(members__username="alice")) == set(Tenant.objects.all())


def test_an_inactive_user_is_added_with_a_warning(acme: Tenant) -> None:
    UserFactory.create(username="dave", is_active=False)
    out = _add("dave", "support", "--no-input")
    assert out.endswith("; the user is inactive and cannot sign in\n")


def test_a_name_differing_only_in_letter_case_is_refused(acme: Tenant, password: str) -> None:
    _add("alice", "support", "--no-input")
    with pytest.raises(CommandError, match=r"^a user 'alice' exists: give that name, or another"):
        _add("Alice", "support", "--no-input")
    assert get_user_model().objects.count() == 1


# add_tenant_member: bad input


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (("--roles", "admin"), r"^no role 'admin'; the roles are operator, support, requester$"),
        (("--roles", " , "), r"^give a role: operator, support, requester$"),
        (("--username", "bad name!"), r"^user name 'bad name!': Enter a valid username"),
        (("--username", ""), r"^user name '': This field cannot be blank"),
        (("--username", "x" * 151), r"at most 150 characters"),
        (("--username", "bob\u3164"), r"^user name 'bob\u3164': every character must show"),
        (("--tenant", "nope"), r"^no tenant 'nope'; manage.py create_tenant adds one$"),
    ],
)
def test_bad_input_is_one_line_and_creates_nobody(
    acme: Tenant, password: str, args: tuple[str, str], refusal: str
) -> None:
    given = {"--tenant": "acme", "--username": "alice", "--roles": "support"}
    given[args[0]] = args[1]
    with pytest.raises(CommandError, match=refusal) as refused:
        _run("add_tenant_member", "--no-input", *(part for pair in given.items() for part in pair))
    assert "\n" not in str(refused.value)
    assert not get_user_model().objects.exists()
    assert not acme.members.exists()


# add_tenant_member: what else it shares and says


def test_the_demo_users_hold_the_roles_the_command_gives(demo: DemoSeed) -> None:
    """One definition of the roles: the demo's seed and the command agree."""
    for username, (roles, _password) in USERS.items():
        assert _add(username, ",".join(roles)) == (
            f"exists: user {username} in acme as {', '.join(roles)}\n"
        )


def test_each_change_is_logged_with_its_actor(
    acme: Tenant, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="callgate.tenants"):
        _run("create_tenant", "--slug", "globex", "--name", "Globex")
        _add("alice", "operator", "--no-input")
        _add("alice", "operator", "--no-input")  # nothing changed: nothing logged
        _add("alice", "support", "--no-input")
    assert [record.getMessage() for record in caplog.records] == [
        "tenant created slug=globex name='Globex' actor=system:command-line",
        "member created tenant=acme user=alice roles=operator previous_roles=- "
        "actor=system:command-line",
        "member changed tenant=acme user=alice roles=support previous_roles=operator "
        "actor=system:command-line",
    ]
    assert password not in caplog.text


def test_the_help_names_the_roles_and_where_the_password_comes_from() -> None:
    command = add_tenant_member.Command()
    text = " ".join(command.create_parser("manage.py", "add_tenant_member").format_help().split())
    for role in ROLES.values():
        assert f"{role.name}: {role.summary}" in text
    assert f"--no-input read from {ENV}" in text
