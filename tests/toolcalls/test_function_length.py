"""Every function of the engine's services reads on one screen: at most 40 lines, counted from
its ``def`` line to the last line of its body."""

from __future__ import annotations

import ast
from pathlib import Path

import toolcalls.services

LIMIT = 40
SERVICES = Path(toolcalls.services.__file__).parent


def _lengths() -> list[tuple[int, str]]:
    found = []
    for path in sorted(SERVICES.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                found.append((length, f"{path.name}:{node.lineno} {node.name}"))
    return found


def test_the_scan_sees_the_services() -> None:
    names = {where.split()[-1] for _, where in _lengths()}
    assert {"turn_run", "call_set_dispatch", "operation_start"} <= names


def test_no_service_function_is_longer_than_forty_lines() -> None:
    long = sorted((where, length) for length, where in _lengths() if length > LIMIT)
    assert long == []
