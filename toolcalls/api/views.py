"""Operations API (``/api/v1/``): thin views that check scopes, load the caller's tenant's rows
and call services. Errors take the one shape of :mod:`toolcalls.api.errors`."""

from __future__ import annotations

import re
from base64 import b64decode
from collections.abc import Collection
from datetime import UTC, datetime
from math import ceil
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.signing import BadSignature, Signer
from django.db import connection
from django.db.models import Prefetch, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.http import QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, pagination, serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from providers.families import ADAPTERS
from toolcalls import catalogue
from toolcalls.actors import Actor
from toolcalls.api import examples
from toolcalls.api.auth import ApiKeyAuthentication, HasScopes
from toolcalls.api.errors import BODY, ApiError
from toolcalls.api.idempotency import idempotent
from toolcalls.api.models import ApiKey
from toolcalls.api.serializers import (
    CallSerializer,
    ErrorSerializer,
    EventSerializer,
    ExtendSerializer,
    FollowUpSerializer,
    ForkSerializer,
    HealthSerializer,
    OperationCreateSerializer,
    OperationSerializer,
    ReadinessSerializer,
    ReasonSerializer,
    ResolveSerializer,
    ToolSerializer,
    ToolSettingsSerializer,
    TurnSerializer,
)
from toolcalls.api.streams import KEEPALIVE_S, operation_stream, stream_slot_take
from toolcalls.models import (
    AgentRevision,
    AuditEvent,
    ModelTurn,
    Operation,
    ReplayScript,
    ToolCall,
)
from toolcalls.services.agents import agent_revision_get
from toolcalls.services.catalogue import CatalogueError, tenant_tool_set
from toolcalls.services.escalations import operation_extend, operation_stop
from toolcalls.services.forks import operation_fork
from toolcalls.services.operations import (
    operation_cancel,
    operation_follow_up,
    operation_start,
)
from toolcalls.services.reconcile import call_resolve
from toolcalls.services.transitions import operation_refuse_ended
from toolcalls.states import AuditKind, OperationState
from toolcalls.storage import MAX_JSON_DEPTH, TooDeep, json_strings, unstorable

READ, WRITE, AUDIT = "operations:read", "operations:write", "audit:read"
TOOLS_MANAGE = "tools:manage"
#: What an endpoint declares beside its success: every status the conventions share (401, 403,
#: 404, 405, 406, 409, 413, 415, 429, 500) is added by ``toolcalls.api.schema.complete_responses``.
ERRORS = {400: ErrorSerializer}
#: What a 409 of cancelling, extending or stopping an operation says (docs/api.md).
_ENDED = "`already_ended`: the operation has ended (`ended: true`); the message names its state."
_NOT_ESCALATED = "`not_escalated`: it has not ended but is not ESCALATED."
#: The 409 every POST may answer beside the refusals of its own (its ``Idempotency-Key``).
KEY_CONFLICT = (
    "Or the `Idempotency-Key` was used for another request or is still in flight (then with "
    "`Retry-After`)."
)


class ApiKeyThrottle(SimpleRateThrottle):
    """Requests per API key (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["api_key"]``), in a
    sliding window. Leaves the key's standing on the request (``request.rate_limit``: the
    ``RateLimit-*`` headers' values) for :meth:`ApiView.finalize_response`."""

    scope = "api_key"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        key = request.auth
        return f"throttle:api_key:{key.pk}" if isinstance(key, ApiKey) else None

    def allow_request(self, request: Request, view: Any) -> bool:
        allowed = super().allow_request(request, view)
        if getattr(self, "key", None) is not None:  # unset without a rate, None without a key
            # The window frees its first slot when its oldest request leaves it.
            reset = self.duration - (self.now - self.history[-1]) if self.history else 0
            request.rate_limit = {
                "RateLimit-Limit": str(self.num_requests),
                "RateLimit-Remaining": str(max(0, self.num_requests - len(self.history))),
                "RateLimit-Reset": str(max(0, ceil(reset))),
            }
        return allowed


#: How a filter's empty value reads (``?state=``): as if it was not sent.
NO_FILTER = "Empty: no filter."
#: Query parameters every paged list takes (:class:`ApiCursor`).
PAGING = ("cursor", "limit")


class StrictView(APIView):
    """Refuses what it would otherwise ignore or fail on: a query parameter the endpoint does not
    take (``query_parameters``, plus :data:`PAGING` on lists), one given more than once that is
    not ``repeatable`` (an array in the document; Django would read the last value), and text
    the database cannot store. Each is 400 ``invalid_request`` naming the inputs."""

    query_parameters: tuple[str, ...] = ()
    repeatable: tuple[str, ...] = ()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not hasattr(self, (request.method or "").lower()):
            return  # answered 405 by dispatch, whatever the request holds
        self._refuse_unknown_parameters(request)
        self._refuse_repeated_parameters(request)
        _refuse_unread_body(request)
        _refuse_unstorable(request, kwargs)

    def _refuse_unknown_parameters(self, request: Request) -> None:
        known: set[str] = set()
        if request.method in ("GET", "HEAD"):
            known = set(self.query_parameters)
            if getattr(self, "pagination_class", None) is not None:
                known |= set(PAGING)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            hint = f"known: {', '.join(sorted(known))}" if known else "it takes none"
            message = f"Unknown query parameter for this endpoint ({hint})."
            raise _parameters_refused(unknown, "Unknown query parameters", message)

    def _refuse_repeated_parameters(self, request: Request) -> None:
        repeated = sorted(
            name
            for name, values in request.query_params.lists()
            if len(values) > 1 and name not in self.repeatable
        )
        if repeated:
            message = "Given more than once; this parameter takes one value."
            raise _parameters_refused(repeated, "Query parameters given more than once", message)


def _parameters_refused(names: list[str], summary: str, message: str) -> ApiError:
    """400 ``invalid_request`` naming each query parameter of ``names`` with ``message``."""
    return ApiError(
        400, "invalid_request", f"{summary}: {', '.join(names)}.", {n: [message] for n in names}
    )


class ApiView(StrictView):
    """Authenticated by API key, scope-checked per method, throttled per key."""

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasScopes]
    throttle_classes = [ApiKeyThrottle]
    scopes: dict[str, tuple[str, ...]] = {}

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in getattr(request, "rate_limit", {}).items():
            response[name] = value
        return response

    def key(self) -> ApiKey:
        assert isinstance(self.request.auth, ApiKey)
        return self.request.auth

    def actor(self) -> Actor:
        """Who the audit trail names for this request: ``service:<API key name>``."""
        return Actor.service(self.key().name)

    def validated(self, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
        """The request body's fields as ``serializer_class`` validates them; raises DRF's
        ``ValidationError`` (400 ``invalid_request`` with field details) otherwise."""
        body = serializer_class(data=self.request.data)
        body.is_valid(raise_exception=True)
        return dict(body.validated_data)

    def operations(self) -> QuerySet[Operation]:
        """The caller's tenant's operations (others' are 404, never 403), with the IDs of
        their parent and follow-ups, and their agent revision, at hand."""
        follow_ups = Operation.objects.only("public_id", "parent_id", "created_at")
        return (
            Operation.objects.filter(tenant=self.key().tenant)
            .defer("conversation")
            .select_related("parent", "agent_revision__profile")
            .defer("parent__conversation")
            .prefetch_related(Prefetch("follow_ups", queryset=follow_ups))
        )

    def operation(self, public_id: str) -> Operation:
        return get_object_or_404(self.operations(), public_id=public_id)

    def live_operation(self, public_id: str) -> Operation:
        """:meth:`operation`, refused ``409 already_ended`` once it has ended: what an action
        (cancel, extend, stop) answers then whatever its body says, so it is checked before the
        body is read. The service checks it again under the row lock."""
        operation = self.operation(public_id)
        operation_refuse_ended(operation)
        return operation


def _refuse_unread_body(request: Request) -> None:
    """400 ``malformed_request`` for a body sent with ``Transfer-Encoding`` (chunked): it comes
    without a ``Content-Length``, so gunicorn and the development server alike read it as empty
    (Django reads a body by its length), which looked like a body missing its fields. An empty
    body is no body, whatever its declared type: an action whose body is optional takes none
    (a generated client declares JSON and sends nothing), one that needs fields names them."""
    if request.method in ("POST", "PUT", "PATCH") and request.META.get("HTTP_TRANSFER_ENCODING"):
        raise exceptions.ParseError(
            "Transfer-Encoding (a chunked body) cannot be read by this server; send the body "
            "with a Content-Length."
        )


def _refuse_unstorable(request: Request, kwargs: dict[str, Any]) -> None:
    """400 for a body nested too deeply, and for any ID, query parameter, ``Idempotency-Key``
    or body string (keys included) the database could not compare or store: each would fail
    as a 500 deep in a query or a service otherwise. A body string is named by its dotted path
    (``metadata.note``, ``tools.1``; a member name by the object holding it, ``body`` at the
    top)."""
    try:
        body = request.data
    except RecursionError:  # the JSON parser only turns ValueError into a 400
        raise _too_deep() from None
    places = {
        "path": list(kwargs.values()),
        "query": [s for key, values in request.query_params.lists() for s in (key, *values)],
        "header": [request.headers.get("Idempotency-Key", "")],
    }
    message = "Text may not contain NUL characters or unpaired surrogates."
    for place, values in places.items():
        if any(unstorable(value) for value in values if isinstance(value, str)):
            raise ApiError(400, "invalid_request", message, {place: [message]})
    try:
        strings = json_strings(body, top=BODY)
    except TooDeep:
        raise _too_deep() from None
    for field, value in strings:
        if unstorable(value):
            raise ApiError(400, "invalid_request", message, {field: [message]})


def _too_deep() -> ApiError:
    message = f"The JSON body is nested deeper than {MAX_JSON_DEPTH} levels."
    return ApiError(400, "malformed_request", message)


class ApiListView(ApiView, generics.ListAPIView):  # type: ignore[misc]
    pass


class ApiCursor(pagination.CursorPagination):
    """Cursor paging (``?cursor=`` as returned in ``cursor``, or within ``next``/``previous``;
    ``?limit=`` from 1 to ``max_page_size``, else 400 ``invalid_request``). Cursors are signed
    for the list's path and filters (:func:`cursor_sign`): one that was altered, or taken from
    another list or the same list under other filters, is 400 ``invalid_cursor``.

    A page is ``{"next": url|null, "previous": url|null, "cursor": str|null, "results": […]}``;
    ``cursor`` is the next page's cursor (``null`` on the last page)."""

    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def get_page_size(self, request: Request) -> int:
        value = request.query_params.get(self.page_size_query_param)
        if value is None:
            return self.page_size
        if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= self.max_page_size:
            message = f"limit must be a whole number from 1 to {self.max_page_size}."
            raise ApiError(400, "invalid_request", message, {"limit": [message]})
        return int(value)

    def get_paginated_response(self, data: Any) -> Response:
        following = self.get_next_link()
        cursor = (
            parse_qs(urlsplit(following).query)[self.cursor_query_param][0] if following else None
        )
        response = Response(
            {
                "next": following,
                "previous": self.get_previous_link(),
                "cursor": cursor,
                "results": data,
            }
        )
        # The view and its request refer to each other (DRF), so the garbage collector frees
        # them, not their last reference: the page's rows need not wait for it with them.
        self.page: list[Any] = []
        return response

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "A page's cursor, as a page's `cursor` (or its `next` or "
                "`previous` URL) gave it, with the same filters.",
                "schema": {"type": "string", "minLength": 1},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Results per page (default {self.page_size}).",
                "schema": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_page_size,
                    "default": self.page_size,
                },
            },
        ]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        page = super().get_paginated_response_schema(schema)
        page["properties"]["cursor"] = {
            "type": "string",
            "nullable": True,
            "description": "The next page's cursor (pass it as ?cursor=); null on the last page.",
            "example": None,
        }
        url = "https://callgate.example.com/api/v1/operations?cursor=cD0yMDI1LTExLTMw:1vPqRs"
        page["properties"]["next"]["example"] = url
        page["properties"]["previous"]["example"] = None
        page["required"] = ["next", "previous", "cursor", "results"]
        return page

    def encode_cursor(self, cursor: pagination.Cursor) -> str:
        url = super().encode_cursor(cursor)
        encoded = parse_qs(urlsplit(url).query)[self.cursor_query_param][0]
        query = self.request.query_params
        signed = cursor_sign(path=self.request.path, encoded=encoded, query=query)
        return replace_query_param(url, self.cursor_query_param, signed)

    def decode_cursor(self, request: Request) -> pagination.Cursor | None:
        signed = request.query_params.get(self.cursor_query_param)
        if signed is None:
            return None
        try:
            encoded = _cursor_signer(request.path, request.query_params).unsign(signed)
            tokens = parse_qs(b64decode(encoded, validate=True).decode("ascii"))
            return pagination.Cursor(
                offset=min(int(tokens.get("o", ["0"])[0]), self.offset_cutoff),
                reverse=bool(int(tokens.get("r", ["0"])[0])),
                position=tokens.get("p", [None])[0],
            )
        except (BadSignature, ValueError, UnicodeError):
            raise _invalid_cursor() from None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        try:
            return super().paginate_queryset(queryset, request, view)
        except (ValueError, TypeError, OverflowError, DjangoValidationError):
            # The cursor decoded, but its position does not fit this list's ordering.
            raise _invalid_cursor() from None


def cursor_sign(*, path: str, encoded: str, query: QueryDict | None = None) -> str:
    """``encoded`` (DRF's base64 cursor: ``o``, ``r``, ``p``) signed for the list at ``path``
    (``/api/v1/…``) under the filters of ``query`` (a request's query parameters; none when
    ``None``) with ``SECRET_KEY``: what a ``cursor`` parameter of that list carries."""
    return _cursor_signer(path, query).sign(encoded)


def _cursor_signer(path: str, query: QueryDict | None) -> Signer:
    """The signer of ``path``'s cursors under the filters of ``query``: its parameters but
    :data:`PAGING`, sorted by name then value (a repeated name once per value, a value given
    twice once); an empty value is no filter, as if not given."""
    filters = sorted(
        {
            (name, value)
            for name, values in (query.lists() if query else ())
            if name not in PAGING
            for value in values
            if value
        }
    )
    listed = f"{path}?{urlencode(filters)}" if filters else path
    return Signer(salt=f"callgate.api.cursor:{listed}")


def _invalid_cursor() -> ApiError:
    message = "This cursor is not one of this list's cursors under these filters."
    return ApiError(400, "invalid_cursor", message)


class NewestFirst(ApiCursor):
    ordering = ("-created_at", "-id")


class InOrder(ApiCursor):
    page_size = 100
    max_page_size = 500


class BySeq(InOrder):
    ordering = ("seq",)


class ByIndex(InOrder):
    ordering = ("index",)


class ByTurnAndPosition(InOrder):
    ordering = ("turn_id", "position")


@extend_schema(tags=["operations"])
class OperationsView(ApiListView):
    """List the tenant's operations (newest first) or start one."""

    scopes = {"GET": (READ,), "POST": (WRITE,)}
    serializer_class = OperationSerializer
    pagination_class = NewestFirst
    query_parameters = (
        "state",
        "family",
        "subject_ref",
        "metadata",
        "created_after",
        "created_before",
    )
    repeatable = ("metadata",)

    def get_queryset(self) -> QuerySet[Operation]:
        rows = self.operations().select_related("tenant")
        params = self.request.query_params
        if state := choice(params, "state", OperationState.values):
            rows = rows.filter(state=state)
        if family := choice(params, "family", ADAPTERS):
            rows = rows.filter(family=family)
        if subject_ref := params.get("subject_ref"):
            rows = rows.filter(subject_ref=subject_ref)
        for index, (key, value) in enumerate(_metadata_pairs(params.getlist("metadata"))):
            # A key transform, not ``metadata__<key>``: a key may hold "__" or any character.
            name = f"metadata_{index}"
            # Cast: compared as text, not as JSON (SQLite reads the value as a JSON document).
            text = Cast(KeyTextTransform(key, "metadata"), TextField())
            rows = rows.alias(**{name: text}).filter(**{name: value})
        for name, lookup in (
            ("created_after", "created_at__gte"),
            ("created_before", "created_at__lt"),
        ):
            if params.get(name):
                rows = rows.filter(**{lookup: _datetime(name, params[name])})
        return rows

    @extend_schema(
        summary="List operations",
        parameters=[
            OpenApiParameter(
                "state", str, enum=[*OperationState.values, ""], description=NO_FILTER
            ),
            OpenApiParameter("family", str, enum=[*ADAPTERS, ""], description=NO_FILTER),
            OpenApiParameter("subject_ref", str, description="Exactly this subject."),
            OpenApiParameter(
                "metadata",
                {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:"}},
                explode=True,
                description="key:value (split at the first colon); repeat it to require "
                "several pairs. Only operations whose metadata holds every pair are listed.",
            ),
            OpenApiParameter("created_after", str, description=f"ISO 8601 date-time. {NO_FILTER}"),
            OpenApiParameter("created_before", str, description=f"ISO 8601 date-time. {NO_FILTER}"),
        ],
        responses={
            200: OpenApiResponse(
                OperationSerializer(many=True),
                "A page of the tenant's operations, newest first.",
                [examples.OPERATIONS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The tenant's operations, newest first."""
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Start an operation",
        request=OperationCreateSerializer,
        responses={
            201: OpenApiResponse(
                OperationSerializer,
                "Started: PENDING, its first model request queued.",
                [examples.OPERATION_STARTED],
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.CREATE_REPLAY, examples.CREATE_LIVE],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Start an operation: PENDING at once, its first model request queued. Poll it (or take
        webhooks) to follow it. With ``agent``, the profile revision sets the family, model,
        instructions and tools; ``settings`` add to its settings and ``budgets`` may lower its
        budgets (docs/api.md)."""
        data = self.validated(OperationCreateSerializer)
        key = self.key()
        agent = (
            agent_revision_get(tenant=key.tenant, reference=data["agent"])
            if "agent" in data
            else None
        )
        operation = operation_start(
            tenant=key.tenant,
            requested_by=key.service_user,
            subject_ref=data["subject_ref"],
            family=data.get("family", ""),
            model=data.get("model", ""),
            input_text=data["input"],
            agent=agent,
            tool_names=data.get("tools"),
            replay_script=self._script(data, agent),
            transport=data["transport"],
            stream=data.get("stream"),
            budgets=data.get("budgets"),
            metadata=data.get("metadata"),
            messages=data.get("messages"),
            settings=data.get("settings"),
            actor=self.actor(),
            **({"instructions": data["instructions"]} if "instructions" in data else {}),
        )
        return Response(
            OperationSerializer(
                self.operations().select_related("tenant").get(pk=operation.pk)
            ).data,
            status=status.HTTP_201_CREATED,
        )

    def _script(self, data: dict[str, Any], agent: AgentRevision | None) -> ReplayScript | None:
        """The request's replies as an unsaved script (``operation_start`` saves it with the
        operation), or ``None``."""
        if not data.get("replies"):
            return None
        return ReplayScript(
            name=f"api:{self.key().name}",
            family=agent.family if agent else data["family"],
            model=agent.model if agent else data["model"],
            replies=data["replies"],
        )


#: One ``metadata`` filter: ``key:value``, the key not empty and without a colon.
METADATA_PAIR = re.compile(r"([^:]+):(.*)", re.DOTALL)


def _metadata_pairs(values: list[str]) -> list[tuple[str, str]]:
    """``metadata=key:value`` filters as pairs; 400 ``invalid_request`` for one without a key."""
    pairs = []
    for value in values:
        match = METADATA_PAIR.fullmatch(value)
        if match is None:
            message = "metadata filters are key:value, the key before the first colon."
            raise ApiError(400, "invalid_request", message, {"metadata": [message]})
        pairs.append((match.group(1), match.group(2)))
    return pairs


def _datetime(name: str, value: str) -> datetime:
    """``value`` as an aware date-time (no offset: the server's time zone); 400
    ``invalid_request`` naming ``name`` when it is no ISO 8601 date-time, or one before year 1
    or after year 9999 in UTC."""
    try:
        parsed = parse_datetime(value)  # ValueError: well formed but no such date (2025-02-30)
    except ValueError:
        parsed = None
    if parsed is None:
        message = f"{name} must be an ISO 8601 date-time."
        raise ApiError(400, "invalid_request", message, {name: [message]})
    parsed = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
    try:
        parsed.astimezone(UTC)
    except OverflowError:
        message = f"{name} is out of range: in UTC it is before year 1 or after year 9999."
        raise ApiError(400, "invalid_request", message, {name: [message]}) from None
    return parsed


def choice(params: QueryDict, name: str, choices: Collection[str]) -> str:
    """Query parameter ``name`` if given ("" if not, or empty: no filter); 400
    ``invalid_request`` naming the choices when it is not one of them."""
    value = params.get(name, "")
    if value and value not in choices:
        message = f"{name} must be one of: {', '.join(sorted(choices))}."
        raise ApiError(400, "invalid_request", message, {name: [message]})
    return value


@extend_schema(tags=["operations"])
class OperationDetailView(ApiView):
    """One operation: state, budgets and what was used, final text or why it stopped."""

    scopes = {"GET": (READ,)}

    @extend_schema(
        summary="Retrieve an operation",
        responses={
            200: OpenApiResponse(
                OperationSerializer,
                "The operation as it stands.",
                [examples.OPERATION, examples.OPERATION_DONE],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, public_id: str) -> Response:
        operation = get_object_or_404(
            self.operations().select_related("tenant"), public_id=public_id
        )
        return Response(OperationSerializer(operation).data)


@extend_schema(tags=["operations"])
class OperationCancelView(ApiView):
    """Cancel an operation that has not ended: calls already running finish and are recorded,
    nothing new starts, and its pending approvals are superseded."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Cancel an operation",
        request=ReasonSerializer,
        responses={
            200: OpenApiResponse(OperationSerializer, "Cancelled.", [examples.OPERATION_CANCELLED]),
            409: OpenApiResponse(ErrorSerializer, f"{_ENDED} {KEY_CONFLICT}"),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.CANCEL],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        operation = self.live_operation(public_id)
        body = self.validated(ReasonSerializer)
        operation_cancel(
            operation_pk=operation.pk,
            actor=self.actor(),
            reason=body["reason"],
        )
        return Response(OperationSerializer(self.operation(public_id)).data)


@extend_schema(tags=["operations"])
class OperationExtendView(ApiView):
    """Raise the budgets of an ESCALATED operation (within the server's limits) and resume it."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Extend an escalated operation's budgets and resume it",
        request=ExtendSerializer,
        responses={
            200: OpenApiResponse(
                OperationSerializer,
                "Extended and resumed: its next model request is queued.",
                [examples.OPERATION_RESUMED],
            ),
            409: OpenApiResponse(
                ErrorSerializer,
                f"{_ENDED} {_NOT_ESCALATED} `needs_resolution`: a call's outcome is unknown "
                "(record it first: `POST …/calls/{call_id}/resolve`, the calls named in "
                "`details.calls`; or stop). `still_over`: the budgets given would trip again at "
                f"once. {KEY_CONFLICT}",
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.EXTEND],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        operation = self.live_operation(public_id)
        body = self.validated(ExtendSerializer)
        budgets = {k: int(v) if float(v).is_integer() else v for k, v in body["budgets"].items()}
        operation_extend(
            operation_pk=operation.pk,
            actor=self.actor(),
            budgets=budgets,
            note=body["note"],
        )
        return Response(OperationSerializer(self.operation(public_id)).data)


@extend_schema(tags=["operations"])
class OperationStopView(ApiView):
    """End an ESCALATED operation for good (STOPPED), with a reason."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Stop an escalated operation",
        request=ReasonSerializer,
        responses={
            200: OpenApiResponse(OperationSerializer, "Stopped.", [examples.OPERATION_STOPPED]),
            409: OpenApiResponse(ErrorSerializer, f"{_ENDED} {_NOT_ESCALATED} {KEY_CONFLICT}"),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.STOP],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        operation = self.live_operation(public_id)
        body = self.validated(ReasonSerializer)
        operation_stop(
            operation_pk=operation.pk,
            actor=self.actor(),
            reason=body["reason"],
        )
        return Response(OperationSerializer(self.operation(public_id)).data)


@extend_schema(tags=["operations"])
class OperationCallResolveView(ApiView):
    """Record the outcome of a call whose side effect was lost (its state UNKNOWN_OUTCOME, the
    operation ESCALATED with ``UNKNOWN_OUTCOME``), as the console's operation page does: the
    call set then goes on and the operation resumes. Of an operation that ended meanwhile
    (stopped while it waited), only the call and its idempotency key are settled."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Record the outcome of a call whose outcome is unknown",
        request=ResolveSerializer,
        responses={
            200: OpenApiResponse(
                OperationSerializer,
                "Recorded; the call's set goes on (the model is sent the results once all are in).",
                [examples.OPERATION_RESOLVED],
            ),
            409: OpenApiResponse(
                ErrorSerializer,
                "`not_unknown_outcome`: the call's outcome is not unknown (it is still running, "
                f"or it was settled); the message names its state. {KEY_CONFLICT}",
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.RESOLVE],
    )
    @idempotent
    def post(self, request: Request, public_id: str, call_id: str) -> Response:
        operation = self.operation(public_id)
        call = get_object_or_404(operation.calls, public_id=call_id)
        body = self.validated(ResolveSerializer)
        call_resolve(
            call_pk=call.pk,
            actor=self.actor(),
            resolution=body["resolution"],
            note=body["note"],
        )
        return Response(OperationSerializer(self.operation(public_id)).data)


@extend_schema(tags=["operations"])
class OperationMessagesView(ApiView):
    """Follow up an ended operation (COMPLETED, REFUSED or INCOMPLETE) with the user's next
    message: a new operation linked to it (``parent``), carrying its conversation, family,
    model, instructions, settings and tools. The operation itself stays as it ended; any other
    state is 409 ``not_followable``."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Follow up an ended operation",
        request=FollowUpSerializer,
        responses={
            201: OpenApiResponse(
                OperationSerializer, "The follow-up, a new operation.", [examples.OPERATION_STARTED]
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.FOLLOW_UP],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        parent = self.operation(public_id)
        body = self.validated(FollowUpSerializer)
        replay = parent.transport == Operation.Transport.REPLAY
        if replay != bool(body.get("replies")):
            message = "required when the operation used the replay transport, and only then"
            raise ApiError(400, "invalid_request", message, {"replies": [message]})
        script = None
        if replay:  # saved by operation_follow_up, with the operation
            name = f"api:{self.key().name}"
            script = ReplayScript(
                name=name, family=parent.family, model=parent.model, replies=body["replies"]
            )
        operation = operation_follow_up(
            operation_pk=parent.pk,
            requested_by=self.key().service_user,
            input_text=body["input"],
            replay_script=script,
            actor=self.actor(),
        )
        created = OperationSerializer(self.operation(operation.public_id)).data
        return Response(created, status=status.HTTP_201_CREATED)


@extend_schema(tags=["operations"])
class OperationForkView(ApiView):
    """Start a new operation from one of this one's turns: its conversation up to that turn, the
    same tools, settings and budgets, optionally another model. Effects already settled are
    answered from their idempotency records, never run again; approvals are asked again where
    policy requires."""

    scopes = {"POST": (WRITE,)}

    @extend_schema(
        summary="Fork an operation from a turn",
        request=ForkSerializer,
        responses={
            201: OpenApiResponse(
                OperationSerializer, "The fork, a new operation.", [examples.OPERATION_FORKED]
            ),
            **ERRORS,
        },
        parameters=[examples.IDEMPOTENCY_KEY],
        examples=[examples.FORK],
    )
    @idempotent
    def post(self, request: Request, public_id: str) -> Response:
        operation = self.operation(public_id)
        body = self.validated(ForkSerializer)
        agent = None
        if "agent" in body:
            agent = agent_revision_get(tenant=self.key().tenant, reference=body["agent"])
        fork = operation_fork(
            operation_pk=operation.pk,
            from_turn=body["from_turn"],
            actor=self.actor(),
            author=self.key().service_user,
            model=body.get("model"),
            agent=agent,
        )
        data = OperationSerializer(self.operation(fork.public_id)).data
        return Response(data, status=status.HTTP_201_CREATED)


@extend_schema(
    tags=["operations"],
    summary="List an operation's turns",
    responses={
        200: OpenApiResponse(
            TurnSerializer(many=True), "A page of its turns, in order.", [examples.TURNS]
        ),
        **ERRORS,
    },
)
class OperationTurnsView(ApiListView):
    """The operation's model turns, in order."""

    scopes = {"GET": (READ,)}
    serializer_class = TurnSerializer
    pagination_class = ByIndex

    def get_queryset(self) -> QuerySet[ModelTurn]:
        operation = self.operation(self.kwargs["public_id"])
        return operation.turns.defer("request_frame", "request_items", "reply")


@extend_schema(
    tags=["operations"],
    summary="List an operation's calls",
    responses={
        200: OpenApiResponse(
            CallSerializer(many=True),
            "A page of its calls, by turn and position in the turn.",
            [examples.CALLS],
        ),
        **ERRORS,
    },
)
class OperationCallsView(ApiListView):
    """The operation's calls; ``protected_audit`` only with the ``audit:read`` scope."""

    scopes = {"GET": (READ,)}
    serializer_class = CallSerializer
    pagination_class = ByTurnAndPosition

    def get_queryset(self) -> QuerySet[ToolCall]:
        operation = self.operation(self.kwargs["public_id"])
        return operation.calls.select_related("turn")

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "audit": AUDIT in self.key().scopes}


@extend_schema(
    tags=["operations"],
    summary="List an operation's audit events",
    responses={
        200: OpenApiResponse(
            EventSerializer(many=True), "A page of its audit events, in order.", [examples.EVENTS]
        ),
        **ERRORS,
    },
)
class OperationEventsView(ApiListView):
    """The operation's audit events, in order (hash-chained)."""

    scopes = {"GET": (READ,)}
    serializer_class = EventSerializer
    pagination_class = BySeq

    def get_queryset(self) -> QuerySet[AuditEvent]:
        operation = self.operation(self.kwargs["public_id"])
        return operation.events.select_related("call")


class EventStreamRenderer(BaseRenderer):
    """Names ``text/event-stream`` for content negotiation; the stream itself is a
    ``StreamingHttpResponse`` (:mod:`toolcalls.api.streams`), so this renders nothing."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        raise NotImplementedError("an event stream is not rendered from data")


#: One event of the stream, as its fields (``data`` is one line of JSON).
EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "The audit sequence."},
        "event": {"type": "string", "enum": [*AuditKind.values, "end"]},
        "data": {
            "type": "string",
            "description": "JSON: the audit event and its note, or (end) the operation.",
        },
        "retry": {"type": "integer", "minimum": 0},
    },
}
#: Largest ``Last-Event-ID`` (an audit sequence: PostgreSQL integer).
MAX_EVENT_ID = 2**31 - 1


@extend_schema(tags=["operations"])
class OperationEventStreamView(ApiView):
    """The operation's audit events as Server-Sent Events, live: state changes, "preparing to
    call X", approvals requested and decided, then ``end`` with the final text once it ended.
    Resumable with ``Last-Event-ID`` (docs/api.md)."""

    scopes = {"GET": (READ,)}
    renderer_classes = [EventStreamRenderer, JSONRenderer]

    @extend_schema(
        summary="Follow an operation live (Server-Sent Events)",
        parameters=[
            OpenApiParameter(
                "Last-Event-ID",
                {"type": "integer", "minimum": 0, "maximum": MAX_EVENT_ID},
                location=OpenApiParameter.HEADER,
                description="Resume after this event (its `id`, the audit `sequence`); "
                "EventSource sends it by itself when it reconnects. Default: from the start.",
            )
        ],
        responses={
            (200, EventStreamRenderer.media_type): OpenApiResponse(
                EVENT_SCHEMA,
                "Events until the operation has ended (then `end`), or for at most "
                "CALLGATE_API_STREAM_MAX_S seconds: reconnect with Last-Event-ID.",
                [examples.EVENT_STREAM],
            ),
            (400, JSONRenderer.media_type): ErrorSerializer,
            (429, JSONRenderer.media_type): OpenApiResponse(
                ErrorSerializer,
                "`rate_limited`, or `too_many_streams`: the key already holds "
                "CALLGATE_API_STREAMS_PER_KEY streams (`Retry-After`).",
            ),
        },
    )
    def get(self, request: Request, public_id: str) -> StreamingHttpResponse:
        if not isinstance(request.accepted_renderer, EventStreamRenderer):
            raise exceptions.NotAcceptable("This endpoint answers in text/event-stream only.")
        operation = self.operation(public_id)
        after = _last_event_id(request)
        slot = stream_slot_take(key_pk=self.key().pk)
        if slot is None:
            raise ApiError(
                status.HTTP_429_TOO_MANY_REQUESTS,
                "too_many_streams",
                f"This API key has {settings.CALLGATE_API_STREAMS_PER_KEY} event streams open "
                "(CALLGATE_API_STREAMS_PER_KEY); close one, or retry when one ends.",
                headers={"Retry-After": str(int(KEEPALIVE_S))},
            )
        stream = operation_stream(operation_pk=operation.pk, after=after, slot=slot)
        response = StreamingHttpResponse(stream, content_type=EventStreamRenderer.media_type)
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies pass each event on at once
        return response

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        if isinstance(response, Response):  # an error: always in the one JSON shape
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def _last_event_id(request: Request) -> int:
    # Blank is refused as the document says (an integer): EventSource sends the header only
    # once an event had an ID.
    value = request.headers.get("Last-Event-ID", "0").strip()
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_EVENT_ID:
        message = f"Last-Event-ID must be a whole number from 0 to {MAX_EVENT_ID}."
        raise ApiError(400, "invalid_request", message, {"Last-Event-ID": [message]})
    return int(value)


@extend_schema(tags=["tools"])
class ToolsView(ApiView):
    """The tools the key's tenant may use: its catalogue's enabled tools."""

    scopes = {"GET": (READ,)}

    @extend_schema(
        summary="The tenant's tool catalogue",
        operation_id="tools_list",
        responses={
            200: OpenApiResponse(
                ToolSerializer(many=True),
                "The tools the tenant may use, by name.",
                [examples.TOOLS],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        tenant = self.key().tenant
        return Response(ToolSerializer(catalogue.entries(tenant), many=True).data)


TOOL_SET = {
    200: OpenApiResponse(
        ToolSerializer, "The tool with the tenant's new settings.", [examples.TOOL]
    ),
    **ERRORS,
}


@extend_schema(tags=["tools"])
class ToolView(ApiView):
    """One registered tool as the key's tenant has it; ``PUT`` sets the tenant's settings of
    it (enabled, overrides), ``PATCH`` those given. Overrides are only ever stricter than the
    tool spec."""

    scopes = {"GET": (READ,), "PUT": (TOOLS_MANAGE,), "PATCH": (TOOLS_MANAGE,)}

    def entry(self, name: str) -> catalogue.Entry:
        found = catalogue.entry(self.key().tenant, name)
        if found is None:
            raise ApiError(404, "not_found", f"No registered tool named {name!r}.")
        return found

    @extend_schema(
        summary="Retrieve a tool",
        responses={
            200: OpenApiResponse(ToolSerializer, "The tool as the tenant has it.", [examples.TOOL]),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(ToolSerializer(self.entry(name)).data)

    @extend_schema(
        summary="Set the tenant's settings of a tool",
        request=ToolSettingsSerializer,
        responses=TOOL_SET,
        examples=[examples.TOOL_SET],
    )
    def put(self, request: Request, name: str) -> Response:
        return self.settings_set(name, partial=False)

    @extend_schema(
        summary="Change some of the tenant's settings of a tool",
        request=ToolSettingsSerializer,
        responses=TOOL_SET,
        examples=[examples.TOOL_DISABLE],
    )
    def patch(self, request: Request, name: str) -> Response:
        return self.settings_set(name, partial=True)

    def settings_set(self, name: str, *, partial: bool) -> Response:
        entry = self.entry(name)
        if entry.server is not None:
            raise _remote_tool_settings(name, entry.server.name)
        row = entry.row
        current = {
            "enabled": row.enabled if row else False,
            "max_calls": row.max_calls if row else None,
            "approval": (row.approval or None) if row else None,
            "approval_threshold": row.approval_threshold if row else None,
        }
        body = ToolSettingsSerializer(data=self.request.data, partial=partial)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        if "approval" in given and given["approval"] != "threshold":
            current["approval_threshold"] = None  # a PATCH of the policy drops its threshold
        values = {**current, **given} if partial else dict(given)
        values["approval"] = values["approval"] or ""
        tenant = self.key().tenant
        try:
            tenant_tool_set(tenant=tenant, tool_name=name, actor=self.actor(), **values)
        except CatalogueError as exc:
            field = exc.details.get("field", "body")
            raise ApiError(400, "invalid_request", exc.message, {field: [exc.message]}) from None
        return Response(ToolSerializer(catalogue.entry(tenant, name)).data)


def _remote_tool_settings(name: str, server: str) -> ApiError:
    """The refusal of catalogue settings for remote tool ``name`` of ``server``: its review on
    its server is its settings (docs/remote-tools.md)."""
    remote = name.removeprefix(f"{server}__")
    where = f"/api/v1/remote-servers/{server}/tools/{remote}"
    message = (
        f"{name} is a remote tool: its settings are its review. Enable it (with its review) "
        f"with POST {where}/enable, disable it with POST {where}/disable."
    )
    return ApiError(400, "invalid_request", message, {"name": [message]})


@extend_schema(tags=["health"], auth=[])
class LivenessView(StrictView):
    """The process answers (no key needed)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="The process answers",
        responses={200: OpenApiResponse(HealthSerializer, "Alive.", [examples.LIVE]), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


@extend_schema(tags=["health"], auth=[])
class ReadinessView(StrictView):
    """The database and the broker are reachable (503 otherwise)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Database and broker reachable",
        responses={
            200: OpenApiResponse(ReadinessSerializer, "Ready.", [examples.READY]),
            503: OpenApiResponse(
                ReadinessSerializer,
                "The database or the broker is unreachable (`checks` says which).",
                [examples.NOT_READY],
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        checks = {"database": _database_ok(), "broker": _broker_ok()}
        ready = all(checks.values())
        body = {"status": "ok" if ready else "unavailable", "checks": checks}
        if ready:
            return Response(body)
        return Response(body, status=503, headers={"Retry-After": str(READY_RETRY_AFTER_S)})


#: Seconds a load balancer or client is asked to wait before asking an unready process again.
READY_RETRY_AFTER_S = 5


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


def _broker_ok() -> bool:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return True  # tasks run in-process: there is no broker to reach
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        return False
