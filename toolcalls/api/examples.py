"""OpenAPI examples and shared parameters for the API documentation."""

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter

from toolcalls.api.idempotency import HEADER, KEY_PATTERN, MAX_KEY_LENGTH

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    # HTTP drops blanks around a header's value; the server counts what is left, and refuses a
    # comma (two headers joined) or a control character in it.
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": KEY_PATTERN},
    location=OpenApiParameter.HEADER,
    required=True,
    description=f"Required on every POST: up to {MAX_KEY_LENGTH} characters, no comma or "
    "control character, unique per request and API key. The same key with the same request "
    "returns the first response (Idempotent-Replayed: true); with a different request, 409.",
)

CREATE_LIVE = OpenApiExample(
    "Refund request, live model",
    request_only=True,
    value={
        "family": "openai_responses",
        "model": "gpt-5.1",
        "input": "Please refund my damaged headphones from order ORD-1001.",
        "subject_ref": "cus_1001",
        "tools": ["get_order", "create_refund_draft", "submit_refund"],
        "budgets": {"max_turns": 8, "max_cost_usd": 1.0},
        "metadata": {"ticket": "T-4821"},
        "transport": "live",
    },
)

#: First in the document: it runs on a fresh install (the live one needs a provider's key).
CREATE_REPLAY = OpenApiExample(
    "Scripted model (replay transport)",
    request_only=True,
    value={
        "family": "openai_responses",
        "model": "gpt-5.1",
        "input": "Hello",
        "subject_ref": "cus_1001",
        "transport": "replay",
        "replies": [
            {
                "kind": "response",
                "http_status": 200,
                "body": {
                    "id": "resp_1",
                    "status": "completed",
                    "output": [
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "Hello!"}],
                        }
                    ],
                },
            }
        ],
    },
)

EXTEND = OpenApiExample(
    "Allow more turns",
    request_only=True,
    value={"budgets": {"max_turns": 20}, "note": "customer is waiting"},
)

DECIDE_APPROVE = OpenApiExample("Approve", request_only=True, value={"decision": "approve"})
DECIDE_EDIT = OpenApiExample(
    "Approve with a lower amount",
    request_only=True,
    value={
        "decision": "approve",
        "arguments": {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 3000},
    },
)
DECIDE_DENY = OpenApiExample(
    "Deny",
    request_only=True,
    value={"decision": "deny", "reason": "Refunds for cosmetic damage need a photo first."},
)

CANCEL = OpenApiExample(
    "Cancel", request_only=True, value={"reason": "The customer withdrew the request."}
)
STOP = OpenApiExample(
    "Stop", request_only=True, value={"reason": "Handled by phone; nothing more to do."}
)
RESOLVE = OpenApiExample(
    "It did not happen",
    request_only=True,
    value={"resolution": "not_applied", "note": "No payment for ORD-1001 in the ledger."},
)

# Responses. Each is checked against the schema by the test suite (tests/api/test_contract.py).

_OPERATION_ID = "op_01JDX3K7M2Q8R4T6V9W0YZABCD"
_CALL_ID = "tc_01JDX3K9B5C7D9F1G3H5J7K9MN"
_APPROVAL_ID = "apr_01JDX3KB2N4P6Q8R0S2T4V6WXY"
_AT = "2025-11-30T09:15:02.123456Z"

OPERATION_VALUE = {
    "id": _OPERATION_ID,
    "state": "WAITING_APPROVAL",
    "ended": False,
    "tenant": "acme",
    "subject_ref": "cus_1001",
    "family": "openai_responses",
    "model": "gpt-5.1",
    "transport": "live",
    "stream": False,
    "agent": None,
    "instructions": None,
    "messages": [],
    "input": "Please refund my damaged headphones from order ORD-1001.",
    "settings": {},
    "tools": ["get_order", "create_refund_draft", "submit_refund"],
    "budgets": {"max_turns": 8, "max_cost_usd": 1.0},
    "counters": {
        "turns": 3,
        "tool_calls": 3,
        "calls_per_tool": {"get_order": 1, "create_refund_draft": 1, "submit_refund": 1},
        "input_tokens": 2310,
        "output_tokens": 188,
        "cost_usd": 0.0047,
        "no_progress_turns": 0,
    },
    "deadline_at": "2025-11-30T10:15:00.000000Z",
    "final_text": None,
    "terminal_reason": None,
    "reason_code": None,
    "parent": None,
    "follow_ups": [],
    "metadata": {"ticket": "T-4821"},
    "created_at": _AT,
    "updated_at": "2025-11-30T09:15:04.812034Z",
}
_DONE = {
    **OPERATION_VALUE,
    "state": "COMPLETED",
    "ended": True,
    "final_text": "I refunded $49.99 to your card for order ORD-1001.",
}

TURN_VALUE = {
    "turn": 0,
    "response_id": "resp_04f3320a08d7710b",
    "outcome": "TOOL_PROPOSALS",
    "raw_reason": "completed",
    "text": None,
    "error_message": None,
    "usage": {"input_tokens": 712, "output_tokens": 41},
    "provider": "openai",
    "family": "openai_responses",
    "model": "gpt-5.1",
    "sdk_version": "openai 3.1.0",
    "adapter_revision": "openai_responses/4",
    "transport": "live",
    "latency_ms": 812,
    "created_at": _AT,
}

CALL_VALUE = {
    "id": _CALL_ID,
    "provider_call_id": "call_7Hq2LmNc4RtVx9KpW3sYb1Zd",
    "turn": 2,
    "position": 0,
    "tool": "submit_refund",
    "state": "WAITING_APPROVAL",
    "attempt": 0,
    "arguments": {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999},
    "arguments_sha256": "9f2c4b7e61d0a3f85e7c2d19b4a6f03e8d5c7b1a29e4f6083c5d7e9a1b2c4d6f",
    "arguments_edited": False,
    "request_sha256": None,
    "result_sha256": None,
    "binding_sha256": None,
    "idempotency_key": "refund:ORD-1001:RD-ORD-1001-1",
    "error_code": None,
    "model_result": None,
    "created_at": _AT,
    "updated_at": _AT,
}

EVENT_VALUE = {
    "sequence": 7,
    "kind": "approval.requested",
    "actor": "system:engine",
    "from_state": None,
    "to_state": "PENDING",
    "call": _CALL_ID,
    "approval": _APPROVAL_ID,
    "details": {"tool": "submit_refund", "risk": "irreversible"},
    "created_at": _AT,
    "prev_hash": "4be1c0d9a7f3e2b8c6d5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3",
    "hash": "a3f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1",
}

APPROVAL_VALUE = {
    "id": _APPROVAL_ID,
    "state": "PENDING",
    "superseded": False,
    "operation": _OPERATION_ID,
    "call": _CALL_ID,
    "provider_call_id": "call_7Hq2LmNc4RtVx9KpW3sYb1Zd",
    "tool": "submit_refund",
    "risk": "irreversible",
    "arguments": {"amount_cents": 4999, "draft_id": "RD-ORD-1001-1", "order_id": "ORD-1001"},
    "arguments_sha256": "9f2c4b7e61d0a3f85e7c2d19b4a6f03e8d5c7b1a29e4f6083c5d7e9a1b2c4d6f",
    "original_arguments": None,
    "amount_cents": 4999,
    "reason": "Irreversible refunds above $25.00 need an operator.",
    "schema_version": "1",
    "policy_revision": "refunds-2025-11",
    "requested_by": "service:billing-service",
    "created_at": _AT,
    "expires_at": "2025-11-30T09:45:02.123456Z",
    "decided_by": None,
    "decided_at": None,
    "decision_reason": None,
}

TOOL_VALUE = {
    "name": "get_order",
    "description": "Look up one of the customer's orders.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
    "schema_version": "1",
    "risk": "read",
    "timeout_ms": 5000,
    "approval": {"policy": "Never: it only reads.", "revision": "1"},
    "enabled": True,
    "overrides": {"max_calls": None, "approval": None, "approval_threshold": None},
}


def _response(name: str, value: object) -> OpenApiExample:
    return OpenApiExample(name, value=value, response_only=True)


def page(name: str, item: object) -> OpenApiExample:
    """A list's example: one item, which the schema shows inside a page."""
    return _response(name, item)


OPERATION = _response("Parked for approval", OPERATION_VALUE)
OPERATION_STARTED = _response(
    "Started",
    {
        **OPERATION_VALUE,
        "state": "PENDING",
        "counters": {
            **OPERATION_VALUE["counters"],  # type: ignore[dict-item]
            "turns": 0,
            "tool_calls": 0,
            "calls_per_tool": {},
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
        },
    },
)
OPERATION_DONE = _response("Completed", _DONE)
OPERATION_CANCELLED = _response(
    "Cancelled",
    {
        **OPERATION_VALUE,
        "state": "CANCELLED",
        "ended": True,
        "terminal_reason": "CANCELLED: The customer withdrew the request.",
        "reason_code": "CANCELLED",
    },
)
OPERATION_STOPPED = _response(
    "Stopped",
    {
        **OPERATION_VALUE,
        "state": "STOPPED",
        "ended": True,
        "terminal_reason": "STOPPED: Handled by phone; nothing more to do.",
        "reason_code": "STOPPED",
    },
)
OPERATION_RESUMED = _response("Resumed", {**OPERATION_VALUE, "state": "MODEL_REQUESTED"})
OPERATION_RESOLVED = _response(
    "Resolved: its results go to the model", {**OPERATION_VALUE, "state": "RESULTS_READY"}
)
OPERATIONS = page("A page of operations", OPERATION_VALUE)
TURNS = page("A page of turns", TURN_VALUE)
CALLS = page("A page of calls", CALL_VALUE)
EVENTS = page("A page of audit events", EVENT_VALUE)
APPROVALS = page("A page of approvals", APPROVAL_VALUE)
APPROVAL = _response("Pending", APPROVAL_VALUE)
APPROVAL_DECIDED = _response(
    "Approved",
    {
        **APPROVAL_VALUE,
        "state": "APPROVED",
        "decided_by": "service:refund-desk",
        "decided_at": "2025-11-30T09:20:11.004512Z",
    },
)
TOOLS = page("The catalogue", TOOL_VALUE)
LIVE = _response("Alive", {"status": "ok"})
READY = _response("Ready", {"status": "ok", "checks": {"database": True, "broker": True}})
NOT_READY = _response(
    "Broker unreachable", {"status": "unavailable", "checks": {"database": True, "broker": False}}
)

EVENT_STREAM = _response(
    "A call parked for approval",
    {
        "id": "7",
        "event": "approval.requested",
        "data": '{"sequence":7,"kind":"approval.requested",'
        '"note":"waiting for a person to approve submit_refund",…}',
    },
)

# The tool catalogue and remote tools.

TOOL_SET = OpenApiExample(
    "Enable, every call approved by a person",
    request_only=True,
    value={"enabled": True, "max_calls": 3, "approval": "always", "approval_threshold": None},
)
TOOL_DISABLE = OpenApiExample("Disable", request_only=True, value={"enabled": False})
TOOL = _response("As the tenant has it", TOOL_VALUE)

FORK = OpenApiExample(
    "From the second turn, another model",
    request_only=True,
    value={"from_turn": 1, "model": "gpt-5.1-mini"},
)
FOLLOW_UP = OpenApiExample(
    "The user's next message",
    request_only=True,
    value={"input": "Thanks! Can you also refund the shipping fee?"},
)
OPERATION_FORKED = _response("Started", {**OPERATION_STARTED.value, "model": "gpt-5.1-mini"})

_REMOTE_TOOL_VALUE: dict[str, Any] = {
    "name": "crm__find_customer",
    "remote_name": "find_customer",
    "description": "Find a customer by email address.",
    "input_schema": {
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "required": ["email"],
    },
    "annotations": {"readOnlyHint": True},
    "served_sha256": "5d41402abc4b2a76b9719d911017c592ae2f3c1b8f4e6d7a9b0c1d2e3f4a5b6c",
    "pinned_sha256": None,
    "changed": False,
    "problem": None,
    "enabled": False,
    "risk": "read",
    "timeout_ms": None,
    "approval": "always",
    "approval_condition": None,
    "key_context": [],
    "key_arguments": [],
    "url": None,
    "reconcile_url": None,
    "updated_at": _AT,
}
_REMOTE_TOOL_ENABLED = {
    **_REMOTE_TOOL_VALUE,
    "pinned_sha256": _REMOTE_TOOL_VALUE["served_sha256"],
    "enabled": True,
    "timeout_ms": 5000,
    "approval": "never",
}
_REMOTE_SERVER_VALUE = {
    "name": "crm",
    "kind": "mcp",
    "url": "https://mcp.example.com/crm",
    "command": [],
    "header_names": ["Authorization"],
    "created_at": _AT,
    "tools": [_REMOTE_TOOL_VALUE],
}

REMOTE_SERVER_CREATE = OpenApiExample(
    "An MCP server over HTTP",
    request_only=True,
    value={
        "name": "crm",
        "kind": "mcp",
        "url": "https://mcp.example.com/crm",
        "headers": {"Authorization": "Bearer crm-token"},
    },
)
REMOTE_SERVER_CHANGE = OpenApiExample(
    "A token rotated",
    request_only=True,
    value={"headers": {"Authorization": "Bearer crm-token-2"}},
)
REMOTE_HTTP_TOOL_CREATE = OpenApiExample(
    "An HTTP tool",
    request_only=True,
    value={
        "name": "create_ticket",
        "description": "Open a support ticket.",
        "input_schema": {
            "type": "object",
            "properties": {"subject": {"type": "string"}},
            "required": ["subject"],
        },
        "url": "https://tools.example.com/tickets",
        "reconcile_url": "https://tools.example.com/tickets/lookup",
    },
)
REVIEW = OpenApiExample(
    "A read-only tool, no approval",
    request_only=True,
    value={"risk": "read", "timeout_ms": 5000, "approval": "never"},
)
NO_FIELDS = OpenApiExample("No fields", request_only=True, value={})
REMOTE_SERVER = _response("Registered, its tools awaiting review", _REMOTE_SERVER_VALUE)
REMOTE_SERVERS = page("The tenant's servers", _REMOTE_SERVER_VALUE)
REMOTE_TOOL = _response("Awaiting review", _REMOTE_TOOL_VALUE)
REMOTE_TOOL_ENABLED = _response("Enabled", _REMOTE_TOOL_ENABLED)
REMOTE_TOOL_DISABLED = _response("Disabled", {**_REMOTE_TOOL_ENABLED, "enabled": False})

# Agent profiles.

_AGENT_REVISION_VALUE = {
    "name": "refund-desk",
    "revision": 1,
    "family": "openai_responses",
    "model": "gpt-5.1",
    "instructions": "You help customers with refunds. Never promise more than the order's total.",
    "settings": {},
    "tools": ["get_order", "create_refund_draft", "submit_refund"],
    "budgets": {"max_turns": 8},
    "approval_overrides": {"create_refund_draft": {"policy": "always"}},
    "note": "First version.",
    "created_by": "service:billing-service",
    "created_at": _AT,
}
_AGENT_VALUE = {
    "name": "refund-desk",
    "latest_revision": 1,
    "created_at": _AT,
    "updated_at": _AT,
    "latest": _AGENT_REVISION_VALUE,
}

AGENT_CREATE = OpenApiExample(
    "A refund desk",
    request_only=True,
    value={
        "name": "refund-desk",
        "family": "openai_responses",
        "model": "gpt-5.1",
        "instructions": _AGENT_REVISION_VALUE["instructions"],
        "tools": _AGENT_REVISION_VALUE["tools"],
        "budgets": {"max_turns": 8},
        "approval_overrides": {"create_refund_draft": {"policy": "always"}},
        "note": "First version.",
    },
)
AGENT_REVISE = OpenApiExample(
    "Another model",
    request_only=True,
    value={"model": "gpt-5.1-mini", "note": "A smaller model for the same desk."},
)
AGENT = _response("Created", _AGENT_VALUE)
AGENTS = page("A page of agent profiles", _AGENT_VALUE)
AGENT_REVISION = _response("The first revision", _AGENT_REVISION_VALUE)
AGENT_REVISED = _response(
    "A new revision",
    {
        **_AGENT_REVISION_VALUE,
        "revision": 2,
        "model": "gpt-5.1-mini",
        "note": "A smaller model for the same desk.",
    },
)
AGENT_KEPT = _response("Nothing changed: the latest revision", _AGENT_REVISION_VALUE)
AGENT_REVISIONS = page("A page of revisions", _AGENT_REVISION_VALUE)
