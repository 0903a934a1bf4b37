"""Earley parser kernels over flat arrays (a tree-structured, persistent chart).

The chart is a growing list of Earley *sets*. Set ``q`` holds the items
``items[0, sets[START, q]:sets[END, q]]`` with their origins in ``items[1, ...]`` (indices of
earlier sets). A set is created by scanning one terminal from a parent set, so sets form a tree
rooted at set 0: several lexing hypotheses share their common history, rolling back is a
truncation, and a scan result is memoised by ``(parent, terminal)``.

The public kernels take two structures, plain tuples (see ``kernels/README.md``):

- ``par`` (one per compiled grammar, the parser part of ``CompiledGrammar.match_arrays``):
  ``(item_rule, item_next_nt, item_next_t, rule_lhs, rule_first_item, nt_rules_indptr,
  nt_rules, nullable, final_item)`` from ``ParserTables``, then ``num_terminals`` and the limit
  ``max_set_items``. Kernels that call these pass ``par`` alone, not the whole grammar: a
  callee that LLVM does not inline can incref and decref every array of its tuple arguments;
- ``chart`` (one per matcher, rebuilt by the matcher when it grows an array): ``(items, sets,
  set_bits, counts, scratch, memo)``:

  - ``items``: int32 ``[3, cap]``, rows ``ITEM``, ``ORIGIN``, ``CHAIN`` (dedup chains);
  - ``sets``: int64 ``[6, cap]``, rows ``START``, ``END``, ``PARENT``, ``TERM``, ``ACC``,
    ``UID``; ``UID`` is unique for the life of a matcher (never reused after a truncation);
  - ``set_bits``: uint64 ``[cap, W]``, the terminals each set expects;
  - ``counts``: int64 ``[num_sets, num_items, next_uid, memo_entries]``;
  - ``scratch``: int64 ``[2, num_items_in_grammar]`` (dedup stamps and chain heads);
  - ``memo``: int64 ``[3, M]`` (M a power of two), rows key ``uid(parent) * T + term``, result
    set, result uid.

Kernels never grow arrays: they return ``STATUS_CAPACITY`` and the Python wrapper grows them and
retries. The algorithm is Earley's with Aycock and Horspool's nullable fix (predicting a nullable
nonterminal also advances over it), so empty rules and left recursion need no special casing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "MEMO_MISS",
    "NO_SET",
    "STATUS_CAPACITY",
    "STATUS_LIMIT",
    "earley_drop_kernel",
    "earley_init_kernel",
    "earley_scan_kernel",
    "memo_get",
    "memo_scan",
    "memo_union",
    "scan_kernel_items",
]

NO_SET = -1
STATUS_CAPACITY = -2
STATUS_LIMIT = -3
MEMO_MISS = -9

ITEM, ORIGIN, CHAIN = 0, 1, 2
START, END, PARENT, TERM, ACC, UID = 0, 1, 2, 3, 4, 5


@njit(cache=True, nogil=True)
def _add_item(
    it: int, origin: int, items: np.ndarray, counts: np.ndarray, scratch: np.ndarray, stamp: int
) -> int:
    """Append (it, origin) to the open set unless present; return 1, 0 (dup) or a status."""
    if scratch[0, it] != stamp:
        scratch[0, it] = stamp
        scratch[1, it] = -1
    k = scratch[1, it]
    while k >= 0:
        if items[ORIGIN, k] == origin:
            return 0
        k = items[CHAIN, k]
    n = counts[1]
    if n >= items.shape[1]:
        return STATUS_CAPACITY
    items[ITEM, n] = it
    items[ORIGIN, n] = origin
    items[CHAIN, n] = scratch[1, it]
    scratch[1, it] = n
    counts[1] = n + 1
    return 1


@njit(cache=True, nogil=True)
def _closure(
    q: int,
    qs: int,
    par: tuple[Any, ...],
    items: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    counts: np.ndarray,
    scratch: np.ndarray,
    stamp: int,
    max_set_items: int,
) -> int:
    """Complete and predict the open set ``q`` whose items start at ``qs``; return a status."""
    item_rule, item_next_nt, item_next_t, rule_lhs = par[0], par[1], par[2], par[3]
    rule_first_item, nt_rules_indptr, nt_rules, nullable, final_item = (
        par[4],
        par[5],
        par[6],
        par[7],
        par[8],
    )
    k = qs
    while k < counts[1]:
        if counts[1] - qs > max_set_items:
            return STATUS_LIMIT
        it = items[ITEM, k]
        o = items[ORIGIN, k]
        nt = item_next_nt[it]
        t = item_next_t[it]
        if nt >= 0:
            for j in range(nt_rules_indptr[nt], nt_rules_indptr[nt + 1]):
                st = _add_item(rule_first_item[nt_rules[j]], q, items, counts, scratch, stamp)
                if st < 0:
                    return st
            if nullable[nt]:
                st = _add_item(it + 1, o, items, counts, scratch, stamp)
                if st < 0:
                    return st
        elif t >= 0:
            set_bits[q, t >> 6] |= np.uint64(1) << np.uint64(t & 63)
        else:
            if it == final_item and o == 0:
                sets[ACC, q] = 1
            lhs = rule_lhs[item_rule[it]]
            lo = qs if o == q else sets[START, o]
            hi = counts[1] if o == q else sets[END, o]
            for j in range(lo, hi):
                it2 = items[ITEM, j]
                if item_next_nt[it2] == lhs:
                    st = _add_item(it2 + 1, items[ORIGIN, j], items, counts, scratch, stamp)
                    if st < 0:
                        return st
        k += 1
    return 0


@njit(cache=True, nogil=True)
def _open_set(
    parent: int, term: int, sets: np.ndarray, set_bits: np.ndarray, counts: np.ndarray
) -> int:
    q = counts[0]
    if q >= sets.shape[1]:
        return STATUS_CAPACITY
    counts[0] = q + 1
    counts[2] += 1
    sets[START, q] = counts[1]
    sets[END, q] = counts[1]
    sets[PARENT, q] = parent
    sets[TERM, q] = term
    sets[ACC, q] = 0
    sets[UID, q] = counts[2]
    for w in range(set_bits.shape[1]):
        set_bits[q, w] = 0
    return int(q)


@njit(cache=True, nogil=True)
def earley_init_kernel(par: tuple[Any, ...], chart: tuple[Any, ...]) -> int:
    """Create the root set 0 (``S' -> . start`` and its closure); return 0 or a status."""
    max_set_items = par[10]
    items, sets, set_bits, counts, scratch, _ = chart
    counts[0] = 0
    counts[1] = 0
    q = _open_set(-1, -1, sets, set_bits, counts)
    if q < 0:
        return q
    stamp = counts[2]
    st = _add_item(par[4][0], 0, items, counts, scratch, stamp)
    if st < 0:
        return st
    st = _closure(0, 0, par, items, sets, set_bits, counts, scratch, stamp, max_set_items)
    sets[END, 0] = counts[1]
    return st


@njit(cache=True, nogil=True)
def earley_scan_kernel(parent: int, term: int, par: tuple[Any, ...], chart: tuple[Any, ...]) -> int:
    """Scan terminal ``term`` from set ``parent``; return the new set, ``NO_SET`` or a status.

    On ``NO_SET`` or a negative status the chart counters are restored.
    """
    max_set_items = par[10]
    items, sets, set_bits, counts, scratch, _ = chart
    saved_sets = counts[0]
    saved_items = counts[1]
    q = _open_set(parent, term, sets, set_bits, counts)
    if q < 0:
        return q
    stamp = counts[2]
    item_next_t = par[2]
    for j in range(sets[START, parent], sets[END, parent]):
        it = items[ITEM, j]
        if item_next_t[it] == term:
            st = _add_item(it + 1, items[ORIGIN, j], items, counts, scratch, stamp)
            if st < 0:
                counts[0] = saved_sets
                counts[1] = saved_items
                return st
    if counts[1] == saved_items:
        counts[0] = saved_sets
        return NO_SET
    st = _closure(q, saved_items, par, items, sets, set_bits, counts, scratch, stamp, max_set_items)
    if st < 0:
        counts[0] = saved_sets
        counts[1] = saved_items
        return st
    sets[END, q] = counts[1]
    return q


@njit(cache=True, nogil=True)
def earley_drop_kernel(parent: int, term: int, par: tuple[Any, ...], chart: tuple[Any, ...]) -> int:
    """Copy set ``parent`` without its items that expect terminal ``term``; return the new set.

    What the matcher reads once a token budget ends an occurrence of ``term`` where it stands
    (``Grammar.token_budgets``): every other expectation of ``parent`` is kept, so a lexeme of
    another terminal in progress from ``parent`` goes on. Completions still read ``parent``
    (the copies keep their origins), which holds the same items but ``term``'s, never looked up
    by a completion. Returns ``STATUS_CAPACITY`` (chart unchanged) when the items do not fit.
    """
    items, sets, set_bits, counts, scratch, _ = chart
    saved_sets = counts[0]
    saved_items = counts[1]
    q = _open_set(parent, -2 - term, sets, set_bits, counts)
    if q < 0:
        return q
    item_next_t = par[2]
    for j in range(sets[START, parent], sets[END, parent]):
        it = items[ITEM, j]
        t = item_next_t[it]
        if t == term:
            continue
        n = counts[1]
        if n >= items.shape[1]:
            counts[0] = saved_sets
            counts[1] = saved_items
            return STATUS_CAPACITY
        items[ITEM, n] = it
        items[ORIGIN, n] = items[ORIGIN, j]
        items[CHAIN, n] = -1
        counts[1] = n + 1
        if t >= 0:
            set_bits[q, t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    sets[ACC, q] = sets[ACC, parent]
    sets[END, q] = counts[1]
    return q


@njit(cache=True, nogil=True)
def memo_get(
    parent: int,
    term: int,
    num_terminals: int,
    memo: np.ndarray,
    sets: np.ndarray,
    counts: np.ndarray,
) -> int:
    """Return the memoised scan of ``(parent, term)``: a set, ``NO_SET``, or ``MEMO_MISS``."""
    key = sets[UID, parent] * num_terminals + term
    mask = memo.shape[1] - 1
    h = (key * 0x9E3779B1) & mask
    for _ in range(memo.shape[1]):
        k = memo[0, h]
        if k == key:
            q = memo[1, h]
            if q == NO_SET:
                return NO_SET
            if q < counts[0] and sets[UID, q] == memo[2, h]:
                return int(q)
            return MEMO_MISS
        if k == -1:
            return MEMO_MISS
        h = (h + 1) & mask
    return MEMO_MISS


@njit(cache=True, nogil=True)
def memo_scan(parent: int, term: int, par: tuple[Any, ...], chart: tuple[Any, ...]) -> int:
    """Scan ``(parent, term)``, memoised: the memo table is consulted first, then filled."""
    num_terminals = par[9]
    sets, counts, memo = chart[1], chart[3], chart[5]
    q = memo_get(parent, term, num_terminals, memo, sets, counts)
    if q != MEMO_MISS:
        return q
    q = earley_scan_kernel(parent, term, par, chart)
    if q < NO_SET:
        return q
    _memo_room(memo, counts)
    key = sets[UID, parent] * num_terminals + term
    mask = memo.shape[1] - 1
    h = (key * 0x9E3779B1) & mask
    for _ in range(memo.shape[1]):
        k = memo[0, h]
        if k == key or k == -1:
            break
        h = (h + 1) & mask
    if memo[0, h] == -1:
        counts[3] += 1
    memo[0, h] = key
    memo[1, h] = q
    memo[2, h] = sets[UID, q] if q >= 0 else -1
    return q


@njit(cache=True, nogil=True)
def _memo_room(memo: np.ndarray, counts: np.ndarray) -> None:
    """Empty the memo once it is half full (``counts[3]`` used slots), before an insertion.

    The memo is a cache: emptying it loses results, never changes one, and keeps its linear
    probing short.
    """
    if counts[3] >= memo.shape[1] // 2:
        for i in range(memo.shape[1]):
            memo[0, i] = -1
        counts[3] = 0


@njit(cache=True, nogil=True)
def _union_key(uid_a: int, uid_b: int) -> int:
    # negative keys never collide with scan keys (uid * T + term >= 0)
    return -1 - (uid_a * 2147483647 + uid_b)


@njit(cache=True, nogil=True)
def memo_union(a: int, b: int, chart: tuple[Any, ...]) -> int:
    """Return a set whose items are the union of sets ``a`` and ``b`` (memoised by their uids).

    Two hypotheses at the same input position whose lexemes are in the same lexer state differ
    only by how the text was split into terminals; the union of their (closed) Earley sets is
    closed and continues exactly like the two together, so one hypothesis replaces both. This
    keeps ambiguous lexings (a keyword that is also a name, ...) from multiplying hypotheses.
    """
    items, sets, set_bits, counts, scratch, memo = chart
    _memo_room(memo, counts)
    key = _union_key(sets[UID, a], sets[UID, b])
    mask = memo.shape[1] - 1
    h = (key * 0x9E3779B1) & mask
    for _ in range(memo.shape[1]):
        k = memo[0, h]
        if k == key:
            q = memo[1, h]
            if q < counts[0] and sets[UID, q] == memo[2, h]:
                return int(q)
            break
        if k == -1:
            break
        h = (h + 1) & mask
    saved_sets = counts[0]
    saved_items = counts[1]
    q = _open_set(-1, -1, sets, set_bits, counts)
    if q < 0:
        return q
    stamp = counts[2]
    for p in (a, b):
        for j in range(sets[START, p], sets[END, p]):
            st = _add_item(items[ITEM, j], items[ORIGIN, j], items, counts, scratch, stamp)
            if st < 0:
                counts[0] = saved_sets
                counts[1] = saved_items
                return st
        for w in range(set_bits.shape[1]):
            set_bits[q, w] |= set_bits[p, w]
        if sets[ACC, p]:
            sets[ACC, q] = 1
    sets[END, q] = counts[1]
    if memo[0, h] == -1:
        counts[3] += 1
    memo[0, h] = key
    memo[1, h] = q
    memo[2, h] = sets[UID, q]
    return int(q)


@njit(cache=True, nogil=True)
def scan_kernel_items(
    p: int, items: np.ndarray, sets: np.ndarray, item_next_t: np.ndarray, out: np.ndarray
) -> int:
    """Write the sorted distinct items of set ``p`` with a terminal after the dot into ``out``.

    This is the set's *scan kernel*: two sets with equal kernels accept the same terminals and
    behave alike under any lexeme that does not complete a rule, so the token tables are keyed by
    it. Returns the count, or ``-(needed)`` when ``out`` is too short. Reference:
    ``np.unique(its[item_next_t[its] >= 0])`` with ``its`` the set's items.
    """
    n = 0
    start, end = sets[START, p], sets[END, p]
    for j in range(start, end):
        it = items[ITEM, j]
        if item_next_t[it] >= 0:
            n += 1
    if n > out.shape[0]:
        return -n
    n = 0
    for j in range(start, end):
        it = items[ITEM, j]
        if item_next_t[it] >= 0:
            out[n] = it
            n += 1
    if n > 1:
        out[:n].sort()
        k = 1
        for j in range(1, n):
            if out[j] != out[k - 1]:
                out[k] = out[j]
                k += 1
        n = k
    return n


@njit(cache=True, nogil=True)
def grammar_sets_kernel(  # type: ignore[no-untyped-def]
    rule_lhs,
    rule_first_item,
    item_next_nt,
    item_next_t,
    nullable,
    first,
    follow_t,
    rest_first,
    rest_nullable,
):
    """Nullability, FIRST and FOLLOW sets of a flattened grammar, as word bitsets.

    Parameters
    ----------
    rule_lhs, rule_first_item : (R,) int32
        Each rule's nonterminal and first item; rule ``r``'s items run to the next rule's first
        (the last one complete).
    item_next_nt, item_next_t : (I,) int32
        The nonterminal / terminal after each item's dot, -1 for none.
    nullable : (N,) bool
        Output (all False on entry): whether a nonterminal derives the empty string.
    first : (N, W) uint64
        Output (zero on entry): the terminals a nonterminal's strings can start with.
    follow_t : (T, W) uint64
        Output (zero on entry): the terminals that can come right after each terminal.
    rest_first : (I, W) uint64
        Output (zero on entry): for an item with a terminal after the dot, FIRST of the rest of
        its rule after that terminal.
    rest_nullable : (I,) bool
        Output (False on entry): whether that rest is nullable.
    """
    num_rules = rule_lhs.shape[0]
    num_items = item_next_nt.shape[0]
    num_words = first.shape[1]
    one = np.uint64(1)
    # rules are usually written top-down: iterating bottom-up needs fewer passes
    changed = True
    while changed:
        changed = False
        for r in range(num_rules - 1, -1, -1):
            lhs = rule_lhs[r]
            if nullable[lhs]:
                continue
            i = rule_first_item[r]
            empty = True
            while item_next_nt[i] >= 0 or item_next_t[i] >= 0:
                if item_next_t[i] >= 0 or not nullable[item_next_nt[i]]:
                    empty = False
                    break
                i += 1
            if empty:
                nullable[lhs] = True
                changed = True
    changed = True
    while changed:
        changed = False
        for r in range(num_rules - 1, -1, -1):
            lhs = rule_lhs[r]
            i = rule_first_item[r]
            while True:
                t = item_next_t[i]
                nt = item_next_nt[i]
                if t >= 0:
                    w = t >> 6
                    bit = one << np.uint64(t & 63)
                    if not first[lhs, w] & bit:
                        first[lhs, w] |= bit
                        changed = True
                    break
                if nt < 0:
                    break
                for w in range(num_words):
                    v = first[lhs, w] | first[nt, w]
                    if v != first[lhs, w]:
                        first[lhs, w] = v
                        changed = True
                if not nullable[nt]:
                    break
                i += 1
    follow_nt = np.zeros(first.shape, np.uint64)
    trailer = np.zeros(num_words, np.uint64)
    changed = True
    while changed:
        changed = False
        for r in range(num_rules):
            lhs = rule_lhs[r]
            end = rule_first_item[r + 1] - 1 if r + 1 < num_rules else num_items - 1
            for w in range(num_words):
                trailer[w] = follow_nt[lhs, w]
            for i in range(end - 1, rule_first_item[r] - 1, -1):
                t = item_next_t[i]
                if t >= 0:
                    for w in range(num_words):
                        if trailer[w] & ~follow_t[t, w]:
                            follow_t[t, w] |= trailer[w]
                            changed = True
                        trailer[w] = 0
                    trailer[t >> 6] = one << np.uint64(t & 63)
                else:
                    nt = item_next_nt[i]
                    for w in range(num_words):
                        if trailer[w] & ~follow_nt[nt, w]:
                            follow_nt[nt, w] |= trailer[w]
                            changed = True
                        trailer[w] = (trailer[w] | first[nt, w]) if nullable[nt] else first[nt, w]
    rest = np.zeros(num_words, np.uint64)
    for r in range(num_rules):
        end = rule_first_item[r + 1] - 1 if r + 1 < num_rules else num_items - 1
        for w in range(num_words):
            rest[w] = 0
        empty = True
        for i in range(end - 1, rule_first_item[r] - 1, -1):
            t = item_next_t[i]
            if t >= 0:
                for w in range(num_words):
                    rest_first[i, w] = rest[w]
                    rest[w] = 0
                rest_nullable[i] = empty
                rest[t >> 6] = one << np.uint64(t & 63)
                empty = False
            else:
                nt = item_next_nt[i]
                if nullable[nt]:
                    for w in range(num_words):
                        rest[w] |= first[nt, w]
                else:
                    for w in range(num_words):
                        rest[w] = first[nt, w]
                    empty = False
