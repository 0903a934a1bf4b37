r"""Stage 1: XGrammar's ``minimax_m3_xml`` and ``cohere_xml`` argument styles, JSON Schema -> IR.

Both write nested values as nested elements, not as JSON text; the ``qwen_xml`` family
(:mod:`constrain.frontends.xml_arguments`) shares their bookkeeping and schema reading
(:class:`~constrain.frontends.xml_rules.XmlRules`).

**cohere_xml** (Cohere: ``<cofl:value name="NAME" type="T">VALUE</cofl:value>``) has the
``qwen_xml`` object structure (declared properties in order, undeclared ones after them where
``additionalProperties`` allows, whitespace around and between elements) with a type attribute
that follows the value, alternative by alternative: ``raw`` for a string (a plain one is raw
text up to ``</cofl:value>``, a bounded one has whitespace around it), ``json`` for a number,
boolean, null or a ``const``/``enum`` member that is not a string (written as compact JSON
text, objects and arrays too), ``dict`` for an object (its properties as elements again) and
``list`` for an array (items ``<cofl:value type="T">...</cofl:value>`` with no name and no
whitespace between them; every ``prefixItems`` item is present). Names are XML-escaped
(``&amp;``, ``&quot;``, ``&lt;``, ``&gt;``); an undeclared name is any such escaped text but a
declared name. A value without a schema is a raw string, a JSON scalar, any dict or any list.
As XGrammar 0.2.9, a non-empty ``required`` makes an object non-empty even when it names no
declared property. Refused at their JSON pointers (constrain does not enforce them here):
``minProperties``, ``maxProperties``, ``patternProperties``, ``propertyNames``,
``unevaluatedProperties``, ``dependentRequired``, ``dependentSchemas``, ``contains``,
``uniqueItems``, ``allOf``, ``not``, ``if``; ``maxItems`` below the number of ``prefixItems``
(XGrammar 0.2.9 refuses it too); a root that is not an object schema.

**minimax_m3_xml**:

MiniMax-M3 writes every value as nested elements, each tag behind a namespace marker
``]<]minimax[>[`` (:data:`NAMESPACE`): a property is
``]<]minimax[>[<NAME>VALUE]<]minimax[>[</NAME>``, an array's items are ``<item>`` elements, an
object's properties are elements again, a string is raw text that cannot contain the marker,
and a number, boolean or null is its JSON text. The language is XGrammar 0.2.9's for the same
schema:

- **Objects** (the arguments and nested ones alike) list their declared ``properties`` in the
  schema's order, each at most once, the ``required`` ones always, whitespace ``[ \t\n\r]*``
  (at most ``max_whitespace_cnt``) before, between and after the elements; an object with no
  element present is empty (no whitespace). No value has whitespace around it.
- **Arrays**: ``prefixItems`` then ``items`` as ``<item>`` elements, ``minItems``/``maxItems``
  counted, whitespace as for objects; an array schema without ``items`` has only its prefix
  items.
- **``const`` and ``enum``** values are spelled out: a string raw, an object as its elements
  and an array as its items (no whitespace), any other value as its JSON text
  (:func:`~constrain.frontends.xml_arguments.xml_value_text`).
- ``anyOf``, ``oneOf`` and a list of types join their options' languages; a ``$ref`` into the
  schema is followed.

Refused with :class:`~constrain.errors.GrammarError` at the JSON pointer of the keyword, where
XGrammar 0.2.9 refuses them too: an unconstrained value (``{}``, ``true``, a schema without a
type or an object/array keyword, ``items: true``); undeclared properties
(``additionalProperties`` or ``unevaluatedProperties`` other than ``false``,
``patternProperties``, ``propertyNames``); a required property that is not declared; a string
with ``pattern``, a known ``format``, ``minLength`` or ``maxLength``; a string literal holding
the marker; an element name that is empty, blank, starts with ``/`` or holds ``>``. Refused
where XGrammar 0.2.9 accepts them (constrain does not enforce them in this style):
``minProperties``, ``maxProperties``, ``dependentRequired``, ``dependentSchemas``, ``contains``,
``uniqueItems``, and ``allOf``, ``not`` and ``if``; a root that is not an object schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from constrain.errors import GrammarError
from constrain.frontends.compose import free_text
from constrain.frontends.json_schema.formats import format_regex
from constrain.frontends.xml_arguments import xml_value_text
from constrain.frontends.xml_rules import Fragment, JsonGrammar, XmlRules
from constrain.ir import (
    ANY_CHAR,
    Alt,
    CharSet,
    Complement,
    Grammar,
    Intersect,
    Literal,
    Regex,
    Repeat,
)

__all__ = ["COHERE_END", "ELEMENT_STYLES", "NAMESPACE", "cohere_name", "xml_elements_grammar"]

NAMESPACE = "]<]minimax[>["
"""The marker before every tag of ``minimax_m3_xml``."""

ELEMENT_STYLES = ("minimax_m3_xml", "cohere_xml")
"""The XML argument styles whose values nest as elements, by XGrammar's style name."""

_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly"}
    | {"writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions"}
)
_REFUSED = {
    "allOf": "allOf",
    "not": "not",
    "if": "if/then/else",
    "patternProperties": "undeclared properties (patternProperties)",
    "propertyNames": "undeclared properties (propertyNames)",
    "minProperties": "minProperties",
    "maxProperties": "maxProperties",
    "dependentRequired": "dependentRequired",
    "dependentSchemas": "dependentSchemas",
    "contains": "contains",
}
_BLANK = " \t\n\r\f\v"


def xml_elements_grammar(
    style: str, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
) -> Grammar:
    """Return the grammar of tool-call arguments in an element-nesting XML style.

    Parameters
    ----------
    style : str
        One of :data:`ELEMENT_STYLES`.
    schema : dict or bool
        The JSON Schema of the arguments: an object schema.
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
        If the style is unknown, or the schema uses a keyword this style cannot enforce (the
        module docstring lists them).
    JsonSchemaError
        If the schema of a number cannot be enforced.
    """
    if style not in ELEMENT_STYLES:
        raise GrammarError(f"unknown XML element style {style!r}")
    if style == "cohere_xml":
        return _Cohere(schema, max_whitespace, pointer, json_grammar).arguments()
    return _MiniMaxM3(schema, max_whitespace, pointer, json_grammar).arguments()


class _MiniMaxM3(XmlRules):
    """Collect the rules of one ``minimax_m3_xml`` arguments grammar."""

    def __init__(
        self, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
    ) -> None:
        super().__init__(schema, max_whitespace, pointer, json_grammar)
        self.text = self.term(free_text([NAMESPACE]))

    def arguments(self) -> Grammar:
        """Return the grammar of the whole arguments object."""
        schema, path = self.root, self.pointer
        if schema is True or schema == {}:
            raise GrammarError("minimax_m3_xml does not support an unconstrained schema", path)
        schema = self.root_object(schema, "minimax_m3_xml")
        _refuse_keywords(schema, path)
        return self.grammar(self.rule([self.object(schema, path, set())], "start"))

    # -- pieces ------------------------------------------------------------------------------

    def element(self, name: str, value: Fragment, path: str) -> Fragment:
        """Return ``NAMESPACE<name>`` value ``NAMESPACE</name>``."""
        if not name or name.startswith("/") or ">" in name or not name.strip(_BLANK):
            raise GrammarError(f"{name!r} cannot be a minimax_m3_xml element name", path)
        opening = self.term(Literal(f"{NAMESPACE}<{name}>"))
        return (opening, *value, self.term(Literal(f"{NAMESPACE}</{name}>")))

    def literal(self, value: Any, path: str) -> Fragment:
        """Return a ``const``/``enum`` value spelled out."""
        if isinstance(value, str):
            if NAMESPACE in value:
                raise GrammarError(f"a minimax_m3_xml string cannot hold {NAMESPACE!r}", path)
            return (self.term(Literal(value)),) if value else ()
        if isinstance(value, Mapping):
            out: Fragment = ()
            for key, item in value.items():
                out += self.element(str(key), self.literal(item, path), path)
            return out
        if isinstance(value, list):
            out = ()
            for item in value:
                out += self.element("item", self.literal(item, path), path)
            return out
        return (self.term(Literal(xml_value_text(value))),)

    # -- values --------------------------------------------------------------------------------

    def value(self, schema: Any, path: str, seen: set[str]) -> Fragment:
        """Return the rule of a value (no whitespace around it)."""
        return (self.rule(self.options(schema, path, seen)),)

    def refuse(self, schema: Mapping[str, Any], path: str) -> None:
        """Raise a GrammarError at the first keyword of ``schema`` this style does not enforce."""
        _refuse_keywords(schema, path)

    def unconstrained(self, path: str) -> list[Fragment]:
        """Refuse an unconstrained value (``{}``, ``true``), as XGrammar 0.2.9 does."""
        raise GrammarError("minimax_m3_xml does not support an unconstrained value", path)

    def untyped(self, path: str) -> list[Fragment]:
        """Refuse a value whose schema implies no type, as XGrammar 0.2.9 does."""
        raise GrammarError("minimax_m3_xml does not support an unconstrained value (no type)", path)

    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return a string value: raw text without the marker."""
        refused = [k for k in ("pattern", "minLength", "maxLength") if k in schema]
        if schema.get("minLength") == 0:
            refused.remove("minLength")
        fmt = schema.get("format")
        if isinstance(fmt, str) and format_regex(fmt) is not None:
            refused.append("format")
        if refused:
            raise GrammarError(
                f"'{refused[0]}' is not supported in the minimax_m3_xml style (a string there "
                f"is any text without {NAMESPACE!r}; XGrammar 0.2.9 refuses it too)",
                f"{path}/{refused[0]}",
            )
        return (self.text,)

    def object(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an object: its declared properties as elements."""
        for key in ("additionalProperties", "unevaluatedProperties"):
            if key in schema and schema[key] is not False:
                raise GrammarError(
                    f"minimax_m3_xml needs fixed property names; {key} is not supported",
                    f"{path}/{key}",
                )
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise GrammarError("'properties' must be an object", f"{path}/properties")
        required = schema.get("required", [])
        for name in required:
            if name not in properties:
                raise GrammarError(
                    f"required property {name!r} is not declared", f"{path}/required"
                )
        names = list(properties)
        entries = [
            self.element(
                n,
                self.value(properties[n], f"{path}/properties/{n}", set(seen)),
                f"{path}/properties/{n}",
            )
            for n in names
        ]
        firsts = self.members(names, entries, required, None, (self.ws,))
        if not firsts:
            return ()
        body = (self.ws, self.rule(firsts), self.ws)
        if any(n in required for n in names):
            return (self.rule([body]),)
        return (self.rule([(), body]),)

    def array(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array: its items as ``<item>`` elements."""
        if schema.get("uniqueItems") is True:
            raise GrammarError(
                "uniqueItems is not supported in the minimax_m3_xml style", f"{path}/uniqueItems"
            )
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        prefix_schemas = schema.get("prefixItems", [])
        prefix = [
            self.element(
                "item", self.value(s, f"{path}/prefixItems/{i}", set(seen)), f"{path}/prefixItems"
            )
            for i, s in enumerate(prefix_schemas)
        ]
        items = schema.get("items", False)
        extra: Fragment | None = None
        if items is not False:
            extra = self.element(
                "item", self.value(items, f"{path}/items", set(seen)), f"{path}/items"
            )
        if high == 0 or (not prefix and extra is None):
            return ()
        return self.array_items(
            prefix, extra, (low, high), (self.ws,), ((self.ws,), (self.ws,), ())
        )


def _refuse_keywords(schema: Mapping[str, Any], path: str) -> None:
    """Raise a GrammarError at the first keyword of ``schema`` this style does not enforce."""
    for key, what in _REFUSED.items():
        if key in schema:
            raise GrammarError(
                f"{what} is not supported in the minimax_m3_xml style", f"{path}/{key}"
            )


# --------------------------------------------------------------------------------------------
# cohere_xml
# --------------------------------------------------------------------------------------------

COHERE_END = "</cofl:value>"
"""The end of every ``cohere_xml`` element (and of a plain string value)."""

_COHERE_REFUSED = {k: v for k, v in _REFUSED.items() if k != "contains"} | {
    "contains": "contains",
    "uniqueItems": "uniqueItems",
}


def _cohere_key() -> Regex:
    r"""Return XGrammar's ``cohere_key``: ``([^\x00"&<>]|&amp;|&lt;|&gt;|&quot;)+``."""
    ranges = ((1, 0x21), (0x23, 0x25), (0x27, 0x3B), (0x3D, 0x3D), (0x3F, 0xD7FF))
    plain = CharSet((*ranges, ANY_CHAR.ranges[-1]))
    escapes = tuple(Literal(e) for e in ("&amp;", "&lt;", "&gt;", "&quot;"))
    return Repeat(Alt((plain, *escapes)), 1, None)


def cohere_name(name: str) -> str:
    """Return a property name as ``cohere_xml`` writes it in ``name="..."`` (XML-escaped).

    Parameters
    ----------
    name : str
        The property name.

    Returns
    -------
    str
        ``&``, ``"``, ``<`` and ``>`` as ``&amp;``, ``&quot;``, ``&lt;`` and ``&gt;``.
    """
    return (
        name.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


class _Cohere(XmlRules):
    """Collect the rules of one ``cohere_xml`` arguments grammar.

    An element is ``<cofl:value`` (`` name="NAME"`` in an object, nothing in a list), then
    `` type="T">``, the value and ``</cofl:value>``; ``T`` follows the value: ``raw`` for a
    string, ``json`` for a number, boolean, null or a ``const``/``enum`` value other than a
    string (as its JSON text), ``dict`` for an object, ``list`` for an array.
    """

    def __init__(
        self, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
    ) -> None:
        super().__init__(schema, max_whitespace, pointer, json_grammar)
        self.text = self.term(free_text([COHERE_END]))
        self.end = self.term(Literal(COHERE_END))
        self.opening = self.term(Literal("<cofl:value"))
        self.any_rule: str | None = None

    def arguments(self) -> Grammar:
        """Return the grammar of the whole arguments object."""
        schema, path = self.root, self.pointer
        if schema is True or schema == {}:
            schema = {"type": "object"}
        schema = self.root_object(schema, "cohere_xml")
        self.refuse(schema, path)
        return self.grammar(self.rule([(self.dict_body(schema, path, set()),)], "start"))

    def refuse(self, schema: Mapping[str, Any], path: str) -> None:
        """Raise a GrammarError at the first keyword this style does not enforce."""
        for key, what in _COHERE_REFUSED.items():
            if key in schema and not (key == "uniqueItems" and schema[key] is False):
                raise GrammarError(
                    f"{what} is not supported in the cohere_xml style", f"{path}/{key}"
                )
        if schema.get("unevaluatedProperties", False) is not False:
            raise GrammarError(
                "unevaluatedProperties is not supported in the cohere_xml style",
                f"{path}/unevaluatedProperties",
            )

    def tail(self, kind: str, content: Fragment, spaced: bool = True) -> Fragment:
        """Return `` type="KIND">`` content ``</cofl:value>``, whitespace around if spaced."""
        lead = self.term(Literal(f' type="{kind}">'))
        if spaced:
            return (lead, self.ws, *content, self.ws, self.end)
        return (lead, *content, self.end)

    def literal(self, value: Any, path: str) -> Fragment:
        """Return the typed tail of a ``const``/``enum`` value."""
        text = (self.term(Literal(xml_value_text(value))),) if xml_value_text(value) else ()
        return self.tail("raw" if isinstance(value, str) else "json", text)

    # -- values --------------------------------------------------------------------------------

    def typed(self, schema: Any, path: str, seen: set[str]) -> str:
        """Return the rule of a value's typed tails (type attribute, value, end tag)."""
        return self.rule(self.options(schema, path, seen))

    def any_value(self) -> str:
        """Return the rule of any value's typed tails (built once: it is recursive)."""
        if self.any_rule is None:
            self.any_rule = self.fresh()
            key = self.term(_cohere_key())
            element = (self.term(Literal(' name="')), key, self.term(Literal('"')))
            entry = (self.opening, *element, self.any_rule)
            more = self.fresh()
            self.rule([(), (self.ws, *entry, more)], more)
            dict_body = self.rule([(self.ws, *entry, more, self.ws), (self.ws,)])
            items = self.fresh()
            self.rule([(), (self.opening, self.any_rule, items)], items)
            scalars = ("number", "boolean", "null")
            scalar = self.rule([self.json_value({"type": k}, "") for k in scalars])
            alts = [
                self.tail("raw", (self.text,), spaced=False),
                self.tail("json", (scalar,)),
                self.tail("dict", (dict_body,)),
                self.tail("list", (items,)),
            ]
            self.rule(alts, self.any_rule)
        return self.any_rule

    def unconstrained(self, path: str) -> list[Fragment]:
        """Return any value's typed tails."""
        return [(self.any_value(),)]

    def object(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an object's typed tail: ``dict``, its elements."""
        return self.tail("dict", (self.dict_body(schema, path, seen),))

    def array(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array's typed tail: ``list``, its items."""
        return self.tail("list", self.list_body(schema, path, seen))

    def scalar(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return a number's, boolean's or null's typed tail: ``json``, its JSON text."""
        return self.tail("json", self.json_value(schema, path))

    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return a string's typed tail: raw text, or a bounded string with whitespace around."""
        fmt, pattern = schema.get("format"), schema.get("pattern")
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if fmt is None and pattern is None and low == 0 and high is None:
            return self.tail("raw", (self.text,), spaced=False)
        regex = self.content_regex(schema, path)
        if regex is None:
            if fmt is not None and pattern is None and low == 0 and high is None:
                return self.tail("raw", (self.text,), spaced=False)  # an unknown format
            regex = Repeat(ANY_CHAR, int(low), None if high is None else int(high))
        return self.tail("raw", (self.term(regex),))

    def dict_body(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> str:
        """Return the rule of an object's elements (whitespace around and between them)."""
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise GrammarError("'properties' must be an object", f"{path}/properties")
        required = list(schema.get("required", []))
        extra = schema.get("additionalProperties", "properties" not in schema)
        names = list(properties)
        entries = [
            (
                self.term(Literal(f'<cofl:value name="{cohere_name(n)}"')),
                self.typed(properties[n], f"{path}/properties/{n}", set(seen)),
            )
            for n in names
        ]
        extra_entry: Fragment | None = None
        if extra is not False:
            key: Regex = _cohere_key()
            if names:
                key = Intersect(
                    (key, Complement(Alt(tuple(Literal(cohere_name(n)) for n in names))))
                )
            value = self.typed(extra, f"{path}/additionalProperties", set(seen))
            quote = self.term(Literal('"'))
            extra_entry = (self.term(Literal('<cofl:value name="')), self.term(key), quote, value)
        firsts = self.members(names, entries, required, extra_entry, (self.ws,))
        top: list[Fragment] = [(self.ws, self.rule(firsts), self.ws)] if firsts else []
        if not required:
            top.append((self.ws,))
        return self.rule(top)

    def list_body(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array's items: elements without a name, no whitespace between them."""
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        prefix = [
            (self.opening, self.typed(s, f"{path}/prefixItems/{i}", set(seen)))
            for i, s in enumerate(schema.get("prefixItems", []))
        ]
        if high is not None and high < len(prefix):
            raise GrammarError(
                f"maxItems is less than the number of prefixItems ({high} < {len(prefix)})",
                f"{path}/maxItems",
            )
        items = schema.get("items", False)
        out: Fragment = tuple(part for item in prefix for part in item)
        if items is False:
            if low > len(prefix):
                raise GrammarError(
                    "minItems is more than the items the array can hold", f"{path}/minItems"
                )
            return out
        element = (self.opening, self.typed(items, f"{path}/items", set(seen)))
        count = len(prefix)
        more = None if high is None else high - count
        return (*out, *self.repeat(element, max(0, low - count), more))
