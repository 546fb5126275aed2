"""Tools that live outside Callgate: MCP servers and HTTP endpoints, behind the same gate.

An administrator registers a server for a tenant, reviews the tools it serves and enables each
with its risk, timeout, approval policy and idempotency-key form; an enabled tool becomes a
:class:`~toolcalls.registry.ToolSpec` (:mod:`toolcalls.remote.specs`) that the tenant's catalogue
resolves like a local one.
"""
