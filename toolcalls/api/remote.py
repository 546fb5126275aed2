"""Remote tools API (``/api/v1/remote-servers``): register a tenant's MCP servers and HTTP tools,
list what they serve for review, enable and disable tools. Thin views over
:mod:`toolcalls.remote.services`; every endpoint needs the ``tools:manage`` scope and sees only
the key's tenant. Secrets (header values, the signing secret) are accepted, never returned.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from toolcalls.api import examples
from toolcalls.api.idempotency import idempotent
from toolcalls.api.serializers import (
    ErrorSerializer,
    NameList,
    NoFields,
    NullForBlank,
    OptionalText,
    OptionalUrl,
    StrictSerializer,
)
from toolcalls.api.views import ERRORS, TOOLS_MANAGE, ApiView
from toolcalls.registry import RISKS
from toolcalls.remote import rules
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.remote.services import (
    MAX_TIMEOUT_MS,
    HttpToolForm,
    Review,
    ServerChange,
    ServerForm,
    remote_http_tool_register,
    remote_server_change,
    remote_server_discover,
    remote_server_register,
    remote_tool_disable,
    remote_tool_enable,
)


class RemoteToolSerializer(NullForBlank):
    """A tool as served and as reviewed; ``changed``: the server serves another revision than
    the one enabled; ``problem``: why it cannot be enabled (``null`` when it can). Text that
    is absent (no description, no pinned revision or review yet, no URLs) is ``null``."""

    changed = serializers.BooleanField(read_only=True)

    class Meta:
        model = RemoteTool
        fields = (
            "name", "remote_name", "description", "input_schema", "annotations",
            "served_sha256", "pinned_sha256", "changed", "problem", "enabled", "risk",
            "timeout_ms", "approval", "approval_condition", "key_context", "key_arguments",
            "url", "reconcile_url", "updated_at",
        )  # fmt: skip


class RemoteServerSerializer(NullForBlank):
    """A server: header names only (their values are secrets), and its tools; ``url`` is
    ``null`` for a server with none (HTTP tools, an MCP command)."""

    header_names = serializers.SerializerMethodField()
    tools = RemoteToolSerializer(many=True, read_only=True)

    class Meta:
        model = RemoteServer
        fields = ("name", "kind", "url", "command", "header_names", "created_at", "tools")

    def get_header_names(self, server: RemoteServer) -> list[str]:
        return sorted(server.headers)


#: Registering a server or listing its tools asks the MCP server itself.
UNREACHABLE = {422: ErrorSerializer}


@extend_schema_field(
    {"type": "string", "pattern": f"^{rules.SERVER_NAME.pattern}$", "maxLength": 30}
)
class ServerNameField(serializers.CharField):
    """A server's name; the service checks its form (``invalid_server``), the document says it."""


class ServerCreateSerializer(StrictSerializer):
    name = ServerNameField(max_length=30)
    kind = serializers.ChoiceField(choices=RemoteServer.Kind.choices)
    url = OptionalUrl(
        max_length=500,
        help_text="An MCP server's streamable HTTP URL (or give `command`). Leave it out for "
        '`kind: "http"`: HTTP tools name their own URLs (`invalid_server` naming `url`).',
    )
    command = serializers.ListField(
        child=serializers.CharField(max_length=500),
        required=False,
        default=list,
        max_length=50,
        help_text="An MCP server's stdio command, where allowed (or give `url`); not for HTTP.",
    )
    headers = serializers.DictField(  # checked, not trimmed, by the service (invalid_server)
        child=serializers.CharField(max_length=2000, trim_whitespace=False),
        required=False,
        default=dict,
    )
    signing_secret = OptionalText(max_length=100)


class ServerChangeSerializer(StrictSerializer):
    """What changes on a server; a field left out stays as it is."""

    url = serializers.URLField(
        max_length=500,
        required=False,
        help_text="An MCP server's new streamable HTTP URL: it is listed there first "
        "(`server_unreachable` when it cannot be; nothing changes then).",
    )
    headers = serializers.DictField(  # checked, not trimmed, by the service (invalid_server)
        child=serializers.CharField(max_length=2000, trim_whitespace=False),
        required=False,
        help_text="Replaces all of the server's headers (`{}` removes them).",
    )
    signing_secret = serializers.CharField(
        max_length=100,
        required=False,
        trim_whitespace=False,
        help_text="An HTTP server's new signing secret (it cannot be blank).",
    )


class HttpToolCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=128)
    description = OptionalText(max_length=10_000, allow_blank=True)
    input_schema = serializers.DictField()
    url = serializers.URLField(max_length=500)
    reconcile_url = OptionalUrl(max_length=500)


class ReviewSerializer(StrictSerializer):
    risk = serializers.ChoiceField(choices=list(RISKS))
    timeout_ms = serializers.IntegerField(min_value=1, max_value=MAX_TIMEOUT_MS)
    approval = serializers.ChoiceField(choices=RemoteTool.Approval.choices)
    approval_condition = OptionalText(max_length=200)
    key_context = NameList(
        child=serializers.ChoiceField(choices=list(rules.KEY_CONTEXT_FIELDS)),
        required=False,
        default=list,
    )
    key_arguments = NameList(
        child=serializers.CharField(max_length=200), required=False, default=list, max_length=50
    )


class RemoteApiView(ApiView):
    scopes = {"GET": (TOOLS_MANAGE,), "POST": (TOOLS_MANAGE,), "PATCH": (TOOLS_MANAGE,)}

    def servers(self) -> Any:
        return RemoteServer.objects.filter(tenant=self.key().tenant).prefetch_related("tools")

    def server(self, name: str) -> RemoteServer:
        return get_object_or_404(self.servers(), name=name)

    def tool(self, name: str, remote_name: str) -> RemoteTool:
        return get_object_or_404(self.server(name).tools, remote_name=remote_name)

    def server_response(self, name: str, code: int = status.HTTP_200_OK) -> Response:
        return Response(RemoteServerSerializer(self.server(name)).data, status=code)


@extend_schema(tags=["remote tools"])
class RemoteServersView(RemoteApiView):
    """The tenant's remote servers, or register one (an MCP server's tools are listed for
    review; none is enabled)."""

    @extend_schema(
        summary="List remote servers",
        operation_id="remote_servers_list",
        responses={
            200: OpenApiResponse(
                RemoteServerSerializer(many=True),
                "The tenant's servers by name, each with its tools.",
                [examples.REMOTE_SERVERS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        servers = self.servers().order_by("name")
        return Response(RemoteServerSerializer(servers, many=True).data)

    @extend_schema(
        summary="Register a remote server",
        request=ServerCreateSerializer,
        responses={
            201: OpenApiResponse(
                RemoteServerSerializer,
                "Registered; an MCP server's tools await review.",
                [examples.REMOTE_SERVER],
            ),
            **ERRORS,
            **UNREACHABLE,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.REMOTE_SERVER_CREATE],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        form = ServerForm(**self.validated(ServerCreateSerializer))
        server = remote_server_register(tenant=self.key().tenant, form=form, actor=self.actor())
        return self.server_response(server.name, status.HTTP_201_CREATED)


@extend_schema(tags=["remote tools"])
class RemoteServerView(RemoteApiView):
    """One server and its tools."""

    @extend_schema(
        summary="A remote server",
        responses={
            200: OpenApiResponse(
                RemoteServerSerializer, "The server and its tools.", [examples.REMOTE_SERVER]
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Response:
        return self.server_response(name)

    @extend_schema(
        summary="Change a remote server's URL, headers or signing secret",
        request=ServerChangeSerializer,
        responses={
            200: OpenApiResponse(
                RemoteServerSerializer,
                "Changed (the next request uses it); a moved MCP server's tools as served there.",
                [examples.REMOTE_SERVER],
            ),
            **ERRORS,
            **UNREACHABLE,
        },
        examples=[examples.REMOTE_SERVER_CHANGE],
    )
    def patch(self, request: Request, name: str) -> Response:
        change = ServerChange(**self.validated(ServerChangeSerializer))
        remote_server_change(server_pk=self.server(name).pk, change=change, actor=self.actor())
        return self.server_response(name)


@extend_schema(tags=["remote tools"])
class RemoteServerDiscoverView(RemoteApiView):
    """List an MCP server's tools again; a tool served in a new revision is disabled until it
    is enabled again."""

    @extend_schema(
        summary="List an MCP server's tools again",
        request=NoFields,
        responses={
            200: OpenApiResponse(
                RemoteServerSerializer,
                "The server and its tools as served now.",
                [examples.REMOTE_SERVER],
            ),
            **ERRORS,
            **UNREACHABLE,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.NO_FIELDS],
    )
    @idempotent
    def post(self, request: Request, name: str) -> Response:
        self.validated(NoFields)
        remote_server_discover(server_pk=self.server(name).pk, actor=self.actor())
        return self.server_response(name)


@extend_schema(tags=["remote tools"])
class RemoteHttpToolsView(RemoteApiView):
    """Register (or change) an HTTP tool of an HTTP server; it awaits review."""

    @extend_schema(
        summary="Register an HTTP tool",
        request=HttpToolCreateSerializer,
        responses={
            200: OpenApiResponse(
                RemoteToolSerializer,
                "Registered before: changed (a new revision awaits review) or as it was.",
                [examples.REMOTE_TOOL],
            ),
            201: OpenApiResponse(
                RemoteToolSerializer, "Registered; it awaits review.", [examples.REMOTE_TOOL]
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.REMOTE_HTTP_TOOL_CREATE],
    )
    @idempotent
    def post(self, request: Request, name: str) -> Response:
        form = HttpToolForm(**self.validated(HttpToolCreateSerializer))
        server = self.server(name)
        known = server.tools.filter(remote_name=form.name).exists()
        tool = remote_http_tool_register(server_pk=server.pk, form=form, actor=self.actor())
        code = status.HTTP_200_OK if known else status.HTTP_201_CREATED
        return Response(RemoteToolSerializer(tool).data, status=code)


@extend_schema(tags=["remote tools"])
class RemoteToolEnableView(RemoteApiView):
    """Enable the tool's served revision (pinning it) with the review's settings."""

    @extend_schema(
        summary="Enable a remote tool",
        request=ReviewSerializer,
        responses={
            200: OpenApiResponse(
                RemoteToolSerializer,
                "Enabled, its served revision pinned.",
                [examples.REMOTE_TOOL_ENABLED],
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.REVIEW],
    )
    @idempotent
    def post(self, request: Request, name: str, remote_name: str) -> Response:
        review = Review(**self.validated(ReviewSerializer))
        tool = self.tool(name, remote_name)
        tool = remote_tool_enable(tool_pk=tool.pk, review=review, actor=self.actor())
        return Response(RemoteToolSerializer(tool).data)


@extend_schema(tags=["remote tools"])
class RemoteToolDisableView(RemoteApiView):
    """Take the tool out of the tenant's catalogue."""

    @extend_schema(
        summary="Disable a remote tool",
        request=NoFields,
        responses={
            200: OpenApiResponse(
                RemoteToolSerializer, "Out of the catalogue.", [examples.REMOTE_TOOL_DISABLED]
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.NO_FIELDS],
    )
    @idempotent
    def post(self, request: Request, name: str, remote_name: str) -> Response:
        self.validated(NoFields)
        tool = remote_tool_disable(tool_pk=self.tool(name, remote_name).pk, actor=self.actor())
        return Response(RemoteToolSerializer(tool).data)
