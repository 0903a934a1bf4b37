"""Stage 3: intersection and complement of regular languages, by products of byte DFAs.

:class:`~constrain.ir.Intersect` and :class:`~constrain.ir.Complement` have no Thompson
construction, so the NFA builder (:class:`~constrain.automata.nfa.NfaBuilder`) is given
:func:`boolean_fragment` for their DFA and splices it in as a
:class:`~constrain.automata.byte_dfa.DfaFragment` (a DFA is an NFA):

- ``Intersect((a, b, ...))`` is the product automaton of the operands' DFAs (each compiled with
  :func:`~constrain.automata.nfa.regex_dfa` and this module's products, so operands nest
  freely), folded smallest first and minimised after each step but the last; an operand
  ``Complement(c)`` is folded in as the difference ``... - L(c)`` (the other operands accept
  valid UTF-8 only, so that is the same language, from one product instead of two);
- ``Complement(a)`` is ``ANY_CHAR* - L(a)``: the product of the DFA of every valid UTF-8 string
  with the DFA of ``a`` completed by a non-accepting sink, accepting where the first accepts and
  the second does not. A complement therefore never accepts invalid UTF-8.

An operand that is a set of literals (the property names an ``additionalProperties`` key must
avoid) is compiled straight into its trie; other plain operands (the string body every such key
intersects) are compiled once and kept in a small cache by value. Products visit reachable pairs
only (kernel ``product_kernel``, which stops at the state limit before growing further) and lose
the pairs that cannot reach acceptance. The last product of a node is not minimised: the
automaton it is spliced into (a lexer, a regex) is minimised as a whole, so minimising the part
first would be paid twice (~0.1 ms a key set in JSON Schema lexers). Results are cached by node
value (IR nodes are frozen and hashable), so a schema that repeats a sub-expression many times
compiles it once.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from constrain._types import BoolArray, Int32Array, Int64Array
from constrain.automata.byte_dfa import (
    Dfa,
    DfaFragment,
    dfa_fragment,
    empty_dfa,
    minimal_dfa,
    read_only,
)
from constrain.automata.nfa import regex_dfa
from constrain.errors import CompileLimitError
from constrain.ir import ANY_CHAR, Alt, Complement, Intersect, Literal, Regex, Repeat
from constrain.kernels.numba_dfa import product_kernel
from constrain.kernels.numba_subsets import nfa_live_kernel

__all__ = ["boolean_dfa", "boolean_fragment", "plain_dfa", "product_dfa", "trie_dfa"]

# The cache of compiled intersections and complements: least recently used first, bounded by
# entries and by the bytes of the arrays it holds.
_CACHE_ENTRIES = 512
_CACHE_BYTES = 64 << 20
# Largest table of all pairs of two operands' states that a product indexes directly once they
# fill a 64th of it (int32: 8 MB; the 141 products of four handwritten MaskBench schemas, sum of
# per-call minima: 278 -> 257 ms against the hash table alone).
_DENSE_PAIRS = 1 << 21
_cache: OrderedDict[Regex, tuple[Dfa, DfaFragment]] = OrderedDict()
_cache_used = [0]  # bytes held, in a list so that it can change under the lock
_cache_lock = threading.Lock()


def _nbytes(entry: tuple[Dfa, DfaFragment]) -> int:
    dfa, frag = entry
    return int(dfa.trans.nbytes + frag.table.nbytes + 512)


def plain_dfa(node: Regex, max_states: int, limit_name: str) -> Dfa:
    """Return the minimal DFA of ``node``, whose intersections and complements come from here."""
    return regex_dfa(node, max_states=max_states, limit_name=limit_name, boolean=boolean_fragment)


@functools.cache
def _universe() -> Dfa:
    """Return the DFA of every valid UTF-8 string (``ANY_CHAR*``)."""
    return plain_dfa(Repeat(ANY_CHAR, 0, None), 1 << 20, "max_dfa_states")


def _trimmed_minimal(
    trans: Int32Array, byte_class: Int64Array, accept: BoolArray, minimise: bool = True
) -> Dfa:
    """Drop the states that cannot reach acceptance, then minimise (if ``minimise``)."""
    num, num_classes = trans.shape
    flat = trans.reshape(-1)
    has_edge = flat >= 0
    src = np.repeat(np.arange(num, dtype=np.int32), num_classes)[has_edge]
    live = np.zeros(num, dtype=np.bool_)
    nfa_live_kernel(src, flat[has_edge], np.flatnonzero(accept).astype(np.int32), live)
    if not live[0]:
        return empty_dfa()
    if not live.all():
        # Old id -> new id, with -1 (also the index of the last entry) for dead states.
        remap = np.append(np.where(live, np.cumsum(live) - 1, -1), -1).astype(np.int32)
        trans = np.ascontiguousarray(remap[trans[live]])
        accept = accept[live]
    if not minimise:
        dfa = Dfa(byte_class.astype(np.uint8), trans, accept, np.ones(len(accept), np.bool_))
        read_only(dfa.byte_class, dfa.trans, dfa.accept, dfa.live)
        return dfa
    return minimal_dfa(trans, byte_class, accept)


def product_dfa(
    a: Dfa, b: Dfa, *, difference: bool, max_states: int, limit_name: str, minimise: bool = True
) -> Dfa:
    """Return a DFA of ``L(a) & L(b)``, or of ``L(a) - L(b)`` when ``difference``.

    Parameters
    ----------
    a, b : Dfa
        The operands.
    difference : bool
        Compute the difference instead of the intersection.
    max_states : int
        Largest product allowed (reachable pairs, before minimisation).
    limit_name : str
        The limit reported in the error.
    minimise : bool, optional
        When False, the product is only trimmed (every state reaches acceptance), not
        minimised: for an automaton spliced into a larger one that is minimised as a whole.

    Returns
    -------
    Dfa
        The minimal (or trimmed) DFA of the result.

    Raises
    ------
    CompileLimitError
        As soon as the product needs more than ``max_states`` states.
    """
    pair_key = a.byte_class.astype(np.int64) * 256 + b.byte_class
    joint, inverse = np.unique(pair_key, return_inverse=True)
    byte_class = inverse.reshape(-1).astype(np.int64)
    col_a = (joint // 256).astype(np.int32)
    col_b = (joint % 256).astype(np.int32)
    status, count, trans, pair_a, pair_b = product_kernel(
        a.trans, b.trans, col_a, col_b, difference, max_states, _DENSE_PAIRS
    )
    if status != 0:
        raise CompileLimitError(
            limit_name,
            max_states,
            int(count),
            hint=(
                f"the {'complement' if difference else 'intersection'} of automata with "
                f"{a.num_states} and {b.num_states} states needs more states (a product "
                "construction); simplify the operands or raise the limit"
            ),
        )
    accept_b = np.where(pair_b >= 0, b.accept[pair_b], False)
    accept = a.accept[pair_a] & (~accept_b if difference else accept_b)
    return _trimmed_minimal(trans, byte_class, accept, minimise)


# Operand DFAs of products, by (node, limit): the same string body is intersected with a
# different key set in every object of a schema. Small automata only, first in first out.
_OPERAND_ENTRIES = 256
_OPERAND_MAX_BYTES = 256 << 10
_operands: dict[tuple[Regex, int, str], Dfa] = {}


def _words(node: Regex) -> list[bytes] | None:
    """Return the strings of a literal or an alternation of literals, else None."""
    items = node.items if isinstance(node, Alt) else (node,)
    words = []
    for item in items:
        if not isinstance(item, Literal):
            return None
        try:
            words.append(item.text.encode("utf-8"))
        except UnicodeEncodeError:  # a surrogate: no UTF-8 string matches it
            continue
    return words


def trie_dfa(words: list[bytes]) -> Dfa:
    """Return the (not minimal) DFA of a finite set of strings: their trie, without sink.

    Every trie node lies on the way to a word, so the automaton is trim; what a product with it
    is spliced into is minimised.

    Parameters
    ----------
    words : list of bytes
        The strings (at least one).

    Returns
    -------
    Dfa
        The trie; its arrays are read-only.
    """
    used = sorted({b for word in words for b in word})  # UTF-8 never uses 13 of the 256 bytes
    byte_class = np.zeros(256, dtype=np.int64)  # class 0: bytes in no word
    byte_class[used] = np.arange(1, len(used) + 1)
    children: list[dict[int, int]] = [{}]
    accept = [False]
    for word in words:
        node = 0
        for byte in word:
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = len(children)
                children[node][byte] = nxt
                children.append({})
                accept.append(False)
            node = nxt
        accept[node] = True
    trans = np.full((len(children), len(used) + 1), -1, dtype=np.int32)
    for state, edges in enumerate(children):
        for byte, nxt in edges.items():
            trans[state, byte_class[byte]] = nxt
    dfa = Dfa(
        byte_class.astype(np.uint8),
        trans,
        np.array(accept, dtype=np.bool_),
        np.ones(len(children), dtype=np.bool_),
    )
    read_only(dfa.byte_class, dfa.trans, dfa.accept, dfa.live)
    return dfa


def _operand_dfa(node: Regex, max_states: int, limit_name: str) -> Dfa:
    if isinstance(node, (Intersect, Complement)):
        return boolean_dfa(node, max_states=max_states, limit_name=limit_name)
    words = _words(node)
    if words is not None and sum(map(len, words)) < max_states:
        return trie_dfa(words) if words else empty_dfa()
    key = (node, max_states, limit_name)
    found = _operands.get(key)
    if found is None:
        found = plain_dfa(node, max_states, limit_name)
        if found.trans.nbytes <= _OPERAND_MAX_BYTES:
            with _cache_lock:
                while len(_operands) >= _OPERAND_ENTRIES:
                    _operands.pop(next(iter(_operands)))
                _operands[key] = found
    return found


# A length operand ``ANY_CHAR{lo,hi}`` this large is checked against the other operands'
# lengths before any product: the product of a pattern with ``maxLength: 32767`` unrolls every
# count, while a pattern whose strings all fit (a date, a uuid) needs no product at all.
_LENGTH_FOLD_MIN = 256
_LENGTH_SCAN_MAX_STATES = 1 << 14


def _fold_lengths(items: Sequence[Regex], max_states: int, limit_name: str) -> list[Regex]:
    """Return ``items`` (an intersection's positive operands) with large counts narrowed.

    A count ``X{lo,hi}`` of a prefix-free item (a character, a JSON string character with its
    escapes) with a large bound is compared with the number of items in the strings of the
    other operands' intersection: a lower bound they always meet becomes 0, an upper bound they
    never exceed goes, and a count left with neither is dropped. The language is unchanged.
    """
    big = [i for i in items if isinstance(i, Repeat) and max(i.min, i.max or 0) >= _LENGTH_FOLD_MIN]
    if not big or len(big) == len(items):
        return list(items)
    out = [i for i in items if i not in big]
    rest = out[0] if len(out) == 1 else Intersect(tuple(out))
    rest_dfa = _operand_dfa(rest, max_states, limit_name)
    for r in big:
        assert isinstance(r, Repeat)
        span = unit_counts(rest_dfa, _operand_dfa(r.item, max_states, limit_name))
        if span is None:
            out.append(r)
            continue
        shortest, longest = span
        lo = r.min if r.min > shortest else 0
        hi = r.max if r.max is not None and (longest is None or r.max < longest) else None
        if lo or hi is not None:
            out.append(Repeat(r.item, lo, hi))
    return out


def unit_counts(dfa: Dfa, unit: Dfa) -> tuple[int, int | None] | None:
    """Return the fewest and most copies of ``unit`` in a string of ``L(dfa)`` (None: no most).

    Every string of ``L(dfa)`` must split into copies of the prefix-free ``unit`` (one
    accepting state, without edges); None when it does not, or the walk of the pairs of states
    grows large.
    """
    finals = np.flatnonzero(unit.accept)
    if finals.size != 1 or (unit.trans[finals[0]] >= 0).any() or not dfa.accept.any():
        return None
    final = int(finals[0])
    pairs = np.unique(dfa.byte_class.astype(np.int64) * 256 + unit.byte_class)
    cols = [(int(k // 256), int(k % 256)) for k in pairs]
    index = {(0, 0): 0}
    edges: list[list[tuple[int, int]]] = [[]]
    todo = [(0, 0)]
    while todo:
        p, q = todo.pop()
        here = edges[index[p, q]]
        for ca, cb in cols:
            p2 = int(dfa.trans[p, ca])
            if p2 < 0:
                continue
            q2 = int(unit.trans[q, cb])
            if q2 < 0:
                return None  # a string of the language that is not made of units
            step = 1 if q2 == final else 0
            key = (p2, 0 if step else q2)
            if key not in index:
                if len(index) >= _LENGTH_SCAN_MAX_STATES:
                    return None
                index[key] = len(edges)
                edges.append([])
                todo.append(key)
            here.append((index[key], step))
    num = len(edges)
    accepting = np.zeros(num, dtype=np.bool_)
    for (p, q), i in index.items():
        if dfa.accept[p] and q != 0:
            return None  # a string that ends inside a unit: not made of units
        accepting[i] = bool(dfa.accept[p])
    if not accepting.any():
        return None
    # fewest: 0-1 breadth first search
    best = np.full(num, -1, dtype=np.int64)
    near: list[int] = [0]
    far: list[int] = []
    dist = 0
    while near or far:
        if not near:
            near, far, dist = far, [], dist + 1
        s = near.pop()
        if best[s] >= 0:
            continue
        best[s] = dist
        for t, w in edges[s]:
            if best[t] < 0:
                (far if w else near).append(t)
    shortest = int(best[accepting & (best >= 0)].min())
    # most: the longest path when the pairs have no cycle (Kahn's order)
    indeg = np.zeros(num, dtype=np.int64)
    for out_edges in edges:
        for t, _ in out_edges:
            indeg[t] += 1
    order = [s for s in range(num) if indeg[s] == 0]
    most = np.full(num, -1, dtype=np.int64)
    most[0] = 0
    i = 0
    while i < len(order):
        s = order[i]
        i += 1
        for t, w in edges[s]:
            if most[s] >= 0 and most[s] + w > most[t]:
                most[t] = most[s] + w
            indeg[t] -= 1
            if indeg[t] == 0:
                order.append(t)
    if len(order) < num:
        return shortest, None
    return shortest, int(most[accepting].max())


def _cached(
    node: Intersect | Complement, max_states: int, limit_name: str
) -> tuple[Dfa, DfaFragment]:
    with _cache_lock:
        hit = _cache.get(node)
        if hit is not None:
            _cache.move_to_end(node)
    if hit is None:
        if isinstance(node, Complement):
            operand = _operand_dfa(node.item, max_states, limit_name)
            dfa = product_dfa(
                _universe(),
                operand,
                difference=True,
                max_states=max_states,
                limit_name=limit_name,
                minimise=False,
            )
        elif not node.items:
            dfa = _universe()
        else:
            # A & ~B is A - B (every operand's language is valid UTF-8): one product instead of
            # two, the complement's product with every string never built. Positive operands
            # go first, so a difference always has a left side.
            positive = [i for i in node.items if not isinstance(i, Complement)]
            negative = [i.item for i in node.items if isinstance(i, Complement)]

            # Smallest operands first: a large operand met early multiplies every later
            # intermediate. On the 74 MaskBench schemas whose products this order changes, the
            # products visit 1.56M states instead of 2.16M (allany23: 80k instead of 133k,
            # its 1,801-state operand now last).
            def by_size(items: Sequence[Regex]) -> list[Dfa]:
                dfas = [_operand_dfa(i, max_states, limit_name) for i in items]
                return sorted(dfas, key=lambda d: d.num_states)

            operands = by_size(_fold_lengths(positive, max_states, limit_name))
            dfa = operands[0] if operands else _universe()
            steps = [(d, False) for d in operands[1:]] + [(d, True) for d in by_size(negative)]
            for k, (operand, difference) in enumerate(steps):
                if dfa.is_empty_language():
                    break
                dfa = product_dfa(
                    dfa,
                    operand,
                    difference=difference,
                    max_states=max_states,
                    limit_name=limit_name,
                    minimise=k < len(steps) - 1,  # the last product is only trimmed
                )
        hit = (dfa, dfa_fragment(dfa))
        with _cache_lock:
            if node not in _cache:
                _cache[node] = hit
                _cache_used[0] += _nbytes(hit)
            while len(_cache) > _CACHE_ENTRIES or _cache_used[0] > _CACHE_BYTES:
                _cache_used[0] -= _nbytes(_cache.popitem(last=False)[1])
    if hit[0].num_states > max_states:  # cached under a larger limit
        raise CompileLimitError(
            limit_name,
            max_states,
            hit[0].num_states,
            hint="the intersection or complement has too many states; raise the limit",
        )
    return hit


def boolean_dfa(node: Intersect | Complement, *, max_states: int, limit_name: str) -> Dfa:
    """Return a trim byte DFA of an intersection or a complement (cached by value).

    Trim: every state is reachable and reaches acceptance; not necessarily minimal (see the
    module notes).

    Parameters
    ----------
    node : Intersect or Complement
        The node; its operands may be any regex IR.
    max_states : int
        Limit on every automaton built on the way (operands and products).
    limit_name : str
        The limit reported in the error (``"max_dfa_states"``, ``"max_lexer_states"``).

    Returns
    -------
    Dfa
        The DFA; ``Intersect(())`` is every valid string.

    Raises
    ------
    CompileLimitError
        When an operand or a product grows past ``max_states``.
    """
    return _cached(node, max_states, limit_name)[0]


def boolean_fragment(
    node: Intersect | Complement, *, max_states: int, limit_name: str
) -> DfaFragment:
    """Return :func:`boolean_dfa` of ``node`` as NFA material (see :func:`dfa_fragment`)."""
    return _cached(node, max_states, limit_name)[1]
