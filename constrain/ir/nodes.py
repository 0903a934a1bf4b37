"""Stage 1: the regex IR, the terminals' language of every grammar.

A terminal is a regular expression given as a small tree of frozen, hashable nodes
(:class:`CharSet`, :class:`Literal`, :class:`Concat`, :class:`Alt`, :class:`Repeat`, and
:class:`Intersect`, :class:`Complement`, :class:`Automaton` for the JSON Schema front end).
:mod:`constrain.ir.grammar` builds grammars over them; :mod:`constrain.ir.printer` prints them
back as Python ``re`` patterns and Lark terminals.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Union

__all__ = [
    "ANY_CHAR",
    "ANY_SPECIAL",
    "EMPTY",
    "MAX_SPECIAL_TOKENS",
    "NOTHING",
    "SPECIAL_BASE",
    "Alt",
    "Automaton",
    "CharSet",
    "Complement",
    "Concat",
    "Intersect",
    "Literal",
    "Regex",
    "Repeat",
    "matches_empty",
    "non_empty",
    "special_placeholder",
    "special_token",
    "special_token_id",
]

MAX_CODEPOINT = 0x10FFFF

# Special tokens are pseudo characters above Unicode: ``SPECIAL_BASE + id`` stands for the token
# with that id, matched by id (its bytes are 0xFF and three continuation bytes, which no UTF-8
# text contains). ``PLACEHOLDER_BASE + k`` stands for the k-th special token *name* of a grammar
# (``Grammar.special_names``), resolved to an id when the grammar is compiled for a vocabulary.
SPECIAL_BASE = 0x110000
MAX_SPECIAL_TOKENS = 2**18
PLACEHOLDER_BASE = SPECIAL_BASE + MAX_SPECIAL_TOKENS
MAX_PSEUDO = PLACEHOLDER_BASE + MAX_SPECIAL_TOKENS - 1


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
    builder. Code points above U+10FFFF are special-token pseudo characters
    (:func:`special_token`); :meth:`negate` stays within Unicode.
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
        """Return the complement within ``[0, U+10FFFF]``.

        Special-token pseudo characters (:func:`special_token`) are never in the result: free
        text excludes special tokens, whatever set it is the complement of.
        """
        out: list[tuple[int, int]] = []
        prev = 0
        for lo, hi in self.ranges:
            if lo > MAX_CODEPOINT:
                break
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
        """Return the intersection of two sets (pseudo characters included)."""
        out: list[tuple[int, int]] = []
        a, b = self.ranges, other.ranges
        i = j = 0
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return CharSet(tuple(out))

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
    """``item{min,max}``; ``max=None`` means unbounded. Lazy quantifiers are greedy here.

    ``min > max`` denotes the empty language (a JSON Schema with ``minLength`` above
    ``maxLength`` builds one); the regex front end refuses it in pattern syntax, as ``re`` does.
    """

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
ANY_SPECIAL = CharSet(((SPECIAL_BASE, MAX_PSEUDO),))
"""Every special-token pseudo character, by id or by name placeholder (never in free text)."""


# --------------------------------------------------------------------------------------------
# Special tokens
# --------------------------------------------------------------------------------------------


def special_token(token_id: int) -> CharSet:
    """Return the one-character set that matches the special token ``token_id``, by id.

    The pseudo character ``SPECIAL_BASE + token_id`` lies above Unicode, so :data:`ANY_CHAR`,
    complements and free text never contain it; compiled for a vocabulary, it matches exactly
    that token id (``Vocabulary.with_special_bytes``), never a text spelling its name.

    Parameters
    ----------
    token_id : int
        The token id, in ``[0, 2**18)``.

    Returns
    -------
    CharSet
        ``{SPECIAL_BASE + token_id}``.

    Raises
    ------
    ValueError
        If the id is out of range.
    """
    tid = int(token_id)
    if not 0 <= tid < MAX_SPECIAL_TOKENS:
        raise ValueError(
            f"special token id {tid} is outside [0, {MAX_SPECIAL_TOKENS}): constrain encodes "
            "special tokens with 18-bit ids"
        )
    return CharSet(((SPECIAL_BASE + tid, SPECIAL_BASE + tid),))


def special_placeholder(index: int) -> CharSet:
    """Return the placeholder of the ``index``-th special token name of a grammar.

    A front end that knows a token's name but not its id (``<|im_end|>`` in Lark) uses it and
    lists the name in ``Grammar.special_names[index]``; the compiler replaces it with
    :func:`special_token` of the id the vocabulary gives that name.

    Parameters
    ----------
    index : int
        The name's index, in ``[0, 2**18)``.

    Returns
    -------
    CharSet
        ``{SPECIAL_BASE + 2**18 + index}``.

    Raises
    ------
    ValueError
        If the index is out of range.
    """
    if not 0 <= index < MAX_SPECIAL_TOKENS:
        raise ValueError(f"special token name index {index} is outside [0, {MAX_SPECIAL_TOKENS})")
    return CharSet(((PLACEHOLDER_BASE + index, PLACEHOLDER_BASE + index),))


def special_token_id(codepoint: int) -> tuple[str, int] | None:
    """Classify a pseudo character: ``("id", token_id)``, ``("name", index)`` or None.

    Parameters
    ----------
    codepoint : int
        A code point of a :class:`CharSet`.

    Returns
    -------
    tuple of (str, int) or None
        None for a real Unicode code point.
    """
    if codepoint < SPECIAL_BASE or codepoint > MAX_PSEUDO:
        return None
    if codepoint < PLACEHOLDER_BASE:
        return ("id", codepoint - SPECIAL_BASE)
    return ("name", codepoint - PLACEHOLDER_BASE)


# --------------------------------------------------------------------------------------------
# Empty-string questions
# --------------------------------------------------------------------------------------------


def matches_empty(node: Regex) -> bool:
    """Return whether a regex IR node matches the empty string (exactly, for every node type)."""
    if isinstance(node, CharSet):
        return False
    if isinstance(node, Literal):
        return not node.text
    if isinstance(node, (Concat, Intersect)):
        return all(matches_empty(i) for i in node.items)
    if isinstance(node, Alt):  # literals inline: an enum's alternation is many of them
        return any(not i.text if type(i) is Literal else matches_empty(i) for i in node.items)
    if isinstance(node, Repeat):
        if node.max is not None and node.min > node.max:
            return False  # item{5,3} matches nothing
        return node.min == 0 or matches_empty(node.item)
    if isinstance(node, Complement):
        return not matches_empty(node.item)
    if isinstance(node, Automaton):
        return node.start in node.accept
    raise TypeError(f"not a regex IR node: {node!r}")


def non_empty(node: Regex) -> Regex | None:
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
        head, tail = non_empty(node.items[0]), Concat(node.items[1:])
        parts: list[Regex] = [] if head is None else [Concat((head, *tail.items))]
        rest = non_empty(tail)
        parts += [] if rest is None else [rest]
        return None if not parts else parts[0] if len(parts) == 1 else Alt(tuple(parts))
    if isinstance(node, Alt):
        items = [r for r in (non_empty(i) for i in node.items) if r is not None]
        return None if not items else items[0] if len(items) == 1 else Alt(tuple(items))
    if isinstance(node, Repeat):
        # item{m,n} - {""} = (item - {""}){1,n} when item{m,n} is nullable.
        inner = non_empty(node.item)
        if inner is None or node.max == 0:
            return None
        return Repeat(inner, 1, node.max)
    if isinstance(node, Intersect):
        if not node.items:  # every string
            return Repeat(ANY_CHAR, 1, None)
        # Every item is nullable: removing "" from one item removes it from the intersection.
        first = non_empty(node.items[0])
        return None if first is None else Intersect((first, *node.items[1:]))
    if isinstance(node, Complement):
        return Complement(Alt((node.item, EMPTY)))
    if isinstance(node, Automaton):
        return _automatonnon_empty(node)
    return None  # the empty Literal


def _automatonnon_empty(node: Automaton) -> Automaton | None:
    """Return ``node`` without the empty string: a fresh start state with no edge into it."""
    fresh = node.num_states
    edges = node.edges + tuple((fresh, cs, dst) for src, cs, dst in node.edges if src == node.start)
    succ: dict[int, list[int]] = {}
    for src, cs, dst in edges:
        if not cs.intersect(ANY_CHAR.union(ANY_SPECIAL)).is_empty():
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
