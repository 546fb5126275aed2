"""Enabled remote tools as :class:`~toolcalls.registry.ToolSpec` objects, built from their rows.

The spec carries the pinned revision (``schema_version`` ``remote-<first 16 hex of the pinned
digest>``), the administrator's risk, timeout and approval policy, and handlers that call the
server:

- MCP: one session lists the tools and calls the tool only if it is still served as pinned
  (a new revision is recorded, disabling the tool, and the call fails with ``TOOL_CHANGED``
  before anything is sent). ``_meta.callgate`` carries the idempotency key and the trusted
  context. ``isError`` results become error envelopes (``structuredContent.code``, else
  ``TOOL_ERROR``); ``structuredContent`` is the result data, else the text content. No
  reconcile: a lost answer of a side-effecting MCP tool escalates to a human. At resume after
  approval the tool's listing is checked again: a new revision → ``APPROVAL_STALE``.
- HTTP: ``POST url`` with ``{tool, arguments, call_id, operation_id, tenant_ref, subject_ref}``,
  ``Idempotency-Key`` and ``Callgate-Signature``; a 2xx JSON object is the result data. A lost
  answer is reconciled with ``GET reconcile_url`` when there is one: ``200 {"applied": true,
  "result": {...}}`` (the result an object) or ``200 {"applied": false}``; anything else, an
  applied answer without a result object included, cannot tell.

Failures before any effect (unreachable, refused, changed) are tool errors; a lost or unusable
answer raises, which the engine treats as a lost run (retried for read tools, an unknown outcome
for side-effecting ones).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any

from django.conf import settings

from toolcalls.actors import Actor
from toolcalls.binding import digest
from toolcalls.compiled import Compiled
from toolcalls.policy import ApprovalPolicy, always, never
from toolcalls.registry import Reconciliation, ToolContext, ToolError, ToolSpec
from toolcalls.remote import rules
from toolcalls.remote.clients import (
    RemoteBadReply,
    RemoteRefused,
    RemoteUnavailable,
    ServedTool,
    http_get,
    http_post,
    mcp_call_tool,
    mcp_list_tools,
    served_by_name,
)
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.remote.services import remote_tool_observe, server_address

#: Who records a revision change noticed while calling a tool.
OBSERVER = Actor.system("remote-tools")


def tenant_tool(*, tenant_id: int, name: str) -> RemoteTool | None:
    """The tenant's enabled remote tool called ``name``, with its server, or ``None``. Names
    without the server separator are never remote (no query)."""
    if rules.NAME_SEPARATOR not in name:
        return None
    tools = RemoteTool.objects.select_related("server")
    return tools.filter(tenant_id=tenant_id, name=name, enabled=True).first()


def tenant_tool_spec(*, tenant_id: int, name: str) -> ToolSpec | None:
    """The spec of the tenant's enabled remote tool called ``name``, or ``None``."""
    tool = tenant_tool(tenant_id=tenant_id, name=name)
    return remote_spec(tool) if tool is not None else None


def tenant_tools(*, tenant_id: int) -> list[RemoteTool]:
    """The tenant's enabled remote tools with their servers, by name (one query)."""
    tools = RemoteTool.objects.select_related("server").filter(tenant_id=tenant_id, enabled=True)
    return list(tools.order_by("name"))


def tenant_tool_names(*, tenant_id: int) -> list[str]:
    """Names of the tenant's enabled remote tools, sorted."""
    return sorted(_ENABLED_NAMES.run(tenant_pk=tenant_id))


#: The names of tenant ``tenant_pk``'s enabled remote tools (asked as each operation starts).
_ENABLED_NAMES: Compiled[str] = Compiled(
    lambda tenant_pk: RemoteTool.objects.filter(tenant_id=tenant_pk, enabled=True).values_list(
        "name", flat=True
    ),
    tenant_pk=int,
)


def remote_spec(tool: RemoteTool) -> ToolSpec:
    """The spec of an enabled tool, as its row says now."""
    mcp = tool.server.kind == RemoteServer.Kind.MCP
    side_effects = tool.risk != "read"
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        parameters=rules.strict_schema(tool.input_schema),
        schema_version=f"remote-{tool.pinned_sha256[:16]}",
        risk=tool.risk,  # type: ignore[arg-type]  # checked by the review
        timeout_ms=_timeout_ms(tool),
        timeout_grace_ms=HANDLER_GRACE_MS,
        handler=partial(_mcp_call if mcp else _http_call, tool),
        idempotency_key=partial(_key, tool) if side_effects else None,
        precondition=partial(_still_pinned, tool) if mcp else None,
        reconcile=partial(_http_reconcile, tool) if tool.reconcile_url and not mcp else None,
        amount_field=_amount_field(tool),
        edit_kept=_edit_kept(tool),
        edit_lowered=_edit_lowered(tool),
        approval=_approval(tool),
        revisions={
            "input": tool.pinned_sha256[:16],
            "output": "served",
            "effect": tool.risk,
            "handler": f"{tool.server.kind}-v1",
        },
    )


def _approval(tool: RemoteTool) -> ApprovalPolicy:
    revision = "remote-" + digest([tool.approval, tool.approval_condition])[:16]
    if tool.approval == RemoteTool.Approval.NEVER:
        return never(revision)
    if tool.approval == RemoteTool.Approval.ALWAYS:
        return always(f"{tool.name} always needs approval", revision)
    condition = tool.approval_condition
    return ApprovalPolicy(
        revision=revision,
        rule=partial(rules.condition_reason, condition),
        description=f"approval when {condition}",
    )


def _condition(tool: RemoteTool) -> tuple[str, str] | None:
    """The approval condition's argument and operator (``("amount_cents", ">")``), or ``None``
    for a tool approved ``never`` or ``always``."""
    if tool.approval != RemoteTool.Approval.CONDITION:
        return None
    name, op, _ = rules.condition_parse(tool.approval_condition)
    return name, op


def _amount_field(tool: RemoteTool) -> str | None:
    """The condition's argument, when it is an amount in cents (shown in the approval queue)."""
    name = (_condition(tool) or ("", ""))[0]
    return name if name.endswith("_cents") else None


def _edit_lowered(tool: RemoteTool) -> tuple[str, ...]:
    """The argument of a ``>``/``>=`` condition (how much: a refund's amount), which an
    operator's edit at approval may lower but never raise; ``()`` for other tools."""
    name, op = _condition(tool) or ("", "")
    return (name,) if op in (">", ">=") else ()


def _edit_kept(tool: RemoteTool) -> tuple[str, ...]:
    """The arguments an operator's edit at approval must keep as proposed: those naming the
    intent, its ``key_arguments`` (every argument of a tool with none), but for the one it may
    lower (:func:`_edit_lowered`)."""
    named = tool.key_arguments or list(tool.input_schema.get("properties") or {})
    lowered = _edit_lowered(tool)
    return tuple(name for name in named if name not in lowered)


#: Context fields every side-effecting remote tool's key holds, whatever its ``key_context``:
#: a stored result answers only calls for the same subject, never another customer's.
KEY_CONTEXT_ALWAYS = ("subject_ref",)


def _key(tool: RemoteTool, ctx: ToolContext, arguments: Mapping[str, Any]) -> str:
    """``<tool name>:<SHA-256>`` over the tenant, the subject and the other chosen context
    fields, and the chosen arguments (a form that chose the subject already keeps its key)."""
    fields = dict.fromkeys([*KEY_CONTEXT_ALWAYS, *tool.key_context])
    form = {
        "tenant_ref": ctx.tenant_ref,
        "context": {name: getattr(ctx, name) for name in fields},
        "arguments": {name: arguments.get(name) for name in tool.key_arguments},
    }
    return f"{tool.name}:{digest(form)}"


def _unavailable(exc: Exception) -> ToolError:
    message = "The tool's server cannot be reached; it did not run."
    return ToolError("TOOL_UNAVAILABLE", message, audit={"detail": str(exc)})


# --- MCP ----------------------------------------------------------------------------------------


def _mcp_call(tool: RemoteTool, ctx: ToolContext, arguments: Mapping[str, Any]) -> dict[str, Any]:
    meta = {
        "callgate": {
            "idempotency_key": ctx.idempotency_key,
            "tenant_ref": ctx.tenant_ref,
            "subject_ref": ctx.subject_ref,
            "operation_id": ctx.operation_id,
            "call_id": ctx.call_id,
        }
    }
    try:
        served, result = mcp_call_tool(
            server_address(tool.server),
            name=tool.remote_name,
            arguments=arguments,
            meta=meta,
            proceed=partial(_as_pinned, tool),
            timeout_s=_timeout_s(tool),
        )
    except RemoteUnavailable as exc:
        raise _unavailable(exc) from exc
    except RemoteRefused as exc:
        raise ToolError(exc.code, exc.message) from exc
    if result is None:
        raise _changed(tool, served, "TOOL_CHANGED")
    return _mcp_data(result.is_error, result.structured_content, result.content)


def _as_pinned(tool: RemoteTool, served: ServedTool | None) -> bool:
    return served is not None and rules.served_sha256(served) == tool.pinned_sha256


def _changed(tool: RemoteTool, served: ServedTool | None, code: str) -> ToolError:
    """Record the revision the server serves now, and the error for the call."""
    remote_tool_observe(tool_pk=tool.pk, served=served, actor=OBSERVER)
    what = "is no longer served" if served is None else "changed on its server"
    return ToolError(code, f"The tool {what} and awaits review; it did not run.")


def _mcp_data(is_error: bool, structured: Any, content: Any) -> dict[str, Any]:
    """The result data of an MCP ``CallToolResult``; raises :class:`ToolError` for ``isError``
    and :class:`RemoteBadReply` for one over ``CALLGATE_REMOTE_MAX_REPLY_BYTES``."""
    text = "\n".join(part.text for part in content if getattr(part, "type", "") == "text")
    data: dict[str, Any] = dict(structured) if isinstance(structured, dict) else {"text": text}
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > settings.CALLGATE_REMOTE_MAX_REPLY_BYTES:
        raise RemoteBadReply(f"the result is {size} bytes, over the reply limit")
    if is_error:
        code = data.get("code") if isinstance(data.get("code"), str) else "TOOL_ERROR"
        raise ToolError(str(code)[:80], (text or str(data.get("message", "")))[:500])
    return data


def _still_pinned(tool: RemoteTool, ctx: ToolContext, arguments: Mapping[str, Any]) -> None:
    """At resume after approval: the server must still serve the pinned revision, else the
    approval is stale. A server out of reach passes here; the call then fails before running."""
    try:
        listing = mcp_list_tools(server_address(tool.server), timeout_s=_timeout_s(tool))
    except Exception:  # the call itself checks again and says why it could not run
        return
    served = served_by_name(listing).get(tool.remote_name)
    if not _as_pinned(tool, served):
        raise _changed(tool, served, "APPROVAL_STALE")


#: How much longer than the exchange's own timeout (the review's ``timeout_ms``) the engine's
#: timer gives a call's handler. The exchange ends itself at its timeout and says whether the
#: call went out (:class:`~toolcalls.remote.clients.RemoteUnavailable` before, a lost answer
#: after); the engine's timer cannot tell, and a side effect it ended is an unknown outcome
#: even when nothing was sent. So it must not end the run first: the grace covers the handler's
#: own reads and the session's shutdown once its deadline passed (an MCP server over stdio is
#: given seconds to exit).
HANDLER_GRACE_MS = 5_000


def _timeout_ms(tool: RemoteTool) -> int:
    return tool.timeout_ms or 1000


def _timeout_s(tool: RemoteTool) -> float:
    return _timeout_ms(tool) / 1000


# --- HTTP ---------------------------------------------------------------------------------------


def _http_call(tool: RemoteTool, ctx: ToolContext, arguments: Mapping[str, Any]) -> dict[str, Any]:
    body = {
        "tool": tool.remote_name,
        "arguments": dict(arguments),
        "call_id": ctx.call_id,
        "operation_id": ctx.operation_id,
        "tenant_ref": ctx.tenant_ref,
        "subject_ref": ctx.subject_ref,
    }
    server = tool.server
    try:
        return http_post(
            tool.url,
            body=body,
            key=ctx.idempotency_key,
            secret=server.signing_secret,
            headers=server.headers,
            timeout_s=_timeout_s(tool),
        )
    except RemoteUnavailable as exc:
        raise _unavailable(exc) from exc
    except RemoteRefused as exc:
        raise ToolError(exc.code, exc.message) from exc


def _http_reconcile(tool: RemoteTool, ctx: ToolContext, key: str) -> Reconciliation:
    """The reconcile URL's answer for ``key``: ``200 {"applied": true, "result": {...}}`` →
    applied with that result, ``200 {"applied": false}`` → not applied, anything else (an
    applied answer without a result object included) → cannot tell. Raises what
    :func:`~toolcalls.remote.clients.http_get` raises."""
    server = tool.server
    status, reply = http_get(
        tool.reconcile_url,
        key=key,
        tenant_ref=ctx.tenant_ref,
        secret=server.signing_secret,
        headers=server.headers,
        timeout_s=_timeout_s(tool),
    )
    if status != 200 or reply is None:
        return Reconciliation(applied=None)
    applied, result = reply.get("applied"), reply.get("result")
    if applied is False:
        return Reconciliation(applied=False)
    if applied is True and isinstance(result, dict):
        return Reconciliation(applied=True, data=result)
    return Reconciliation(applied=None)
