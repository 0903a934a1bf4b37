"""Stage 2: the Grammar IR shared by every front end.

A :class:`Grammar` is a context-free grammar in BNF over *terminals*, and every terminal is a
regular expression given as a small regex IR (:class:`CharSet`, :class:`Literal`, :class:`Concat`,
:class:`Alt`, :class:`Repeat`). Front ends (regex, Lark, JSON Schema, pydantic) build this IR;
stage 3 (``constrain.automata``) turns terminals into byte-level DFAs and rules into parser tables.

The IR is made of frozen dataclasses, so a grammar is hashable and safe to share. ``str(grammar)``
prints it back as Lark text (:meth:`Grammar.to_lark`), which ``Grammar.from_lark`` reads again.

Naming follows Lark: terminal names start with an uppercase letter (after optional underscores),
rule names with a lowercase one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

from constrain.errors import GrammarError

__all__ = [
    "ANY_CHAR",
    "EMPTY",
    "NOTHING",
    "Alt",
    "Automaton",
    "CharSet",
    "Complement",
    "Concat",
    "Grammar",
    "Intersect",
    "Literal",
    "Regex",
    "Repeat",
    "Rule",
    "Terminal",
    "regex_to_pattern",
]

MAX_CODEPOINT = 0x10FFFF


# --------------------------------------------------------------------------------------------
# Regex IR
# --------------------------------------------------------------------------------------------


class _Node:
    """Base of the composite regex nodes: a slot for their hash, computed once."""

    __slots__ = ("_hash",)


def _hashed(cls: Any) -> Any:
    """Make a frozen dataclass node hash its fields once (nodes nest deeply and key caches)."""
    names = tuple(f.name for f in fields(cls))
    init = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        init(self, *args, **kwargs)
        object.__setattr__(self, "_hash", 0)

    def __hash__(self: Any) -> int:  # noqa: N807
        h: int = self._hash
        if not h:
            h = hash((cls.__name__, *[getattr(self, n) for n in names])) or 1
            object.__setattr__(self, "_hash", h)
        return h

    cls.__init__ = __init__
    cls.__hash__ = __hash__
    setstate = getattr(cls, "__setstate__", None)
    if setstate is not None:  # unpickling fills the fields only: start the hash slot empty too

        def __setstate__(self: Any, state: Any) -> None:  # noqa: N807
            setstate(self, state)
            object.__setattr__(self, "_hash", 0)

        cls.__setstate__ = __setstate__
    return cls


@dataclass(frozen=True, slots=True)
class CharSet:
    """A set of Unicode code points, as sorted, disjoint, non-adjacent inclusive ranges.

    Surrogates (U+D800..U+DFFF) cannot be encoded in UTF-8 and are dropped by the automaton
    builder.
    """

    ranges: tuple[tuple[int, int], ...]

    @staticmethod
    def of(ranges: Iterable[tuple[int, int]]) -> CharSet:
        """Build a normalised set from possibly overlapping, unsorted ranges."""
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(ranges):
            if lo > hi:
                continue
            if merged and lo <= merged[-1][1] + 1:
                if hi > merged[-1][1]:
                    merged[-1] = (merged[-1][0], hi)
            else:
                merged.append((lo, hi))
        return CharSet(tuple(merged))

    @staticmethod
    def chars(text: str) -> CharSet:
        """Return the set of the characters of ``text``."""
        return CharSet.of((ord(c), ord(c)) for c in text)

    def negate(self) -> CharSet:
        """Return the complement within ``[0, U+10FFFF]``."""
        out: list[tuple[int, int]] = []
        prev = 0
        for lo, hi in self.ranges:
            if lo > prev:
                out.append((prev, lo - 1))
            prev = hi + 1
        if prev <= MAX_CODEPOINT:
            out.append((prev, MAX_CODEPOINT))
        return CharSet(tuple(out))

    def union(self, other: CharSet) -> CharSet:
        """Return the union of two sets."""
        return CharSet.of(self.ranges + other.ranges)

    def intersect(self, other: CharSet) -> CharSet:
        """Return the intersection of two sets."""
        return self.negate().union(other.negate()).negate()

    def is_empty(self) -> bool:
        """Return whether the set has no code point."""
        return not self.ranges

    def __contains__(self, codepoint: object) -> bool:
        if not isinstance(codepoint, int):
            return False
        return any(lo <= codepoint <= hi for lo, hi in self.ranges)


@dataclass(frozen=True, slots=True)
class Literal:
    """An exact string (matched as its UTF-8 bytes)."""

    text: str


@_hashed
@dataclass(frozen=True, slots=True)
class Concat(_Node):
    """Concatenation; ``Concat(())`` is the empty string (:data:`EMPTY`)."""

    items: tuple[Regex, ...]


@_hashed
@dataclass(frozen=True, slots=True)
class Alt(_Node):
    """Alternation; ``Alt(())`` is the empty language (:data:`NOTHING`)."""

    items: tuple[Regex, ...]


@_hashed
@dataclass(frozen=True, slots=True)
class Repeat(_Node):
    """``item{min,max}``; ``max=None`` means unbounded. Lazy quantifiers are greedy here."""

    item: Regex
    min: int = 0
    max: int | None = None


@_hashed
@dataclass(frozen=True, slots=True)
class Intersect(_Node):
    """The strings matched by every item (regular languages are closed under intersection)."""

    items: tuple[Regex, ...]


@_hashed
@dataclass(frozen=True, slots=True)
class Complement(_Node):
    """Every valid string (any sequence of :data:`ANY_CHAR`) that ``item`` does not match."""

    item: Regex


@_hashed
@dataclass(frozen=True, slots=True)
class Automaton(_Node):
    """A character-level finite automaton, for languages with no compact regex.

    States are ``0 .. num_states - 1``; ``edges`` are ``(src, chars, dst)`` triples (several
    edges may leave a state on overlapping sets: it is an NFA without epsilon moves). Used for
    ``multipleOf`` (a remainder automaton) and other languages best written as a state machine.
    """

    num_states: int
    edges: tuple[tuple[int, CharSet, int], ...]
    start: int
    accept: frozenset[int]


Regex = Union[  # noqa: UP007  (runtime alias on 3.10)
    CharSet, Literal, Concat, Alt, Repeat, Intersect, Complement, Automaton
]

EMPTY = Concat(())
NOTHING = Alt(())
ANY_CHAR = CharSet(((0, 0xD7FF), (0xE000, MAX_CODEPOINT)))

# --------------------------------------------------------------------------------------------
# Regex printing (Python ``re`` syntax; the printer lives with the regex front end)
# --------------------------------------------------------------------------------------------


def regex_to_pattern(node: Regex) -> str:
    """Print a regex IR node in Python ``re`` syntax.

    The result parses back (``Grammar.from_regex``) to an automaton with the same language. A
    small :class:`Automaton` is printed exactly (state elimination).

    Parameters
    ----------
    node : Regex
        The regex IR.

    Returns
    -------
    str
        A pattern string, without delimiters.

    Raises
    ------
    GrammarError
        If ``node`` contains an :class:`Intersect` or a :class:`Complement` (Python ``re`` has
        neither), or an automaton too large to print.
    """
    from constrain.frontends.printer import regex_to_pattern as print_pattern

    return print_pattern(node)


# --------------------------------------------------------------------------------------------
# Case-insensitive literals (Lark ``"select"i``), matched as Python's ``re.IGNORECASE`` does
# --------------------------------------------------------------------------------------------


@functools.cache
def ignorecase_charset(ch: str) -> CharSet:
    """Return the characters that ``re.fullmatch(re.escape(ch), c, re.IGNORECASE)`` accepts.

    This is how Lark matches a case-insensitive string (``"select"i``), so ``"k"i`` also
    accepts the Kelvin sign U+212A and ``"s"i`` the long s U+017F. The case folding is the regex
    front end's (one implementation of Python's rules in the package).

    Parameters
    ----------
    ch : str
        A single character.

    Returns
    -------
    CharSet
        ``ch`` and its case variants.
    """
    from constrain.frontends.regex import parse_regex  # the front end owns case folding

    node = parse_regex(re.escape(ch), flags=re.IGNORECASE)
    if isinstance(node, CharSet):
        return node
    if isinstance(node, Literal) and len(node.text) == 1:
        return CharSet.chars(node.text)
    if isinstance(node, Concat) and len(node.items) == 1 and isinstance(node.items[0], CharSet):
        return node.items[0]
    raise TypeError(f"unexpected case-insensitive form of {ch!r}: {node!r}")


def ignorecase_literal(text: str) -> Concat:
    """Return the regex IR of ``text`` matched case-insensitively: one CharSet per character.

    ``Grammar.to_lark`` prints such a node back as ``"text"i``.
    """
    return Concat(tuple(ignorecase_charset(c) for c in text))


# --------------------------------------------------------------------------------------------
# Grammar IR
# --------------------------------------------------------------------------------------------


def is_terminal_name(name: str) -> bool:
    """Return whether ``name`` follows the Lark terminal convention (``_?[A-Z]...``)."""
    stripped = name.lstrip("_")
    return bool(stripped) and stripped[0].isupper()


@dataclass(frozen=True, slots=True)
class Terminal:
    """A named terminal: a regular language given as regex IR.

    Parameters
    ----------
    name : str
        Terminal name (uppercase first letter).
    regex : Regex
        Its language.
    """

    name: str
    regex: Regex


@dataclass(frozen=True, slots=True)
class Rule:
    """A nonterminal and its alternatives; each alternative is a sequence of symbol names.

    An empty alternative ``()`` derives the empty string.
    """

    name: str
    alternatives: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Grammar:
    """A context-free grammar over regular terminals: the IR every front end compiles to.

    Build one with :meth:`from_regex`, :meth:`from_lark`, :meth:`from_lark_file`,
    or :meth:`builtin`, then compile it with
    ``constrain.Compiler(vocab).compile(grammar)``.

    Parameters
    ----------
    rules : tuple of Rule
        The rules, one per nonterminal.
    terminals : tuple of Terminal
        The terminals referenced by the rules (and the ignored ones).
    start : str
        The start nonterminal.
    ignore : tuple of str, optional
        Terminals that may appear between any two lexemes (Lark ``%ignore``).
    """

    rules: tuple[Rule, ...]
    terminals: tuple[Terminal, ...]
    start: str
    ignore: tuple[str, ...] = ()
    _meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_regex(cls, pattern: str) -> Grammar:
        r"""Return the grammar of the strings that fully match a Python ``re`` pattern.

        Supports classes, ``\d \w \s`` (Unicode, as Python), ``.``, quantifiers (lazy ones are
        treated as greedy), alternation, groups and ``^``/``$`` at the ends. Lookaround and
        backreferences raise :class:`~constrain.RegexError` naming the construct and offset.

        Parameters
        ----------
        pattern : str
            The regular expression.

        Returns
        -------
        Grammar
            A grammar with a single terminal.

        Raises
        ------
        RegexError
            If the pattern is invalid or uses an unsupported construct.
        """
        from constrain.frontends.regex import parse_regex

        return cls.from_terminal_regex(parse_regex(pattern))

    @classmethod
    def from_terminal_regex(cls, regex: Regex, name: str = "REGEX") -> Grammar:
        """Return a single-terminal grammar ``start: NAME`` for a regex IR node."""
        return cls(
            rules=(Rule("start", ((name,),)),), terminals=(Terminal(name, regex),), start="start"
        )

    @classmethod
    def from_lark(cls, text: str, *, start: str = "start") -> Grammar:
        """Return the grammar of a Lark grammar text (rules, terminals, ``%import``, ``%ignore``).

        Parameters
        ----------
        text : str
            Grammar text in Lark syntax.
        start : str, optional
            The start rule.

        Raises
        ------
        LarkGrammarError
            With line/column when the grammar is invalid.
        """
        from constrain.frontends.lark import parse_lark

        return parse_lark(text, start=start)

    @classmethod
    def from_lark_file(cls, path: str | Path, *, start: str = "start") -> Grammar:
        """Return the grammar of a ``.lark`` file (relative ``%import`` from its folder)."""
        from constrain.frontends.lark import parse_lark_file

        return parse_lark_file(Path(path), start=start)

    @classmethod
    def builtin(cls, name: str) -> Grammar:
        """Return a grammar shipped in ``constrain.grammars`` by name (``"json"``, ``"sql"``, ...).

        Raises
        ------
        ValueError
            If no such grammar ships; the message lists the available names.
        """
        from constrain.frontends.lark import builtin_grammar

        return builtin_grammar(name)

    @classmethod
    def from_json_schema(cls, schema: Any, **options: Any) -> Grammar:
        """Return the grammar of the JSON texts of a JSON Schema's instances.

        Parameters
        ----------
        schema : dict, bool or str
            The schema (draft 2020-12, and the draft 4-7 spellings), or its JSON text.
        whitespace : {"compact", "spaced", "flexible", "indent"}, optional
            ``"compact"`` (default): no whitespace. ``"spaced"``: exactly ``", "`` and
            ``": "`` as separators, nothing else (Python's ``json.dumps`` layout, the one
            models see most). ``"flexible"``: up to ``max_whitespace`` characters of
            whitespace after every token. ``"indent"``: an optional newline and bounded
            indentation. Whitespace is never unbounded.
        max_whitespace : int, optional
            Longest whitespace run (default 4).
        any_order : bool, optional
            Accept object properties in any order (required ones enforced, none repeated); the
            default is declaration order.
        one_of : {"exact", "any"}, optional
            ``"exact"`` (default): ``oneOf`` means exactly one branch (an error if that cannot
            be enforced); ``"any"``: read it as ``anyOf``.
        formats : {"enforce", "ignore"}, optional
            Enforce ``format`` (default) or treat it as an annotation.
        lenient : bool, optional
            Turn unsupported keywords into warnings (``grammar.warnings``) instead of errors.
        python_compatible : bool, optional
            Also keep the output readable by Python's and pydantic's parsers: integers written
            plainly (no fraction or exponent), other numbers within float64 range, no leap
            second in ``date-time``/``time``. Default False (True for :meth:`from_pydantic`).

        Raises
        ------
        JsonSchemaError
            With the JSON pointer of a keyword that cannot be enforced (see docs/json_schema.md).
        CompileLimitError
            When a limit (``max_branches``, ``max_combinations``, ``max_repeat``,
            ``max_any_order_properties``) is hit.
        """
        from constrain.frontends.json_emit import compile_json_schema
        from constrain.frontends.json_schema import JsonSchemaOptions

        try:
            opts = JsonSchemaOptions(**options)
        except TypeError as err:
            raise TypeError(f"Grammar.from_json_schema: {err}") from err
        return compile_json_schema(schema, opts)

    @classmethod
    def from_json_schema_file(cls, path: str | Path, **options: Any) -> Grammar:
        """Return :meth:`from_json_schema` of a schema read from a JSON file."""
        return cls.from_json_schema(Path(path).read_text(encoding="utf-8"), **options)

    @classmethod
    def from_pydantic(cls, model: Any, **options: Any) -> Grammar:
        """Return the grammar of a pydantic model's JSON (options of :meth:`from_json_schema`).

        The output parses with ``Model.model_validate_json``. Objects of models with pydantic's
        default ``extra="ignore"`` get exactly their declared fields (unknown keys would be
        dropped by validation anyway); ``extra_properties=True`` keeps pydantic's schema as is.
        """
        from constrain.frontends.pydantic import pydantic_schema

        extra = bool(options.pop("extra_properties", False))
        options.setdefault("python_compatible", True)
        return cls.from_json_schema(pydantic_schema(model, extra_properties=extra), **options)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a lenient front end did not enforce (empty for a strict grammar)."""
        return tuple(self._meta.get("warnings", ()))

    # -- queries ----------------------------------------------------------------------------

    def terminal_map(self) -> dict[str, Terminal]:
        """Return ``{name: Terminal}``."""
        return {t.name: t for t in self.terminals}

    def rule_map(self) -> dict[str, Rule]:
        """Return ``{name: Rule}``."""
        return {r.name: r for r in self.rules}

    def is_regular_terminal(self) -> bool:
        """Return whether the grammar is exactly ``start: TERMINAL`` with nothing ignored."""
        if self.ignore or len(self.rules) != 1:
            return False
        rule = self.rules[0]
        return (
            rule.name == self.start
            and len(rule.alternatives) == 1
            and len(rule.alternatives[0]) == 1
            and rule.alternatives[0][0] in self.terminal_map()
        )

    def without_terminals(self, names: Iterable[str]) -> Grammar:
        """Return the grammar with these terminals removed, and every alternative using them."""
        gone = set(names)
        rules = tuple(
            Rule(r.name, tuple(a for a in r.alternatives if not gone.intersection(a)))
            for r in self.rules
        )
        terminals = tuple(t for t in self.terminals if t.name not in gone)
        ignore = tuple(n for n in self.ignore if n not in gone)
        return Grammar(rules, terminals, self.start, ignore, _meta=self._meta)

    # -- normalisation ----------------------------------------------------------------------

    def validate(self) -> None:
        """Check that every referenced symbol is defined and names follow the conventions.

        Raises
        ------
        GrammarError
            Naming the undefined symbol and the rule that uses it.
        """
        terms = self.terminal_map()
        rules = self.rule_map()
        if len(terms) != len(self.terminals):
            raise GrammarError("duplicate terminal names in grammar")
        if len(rules) != len(self.rules):
            raise GrammarError("duplicate rule names in grammar")
        if self.start not in rules:
            raise GrammarError(f"start rule {self.start!r} is not defined")
        for rule in self.rules:
            for alt in rule.alternatives:
                for sym in alt:
                    if sym not in terms and sym not in rules:
                        raise GrammarError(
                            f"rule {rule.name!r} uses undefined symbol {sym!r}; define it or fix "
                            "the spelling"
                        )
        for name in self.ignore:
            if name not in terms:
                raise GrammarError(f"%ignore names undefined terminal {name!r}")

    def normalise(self) -> Grammar:
        """Return an equivalent grammar keeping only productive rules reachable from the start.

        Raises
        ------
        GrammarError
            If the start rule derives no string at all (the grammar accepts nothing).
        """
        self.validate()
        return self._without_empty_terminals()._reduce()

    def _reduce(self) -> Grammar:
        """Keep the productive rules reachable from the start (see :meth:`normalise`)."""
        terms = self.terminal_map()
        rules = self.rule_map()
        productive: set[str] = set(terms)
        changed = True
        while changed:
            changed = False
            # rules are usually written top-down: bottom-up, most are settled in one pass
            for rule in reversed(self.rules):
                if rule.name not in productive and any(
                    all(s in productive for s in alt) for alt in rule.alternatives
                ):
                    productive.add(rule.name)
                    changed = True
        if self.start not in productive:
            raise GrammarError(
                f"the grammar accepts no string: rule {self.start!r} never derives a finite "
                "sequence of terminals (every alternative recurses forever)"
            )
        kept_alts = {
            r.name: tuple(a for a in r.alternatives if all(s in productive for s in a))
            for r in self.rules
            if r.name in productive
        }
        reachable: list[str] = [self.start]
        seen = {self.start}
        i = 0
        while i < len(reachable):
            for alt in kept_alts.get(reachable[i], ()):
                for sym in alt:
                    if sym not in seen and sym in rules:
                        seen.add(sym)
                        reachable.append(sym)
            i += 1
        used_terms = {s for name in reachable for alt in kept_alts[name] for s in alt if s in terms}
        used_terms.update(self.ignore)
        return Grammar(
            rules=tuple(Rule(n, kept_alts[n]) for n in reachable),
            terminals=tuple(t for t in self.terminals if t.name in used_terms),
            start=self.start,
            ignore=self.ignore,
            _meta=self._meta,
        )

    def _without_empty_terminals(self) -> Grammar:
        """Return an equivalent grammar whose terminals never match the empty string.

        A nullable terminal ``T`` keeps its non-empty part and each use of it becomes a new rule
        ``t_opt: T | <empty>`` (linear in the grammar, unlike spelling out every combination).
        A terminal that matches only the empty string disappears.
        """
        nullable = {t.name: _non_empty(t.regex) for t in self.terminals if matches_empty(t.regex)}
        if not nullable:
            return self
        taken = {r.name for r in self.rules}
        opt: dict[str, str] = {}
        extra: list[Rule] = []
        for name, rest in nullable.items():
            base = "__" + name.lower().lstrip("_") + "_opt"
            rule_name, k = base, 2
            while rule_name in taken:
                rule_name, k = f"{base}{k}", k + 1
            taken.add(rule_name)
            opt[name] = rule_name
            extra.append(Rule(rule_name, ((name,), ()) if rest is not None else ((),)))
        rules = tuple(
            Rule(r.name, tuple(tuple(opt.get(sym, sym) for sym in alt) for alt in r.alternatives))
            for r in self.rules
        ) + tuple(extra)
        terminals = tuple(
            Terminal(t.name, rest)
            for t in self.terminals
            if (rest := nullable.get(t.name, t.regex)) is not None
        )
        kept = {t.name for t in terminals}
        return Grammar(
            rules=rules,
            terminals=terminals,
            start=self.start,
            ignore=tuple(n for n in self.ignore if n in kept),
            _meta=self._meta,
        )

    # -- printing ---------------------------------------------------------------------------

    def to_lark(self) -> str:
        """Print the grammar as Lark text that ``Grammar.from_lark`` reads back.

        The text has the same language under Lark's Earley parser and under
        ``Grammar.from_lark``. Names that Lark cannot read (``__start_star_0``, template
        instances such as ``_sep{item,COMMA}``, names with other characters) are renamed to
        close legal names, so the start rule keeps its name whenever it is legal. Duplicate
        alternatives are dropped, a terminal that matches the empty string is printed as its
        non-empty part and made optional where it is used (Lark rejects zero-width terminals),
        and a rule without alternatives is printed as ``r: r`` (it derives nothing).

        Returns
        -------
        str
            Rules first (start rule first), then terminals, then ``%ignore`` lines.

        Raises
        ------
        GrammarError
            If a terminal uses :class:`Intersect` or :class:`Complement`, which Lark's regexes
            cannot express (the grammar still compiles).
        """
        from constrain.frontends.printer import expand_nullable, lark_names, terminal_to_lark

        names = lark_names(self)
        terms = self.terminal_map()
        # Nullable terminal -> its non-empty part (None when it matches only the empty string).
        nullable = {t.name: _non_empty(t.regex) for t in self.terminals if matches_empty(t.regex)}
        lines: list[str] = []
        for rule in sorted(self.rules, key=lambda r: r.name != self.start):
            alts: dict[str, None] = {}
            for alt in rule.alternatives:
                for expanded in expand_nullable(alt, nullable):
                    alts.setdefault(" ".join(names.get(s, s) for s in expanded))
            body = "\n    | ".join(alts) if alts else names[rule.name]
            lines.append(f"{names[rule.name]}: {body}".replace(" \n", "\n").rstrip())
        printed = [t for t in self.terminals if nullable.get(t.name, t.regex) is not None]
        if printed:
            lines.append("")
        for term in printed:
            regex = nullable.get(term.name, term.regex)
            assert regex is not None
            lines.append(f"{names[term.name]}: {terminal_to_lark(regex)}")
        lines.extend(
            f"%ignore {names[name]}"
            for name in dict.fromkeys(self.ignore)
            if name in terms and nullable.get(name, terms[name].regex) is not None
        )
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_lark()


def matches_empty(node: Regex) -> bool:
    """Return whether a regex IR node matches the empty string (exactly, for every node type)."""
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Literal):
        return not node.text
    if isinstance(node, (Concat, Intersect)):
        return all(matches_empty(i) for i in node.items)
    if isinstance(node, Alt):
        return any(matches_empty(i) for i in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or matches_empty(node.item)
    if isinstance(node, Complement):
        return not matches_empty(node.item)
    if isinstance(node, Automaton):
        return node.start in node.accept
    raise TypeError(f"not a regex IR node: {node!r}")


def _non_empty(node: Regex) -> Regex | None:
    """Return a regex for the non-empty strings of ``node`` (None if there are none).

    Exact for every node type, except that the non-empty part of a :class:`Complement` may be
    empty without being reported as None (deciding it needs the automaton).
    """
    if not matches_empty(node):
        return node
    if isinstance(node, Concat):
        if not node.items:
            return None
        # Every item is nullable: L - {""} = (head - {""}) tail  |  (tail - {""}).
        head, tail = _non_empty(node.items[0]), Concat(node.items[1:])
        parts: list[Regex] = [] if head is None else [Concat((head, *tail.items))]
        rest = _non_empty(tail)
        parts += [] if rest is None else [rest]
        return None if not parts else parts[0] if len(parts) == 1 else Alt(tuple(parts))
    if isinstance(node, Alt):
        items = [r for r in (_non_empty(i) for i in node.items) if r is not None]
        return None if not items else items[0] if len(items) == 1 else Alt(tuple(items))
    if isinstance(node, Repeat):
        # item{m,n} - {""} = (item - {""}){1,n} when item{m,n} is nullable.
        inner = _non_empty(node.item)
        if inner is None or node.max == 0:
            return None
        return Repeat(inner, 1, node.max)
    if isinstance(node, Intersect):
        if not node.items:  # every string
            return Repeat(ANY_CHAR, 1, None)
        # Every item is nullable: removing "" from one item removes it from the intersection.
        first = _non_empty(node.items[0])
        return None if first is None else Intersect((first, *node.items[1:]))
    if isinstance(node, Complement):
        return Complement(Alt((node.item, EMPTY)))
    if isinstance(node, Automaton):
        return _automaton_non_empty(node)
    return None  # the empty Literal


def _automaton_non_empty(node: Automaton) -> Automaton | None:
    """Return ``node`` without the empty string: a fresh start state with no edge into it."""
    fresh = node.num_states
    edges = node.edges + tuple((fresh, cs, dst) for src, cs, dst in node.edges if src == node.start)
    succ: dict[int, list[int]] = {}
    for src, cs, dst in edges:
        if not cs.intersect(ANY_CHAR).is_empty():
            succ.setdefault(src, []).append(dst)
    seen, stack = {fresh}, [fresh]
    while stack:
        for dst in succ.get(stack.pop(), ()):
            if dst not in seen:
                seen.add(dst)
                stack.append(dst)
    if not seen & node.accept:
        return None
    return Automaton(fresh + 1, edges, fresh, node.accept)
