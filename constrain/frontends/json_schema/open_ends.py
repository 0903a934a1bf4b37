"""Stage 1 (JSON Schema): the places where a schema leaves an instance's length open.

:func:`open_ends` lists, by JSON pointer, the subschemas whose instances can be as long as a
generator cares to write: strings without ``maxLength``, arrays without ``maxItems``, objects
open to additional properties without ``maxProperties``, numbers without both bounds (when no
``max_number_digits`` bounds their digits). ``generate`` names them when ``max_tokens`` cuts an
output, with the keyword that would close each. Best effort: it reads the schema's own
keywords (local ``$ref`` followed, ``allOf``/``anyOf``/``oneOf`` branches included), not the
normal form, so a bound that only a conjunction implies is not seen.

:func:`close_open_ends` writes ``maxItems`` and ``maxLength`` into a copy of a schema where
its arrays and strings have none: a bounded subset of the schema's language, for a caller who
asks for it (``generate(tools=..., json_options={"max_items": ..., "max_length": ...})``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["close_open_ends", "open_ends"]

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


def close_open_ends(
    schema: Any, *, max_items: int | None = None, max_length: int | None = None
) -> Any:
    """Return a copy of ``schema`` whose open arrays and strings are bounded.

    Every subschema that :func:`open_ends` lists as "an array with no maxItems" gets
    ``maxItems: max_items``, and every "string with no maxLength" ``maxLength: max_length``
    (when that bound is given); the rest of the schema is copied unchanged (``enum``,
    ``const``, ``default`` and other values are never entered). The result's instances are
    the schema's instances within those bounds.

    Parameters
    ----------
    schema : dict or bool
        A JSON Schema.
    max_items : int, optional
        The most items of an array that has no ``maxItems``; None: arrays stay open.
    max_length : int, optional
        The most characters of a string that has no ``maxLength``, ``enum``, ``const``,
        ``pattern`` or ``format``; None: strings stay open.

    Returns
    -------
    dict or bool
        The bounded copy (``schema`` itself when both bounds are None).

    Raises
    ------
    ValueError
        If a bound is not a positive int.
    """
    for name, value in (("max_items", max_items), ("max_length", max_length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        if value is not None and value < 1:
            raise ValueError(f"{name} must be a positive int or None, got {value}")
    if max_items is None and max_length is None:
        return schema

    def visit(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out = dict(node)
        for key in _CHILD_MAPS:
            if isinstance(out.get(key), dict):
                out[key] = {name: visit(child) for name, child in out[key].items()}
        for key in _CHILD_SCHEMAS:
            if isinstance(out.get(key), dict):
                out[key] = visit(out[key])
        for key in (*_CHILD_LISTS, "items"):
            if isinstance(out.get(key), list):
                out[key] = [visit(child) for child in out[key]]
        for what in _open_here(node, max_number_digits=0):
            if what.startswith("an array") and max_items is not None:
                out["maxItems"] = max_items
            elif what.startswith("a string") and max_length is not None:
                out["maxLength"] = max_length
        return out

    return visit(schema)


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
