"""The HTTP 400 replies the replay transport answers with in a provider's name: the providers'
error envelopes, and the texts both Gemini families share (one backend checks both).

Used by the families' ``rules`` modules only. Envelopes: OpenAI "Error codes"
(https://platform.openai.com/docs/guides/error-codes) and the ``error`` object of the API
reference; Google "Troubleshooting guide" (https://ai.google.dev/gemini-api/docs/troubleshooting)
and the ``google.rpc.Status`` shape (https://cloud.google.com/apis/design/errors).
"""

from __future__ import annotations

from providers.base import WireReply

#: Gemini's texts for a broken function-calling history (public error reports).
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
RESPONSE_NOT_AFTER_CALL = (
    "Please ensure that function response turn comes immediately after a function call turn."
)


def openai_invalid_request(
    message: str, *, param: str | None, code: str | None = None
) -> WireReply:
    """OpenAI's 400:
    ``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return WireReply(kind="http_error", http_status=400, body=body)


def google_invalid_argument(message: str) -> WireReply:
    """Google's 400: ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}``."""
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return WireReply(kind="http_error", http_status=400, body=body)
