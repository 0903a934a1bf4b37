r"""Stage 1: XGrammar's ``gemma`` argument style, a JSON Schema -> Grammar IR.

Gemma writes tool-call arguments as JSON with two changes: a string is quoted with ``<|"|>``
(:data:`QUOTE`) on both sides and holds any text without it, raw (no escapes), and an object's
keys are not quoted. The language is XGrammar 0.2.9's for the same schema:

- **Values** of any type may be the root (not only an object). Whitespace ``[ \t\n\r]*`` (at
  most ``max_whitespace_cnt`` per run) comes between tokens, none before or after the value.
- **Objects** list their declared ``properties`` in the schema's order, each at most once, the
  ``required`` ones always, ``,``-separated, keys written as they are (``a b`` too);
  undeclared properties follow where ``additionalProperties`` allows them (strict mode: not
  where ``properties`` is declared and ``additionalProperties`` is absent), keyed
  ``[a-zA-Z_][a-zA-Z0-9_]*`` but no declared name.
- **Strings**: a ``pattern`` or a known ``format`` is the content's language (never holding
  the quote); ``minLength`` and ``maxLength`` are not enforced, as XGrammar 0.2.9 does not
  enforce them in this style.
- **Arrays**: ``prefixItems`` (the list may end after any of them once ``minItems`` is met),
  then ``items``; an array without ``items`` has only its prefix items, one without either
  any items.
- **``const`` and ``enum``** values are written in this dialect, compactly (``{k:[<|"|>v<|"|>]}``).
- ``{}`` and ``true`` take any value of the dialect; ``anyOf``, ``oneOf`` and a list of types
  join their options; a ``$ref`` into the schema is followed; numbers, booleans and null are
  XGrammar's JSON for the schema.

Refused with :class:`~constrain.errors.GrammarError` at the keyword's JSON pointer (constrain
does not enforce them in this style): ``allOf``, ``not``, ``if``, ``minProperties``,
``maxProperties``, ``patternProperties``, ``propertyNames``, ``unevaluatedProperties``,
``dependentRequired``, ``dependentSchemas``, ``contains``, ``uniqueItems``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from constrain.errors import GrammarError
from constrain.frontends.compose import free_text
from constrain.frontends.xml_arguments import xml_value_text
from constrain.frontends.xml_rules import Fragment, JsonGrammar, XmlRules, variable_name
from constrain.ir import Alt, Complement, Grammar, Intersect, Literal, Regex

__all__ = ["QUOTE", "gemma_grammar", "gemma_value_text"]

QUOTE = '<|"|>'
"""Gemma's string quote, on both sides of a string."""

_REFUSED = (
    "allOf",
    "not",
    "if",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "contains",
)


def gemma_grammar(
    schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
) -> Grammar:
    """Return the grammar of a value in XGrammar's ``gemma`` style.

    Parameters
    ----------
    schema : dict or bool
        The JSON Schema of the value.
    max_whitespace : int or None
        Longest whitespace run (XGrammar's ``max_whitespace_cnt``); None: unbounded.
    pointer : str
        The JSON pointer of the schema in its document, prefixed to error pointers.
    json_grammar : callable
        Returns the grammar of the JSON values of a schema, no whitespace around them
        (numbers, booleans and null here).

    Returns
    -------
    Grammar
        The grammar, not normalised.

    Raises
    ------
    GrammarError
        If the schema uses a keyword this style does not enforce (the module docstring lists
        them).
    JsonSchemaError
        If the schema of a number cannot be enforced.
    """
    builder = _Gemma(schema, max_whitespace, pointer, json_grammar)
    start = builder.rule(builder.options(schema, pointer, set()), "start")
    return builder.grammar(start)


def gemma_value_text(value: Any) -> str:
    """Return a ``const``/``enum`` value as the ``gemma`` style writes it.

    Strings are quoted with :data:`QUOTE` and written raw, object keys unquoted, the rest
    compact as XGrammar prints JSON (:func:`~constrain.frontends.xml_arguments.xml_value_text`).

    Parameters
    ----------
    value : Any
        A JSON value.

    Returns
    -------
    str
        Its text.
    """
    if isinstance(value, str):
        return f"{QUOTE}{value}{QUOTE}"
    if isinstance(value, list):
        return "[" + ",".join(gemma_value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{gemma_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and not math.isfinite(value):
        raise GrammarError(f"not a JSON value: {value!r}")
    return xml_value_text(value)


class _Gemma(XmlRules):
    """Collect the rules of one ``gemma`` grammar."""

    def __init__(
        self, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
    ) -> None:
        super().__init__(schema, max_whitespace, pointer, json_grammar)
        self.quote = self.term(Literal(QUOTE))
        self.string_rule = self.rule([(self.quote, self.term(free_text([QUOTE])), self.quote)])
        self.any_rule: str | None = None

    def lit(self, text: str) -> str:
        """Return the terminal of a literal."""
        return self.term(Literal(text))

    def any_value(self) -> str:
        """Return the rule of any value of the dialect (built once: it is recursive)."""
        if self.any_rule is None:
            self.any_rule = self.fresh()
            key = self.term(variable_name())
            colon, comma = self.lit(":"), self.lit(",")
            member = (key, self.ws, colon, self.ws, self.any_rule)
            more = self.fresh()
            self.rule([(), (self.ws, comma, self.ws, *member, more)], more)
            obj = self.rule(
                [
                    (self.lit("{"), self.ws, *member, more, self.ws, self.lit("}")),
                    (self.lit("{"), self.ws, self.lit("}")),
                ]
            )
            items = self.fresh()
            self.rule([(), (self.ws, comma, self.ws, self.any_rule, items)], items)
            array = self.rule(
                [
                    (self.lit("["), self.ws, self.any_rule, items, self.ws, self.lit("]")),
                    (self.lit("["), self.ws, self.lit("]")),
                ]
            )
            scalars = [self.json_value({"type": k}, "") for k in ("number", "boolean", "null")]
            self.rule([*scalars, (self.string_rule,), (obj,), (array,)], self.any_rule)
        return self.any_rule

    def value(self, schema: Any, path: str, seen: set[str]) -> Fragment:
        """Return the rule of a value."""
        return (self.rule(self.options(schema, path, seen)),)

    def refuse(self, schema: Mapping[str, Any], path: str) -> None:
        """Raise a GrammarError at the first keyword of ``schema`` this style does not enforce."""
        for key in _REFUSED:
            if key in schema:
                raise GrammarError(f"{key} is not supported in the gemma style", f"{path}/{key}")
        for key in ("unevaluatedProperties", "uniqueItems"):
            if schema.get(key, False) is not False:
                raise GrammarError(f"{key} is not supported in the gemma style", f"{path}/{key}")

    def unconstrained(self, path: str) -> list[Fragment]:
        """Return any value of the dialect."""
        return [(self.any_value(),)]

    def literal(self, value: Any, path: str) -> Fragment:
        """Return a ``const``/``enum`` value in the dialect."""
        return (self.lit(gemma_value_text(value)),)

    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return a string: the quote, the content (pattern or format), the quote."""
        regex = self.content_regex(schema, path)
        if regex is None:
            return (self.string_rule,)
        content = Intersect((regex, free_text([QUOTE])))
        return (self.quote, self.term(content), self.quote)

    def object(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an object: ``{``, its members, ``}``."""
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise GrammarError("'properties' must be an object", f"{path}/properties")
        required = list(schema.get("required", []))
        extra = schema.get("additionalProperties", "properties" not in schema)
        names = list(properties)
        colon, comma = self.lit(":"), self.lit(",")
        entries = [
            (
                self.lit(n),
                self.ws,
                colon,
                self.ws,
                *self.value(properties[n], f"{path}/properties/{n}", set(seen)),
            )
            for n in names
        ]
        extra_entry: Fragment | None = None
        if extra is not False:
            key: Regex = variable_name()
            if names:
                key = Intersect((key, Complement(Alt(tuple(Literal(n) for n in names)))))
            value = self.value(extra, f"{path}/additionalProperties", set(seen))
            extra_entry = (self.term(key), self.ws, colon, self.ws, *value)
        firsts = self.members(names, entries, required, extra_entry, (self.ws, comma, self.ws))
        opening, closing = self.lit("{"), self.lit("}")
        top: list[Fragment] = []
        if firsts:
            top.append((opening, self.ws, self.rule(firsts), self.ws, closing))
        if not any(n in required for n in names):
            top.append((opening, self.ws, closing))
        return (self.rule(top),)

    def array(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array: ``[``, its items, ``]``."""
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        prefix = [
            self.value(s, f"{path}/prefixItems/{i}", set(seen))
            for i, s in enumerate(schema.get("prefixItems", []))
        ]
        default: Any = "prefixItems" not in schema  # strict: no items past the prefix
        items = schema.get("items", default)
        extra = None if items is False else self.value(items, f"{path}/items", set(seen))
        opening, closing, comma = self.lit("["), self.lit("]"), self.lit(",")
        empty = (opening, self.ws, closing)
        if high == 0 or (not prefix and extra is None):
            return (self.rule([empty]),)
        sep = (self.ws, comma, self.ws)
        frame = ((opening, self.ws), (self.ws, closing), empty)
        return self.array_items(prefix, extra, (low, high), sep, frame)
