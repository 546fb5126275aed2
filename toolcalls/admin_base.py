"""Shared pieces of the support admin: permissions, tenant scoping, JSON display, cheap pages.

Every admin class of ``toolcalls``, ``approvals`` and ``toolcalls.demo`` is built from these
mixins; each mixin subclasses ``ModelAdmin`` and calls ``super()``, so they combine in any order
before ``admin.ModelAdmin`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from providers.families import ADAPTERS
from toolcalls import registry
from toolcalls.models import Tenant
from toolcalls.text import shown_html


def member_tenants(request: HttpRequest) -> QuerySet[Tenant]:
    """The tenants the signed-in user is a member of."""
    return Tenant.objects.filter(members=request.user.pk)


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON inside ``<pre>``, HTML-escaped, safe to render."""
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


class CheckedSelectionAdminMixin(admin.ModelAdmin):
    """An action runs only on a selection of rows the user sees.

    Django filters the changelist by the posted IDs as they are, so one that is no key
    (``abc``, a NUL) fails the query: a 500. Here the selection is read first, as a form reads
    one (``ModelMultipleChoiceField``); one naming anything else (malformed, beyond the key's
    range, another tenant's row, a row deleted meanwhile) is refused with the field's message,
    back to the changelist, as Django refuses an empty selection.
    """

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        # ``args``, ``kwargs``: whatever more Django passes (its stubs add ``action_location``).
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        try:
            forms.ModelMultipleChoiceField(queryset, required=False).clean(selected)
        except ValidationError as exc:
            for message in exc.messages:
                self.message_user(request, message, messages.WARNING)
            return None
        return super().response_action(request, queryset, *args, **kwargs)


class ReadOnlyAdminMixin(admin.ModelAdmin):
    """No add, change or delete through the admin, whoever the user is (superusers included):
    these rows are written by services only. Viewing still needs the model's view permission."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SuperuserEditableAdminMixin(CheckedSelectionAdminMixin):
    """Add, change and delete for superusers only; other staff may at most view. Actions
    (deleting the selected rows) take checked selections."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser


class TenantScopedAdminMixin(CheckedSelectionAdminMixin):
    """Staff who are not superusers see only rows of the tenants they are members of.

    ``tenant_lookup`` is the path from the model to its tenant and ``tenant_key`` the tenant
    column that path holds: ``"operation__tenant"`` with ``"pk"``, or ``"tenant_ref"`` with
    ``"slug"`` for the demo shop. The filter is ``IN`` a subquery of the user's tenants, not a
    join through ``members``, so it never duplicates rows. Objects outside the scope do not
    exist for the user: their change page redirects like a deleted object's, and an action's
    selection naming one is refused (:class:`CheckedSelectionAdminMixin`).
    """

    tenant_lookup: str = "tenant"
    tenant_key: str = "pk"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return self.scope_to_tenants(queryset, member_tenants(request))

    def scope_to_tenants(self, queryset: QuerySet[Any], tenants: QuerySet[Tenant]) -> QuerySet[Any]:
        lookup = f"{self.tenant_lookup}__in"
        return queryset.filter(**{lookup: tenants.values(self.tenant_key)})


def _json_display(name: str) -> Callable[[admin.ModelAdmin, models.Model], str]:
    @admin.display(description=name.replace("_", " "))
    def display(model_admin: admin.ModelAdmin, obj: models.Model) -> str:
        value = getattr(obj, name)
        return model_admin.get_empty_value_display() if value is None else pretty_json(value)

    display.__name__ = f"{name}_json"
    return display


def _json_columns(model: type[models.Model], prefix: str = "") -> set[str]:
    return {
        prefix + field.name
        for field in model._meta.concrete_fields
        if isinstance(field, models.JSONField)
    }


class JsonAdminMixin(admin.ModelAdmin):
    """JSON columns: pretty on the detail page, never loaded by the changelist.

    Each column named in ``json_fields`` is replaced on the detail page by a read-only
    ``<name>_json`` field that renders it indented inside ``<pre>``. On the changelist every
    JSON column is deferred, the model's own and those of each ``list_select_related`` row
    (a conversation or a wire reply can weigh megabytes, and a list page never shows one), as
    are the extra columns named in ``changelist_defer`` (large text).
    """

    json_fields: tuple[str, ...] = ()
    changelist_defer: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.json_fields:
            setattr(cls, f"{name}_json", _json_display(name))

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return (*(super().get_exclude(request, obj) or ()), *self.json_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        readonly = tuple(super().get_readonly_fields(request, obj))
        return (*readonly, *(f"{name}_json" for name in self.json_fields))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        # The changelist is the one view that loads many rows; the detail, history and delete
        # views load one, and the detail page shows the JSON.
        if self._is_changelist(request):
            return queryset.defer(*self.changelist_deferred_columns())
        return queryset

    def changelist_deferred_columns(self) -> list[str]:
        columns = _json_columns(self.model) | set(self.changelist_defer)
        related = self.list_select_related
        for path in related if isinstance(related, list | tuple) else ():
            model, prefix = self.model, ""
            for part in path.split("__"):
                model = _related_model(model, part)
                prefix += f"{part}__"
                columns |= _json_columns(model, prefix)
        return sorted(columns)

    def _is_changelist(self, request: HttpRequest) -> bool:
        match = request.resolver_match
        changelist = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return match is not None and match.url_name == changelist


def _related_model(model: type[models.Model], name: str) -> type[models.Model]:
    related = model._meta.get_field(name).related_model
    assert isinstance(related, type), f"{model.__name__}.{name} is not a relation"
    return related


def _shown_display(name: str) -> Callable[[admin.ModelAdmin, models.Model], str]:
    @admin.display(description=name.replace("_", " "), ordering=name)
    def display(model_admin: admin.ModelAdmin, obj: models.Model) -> str:
        value = getattr(obj, name)
        return model_admin.get_empty_value_display() if value in (None, "") else shown_html(value)

    display.__name__ = f"{name}_shown"
    return display


class ShownTextAdminMixin(admin.ModelAdmin):
    """Text others wrote (a provider's or a model's IDs, a caller's references) shown as the
    console shows it (:func:`~toolcalls.text.shown_html`): each bidirectional control a marker
    such as ``⟨U+202E⟩``, the whole isolated, so ``call_`` + U+202E + ``evil`` never reads
    as ``call_live`` to an operator.

    Each column named in ``shown_fields`` is replaced, where it stood, in the list and on the
    detail page, by a read-only ``<name>_shown`` field (blank or ``None`` shown as the admin's
    empty value). Search and filters still take the column itself.
    """

    shown_fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.shown_fields:
            setattr(cls, f"{name}_shown", _shown_display(name))

    def get_list_display(self, request: HttpRequest) -> Any:
        return [self._shown(name) for name in super().get_list_display(request)]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        readonly = tuple(super().get_readonly_fields(request, obj))
        return (*readonly, *(f"{name}_shown" for name in self.shown_fields))

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Django adds the read-only fields at the end: each takes its column's place instead.
        added = {f"{name}_shown" for name in self.shown_fields}
        fields = super().get_fields(request, obj)
        return [self._shown(name) for name in fields if name not in added]

    def _shown(self, name: Any) -> Any:
        return f"{name}_shown" if name in self.shown_fields else name


class CappedCountPaginator(Paginator):
    """A paginator that counts at most ``count_cap`` rows.

    Django's paginator runs ``COUNT(*)`` over the whole (filtered) changelist query on every
    page view: a full scan of operations, turns, calls or audit events, which only grow. This
    one counts ``SELECT COUNT(*) FROM (… LIMIT count_cap)``, which reads at most ``count_cap``
    index entries: exact below the cap, ``count_cap`` beyond it (the list then says "10000
    results" and its last page is the cap's; narrow it with a filter or a search, which is how
    support finds a row anyway).
    """

    count_cap = 10_000

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        assert isinstance(rows, QuerySet), "the admin paginates querysets"
        return rows[: self.count_cap].count()


class LargeTableAdminMixin(admin.ModelAdmin):
    """Changelist settings for tables that grow without bound: no query scales with the table.

    No full count (``show_full_result_count``, :class:`CappedCountPaginator`), no facet counts,
    newest first along the primary key, and no sorting by columns without an index (it would
    sort the whole table).
    """

    paginator = CappedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering = ("-pk",)
    sortable_by = ()


class FixedValuesFilter(admin.SimpleListFilter):
    """A filter on a text column whose values come from code.

    Django's default filter for a plain text column runs ``SELECT DISTINCT`` over the table on
    every page view; these list what the registry knows instead.
    """

    def values(self) -> Iterable[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(value, value) for value in self.values()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(**{str(self.parameter_name): value})


class FamilyFilter(FixedValuesFilter):
    title = "API family"
    parameter_name = "family"

    def values(self) -> Iterable[str]:
        return sorted(ADAPTERS)


class ToolFilter(FixedValuesFilter):
    """Registered tools only: a name the model made up is found by search, not listed here."""

    title = "tool"
    parameter_name = "tool_name"

    def values(self) -> Iterable[str]:
        return registry.names()
