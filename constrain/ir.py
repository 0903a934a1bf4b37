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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from constrain.errors import GrammarError

__all__ = [
    "ANY_CHAR",
    "EMPTY",
    "NOTHING",
    "Alt",
    "CharSet",
    "Concat",
    "Grammar",
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


@dataclass(frozen=True, slots=True)
class Concat:
    """Concatenation; ``Concat(())`` is the empty string (:data:`EMPTY`)."""

    items: tuple[Regex, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    """Alternation; ``Alt(())`` is the empty language (:data:`NOTHING`)."""

    items: tuple[Regex, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item{min,max}``; ``max=None`` means unbounded. Lazy quantifiers are greedy here."""

    item: Regex
    min: int = 0
    max: int | None = None


Regex = Union[CharSet, Literal, Concat, Alt, Repeat]  # noqa: UP007  (runtime alias on 3.10)

EMPTY = Concat(())
NOTHING = Alt(())
ANY_CHAR = CharSet(((0, 0xD7FF), (0xE000, MAX_CODEPOINT)))

# --------------------------------------------------------------------------------------------
# Regex printing (Python ``re`` syntax, the syntax ``Grammar.from_regex`` reads)
# --------------------------------------------------------------------------------------------

_META = set("\\.^$|?*+()[]{}")


def _escape_char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF or cp in (0x2028, 0x2029):
        return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}"
    if cp > 0xFFFF and not ch.isprintable():
        return f"\\U{cp:08x}"
    if in_class:
        return "\\" + ch if ch in "\\]^-[" else ch
    return "\\" + ch if ch in _META else ch


def _charset_pattern(cs: CharSet) -> str:
    if len(cs.ranges) == 1 and cs.ranges[0][0] == cs.ranges[0][1]:
        return _escape_char(cs.ranges[0][0], False)
    if cs == ANY_CHAR.union(CharSet(((0xD800, 0xDFFF),))) or cs == ANY_CHAR:
        return "[\\s\\S]"
    neg = cs.negate()
    use_neg = len(neg.ranges) < len(cs.ranges) and neg.ranges
    body = []
    for lo, hi in (neg if use_neg else cs).ranges:
        if lo == hi:
            body.append(_escape_char(lo, True))
        elif hi == lo + 1:
            body.append(_escape_char(lo, True) + _escape_char(hi, True))
        else:
            body.append(_escape_char(lo, True) + "-" + _escape_char(hi, True))
    return "[" + ("^" if use_neg else "") + "".join(body) + "]"


def _prec(node: Regex) -> int:
    """Binding strength: 0 alternation, 1 concatenation, 2 atom."""
    if isinstance(node, Alt):
        return 0 if len(node.items) != 1 else _prec(node.items[0])
    if isinstance(node, Concat):
        return 1 if len(node.items) != 1 else _prec(node.items[0])
    if isinstance(node, Literal):
        return 2 if len(node.text) == 1 else 1
    return 2


def regex_to_pattern(node: Regex) -> str:
    """Print a regex IR node in Python ``re`` syntax.

    The result parses back (``Grammar.from_regex``) to an automaton with the same language.

    Parameters
    ----------
    node : Regex
        The regex IR.

    Returns
    -------
    str
        A pattern string, without delimiters.
    """
    if isinstance(node, CharSet):
        return "(?!)" if node.is_empty() else _charset_pattern(node)
    if isinstance(node, Literal):
        return "".join(_escape_char(ord(c), False) for c in node.text)
    if isinstance(node, Concat):
        parts = []
        for item in node.items:
            p = regex_to_pattern(item)
            parts.append(f"(?:{p})" if _prec(item) < 1 else p)
        return "".join(parts)
    if isinstance(node, Alt):
        if not node.items:
            return "(?!)"
        return "|".join(regex_to_pattern(item) for item in node.items)
    if isinstance(node, Repeat):
        inner = regex_to_pattern(node.item)
        if _prec(node.item) < 2:
            inner = f"(?:{inner})"
        lo, hi = node.min, node.max
        if hi is None:
            q = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
        elif lo == 0 and hi == 1:
            q = "?"
        elif lo == hi:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        return inner + q
    raise TypeError(f"not a regex IR node: {node!r}")


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
    :meth:`builtin`, :meth:`from_json_schema` or :meth:`from_pydantic`, then compile it with
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
        """Return the grammar of the strings that fully match a Python ``re`` pattern.

        Supports classes, ``\\d \\w \\s`` (Unicode, as Python), ``.``, quantifiers (lazy ones are
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
        return cls(rules=(Rule("start", ((name,),)),), terminals=(Terminal(name, regex),), start="start")

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
        """Return the grammar of a ``.lark`` file (relative ``%import`` resolved from its folder)."""
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
        """Return the grammar of the JSON documents valid under a JSON Schema (dict or text)."""
        from constrain.frontends.json_schema import json_schema_to_grammar

        return json_schema_to_grammar(schema, **options)

    @classmethod
    def from_json_schema_file(cls, path: str | Path, **options: Any) -> Grammar:
        """Return the grammar of a JSON Schema stored in a file."""
        return cls.from_json_schema(Path(path).read_text(encoding="utf-8"), **options)

    @classmethod
    def from_pydantic(cls, model: Any, **options: Any) -> Grammar:
        """Return the grammar of the JSON serialisations of a pydantic model or type."""
        from constrain.frontends.pydantic import pydantic_to_grammar

        return pydantic_to_grammar(model, **options)

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
        terms = self.terminal_map()
        rules = self.rule_map()
        productive: set[str] = set(terms)
        changed = True
        while changed:
            changed = False
            for rule in self.rules:
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

    # -- printing ---------------------------------------------------------------------------

    def to_lark(self) -> str:
        """Print the grammar as Lark text that ``Grammar.from_lark`` reads back.

        Returns
        -------
        str
            Rules first (start rule first), then terminals, then ``%ignore`` lines.
        """
        lines: list[str] = []
        ordered = sorted(self.rules, key=lambda r: (r.name != self.start,))
        for rule in ordered:
            alts = [" ".join(alt) if alt else "" for alt in rule.alternatives]
            lines.append(f"{rule.name}: " + "\n    | ".join(alts))
        if self.terminals:
            lines.append("")
        for term in self.terminals:
            lines.append(f"{term.name}: {_terminal_to_lark(term.regex)}")
        for name in self.ignore:
            lines.append(f"%ignore {name}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_lark()


def _terminal_to_lark(regex: Regex) -> str:
    if isinstance(regex, Literal) and regex.text:
        return '"' + regex.text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    pattern = regex_to_pattern(regex)
    return "/" + pattern.replace("/", "\\/") + "/"
