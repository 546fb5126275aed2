"""Seed the demo: one tenant with the refund tools in its catalogue, three users, a few orders.
Safe to run again (get-or-create)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from toolcalls.actors import Actor
from toolcalls.demo.models import Order
from toolcalls.models import Tenant
from toolcalls.services.catalogue import tenant_tools_enable
from toolcalls.services.tenants import role_groups

TENANT_SLUG = "acme"
CUSTOMER_REF = "cus_1001"
#: The refund shop's tools, enabled in the demo tenant's catalogue.
DEMO_TOOLS = ("get_order", "create_refund_draft", "submit_refund")

#: username → (roles, dev password). Dev-only credentials for the embedded demo.
USERS = {
    "operator": (["operator"], "operator-demo-pass"),
    "support": (["support"], "support-demo-pass"),
    # The requester is an operator too, so the console can show the four-eyes rule refusing
    # them their own request.
    "requester": (["operator", "requester"], "requester-demo-pass"),
}

ORDERS = [
    ("ORD-1001", CUSTOMER_REF, "Noise-cancelling headphones", 12999),
    ("ORD-1002", CUSTOMER_REF, "Electric kettle", 3499),
    ("ORD-1003", CUSTOMER_REF, "Trail running shoes", 8950),
    ("ORD-2001", "cus_2002", "Espresso grinder", 21900),
]


@dataclass(frozen=True)
class DemoSeed:
    tenant: Tenant
    passwords: dict[str, str]


def demo_seed() -> DemoSeed:
    """Create (or find) the demo tenant (with :data:`DEMO_TOOLS` enabled), users (with the
    groups of their roles, :data:`~toolcalls.services.tenants.ROLES`) and orders; returns the
    dev passwords of users created by this call or earlier seeds. Unlike
    :func:`~toolcalls.services.tenants.tenant_member_add`, a seed only adds: roles given to the
    demo's users since stay."""
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(
            slug=TENANT_SLUG, defaults={"name": "Acme Outfitters"}
        )
        user_model = get_user_model()
        for username, (roles, password) in USERS.items():
            user, created = user_model.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            user.groups.add(*role_groups(names=roles))
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
