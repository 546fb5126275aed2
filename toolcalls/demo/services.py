"""Seed the demo: one tenant with the refund tools in its catalogue, three users, a few orders.
Safe to run again (get-or-create)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from toolcalls.actors import Actor
from toolcalls.demo.models import Order
from toolcalls.models import Tenant
from toolcalls.services.catalogue import tenant_tools_enable

TENANT_SLUG = "acme"
CUSTOMER_REF = "cus_1001"
#: The refund shop's tools, enabled in the demo tenant's catalogue.
DEMO_TOOLS = ("get_order", "create_refund_draft", "submit_refund")

#: username → (groups, dev password). Dev-only credentials for the embedded demo.
USERS = {
    "operator": (["operators"], "operator-demo-pass"),
    "support": (["support"], "support-demo-pass"),
    # The requester is an operator too, so the console can show the four-eyes rule refusing
    # them their own request.
    "requester": (["operators", "requesters"], "requester-demo-pass"),
}

ORDERS = [
    ("ORD-1001", CUSTOMER_REF, "Noise-cancelling headphones", 12999),
    ("ORD-1002", CUSTOMER_REF, "Electric kettle", 3499),
    ("ORD-1003", CUSTOMER_REF, "Trail running shoes", 8950),
    ("ORD-2001", "cus_2002", "Espresso grinder", 21900),
]

_GROUP_PERMISSIONS = {
    "operators": [
        "approvals.decide_approvalrequest",
        "approvals.view_approvalrequest",
        "toolcalls.view_operation",
        "toolcalls.resolve_operation",
    ],
    "support": ["approvals.view_approvalrequest", "toolcalls.view_operation"],
    # Who may have the refund tools (write, irreversible) run for their requests.
    "requesters": ["toolcalls.use_write_tools", "toolcalls.use_irreversible_tools"],
}


@dataclass(frozen=True)
class DemoSeed:
    tenant: Tenant
    passwords: dict[str, str]


def demo_seed() -> DemoSeed:
    """Create (or find) the demo tenant (with :data:`DEMO_TOOLS` enabled), groups, users and
    orders; returns the dev passwords of users created by this call or earlier seeds."""
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(
            slug=TENANT_SLUG, defaults={"name": "Acme Outfitters"}
        )
        groups = {name: _group(name, perms) for name, perms in _GROUP_PERMISSIONS.items()}
        user_model = get_user_model()
        for username, (group_names, password) in USERS.items():
            user, created = user_model.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            user.groups.add(*(groups[name] for name in group_names))
            tenant.members.add(user)
        tenant_tools_enable(tenant=tenant, tool_names=DEMO_TOOLS, actor=Actor.system("demo-seed"))
        for order_id, customer, description, total in ORDERS:
            Order.objects.get_or_create(
                tenant_ref=TENANT_SLUG,
                order_id=order_id,
                defaults={
                    "customer_ref": customer,
                    "description": description,
                    "total_cents": total,
                },
            )
    return DemoSeed(tenant=tenant, passwords={name: pw for name, (_, pw) in USERS.items()})


def _group(name: str, permissions: list[str]) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    for dotted in permissions:
        app_label, codename = dotted.split(".")
        group.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return group
