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
  XGrammar's JSON for the property's schema (:func:`~constrain.frontends.structural_tag.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from constrain.errors import GrammarError, RegexError
from constrain.frontends.compose import embed, free_text
from constrain.frontends.json_schema.formats import format_regex
from constrain.frontends.regex import parse_regex
from constrain.ir import (
    ANY_CHAR,
    Alt,
    CharSet,
    Concat,
    Grammar,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
)

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

_WS = CharSet(((9, 10), (13, 13), (32, 32)))
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly"}
    | {"writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions"}
)
_ROOT_KEYS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
_REFUSED_VALUE_KEYS = ("allOf", "not", "if")
_JSON_TYPES = ("integer", "number", "boolean", "null", "array", "object")
_INT64 = 2**63
KIMI_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
"""The type names of ``kimi_k3_xml``'s ``type`` attribute, in XGrammar's order."""


JsonGrammar = Callable[[Any, int | None, str], Grammar]
"""``json_grammar(schema, max_whitespace, pointer)``: the grammar of one JSON value."""


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
        (:func:`~constrain.frontends.structural_tag.xgrammar_json_schema`, passed in by the
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
    if max_whitespace is not None and (
        isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int)
    ):
        raise GrammarError(f"max_whitespace_cnt must be an integer, got {max_whitespace!r}")
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


Fragment = tuple[str, ...]


class XmlRules:
    """Collect the rules and terminals of one XML-style arguments grammar (the bookkeeping).

    Parameters
    ----------
    schema : Any
        The JSON Schema of the arguments (the root of ``$ref`` and of root definitions).
    max_whitespace : int or None
        Longest whitespace run; None: unbounded.
    pointer : str
        The JSON pointer of the schema in its document.
    json_grammar : callable
        Returns the grammar of the JSON values of a schema, no whitespace around them.
    """

    def __init__(
        self, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
    ) -> None:
        self.root = schema
        self.json_grammar = json_grammar
        self.max_whitespace = max_whitespace
        self.pointer = pointer
        self.rules: list[Rule] = []
        self.terminals: dict[Regex, str] = {}
        self.extra_terminals: list[Terminal] = []
        self.num_rules = 0
        self.num_embedded = 0
        self.ws = self._whitespace_rule()

    # -- bookkeeping -------------------------------------------------------------------------

    def term(self, regex: Regex) -> str:
        """Return the terminal of ``regex`` (interned)."""
        name = self.terminals.get(regex)
        if name is None:
            name = self.terminals[regex] = f"X{len(self.terminals)}"
        return name

    def rule(self, alternatives: Sequence[Fragment], name: str | None = None) -> str:
        """Add a rule and return its name (a fresh one unless ``name`` is given)."""
        if name is None:
            name = self.fresh()
        self.rules.append(Rule(name, tuple(dict.fromkeys(alternatives))))
        return name

    def fresh(self) -> str:
        """Return an unused rule name."""
        self.num_rules += 1
        return f"xml{self.num_rules}"

    def _whitespace_rule(self) -> str:
        """Return the rule of one whitespace run (possibly empty)."""
        if self.max_whitespace is not None and self.max_whitespace <= 0:
            return self.rule([()])
        run = self.term(Repeat(_WS, 1, self.max_whitespace))
        return self.rule([(), (run,)])

    def repeat(self, item: Fragment, low: int, high: int | None) -> Fragment:
        """Return ``low`` to ``high`` (None: any number of) copies of ``item``."""
        if high is None:
            loop = self.fresh()
            tail = self.rule([(), (*item, loop)], loop)
        else:
            tail = self.rule([()])
            for _ in range(high - low):
                tail = self.rule([(), (*item, tail)])
        return (*(item * low), tail)

    def grammar(self, start: str) -> Grammar:
        """Return the grammar of the rules collected, from ``start``."""
        terminals = tuple(Terminal(n, r) for r, n in self.terminals.items())
        return Grammar(
            rules=tuple(self.rules), terminals=terminals + tuple(self.extra_terminals), start=start
        )

    def json_value(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return the start symbol of a JSON value of ``schema`` (root definitions in scope)."""
        document = dict(schema)
        if isinstance(self.root, Mapping):
            for key in ("$defs", "definitions"):
                if key in self.root and key not in document:
                    document[key] = self.root[key]
        grammar = self.json_grammar(document, self.max_whitespace, path)
        self.num_embedded += 1
        part = embed(grammar, f"j{self.num_embedded}_")
        self.rules.extend(part.rules)
        self.extra_terminals.extend(part.terminals)
        return (part.start,)

    def resolve(self, ref: Any, path: str, seen: set[str]) -> tuple[Any, str]:
        """Return the schema a local ``$ref`` names and its pointer."""
        if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
            problem = "a cycle" if ref in seen else "not a local reference"
            raise GrammarError(f"$ref {ref!r} is {problem}", path)
        seen.add(ref)
        node: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise GrammarError(f"$ref {ref!r} names nothing", path)
            node = node[part]
        return node, self.pointer + ref[1:]


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
        if not isinstance(schema, Mapping):
            raise GrammarError(f"the {self.style_name} style needs an object schema", path)
        kind = schema.get("type", "object")
        if kind != "object" and not (isinstance(kind, list) and kind == ["object"]):
            raise GrammarError(
                f"the {self.style_name} style writes an object's properties; "
                f"type {kind!r} is not an object",
                f"{path}/type",
            )
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
            name = self.term(_variable_name())
            opening = (self.term(Literal(self.style.key_prefix)), name)
            extra_entry = self.entry(opening, extra, where)
        # tails[i]: the elements after property i - 1, each behind a whitespace run
        tails: list[Fragment] = [()]
        if extra_entry is not None:  # a loop of undeclared properties
            loop = self.fresh()
            tails = [(self.rule([(), (self.ws, *extra_entry, loop)], loop),)]
        for i in range(len(names) - 1, -1, -1):
            present = (self.ws, *entries[i], *tails[0])
            alts = [present] if names[i] in required else [present, tails[0]]
            tails.insert(0, (self.rule(alts),))
        firsts: list[Fragment] = []
        for i, name in enumerate(names):
            firsts.append((*entries[i], *tails[i + 1]))
            if name in required:
                break
        else:
            if extra_entry is not None:
                firsts.append((*extra_entry, *tails[-1]))
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
        if schema is True or schema == {}:
            schema = {}
        if schema is False:
            raise GrammarError("a property whose schema is false can have no value", path)
        if not isinstance(schema, Mapping):
            raise GrammarError(f"a schema is an object or a boolean, got {schema!r}", path)
        for key in _REFUSED_VALUE_KEYS:
            if key in schema:
                raise GrammarError(
                    f"'{key}' in an argument's schema is not supported "
                    f"in the {self.style_name} style",
                    f"{path}/{key}",
                )
        if "$ref" in schema:
            return self.options(*self.resolve(schema["$ref"], f"{path}/$ref", seen), seen)
        if "const" in schema:
            const = (self.term(Literal(xml_value_text(schema["const"]))),)
            return [self.raw(const) if isinstance(schema["const"], str) else const]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise GrammarError("'enum' must be a non-empty list", f"{path}/enum")
            if not self.style.is_typed:
                return [self.enum_terminal(values)]
            strings = [v for v in values if isinstance(v, str)]  # apart from the others
            others = [v for v in values if not isinstance(v, str)]
            found = [self.raw(self.enum_terminal(strings))] if strings else []
            return found + ([self.enum_terminal(others)] if others else [])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise GrammarError(f"'{key}' must be a non-empty list", f"{path}/{key}")
                out: list[Fragment] = []
                for i, option in enumerate(options):
                    merged = {k: v for k, v in schema.items() if k != key}
                    merged.update(option if isinstance(option, Mapping) else {})
                    if option is False:
                        continue
                    out.extend(self.options(merged, f"{path}/{key}/{i}", seen))
                return out
        kind = schema.get("type")
        if isinstance(kind, list):
            out = []
            for i, one in enumerate(kind):
                out.extend(self.options({**schema, "type": one}, f"{path}/type/{i}", seen))
            return out
        if kind is None:
            if set(schema) - _ANNOTATIONS:
                kind = _implied_type(schema)
            if kind is None:  # any value: a plain string, a JSON array or a JSON object
                if self.style.is_typed:  # a plain string or any other JSON value
                    kinds = ("number", "boolean", "null", "array", "object")
                    return [(self.plain,), *(self.json_value({"type": k}, path) for k in kinds)]
                arrays = self.json_value({"type": "array", "items": True}, path)
                objects = self.json_value({"type": "object"}, path)
                return [(self.plain,), arrays, objects]
        if kind == "string":
            return [self.raw(self.string(schema, path))]
        if kind not in _JSON_TYPES:
            raise GrammarError(f"unknown type {kind!r}", f"{path}/type")
        return [self.json_value({**schema, "type": kind}, path)]

    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return the fragment of a string value, written raw."""
        fmt, pattern = schema.get("format"), schema.get("pattern")
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if fmt is None and pattern is None and low == 0 and high is None:
            return (self.plain,)
        regex = format_regex(fmt) if isinstance(fmt, str) else None
        if regex is None and isinstance(pattern, str):
            try:
                regex = parse_regex(pattern, flavor="ecmascript")
            except RegexError as err:
                raise GrammarError(f"invalid pattern: {err}", f"{path}/pattern") from err
        if regex is None:
            regex = Repeat(ANY_CHAR, int(low), None if high is None else int(high))
        return (self.term(regex),)


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
    kind = schema.get("type", _implied_type(schema))
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


def _variable_name() -> Regex:
    """Return the language of an undeclared property's name, ``[a-zA-Z_][a-zA-Z0-9_]*``."""
    first = CharSet(((65, 90), (95, 95), (97, 122)))
    rest = first.union(CharSet(((48, 57),)))
    return Concat((first, Repeat(rest, 0, None)))


def _implied_type(schema: Mapping[str, Any]) -> str | None:
    """Return the type XGrammar 0.2.9 reads from a schema without ``type`` (None: any value).

    Only object and array keywords imply a type there (object first); a schema with only
    string, number or other keywords (``pattern``, ``minimum``, ``minItems``, ``required``)
    takes any value.
    """
    keys = set(schema)
    if keys & {"properties", "additionalProperties", "unevaluatedProperties"}:
        return "object"
    if keys & {"items", "prefixItems"}:
        return "array"
    return None
