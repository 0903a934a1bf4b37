"""Stage 1 (JSON Schema): the places where a schema leaves an instance's length open.

:func:`open_ends` lists, by JSON pointer, the subschemas whose instances can be as long as a
generator cares to write: strings without ``maxLength``, arrays without ``maxItems``, objects
open to additional properties without ``maxProperties``, numbers without both bounds (when no
``max_number_digits`` bounds their digits). ``generate`` names them when ``max_tokens`` cuts an
output, with the keyword that would close each. Best effort: it reads the schema's own
keywords (local ``$ref`` followed, ``allOf``/``anyOf``/``oneOf`` branches included), not the
normal form, so a bound that only a conjunction implies is not seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["open_ends"]

_CLOSED_STRING = ("maxLength", "enum", "const", "pattern", "format")
_CHILD_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_CHILD_SCHEMAS = ("additionalProperties", "items", "additionalItems", "contains", "not")
_CHILD_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")


def open_ends(schema: Any, *, max_number_digits: int | None = None) -> list[str]:
    """Return ``pointer: what is open (the keyword that closes it)`` for each open place.

    Parameters
    ----------
    schema : dict or bool
        A JSON Schema (a pydantic model's ``model_json_schema()``, for instance).
    max_number_digits : int, optional
        The grammar's ``max_number_digits``: when given, numbers are not open.

    Returns
    -------
    list of str
        In document order, each place once (a place reached through several ``$ref`` is
        listed at its definition).
    """
    found: dict[str, None] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(schema, "#")]
    while stack:
        node, pointer = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        for what in _open_here(node, max_number_digits):
            found[f"{pointer}: {what}"] = None
        children = list(_children(node, pointer))
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target = _resolve(schema, ref)
            if target is not None:
                children.append((target, ref))
        stack.extend(reversed(children))
    return list(found)


def _open_here(node: dict[str, Any], max_number_digits: int | None) -> Iterator[str]:
    types = node.get("type")
    kinds = set(types) if isinstance(types, list) else {types} if isinstance(types, str) else set()
    if "string" in kinds and not any(k in node for k in _CLOSED_STRING):
        yield "a string with no maxLength"
    if "array" in kinds and "maxItems" not in node and node.get("items") is not False:
        yield "an array with no maxItems"
    if (
        "object" in kinds
        and node.get("additionalProperties") is not False
        and node.get("unevaluatedProperties") is not False
        and "maxProperties" not in node
    ):
        yield "an object open to more properties (additionalProperties: false, maxProperties)"
    if kinds & {"integer", "number"} and max_number_digits is None:
        low = "minimum" in node or "exclusiveMinimum" in node
        high = "maximum" in node or "exclusiveMaximum" in node
        if not (low and high and "integer" in kinds and "number" not in kinds):
            yield "a number with unbounded digits (minimum and maximum, or max_number_digits)"


def _children(node: dict[str, Any], pointer: str) -> Iterator[tuple[Any, str]]:
    for key in _CHILD_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, child in sub.items():
                yield child, f"{pointer}/{key}/{_escape(name)}"
    for key in _CHILD_SCHEMAS:
        if isinstance(node.get(key), dict):
            yield node[key], f"{pointer}/{key}"
    for key in _CHILD_LISTS + ("items",):
        sub = node.get(key)
        if isinstance(sub, list):
            for i, child in enumerate(sub):
                yield child, f"{pointer}/{key}/{i}"


def _resolve(root: Any, ref: str) -> Any:
    """Return the subschema a local ``$ref`` (``#/...``) points at, or None."""
    node = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
