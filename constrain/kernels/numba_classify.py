"""Token classes of a lexer state: one trie walk that serves every parser configuration.

:func:`~constrain.kernels.numba_tables.build_entry_kernel` walks the token trie once per
(lexer state, build inputs): its configurations carry the parser's expected terminals, so a
walk at a lexeme boundary under new inputs recomputes most of its configuration sets. In a
grammar of ~60 terminals (SQL), the first walk at state 0 under new inputs cost 5-10 ms with
Llama 3's vocabulary, and such walks came several to a token.

Here the configurations are *symbolic*: instead of the allowed terminals they carry the
terminals scanned so far inside the token (at most the first two, and the last), and the walk
prunes with FOLLOW sets, which do not depend on the parser. The walk is done once per lexer
state; each token ends in one configuration set, and per build only those sets are evaluated
against the inputs (:func:`classified_entry_kernel`), which then sorts the tokens by their set.

A configuration is ``(lexer state, tag)``; the tag's kind is

- ``ROOT``: still in the lexemes of the entry's own lexer state (past ignored lexemes). In
  the concrete walk its bits are ``expected | ignore``.
- ``ONE(t1)``: terminal ``t1`` was scanned (then ignored lexemes, then the current lexeme).
  Concretely: exact with ``next_bits[t1] | ignore`` where the scan is exact, else inexact with
  ``FOLLOW(t1) | ignore``; plus the exact configuration ``(state, ignore)`` (only ignored
  lexemes after ``t1``), which is the ``ONE`` configuration alive for ``ignore``.
- ``TWO(t1, t2)``: ``t1`` then ``t2`` scanned (then ignored lexemes).
- ``DEEP(t1, t2, t)``: three or more scans, the last ``t``; always inexact.

:func:`classified_entry_kernel` documents how each kind is evaluated; the result equals the
concrete walk's within bitset, and its candidates include the concrete walk's (a symbolic set
overflows more often: its tokens then become candidates, which the matcher checks exactly).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "SYM_CONFIGS",
    "classified_entry_kernel",
    "classify_walk_kernel",
    "compact_sets_kernel",
]

# configurations per symbolic set
SYM_CONFIGS = 32
ROOT, ONE, TWO, DEEP = 0, 1, 2, 3
_FIELD = 20  # bits per terminal field of a tag
_FMASK = (1 << _FIELD) - 1


@njit(cache=True, nogil=True)
def _tag(kind: int, t1: int, t2: int, last: int) -> int:
    return (int(kind) << 60) | (int(t1) << 40) | (int(t2) << 20) | int(last)


@njit(cache=True, nogil=True)
def _alive(x: int, bits: np.ndarray, alive_bits: np.ndarray) -> bool:
    for w in range(alive_bits.shape[1]):
        if alive_bits[x, w] & bits[w] != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _has(bits: np.ndarray, t: int) -> bool:
    return bool(bits[t >> 6] & (np.uint64(1) << np.uint64(t & 63)) != 0)


@njit(cache=True, nogil=True)
def _push(
    x: int,
    tag: int,
    t_s: np.ndarray,
    t_tag: np.ndarray,
    n: int,
    over: bool,
    seen_s: np.ndarray,
    seen_tag: np.ndarray,
    seen_stamp: np.ndarray,
    stamp: int,
) -> tuple[int, bool]:
    """Add ``(x, tag)`` to the set being built; return the new count and overflow flag.

    Duplicates are found in a small open-addressing table whose slots are valid where
    ``seen_stamp`` equals ``stamp`` (one stamp per set built, so the table is never cleared);
    it has room for every configuration a set can hold (a power of two above twice as many).
    A configuration past the set's width is dropped and the set marked overflowed.
    """
    mask = seen_stamp.shape[0] - 1
    slot = ((int(x) * 1000003) ^ int(tag) ^ (int(tag) >> 23)) & mask
    while seen_stamp[slot] == stamp:
        if seen_s[slot] == x and seen_tag[slot] == tag:
            return n, over
        slot = (slot + 1) & mask
    if n >= t_s.shape[0]:
        return n, True
    seen_stamp[slot] = stamp
    seen_s[slot] = x
    seen_tag[slot] = tag
    t_s[n] = x
    t_tag[n] = tag
    return n + 1, over


@njit(cache=True, nogil=True)
def _intern(
    n: int,
    flags: int,
    t_s: np.ndarray,
    t_tag: np.ndarray,
    ss_n: np.ndarray,
    ss_flags: np.ndarray,
    ss_hash: np.ndarray,
    ss_s: np.ndarray,
    ss_tag: np.ndarray,
    table: np.ndarray,
    num_sets: int,
) -> int:
    """Return the id of set ``(t_s, t_tag)[:n]`` with ``flags``; new ones get ``num_sets``.

    -1 when the store is full.
    """
    # mixing without wrap-around (STYLE.md section 5): every product stays below 2**60
    h = n * 31 + flags + 1
    for k in range(n):
        tag = int(t_tag[k])
        v = (int(t_s[k]) * 1000003) ^ tag ^ (tag >> 23)
        h = ((h ^ v) & 0xFFFFFFFFFF) * 1000003
    h = h ^ (h >> 31)
    mask = table.shape[0] - 1
    slot = h & mask
    while table[slot] >= 0:
        j = table[slot]
        if ss_hash[j] == h and ss_n[j] == n and ss_flags[j] == flags:
            same = True
            for k in range(n):
                if ss_s[j, k] != t_s[k] or ss_tag[j, k] != t_tag[k]:
                    same = False
                    break
            if same:
                return int(j)
        slot = (slot + 1) & mask
    if num_sets >= ss_n.shape[0]:
        return -1
    j = num_sets
    table[slot] = j
    ss_n[j] = n
    ss_flags[j] = flags
    ss_hash[j] = h
    for k in range(n):
        ss_s[j, k] = t_s[k]
        ss_tag[j, k] = t_tag[k]
    return j


# 172 lines, kept whole (measured): with the successor of a symbolic set on a byte class (the
# ~65 lines under ``nid == -2``, run per trie node not yet memoised) as a helper
# (``@njit(inline="always")``), the kernel took 50-60 ms instead of 32-41 ms (+45%, medians
# 52.6 / 38.0 ms) over 9 recorded classification walks of fresh JSON and SQL compiles on
# Llama 3.2 (fresh symbolic stores each, sum of per-call minima of 3 replays, 4 alternating
# runs per version, same outputs): numba increfs and decrefs the arrays a helper takes at
# every call.
@njit(cache=True, nogil=True)
def classify_walk_kernel(
    s0: int,
    walk_tables: tuple[Any, ...],
    trie: tuple[Any, ...],
    max_depth: int,
    out: tuple[Any, ...],
    sym_store: tuple[Any, ...],
) -> int:
    """Walk the trie from lexer state ``s0`` with symbolic configurations; return the count.

    Every token whose bytes keep some configuration alive (pruned with FOLLOW sets: a
    superset of what any parser configuration allows) is written, in trie order, to
    ``out_tok``, with the id of its final configuration set in ``out_set`` and the length of
    the byte prefix it shares with the previous token written in ``out_lcp``.

    Parameters
    ----------
    s0 : int
        Lexer state.
    walk_tables : tuple
        ``(ignore, scannable, byte_class, trans, accept_ptr, accept_terms, alive_bits,
        follow_ign, restart)``, one structure per grammar: ignored terminals and terminals that
        occur in rules ((W,) uint64), the lexer (``accept_*``: accepted terminals per state as
        CSR), ``FOLLOW(t) | ignore`` per terminal ((T, W) uint64) and the restart state of a
        lexeme ended at each state ((S,) int32, ``constrain.automata.lexer.lexer_restarts``).
    trie : tuple
        The flat token trie ``(node_byte, node_token, node_end, node_depth, token_next_dup)``.
    max_depth : int
        Above every trie depth.
    out : tuple
        ``(out_tok, out_set, out_lcp)``, (V,) int32 each, written (see above).
    sym_store : tuple
        ``(ss_n, ss_flags, ss_hash, ss_s, ss_tag, ss_trans, table, store)``, the store of
        symbolic sets, kept across walks (they do not depend on the state or
        the parser): set ``j`` has ``ss_n[j]`` configurations ``(ss_s, ss_tag)[j, :n]``,
        flags (1 overflow: configurations were dropped; 2 root: no split at its first byte),
        its successor per byte class (-2 not computed yet, -1 dead); ``table`` indexes sets by
        hash (``numba_tables.rehash_sets_kernel`` rebuilds it when the store grows);
        ``store[0]`` is the number of sets. Set 0 is the overflow sink, used when the store is
        full.
    """
    (ignore, scannable, byte_class, trans, accept_ptr, accept_terms, alive_bits,
     follow_ign, restart) = walk_tables  # fmt: skip
    node_byte, node_token, node_end, node_depth, token_next_dup = trie
    out_tok, out_set, out_lcp = out
    ss_n, ss_flags, ss_hash, ss_s, ss_tag, ss_trans, table, store = sym_store
    num_words = ignore.shape[0]
    any_bits = np.empty(num_words, dtype=np.uint64)
    for w in range(num_words):
        any_bits[w] = scannable[w] | ignore[w]
    num_states = trans.shape[0]
    accepts_ignored = np.zeros(num_states, dtype=np.bool_)
    for q in range(num_states):
        for j in range(accept_ptr[q], accept_ptr[q + 1]):
            if _has(ignore, accept_terms[j]):
                accepts_ignored[q] = True
    t_s = np.empty(ss_s.shape[1], dtype=np.int32)
    t_tag = np.empty(ss_s.shape[1], dtype=np.int64)
    size = 8
    while size < 4 * ss_s.shape[1]:
        size *= 2
    seen_s = np.empty(size, dtype=np.int32)
    seen_tag = np.empty(size, dtype=np.int64)
    seen_stamp = np.zeros(size, dtype=np.int64)
    stamp = 0
    num_sets = store[0]
    if num_sets == 0:
        num_sets = _intern(0, 1, t_s, t_tag, ss_n, ss_flags, ss_hash, ss_s, ss_tag, table, 0) + 1
        ss_trans[0, :] = 0
    t_s[0] = s0
    t_tag[0] = _tag(ROOT, 0, 0, 0)
    root = _intern(1, 2, t_s, t_tag, ss_n, ss_flags, ss_hash, ss_s, ss_tag, table, num_sets)
    if root < 0:
        root = 0
    elif root == num_sets:
        ss_trans[root, :] = -2
        num_sets += 1
    ids = np.zeros(max_depth, dtype=np.int32)
    ids[0] = root
    # the least depth of the nodes visited since the last token written, less one, is the
    # prefix that token shares with the next one (trie order is lexicographic order)
    low = 1
    n_out = 0
    m = node_byte.shape[0]
    i = 1
    while i < m:
        d = node_depth[i]
        if d < low:
            low = d
        c = byte_class[node_byte[i]]
        pid = ids[d - 1]
        nid = ss_trans[pid, c]
        if nid == -2:
            n = 0
            stamp += 1
            over = ss_flags[pid] & 1 != 0
            first = ss_flags[pid] & 2 != 0
            for k in range(ss_n[pid]):
                st = ss_s[pid, k]
                tag = ss_tag[pid, k]
                kind = tag >> 60
                t1 = (tag >> 40) & _FMASK
                t2 = (tag >> 20) & _FMASK
                last = tag & _FMASK
                x = trans[st, c]
                if x >= 0:
                    if kind == ROOT:
                        ok = _alive(x, any_bits, alive_bits)
                    else:
                        ok = _alive(x, follow_ign[last], alive_bits)
                    if ok:
                        n, over = _push(
                            x, tag, t_s, t_tag, n, over, seen_s, seen_tag, seen_stamp, stamp
                        )
                if restart[st] == st or first:
                    continue
                sc = trans[restart[st], c]  # the next lexeme's first byte
                if sc < 0:
                    continue
                # an ignored lexeme ends: the parser has not moved
                if accepts_ignored[st]:
                    if kind == ROOT:
                        ok = _alive(sc, any_bits, alive_bits)
                    else:
                        ok = _alive(sc, follow_ign[last], alive_bits)
                    if ok:
                        n, over = _push(
                            sc, tag, t_s, t_tag, n, over, seen_s, seen_tag, seen_stamp, stamp
                        )
                # a lexeme the parser scans ends
                for j in range(accept_ptr[st], accept_ptr[st + 1]):
                    t = accept_terms[j]
                    if not _has(scannable, t):
                        continue
                    if kind == ROOT:
                        new = _tag(ONE, t, 0, t)
                    elif not _has(follow_ign[last], t):
                        continue
                    elif kind == ONE:
                        new = _tag(TWO, t1, t, t)
                    else:
                        new = _tag(DEEP, t1, t2, t)
                    if _alive(sc, follow_ign[t], alive_bits):
                        n, over = _push(
                            sc, new, t_s, t_tag, n, over, seen_s, seen_tag, seen_stamp, stamp
                        )
            if n == 0 and not over:
                nid = -1
            else:
                nid = _intern(n, 1 if over else 0, t_s, t_tag, ss_n, ss_flags, ss_hash, ss_s,
                              ss_tag, table, num_sets)  # fmt: skip
                if nid < 0:
                    nid = 0
                elif nid == num_sets:
                    ss_trans[nid, :] = -2
                    num_sets += 1
            ss_trans[pid, c] = nid
        if nid < 0:
            i = node_end[i]
            continue
        ids[d] = nid
        tok = node_token[i]
        if tok >= 0:
            lcp = low - 1
            low = max_depth
            while tok >= 0:
                out_tok[n_out] = tok
                out_set[n_out] = nid
                out_lcp[n_out] = lcp
                lcp = d
                n_out += 1
                tok = token_next_dup[tok]
        i += 1
    store[0] = num_sets
    return n_out


@njit(cache=True, nogil=True)
def compact_sets_kernel(
    out_set: np.ndarray,
    n_out: int,
    local: np.ndarray,
    order: np.ndarray,
    ss_n: np.ndarray,
    ss_flags: np.ndarray,
    ss_s: np.ndarray,
    ss_tag: np.ndarray,
    fs_ptr: np.ndarray,
    fs_s: np.ndarray,
    fs_tag: np.ndarray,
    fs_flags: np.ndarray,
) -> tuple[int, int]:
    """Renumber the sets of ``out_set[:n_out]`` from 0 and copy them out of the store.

    Called twice. With an empty ``fs_ptr`` it numbers the distinct sets in order of first
    appearance (``local[j]``: the number of store set ``j``, -1 on entry where unnumbered;
    ``order[f]``: the store set of number ``f``) and returns their count and their total
    configurations. Then, with ``fs_*`` of those sizes, it copies set ``f``'s configurations
    to ``fs_s``/``fs_tag`` from ``fs_ptr[f]`` and its flags to ``fs_flags[f]``, rewrites
    ``out_set`` to the numbers, and sets ``local`` back to -1.
    """
    if fs_ptr.shape[0] == 0:
        nf = 0
        total = 0
        for k in range(n_out):
            j = out_set[k]
            if local[j] < 0:
                local[j] = nf
                order[nf] = j
                nf += 1
                total += ss_n[j]
        return nf, total
    nf = fs_ptr.shape[0] - 1
    fs_ptr[0] = 0
    for f in range(nf):
        j = order[f]
        start = fs_ptr[f]
        for q in range(ss_n[j]):
            fs_s[start + q] = ss_s[j, q]
            fs_tag[start + q] = ss_tag[j, q]
        fs_ptr[f + 1] = start + ss_n[j]
        fs_flags[f] = ss_flags[j]
    for k in range(n_out):
        out_set[k] = local[out_set[k]]
    for f in range(nf):
        local[order[f]] = -1
    return nf, int(fs_ptr[nf])


@njit(cache=True, nogil=True)
def classified_entry_kernel(
    inputs: tuple[Any, ...],
    ignore: np.ndarray,
    exact_scans: bool,
    alive_bits: np.ndarray,
    classes: tuple[Any, ...],
    dec: np.ndarray,
    out: tuple[Any, ...],
) -> int:
    """Sort a lexer state's classified tokens for one build's inputs; return the candidates.

    Per set, with ``R = expected | ignore`` and ``exact1(t) = exact_scans and next_exact[t]``,
    a configuration at lexer state ``x`` makes the token *within* (W) or a *candidate* (C):

    - ``ROOT``: W if ``x`` keeps a terminal of ``R`` alive.
    - ``ONE(t1)``, only if ``t1`` is in ``R``: W if ``exact_scans`` and ``x`` keeps an
      ignored terminal alive, or ``exact1(t1)`` and ``x`` keeps one of ``next_bits[t1]``
      alive; C if not ``exact1(t1)``.
    - ``TWO(t1, t2)``, only if ``t1`` is in ``R``: if ``exact1(t1)``, only where ``t2`` is in
      ``next_bits[t1]``: W if ``x`` keeps an ignored terminal alive, and C; otherwise C.
    - ``DEEP(t1, t2, t)``: C if ``t1`` is in ``R`` and (not ``exact1(t1)`` or ``t2`` in
      ``next_bits[t1]``).
    - an overflowed set: C.

    A token is within if its set has a W, else a candidate if it has a C. ``inputs`` is the
    build's ``(expected, next_bits, next_exact)``, ``classes`` the state's token classes
    ``(out_tok, out_set, out_lcp, fs_ptr, fs_s, fs_tag, fs_flags)`` (``TokenClasses``: the
    tokens in trie order with their set and shared prefix, then the sets as CSR) and ``out``
    the buffers ``(out_w, out_c, out_c_lcp)``: ``out_w`` (pre-zeroed) receives the within
    bitset, ``out_c``/``out_c_lcp`` the candidates in trie order with the prefix each shares
    with the previous one; ``dec`` is (num_sets,) int8 scratch.
    """
    expected, next_bits, next_exact = inputs
    out_tok, out_set, out_lcp, fs_ptr, fs_s, fs_tag, fs_flags = classes
    out_w, out_c, out_c_lcp = out
    num_sets = fs_flags.shape[0]
    n_out = out_tok.shape[0]
    num_words = expected.shape[0]
    bits_r = np.empty(num_words, dtype=np.uint64)
    for w in range(num_words):
        bits_r[w] = expected[w] | ignore[w]
    for f in range(num_sets):
        within = False
        cand = fs_flags[f] & 1 != 0
        for q in range(fs_ptr[f], fs_ptr[f + 1]):
            x = fs_s[q]
            tag = fs_tag[q]
            kind = tag >> 60
            if kind == ROOT:
                if _alive(x, bits_r, alive_bits):
                    within = True
                    break
                continue
            t1 = (tag >> 40) & _FMASK
            if not _has(bits_r, t1):
                continue
            ex1 = exact_scans and next_exact[t1]
            if kind == ONE:
                if exact_scans and _alive(x, ignore, alive_bits):
                    within = True
                    break
                if ex1:
                    if _alive(x, next_bits[t1], alive_bits):
                        within = True
                        break
                else:
                    cand = True
            else:
                t2 = (tag >> 20) & _FMASK
                if ex1 and not _has(next_bits[t1], t2):
                    continue
                if kind == TWO and ex1 and _alive(x, ignore, alive_bits):
                    within = True
                    break
                cand = True
        dec[f] = 2 if within else (1 if cand else 0)
    # consecutive tokens share out_lcp[k] bytes; two candidates share the least of the
    # values between them (the tokens are in lexicographic order)
    nc = 0
    run = 0
    for k in range(n_out):
        lcp = out_lcp[k]
        if lcp < run:
            run = lcp
        v = dec[out_set[k]]
        if v == 2:
            tok = out_tok[k]
            out_w[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
        elif v == 1:
            out_c[nc] = out_tok[k]
            out_c_lcp[nc] = run
            run = 1 << 30
            nc += 1
    return nc
