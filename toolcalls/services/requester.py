"""What authorizing a call needs of the operation's requester, read with the step's lock.

A step that may authorize calls (:func:`toolcalls.services.unit.operation_step` and
:func:`~toolcalls.services.unit.call_step` with ``requester``) reads, in the statement that
locks the operation: the requester (``requested_by``), whether they belong to the operation's
tenant (``requester_member``), and on PostgreSQL the permissions they hold
(``requester_permissions``: ``"app_label.codename"`` names, directly or through a group: what
``django.contrib.auth.backends.ModelBackend`` reads for ``has_perm``). :func:`requester_ready`
then hands those permissions to ``ModelBackend``, so ``has_perm`` asks nothing more.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Concat

from toolcalls.models import Operation, Tenant


def requester_read(rows: QuerySet[Operation], *, postgresql: bool) -> QuerySet[Operation]:
    """``rows`` with their requester, ``requester_member`` and (``postgresql``: an array only
    PostgreSQL returns) ``requester_permissions``."""
    member = Tenant.members.through.objects.filter(
        tenant_id=OuterRef("tenant_id"), user_id=OuterRef("requested_by_id")
    )
    rows = rows.select_related("requested_by").annotate(requester_member=Exists(member))
    if postgresql:
        rows = rows.annotate(requester_permissions=_permissions())
    return rows


def _permissions() -> ArraySubquery:
    """The names of the permissions the requester holds, directly or through a group."""
    requester = OuterRef(OuterRef("requested_by_id"))
    direct = get_user_model().user_permissions.through.objects.filter(user_id=requester)
    grouped = Group.permissions.through.objects.filter(group__user=requester)
    held = Q(pk__in=direct.values("permission_id")) | Q(pk__in=grouped.values("permission_id"))
    names = Concat("content_type__app_label", Value("."), "codename")
    return ArraySubquery(Permission.objects.filter(held).order_by().values(permission=names))


def requester_ready(operation: Operation) -> None:
    """Give ``ModelBackend`` the requester's permissions read with ``operation``: they become
    its per-user cache (``_perm_cache``, which it reads before asking the database). A
    superuser's are left to it: it grants them every permission."""
    names: list[str] | None = getattr(operation, "requester_permissions", None)
    requester = operation.requested_by
    if names is not None and not requester.is_superuser:
        requester._perm_cache = set(names)  # type: ignore[attr-defined]
