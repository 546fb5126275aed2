"""Create tenants and give people a role in them, as the deployment commands do.

What a member of a tenant may do comes from Django permissions, held through one group per
role (:data:`ROLES`). Permissions belong to the user, not to one membership: a user's roles hold
in every tenant they are a member of. Hence the rule of :func:`tenant_member_add`: adding a user
to a tenant never changes what they may do in another one.

Each change is logged (``callgate.tenants``), as catalogue changes are: the audit trail is an
operation's, and the admin's history names the signed-in staff user who made a change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant
from toolcalls.registry import RISK_PERMISSIONS
from toolcalls.text import plain

log = logging.getLogger("callgate.tenants")

#: The longest slug, as ``Tenant.slug`` stores it.
SLUG_MAX = 50
#: The longest name, as ``Tenant.name`` stores it.
NAME_MAX = 200


class TenantError(CallgateError):
    """A tenant or membership change that cannot be made. ``code``: ``invalid_request`` (a slug,
    name, user name, role or password not acceptable), ``tenant_exists`` (the slug is taken
    under another name), ``password_required`` (a new user and no password given),
    ``user_exists`` (a user name told apart from another only by letter case, or created
    meanwhile) or ``roles_conflict`` (other roles than the user has, and another tenant)."""


@dataclass(frozen=True)
class Role:
    """A set of console permissions (``app_label.codename``), held through the Django group
    ``group``; ``summary`` says what it lets a member do, for people."""

    name: str
    group: str
    permissions: tuple[str, ...]
    summary: str


#: The console's roles by name, each checked by the code that names its permissions
#: (approvals' decide check, the console's views, authorization of write tools).
ROLES: Mapping[str, Role] = {
    role.name: role
    for role in (
        Role(
            name="operator",
            group="operators",
            permissions=(
                "approvals.decide_approvalrequest",
                "approvals.view_approvalrequest",
                "toolcalls.view_operation",
                "toolcalls.resolve_operation",
                "toolcalls.add_operation",  # fork an operation from a turn
            ),
            summary="decide approvals (never of their own requests), act on escalated "
            "operations, fork operations, read approvals and operations",
        ),
        Role(
            name="support",
            group="support",
            permissions=("approvals.view_approvalrequest", "toolcalls.view_operation"),
            summary="read approvals and operations, search",
        ),
        Role(
            name="requester",
            group="requesters",
            permissions=tuple(RISK_PERMISSIONS.values()),
            summary="have write and irreversible tools run for their operations",
        ),
    )
}


@dataclass(frozen=True)
class TenantCreated:
    tenant: Tenant
    #: False: the tenant was there already, under the same name, and is unchanged.
    created: bool


Outcome = Literal["created", "added", "changed", "exists"]


@dataclass(frozen=True)
class Membership:
    """What :func:`tenant_member_add` did. ``outcome``: ``created`` (a new user, member with
    ``roles``), ``added`` (an existing user made a member), ``changed`` (a member given other
    roles) or ``exists`` (nothing changed). ``previous_roles``: the user's roles before, for an
    existing user."""

    user: Any
    tenant: Tenant
    roles: tuple[str, ...]
    outcome: Outcome
    previous_roles: tuple[str, ...] = ()


def tenant_create(*, slug: str, name: str, actor: Actor) -> TenantCreated:
    """The tenant ``slug`` named ``name`` (surrounding white space dropped): created, or found
    when it exists under that very name (``created`` false), so a script may run again.
    Raises :class:`TenantError`: ``invalid_request`` for a slug other than lowercase letters,
    digits, ``-`` and ``_`` (at most :data:`SLUG_MAX`), or a blank name, one over
    :data:`NAME_MAX` characters or with a character that does not show
    (:func:`~toolcalls.text.plain`); ``tenant_exists`` when the slug has another name."""
    tenant_slug_check(slug)
    name = name.strip()
    _name_check(name)
    tenant, created = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    if not created and tenant.name != name:
        message = f"tenant {slug!r} exists, named {tenant.name!r}, not {name!r}"
        raise TenantError("tenant_exists", message)
    if created:
        log.info("tenant created slug=%s name=%r actor=%s", slug, name, actor)
    return TenantCreated(tenant=tenant, created=created)


def tenant_slug_check(slug: str) -> None:
    """Raises :class:`TenantError` (``invalid_request``) unless ``slug`` is a tenant slug:
    lowercase letters, digits, ``-`` and ``_``, at most :data:`SLUG_MAX` characters (``Acme``
    beside ``acme`` would be two tenants no one tells apart)."""
    try:
        validate_slug(slug)
    except ValidationError:
        slug_ok = False
    else:
        slug_ok = slug == slug.lower() and len(slug) <= SLUG_MAX
    if not slug_ok:
        message = (
            f"{slug!r} is not a tenant slug: lowercase letters, digits, - and _, "
            f"at most {SLUG_MAX} characters"
        )
        raise TenantError("invalid_request", message)


def _name_check(name: str) -> None:
    if not name:
        raise TenantError("invalid_request", "a tenant's name may not be blank")
    if len(name) > NAME_MAX:
        raise TenantError("invalid_request", f"a tenant's name has at most {NAME_MAX} characters")
    if not plain(name):
        message = "a tenant's name has only characters that show, and plain spaces"
        raise TenantError("invalid_request", message)


def role_groups(*, names: Iterable[str]) -> list[Group]:
    """The group of each role of ``names`` (in :data:`ROLES`), created or completed with the
    role's permissions (a permission removed from the group is given back; others added to it
    stay). Raises :class:`TenantError` (``invalid_request``) naming an unknown role."""
    groups = []
    for role in _roles(names):
        group, _ = Group.objects.get_or_create(name=role.group)
        for dotted in role.permissions:
            app_label, codename = dotted.split(".")
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        groups.append(group)
    return groups


def _roles(names: Iterable[str]) -> list[Role]:
    """The roles of ``names``, in :data:`ROLES`' order, each once."""
    wanted = set(names)
    unknown = sorted(wanted - set(ROLES))
    if unknown:
        message = f"no role {unknown[0]!r}; the roles are {', '.join(ROLES)}"
        raise TenantError("invalid_request", message)
    return [role for name, role in ROLES.items() if name in wanted]


def tenant_member_add(
    *, tenant: Tenant, username: str, roles: Sequence[str], password: str | None, actor: Actor
) -> Membership:
    """Make user ``username`` a member of ``tenant`` holding exactly ``roles`` (at least one,
    of :data:`ROLES`); creates the user with ``password`` (checked by
    :func:`member_password_check`) when there is none. Safe to run again: a member with those
    roles is ``exists``. An existing user's password is never read nor changed.

    A user's roles hold in each of their tenants, so an existing user's roles change only when
    ``tenant`` is their only tenant (or they have none); a user of another tenant whose roles
    are not ``roles`` is refused.

    Raises :class:`TenantError`: ``invalid_request`` (no role or an unknown one, a user name the
    user model refuses, a password the validators refuse), ``password_required`` (a new user,
    ``password`` ``None``: ask for one and call again), ``user_exists`` (a user whose name
    differs only in letter case; or one created meanwhile), ``roles_conflict``."""
    wanted = tuple(role.name for role in _roles(roles))
    if not wanted:
        raise TenantError("invalid_request", f"give a role: {', '.join(ROLES)}")
    _username_check(username)
    with transaction.atomic():
        # Membership changes of one tenant, one at a time: each reads the roles it replaces.
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        groups = role_groups(names=wanted)
        user = _user(username)
        if user is None:
            user = _user_create(username=username, password=password)
            membership = Membership(user=user, tenant=locked, roles=wanted, outcome="created")
        else:
            membership = _member_update(user=user, tenant=locked, roles=wanted)
        user.groups.add(*groups)
        locked.members.add(user)
    if membership.outcome != "exists":
        _membership_log(membership, actor)
    return membership


def _membership_log(membership: Membership, actor: Actor) -> None:
    log.info(
        "member %s tenant=%s user=%s roles=%s previous_roles=%s actor=%s",
        membership.outcome,
        membership.tenant.slug,
        membership.user.get_username(),
        ",".join(membership.roles),
        ",".join(membership.previous_roles) or "-",
        actor,
    )


def member_password_check(*, username: str, password: str) -> None:
    """Raises :class:`TenantError` (``invalid_request``) with every objection of the password
    validators (``AUTH_PASSWORD_VALIDATORS``) to ``password`` for user ``username``."""
    try:
        password_validation.validate_password(password, user=get_user_model()(username=username))
    except ValidationError as exc:
        message = f"password refused: {' '.join(exc.messages)}"
        raise TenantError("invalid_request", message) from None


def _username_check(username: str) -> None:
    """Django's rules for a user name, and every character showing: the audit trail and the
    console name people by it, and a Hangul filler (a letter to Django) would let ``bob`` +
    U+3164 pass for ``bob``."""
    user_model = get_user_model()
    field = user_model._meta.get_field(user_model.USERNAME_FIELD)
    try:
        field.clean(username, None)  # type: ignore[union-attr]
    except ValidationError as exc:
        message = f"user name {username!r}: {' '.join(exc.messages)}"
        raise TenantError("invalid_request", message) from None
    if not plain(username):
        message = f"user name {username!r}: every character must show (no blank letters)"
        raise TenantError("invalid_request", message)


def _user(username: str) -> Any:
    """The user named ``username``, or ``None``; refuses a name that differs from a user's only
    in letter case (people and the console's filters take names in any case)."""
    users = list(get_user_model().objects.filter(username__iexact=username))
    user = next((user for user in users if user.get_username() == username), None)
    if user is None and users:
        message = f"a user {users[0].get_username()!r} exists: give that name, or another one"
        raise TenantError("user_exists", message)
    return user


def _user_create(*, username: str, password: str | None) -> Any:
    if password is None:
        raise TenantError("password_required", f"user {username!r} is new: give a password")
    member_password_check(username=username, password=password)
    try:
        with transaction.atomic():
            return get_user_model().objects.create_user(username=username, password=password)
    except IntegrityError:
        message = f"user {username!r} was created meanwhile; run the command again"
        raise TenantError("user_exists", message) from None


def _member_update(*, user: Any, tenant: Tenant, roles: tuple[str, ...]) -> Membership:
    """Gives the existing ``user`` exactly ``roles`` (the refusal of another tenant aside);
    the caller adds the groups and the membership."""
    held = _held_roles(user)
    joined = not tenant.members.filter(pk=user.pk).exists()
    if held != roles:
        others = list(user.tenants.exclude(pk=tenant.pk).order_by("slug").values_list("slug"))
        if others:
            where = ", ".join(slug for (slug,) in others)
            message = (
                f"user {user.get_username()!r} is {_roles_text(held)} in {where}: a user's roles "
                f"hold in each of their tenants, so they cannot be {_roles_text(roles)} in "
                f"{tenant.slug}; give the roles they have there, or another user name"
            )
            raise TenantError("roles_conflict", message)
        dropped = [ROLES[name].group for name in held if name not in roles]
        user.groups.remove(*Group.objects.filter(name__in=dropped))
    outcome: Outcome = "added" if joined else "changed" if held != roles else "exists"
    return Membership(user=user, tenant=tenant, roles=roles, outcome=outcome, previous_roles=held)


def _held_roles(user: Any) -> tuple[str, ...]:
    names = [role.group for role in ROLES.values()]
    groups = set(user.groups.filter(name__in=names).values_list("name", flat=True))
    return tuple(role.name for role in ROLES.values() if role.group in groups)


def _roles_text(roles: Sequence[str]) -> str:
    return ", ".join(roles) if roles else "without a role"
