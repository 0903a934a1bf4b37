"""Stage 1: what XGrammar's XML-like argument styles build alike, for their front ends.

:class:`XmlRules` collects the rules and terminals of one arguments grammar and reads a value's
schema the way every style does (``$ref``, ``const``/``enum``, ``anyOf``/``oneOf``, a list of
types, implied types); each style (:mod:`constrain.frontends.xml_arguments`,
:mod:`constrain.frontends.xml_elements`, :mod:`constrain.frontends.gemma_json`) supplies the
hooks that write values its own way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from constrain.errors import GrammarError, RegexError
from constrain.frontends.compose import embed
from constrain.frontends.json_schema.formats import format_regex
from constrain.frontends.regex import parse_regex
from constrain.ir import CharSet, Concat, Grammar, Regex, Repeat, Rule, Terminal

__all__ = ["Fragment", "JsonGrammar", "XmlRules", "implied_type", "variable_name"]

JsonGrammar = Callable[[Any, int | None, str], Grammar]
"""``json_grammar(schema, max_whitespace, pointer)``: the grammar of one JSON value."""

Fragment = tuple[str, ...]
"""A sequence of rule and terminal names."""

_WS = CharSet(((9, 10), (13, 13), (32, 32)))


class XmlRules(ABC):
    """Collect the rules and terminals of one XML-style arguments grammar.

    The bookkeeping, and what the styles read alike: :meth:`options` dispatches on a value's
    schema and calls the style's hooks (:meth:`literal`, :meth:`string`, :meth:`object`, ...);
    :meth:`members` and :meth:`array_items` order an object's elements and an array's items.

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

    Raises
    ------
    GrammarError
        If ``max_whitespace`` is not an integer or None.
    """

    def __init__(
        self, schema: Any, max_whitespace: int | None, pointer: str, json_grammar: JsonGrammar
    ) -> None:
        if max_whitespace is not None and (
            isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int)
        ):
            raise GrammarError(f"max_whitespace_cnt must be an integer, got {max_whitespace!r}")
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

    def root_object(self, schema: Any, style: str) -> Mapping[str, Any]:
        """Return the arguments' schema; a GrammarError unless it is an object schema."""
        if not isinstance(schema, Mapping):
            raise GrammarError(f"the {style} style needs an object schema", self.pointer)
        kind = schema.get("type", "object")
        if kind != "object" and kind != ["object"]:
            raise GrammarError(
                f"the {style} style writes an object's properties; type {kind!r} is not an object",
                f"{self.pointer}/type",
            )
        return schema

    def content_regex(self, schema: Mapping[str, Any], path: str) -> Regex | None:
        """Return a string's language by its known ``format``, else its ``pattern`` (or None)."""
        fmt, pattern = schema.get("format"), schema.get("pattern")
        regex = format_regex(fmt) if isinstance(fmt, str) else None
        if regex is None and isinstance(pattern, str):
            try:
                regex = parse_regex(pattern, flavor="ecmascript")
            except RegexError as err:
                raise GrammarError(f"invalid pattern: {err}", f"{path}/pattern") from err
        return regex

    def members(
        self,
        names: Sequence[str],
        entries: Sequence[Fragment],
        required: Container[Any],
        extra: Fragment | None,
        sep: Fragment,
    ) -> list[Fragment]:
        """Return the alternatives of an object's elements, each from the first one present.

        The ``entries`` of the declared ``names`` come in order, each at most once, the
        ``required`` ones always; any number of ``extra`` elements (undeclared properties)
        follow where it is not None; ``sep`` stands before every element but the first. An
        empty list: no element can be present.
        """
        tails: list[Fragment] = [()]  # tails[i]: the elements after entry i - 1
        if extra is not None:  # a loop of undeclared properties
            loop = self.fresh()
            tails = [(self.rule([(), (*sep, *extra, loop)], loop),)]
        for i in range(len(names) - 1, -1, -1):
            present = (*sep, *entries[i], *tails[0])
            alts = [present] if names[i] in required else [present, tails[0]]
            tails.insert(0, (self.rule(alts),))
        firsts: list[Fragment] = []
        for i, name in enumerate(names):
            firsts.append((*entries[i], *tails[i + 1]))
            if name in required:
                break
        else:
            if extra is not None:
                firsts.append((*extra, *tails[-1]))
        return firsts

    def array_items(
        self,
        prefix: Sequence[Fragment],
        extra: Fragment | None,
        bounds: tuple[int, int | None],
        sep: Fragment,
        frame: tuple[Fragment, Fragment, Fragment],
    ) -> Fragment:
        """Return the rule of a non-empty array: ``prefix`` items, then ``extra`` items.

        The array may end after any prefix item once ``bounds`` (``low``, ``high``: None for
        no bound) allow; ``sep`` stands between two items; ``frame`` is the opening, the
        closing and the whole empty array (an alternative where ``low`` is 0). Needs an item
        that can be present: a prefix item or ``extra``, and ``high`` not 0.
        """
        low, high = bounds
        opening, closing, empty = frame
        if not prefix and extra is not None:
            more = self.repeat((*sep, *extra), max(0, low - 1), None if high is None else high - 1)
            body = (*opening, *extra, *more, *closing)
            return (self.rule([body] if low > 0 else [body, empty]),)
        count = len(prefix)
        tail: Fragment = ()
        if extra is not None:
            tail = self.repeat(
                (*sep, *extra),
                max(0, low - count),
                None if high is None else max(0, high - count),
            )
        for index in range(count - 2, -1, -1):
            emitted = index + 1
            alts: list[Fragment] = []
            if high is None or emitted < high:
                alts.append((*sep, *prefix[index + 1], *tail))
            if emitted >= low or not alts:
                alts.append(())
            tail = (self.rule(alts),)
        body = (*opening, *prefix[0], *tail, *closing)
        return (self.rule([body] if low > 0 else [body, empty]),)

    # -- values: the keywords every style reads alike, and the style's hooks -----------------

    def options(self, schema: Any, path: str, seen: set[str]) -> list[Fragment]:
        """Return the alternatives of a value of ``schema``.

        ``$ref`` is followed; ``const`` and ``enum`` are the style's literals; ``anyOf`` and
        ``oneOf`` (each option merged into the schema) and a list of types join their
        options; without ``type`` the object and array keywords imply one, else the value is
        :meth:`untyped`; a type calls its hook (:meth:`string`, :meth:`object`, ...).
        """
        if schema is False:
            raise GrammarError("a schema of false can have no value", path)
        if schema is True or schema == {}:
            return self.unconstrained(path)
        if not isinstance(schema, Mapping):
            raise GrammarError(f"a schema is an object or a boolean, got {schema!r}", path)
        self.refuse(schema, path)
        if "$ref" in schema:
            return self.options(*self.resolve(schema["$ref"], f"{path}/$ref", seen), seen)
        if "const" in schema:
            return [self.literal(schema["const"], f"{path}/const")]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise GrammarError("'enum' must be a non-empty list", f"{path}/enum")
            return self.literals(values, path)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise GrammarError(f"'{key}' must be a non-empty list", f"{path}/{key}")
                out: list[Fragment] = []
                for i, option in enumerate(options):
                    if option is False:
                        continue
                    merged = {k: v for k, v in schema.items() if k != key}
                    merged.update(option if isinstance(option, Mapping) else {})
                    out.extend(self.options(merged, f"{path}/{key}/{i}", seen))
                return out
        kind = schema.get("type")
        if isinstance(kind, list):
            out = []
            for i, one in enumerate(kind):
                out.extend(self.options({**schema, "type": one}, f"{path}/type/{i}", seen))
            return out
        if kind is None:
            kind = implied_type(schema)
            if kind is None:
                return self.untyped(path)
        if kind == "string":
            return [self.string(schema, path)]
        if kind == "object":
            return [self.object(schema, path, seen)]
        if kind == "array":
            return [self.array(schema, path, seen)]
        if kind not in ("integer", "number", "boolean", "null"):
            raise GrammarError(f"unknown type {kind!r}", f"{path}/type")
        return [self.scalar({**schema, "type": kind}, path)]

    def refuse(self, schema: Mapping[str, Any], path: str) -> None:  # noqa: B027 - optional hook
        """Raise a GrammarError at the first keyword of ``schema`` the style does not enforce.

        A style that enforces every keyword it meets keeps this default, which refuses nothing.
        """

    @abstractmethod
    def unconstrained(self, path: str) -> list[Fragment]:
        """Return the alternatives of any value (``{}``, ``true``)."""

    def untyped(self, path: str) -> list[Fragment]:
        """Return the alternatives of a value whose schema implies no type."""
        return self.unconstrained(path)

    @abstractmethod
    def literal(self, value: Any, path: str) -> Fragment:
        """Return a ``const`` or ``enum`` value as the style writes it."""

    def literals(self, values: list[Any], path: str) -> list[Fragment]:
        """Return the alternatives of an ``enum``'s values (a non-empty list)."""
        return [self.literal(v, f"{path}/enum/{i}") for i, v in enumerate(values)]

    @abstractmethod
    def string(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return a string value."""

    @abstractmethod
    def object(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an object value (the type may be implied)."""

    @abstractmethod
    def array(self, schema: Mapping[str, Any], path: str, seen: set[str]) -> Fragment:
        """Return an array value (the type may be implied)."""

    def scalar(self, schema: Mapping[str, Any], path: str) -> Fragment:
        """Return an integer, number, boolean or null value (``type`` names which)."""
        return self.json_value(schema, path)


def variable_name() -> Regex:
    """Return the language of an undeclared property's name, ``[a-zA-Z_][a-zA-Z0-9_]*``.

    Returns
    -------
    Regex
        The language.
    """
    first = CharSet(((65, 90), (95, 95), (97, 122)))
    rest = first.union(CharSet(((48, 57),)))
    return Concat((first, Repeat(rest, 0, None)))


def implied_type(schema: Mapping[str, Any]) -> str | None:
    """Return the type XGrammar 0.2.9 reads from a schema without ``type`` (None: any value).

    Only object and array keywords imply a type there (object first); a schema with only
    string, number or other keywords (``pattern``, ``minimum``, ``minItems``, ``required``)
    takes any value.

    Parameters
    ----------
    schema : Mapping
        A JSON Schema object.

    Returns
    -------
    str or None
        ``object``, ``array`` or None.
    """
    keys = set(schema)
    if keys & {"properties", "additionalProperties", "unevaluatedProperties"}:
        return "object"
    if keys & {"items", "prefixItems"}:
        return "array"
    return None
