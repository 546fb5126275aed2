"""Fixtures of the engine's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.engine import EMPTY, REVISIONS
from toolcalls import registry
from toolcalls.registry import ToolSpec


@pytest.fixture
def tool(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Register a throwaway tool for one test: ``tool(name=..., handler=..., **spec fields)``."""

    def add(**fields: Any) -> ToolSpec:
        spec = ToolSpec(
            **{
                "description": "Test tool.",
                "parameters": EMPTY,
                "schema_version": "v1",
                "risk": "read",
                "timeout_ms": 1000,
                "revisions": REVISIONS,
                **fields,
            }
        )
        monkeypatch.setitem(registry._REGISTRY, spec.name, spec)
        return spec

    yield add
