"""Remote tool data: servers a tenant registered, the tools they serve, and what changed.

Rows are written by :mod:`toolcalls.remote.services` only. A tool is callable only while
``enabled``; enabling pins the served revision (``pinned_sha256``), and a server that later serves
another revision gets the tool disabled until an administrator enables the new one.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from toolcalls.models import Tenant


class RemoteServer(models.Model):
    """Where a tenant's remote tools are served.

    ``kind`` ``mcp``: an MCP server reached at ``url`` (streamable HTTP) or started from
    ``command`` (stdio, where ``CALLGATE_REMOTE_ALLOW_STDIO`` allows it); its tools are discovered.
    ``kind`` ``http``: a group of HTTP tools, each with its own URL, registered with their schema.
    ``name`` prefixes the model-facing name of every tool of the server (``<name>__<tool>``).
    ``headers`` are sent with every request (credentials the server expects); ``signing_secret``
    signs every HTTP tool request (``Callgate-Signature``).
    """

    class Kind(models.TextChoices):
        MCP = "mcp", "MCP server"
        HTTP = "http", "HTTP tools"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="remote_servers")
    name = models.CharField(max_length=30)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url = models.URLField(max_length=500, blank=True)
    command = models.JSONField(default=list, blank=True, help_text="stdio: argv of the command.")
    headers = models.JSONField(default=dict, blank=True)
    signing_secret = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="remote_server_unique_name"),
            models.CheckConstraint(
                condition=models.Q(kind__in=["mcp", "http"]), name="remote_server_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.name}"


class RemoteTool(models.Model):
    """One tool a server serves, as served, and the administrator's review of it.

    As served: ``remote_name``, ``description``, ``input_schema``, ``annotations`` (MCP hints,
    which only pre-fill the review) and ``served_sha256`` (SHA-256 of their canonical JSON; the
    revision; an HTTP tool's also covers its ``url`` and ``reconcile_url``). ``problem`` says why
    the served revision cannot be enabled (not valid JSON Schema, a name no model may call). The
    review: ``risk``, ``timeout_ms``, ``approval`` (``never``, ``always``, or ``condition``:
    ``approval_condition`` such as ``amount_cents > 2500``), the idempotency-key form
    (``key_context``: trusted context fields; ``key_arguments``: argument names) and, for HTTP
    tools, ``url`` and ``reconcile_url``.
    ``name`` is the model-facing name, unique within the tenant.
    """

    class Approval(models.TextChoices):
        NEVER = "never", "never"
        ALWAYS = "always", "always"
        CONDITION = "condition", "when a condition on an argument holds"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="remote_tools")
    server = models.ForeignKey(RemoteServer, on_delete=models.PROTECT, related_name="tools")
    remote_name = models.TextField()
    name = models.TextField()
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict, blank=True)
    served_sha256 = models.CharField(max_length=64)
    problem = models.TextField(blank=True)
    enabled = models.BooleanField(default=False)
    pinned_sha256 = models.CharField(max_length=64, blank=True)
    risk = models.CharField(max_length=20, blank=True)
    timeout_ms = models.PositiveIntegerField(null=True, blank=True)
    approval = models.CharField(max_length=20, choices=Approval.choices, default=Approval.ALWAYS)
    approval_condition = models.CharField(max_length=200, blank=True)
    key_context = models.JSONField(default=list, blank=True)
    key_arguments = models.JSONField(default=list, blank=True)
    url = models.URLField(max_length=500, blank=True)
    reconcile_url = models.URLField(max_length=500, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="remote_tool_unique_name"),
            models.UniqueConstraint(
                fields=["server", "remote_name"], name="remote_tool_unique_remote_name"
            ),
            models.CheckConstraint(
                condition=~models.Q(enabled=True) | ~models.Q(pinned_sha256=""),
                name="remote_tool_enabled_is_pinned",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def changed(self) -> bool:
        """The server serves another revision than the one last enabled."""
        return bool(self.pinned_sha256) and self.pinned_sha256 != self.served_sha256


class RemoteEvent(models.Model):
    """One append-only entry of what happened to a tenant's remote servers and tools: who
    registered, enabled or disabled what, what discovery found, what a server changed."""

    class Kind(models.TextChoices):
        SERVER_REGISTERED = "server_registered", "server registered"
        SERVER_CHANGED = "server_changed", "server's address, headers or secret changed"
        TOOL_DISCOVERED = "tool_discovered", "tool discovered"
        TOOL_CHANGED = "tool_changed", "tool changed on its server"
        TOOL_GONE = "tool_gone", "tool no longer served"
        TOOL_ENABLED = "tool_enabled", "tool enabled"
        TOOL_DISABLED = "tool_disabled", "tool disabled"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="remote_events")
    server = models.ForeignKey(RemoteServer, on_delete=models.PROTECT, related_name="events")
    tool = models.ForeignKey(
        RemoteTool, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    kind = models.CharField(max_length=40, choices=Kind.choices)
    actor = models.CharField(max_length=200)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.tool or self.server}"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise PermissionError("remote events are append-only")
