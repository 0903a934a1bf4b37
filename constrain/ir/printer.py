"""Stage 1 (inverse): print regex IR as Python ``re`` patterns and Lark terminals.

The regex front end (:mod:`constrain.frontends.regex`) reads Python ``re`` syntax into the IR;
this module writes it back, for ``Grammar.to_lark`` and :func:`regex_to_pattern`.
Python ``re`` has no intersection or complement, so :class:`~constrain.ir.Intersect` and
:class:`~constrain.ir.Complement` raise :class:`~constrain.GrammarError`; a small
:class:`~constrain.ir.Automaton` is printed exactly, through state elimination
(:func:`automaton_to_regex`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from constrain.errors import GrammarError
from constrain.ir.casefold import ignorecase_charset
from constrain.ir.nodes import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
    matches_empty,
    special_token_id,
)

if TYPE_CHECKING:
    from constrain.ir.grammar import Grammar

__all__ = [
    "automaton_to_regex",
    "expand_nullable",
    "lark_names",
    "regex_to_pattern",
    "terminal_to_lark",
]

# State elimination gives up once an intermediate regex has more leaves than this.
MAX_AUTOMATON_REGEX_SIZE = 20_000

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
    if not ch.isprintable() or 0xD800 <= cp <= 0xDFFF:
        # Control, format, separator (U+2028...) and unassigned code points are escaped so the
        # printed pattern stays on one line and survives a round trip through a text file.
        if cp <= 0xFF:
            return f"\\x{cp:02x}"
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
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


# The empty language, written without lookaround so that Lark's Earley parser (which rejects
# zero-width patterns) and our own regex front end both read it back.
_NO_CHAR = "[^\\s\\S]"


def _prec(node: Regex) -> int:
    """Binding strength: 0 alternation, 1 concatenation, 2 atom."""
    if isinstance(node, Alt):
        return 0 if len(node.items) != 1 else _prec(node.items[0])
    if isinstance(node, Concat):
        return 1 if len(node.items) != 1 else _prec(node.items[0])
    if isinstance(node, Literal):
        return 2 if len(node.text) == 1 else 1
    if isinstance(node, Automaton):
        return 0  # printed as whatever state elimination gives: always group it
    return 2


def _is_repeat(node: Regex) -> bool:
    """Return whether ``node`` prints as a quantified atom (a Repeat, maybe in a 1-item group)."""
    while isinstance(node, (Concat, Alt)) and len(node.items) == 1:
        node = node.items[0]
    return isinstance(node, Repeat)


def regex_to_pattern(node: Regex) -> str:
    """Print a regex IR node in Python ``re`` syntax.

    The result parses back (``Grammar.from_regex``) to an automaton with the same language.
    An :class:`~constrain.ir.Automaton` is printed through :func:`automaton_to_regex`.

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
        If ``node`` contains an :class:`~constrain.ir.Intersect` or a
        :class:`~constrain.ir.Complement`, or an automaton too large to print.
    """
    if isinstance(node, CharSet):
        if node.ranges and special_token_id(node.ranges[-1][1]) is not None:
            raise GrammarError(
                "a special token (a pseudo character above U+10FFFF) cannot be printed as a "
                "regex pattern; only a terminal that is exactly one special token prints, as "
                "Lark's <[id]> or <name>"
            )
        return _NO_CHAR if node.is_empty() else _charset_pattern(node)
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
            return _NO_CHAR
        return "|".join(regex_to_pattern(item) for item in node.items)
    if isinstance(node, Repeat):
        inner = regex_to_pattern(node.item)
        if _prec(node.item) < 2 or _is_repeat(node.item):
            # A quantifier right after another one would read as lazy (``+?``) or possessive.
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
    if isinstance(node, Automaton):
        return regex_to_pattern(automaton_to_regex(node))
    if isinstance(node, (Intersect, Complement)):
        what = "intersection" if isinstance(node, Intersect) else "complement"
        raise GrammarError(
            f"the regex uses {what} ({type(node).__name__}), which Python's re and Lark "
            "cannot express: the grammar compiles, but it cannot be printed as a regex pattern "
            "or as Lark text"
        )
    raise TypeError(f"not a regex IR node: {node!r}")


# --------------------------------------------------------------------------------------------
# Lark terminals
# --------------------------------------------------------------------------------------------


def _lark_string(text: str, flags: str = "") -> str:
    """Quote ``text`` as a Lark string literal, escaping quotes, backslashes and controls."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch in "\n\t\r\f":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}[ch])
        elif not ch.isprintable() or 0xD800 <= cp <= 0xDFFF:
            out.append(
                f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"' + flags


def _ignorecase_text(regex: Regex) -> str | None:
    """Return ``text`` if ``regex`` is exactly :func:`ignorecase_literal` of it, else None."""
    if not isinstance(regex, Concat) or not regex.items:
        return None
    chars = []
    is_cased = False
    for item in regex.items:
        if not isinstance(item, CharSet) or not item.ranges or item.ranges[-1][1] > 0x10FFFF:
            return None
        first = chr(item.ranges[0][0])
        candidates = [c for c in (first.lower(), first) if len(c) == 1]
        rep = next((c for c in candidates if ignorecase_charset(c) == item), None)
        if rep is None:
            return None
        chars.append(rep)
        is_cased = is_cased or item.ranges != ((ord(rep), ord(rep)),)
    # With no cased character a plain string (a Concat of single characters) prints better.
    return "".join(chars) if is_cased else None


def terminal_to_lark(regex: Regex, special_names: Sequence[str] = ()) -> str:
    """Print a terminal's regex as a Lark string (``"text"``, ``"text"i``) or ``/pattern/``.

    A terminal that is exactly one special token prints as ``<[id]>`` (by id) or ``<name>``
    (a name placeholder, named by ``special_names``), which the Lark front end reads back.

    Parameters
    ----------
    regex : Regex
        The terminal's language.
    special_names : sequence of str, optional
        The grammar's ``special_names``.

    Returns
    -------
    str
        The terminal's Lark definition body.

    Raises
    ------
    GrammarError
        If the regex cannot be printed (see :func:`regex_to_pattern`).
    """
    if isinstance(regex, CharSet) and len(regex.ranges) == 1:
        lo, hi = regex.ranges[0]
        kind = special_token_id(lo)
        if kind is not None and lo == hi:
            if kind[0] == "id":
                return f"<[{kind[1]}]>"
            if kind[1] < len(special_names):
                name = special_names[kind[1]]
                return name if name.startswith("<") and name.endswith(">") else f"<{name}>"
    if isinstance(regex, Literal) and regex.text:
        return _lark_string(regex.text)
    text = _ignorecase_text(regex)
    if text is not None:
        return _lark_string(text, "i")
    pattern = regex_to_pattern(regex)
    return "/" + pattern.replace("/", "\\/") + "/"


# --------------------------------------------------------------------------------------------
# Automaton -> regex (state elimination)
# --------------------------------------------------------------------------------------------


def _cat(a: Regex, b: Regex) -> Regex:
    if a == NOTHING or b == NOTHING:
        return NOTHING
    items = [x for part in (a, b) for x in (part.items if isinstance(part, Concat) else (part,))]
    return items[0] if len(items) == 1 else Concat(tuple(items))


def _alt(a: Regex, b: Regex) -> Regex:
    if a == NOTHING:
        return b
    if b == NOTHING or a == b:
        return a
    if isinstance(a, CharSet) and isinstance(b, CharSet):
        return a.union(b)
    if b == EMPTY:
        a, b = b, a
    if a == EMPTY:
        return b if matches_empty(b) else Repeat(b, 0, 1)
    items = [x for part in (a, b) for x in (part.items if isinstance(part, Alt) else (part,))]
    return Alt(tuple(items))


def _star(a: Regex) -> Regex:
    if a in (NOTHING, EMPTY):
        return EMPTY
    if isinstance(a, Repeat) and a.max is None and a.min <= 1:
        return Repeat(a.item, 0, None)
    return Repeat(a, 0, None)


def _leaves(node: Regex) -> int:
    if isinstance(node, (Concat, Alt)):
        return sum(_leaves(i) for i in node.items) + 1
    if isinstance(node, Repeat):
        return _leaves(node.item) + 1
    return 1


def _useful_states(node: Automaton) -> set[int]:
    """Return the states both reachable from the start and co-reachable from an accept state."""
    succ: dict[int, set[int]] = {}
    pred: dict[int, set[int]] = {}
    for src, chars, dst in node.edges:
        if not chars.intersect(ANY_CHAR).is_empty():
            succ.setdefault(src, set()).add(dst)
            pred.setdefault(dst, set()).add(src)

    def closure(seeds: set[int], graph: dict[int, set[int]]) -> set[int]:
        seen, stack = set(seeds), list(seeds)
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return closure({node.start}, succ) & closure(set(node.accept), pred)


@functools.lru_cache(maxsize=256)
def automaton_to_regex(node: Automaton) -> Regex:
    """Return a regex IR node (no Automaton inside) with the language of ``node``.

    Classic state elimination (Brzozowski and McCluskey): a fresh initial and a fresh final
    state, parallel edges merged into one character set, then the states are removed one at a
    time, cheapest first (fewest in-edges times out-edges), each ``p -> q -> s`` path becoming
    ``R[p,q] R[q,q]* R[q,s]``.

    Parameters
    ----------
    node : Automaton
        The automaton.

    Returns
    -------
    Regex
        An equivalent expression over CharSet, Concat, Alt and Repeat.

    Raises
    ------
    GrammarError
        If an intermediate expression grows past ``MAX_AUTOMATON_REGEX_SIZE`` leaves.
    """
    useful = _useful_states(node)
    init, final = -1, -2
    arcs: dict[tuple[int, int], Regex] = {}
    for src, chars, dst in node.edges:
        cs = chars.intersect(ANY_CHAR)
        if src in useful and dst in useful and not cs.is_empty():
            arcs[(src, dst)] = _alt(arcs.get((src, dst), NOTHING), cs)
    if node.start in useful:
        arcs[(init, node.start)] = EMPTY
    for q in node.accept & useful:
        arcs[(q, final)] = EMPTY
    succ: dict[int, set[int]] = {q: set() for q in (*useful, init, final)}
    pred: dict[int, set[int]] = {q: set() for q in (*useful, init, final)}
    for src, dst in arcs:
        succ[src].add(dst)
        pred[dst].add(src)
    remaining = set(useful)
    while remaining:
        q = min(remaining, key=lambda s: (len(pred[s] - {s}) * len(succ[s] - {s}), s))
        remaining.discard(q)
        loop = _star(arcs.pop((q, q), NOTHING))
        for p in pred[q] - {q}:
            into = arcs.pop((p, q))
            succ[p].discard(q)
            for s in succ[q] - {q}:
                merged = _alt(arcs.get((p, s), NOTHING), _cat(_cat(into, loop), arcs[(q, s)]))
                if _leaves(merged) > MAX_AUTOMATON_REGEX_SIZE:
                    raise GrammarError(
                        f"the automaton with {node.num_states} states has no regex of at most "
                        f"{MAX_AUTOMATON_REGEX_SIZE} nodes (state elimination blew up), so it "
                        "cannot be printed as a regex pattern or as Lark text"
                    )
                arcs[(p, s)] = merged
                succ[p].add(s)
                pred[s].add(p)
        for s in succ[q] - {q}:
            arcs.pop((q, s))
            pred[s].discard(q)
        del succ[q], pred[q]
    return arcs.get((init, final), NOTHING)


# --------------------------------------------------------------------------------------------
# Lark names and nullable terminals (used by Grammar.to_lark)
# --------------------------------------------------------------------------------------------

_LARK_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")
_LARK_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")


def lark_names(grammar: Grammar) -> dict[str, str]:
    """Map every rule and terminal name to a distinct name that Lark's grammar syntax accepts."""
    symbols = [(r.name, False) for r in grammar.rules] + [(t.name, True) for t in grammar.terminals]
    names: dict[str, str] = {}
    for name, is_term in symbols:
        legal = _LARK_TERMINAL_NAME if is_term else _LARK_RULE_NAME
        if legal.fullmatch(name):
            names[name] = name
    used = set(names.values())
    for name, is_term in symbols:
        if name in names:
            continue
        body = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_")
        body = body.upper() if is_term else body.lower()
        if not body[:1].isalpha():
            body = ("T_" if is_term else "r_") + body
        base = ("_" if name.startswith("_") else "") + body.rstrip("_")
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f"{base}_{n}"
        names[name] = candidate
        used.add(candidate)
    return names


def expand_nullable(
    alt: tuple[str, ...], nullable: Mapping[str, Regex | None]
) -> list[tuple[str, ...]]:
    """Spell out each nullable terminal of ``alt`` as present or absent (absent only if empty)."""
    out: list[tuple[str, ...]] = [()]
    for sym in alt:
        if sym not in nullable:
            out = [prefix + (sym,) for prefix in out]
        elif nullable[sym] is None:
            continue
        else:
            out = [p for prefix in out for p in (prefix + (sym,), prefix)]
    return out
