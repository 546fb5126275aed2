"""The demo shop's refund tools served out of process, over MCP and over HTTP, backed by the same
demo database; and their registration for tenant ``acme``.

Both servers run the very handlers registered in-process (:mod:`toolcalls.demo.tools`): the
served schema is the registered one, the trusted context (tenant, customer, operation, call,
idempotency key) comes from Callgate's request (``_meta.callgate`` over MCP, the body and the
``Idempotency-Key`` header over HTTP), never from the arguments. A server honours the key: a
side effect already applied under it answers with its stored result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import connections

from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.addresses import UrlRefused, url_check
from toolcalls.demo.faults import fault_point
from toolcalls.demo.services import TENANT_SLUG
from toolcalls.models import Tenant
from toolcalls.registry import Reconciliation, ToolContext, ToolError, ToolSpec
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.remote.rules import model_name
from toolcalls.remote.services import (
    HttpToolForm,
    RemoteError,
    Review,
    ServerForm,
    remote_http_tool_register,
    remote_server_register,
    remote_tool_enable,
)

#: The demo tools served out of process, in the order the refund uses them.
SERVED = ("get_order", "create_refund_draft", "submit_refund")
#: The demo servers' names in tenant ``acme`` (the prefix of their tools' names).
SERVER_NAMES = {"mcp": "shop-mcp", "http": "shop-http"}
#: Where ``demo_mcp_server`` (its endpoint) and ``demo_http_tools`` (its base) listen by default.
DEFAULT_URLS = {"mcp": "http://127.0.0.1:8765/mcp", "http": "http://127.0.0.1:8766"}
DEMO_ACTOR = Actor.system("demo")


def served_names(kind: str) -> dict[str, str]:
    """The demo tools' names → their names in tenant ``acme`` when served by the ``kind`` server."""
    return {name: model_name(SERVER_NAMES[kind], name) for name in SERVED}


def _spec(name: str) -> ToolSpec:
    spec = registry.get(name) if name in SERVED else None
    if spec is None:
        raise ToolError("UNKNOWN_TOOL", f"This server has no tool {name!r}.")
    return spec


def served_tools() -> list[dict[str, Any]]:
    """The tools as an MCP listing describes them: ``name``, ``description``, ``inputSchema``,
    ``annotations`` (hints from the risk class)."""
    tools = []
    for name in SERVED:
        spec = _spec(name)
        hints = {
            "readOnlyHint": spec.risk == "read",
            "destructiveHint": spec.risk == "irreversible",
            "idempotentHint": spec.idempotency_key is not None,
        }
        tools.append(
            {
                "name": name,
                "description": spec.description,
                "inputSchema": dict(spec.parameters),
                "annotations": hints,
            }
        )
    return tools


def demo_tool_call(
    *, name: str, arguments: Mapping[str, Any], context: Mapping[str, Any]
) -> dict[str, Any]:
    """Run tool ``name`` as the in-process demo would for ``context`` (``tenant_ref``,
    ``subject_ref``, ``operation_id``, ``call_id``, ``idempotency_key``); raises
    :class:`ToolError` before any effect. Closes this thread's database connections."""
    try:
        spec = _spec(name)
        errors = [e.message for e in spec.validator.iter_errors(dict(arguments))]
        if errors:
            raise ToolError("INVALID_ARGUMENTS", "; ".join(errors)[:500])
        ctx = _context(context)
        refusal = spec.authorize(ctx, arguments) if spec.authorize else None
        if refusal is not None:
            raise ToolError("UNAUTHORIZED", refusal)
        fault_point(f"{name}.received")
        if ctx.idempotency_key and spec.reconcile is not None:
            done = spec.reconcile(ctx, ctx.idempotency_key)
            if done.applied:
                return dict(done.data)
        return dict(spec.handler(ctx, arguments))
    finally:
        connections.close_all()


def demo_tool_reconcile(*, name: str, tenant_ref: str, key: str) -> Reconciliation:
    """Whether tool ``name``'s effect under ``key`` happened for ``tenant_ref``."""
    try:
        spec = _spec(name)
        if spec.reconcile is None:
            return Reconciliation(applied=None)
        return spec.reconcile(_context({"tenant_ref": tenant_ref}), key)
    finally:
        connections.close_all()


def _context(context: Mapping[str, Any]) -> ToolContext:
    def text(name: str) -> str:
        value = context.get(name, "")
        return value if isinstance(value, str) else ""

    return ToolContext(
        tenant_ref=text("tenant_ref"),
        subject_ref=text("subject_ref"),
        operation_id=text("operation_id"),
        provider_call_id=text("call_id"),
        idempotency_key=text("idempotency_key"),
        call_id=text("call_id"),
    )


def demo_review(name: str) -> Review:
    """The demo's review of each tool: what the in-process registration says."""
    spec = _spec(name)
    keys = {
        "create_refund_draft": ["order_id", "amount_cents", "reason"],
        "submit_refund": ["order_id", "amount_cents", "draft_id"],
    }
    threshold = settings.CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS
    condition = f"amount_cents > {threshold}" if name == "submit_refund" else ""
    return Review(
        risk=spec.risk,
        timeout_ms=5000,
        approval="condition" if condition else "never",
        approval_condition=condition,
        key_context=["subject_ref"] if name in keys else [],
        key_arguments=keys.get(name, []),
    )


def demo_remote_register(*, kind: str, url: str | None = None) -> RemoteServer:
    """Register the demo server of ``kind`` (``mcp`` at its endpoint ``url``, or ``http`` with
    its base ``url``; :data:`DEFAULT_URLS` when ``None``) for tenant ``acme`` and enable the
    refund tools as the in-process demo has them. A server registered earlier is reused as it
    is when no ``url`` is given, or when it is registered at that one. Raises ``RemoteError``:
    ``server_exists`` (registered at another URL: the demo changes no registration),
    ``invalid_server`` (``url`` is no http(s) URL with a host), ``server_unreachable``."""
    tenant = Tenant.objects.get(slug=TENANT_SLUG)
    existing = RemoteServer.objects.filter(tenant=tenant, name=SERVER_NAMES[kind]).first()
    if existing is not None:
        registered = _registered_url(existing)
        if url is not None and url.rstrip("/") != registered.rstrip("/"):
            message = (
                f"{TENANT_SLUG} has {existing.name} registered at {registered}, not {url}; "
                "the demo changes no registration: use that URL, or a fresh database"
            )
            raise RemoteError("server_exists", message)
        return existing
    url = DEFAULT_URLS[kind] if url is None else url
    _url_check(url)
    secret = settings.CALLGATE_DEMO_TOOLS_SECRET
    form = ServerForm(
        name=SERVER_NAMES[kind],
        kind=kind,
        url=url if kind == "mcp" else "",
        signing_secret=secret if kind == "http" else "",
    )
    server = remote_server_register(tenant=tenant, form=form, actor=DEMO_ACTOR)
    for tool in served_tools() if kind == "http" else []:
        form_http = HttpToolForm(
            name=tool["name"],
            description=tool["description"],
            input_schema=tool["inputSchema"],
            url=f"{url.rstrip('/')}/tools/{tool['name']}",
            reconcile_url=f"{url.rstrip('/')}/reconcile/{tool['name']}",
        )
        remote_http_tool_register(server_pk=server.pk, form=form_http, actor=DEMO_ACTOR)
    for row in RemoteTool.objects.filter(server=server):
        remote_tool_enable(tool_pk=row.pk, review=demo_review(row.remote_name), actor=DEMO_ACTOR)
    return server


def _url_check(url: str) -> None:
    """Refuse a ``url`` no registration would take before any is stored: an HTTP server is
    registered before its tools, whose URLs are checked only then."""
    try:
        url_check(url, allow_private=settings.CALLGATE_REMOTE_ALLOW_PRIVATE)
    except UrlRefused as exc:
        raise RemoteError("invalid_server", f"the demo tool server's URL: {exc}") from None
    except OSError:  # a host not resolved now: the registration or the first call says so
        pass


def _registered_url(server: RemoteServer) -> str:
    """The URL ``server`` was registered with: an MCP server's endpoint, an HTTP server's base
    (its tools' URLs without ``/tools/<name>``)."""
    if server.kind == RemoteServer.Kind.MCP:
        return server.url
    tool = RemoteTool.objects.filter(server=server, remote_name=SERVED[0]).first()
    return tool.url.removesuffix(f"/tools/{SERVED[0]}") if tool is not None else ""
