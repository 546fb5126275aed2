"""The operation state machine as a picture: node positions, edges, and the path one operation
took, for a server-rendered SVG (``templates/toolcalls/diagram.svg``). Pure: no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from toolcalls.states import OPERATION_TRANSITIONS, OperationState

S = OperationState
WIDTH, HEIGHT = 880, 380
NODE_W, NODE_H = 136, 34

#: Where each state is drawn: the main loop along the top, the outcomes of a model reply below
#: the model request, the human ones on the right.
POSITIONS: dict[str, tuple[int, int]] = {
    S.PENDING: (80, 100),
    S.MODEL_REQUESTED: (240, 100),
    S.VALIDATING: (400, 100),
    S.EXECUTING: (560, 100),
    S.RESULTS_READY: (760, 100),
    S.WAITING_APPROVAL: (560, 210),
    S.ESCALATED: (760, 210),
    S.STOPPED: (760, 330),
    S.COMPLETED: (80, 330),
    S.REFUSED: (240, 330),
    S.INCOMPLETE: (400, 330),
    S.FAILED: (560, 330),
    S.CANCELLED: (400, 210),
}
#: Edges drawn only when an operation took them (every state can be cancelled or fail).
_ONLY_IF_TAKEN = frozenset({S.CANCELLED, S.FAILED})


@dataclass(frozen=True)
class Node:
    state: str
    x: int
    y: int
    visited: bool
    current: bool


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: str
    taken: int
    label_x: float
    label_y: float


@dataclass(frozen=True)
class Diagram:
    width: int
    height: int
    node_w: int
    node_h: int
    nodes: list[Node]
    edges: list[Edge]


def _path(source: str, target: str) -> tuple[str, float, float]:
    """An SVG path between two node centres (a loop for a self-transition), and a label point."""
    (x1, y1), (x2, y2) = POSITIONS[source], POSITIONS[target]
    if source == target:
        top = y1 - NODE_H / 2
        d = f"M {x1 - 20} {top} C {x1 - 30} {top - 40}, {x1 + 30} {top - 40}, {x1 + 20} {top}"
        return d, x1, top - 32
    # Bend every edge a little to one side, so an edge and its reverse do not overlap; start and
    # end on the boxes' borders so the arrowheads show.
    mx, my = (x1 + x2) / 2, (y1 + y2) / 2
    dx, dy = x2 - x1, y2 - y1
    length = max((dx * dx + dy * dy) ** 0.5, 1.0)
    bend = min(max(24.0, length * 0.18), 80.0)  # long edges arc clear of the boxes between
    cx, cy = mx - dy / length * bend, my + dx / length * bend
    sx, sy = _border(x1, y1, cx, cy)
    ex, ey = _border(x2, y2, cx, cy)
    d = f"M {sx:.1f} {sy:.1f} Q {cx:.1f} {cy:.1f} {ex:.1f} {ey:.1f}"
    return d, (mx + cx) / 2, (my + cy) / 2


def _border(x: float, y: float, towards_x: float, towards_y: float) -> tuple[float, float]:
    """Where the line from a box's centre (x, y) towards a point leaves the box."""
    dx, dy = towards_x - x, towards_y - y
    scale = min(
        (NODE_W / 2) / abs(dx) if dx else float("inf"),
        (NODE_H / 2 + 2) / abs(dy) if dy else float("inf"),
    )
    return x + dx * scale, y + dy * scale


def _edge(source: str, target: str, count: int) -> Edge:
    path, label_x, label_y = _path(source, target)
    return Edge(source, target, path, count, label_x, label_y)


def operation_diagram(*, transitions: Sequence[tuple[str, str]], current: str) -> Diagram:
    """The diagram with the path of ``transitions`` ((from, to) state pairs, in order)
    highlighted and ``current`` marked."""
    taken = Counter(transitions)
    visited = {state for pair in transitions for state in pair} | {current, S.PENDING}
    edges = [
        _edge(source, target, taken[(source, target)])
        for source, targets in OPERATION_TRANSITIONS.items()
        for target in sorted(targets)
        if taken[(source, target)] or (target not in _ONLY_IF_TAKEN and source != target)
    ]
    nodes = [
        Node(state, x, y, state in visited, state == current) for state, (x, y) in POSITIONS.items()
    ]
    return Diagram(WIDTH, HEIGHT, NODE_W, NODE_H, nodes, sorted(edges, key=lambda e: e.taken > 0))
