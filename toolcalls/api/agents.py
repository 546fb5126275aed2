"""Agent profiles API (``/api/v1/agents``): list, create and read a tenant's agents and their
immutable revisions. Thin views over :mod:`toolcalls.services.agents`; another tenant's agent
is 404, never 403."""

from __future__ import annotations

from typing import Any

from django.db.models import F, Prefetch, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from toolcalls.api import examples
from toolcalls.api.idempotency import idempotent
from toolcalls.api.serializers import (
    AgentCreateSerializer,
    AgentDefinitionSerializer,
    AgentRevisionSerializer,
    AgentSerializer,
)
from toolcalls.api.views import ERRORS, ApiListView, ApiView, InOrder, NewestFirst
from toolcalls.models import AgentProfile, AgentRevision
from toolcalls.services.agents import REVISION, AgentDefinition, agent_create, agent_revise

AGENTS_READ, AGENTS_WRITE = "agents:read", "agents:write"


class ByNumber(InOrder):
    ordering = ("number",)


class AgentView(ApiView):
    """Reads of the key's tenant's profiles."""

    def profiles(self) -> QuerySet[AgentProfile]:
        """The tenant's profiles, each with its latest revision (``latest``: a one-item list)."""
        latest = AgentRevision.objects.filter(number=F("profile__latest_revision"))
        return AgentProfile.objects.filter(tenant=self.key().tenant).prefetch_related(
            Prefetch("revisions", queryset=latest.select_related("profile"), to_attr="latest")
        )

    def profile(self, name: str) -> AgentProfile:
        return get_object_or_404(self.profiles(), name=name)


def _definition(data: dict[str, Any]) -> AgentDefinition:
    """The service's definition from a validated body (``tools`` is ``tool_names`` there)."""
    names = ("family", "model", "instructions", "settings", "budgets", "approval_overrides")
    definition = AgentDefinition(**{name: data[name] for name in names if name in data})  # type: ignore[typeddict-item]
    if "tools" in data:
        definition["tool_names"] = data["tools"]
    return definition


@extend_schema(tags=["agents"])
class AgentsView(AgentView, ApiListView):
    """List the tenant's agent profiles (newest first) or create one (its revision 1)."""

    scopes = {"GET": (AGENTS_READ,), "POST": (AGENTS_WRITE,)}
    serializer_class = AgentSerializer
    pagination_class = NewestFirst

    def get_queryset(self) -> QuerySet[AgentProfile]:
        return self.profiles()

    @extend_schema(
        summary="List agent profiles",
        responses={
            200: OpenApiResponse(
                AgentSerializer(many=True),
                "The tenant's profiles, newest first, each with its latest revision.",
                [examples.AGENTS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Create an agent profile",
        request=AgentCreateSerializer,
        responses={
            201: OpenApiResponse(AgentSerializer, "Created, at revision 1.", [examples.AGENT]),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.AGENT_CREATE],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        data = self.validated(AgentCreateSerializer)
        revision = agent_create(
            tenant=self.key().tenant,
            name=data["name"],
            definition=_definition(data),
            actor=self.actor(),
            note=data.get("note", ""),
        )
        body = AgentSerializer(self.profile(revision.profile.name)).data
        return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(tags=["agents"])
class AgentDetailView(AgentView):
    """One agent profile with its latest revision."""

    scopes = {"GET": (AGENTS_READ,)}

    @extend_schema(
        summary="Retrieve an agent profile",
        responses={
            200: OpenApiResponse(
                AgentSerializer, "The profile with its latest revision.", [examples.AGENT]
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(AgentSerializer(self.profile(name)).data)


@extend_schema(tags=["agents"])
class AgentRevisionsView(AgentView, ApiListView):
    """A profile's revisions in order, or a new one: the latest with the body's fields changed
    (a field left out keeps its value)."""

    scopes = {"GET": (AGENTS_READ,), "POST": (AGENTS_WRITE,)}
    serializer_class = AgentRevisionSerializer
    pagination_class = ByNumber

    def get_queryset(self) -> QuerySet[AgentRevision]:
        return self.profile(self.kwargs["name"]).revisions.select_related("profile")

    @extend_schema(
        summary="List an agent profile's revisions",
        responses={
            200: OpenApiResponse(
                AgentRevisionSerializer(many=True),
                "The profile's revisions, oldest first.",
                [examples.AGENT_REVISIONS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Change an agent profile: a new revision",
        request=AgentDefinitionSerializer,
        responses={
            201: OpenApiResponse(
                AgentRevisionSerializer,
                "The new revision, now the latest.",
                [examples.AGENT_REVISED],
            ),
            200: OpenApiResponse(
                AgentRevisionSerializer,
                "Nothing changed: the latest revision, which stays the latest (no revision is "
                "made, and the note is not kept).",
                [examples.AGENT_KEPT],
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.AGENT_REVISE],
    )
    @idempotent
    def post(self, request: Request, name: str) -> Response:
        profile = self.profile(name)
        data = self.validated(AgentDefinitionSerializer)
        shown = profile.latest_revision
        revision = agent_revise(
            profile=profile,
            changes=_definition(data),
            actor=self.actor(),
            note=data.get("note", ""),
        )
        body = AgentRevisionSerializer(revision).data
        kept = revision.number == shown  # the service made no revision: nothing changed
        return Response(body, status=status.HTTP_200_OK if kept else status.HTTP_201_CREATED)


@extend_schema(tags=["agents"])
class AgentRevisionView(AgentView):
    """One revision of an agent profile."""

    scopes = {"GET": (AGENTS_READ,)}

    @extend_schema(
        summary="Retrieve an agent profile revision",
        parameters=[
            OpenApiParameter(
                "number",
                str,
                OpenApiParameter.PATH,
                pattern=f"^{REVISION.pattern}$",
                description="The revision's number, as `name@number` writes it: no leading zero.",
            )
        ],
        responses={
            200: OpenApiResponse(
                AgentRevisionSerializer, "The revision.", [examples.AGENT_REVISION]
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str, number: str) -> Response:
        revisions = self.profile(name).revisions.select_related("profile")
        if not REVISION.fullmatch(number):
            raise Http404  # no revision's number as written (``01``), nor one the column holds
        return Response(AgentRevisionSerializer(get_object_or_404(revisions, number=number)).data)
