"""API-key authentication and scope checks.

A key is sent as ``Authorization: Bearer cg_<prefix>_<secret>``. The request then acts as the
key's service user (``request.user``) with the key itself as ``request.auth``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import unicodedata
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from toolcalls.api.models import KEY_NAME_MAX, SCOPES, ApiKey
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant
from toolcalls.text import plain

#: Scopes that also need Django permissions on the service user (four-eyes, tenant and
#: tool-permission checks in the services stay the same for people and services). A key that
#: starts operations may have every risk class of tool run for them; take a permission off its
#: service user to narrow that.
_SCOPE_PERMISSIONS = {
    "approvals:decide": [("approvals", "decide_approvalrequest")],
    "operations:write": [
        ("toolcalls", "use_write_tools"),
        ("toolcalls", "use_irreversible_tools"),
    ],
}
_TOUCH_EVERY = timedelta(minutes=1)
#: ``ApiKey.prefix``: ``secrets.token_hex(6)``.
_PREFIX = re.compile(r"[0-9a-f]{12}")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_key_create(*, tenant: Tenant, name: str, scopes: list[str]) -> tuple[ApiKey, str]:
    """A new key for ``tenant`` with ``scopes``, named ``name`` without surrounding white
    space; returns the row and the full key, which is not stored and cannot be shown again.
    Raises :class:`CallgateError`: ``invalid_request`` for a blank name, one over 100
    characters or with a character that does not show (:func:`~toolcalls.text.plain`), no
    scopes or an unknown scope; ``key_exists`` for a name another key of the tenant has,
    revoked or not, told apart by nothing but letter case or compatibility forms (NFKC, then
    case folding): the audit trail names a key's service by its name (``service:<name>``)."""
    name = name.strip()
    _name_check(name)
    _scopes_check(scopes)
    secret = secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            _name_free(tenant, name)
            key = ApiKey.objects.create(
                name=name,
                tenant=tenant,
                service_user=_service_user(tenant, scopes),
                scopes=sorted(set(scopes)),
                key_sha256=_digest(secret),
            )
    except IntegrityError:  # the same name, created meanwhile (the constraint's own folding)
        _name_free(tenant, name)
        raise
    return key, f"cg_{key.prefix}_{secret}"


def _name_check(name: str) -> None:
    if not name:
        raise CallgateError("invalid_request", "name the service that holds the key")
    if len(name) > KEY_NAME_MAX:
        message = f"a key's name has at most {KEY_NAME_MAX} characters"
        raise CallgateError("invalid_request", message)
    if not plain(name):
        message = "a key's name has only characters that show, and plain spaces"
        raise CallgateError("invalid_request", message)


def _scopes_check(scopes: list[str]) -> None:
    if not scopes:
        raise CallgateError(
            "invalid_request", f"a key needs at least one scope; known: {', '.join(SCOPES)}"
        )
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise CallgateError(
            "invalid_request",
            f"unknown scopes: {', '.join(unknown)}; known: {', '.join(SCOPES)}",
        )


def _name_free(tenant: Tenant, name: str) -> None:
    """Raises ``key_exists`` when a key of ``tenant`` has ``name`` but for letter case or
    compatibility forms, naming that key as it is stored."""
    for taken, revoked_at in ApiKey.objects.filter(tenant=tenant).values_list("name", "revoked_at"):
        if _folded(taken) == _folded(name):
            revoked = ", revoked: a revoked key keeps its name" if revoked_at else ""
            message = f"{tenant.slug} already has a key named {taken!r}{revoked}"
            raise CallgateError("key_exists", message)


def _folded(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def _service_user(tenant: Tenant, scopes: list[str]) -> Any:
    """A new member of ``tenant`` with no password, holding what ``scopes`` need of Django's
    permissions (:data:`_SCOPE_PERMISSIONS`): the identity a key's service acts as."""
    user = get_user_model().objects.create_user(
        username=f"service-{tenant.slug}-{secrets.token_hex(4)}"
    )
    user.set_unusable_password()
    user.save(update_fields=["password"])
    tenant.members.add(user)
    for scope in scopes:
        for app_label, codename in _SCOPE_PERMISSIONS.get(scope, []):
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
    return user


def api_keys_named(*, reference: str) -> QuerySet[ApiKey]:
    """The key ``reference`` names, in any form people hold: the whole key
    (``cg_<prefix>_<secret>``, whose secret must then be the key's), ``cg_<prefix>``, or the bare
    prefix ``list_api_keys`` shows. Raises :class:`CallgateError` ``not_found``; a message never
    quotes ``reference``, which may hold a secret, only a prefix of a key's shape."""
    prefix, secret = _parts(reference.strip())
    if not _PREFIX.fullmatch(prefix):
        message = (
            "not an API key: give the key (cg_<prefix>_<secret>), cg_<prefix>, or its prefix "
            "of 12 hex digits as list_api_keys shows it"
        )
        raise CallgateError("not_found", message)
    keys = ApiKey.objects.filter(prefix=prefix)
    key = keys.first()
    if key is None:
        raise CallgateError("not_found", f"no API key with prefix {prefix}")
    if secret and not hmac.compare_digest(key.key_sha256, _digest(secret)):
        message = f"the key given is not the one with prefix {prefix}: its secret differs"
        raise CallgateError("not_found", message)
    return keys


def _parts(token: str) -> tuple[str, str]:
    """``cg_<prefix>_<secret>`` (the ``cg_`` and the secret optional) → prefix, secret."""
    prefix, _, secret = token.removeprefix("cg_").partition("_")
    return prefix, secret


def api_keys_revoke(*, keys: QuerySet[ApiKey]) -> list[ApiKey]:
    """Revoke the live keys among ``keys``; returns them. A key revoked earlier keeps its first
    revocation time (one conditional UPDATE). Each key's service user, whom its operations run
    for, is deactivated too, so none of its calls still waiting for a human runs afterwards."""
    with transaction.atomic():
        live = keys.filter(revoked_at__isnull=True)
        revoked = list(live.select_for_update())
        live.update(revoked_at=timezone.now())
        get_user_model().objects.filter(api_keys__in=revoked).update(is_active=False)
    return revoked


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer cg_<prefix>_<secret>``."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        # Auth schemes are case-insensitive (RFC 9110 §11.1).
        if scheme.lower() != self.keyword.lower() or not token.startswith("cg_"):
            raise exceptions.AuthenticationFailed("Send the API key as 'Bearer cg_…'.")
        prefix, secret = _parts(token)
        # Anything but a prefix's shape names no key, and must not reach a query (NUL: a 500).
        key = (
            ApiKey.objects.select_related("tenant", "service_user")
            .filter(prefix=prefix, revoked_at__isnull=True)
            .first()
            if _PREFIX.fullmatch(prefix)
            else None
        )
        if key is None or not hmac.compare_digest(key.key_sha256, _digest(secret)):
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > _TOUCH_EVERY:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        return key.service_user, key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class HasScopes(permissions.BasePermission):
    """The key holds every scope the view names for this method (``view.scopes[METHOD]``)."""

    message = "This API key lacks the scope this request needs."

    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return False
        # HEAD runs the GET handler (Django's View.setup), so it needs GET's scopes.
        method = "GET" if request.method == "HEAD" else request.method
        needed = view.scopes.get(method, ())
        missing = [scope for scope in needed if scope not in key.scopes]
        if missing:
            self.message = f"This API key lacks the scope {', '.join(missing)}."
        return not missing
