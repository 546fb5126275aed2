"""Every write to remote servers and tools: register, discover, review, notice a change.

Each write is one transaction that locks the server row (so discovery, a change noticed by a
call and an administrator's review of the same server are serialised) and appends a
:class:`~toolcalls.remote.models.RemoteEvent`. Talking to a server happens before the
transaction, never inside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.addresses import UrlRefused, url_check
from toolcalls.binding import digest
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant
from toolcalls.registry import RISKS
from toolcalls.remote import rules
from toolcalls.remote.clients import (
    Address,
    RemoteUnavailable,
    ServedTool,
    address_check,
    address_problem,
    mcp_list_tools,
    served_by_name,
)
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool

#: Seconds allowed to list a server's tools.
DISCOVERY_TIMEOUT_S = 10.0
#: ``RemoteTool.problem`` of a tool its server no longer lists.
GONE = "no longer served by the server"
#: The longest timeout an administrator may give a remote tool, in milliseconds.
MAX_TIMEOUT_MS = 120_000


class RemoteError(CallgateError):
    """A remote server or tool request Callgate refuses. Codes: ``invalid_server``,
    ``server_exists``, ``server_unreachable``, ``invalid_tool``, ``invalid_review``. A refusal of
    one field of the request names it in ``details["fields"]`` (:func:`_field_refused`)."""


def _field_refused(code: str, where: str, problem: str) -> RemoteError:
    """``code`` for ``problem``, naming ``where``: a field of the request (``ServerForm``,
    ``HttpToolForm``, ``Review``: the API's body fields), ``{"fields": {where: [problem]}}``."""
    return RemoteError(code, problem, details={"fields": {where: [problem]}})


def server_address(server: RemoteServer) -> Address:
    """Where ``server`` is, for :mod:`toolcalls.remote.clients`."""
    return Address(url=server.url, command=tuple(server.command), headers=dict(server.headers))


@dataclass(frozen=True)
class ServerForm:
    """What registering a server takes: ``name`` (prefix of its tools' names), ``kind``
    (``mcp``/``http``), ``url`` or ``command`` (MCP: one of them; HTTP: neither, each tool has
    its own URL), ``headers`` sent with every request (the rules of
    :func:`~toolcalls.remote.clients.headers_problem`), ``signing_secret`` (HTTP tools)."""

    name: str
    kind: str
    url: str = ""
    command: Sequence[str] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    signing_secret: str = ""


def remote_server_register(*, tenant: Tenant, form: ServerForm, actor: Actor) -> RemoteServer:
    """Register a server for ``tenant``; an MCP server's tools are listed first (nothing is
    saved when it cannot be reached) and stored for review, none enabled. Raises
    :class:`RemoteError` (``invalid_server``: a field breaks a rule, headers no request may
    carry, a command where stdio is not allowed; ``server_exists``; ``server_unreachable``)."""
    _server_form_check(form)
    address = Address(url=form.url, command=tuple(form.command), headers=dict(form.headers))
    listing = _list(address) if form.kind == RemoteServer.Kind.MCP else {}
    with transaction.atomic(durable=True):
        if RemoteServer.objects.filter(tenant=tenant, name=form.name).exists():
            message = f"{tenant.slug} already has a server {form.name}"
            raise _field_refused("server_exists", "name", message)
        server = RemoteServer.objects.create(
            tenant=tenant,
            name=form.name,
            kind=form.kind,
            url=form.url,
            command=list(form.command),
            headers=dict(form.headers),
            signing_secret=form.signing_secret,
        )
        _event(server, None, RemoteEvent.Kind.SERVER_REGISTERED, actor, {"kind": form.kind})
        _listing_record(server, listing, actor)
    return server


@dataclass(frozen=True)
class ServerChange:
    """What may change on a registered server, each ``None`` to keep it: ``url`` (MCP over
    HTTP: it moved), ``headers`` (replacing them all: a token rotated), ``signing_secret`` (HTTP:
    rotated). Its name, kind and command never change: they are what its tools are."""

    url: str | None = None
    headers: Mapping[str, str] | None = None
    signing_secret: str | None = None


def remote_server_change(*, server_pk: int, change: ServerChange, actor: Actor) -> RemoteServer:
    """Change a server's address, headers or signing secret, under the rules of registering
    it; the next request to it uses them. An MCP server given a new ``url`` or new headers is
    listed there first (nothing changes when it cannot be reached) and what it serves is
    recorded as discovery records it: a tool served differently there is disabled until
    enabled again. The ``server_changed`` event names the fields changed, never their values.
    Raises :class:`RemoteError` (``invalid_server``: a field breaks a rule, ``url`` for a
    server that has none; ``server_unreachable``)."""
    server = RemoteServer.objects.get(pk=server_pk)
    form = _changed_form(server, change)
    _server_form_check(form)
    address = Address(url=form.url, command=tuple(form.command), headers=dict(form.headers))
    relist = server.kind == RemoteServer.Kind.MCP and (form.url, form.headers) != (
        server.url,
        server.headers,
    )
    listing = _list(address) if relist else None
    with transaction.atomic(durable=True):
        server = RemoteServer.objects.select_for_update().get(pk=server_pk)
        # Only what this change names: another made meanwhile to another field stays.
        named = [
            name
            for name in ("url", "headers", "signing_secret")
            if getattr(change, name) is not None
        ]
        changed = [name for name in named if _differs(server, form, name)]
        if changed:
            for name in changed:
                setattr(server, name, getattr(form, name))
            server.save(update_fields=changed)
            _event(server, None, RemoteEvent.Kind.SERVER_CHANGED, actor, {"changed": changed})
        if listing is not None:
            _listing_record(server, listing, actor)
    return server


def _changed_form(server: RemoteServer, change: ServerChange) -> ServerForm:
    if change.url is not None and not server.url:
        message = "only an MCP server reached over HTTP has a url to change"
        raise _field_refused("invalid_server", "url", message)
    return ServerForm(
        name=server.name,
        kind=server.kind,
        url=server.url if change.url is None else change.url,
        command=tuple(server.command),
        headers=dict(server.headers if change.headers is None else change.headers),
        signing_secret=(
            server.signing_secret if change.signing_secret is None else change.signing_secret
        ),
    )


def _differs(server: RemoteServer, form: ServerForm, name: str) -> bool:
    current = getattr(server, name)
    return bool(current != (dict(form.headers) if name == "headers" else getattr(form, name)))


def _server_form_check(form: ServerForm) -> None:
    """Raises ``invalid_server`` naming the first field of ``form`` that breaks a rule."""
    where, problem = _server_form_problem(form)
    if problem:
        raise _field_refused("invalid_server", where, problem)


def _server_form_problem(form: ServerForm) -> tuple[str, str]:
    """The first field of ``form`` that breaks a rule and why, or ``("", "")``."""
    if not rules.SERVER_NAME.fullmatch(form.name):
        return "name", "the name must match [a-z][a-z0-9-]{0,29}"
    if form.kind not in RemoteServer.Kind.values:
        return "kind", f"kind must be one of {RemoteServer.Kind.values}"
    if form.kind == RemoteServer.Kind.MCP:
        where, problem = _mcp_form_problem(form)
        if problem:
            return where, problem
    if form.kind == RemoteServer.Kind.HTTP and (form.url or form.command):
        where = "url" if form.url else "command"
        return where, f"HTTP tools name their own URLs; an HTTP server takes no {where}"
    if form.command and (problem := address_problem(Address(command=tuple(form.command)))):
        return "command", problem
    if problem := address_problem(Address(headers=form.headers)):
        return _header_field(form.headers), problem
    if problem := _mcp_url_problem(form.url):
        return "url", problem
    if form.kind == RemoteServer.Kind.HTTP and not form.signing_secret:
        return "signing_secret", "an HTTP server's requests are signed: give it a signing_secret"
    return "", ""


def _header_field(headers: Mapping[str, str]) -> str:
    """The field of the first header :func:`headers_problem` refuses, by its dotted path
    (``headers.Host``): the first one with which the headers before it become refused."""
    items = list(headers.items())
    for end in range(1, len(items) + 1):
        if address_problem(Address(headers=dict(items[:end]))):
            return f"headers.{items[end - 1][0]}"
    return "headers"


def _mcp_form_problem(form: ServerForm) -> tuple[str, str]:
    if bool(form.url) == bool(form.command):
        where = "command" if form.command else "url"
        return where, "an MCP server has a url or a command: one of them, not both"
    if form.signing_secret:
        message = "only HTTP servers' requests are signed: an MCP server takes no signing_secret"
        return "signing_secret", message
    return "", ""


def _mcp_url_problem(url: str) -> str:
    """Why an MCP server's ``url`` is refused without trying it (:mod:`toolcalls.addresses`:
    not http(s), credentials, port, host name, an address not public where private ones are
    not allowed), or ``""``. A host that cannot be resolved now is left to the listing, which
    is then ``server_unreachable`` (an HTTP tool's URLs: :func:`_urls_problem`, whole)."""
    if not url:
        return ""
    try:
        url_check(url, allow_private=settings.CALLGATE_REMOTE_ALLOW_PRIVATE)
    except UrlRefused as exc:
        return str(exc)
    except OSError:  # resolved again for the listing, which then fails: server_unreachable
        pass
    return ""


def _list(address: Address) -> dict[str, ServedTool]:
    """Every tool the MCP server at ``address`` lists, by name (a name given to several tools
    once, with its problem: :func:`~toolcalls.remote.clients.served_by_name`). Raises
    :class:`RemoteError` (``server_unreachable``: it cannot be reached, or its answer is no
    listing)."""
    try:
        listing = mcp_list_tools(address, timeout_s=DISCOVERY_TIMEOUT_S)
    except RemoteUnavailable as exc:
        raise RemoteError("server_unreachable", f"the MCP server cannot be used: {exc}") from exc
    except Exception as exc:  # a server that answers nonsense is as unusable as a silent one
        message = f"the MCP server's tool listing cannot be used: {type(exc).__name__}: {exc}"
        raise RemoteError("server_unreachable", message) from exc
    return served_by_name(listing)


def remote_server_discover(*, server_pk: int, actor: Actor) -> list[RemoteTool]:
    """List an MCP server's tools again and record what changed (new tools, new revisions —
    which disable the tool until it is enabled again — and tools no longer served). Returns
    the server's tools. Raises :class:`RemoteError` (``server_unreachable``;
    ``invalid_server`` for an HTTP server, or one Callgate refuses without trying: its headers,
    a command where stdio is not allowed)."""
    server = RemoteServer.objects.get(pk=server_pk)
    address = server_address(server)
    mcp = server.kind == RemoteServer.Kind.MCP
    problem = address_problem(address) if mcp else "only MCP servers list their tools"
    if problem:
        raise RemoteError("invalid_server", problem)
    listing = _list(address)
    with transaction.atomic(durable=True):
        server = RemoteServer.objects.select_for_update().get(pk=server_pk)
        _listing_record(server, listing, actor)
    return list(server.tools.order_by("name"))


def _listing_record(server: RemoteServer, served: Mapping[str, ServedTool], actor: Actor) -> None:
    for name, tool in served.items():
        _observe(server, name, tool, actor)
    for gone in server.tools.exclude(remote_name__in=list(served)):
        _observe(server, gone.remote_name, None, actor)


def remote_tool_observe(*, tool_pk: int, served: ServedTool | None, actor: Actor) -> None:
    """Record how a call found the tool served (``None``: no longer listed); a new revision
    disables it until an administrator enables it again."""
    with transaction.atomic(durable=True):
        tool = RemoteTool.objects.select_related("server").get(pk=tool_pk)
        server = RemoteServer.objects.select_for_update().get(pk=tool.server_id)
        _observe(server, tool.remote_name, served, actor)


def _observe(server: RemoteServer, name: str, served: ServedTool | None, actor: Actor) -> None:
    """Bring the row of ``name`` in line with ``served``; the server row is locked."""
    tool = server.tools.filter(remote_name=name).first()
    if served is None:
        if tool is not None and tool.problem != GONE:
            _tool_save(tool, enabled=False, problem=GONE)
            _event(server, tool, RemoteEvent.Kind.TOOL_GONE, actor, {})
        return
    _revision_record(server, tool, name, served, actor, sha=rules.served_sha256(served))


def _revision_record(
    server: RemoteServer,
    tool: RemoteTool | None,
    name: str,
    served: ServedTool,
    actor: Actor,
    *,
    sha: str,
    urls: Mapping[str, str] | None = None,
) -> None:
    """Store ``served`` (revision ``sha``; an HTTP tool's ``urls``) as the served revision of
    ``tool`` (``None``: a new tool), disabled until enabled, unless it is the stored one."""
    if tool is not None and tool.served_sha256 == sha and tool.problem != GONE:
        return
    kind = RemoteEvent.Kind.TOOL_DISCOVERED if tool is None else RemoteEvent.Kind.TOOL_CHANGED
    tool = tool or RemoteTool(tenant_id=server.tenant_id, server=server, remote_name=name)
    tool.name = rules.model_name(server.name, name)
    tool.description = served.description
    tool.input_schema = dict(served.input_schema)
    tool.annotations = dict(served.annotations)
    tool.served_sha256 = sha
    for field_name, url in (urls or {}).items():
        setattr(tool, field_name, url)
    if kind == RemoteEvent.Kind.TOOL_DISCOVERED:
        _prefill(tool)
    _tool_save(tool, enabled=False, problem=rules.served_problem(served, server_name=server.name))
    details = {"served_sha256": sha, "pinned_sha256": tool.pinned_sha256, **(urls or {})}
    _event(server, tool, kind, actor, details)


def _prefill(tool: RemoteTool) -> None:
    """MCP annotations suggest a risk for the review; they never enable anything."""
    hints = tool.annotations
    if hints.get("readOnlyHint"):
        tool.risk = "read"
    elif hints.get("destructiveHint", True):
        tool.risk = "irreversible"
    else:
        tool.risk = "write"


def _tool_save(tool: RemoteTool, *, enabled: bool, problem: str) -> None:
    tool.enabled = enabled
    tool.problem = problem
    tool.save()


def _event(
    server: RemoteServer,
    tool: RemoteTool | None,
    kind: str,
    actor: Actor,
    details: Mapping[str, Any],
) -> None:
    RemoteEvent.objects.create(
        tenant_id=server.tenant_id,
        server=server,
        tool=tool,
        kind=kind,
        actor=actor.audit_name,
        details=dict(details),
    )


@dataclass(frozen=True)
class HttpToolForm:
    """An HTTP tool: its ``name`` (after the server's prefix), ``description``,
    ``input_schema`` (JSON Schema of the arguments object), ``url`` it is POSTed to and an
    optional ``reconcile_url`` asked with the idempotency key after a lost answer."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    url: str
    reconcile_url: str = ""


def remote_http_tool_register(*, server_pk: int, form: HttpToolForm, actor: Actor) -> RemoteTool:
    """Register (or change: a new revision, disabled until enabled again) an HTTP tool of an
    HTTP server; its revision covers its URLs too, so another ``url`` or ``reconcile_url`` is a
    change like any other. Raises :class:`RemoteError` (``invalid_server``, ``invalid_tool``)."""
    served = ServedTool(form.name, form.description, dict(form.input_schema), {})
    with transaction.atomic(durable=True):
        server = RemoteServer.objects.select_for_update().get(pk=server_pk)
        if server.kind != RemoteServer.Kind.HTTP:
            raise RemoteError("invalid_server", "HTTP tools belong to an HTTP server")
        where, problem = _http_tool_problem(served, form, server_name=server.name)
        if problem:
            raise _field_refused("invalid_tool", where, problem)
        tool = server.tools.filter(remote_name=form.name).first()
        if tool is None or not _stored_without_urls(tool, served, form):
            urls = {"url": form.url, "reconcile_url": form.reconcile_url}
            sha = _http_sha256(served, urls)
            _revision_record(server, tool, form.name, served, actor, sha=sha, urls=urls)
    return server.tools.get(remote_name=form.name)


def _http_sha256(served: ServedTool, urls: Mapping[str, str]) -> str:
    """An HTTP tool's revision: SHA-256 over the served revision's digest and its URLs."""
    return digest({"served_sha256": rules.served_sha256(served), **urls})


def _stored_without_urls(tool: RemoteTool, served: ServedTool, form: HttpToolForm) -> bool:
    """``tool`` is stored as ``form`` registers it, under a revision registered before HTTP
    revisions covered the URLs (the served digest alone): it stays as it is."""
    same_urls = (tool.url, tool.reconcile_url) == (form.url, form.reconcile_url)
    return same_urls and tool.served_sha256 == rules.served_sha256(served)


def _http_tool_problem(
    served: ServedTool, form: HttpToolForm, *, server_name: str
) -> tuple[str, str]:
    """The first field of ``form`` that breaks a rule and why, or ``("", "")``."""
    if problem := rules.served_name_problem(served, server_name=server_name):
        return "name", problem
    if problem := rules.served_schema_problem(served):
        return "input_schema", problem
    if not form.url:
        return "url", "an HTTP tool needs a url"
    for where in ("url", "reconcile_url"):
        url = getattr(form, where)
        try:
            if url:
                address_check(Address(url=url))
        except RemoteUnavailable as exc:
            return where, str(exc)
    return "", ""


@dataclass(frozen=True)
class Review:
    """An administrator's settings for a tool: ``risk`` (read/write/irreversible),
    ``timeout_ms``, ``approval`` (never/always/condition) with ``approval_condition``, and the
    idempotency-key form (``key_context`` among :data:`rules.KEY_CONTEXT_FIELDS`,
    ``key_arguments``: top-level argument names; side-effecting tools need at least one). The
    key holds the tenant and the subject whatever ``key_context`` says; the key arguments (but
    a ``>``/``>=`` condition's, which may be lowered) are what an edit at approval keeps."""

    risk: str
    timeout_ms: int
    approval: str
    approval_condition: str = ""
    key_context: Sequence[str] = ()
    key_arguments: Sequence[str] = ()


def remote_tool_enable(*, tool_pk: int, review: Review, actor: Actor) -> RemoteTool:
    """Enable the tool's served revision (pinning it) with ``review``'s settings; the revision is
    checked again by today's rules (it may have been stored before them). Raises
    :class:`RemoteError` (``invalid_tool``: it cannot be enabled; ``invalid_review``)."""
    with transaction.atomic(durable=True):
        tool = RemoteTool.objects.select_related("server").get(pk=tool_pk)
        server = RemoteServer.objects.select_for_update().get(pk=tool.server_id)
        tool.refresh_from_db()
        problem = tool.problem or rules.served_problem(_served(tool), server_name=server.name)
        if problem or registry.get(tool.name) is not None:
            problem = problem or f"{tool.name} is the name of a tool deployed with Callgate"
            raise RemoteError("invalid_tool", problem)
        _review_check(tool, review)
        for name in ("risk", "timeout_ms", "approval", "approval_condition"):
            setattr(tool, name, getattr(review, name))
        tool.key_context, tool.key_arguments = list(review.key_context), list(review.key_arguments)
        tool.pinned_sha256 = tool.served_sha256
        _tool_save(tool, enabled=True, problem="")
        details = {"pinned_sha256": tool.pinned_sha256, **review.__dict__}
        _event(server, tool, RemoteEvent.Kind.TOOL_ENABLED, actor, details)
    return tool


def _served(tool: RemoteTool) -> ServedTool:
    """The revision stored for ``tool``, as its server served it."""
    return ServedTool(tool.remote_name, tool.description, tool.input_schema, tool.annotations)


def _review_check(tool: RemoteTool, review: Review) -> None:
    """Raises ``invalid_review`` naming the first field of ``review`` that breaks a rule."""
    where, problem = _review_problem(tool, review)
    if problem:
        raise _field_refused("invalid_review", where, problem)


def _review_problem(tool: RemoteTool, review: Review) -> tuple[str, str]:
    properties = tool.input_schema.get("properties") or {}
    if review.risk not in RISKS:
        return "risk", f"risk must be one of {list(RISKS)}"
    if not 0 < review.timeout_ms <= MAX_TIMEOUT_MS:
        return "timeout_ms", f"timeout_ms must be between 1 and {MAX_TIMEOUT_MS}"
    if review.approval not in RemoteTool.Approval.values:
        return "approval", f"approval must be one of {RemoteTool.Approval.values}"
    if review.approval == RemoteTool.Approval.CONDITION:
        if problem := _condition_problem(review.approval_condition, properties):
            return "approval_condition", problem
    elif review.approval_condition:
        return "approval_condition", "approval_condition goes only with approval 'condition'"
    for where in ("key_context", "key_arguments"):
        if problem := _names_problem(where, getattr(review, where)):
            return where, problem
    if not set(review.key_context) <= set(rules.KEY_CONTEXT_FIELDS):
        return "key_context", f"key_context fields are among {list(rules.KEY_CONTEXT_FIELDS)}"
    if not set(review.key_arguments) <= set(properties):
        return "key_arguments", "key_arguments must name arguments the schema declares"
    if review.risk != "read" and not review.key_arguments:
        message = "a side-effecting tool needs key_arguments naming the intent's arguments"
        return "key_arguments", message
    return "", ""


def _names_problem(field: str, names: Sequence[object]) -> str:
    """Why ``names`` is no list of distinct names, or ``""``: a name given twice is a mistake,
    not a wish for it twice."""
    if not all(isinstance(name, str) for name in names):
        return f"{field} is a list of names, each a string"
    repeated = sorted(str(name) for name, count in Counter(names).items() if count > 1)
    return f"{field} names {', '.join(repeated)} more than once" if repeated else ""


def _condition_problem(condition: str, properties: Mapping[str, Any]) -> str:
    try:
        name, _, _ = rules.condition_parse(condition)
    except ValueError as exc:
        return str(exc)
    if name not in properties:
        return f"the condition names {name!r}, which is no argument"
    declared = properties[name].get("type") if isinstance(properties[name], Mapping) else None
    kinds = declared if isinstance(declared, list) else [declared]
    if not {"integer", "number"} & set(kinds):
        return f"the condition compares {name!r} with a number: the schema must declare it one"
    return ""


def remote_tool_disable(*, tool_pk: int, actor: Actor) -> RemoteTool:
    """Take the tool out of its tenant's catalogue (calls parked for it then revalidate to
    ``APPROVAL_STALE``)."""
    with transaction.atomic(durable=True):
        tool = RemoteTool.objects.select_related("server").get(pk=tool_pk)
        server = RemoteServer.objects.select_for_update().get(pk=tool.server_id)
        tool.refresh_from_db()
        if tool.enabled:
            _tool_save(tool, enabled=False, problem=tool.problem)
            _event(server, tool, RemoteEvent.Kind.TOOL_DISABLED, actor, {})
    return tool
