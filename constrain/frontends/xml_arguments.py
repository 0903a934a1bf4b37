r"""Stage 1: XGrammar's XML argument styles, a JSON Schema -> Grammar IR.

``qwen_xml`` is described below; ``minimax_xml`` (``<parameter name="NAME">VALUE</parameter>``)
and ``glm_xml`` (``<arg_key>NAME</arg_key>``, whitespace, ``<arg_value>VALUE</arg_value>``) are
the same language with other tags (:data:`STYLES`, :func:`xml_arguments_grammar`).
``deepseek_xml`` (DeepSeek-V3.2, ``<｜DSML｜parameter name="NAME" string="true|false">VALUE
</｜DSML｜parameter>``) also says whether the value is a string: ``string="true"`` before a
string value (plain, ``pattern``/``format``/length-bounded, a string ``const`` or the string
members of an ``enum``), written raw with no whitespace around it; ``string="false"`` before
any other value, whitespace around it as usual; an untyped value (``{}``, undeclared
properties) is a plain string or any other JSON value (numbers, booleans and null too).
``deepseek_v4_1_xml`` (DeepSeek-V4.1) is ``deepseek_xml`` with a space after the second bar
(``<｜DSML｜ parameter name="NAME" ...>``, ``</｜DSML｜ parameter>``). ``kimi_k3_xml``
(Kimi-K3, ``<|open|>argument key="NAME" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>``) is
``qwen_xml``'s language with these tags, the name escaped as an attribute value (``&amp;``,
``&quot;``) and a type name that the property's schema pins (:func:`kimi_type`) or, where it
pins none, any of :data:`KIMI_TYPES`, whatever the value. Without ``type``, only object
keywords (``properties``, ``additionalProperties``, ``unevaluatedProperties``) and array
keywords (``items``, ``prefixItems``) imply a type, as XGrammar 0.2.9 reads a schema; a
property schema with only other keywords (``minimum``, ``pattern``, ``required``) takes any
value, in every style.

Qwen3-Coder writes a tool call's arguments as one XML-like element per property,
``<parameter=NAME>VALUE</parameter>``, instead of a JSON object. XGrammar's structural tags
read a ``json_schema`` format with ``style: "qwen_xml"`` (and the older ``qwen_xml_parameter``
format) as that language; :func:`qwen_xml_grammar` builds the same language, rule for rule as
XGrammar 0.2.9's ``XMLToolCallingConverter`` (``cpp/json_schema_converter_ext.cc``):

- **The arguments object** is the schema's root, an object. Its declared ``properties`` come in
  the schema's order, each at most once, the ``required`` ones always (required names that are
  not declared are ignored). Undeclared properties are refused where the schema declares
  ``properties`` (strict mode, as for JSON) unless ``additionalProperties`` allows them; then
  any number of them follow the declared ones, named ``[a-zA-Z_][a-zA-Z0-9_]*`` (a declared
  name too). ``{}``, ``true`` and ``{"type": "object"}`` take any such properties with any
  values.
- **Whitespace** ``[ \t\n\r]*`` (at most ``max_whitespace_cnt`` characters per run when given)
  may come before and after the elements, between them, and around every value that is not a
  plain string; none inside ``<parameter=NAME>``.
- **A plain string value** (``{"type": "string"}`` with no ``pattern``, ``format``,
  ``minLength`` or ``maxLength``) is raw text, not quoted or escaped, that ends at the first
  ``</parameter>``: any text not containing it. A string with a ``format`` is the format's
  language (constrain's formats, :mod:`constrain.frontends.json_schema.formats`), else with a
  ``pattern`` the pattern's full match (ECMAScript), else any ``minLength``..``maxLength``
  characters (they may contain ``</parameter>``).
- **``enum`` and ``const``** values are written raw: a string value as its text, any other
  value as the JSON text XGrammar prints for it (compact, keys in the schema's order, integers
  plainly, ``1.0`` as ``1``).
- **Other values** (integers, numbers, booleans, null, arrays and objects, nested or not) are
  XGrammar's JSON for the property's schema (:func:`~constrain.frontends.xgrammar_json.
  xgrammar_json_schema`): strings inside them are quoted JSON strings. A property with no type
  (``{}``) is a plain string, a JSON array or a JSON object; ``anyOf``, ``oneOf`` and a list of
  types join their options' languages; a ``$ref`` into ``$defs``/``definitions`` is followed.

Refused with :class:`~constrain.errors.GrammarError` at the JSON pointer of the keyword: a root
that is not an object schema, and the root keywords XGrammar counts or combines
(``minProperties``, ``maxProperties``, ``patternProperties``, ``propertyNames``,
``dependentRequired``, ``allOf``, ...), a property schema of ``false`` and ``allOf``, ``not`` or
``if`` in a property schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from constrain.errors import GrammarError
from constrain.frontends.compose import free_text
from constrain.frontends.xml_rules import (
    Fragment,
    JsonGrammar,
    XmlRules,
    implied_type,
    variable_name,
)
from constrain.ir import ANY_CHAR, Alt, Grammar, Literal, Repeat

__all__ = [
    "END_TAG",
    "KIMI_TYPES",
    "Fragment",
    "JsonGrammar",
    "STYLES",
    "XmlRules",
    "XmlStyle",
    "kimi_type",
    "qwen_xml_grammar",
    "xml_arguments_grammar",
    "xml_value_text",
]


@dataclass(frozen=True, slots=True)
class XmlStyle:
    """The tags around one argument of an XML style (XGrammar's ``XMLWrapper``).

    An element is ``key_prefix NAME key_suffix [whitespace value_prefix] VALUE end``; the
    whitespace and ``value_prefix`` come only when ``value_prefix`` is not empty.
    """

    key_prefix: str
    key_suffix: str
    value_prefix: str
    end: str
    is_typed: bool = False
    """DeepSeek's: ``key_suffix`` is followed by ``true">`` before a string value written raw
    (no whitespace around it), by ``false">`` before any other value."""
    type_attr: str = ""
    """Kimi-K3's: ``key_suffix`` is followed by a JSON type name (:func:`kimi_type`) and this
    string; the name is escaped as an XML attribute value (``&amp;``, ``&quot;``)."""


STYLES: dict[str, XmlStyle] = {
    "qwen_xml": XmlStyle("<parameter=", ">", "", "</parameter>"),
    "minimax_xml": XmlStyle('<parameter name="', '">', "", "</parameter>"),
    "glm_xml": XmlStyle("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "deepseek_xml": XmlStyle(
        '<\uff5cDSML\uff5cparameter name="',
        '" string="',
        "",
        "</\uff5cDSML\uff5cparameter>",
        is_typed=True,
    ),
    "deepseek_v4_1_xml": XmlStyle(
        '<\uff5cDSML\uff5c parameter name="',
        '" string="',
        "",
        "</\uff5cDSML\uff5c parameter>",
        is_typed=True,
    ),
    "kimi_k3_xml": XmlStyle(
        '<|open|>argument key="',
        '" type="',
        "",
        "<|close|>argument<|sep|>",
        type_attr='"<|sep|>',
    ),
}
"""The XML argument styles implemented, by XGrammar's style name."""

END_TAG = STYLES["qwen_xml"].end
"""The string that ends every ``qwen_xml`` parameter element (and a plain string value)."""

_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly"}
    | {"writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions"}
)
_ROOT_KEYS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
_REFUSED_VALUE_KEYS = ("allOf", "not", "if")
_INT64 = 2**63
KIMI_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
"""The type names of ``kimi_k3_xml``'s ``type`` attribute, in XGrammar's order."""


def qwen_xml_grammar(
    schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
) -> Grammar:
    """Return the grammar of tool-call arguments in XGrammar's ``qwen_xml`` style.

    Parameters
    ----------
    schema : dict or bool
        The JSON Schema of the arguments: an object schema, ``{}`` or ``true``.
    max_whitespace : int or None
        Longest whitespace run (XGrammar's ``max_whitespace_cnt``); None: unbounded.
    pointer : str
        The JSON pointer of the schema in its document, prefixed to error pointers.
    json_grammar : callable
        Returns the grammar of the JSON values of a schema, no whitespace around them
        (:func:`~constrain.frontends.xgrammar_json.xgrammar_json_schema`, passed in by the
        structural-tag front end, which imports this module).

    Returns
    -------
    Grammar
        The grammar, not normalised.

    Raises
    ------
    GrammarError
        If the schema is not an object schema or uses a keyword this style cannot enforce.
    JsonSchemaError
        If the schema of a JSON value cannot be enforced (its pointer runs into the schema).
    """
    return xml_arguments_grammar("qwen_xml", schema, max_whitespace, pointer, json_grammar)


def xml_arguments_grammar(
    style: str, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
) -> Grammar:
    """Return the grammar of tool-call arguments in one of XGrammar's XML styles.

    The styles differ only in the tags around names and values (:data:`STYLES`):
    ``qwen_xml`` writes ``<parameter=NAME>VALUE</parameter>``, ``minimax_xml``
    ``<parameter name="NAME">VALUE</parameter>`` and ``glm_xml``
    ``<arg_key>NAME</arg_key>`` whitespace ``<arg_value>VALUE</arg_value>``, ``deepseek_xml``
    ``<｜DSML｜parameter name="NAME" string="true|false">VALUE</｜DSML｜parameter>`` (the flag
    as the module docstring says); a plain string value ends at the first end tag of its
    style. Everything else is as :func:`qwen_xml_grammar` describes.

    Parameters
    ----------
    style : str
        A key of :data:`STYLES`.
    schema : dict or bool
        The JSON Schema of the arguments: an object schema, ``{}`` or ``true``.
    max_whitespace : int or None
        Longest whitespace run (XGrammar's ``max_whitespace_cnt``); None: unbounded.
    pointer : str
        The JSON pointer of the schema in its document, prefixed to error pointers.
    json_grammar : callable
        Returns the grammar of the JSON values of a schema, no whitespace around them.

    Returns
    -------
    Grammar
        The grammar, not normalised.

    Raises
    ------
    GrammarError
        If the style is unknown, or the schema is not an object schema or uses a keyword this
        style cannot enforce.
    JsonSchemaError
        If the schema of a JSON value cannot be enforced (its pointer runs into the schema).
    """
    if style not in STYLES:
        raise GrammarError(f"unknown XML argument style {style!r}")
    return _XmlBuilder(style, schema, max_whitespace, pointer, json_grammar).arguments()


def xml_value_text(value: Any) -> str:
    """Return the text of an ``enum``/``const`` value in an XML argument, as XGrammar writes it.

    A string is its own text; any other value is compact JSON in XGrammar's (picojson's)
    spelling: keys in their order, integers that fit 64 bits as written, a float with an
    integral value below 2**53 without a fraction (``1.0`` -> ``1``), other floats in their
    shortest round-trip form (``1e-05``), control characters and DEL escaped, other characters
    raw.

    Parameters
    ----------
    value : Any
        A JSON value.

    Returns
    -------
    str
        Its text.
    """
    return value if isinstance(value, str) else _json_text(value)


def _json_text(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if -_INT64 <= value < _INT64 else _json_text(float(value))
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return f"{value:.0f}"
        return repr(value)
    if isinstance(value, str):
        out = []
        for ch in value:
            code = ord(ch)
            short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
            short.update({"\r": "\\r", "\t": "\\t"})
            if ch in short:
                out.append(short[ch])
            elif code < 0x20 or code == 0x7F:
                out.append(f"\\u{code:04x}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{" + ",".join(f"{_json_text(str(k))}:{_json_text(v)}" for k, v in value.items()) + "}"
        )
    raise GrammarError(f"not a JSON value: {value!r}")


class _XmlBuilder(XmlRules):
    """Collect the rules and terminals of one ``qwen_xml``-family arguments grammar."""

    def __init__(
        self,
        style: str,
        schema: Any,
        max_whitespace: int | None,
        pointer: str,
        json_grammar: JsonGrammar,
    ) -> None:
        super().__init__(schema, max_whitespace, pointer, json_grammar)
        self.style_name = style
        self.style = STYLES[style]
        self.raw_names: set[str] = set()  # rules of string values written raw (typed styles)
        self.plain = self.term(free_text([self.style.end]))
        self.end = self.term(Literal(self.style.end))

    # -- the arguments object ----------------------------------------------------------------

    def arguments(self) -> Grammar:
        """Return the grammar of the whole arguments object."""
        schema, path = self.root, self.pointer
        if schema is True or schema == {}:
            schema = {"type": "object"}
        schema = self.root_object(schema, self.style_name)
        for key in schema:
            if key not in _ROOT_KEYS:
                raise GrammarError(
                    f"'{key}' on the arguments object is not supported "
                    f"in the {self.style_name} style",
                    f"{path}/{key}",
                )
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise GrammarError("'properties' must be an object", f"{path}/properties")
        required = set(schema.get("required", ()))
        extra = schema.get("additionalProperties", "properties" not in schema)
        names = list(properties)
        entries = [
            self.entry(self.literal_key(n), properties[n], f"{path}/properties/{n}") for n in names
        ]
        extra_entry: Fragment | None = None
        if extra is not False:
            where = f"{path}/additionalProperties"
            name = self.term(variable_name())
            opening = (self.term(Literal(self.style.key_prefix)), name)
            extra_entry = self.entry(opening, extra, where)
        firsts = self.members(names, entries, required, extra_entry, (self.ws,))
        top: list[Fragment] = [(self.ws, self.rule(firsts), self.ws)] if firsts else []
        if not any(n in required for n in names):
            top.append((self.ws,))
        return self.grammar(self.rule(top, "start"))

    def literal_key(self, name: str) -> Fragment:
        """Return the opening of a declared property's element."""
        if self.style.type_attr:
            name = name.replace("&", "&amp;").replace('"', "&quot;")
        return (self.term(Literal(f"{self.style.key_prefix}{name}")),)

    def entry(self, opening: Fragment, schema: Any, path: str) -> Fragment:
        """Return one element: ``opening``, the key suffix, the value and the end tag."""
        if self.style.is_typed:
            alts: list[Fragment] = []
            for f in self.options(schema, path, set()):
                if f == (self.plain,) or f[0] in self.raw_names:
                    alts.append((self.term(Literal(f'{self.style.key_suffix}true">')), *f))
                else:
                    lead = self.term(Literal(f'{self.style.key_suffix}false">'))
                    alts.append((lead, self.ws, *f, self.ws))
            return (*opening, self.rule(alts), self.end)
        middle: Fragment = (self.term(Literal(self.style.key_suffix)),)
        if self.style.type_attr:
            kind = kimi_type(schema)
            names = KIMI_TYPES if kind is None else (kind,)
            attr = Alt(
                tuple(Literal(f"{self.style.key_suffix}{n}{self.style.type_attr}") for n in names)
            )
            middle = (self.term(attr),)
        if self.style.value_prefix:
            middle = (*middle, self.ws, self.term(Literal(self.style.value_prefix)))
        return (*opening, *middle, self.value(schema, path), self.end)

    # -- values --------------------------------------------------------------------------------

    def value(self, schema: Any, path: str) -> str:
        """Return the rule of a property's value (up to its ``</parameter>``)."""
        return self.rule(
            [
                f if f == (self.plain,) else (self.ws, *f, self.ws)
                for f in self.options(schema, path, set())
            ]
        )

    def enum_terminal(self, values: list[Any]) -> Fragment:
        """Return the fragment of the raw texts of ``values``."""
        texts = dict.fromkeys(xml_value_text(v) for v in values)
        return (self.term(Alt(tuple(Literal(t) for t in texts))),)

    def raw(self, fragment: Fragment) -> Fragment:
        """Mark a string value written raw (a rule of its own in a typed style)."""
        if not self.style.is_typed:
            return fragment
        name = self.rule([fragment])
        self.raw_names.add(name)
        return (name,)

    def options(self, schema: Any, path: str, seen: set[str]) -> list[Fragment]:
        """Return the alternatives of a value; ``(plain,)`` is a plain string (no whitespace)."""
        if schema is False:
            raise GrammarError("a property whose schema is false can have no value", path)
        return super().options(schema, path, seen)

    def refuse(self, schema: Mapping[str, Any], path: str) -> None:
        """Raise a GrammarError at the first keyword of ``schema`` the style does not enforce."""
        for key in _REFUSED_VALUE_KEYS:
            if key in schema:
                raise GrammarError(
                    f"'{key}' in an argument's schema is not supported "
                    f"in the {self.style_name} style",
                    f"{path}/{key}",
                )

    def unconstrained(self, path: str) -> list[Fragment]:
        """Return any value: a plain string, a JSON array or a JSON object (typed: any JSON)."""
        if self.style.is_typed:  # a plain string or any other JSON value
            kinds = ("number", "boolean", "null", "array", "object")
            return [(self.plain,), *(self.json_value({"type": k}, path) for k in kinds)]
        arrays = self.json_value({"type": "array", "items": True}, path)
        objects = self.json_value({"type": "object"}, path)
        return [(self.plain,), arrays, objects]

    def literal(self, value: Any, path: str) -> Fragment:
        """Return a ``const`` value written raw."""
        const = (self.term(Literal(xml_value_text(value))),)
        return self.raw(const) if isinstance(value, str) else const

    def literals(self, values: list[Any], path: str) -> list[Fragment]:
        """Return an ``enum``'s values written raw (the strings apart in a typed style)."""
        if not self.style.is_typed:
            return [self.enum_terminal(values)]
        strings = [v for v in values if isinstance(v, str)]
        others = [v for v in values if not isinstance(v, str)]
        found = [self.raw(self.enum_terminal(strings))] if strings else []
        return found + ([self.enum_terminal(others)] if others else [])

    def object(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an object value: XGrammar's JSON."""
        return self.json_value({**schema, "type": "object"}, path)

    def array(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array value: XGrammar's JSON."""
        return self.json_value({**schema, "type": "array"}, path)

    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return the fragment of a string value, written raw."""
        fmt, pattern = schema.get("format"), schema.get("pattern")
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if fmt is None and pattern is None and low == 0 and high is None:
            return self.raw((self.plain,))
        regex = self.content_regex(schema, path)
        if regex is None:
            regex = Repeat(ANY_CHAR, int(low), None if high is None else int(high))
        return self.raw((self.term(regex),))


def kimi_type(schema: Any) -> str | None:
    """Return the type name ``kimi_k3_xml`` pins for a property's schema (None: any of them).

    As XGrammar 0.2.9: a ``$ref`` pins none; a ``const`` pins its value's type and an ``enum``
    its members' common type (integers and floats are ``number``, as Kimi-K3's template writes
    them; none where they differ); ``anyOf``, ``oneOf`` and ``allOf`` pin none; otherwise the
    ``type`` (``integer`` -> ``number``; a list pins none) or the type object or array
    keywords imply.

    Parameters
    ----------
    schema : Any
        The property's JSON Schema.

    Returns
    -------
    str or None
        One of :data:`KIMI_TYPES` (never ``integer``), or None.
    """
    if not isinstance(schema, Mapping) or "$ref" in schema:
        return None
    if "const" in schema:
        return _value_type(schema["const"])
    if "enum" in schema:
        values = schema["enum"]
        kinds = {_value_type(v) for v in values} if isinstance(values, list) else set()
        return kinds.pop() if len(kinds) == 1 else None
    if any(key in schema for key in ("anyOf", "oneOf", "allOf")):
        return None
    kind = schema.get("type", implied_type(schema))
    if not isinstance(kind, str):
        return None
    return "number" if kind == "integer" else kind


def _value_type(value: Any) -> str:
    """Return the JSON type name of a value (``number`` for integers and floats)."""
    if isinstance(value, str):
        return "string"
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"
