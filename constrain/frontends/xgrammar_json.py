r"""Stage 1: the JSON of XGrammar's structural tags, as a grammar (the ``json_schema`` format).

XGrammar reads a ``json_schema`` format's schema in strict mode, lays out whitespace its own
way, and takes two options constrain's JSON Schema front end does not: ``any_order`` (passed on
as its exact ``any_order``) and ``excludes``, substrings that may not occur in the encoded text
of the schema's free strings and property names. :func:`xgrammar_json_schema` builds that
grammar on :meth:`Grammar.from_json_schema <constrain.ir.Grammar.from_json_schema>`; the
argument styles (``xml_arguments``, ``xml_elements``, ``gemma_json``) call it for their JSON
values.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from constrain.errors import JsonSchemaError
from constrain.frontends.compose import contains_any, map_regex, without_trailing
from constrain.frontends.json_schema.strings import ANY_STRING_BODY
from constrain.ir import CharSet, Complement, Grammar, Intersect, Regex, Repeat, Terminal

__all__ = ["xgrammar_json_schema"]

_JSON_WS = CharSet(((9, 10), (13, 13), (32, 32)))
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")
_SUBSCHEMAS = (
    "additionalProperties unevaluatedProperties items additionalItems unevaluatedItems contains "
    "propertyNames not if then else"
).split()
_STRING_CHAR = ANY_STRING_BODY.item if isinstance(ANY_STRING_BODY, Repeat) else None
"""One character of a JSON string's encoded text (a raw character or an escape)."""


def xgrammar_json_schema(
    schema: Any,
    max_whitespace: int | None,
    pointer: str,
    *,
    any_order: bool = False,
    excludes: Sequence[str] = (),
) -> Grammar:
    r"""Return the grammar of the JSON XGrammar's structural tags accept for a schema.

    XGrammar's ``json_schema`` format reads the schema in strict mode (an object schema that
    declares ``properties`` or ``patternProperties`` admits no other key unless it says so; a
    ``prefixItems`` array no other item) and allows any run of ``[ \t\n\r]`` between tokens
    (at most ``max_whitespace`` characters when given) but none before or after the value.

    Parameters
    ----------
    schema : dict or bool
        The JSON Schema.
    max_whitespace : int or None
        Longest whitespace run; None: unbounded.
    pointer : str
        The JSON pointer of the schema in its document, prefixed to error pointers.
    any_order : bool, optional
        Declared properties in any order (XGrammar's ``any_order``), each at most once and the
        required ones all present, as the schema says (XGrammar checks neither).
    excludes : sequence of str, optional
        Substrings that may not occur in the encoded text of a string without ``pattern`` or
        ``format`` (nor in a property name): ``enum``/``const`` strings and declared properties
        holding one are left out, and every free string body excludes them (XGrammar's
        ``excludes``; XGrammar then drops ``minLength``/``maxLength``, constrain keeps them).

    Returns
    -------
    Grammar
        The grammar, not normalised.

    Raises
    ------
    JsonSchemaError
        With the pointer of the keyword (from ``pointer``) when the schema cannot be enforced.
    """
    if max_whitespace is not None and (
        isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int)
    ):
        raise JsonSchemaError(f"max_whitespace_cnt must be an integer, got {max_whitespace!r}")
    bound = 1 if max_whitespace is None else max_whitespace
    try:
        grammar = Grammar.from_json_schema(
            _without_excluded(_strict(schema), excludes) if excludes else _strict(schema),
            whitespace="flexible" if bound > 0 else "compact",
            max_whitespace=max(bound, 1),
            python_compatible=True,  # XGrammar writes integers plainly (no 1.0, no 1e2)
            any_order=any_order,
        )
    except JsonSchemaError as err:
        message = str(err).removesuffix(f" (at {err.location})")
        raise JsonSchemaError(message, pointer + err.pointer.removeprefix("#")) from err
    if excludes:
        grammar = _exclude_in_strings(grammar, excludes)
    if bound > 0:
        if max_whitespace is None:  # XGrammar's default: any run of whitespace
            grammar = _unbounded_whitespace(grammar, bound)
        grammar = without_trailing(grammar, _JSON_WS)
    return grammar


def _unbounded_whitespace(grammar: Grammar, bound: int) -> Grammar:
    r"""Return the JSON grammar with its layout runs ``[ \t\n\r]{0,bound}`` unbounded.

    JSON string bodies never hold raw ``\n``, so a repeat of exactly this set is layout.
    """

    def rewrite(node: Regex) -> Regex:
        if (
            isinstance(node, Repeat)
            and node.item == _JSON_WS
            and (node.min, node.max) == (0, bound)
        ):
            return Repeat(_JSON_WS, 0, None)
        return node

    terminals = tuple(Terminal(t.name, map_regex(t.regex, rewrite)) for t in grammar.terminals)
    return dataclasses.replace(grammar, terminals=terminals)


def _strict(schema: Any) -> Any:
    """Return the schema with XGrammar's strict mode written out as keywords (a copy)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _strict(v) for k, v in out[key].items()}
    for key in (*_SUBSCHEMA_LISTS, *_SUBSCHEMAS):
        if key in out and key not in _SUBSCHEMA_MAPS:
            out[key] = _strict(out[key])
    if (
        ("properties" in out or "patternProperties" in out)
        and "additionalProperties" not in out
        and "unevaluatedProperties" not in out
    ):
        out["additionalProperties"] = False
    if "prefixItems" in out and "items" not in out and "unevaluatedItems" not in out:
        out["items"] = False
    if isinstance(out.get("items"), list) and "additionalItems" not in out:
        out["additionalItems"] = False
    return out


def _encoded(text: str) -> str:
    """Return the body of a JSON string as XGrammar writes it (what ``excludes`` is matched on)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _without_excluded(schema: Any, excludes: Sequence[str]) -> Any:
    """Return the schema without the enum/const strings and properties holding an exclusion."""

    def bad(text: Any) -> bool:
        return isinstance(text, str) and any(e in _encoded(text) for e in excludes)

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, list):
            return [walk(s, f"{where}/{i}") for i, s in enumerate(node)]
        if not isinstance(node, dict):
            return node
        out = dict(node)
        for key in _SUBSCHEMA_MAPS:
            if isinstance(out.get(key), dict):
                out[key] = {k: walk(v, f"{where}/{key}/{k}") for k, v in out[key].items()}
        for key in (*_SUBSCHEMA_LISTS, *_SUBSCHEMAS):
            if key in out and key not in _SUBSCHEMA_MAPS:
                out[key] = walk(out[key], f"{where}/{key}")
        if isinstance(out.get("enum"), list):
            out["enum"] = [v for v in out["enum"] if not bad(v)]
        if "const" in out and bad(out["const"]):
            out["enum"] = []  # no value left
            del out["const"]
        if isinstance(out.get("properties"), dict):
            gone = [k for k in out["properties"] if bad(k)]
            required = [k for k in out.get("required", []) if k in gone]
            if required:
                raise JsonSchemaError(
                    f"required property {required[0]!r} holds an excluded substring (excludes)",
                    f"{where}/required",
                )
            out["properties"] = {k: v for k, v in out["properties"].items() if k not in gone}
        return out

    return walk(schema, "#")  # (the caller prefixes the pointer of the schema)


def _exclude_in_strings(grammar: Grammar, excludes: Sequence[str]) -> Grammar:
    """Return the grammar whose free string bodies (and keys) hold none of ``excludes``."""
    clean = Complement(contains_any([e for e in excludes if e]))

    def rewrite(node: Regex) -> Regex:
        if isinstance(node, Repeat) and node.item == _STRING_CHAR:
            return Intersect((node, clean))
        return node

    terminals = tuple(Terminal(t.name, map_regex(t.regex, rewrite)) for t in grammar.terminals)
    return dataclasses.replace(grammar, terminals=terminals)
