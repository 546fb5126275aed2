"""OpenAPI examples and shared parameters for the API documentation."""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=True,
    description="Required on every POST. The same key with the same request returns the first "
    "response (Idempotent-Replayed: true); with a different request, 409.",
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
