"""JSON Schema errors as Callgate's messages name them (the model's error envelopes, the API's
400s, a scenario file's refusal, the OpenAPI examples' check): where in the value, then what. A
check beyond the schema names its places the same way (a replay script's replies).

A place is the path of keys and list indexes from the validated value down to the wrong part,
joined by ``/`` (``replies/0/http_status``); the value itself is :data:`ROOT`.

A tool's schema may refer only to parts of itself (``$ref``/``$dynamicRef`` starting with ``#``,
resolved by ``referencing`` as Draft 2020-12 does): :func:`reference_problems` says which
references do not, and :data:`LOCAL_ONLY` is the registry that validates with nothing else (it
retrieves nothing, over the network or from disk).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

if TYPE_CHECKING:  # referencing exports no name for its resolvers
    from referencing._core import Resolver

#: The place of the validated value itself.
ROOT = "(root)"
#: The keywords by which a schema refers to another.
_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
#: What resolving a reference raises when it does not resolve: ``referencing``'s own error, or
#: ``ValueError`` for a pointer that steps into an array by something other than an index, or
#: ``TypeError`` for one that steps into a boolean or a number.
UNRESOLVABLE = (Unresolvable, ValueError, TypeError)
#: The registry a tool's schema resolves its references in: the schema itself, nothing more.
LOCAL_ONLY: Registry[Any] = Registry()
#: A schema whose references lead back to itself while validating one value: validation
#: would never end (``{"$ref": "#"}`` at the top; ``a`` → ``b`` → ``a`` in ``$defs``).
_LOOP = "a reference leads back to where it is, without going into the value: validation never ends"
#: Draft 2020-12's in-place applicators: their schemas apply to the very value their own
#: schema applies to (unlike ``properties`` or ``items``, which go into it).
_IN_PLACE = ("not", "if", "then", "else")
_IN_PLACE_EACH = ("allOf", "anyOf", "oneOf")

#: A schema and the resolver of its place in the document.
_Located = tuple[Resource[Any], "Resolver[Any]"]


def place_text(path: Iterable[str | int], message: str) -> str:
    """``"<place>: <message>"``, the place of ``path`` (keys and list indexes) as ``a/0/b``, or
    :data:`ROOT` for an empty one."""
    place = "/".join(str(part) for part in path) or ROOT
    return f"{place}: {message}"


def error_text(error: ValidationError) -> str:
    """``"<place>: <jsonschema's message>"``, the place as ``a/0/b`` or :data:`ROOT`."""
    return place_text(error.absolute_path, error.message)


def errors_in_order(validator: Validator, value: Any) -> list[ValidationError]:
    """Every error of ``value`` under ``validator``, in the order of their places (the value
    itself first). Raises ``RecursionError`` for a value nested deeper than Python recurses."""
    return sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))


def reference_problems(schema: Mapping[str, Any]) -> list[str]:
    """Why references of ``schema`` (valid Draft 2020-12) cannot be used, each naming the
    reference: one pointing outside the schema (a URL, a file, anything not starting with
    ``#``), one that does not resolve within it (a missing ``$defs`` entry or anchor), one that
    names no valid schema; else, when references lead back to where they are while validating
    one value (validation would never end), that. ``[]`` when every reference resolves to a
    schema within it and none loops. Follows each reference into what it names, as validation
    does; without recursion (how many references lead on is the schema author's choice)."""
    root = DRAFT202012.create_resource(dict(schema))
    resolver = LOCAL_ONLY.resolver_with_root(root)
    problems: list[str] = []
    walked: set[int] = set()
    stack: list[_Located] = [(root, resolver)]
    while stack:
        resource, at = stack.pop()
        contents = resource.contents
        if not isinstance(contents, Mapping) or id(contents) in walked:
            continue
        walked.add(id(contents))
        for keyword in _REFERENCE_KEYWORDS:
            if isinstance(reference := contents.get(keyword), str):
                problem, target = _followed(f"{keyword} {reference!r}", reference, at, walked)
                problems += [problem] if problem else []
                stack += [target] if target else []
        stack += [(sub, at.in_subresource(sub)) for sub in resource.subresources()]
    explored: set[int] = set()
    if not problems and any(_loops(*at, explored) for at in _subschemas(root, resolver)):
        problems.append(_LOOP)
    return problems


def _followed(
    named: str, reference: str, resolver: Resolver[Any], walked: set[int]
) -> tuple[str, _Located | None]:
    """(why ``reference`` cannot be used, or ``""``; what it names, to walk, or ``None`` when
    that was ``walked`` already)."""
    if not reference.startswith("#"):
        return (
            f"{named} is not within the schema: only references starting with '#' may be used",
            None,
        )
    try:
        resolved = resolver.lookup(reference)
    except UNRESOLVABLE:
        return f"{named} does not resolve within the schema", None
    if id(resolved.contents) in walked:
        return "", None
    try:
        Draft202012Validator.check_schema(resolved.contents)
    except SchemaError as exc:
        return f"{named} names no valid schema: {exc.message}", None
    return "", (DRAFT202012.create_resource(resolved.contents), resolved.resolver)


def _subschemas(root: Resource[Any], resolver: Resolver[Any]) -> Iterator[_Located]:
    """Every schema within ``root``, itself included, with the resolver of its place."""
    stack = [(root, resolver)]
    while stack:
        resource, at = stack.pop()
        yield resource, at
        stack += [(sub, at.in_subresource(sub)) for sub in resource.subresources()]


def _in_place(resource: Resource[Any], resolver: Resolver[Any]) -> Iterator[_Located]:
    """The schemas that apply to the value ``resource`` applies to: its in-place applicators'
    and what its references name (resolved, as :func:`_problems_in` checked they are)."""
    contents = resource.contents
    children = [contents.get(keyword) for keyword in _IN_PLACE]
    children += [child for keyword in _IN_PLACE_EACH for child in contents.get(keyword, ())]
    children += list(contents.get("dependentSchemas", {}).values())
    for child in children:
        if isinstance(child, Mapping):
            sub = DRAFT202012.create_resource(child)
            yield sub, resolver.in_subresource(sub)
    for keyword in _REFERENCE_KEYWORDS:
        if isinstance(reference := contents.get(keyword), str):
            resolved = resolver.lookup(reference)
            yield DRAFT202012.create_resource(resolved.contents), resolved.resolver


def _loops(resource: Resource[Any], resolver: Resolver[Any], explored: set[int]) -> bool:
    """Whether following in-place schemas from ``resource`` comes back to one on the way
    (depth first, without recursion: the chain is the schema author's choice). ``explored``:
    the schemas already followed to their ends without a loop, skipped (each once in all)."""
    if not isinstance(resource.contents, Mapping) or id(resource.contents) in explored:
        return False
    on_path = {id(resource.contents)}
    stack = [(id(resource.contents), _in_place(resource, resolver))]
    while stack:
        key, children = stack[-1]
        for child, at in children:
            if not isinstance(child.contents, Mapping) or id(child.contents) in explored:
                continue
            if id(child.contents) in on_path:
                return True
            on_path.add(id(child.contents))
            stack.append((id(child.contents), _in_place(child, at)))
            break
        else:
            stack.pop()
            on_path.discard(key)
            explored.add(key)
    return False
