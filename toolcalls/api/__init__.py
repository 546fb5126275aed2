"""The REST API for backend services (``/api/v1/``): API keys, request idempotency, webhooks,
and the operation endpoints. Approval endpoints live in ``approvals.api``."""
