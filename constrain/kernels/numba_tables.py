"""Token-table kernel: split the vocabulary for one (lexer state, allowed terminals) pair.

For a lexer state ``s0`` and the set ``A`` of terminals the parser allows (a bitset), one walk
over the flat token trie (DFS order, ``node_end`` skips a subtree) sorts every token into:

- **within** (bitset ``out_w``): its bytes keep the current lexeme alive. Such a token is allowed
  whatever the parser stack is: it is *context-independent*.
- **candidate** (list ``out_c``): its bytes end the current lexeme somewhere inside the token and
  continue with further lexemes. Whether it is allowed depends on the parser, so the matcher checks
  each candidate at run time. Candidates are pruned with the grammar's FOLLOW sets: after a lexeme
  of terminal ``t`` ends, only terminals in ``FOLLOW(t)`` (and ignored ones) may start, which is a
  sound over-approximation of what the parser will allow.
- everything else is rejected, and its subtree is skipped.

A small fixed number ``K`` of post-split lexer configurations is tracked per trie depth; on
overflow the walk turns conservative (keeps candidates), never wrong.

The walk's inputs and the checks that spare a walk are in
:mod:`constrain.kernels.numba_table_inputs`; where entries are stored and indexed, in
:mod:`constrain.kernels.numba_table_store`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "CONFIGS",
    "build_entry_kernel",
    "rehash_sets_kernel",
    "walk_single_kernel",
]

_K = 8


# configurations per set of the table walk (the set store's row width)
CONFIGS = _K


@njit(cache=True, nogil=True)
def _alive_bits(s: int, bits: np.ndarray, alive_bits: np.ndarray) -> bool:
    for w in range(alive_bits.shape[1]):
        if alive_bits[s, w] & bits[w] != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _add(st: int, bits: np.ndarray, level: int, cfg_s: np.ndarray, cfg_x: np.ndarray,
         cfg_bits: np.ndarray, d: int, n: int) -> int:  # fmt: skip
    """Add configuration (st, bits, level) at depth d; return the new count, -1 on overflow."""
    for k in range(n):
        if cfg_s[d, k] == st and cfg_x[d, k] == level:
            same = True
            for w in range(bits.shape[0]):
                if cfg_bits[d, k, w] != bits[w]:
                    same = False
                    break
            if same:
                return n
    if n >= cfg_s.shape[1]:
        return -1
    cfg_s[d, n] = st
    cfg_x[d, n] = level
    for w in range(bits.shape[0]):
        cfg_bits[d, n, w] = bits[w]
    return n + 1


INEXACT, EXACT_ITEMS, EXACT = 0, 1, 2


@njit(cache=True, nogil=True)
def _intern(
    n: int,
    flags: int,
    inp: int,
    t_s: np.ndarray,
    t_x: np.ndarray,
    t_bits: np.ndarray,
    cs_n: np.ndarray,
    cs_flags: np.ndarray,
    cs_inp: np.ndarray,
    cs_hash: np.ndarray,
    cs_s: np.ndarray,
    cs_x: np.ndarray,
    cs_bits: np.ndarray,
    table: np.ndarray,
    num_sets: int,
) -> int:
    """Return the id of configuration set ``t_*[0, :n]`` with ``flags`` and inputs ``inp``.

    A new set is added with id ``num_sets``; -1 when the set store is full.
    """
    h = (n * 31 + flags) * 1000003 + inp + 1
    for k in range(n):
        h = (h * 1000003 + int(t_s[0, k]) * 7 + int(t_x[0, k])) % 2147483647
        for w in range(t_bits.shape[2]):
            h = (h * 1000003 + int(t_bits[0, k, w] % np.uint64(2147483647))) % 2147483647
    mask = table.shape[0] - 1
    slot = h & mask
    while table[slot] >= 0:
        j = table[slot]
        if cs_hash[j] == h and cs_n[j] == n and cs_flags[j] == flags and cs_inp[j] == inp:
            same = True
            for k in range(n):
                if cs_s[j, k] != t_s[0, k] or cs_x[j, k] != t_x[0, k]:
                    same = False
                    break
                for w in range(t_bits.shape[2]):
                    if cs_bits[j, k, w] != t_bits[0, k, w]:
                        same = False
                        break
                if not same:
                    break
            if same:
                return int(j)
        slot = (slot + 1) & mask
    if num_sets >= cs_n.shape[0]:
        return -1
    j = num_sets
    table[slot] = j
    cs_n[j] = n
    cs_flags[j] = flags
    cs_inp[j] = inp
    cs_hash[j] = h
    for k in range(n):
        cs_s[j, k] = t_s[0, k]
        cs_x[j, k] = t_x[0, k]
        for w in range(t_bits.shape[2]):
            cs_bits[j, k, w] = t_bits[0, k, w]
    return j


@njit(cache=True, nogil=True)
def rehash_sets_kernel(cs_hash: np.ndarray, num_sets: int, table: np.ndarray) -> None:
    """Insert sets ``0 .. num_sets - 1`` into ``table`` (all -1, a power of two) by hash."""
    mask = table.shape[0] - 1
    for j in range(num_sets):
        slot = cs_hash[j] & mask
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = j


@njit(cache=True, nogil=True)
def walk_single_kernel(
    s0: int,
    alive: np.ndarray,
    byte_class: np.ndarray,
    trans: np.ndarray,
    trie: tuple[Any, ...],
    out_w: np.ndarray,
    max_depth: int,
) -> int:
    """Trie walk when no lexeme boundary can occur inside a token: one lexer state per depth.

    Every token whose bytes keep the lexer alive is allowed (``out_w``); there are no candidates.
    ``trie`` is ``(node_byte, node_token, node_end, node_depth, token_next_dup)``;
    ``max_depth`` exceeds every ``node_depth``.
    """
    node_byte, node_token, node_end, node_depth, token_next_dup = trie
    state = np.empty(max_depth, dtype=np.int32)
    state[0] = s0
    m = node_byte.shape[0]
    i = 1
    while i < m:
        d = node_depth[i]
        x = trans[state[d - 1], byte_class[node_byte[i]]]
        if x < 0 or not alive[x]:
            i = node_end[i]
            continue
        state[d] = x
        tok = node_token[i]
        while tok >= 0:
            out_w[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
            tok = token_next_dup[tok]
        i += 1
    return 0


# 314 lines, kept whole (measured): with the successor of a configuration set on a byte class (the
# ~110 lines under ``nid == -2``, run per trie node not yet memoised) as a helper
# (``@njit(inline="always")``), the kernel took 61-73 ms instead of 38-47 ms (+63%, medians
# 69.9 / 42.8 ms) over 30 recorded walks of fresh JSON and SQL compiles on Llama 3.2 (fresh set
# stores each, sum of per-call minima of 3 replays, 5 alternating runs per version, same
# outputs): numba increfs and decrefs the ~25 arrays that helper takes at every call.
@njit(cache=True, nogil=True)
def build_entry_kernel(
    s0: int,
    inputs: tuple[Any, ...],
    inp: int,
    walk_tables: tuple[Any, ...],
    trie: tuple[Any, ...],
    out: tuple[Any, ...],
    max_depth: int,
    set_store: tuple[Any, ...],
) -> int:
    """Fill ``out_w`` (uint32 bitset, pre-zeroed) and ``out_c``; return the candidate count.

    The walk tracks, per trie depth, up to ``K`` lexer *configurations* ``(state, allowed
    terminals, level)``. The root is ``(s0, expected | ignore, EXACT_ITEMS)``. A configuration
    continues its lexeme byte by byte; where its lexeme can end it also starts a new one:

    - after an ignored terminal the parser has not moved: allowed set and level are kept;
    - after a terminal the parser scans, from an exact configuration, the scan succeeds whatever
      the parser stack is. From the root's Earley set the items are known, so when every item
      expecting ``t`` has a non-nullable rest, the next expected set is exactly
      ``next_bits[t]`` (``EXACT``); otherwise only a continuation made of ignored lexemes stays
      exact (``(state, ignore)``). Everything else gets the FOLLOW union and is ``INEXACT``.

    A token reached by an exact configuration is context-independent (``out_w``); one reached
    only by inexact ones is a candidate the matcher checks (``out_c``). Splits at the first byte
    are skipped: matcher hypotheses are normalised, so a lexeme that could end before the token
    already ended in a sibling hypothesis.

    Parameters
    ----------
    s0 : int
        Lexer state of the hypothesis (0 = at a lexeme boundary).
    inputs : tuple
        The build inputs ``(expected, next_bits, next_exact)`` (``entry_inputs_kernel``):
    expected : (W,) uint64
        Terminals the parser expects now.
    next_bits : (T, W) uint64
        Per terminal ``t``: the terminals expected right after scanning ``t`` from the current
        Earley set (valid where ``next_exact[t]``).
    next_exact : (T,) bool
        Whether ``next_bits[t]`` is exact.
    inp : int
        An id of the build inputs, the same for equal inputs across the walks that share the
        ``set_store``.
    walk_tables : tuple
        The grammar's tables for walks (one structure per ``MaskTables``): ``(ignore,
        scannable, exact_scans, byte_class, trans, accept_bits, accept_ptr, accept_terms,
        alive_bits, follow_bits, restart)``, the lexer's arrays (``constrain.automata.lexer``)
        and:
    ignore : (W,) uint64
        Ignored terminals (may occur between any two lexemes).
    scannable : (W,) uint64
        Terminals that occur in some rule (the parser can scan them).
    exact_scans : bool
        False when some ignored terminal also occurs in rules; scans are then never exact.
    accept_ptr, accept_terms : (S + 1,) int64, (A,) int32
        The terminals each lexer state accepts, as CSR in ascending order (``accept_bits`` as
        lists: the walk visits a state's few accepted terminals instead of testing 64 bits a
        word).
    trie : tuple
        The flat token trie walked, ``(node_byte, node_token, node_end, node_depth,
        token_next_dup)`` (the vocabulary's or a slice's).
    out : tuple
        ``(out_w, out_c, out_lcp, info)``, the outputs:
    out_w : (ceil(V/32),) uint32
        Receives the context-independent allowed tokens.
    out_c : (V,) int32
        Receives the candidate token ids (duplicates of a byte string included), in trie order.
    out_lcp : (V,) int32
        Receives, per candidate, the length of the byte prefix shared with the previous one.
    info : (1,) int64
        Receives 1 when no lexeme can end inside a token for these expected terminals (whatever
        ``s0``: the walk was :func:`walk_single_kernel` over the states in ``alive_bits`` that
        keep an expected or ignored terminal alive), else 0.
    max_depth : int
        Above every ``node_depth`` (the longest token's length plus one).
    set_store : tuple
        ``(cs_n, cs_flags, cs_inp, cs_hash, cs_s, cs_x, cs_bits, cs_trans, table, store)``, the
        store of configuration sets and their transitions (a lazily built DFA), kept across
        walks: set ``j`` has ``cs_n[j]`` configurations ``(cs_s, cs_bits, cs_x)[j, :n]``, flags
        (1 overflow, 2 root: no split at its first byte, 4 exact-alive), the inputs id when it
        holds a root-lineage configuration (whose transitions read the inputs) else -1, a hash,
        and its successor per byte class (-2 not computed yet, -1 dead); ``table`` indexes the
        sets by hash (open addressing, a power of two at least twice the capacity); ``store[0]``
        is the number of sets, set 0 the overflow sink. At least 4096 sets of room on entry.
    """
    expected, next_bits, next_exact = inputs
    (ignore, scannable, exact_scans, byte_class, trans, accept_bits, accept_ptr, accept_terms,
     alive_bits, follow_bits, restart) = walk_tables  # fmt: skip
    node_byte, node_token, node_end, node_depth, token_next_dup = trie
    out_w, out_c, out_lcp, info = out
    cs_n, cs_flags, cs_inp, cs_hash, cs_s, cs_x, cs_bits, cs_trans, table, store = set_store
    num_words = expected.shape[0]
    cfg_n = np.zeros(max_depth, dtype=np.int32)
    cfg_s = np.zeros((max_depth, _K), dtype=np.int32)
    cfg_x = np.zeros((max_depth, _K), dtype=np.int8)
    cfg_bits = np.zeros((max_depth, _K, num_words), dtype=np.uint64)
    acc = np.zeros(num_words, dtype=np.uint64)
    tmp = np.zeros(num_words, dtype=np.uint64)
    for w in range(num_words):
        tmp[w] = expected[w] | ignore[w]
    cfg_n[0] = _add(s0, tmp, EXACT_ITEMS, cfg_s, cfg_x, cfg_bits, 0, 0)
    # Root-lineage configurations (EXACT_ITEMS) always carry the root's bits (``root_bits``):
    # their liveness and split possibility per lexer state are memoised (-1 unknown), computed
    # at the states the walk meets (a pass over every state cost ~25 us on 4k-state lexers).
    num_states = trans.shape[0]
    num_terms = next_exact.shape[0]
    root_bits = tmp.copy()  # tmp is scratch below
    # a lexeme of terminal t can be followed by another one inside the same token only if
    # something may come after t (exactly known, or by FOLLOW, or an ignored terminal)
    t_cont = np.zeros(num_terms, dtype=np.bool_)
    for t in range(num_terms):
        for w in range(num_words):
            if follow_bits[t, w] != 0 or (next_exact[t] and next_bits[t, w] != 0):
                t_cont[t] = True
    # a split is possible somewhere iff some state accepts a root terminal that may continue
    any_split = False
    for j in range(accept_terms.shape[0]):
        t = accept_terms[j]
        bit = np.uint64(1) << np.uint64(t & 63)
        if root_bits[t >> 6] & bit != 0 and (ignore[t >> 6] & bit != 0 or t_cont[t]):
            any_split = True
            break
    info[0] = 0 if any_split else 1
    if not any_split:
        # no lexeme can end and be followed inside a token: every allowed token is exact
        alive = np.zeros(num_states, dtype=np.bool_)
        for q in range(num_states):
            for w in range(num_words):
                if alive_bits[q, w] & root_bits[w] != 0:
                    alive[q] = True
                    break
        return walk_single_kernel(s0, alive, byte_class, trans, trie, out_w, max_depth)
    root_alive = np.full(num_states, -1, dtype=np.int8)
    root_split = np.full(num_states, -1, dtype=np.int8)
    # The configuration set at a trie node depends only on the parent's set and the byte
    # class, so sets are interned and their transitions memoised: a lazily built DFA over
    # configuration sets, kept across walks (a set's transitions read the build inputs only
    # through its root-lineage configurations, and such sets carry the inputs id), so the walk
    # costs one table lookup per node once it is warm.
    t_s = np.zeros((1, _K), dtype=np.int32)
    t_x = np.zeros((1, _K), dtype=np.int8)
    t_bits = np.zeros((1, _K, num_words), dtype=np.uint64)
    num_sets = store[0]
    if num_sets == 0:
        # set 0 is the sink used when the store is full: no configurations, overflow (every
        # token below becomes a candidate, checked exactly at run time)
        num_sets = _intern(0, 1, -1, t_s, t_x, t_bits, cs_n, cs_flags, cs_inp, cs_hash, cs_s,
                           cs_x, cs_bits, table, 0) + 1  # fmt: skip
        cs_trans[0, :] = -2
    # the root set: the configuration of depth 0, marked so that its first byte does not split
    t_s[0, 0] = cfg_s[0, 0]
    t_x[0, 0] = cfg_x[0, 0]
    for w in range(num_words):
        t_bits[0, 0, w] = cfg_bits[0, 0, w]
    root = _intern(1, 2, inp, t_s, t_x, t_bits, cs_n, cs_flags, cs_inp, cs_hash, cs_s, cs_x,
                   cs_bits, table, num_sets)  # fmt: skip
    if root < 0:  # the store is full (the caller keeps room): every token a candidate
        root = 0
    elif root == num_sets:
        cs_trans[root, :] = -2
        num_sets += 1
    ids = np.zeros(max_depth, dtype=np.int32)
    ids[0] = root
    path = np.zeros(max_depth, dtype=np.int32)
    prev_path = np.zeros(max_depth, dtype=np.int32)
    prev_depth = 0
    nc = 0
    m = node_byte.shape[0]
    i = 1
    while i < m:
        d = node_depth[i]
        path[d] = i
        c = byte_class[node_byte[i]]
        pid = ids[d - 1]
        nid = cs_trans[pid, c]
        if nid == -2:
            n = 0
            over = cs_flags[pid] & 1 != 0
            first = cs_flags[pid] & 2 != 0
            exact_alive = False
            for k in range(cs_n[pid]):
                st = cs_s[pid, k]
                level = cs_x[pid, k]
                bits = cs_bits[pid, k]
                x = trans[st, c]
                root = level == EXACT_ITEMS
                ok = False
                if x >= 0:
                    if root:
                        ra = root_alive[x]
                        if ra < 0:
                            ra = 0
                            for w in range(num_words):
                                if alive_bits[x, w] & root_bits[w] != 0:
                                    ra = 1
                                    break
                            root_alive[x] = ra
                        ok = ra == 1
                    else:
                        ok = _alive_bits(x, bits, alive_bits)
                if ok:
                    r = _add(x, bits, level, t_s, t_x, t_bits, 0, n)
                    if r < 0:
                        over = True
                    else:
                        n = r
                        exact_alive = exact_alive or level != INEXACT
                if restart[st] == st or first:
                    continue
                # the next lexeme's first byte: from 0, or from a greedy lexer's restart state
                sc = trans[restart[st], c]
                if sc < 0:
                    continue
                if root:
                    rs = root_split[st]
                    if rs < 0:
                        rs = 0
                        for j in range(accept_ptr[st], accept_ptr[st + 1]):
                            t = accept_terms[j]
                            bit = np.uint64(1) << np.uint64(t & 63)
                            if root_bits[t >> 6] & bit != 0 and (
                                ignore[t >> 6] & bit != 0 or t_cont[t]
                            ):
                                rs = 1
                                break
                        root_split[st] = rs
                    if rs == 0:
                        continue
                ign = False
                scan = False
                exact = level != INEXACT and exact_scans
                for w in range(num_words):
                    a = accept_bits[st, w] & bits[w]
                    if a & ignore[w] != 0:
                        ign = True
                    acc[w] = a & (bits[w] & ~ignore[w] if exact else scannable[w])
                    if acc[w] != 0:
                        scan = True
                if ign and _alive_bits(sc, bits, alive_bits):
                    r = _add(sc, bits, level, t_s, t_x, t_bits, 0, n)
                    if r < 0:
                        over = True
                    else:
                        n = r
                        exact_alive = exact_alive or level != INEXACT
                if not scan:
                    continue
                if exact and _alive_bits(sc, ignore, alive_bits):
                    r = _add(sc, ignore, EXACT, t_s, t_x, t_bits, 0, n)
                    if r < 0:
                        over = True
                    else:
                        n = r
                        exact_alive = True
                # per scanned terminal (those st accepts, from the CSR): the exact next expected
                # set, else FOLLOW(t)
                for j in range(accept_ptr[st], accept_ptr[st + 1]):
                    t = accept_terms[j]
                    if acc[t >> 6] & (np.uint64(1) << np.uint64(t & 63)) == 0:
                        continue
                    if exact and level == EXACT_ITEMS and next_exact[t]:
                        for v in range(num_words):
                            tmp[v] = next_bits[t, v] | ignore[v]
                        lvl = EXACT
                    else:
                        for v in range(num_words):
                            tmp[v] = follow_bits[t, v] | ignore[v]
                        lvl = INEXACT
                    if _alive_bits(sc, tmp, alive_bits):
                        r = _add(sc, tmp, lvl, t_s, t_x, t_bits, 0, n)
                        if r < 0:
                            over = True
                        else:
                            n = r
                            exact_alive = exact_alive or lvl != INEXACT
            if n == 0 and not over:
                nid = -1
            else:
                flags = (1 if over else 0) | (4 if exact_alive else 0)
                set_inp = -1
                for k in range(n):
                    if t_x[0, k] == EXACT_ITEMS:
                        set_inp = inp
                        break
                nid = _intern(n, flags, set_inp, t_s, t_x, t_bits, cs_n, cs_flags, cs_inp,
                              cs_hash, cs_s, cs_x, cs_bits, table, num_sets)  # fmt: skip
                if nid < 0:
                    nid = 0
                elif nid == num_sets:
                    cs_trans[nid, :] = -2
                    num_sets += 1
            cs_trans[pid, c] = nid
        if nid < 0:
            i = node_end[i]
            continue
        ids[d] = nid
        tok = node_token[i]
        if cs_flags[nid] & 4:
            while tok >= 0:
                out_w[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
                tok = token_next_dup[tok]
        elif tok >= 0:
            lcp = 0
            while lcp < d and lcp < prev_depth and path[lcp + 1] == prev_path[lcp + 1]:
                lcp += 1
            for k in range(1, d + 1):
                prev_path[k] = path[k]
            prev_depth = d
            while tok >= 0:
                out_c[nc] = tok
                out_lcp[nc] = lcp
                lcp = d
                nc += 1
                tok = token_next_dup[tok]
        i += 1
    store[0] = num_sets
    return nc
