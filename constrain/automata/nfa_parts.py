"""Stage 3: the NFA type and the regex-node helpers the NFA builder uses.

:class:`Nfa` is the byte-level NFA as flat arrays (:mod:`constrain.automata.nfa` builds it);
the helpers say whether a node matches the empty string, read a literal alternative, collapse
repeats of stars and check an :class:`~constrain.ir.Automaton`'s state ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from constrain._types import Int32Array, Int64Array, UInt64Array
from constrain.automata.byte_dfa import Dfa, DfaFragment
from constrain.automata.utf8 import utf8_sequences
from constrain.errors import GrammarError
from constrain.ir import (
    NOTHING,
    Automaton,
    CharSet,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
    matches_empty,
)
from constrain.kernels.numba_minimize import acyclic_classes_kernel
from constrain.kernels.numba_product import product_counts_kernel

# Nfa.group_base of an NFA without groups: no tag reaches it
NO_GROUPS = 2**31 - 1

K = TypeVar("K")
V = TypeVar("V")

__all__ = [
    "NO_GROUPS",
    "CountedRegion",
    "FoldableRepeat",
    "FragmentCache",
    "Nfa",
    "Template",
    "check_automaton",
    "counted_operand",
    "fifo_room",
    "item_table",
    "literal_bytes",
    "literal_text",
    "literal_trie",
    "make_template",
    "nullable",
    "region_counts",
    "simplify_repeat",
    "trie_template",
    "utf8_bytes",
]


def literal_bytes(items: tuple[Regex, ...]) -> list[bytes] | None:
    """Return the UTF-8 texts of ``items`` if every one is a :class:`Literal`, else None."""
    try:
        return [item.text.encode("utf-8") for item in items]  # type: ignore[union-attr]
    except (AttributeError, UnicodeEncodeError):  # not a literal, or a lone surrogate
        return None


def utf8_bytes(text: str) -> bytes | None:
    """Return ``text`` in UTF-8, or None when it holds a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def fifo_room(cache: dict[K, V], size: int) -> dict[K, V]:
    """Make room for one more entry in a cache of ``size`` entries (first in, first out)."""
    while len(cache) >= size:
        cache.pop(next(iter(cache)))
    return cache


class FragmentCache:
    """Minimal-DFA fragments by regex node: first in, first out, bounded in entries and bytes.

    A node may hold None (a fragment being built, or one not worth keeping), which weighs
    nothing. :attr:`nbytes`, the fragments' table bytes, is kept up to date as entries come and
    go, so the byte check of :meth:`add` is exact and O(1).
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: dict[Regex, DfaFragment | None] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, node: object) -> bool:
        return node in self._entries

    def get(self, node: Regex) -> DfaFragment | None:
        """Return the fragment of ``node``, None if none is held."""
        return self._entries.get(node)

    def fragments(self) -> list[DfaFragment]:
        """Return the fragments held, oldest first (placeholders left out)."""
        return [f for f in self._entries.values() if f is not None]

    def claim(self, node: Regex) -> bool:
        """Hold ``node`` without a fragment (while it is built) unless it is held; say if so.

        The oldest entries are dropped to make room.
        """
        if node in self._entries:
            return False
        while len(self._entries) >= self.size:
            self._drop(next(iter(self._entries)))
        self._entries[node] = None
        return True

    def add(self, node: Regex, frag: DfaFragment) -> bool:
        """Hold ``frag`` for ``node`` if the bytes allow (else keep what is held); say if so."""
        held = self._entries.get(node)
        freed = 0 if held is None else held.table.nbytes
        if self.nbytes - freed + frag.table.nbytes > self.max_bytes:
            return False
        self.claim(node)
        self._entries[node] = frag
        self.nbytes += frag.table.nbytes - freed
        return True

    def _drop(self, node: Regex) -> None:
        held = self._entries.pop(node, None)
        if held is not None:
            self.nbytes -= held.table.nbytes


def nullable(node: Regex) -> bool:
    """Return whether the language of ``node`` contains the empty string."""
    return matches_empty(node)


def literal_text(node: Regex) -> str | None:
    """Return the one string ``node`` matches if it is a literal or a concat of literals."""
    if isinstance(node, Literal):
        return node.text
    if isinstance(node, Concat) and all(isinstance(item, Literal) for item in node.items):
        return "".join(item.text for item in node.items)  # type: ignore[union-attr]
    return None


_SMALL_ALT = 64
"""Up to this many strings a trie is built in Python (numpy's overhead is dearer); the DFA
they end up in is minimised as a whole anyway."""


def _small_trie(texts: list[bytes], start: int, first: int) -> tuple[Int32Array, Int32Array, int]:
    """Return :func:`literal_trie` for a few strings: the plain trie, in Python."""
    trie: dict[tuple[int, int], int] = {}
    edges: list[tuple[int, int, int, int]] = []
    ends: set[int] = set()
    for data in texts:
        cur = start
        for byte in data:
            nxt = trie.get((cur, byte))
            if nxt is None:
                nxt = trie[(cur, byte)] = first + len(trie)
                edges.append((cur, byte, byte, nxt))
            cur = nxt
        ends.add(cur)
    table = np.array(edges, dtype=np.int32).reshape(-1, 4)
    return table, np.array(sorted(ends), dtype=np.int32), len(trie)


def literal_trie(texts: list[bytes], start: int, first: int) -> tuple[Int32Array, Int32Array, int]:
    """Return an acyclic automaton of byte strings from ``start`` (minimal past a few).

    Up to :data:`_SMALL_ALT` strings this is the plain trie (Python). Past it, the strings are
    sorted, so a string's trie node at depth ``j`` is new exactly where ``j`` is at least its
    common prefix with the string before it, else the one above it in the sorted order (numpy
    over a padded byte matrix), and trie nodes with the same right language are merged
    (:func:`~constrain.kernels.numba_minimize.acyclic_classes_kernel`), so common suffixes are
    shared too: an enum of 65,536 codes is a few states per code, not one per byte.

    Parameters
    ----------
    texts : list of bytes
        The strings (duplicates and ``b""`` allowed).
    start : int
        The state every string starts from.
    first : int
        The id of the first new state (new states are numbered consecutively).

    Returns
    -------
    edges : ndarray of int32, shape (E, 4)
        ``(src, byte, byte, dst)`` per edge.
    ends : ndarray of int32
        The distinct states where some string ends (``start`` for ``b""``).
    count : int
        The number of new states.
    """
    order = sorted(set(texts))
    if len(order) <= _SMALL_ALT:
        return _small_trie(order, start, first)
    n = len(order)
    lengths = np.fromiter(map(len, order), dtype=np.int64, count=n)
    width = int(lengths.max())
    grid = np.zeros((n, width), dtype=np.int32)
    cols = np.arange(width)[None, :]
    valid = cols < lengths[:, None]
    grid[valid] = np.frombuffer(b"".join(order), dtype=np.uint8)
    # common prefix with the string before: the first column where they differ or one ends
    same = np.zeros((n, width), dtype=bool)
    same[1:] = (grid[1:] == grid[:-1]) & valid[1:] & valid[:-1]
    lcp = np.where(same.all(axis=1), width, np.argmin(same, axis=1))
    new = valid & (cols >= lcp[:, None])
    size = int(new.sum())
    # trie nodes 1..size numbered row by row (a child after its parent); root 0. A cell that
    # is not new is the node of the cell above it (the latest new one in its column).
    ids = np.zeros((n, width), dtype=np.int64)
    ids[new] = 1 + np.arange(size)
    rows = np.where(new, np.arange(n)[:, None], 0)
    np.maximum.accumulate(rows, axis=0, out=rows)
    node = np.take_along_axis(ids, rows, axis=0)
    parent = np.zeros_like(node)
    parent[:, 1:] = node[:, :-1]
    src, label, dst = parent[new], grid[new], node[new].astype(np.int32)
    by_src = np.argsort(src, kind="stable")  # rows are sorted: labels ascend per parent
    src, label, dst = src[by_src], label[by_src], dst[by_src]
    indptr = np.zeros(size + 2, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=size + 1), out=indptr[1:])
    is_end = np.zeros(size + 1, dtype=np.bool_)
    is_end[np.where(lengths > 0, node[np.arange(n), np.maximum(lengths - 1, 0)], 0)] = True
    cls = np.empty(size + 1, dtype=np.int32)
    count = int(acyclic_classes_kernel(indptr, dst, label, is_end, cls)) - 1  # root: its own
    # one copy of each class's edges: those of its representative (the node that made it)
    rep = np.zeros(count + 1, dtype=np.int64)
    np.maximum.at(rep, cls, np.arange(size + 1))
    state = (first + cls).astype(np.int64)
    state[0] = start
    keep = rep[cls[src]] == src
    edges = np.stack([state[src[keep]], label[keep], label[keep], state[dst[keep]]], axis=1).astype(
        np.int32
    )
    return edges, np.unique(state[is_end]).astype(np.int32), count


def simplify_repeat(node: Repeat) -> Regex:
    """Collapse repeats of stars and pluses, so ``(a*){1,100000}`` stays small."""
    item, lo, hi = node.item, node.min, node.max
    if hi is not None and lo > hi:
        return NOTHING  # no count is both >= min and <= max (e.g. minLength 5, maxLength 3)
    if hi == 0:
        return Concat(())
    if hi == 1 and lo == 1:
        return item
    if isinstance(item, Repeat) and item.max is None and item.min <= 1:
        if item.min == 0 or lo == 0:
            return Repeat(item.item, 0, None)
        return Repeat(item.item, lo, None)
    if hi is None and lo > 0 and nullable(item):
        return Repeat(item, 0, None)
    return node


def check_automaton(node: Automaton) -> None:
    """Raise :class:`GrammarError` unless every state id of ``node`` is in range."""
    n = node.num_states
    ids = [node.start, *node.accept, *(q for src, _, dst in node.edges for q in (src, dst))]
    bad = next((q for q in ids if not 0 <= q < n), None)
    if n < 1 or bad is not None:
        raise GrammarError(
            f"invalid Automaton: state {bad if n >= 1 else node.start} is out of range for "
            f"num_states={n} (states are 0 .. num_states - 1)"
        )


@dataclass(frozen=True, slots=True, eq=False)
class Nfa:
    """A byte-level NFA as flat arrays (internal to stage 3).

    Parameters
    ----------
    num_states : int
        Number of states ``N``.
    src, lo, hi, dst : (E,) int32
        Byte edges ``src --[lo..hi]--> dst``.
    eps_src, eps_dst : (Ee,) int32
        Epsilon edges.
    start : int
        Initial state.
    tag : (N,) int32
        Terminal accepted in each state, -1 for none.
    comp : (N,) int32
        Terminal whose automaton each state belongs to, -1 for none.
    group_base, group_ptr, group_terms : int, (G + 1,) int64, (M,) int32
        A ``tag`` or ``comp`` of ``group_base + g`` or more stands for group ``g``: several
        terminals sharing the state, ``group_terms[group_ptr[g]:group_ptr[g + 1]]``
        (:mod:`constrain.automata.key_groups`). None by default.
    """

    num_states: int
    src: Int32Array
    lo: Int32Array
    hi: Int32Array
    dst: Int32Array
    eps_src: Int32Array
    eps_dst: Int32Array
    start: int
    tag: Int32Array
    comp: Int32Array
    group_base: int = NO_GROUPS
    group_ptr: Int64Array = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    group_terms: Int32Array = field(default_factory=lambda: np.zeros(0, dtype=np.int32))


class FoldableRepeat(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a builder with ``fold_signal`` set at a repetition the lazy lexer would fold.

    ``what`` is the repetition (or the intersection holding it), written out only if the
    signal is printed: a JSON string character's repr took ~60 us of each compile that
    switches to the lazy lexer. ``region_min`` is the count from which the lazy lexer should
    fold: ``fold_signal`` for one large count, ``fold_small`` when many smaller counts add up
    to ``fold_signal`` copies.
    """

    def __init__(self, what: object, region_min: int) -> None:
        super().__init__()
        self.what = what
        self.region_min = region_min

    def __str__(self) -> str:
        return f"a foldable repetition in {self.what!r}"


@dataclass(frozen=True, slots=True, eq=False)
class CountedRegion:
    """A counted repetition ``item{lo,hi}`` left folded for the lazy lexer.

    The builder adds no states for its copies: the states of copy ``k`` are virtual
    (:mod:`constrain.kernels.numba_lazy`), made of ``k`` and a state of ``item``'s minimal DFA.

    Parameters
    ----------
    enter, after : int
        The real NFA states before and after the repetition.
    lo, hi : int
        The counts.
    item : Regex
        The repeated language: prefix-free and not nullable.
    dfa : Dfa
        Its minimal DFA: state 0 initial, one accepting state, which has no transition.
    other : Dfa, optional
        A product region ``item{lo,hi} & other``: the DFA whose state travels along the
        count (a virtual state is then a count, a state of ``other`` and one of the item), and
        which must accept where the region is left. None: a plain repetition.
    reach : (UInt64Array, int), optional
        With ``other``: :func:`region_counts`, the item counts that lead to acceptance.
    """

    enter: int
    after: int
    lo: int
    hi: int
    item: Regex
    dfa: Dfa
    other: Dfa | None = None
    reach: tuple[UInt64Array, int] | None = None


def item_table(dfa: Dfa, reps: np.ndarray) -> Int32Array:
    """Return a region item's DFA over classes whose first bytes are ``reps``: ``(width, C)``.

    Its accepting state (prefix-free: it has no transition) is dropped: a byte into it is
    ``-2`` (the item is complete), a dead one ``-1``; state 0 stays the start.
    """
    (final,) = np.flatnonzero(dfa.accept).tolist()
    keep = np.array([q for q in range(dfa.num_states) if q != final], dtype=np.int64)
    local = np.full(dfa.num_states, -1, dtype=np.int64)
    local[keep] = np.arange(keep.size)
    step = dfa.trans[keep][:, dfa.byte_class[reps]].astype(np.int64)
    table = np.where(step == final, -2, np.where(step < 0, -1, local[step]))
    return table.astype(np.int32)


def region_counts(item: Dfa, other: Dfa, hi: int) -> tuple[UInt64Array, int] | None:
    """Return, per ``(other, item)`` state, the item counts that lead to acceptance.

    :func:`~constrain.kernels.numba_product.product_counts_kernel`'s ``(bits, nbits)``, over
    the byte classes the two DFAs share; None when they would take more than 8 MB, or the sets
    of counts still change after 4,096 items.
    """
    keys = item.byte_class.astype(np.int64) * 256 + other.byte_class
    reps = np.unique(keys, return_index=True)[1]
    table = item_table(item, reps)
    width = table.shape[0]
    order: list[int] = []  # item states, each after those it moves to (the item is acyclic)
    done = np.zeros(width, dtype=np.bool_)

    stack = [(0, table[0].tolist(), 0)]  # depth first, without recursion
    done[0] = True
    while stack:
        x, nexts, k = stack.pop()
        while k < len(nexts) and (nexts[k] < 0 or done[nexts[k]]):
            k += 1
        if k == len(nexts):
            order.append(x)
            continue
        y = nexts[k]
        stack.append((x, nexts, k + 1))
        done[y] = True
        stack.append((y, table[y].tolist(), 0))
    steps = other.trans[:, other.byte_class[reps]].astype(np.int32)
    bits, nbits, ok = product_counts_kernel(
        steps.reshape(-1), np.asarray(other.accept, dtype=np.bool_), table.reshape(-1),
        width, np.array([x for x in order if x != 0], dtype=np.int64), hi, 1 << 20,
    )  # fmt: skip
    return (bits, int(nbits)) if ok else None


def counted_operand(node: Intersect) -> tuple[Repeat, Regex] | None:
    """Split ``X{lo,hi} & A...`` into its bounded count and the rest (None: no such operand).

    The count with the most copies is taken; the rest is the intersection of the others.
    """
    counts = [i for i in node.items if isinstance(i, Repeat) and i.max is not None]
    if not counts or len(node.items) < 2:
        return None
    count = max(counts, key=lambda r: r.max or 0)
    rest = tuple(i for i in node.items if i is not count)
    return count, rest[0] if len(rest) == 1 else Intersect(rest)


@dataclass(frozen=True, slots=True, eq=False)
class Template:
    """A fragment with local state ids: entry 0 (no edge enters it), new states 1 .. k-1.

    Placed at ``start`` with ``base``, local ``0`` becomes ``start`` and local ``j >= 1``
    becomes ``base + j``. A character set's fragment exits at local 1.
    """

    num_states: int
    exit: int
    edges: tuple[tuple[int, int, int, int], ...]
    table: Int32Array  # (4, E): src, lo, hi, dst
    eps: Int32Array  # (2, F): src, dst


_NO_EPS = np.zeros((2, 0), dtype=np.int32)
_NO_EPS.flags.writeable = False


def trie_template(cs: CharSet) -> Template:
    """Return the UTF-8 sequences of ``cs`` as a fragment with shared suffixes."""
    edges: list[tuple[int, int, int, int]] = []
    suffix_state: dict[tuple[tuple[int, int], ...], int] = {(): 1}
    num_states = 2

    def state_for(suffix: tuple[tuple[int, int], ...]) -> int:
        """Return the state reading ``suffix`` to the exit; new ones for unknown tails, outer first.

        (A loop: a closure that calls itself is a reference cycle, freed only by the collector.)
        """
        nonlocal num_states
        k = 0
        while suffix[k:] not in suffix_state:  # () is known: the exit
            k += 1
        base = num_states
        num_states += k
        for j in range(k):
            suffix_state[suffix[j:]] = base + j
        for j in range(k - 1, -1, -1):
            nxt = base + j + 1 if j + 1 < k else suffix_state[suffix[k:]]
            edges.append((base + j, suffix[j][0], suffix[j][1], nxt))
        return suffix_state[suffix]

    for lo, hi in cs.ranges:
        edges.extend(
            (0, seq[0][0], seq[0][1], state_for(seq[1:])) for seq in utf8_sequences(lo, hi)
        )
    return make_template(num_states, edges)


def make_template(num_states: int, edges: list[tuple[int, int, int, int]]) -> Template:
    """Return a fragment of ``num_states`` states and these edges, exiting at local 1."""
    table = np.array(edges, dtype=np.int32).reshape(-1, 4).T.copy()
    table.flags.writeable = False
    return Template(num_states, 1, tuple(edges), table, _NO_EPS)
