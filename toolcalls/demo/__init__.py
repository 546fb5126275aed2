"""The demo domain (orders and refunds) and its scripted scenarios.

Isolated from the engine: the engine never imports this package; it is reached only through
``settings.CALLGATE_TOOL_MODULES``.
"""
