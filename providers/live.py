"""Live transports: the official SDKs carry our adapters' request bodies to the provider.

The adapters build every request body and parse every raw reply; the SDKs supply
authentication, base URL, timeouts and HTTP. Raw access matters: the SDKs' typed helpers raise
on incomplete streams (``Didn't receive a response.completed event``) and would hide TRUNCATED,
so non-streamed replies are read as raw JSON (``with_raw_response``) and streamed ones as raw SSE
lines (``with_streaming_response``), decoded by :mod:`providers.sse`. SDK retries are off: the
engine retries with its own bounded backoff. SDK entry points and base-URL options: the SDKs'
READMEs (openai-python, anthropic-sdk-python: ``base_url``, ``max_retries``, ``timeout``,
``with_raw_response``, ``with_streaming_response``; google-genai: ``types.HttpOptions``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from providers import sse
from providers.base import WireReply
from providers.errors import TransportError
from providers.transports import ModelTransport, OnEvent


@dataclass(frozen=True)
class LiveSettings:
    """Credentials and endpoint of one provider. ``base_url`` ``None`` means the SDK default;
    ``timeout_s`` bounds one model request (seconds)."""

    api_key: str
    base_url: str | None
    timeout_s: float


def _headers(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(headers or {}).items()}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _collect(lines: Iterable[str], on_event: OnEvent | None) -> list[dict[str, Any]]:
    events = []
    for event in sse.decode(lines):
        events.append(event)
        if on_event:
            on_event(event)
    return events


class _StainlessTransport:
    """openai and anthropic SDKs share their raw/streaming response wrappers."""

    name = "live"

    def __init__(self, *, resource: Any, sdk: Any, stream: bool, stream_extra: Mapping[str, Any]):
        self._resource = resource
        self._sdk = sdk
        self._stream = stream
        self._stream_extra = dict(stream_extra)
        self.sdk_version = f"{sdk.__name__} {sdk.__version__}"

    def send(
        self,
        *,
        request: Mapping[str, Any],
        turn: int,
        model: str,
        on_event: OnEvent | None = None,
    ) -> WireReply:
        try:
            if self._stream:
                streamed = {**request, **self._stream_extra, "stream": True}
                with self._resource.with_streaming_response.create(**streamed) as response:
                    events = _collect(response.iter_lines(), on_event)
                    return WireReply(
                        kind="stream",
                        http_status=response.status_code,
                        headers=_headers(response.headers),
                        events=events,
                    )
            raw = self._resource.with_raw_response.create(**request)
            return WireReply(
                kind="response",
                http_status=raw.status_code,
                headers=_headers(raw.headers),
                body=_json(raw.http_response.text),
            )
        except self._sdk.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, Mapping) else _json(exc.response.text)
            if isinstance(body, Mapping) and "error" not in body:
                body = {"error": body}  # the SDK hands over the inner error object
            return WireReply(
                kind="http_error",
                http_status=exc.status_code,
                headers=_headers(exc.response.headers),
                body=body,
            )
        except self._sdk.APIConnectionError as exc:
            timeout = isinstance(exc, self._sdk.APITimeoutError)
            raise TransportError(
                f"{self.sdk_version}: {exc}",
                code="timeout" if timeout else "connection_error",
                retryable=True,
            ) from exc


def openai_transport(family: str, settings: LiveSettings, *, stream: bool) -> _StainlessTransport:
    """Responses (``client.responses``) or Chat Completions (``client.chat.completions``)."""
    import openai

    client = openai.OpenAI(
        api_key=settings.api_key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout_s,
    )
    if family == "openai_chat":
        return _StainlessTransport(
            resource=client.chat.completions,
            sdk=openai,
            stream=stream,
            stream_extra={"stream_options": {"include_usage": True}},
        )
    return _StainlessTransport(
        resource=client.responses, sdk=openai, stream=stream, stream_extra={}
    )


def anthropic_transport(settings: LiveSettings, *, stream: bool) -> _StainlessTransport:
    """Messages (``client.messages``)."""
    import anthropic

    client = anthropic.Anthropic(
        api_key=settings.api_key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout_s,
    )
    return _StainlessTransport(
        resource=client.messages, sdk=anthropic, stream=stream, stream_extra={}
    )


class GoogleTransport:
    """generateContent / streamGenerateContent and Interactions through google-genai.

    The SDK's typed ``generate_content`` re-serialises requests into its own types and cannot
    hand back raw streamed events, so requests go through the client's authenticated API client
    (``client._api_client``: the same object the typed methods use), which returns raw bodies and
    the raw event stream. Interactions use the same base URL and API version (``v1beta``).
    """

    name = "live"

    def __init__(self, family: str, settings: LiveSettings, *, stream: bool) -> None:
        from google import genai
        from google.genai import errors, types

        options = types.HttpOptions(
            base_url=settings.base_url,
            api_version="v1beta",
            timeout=int(settings.timeout_s * 1000),
        )
        # Keep the client: closing it (on garbage collection) closes the shared HTTP client.
        self._client = genai.Client(api_key=settings.api_key, http_options=options)
        self._api = self._client._api_client
        self._errors = errors
        self._family = family
        self._stream = stream
        self.sdk_version = f"google-genai {genai.__version__}"

    def _path(self, model: str) -> str:
        if self._family == "gemini_interactions":
            return "interactions?alt=sse" if self._stream else "interactions"
        verb = "streamGenerateContent?alt=sse" if self._stream else "generateContent"
        return f"models/{model}:{verb}"

    def send(
        self,
        *,
        request: Mapping[str, Any],
        turn: int,
        model: str,
        on_event: OnEvent | None = None,
    ) -> WireReply:
        body = dict(request)
        if self._family == "gemini_interactions" and self._stream:
            body["stream"] = True
        try:
            http_request = self._api._build_request("post", self._path(model), body)
            response = self._api._request(http_request, stream=self._stream)
        except self._errors.APIError as exc:
            return WireReply(
                kind="http_error",
                http_status=int(exc.code or 0),
                headers=_headers(getattr(exc.response, "headers", {})),
                body=exc.details,
            )
        except httpx2.TransportError as exc:  # no reply at all: refused, reset, timed out
            raise TransportError(
                f"{self.sdk_version}: {exc}", code="connection_error", retryable=True
            ) from exc
        if not self._stream:
            text = response.response_stream[0] if response.response_stream else ""
            return WireReply(
                kind="response",
                http_status=200,
                headers=_headers(response.headers),
                body=_json(text),
            )
        raw: Any = response.response_stream  # the httpx2 response, still streaming
        try:
            events = _collect(raw.iter_lines(), on_event)
        finally:
            raw.close()
        return WireReply(
            kind="stream", http_status=200, headers=_headers(response.headers), events=events
        )


def live_transport(family: str, settings: LiveSettings, *, stream: bool) -> ModelTransport:
    """The SDK transport for ``family`` (streaming or not)."""
    if family in ("openai_responses", "openai_chat"):
        return openai_transport(family, settings, stream=stream)
    if family == "anthropic_messages":
        return anthropic_transport(settings, stream=stream)
    if family in ("gemini_generate", "gemini_interactions"):
        return GoogleTransport(family, settings, stream=stream)
    raise ValueError(f"no live transport for {family!r}")
