"""The registry refuses specs that would weaken the capability surface."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.core.exceptions import ImproperlyConfigured

from toolcalls import registry
from toolcalls.registry import ToolSpec

BASE = ToolSpec(
    name="probe",
    description="Probe.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    schema_version="probe-v1",
    risk="read",
    timeout_ms=100,
    handler=lambda ctx, args: {},
    revisions={"input": "1", "output": "1", "effect": "1", "handler": "1"},
)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": "get_order"}, "already registered"),
        ({"parameters": {"type": "object", "properties": {}}}, "additionalProperties: false"),
        ({"parameters": {"type": "object", "additionalProperties": True}}, "additionalProperties"),
        ({"parameters": {"type": "nonsense"}}, "invalid JSON Schema"),
        ({"risk": "write"}, "need an idempotency_key"),
        ({"risk": "dangerous"}, "risk must be one of"),
        ({"revisions": {"input": "1"}}, "revisions must name exactly"),
        ({"timeout_ms": 0}, "timeout_ms must be positive"),
    ],
)
def test_bad_specs_are_refused(change: dict, problem: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=problem):
        registry.register(replace(BASE, **change))
    assert registry.get("probe") is None


def test_only_registered_names_resolve() -> None:
    assert registry.get("get_order") is not None
    assert registry.get("globals") is None
    assert registry.get("__import__") is None
    assert registry.names() == ["create_refund_draft", "get_order", "submit_refund"]
    assert [d.name for d in registry.declarations(["submit_refund", "nope", "get_order"])] == [
        "submit_refund",
        "get_order",
    ]
