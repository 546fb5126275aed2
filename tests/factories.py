"""factory-boy factories for engine rows that tests need in a given state."""

from __future__ import annotations

import datetime

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User

from approvals.models import ApprovalRequest
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.demo.models import Order
from toolcalls.models import ModelTurn, Operation, Tenant, ToolCall
from toolcalls.services.catalogue import tenant_tools_enable


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


def catalogue_enable_all(tenant: Tenant) -> None:
    """Put every tool registered in this process in ``tenant``'s catalogue."""
    tenant_tools_enable(tenant=tenant, tool_names=registry.names(), actor=Actor.system("tests"))


class TenantFactory(factory.django.DjangoModelFactory[Tenant]):
    """A tenant whose catalogue holds every registered tool (``tools=False``: an empty one)."""

    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)
        skip_postgeneration_save = True

    slug = factory.Sequence(lambda n: f"tenant{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    tools = factory.PostGeneration(
        lambda tenant, create, extracted, **_: (
            catalogue_enable_all(tenant) if create and extracted is not False else None
        )
    )


def _entitle(operation: Operation, *, create: bool, extracted: bool | None) -> None:
    """The requester is a member of the tenant and may have every tool run (create with
    ``entitled=False`` for a requester with neither)."""
    if create and extracted is not False:
        operation.tenant.members.add(operation.requested_by)
        operation.requested_by.user_permissions.add(
            *Permission.objects.filter(
                content_type__app_label="toolcalls",
                codename__in=["use_write_tools", "use_irreversible_tools"],
            )
        )


class OperationFactory(factory.django.DjangoModelFactory[Operation]):
    class Meta:
        model = Operation
        skip_postgeneration_save = True

    tenant = factory.SubFactory(TenantFactory)
    requested_by = factory.SubFactory(UserFactory)
    subject_ref = "cus_1001"
    family = "openai_responses"
    model = "gpt-test"
    input_text = "Refund my order."
    tool_names = factory.LazyFunction(lambda: ["get_order", "create_refund_draft", "submit_refund"])
    entitled = factory.PostGeneration(
        lambda operation, create, extracted, **_: _entitle(
            operation, create=create, extracted=extracted
        )
    )


class ModelTurnFactory(factory.django.DjangoModelFactory[ModelTurn]):
    class Meta:
        model = ModelTurn

    operation = factory.SubFactory(OperationFactory)
    index = factory.Sequence(int)
    response_id = factory.Sequence(lambda n: f"resp_{n}")
    outcome = "TOOL_PROPOSALS"
    request_frame = factory.LazyFunction(dict)
    provider = "openai"
    family = "openai_responses"
    model = "gpt-test"
    adapter_revision = "test"
    transport = "replay"


class ToolCallFactory(factory.django.DjangoModelFactory[ToolCall]):
    class Meta:
        model = ToolCall

    turn = factory.SubFactory(ModelTurnFactory)
    operation = factory.SelfAttribute("turn.operation")
    position = 0
    response_id = factory.SelfAttribute("turn.response_id")
    provider_call_id = factory.Sequence(lambda n: f"call_{n}")
    tool_name = "get_order"
    arguments = factory.LazyFunction(lambda: {"order_id": "ORD-1001"})


class ApprovalRequestFactory(factory.django.DjangoModelFactory[ApprovalRequest]):
    class Meta:
        model = ApprovalRequest

    call = factory.SubFactory(ToolCallFactory, tool_name="submit_refund")
    operation = factory.SelfAttribute("call.operation")
    tenant = factory.SelfAttribute("call.operation.tenant")
    tool_name = "submit_refund"
    risk = "irreversible"
    canonical_arguments = "{}"
    arguments_sha256 = "0" * 64
    schema_version = "submit-refund-v1"
    policy_revision = "refund-threshold-v1"
    reason = "test"
    requested_by = factory.SelfAttribute("call.operation.requested_by")
    created_at = factory.LazyFunction(lambda: datetime.datetime.now(datetime.UTC))
    expires_at = factory.LazyAttribute(lambda o: o.created_at + datetime.timedelta(hours=1))


class OrderFactory(factory.django.DjangoModelFactory[Order]):
    """A demo shop order; the refund tools authorize only the operation's customer's orders."""

    class Meta:
        model = Order

    tenant_ref = "acme"
    order_id = "ORD-1001"
    customer_ref = "cus_1001"
    description = "Noise-cancelling headphones"
    total_cents = 12999


def pending_approval(tenant: Tenant, **fields: object) -> ApprovalRequest:
    """A pending approval of ``tenant`` on a WAITING_APPROVAL operation of its own; ``fields``
    go to :class:`ApprovalRequestFactory`."""
    operation = OperationFactory.create(tenant=tenant, state="WAITING_APPROVAL")
    return ApprovalRequestFactory.create(call__turn__operation=operation, **fields)


def small_and_large(tenant: Tenant) -> tuple[ApprovalRequest, ApprovalRequest]:
    """Two pending refunds of ``tenant`` that sort apart on every key of the queue: a 500-cent
    write one expiring in 5 minutes, and a 90000-cent irreversible one asked 2 hours ago and
    expiring in 30 minutes."""
    now = datetime.datetime.now(datetime.UTC)
    small = pending_approval(
        tenant, amount_cents=500, risk="write", expires_at=now + datetime.timedelta(minutes=5)
    )
    large = pending_approval(
        tenant,
        amount_cents=90000,
        created_at=now - datetime.timedelta(hours=2),
        expires_at=now + datetime.timedelta(minutes=30),
    )
    return small, large
