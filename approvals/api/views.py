"""Approvals API: list (all of the tenant's, or one operation's), retrieve, decide
(``approvals:decide``). Four-eyes applies to the service identity that created the operation,
exactly as to people."""

from __future__ import annotations

from typing import Any

from django.db.models import F, Q, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.api.filters import (
    approval_tool_names,
    approvals_of_tool_exist,
    tenant_operation_pk,
)
from approvals.api.serializers import ApprovalSerializer, DecisionSerializer
from approvals.models import DECIDABLE, EXPIRED_NOW, SHOWN_STATE, SUPERSEDED, ApprovalRequest
from approvals.services import approval_decide
from approvals.states import ApprovalState
from toolcalls.api import examples
from toolcalls.api.errors import ApiError
from toolcalls.api.idempotency import idempotent
from toolcalls.api.serializers import ErrorSerializer
from toolcalls.api.views import (
    ERRORS,
    KEY_CONFLICT,
    NO_FILTER,
    READ,
    ApiCursor,
    ApiListView,
    ApiView,
    choice,
)
from toolcalls.models import Tenant
from toolcalls.registry import RISKS
from toolcalls.selectors import principal_names

DECIDE = "approvals:decide"


class SoonestExpiry(ApiCursor):
    ordering = ("expires_at", "id")


class InRequestOrder(ApiCursor):
    ordering = ("created_at", "id")


#: What the list's ``state`` filter reads for the states not simply recorded: PENDING is what
#: can still be decided; EXPIRED includes the PENDING ones past their expiry the sweep has not
#: recorded yet, shown EXPIRED (:data:`~approvals.models.SHOWN_STATE`). SUPERSEDED, like the
#: others, is the recorded state.
_SHOWN: dict[str, Q] = {
    ApprovalState.PENDING: DECIDABLE & ~EXPIRED_NOW,
    ApprovalState.EXPIRED: Q(state=ApprovalState.EXPIRED) | EXPIRED_NOW,
}


#: What the list's ``tool`` filter takes (approvals.api.filters).
TOOL_FILTER = (
    "Only this tool's: a tool of the tenant's catalogue, deployed or remote, enabled or not, or "
    "one its approvals name; any other name is 400 invalid_request."
)
#: What the list's ``operation`` filter takes.
OPERATION_FILTER = (
    "Only this operation's (op_…): one of the tenant's operations; any other ID is 400 "
    "invalid_request."
)


def _refuse_unknown_tool(tenant: Tenant, name: str) -> None:
    """400 ``invalid_request`` naming ``tool`` when ``name`` is neither a tool of ``tenant``'s
    catalogue nor one its approvals name (:mod:`approvals.api.filters`)."""
    known = approval_tool_names(tenant=tenant)
    if name in known or approvals_of_tool_exist(tenant=tenant, name=name):
        return
    message = (
        f"tool must be one of: {', '.join(known)}; or a tool this tenant's approvals name "
        "(a tool no longer deployed)."
    )
    raise ApiError(400, "invalid_request", message, {"tool": [message]})


def _operation_pk(tenant: Tenant, public_id: str) -> int:
    """The primary key of ``tenant``'s operation ``public_id``; 400 ``invalid_request`` naming
    ``operation`` when it has none of that ID (another tenant's included: never told apart)."""
    pk = tenant_operation_pk(tenant=tenant, public_id=public_id)
    if pk is None:
        message = "operation must be the ID of one of this tenant's operations (op_…)."
        raise ApiError(400, "invalid_request", message, {"operation": [message]})
    return pk


class _Approvals(ApiView):
    def approvals(self) -> QuerySet[ApprovalRequest]:
        """The tenant's approvals with what :class:`ApprovalSerializer` shows of their
        operation, call and people read as plain values in the same statement."""
        rows = ApprovalRequest.objects.filter(tenant=self.key().tenant).annotate(
            operation_public_id=F("operation__public_id"),
            state_shown=SHOWN_STATE,
            is_superseded=SUPERSEDED,
            call_public_id=F("call__public_id"),
            provider_call_id=F("call__provider_call_id"),
        )
        return principal_names(rows, requested_by_name="requested_by", decided_by_name="decided_by")


@extend_schema(tags=["approvals"])
class ApprovalsView(_Approvals, ApiListView):
    """Approvals of the tenant, pending by default, soonest expiry first."""

    scopes = {"GET": (READ,)}
    serializer_class = ApprovalSerializer
    pagination_class = SoonestExpiry
    query_parameters = ("state", "tool", "risk", "operation")

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        params = self.request.query_params
        state = choice(params, "state", ApprovalState.values) or ApprovalState.PENDING
        rows = self.approvals().filter(_SHOWN.get(state) or Q(state=state))
        tenant = self.key().tenant
        if tool := params.get("tool"):
            _refuse_unknown_tool(tenant, tool)
            rows = rows.filter(tool_name=tool)
        if risk := choice(params, "risk", RISKS):
            rows = rows.filter(risk=risk)
        if operation := params.get("operation"):
            rows = rows.filter(operation_id=_operation_pk(tenant, operation))
        return rows

    @extend_schema(
        summary="List approvals",
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=[*ApprovalState.values, ""],
                default="PENDING",
                description="Absent or empty: PENDING (what can still be decided).",
            ),
            OpenApiParameter("tool", str, description=f"{TOOL_FILTER} {NO_FILTER}"),
            OpenApiParameter("risk", str, enum=[*RISKS, ""], description=NO_FILTER),
            OpenApiParameter("operation", str, description=f"{OPERATION_FILTER} {NO_FILTER}"),
        ],
        responses={
            200: OpenApiResponse(
                ApprovalSerializer(many=True),
                "A page of approvals, soonest expiry first.",
                [examples.APPROVALS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


@extend_schema(
    tags=["approvals"],
    summary="List an operation's approvals",
    responses={
        200: OpenApiResponse(
            ApprovalSerializer(many=True),
            "A page of its approvals, in every state, oldest first.",
            [examples.APPROVALS],
        ),
        **ERRORS,
    },
)
class OperationApprovalsView(_Approvals, ApiListView):
    """Every approval one operation asked for, in every state, oldest first (404 for an
    operation that is not the tenant's)."""

    scopes = {"GET": (READ,)}
    serializer_class = ApprovalSerializer
    pagination_class = InRequestOrder

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        operation = self.operation(self.kwargs["public_id"])
        return self.approvals().filter(operation=operation)


@extend_schema(tags=["approvals"])
class ApprovalDetailView(_Approvals):
    """One approval: the call's canonical arguments and digest, why it needs approval, and the
    decision once made."""

    scopes = {"GET": (READ,)}

    @extend_schema(
        summary="Retrieve an approval",
        responses={
            200: OpenApiResponse(ApprovalSerializer, "The approval.", [examples.APPROVAL]),
            **ERRORS,
        },
    )
    def get(self, request: Request, public_id: str) -> Response:
        approval = get_object_or_404(self.approvals(), public_id=public_id)
        return Response(ApprovalSerializer(approval).data)


@extend_schema(tags=["approvals"])
class ApprovalDecideView(_Approvals):
    """Approve or deny a pending approval under the console's rules (four-eyes, not expired,
    not superseded); an approval may replace the arguments, validated again and audited."""

    scopes = {"POST": (DECIDE,)}

    @extend_schema(
        summary="Approve (optionally with edited arguments) or deny",
        request=DecisionSerializer,
        responses={
            200: OpenApiResponse(ApprovalSerializer, "Decided.", [examples.APPROVAL_DECIDED]),
            409: OpenApiResponse(
                ErrorSerializer,
                "`already_decided`: a person approved or denied it. `superseded`: its operation "
                "ended while it was pending. `precondition_failed`: approving, the tool's "
                f"precondition refuses the call now. {KEY_CONFLICT}",
            ),
            410: OpenApiResponse(
                ErrorSerializer,
                "`expired`: the approval expired (its `expires_at` or its operation's deadline "
                "passed, by database time) before this decision, whether the expiry sweep has "
                "recorded it yet or not.",
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.DECIDE_APPROVE, examples.DECIDE_EDIT, examples.DECIDE_DENY],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        approval = get_object_or_404(self.approvals(), public_id=public_id)
        data = self.validated(DecisionSerializer)
        approval_decide(
            approval_pk=approval.pk,
            actor=self.key().service_user,
            audit_as=self.actor(),
            approve=data["decision"] == "approve",
            reason=data["reason"],
            arguments=data.get("arguments"),
        )
        return Response(ApprovalSerializer(self.approvals().get(pk=approval.pk)).data)
