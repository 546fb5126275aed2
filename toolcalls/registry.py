"""The fixed tool registry: the only way from a model-proposed name to code (docs/design.md §5).

Hosts register :class:`ToolSpec` objects at import time from the modules listed in
``settings.CALLGATE_TOOL_MODULES``. Model output never selects anything but a key of this
registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

from providers.base import ToolDeclaration
from toolcalls.policy import ApprovalPolicy, never
from toolcalls.schema_errors import LOCAL_ONLY, reference_problems
from toolcalls.schema_patterns import LinearValidator, pattern_problems

Risk = Literal["read", "write", "irreversible"]
RISKS: tuple[Risk, ...] = ("read", "write", "irreversible")
#: The permission (``app_label.codename``) a requester needs for a tool of each risk class to
#: run for them; a read needs none beyond membership of the tenant.
RISK_PERMISSIONS: Mapping[Risk, str] = {
    "write": "toolcalls.use_write_tools",
    "irreversible": "toolcalls.use_irreversible_tools",
}


@dataclass(frozen=True)
class ToolContext:
    """Trusted context a handler runs with; nothing here comes from model output.

    ``tenant_ref`` is the tenant slug, ``subject_ref`` whom the operation acts for,
    ``operation_id`` the ``op_…`` ID, ``provider_call_id`` the provider's call ID,
    ``idempotency_key`` the business-intent key ("" for tools without one) and ``call_id``
    Callgate's own ``call_…`` ID.
    """

    tenant_ref: str
    subject_ref: str
    operation_id: str
    provider_call_id: str
    idempotency_key: str = ""
    call_id: str = ""


class ToolError(Exception):
    """A handler's business failure. ``code`` and ``message`` go to the model (keep them safe);
    ``audit`` stays in protected audit data."""

    def __init__(self, code: str, message: str, *, audit: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.audit = dict(audit or {})


@dataclass(frozen=True)
class Reconciliation:
    """What the downstream system says about an effect whose outcome was lost.

    ``applied`` is True (the effect happened; ``data`` is the result the handler would have
    returned), False (nothing happened: a retry with the same key is safe) or None (cannot
    tell: a human decides).
    """

    applied: bool | None
    data: Mapping[str, Any] = field(default_factory=dict)


Handler = Callable[[ToolContext, Mapping[str, Any]], Mapping[str, Any]]
KeyFunction = Callable[[ToolContext, Mapping[str, Any]], str]
Precondition = Callable[[ToolContext, Mapping[str, Any]], None]
#: Returns why the operation's subject may not use what ``arguments`` name (a message for the
#: model), or ``None``.
Authorize = Callable[[ToolContext, Mapping[str, Any]], "str | None"]
Reconciler = Callable[[ToolContext, str], Reconciliation]
#: What a call means to a person: field name → value (strings, or integers for ``*_cents``).
Summary = Callable[[ToolContext, Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    """Everything the dispatcher needs to know about one tool.

    - ``parameters``: JSON Schema (Draft 2020-12) of the arguments object; the top level must set
      ``additionalProperties: false`` so unknown fields are rejected. References (``$ref``,
      ``$dynamicRef``) must resolve within it (``#…``); nothing is retrieved from elsewhere.
      Its patterns are matched in linear time, by RE2
      (:mod:`toolcalls.schema_patterns`): none may need backtracking.
    - ``risk``: ``read`` (may be retried), ``write`` or ``irreversible`` (side effects).
    - ``timeout_ms``: per-call handler timeout in milliseconds.
    - ``timeout_grace_ms``: how much longer the engine waits for a handler that ends itself at
      its ``timeout_ms`` and says whether its request went out (a remote tool's exchange), so
      that the handler, not the engine's timer, decides between "nothing sent" and a lost
      answer; 0 for a handler that does not.
    - ``handler(ctx, arguments) -> data``: returns the JSON-serialisable result data or raises
      :class:`ToolError`.
    - ``idempotency_key(ctx, arguments) -> str``: the business intent; required for side effects.
    - ``authorize(ctx, arguments) -> reason | None``: whether the operation's subject may use
      the resource the arguments name (a refund's order is the customer's); checked before the
      call is parked or run and again at resume. ``ctx`` names no call ID or key yet.
    - ``precondition(ctx, arguments)``: raises :class:`ToolError` when the call may no longer run:
      checked before an approval is recorded (a refused one is not) and again at resume.
      ``ctx`` names no idempotency key yet.
    - ``reconcile(ctx, idempotency_key) -> Reconciliation``: asks the downstream system whether
      an effect whose outcome was lost (timeout, crash) happened.
    - ``preview(ctx, arguments) -> data``: a dry run showing an approver the effect (reads
      only), after the precondition holds; a :class:`ToolError` it raises is shown as a notice.
    - ``amount_field``: the argument that holds a money amount in cents, shown in the approval
      queue.
    - ``summary(ctx, arguments) -> {field: value}``: what the call means to the people who
      decide it (reads only), stored on its approval when it opens and shown in the queue: for
      a refund ``customer``, ``order``, ``amount_cents`` with ``currency``, ``reason``. Values are
      strings, or integers in cents for fields named ``*_cents`` (shown in ``currency``). A
      :class:`ToolError` leaves the summary empty.
    - ``search_fields``: the keys of the arguments and of the result data that hold business
      identifiers (order, draft, refund IDs); the console's search finds calls by their values,
      and an operator who edits a call's arguments when approving it may not change them
      (unless ``edit_kept`` names those arguments instead).
    - ``edit_kept``: the arguments such an edit must keep as proposed, those naming the intent
      (``None``: those of ``search_fields``; a remote tool's key arguments).
    - ``edit_lowered``: numeric arguments such an edit may lower but never raise (how much: a
      remote tool's amount in its approval condition).
    - ``max_result_bytes``: limit on the canonical JSON of a result (``None``: the setting
      ``CALLGATE_MAX_RESULT_BYTES``); ``oversize`` is ``truncate`` (keep a marked preview) or
      ``reject`` (``RESULT_TOO_LARGE``; read-only tools only, as a side effect already happened).
    - ``approval``: the :class:`~toolcalls.policy.ApprovalPolicy`.
    - ``max_calls``: calls of this tool one operation may propose, below the operation's
      ``max_calls_per_tool`` budget (``None``: that budget alone); a tenant's catalogue sets it.
    - ``revisions``: ``input``, ``output``, ``effect``, ``handler`` revision strings, bound into
      every result.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    schema_version: str
    risk: Risk
    timeout_ms: int
    handler: Handler
    timeout_grace_ms: int = 0
    idempotency_key: KeyFunction | None = None
    authorize: Authorize | None = None
    precondition: Precondition | None = None
    reconcile: Reconciler | None = None
    preview: Handler | None = None
    amount_field: str | None = None
    summary: Summary | None = None
    search_fields: tuple[str, ...] = ()
    edit_kept: tuple[str, ...] | None = None
    edit_lowered: tuple[str, ...] = ()
    max_result_bytes: int | None = None
    oversize: Literal["truncate", "reject"] = "truncate"
    approval: ApprovalPolicy = field(default_factory=never)
    max_calls: int | None = None
    revisions: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def validator(self) -> Validator:
        """The arguments' validator: Draft 2020-12, patterns matched by RE2
        (:data:`~toolcalls.schema_patterns.LinearValidator`); ``iter_errors`` raises
        :class:`~toolcalls.schema_patterns.UnmatchablePattern` on reaching a pattern RE2
        cannot compile (a remote revision stored before patterns were checked, or one
        :func:`~toolcalls.schema_patterns.pattern_problems` does not find)."""
        return LinearValidator(dict(self.parameters), registry=LOCAL_ONLY)

    @cached_property
    def references_usable(self) -> bool:
        """Whether the schema's references all resolve within it and none loops
        (:func:`~toolcalls.schema_errors.reference_problems`): always, for a tool registered
        now; a remote tool's revision stored before references were checked may not."""
        return not reference_problems(self.parameters)

    @property
    def has_side_effects(self) -> bool:
        return self.risk != "read"

    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(
            name=self.name, description=self.description, parameters=self.parameters
        )


_REGISTRY: dict[str, ToolSpec] = {}
_REVISION_KEYS = frozenset({"input", "output", "effect", "handler"})


def register(spec: ToolSpec) -> ToolSpec:
    """Add ``spec`` to the registry; raises ``ImproperlyConfigured`` on a duplicate name, an
    invalid schema, a schema with a reference that does not resolve within it or a pattern
    RE2 cannot match (:func:`~toolcalls.schema_patterns.pattern_problems`), a schema that
    admits unknown fields, an unknown risk, a side-effecting tool without an idempotency key
    function, or missing revision strings."""
    problems = _problems(spec)
    if problems:
        raise ImproperlyConfigured(f"tool {spec.name!r}: " + "; ".join(problems))
    _REGISTRY[spec.name] = spec
    return spec


def _problems(spec: ToolSpec) -> list[str]:
    problems = []
    if spec.name in _REGISTRY:
        problems.append("already registered")
    try:
        Draft202012Validator.check_schema(dict(spec.parameters))
    except SchemaError as exc:
        problems.append(f"invalid JSON Schema: {exc.message}")
    else:
        problems.extend(reference_problems(spec.parameters))
        problems.extend(pattern_problems(spec.parameters))
    params = spec.parameters
    if params.get("type") != "object" or params.get("additionalProperties") is not False:
        problems.append("parameters must be an object schema with additionalProperties: false")
    if spec.risk not in RISKS:
        problems.append(f"risk must be one of {RISKS}")
    if spec.has_side_effects and spec.idempotency_key is None:
        problems.append("side-effecting tools need an idempotency_key function")
    if set(spec.revisions) != _REVISION_KEYS:
        problems.append(f"revisions must name exactly {sorted(_REVISION_KEYS)}")
    if spec.timeout_ms <= 0:
        problems.append("timeout_ms must be positive")
    if spec.oversize not in ("truncate", "reject"):
        problems.append("oversize must be truncate or reject")
    if spec.oversize == "reject" and spec.has_side_effects:
        problems.append("a side-effecting tool's result cannot be rejected: its effect happened")
    return problems


def get(name: str) -> ToolSpec | None:
    """The spec registered under ``name``, or ``None`` (the caller answers ``UNKNOWN_TOOL``)."""
    return _REGISTRY.get(name)


def names() -> list[str]:
    """Every registered tool name, sorted."""
    return sorted(_REGISTRY)


def declarations(tool_names: Iterable[str]) -> list[ToolDeclaration]:
    """Declarations of the registered tools among ``tool_names``, in the given order."""
    return [spec.declaration() for name in tool_names if (spec := _REGISTRY.get(name))]
