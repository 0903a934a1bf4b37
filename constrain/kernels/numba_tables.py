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
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["build_entry_kernel"]

_K = 8


@njit(cache=True, nogil=True)
def _alive_bits(s: int, bits: np.ndarray, alive_bits: np.ndarray) -> bool:
    for w in range(alive_bits.shape[1]):
        if alive_bits[s, w] & bits[w] != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _follow_union(
    acc: np.ndarray, follow_bits: np.ndarray, ignore: np.ndarray, out: np.ndarray
) -> bool:
    """Set ``out`` to the union of FOLLOW(t) over the terminals t in ``acc``, plus ignore."""
    found = False
    for w in range(out.shape[0]):
        out[w] = ignore[w]
    for w in range(acc.shape[0]):
        bits = acc[w]
        t = w * 64
        while bits != 0:
            if bits & np.uint64(1):
                found = True
                for v in range(out.shape[0]):
                    out[v] |= follow_bits[t, v]
            bits = bits >> np.uint64(1)
            t += 1
    return found


@njit(cache=True, nogil=True)
def _add(st: int, bits: np.ndarray, exact: bool, cfg_s: np.ndarray, cfg_x: np.ndarray,
         cfg_bits: np.ndarray, d: int, n: int) -> int:  # fmt: skip
    """Add configuration (st, bits, exact) at depth d; return the new count, -1 on overflow."""
    for k in range(n):
        if cfg_s[d, k] == st and cfg_x[d, k] == exact:
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
    cfg_x[d, n] = exact
    for w in range(bits.shape[0]):
        cfg_bits[d, n, w] = bits[w]
    return n + 1


@njit(cache=True, nogil=True)
def build_entry_kernel(
    s0: int,
    expected: np.ndarray,
    ignore: np.ndarray,
    scannable: np.ndarray,
    byte_class: np.ndarray,
    trans: np.ndarray,
    accept_bits: np.ndarray,
    alive_bits: np.ndarray,
    follow_bits: np.ndarray,
    node_byte: np.ndarray,
    node_token: np.ndarray,
    node_end: np.ndarray,
    node_depth: np.ndarray,
    token_next_dup: np.ndarray,
    out_w: np.ndarray,
    out_c: np.ndarray,
) -> int:
    """Fill ``out_w`` (uint32 bitset, pre-zeroed) and ``out_c``; return the candidate count.

    The walk tracks, per trie depth, up to ``K`` lexer *configurations* ``(state, allowed
    terminals, exact)``. The root has the exact configuration ``(s0, expected | ignore)``. A
    configuration continues its lexeme byte by byte; where its lexeme can end it also starts a new
    one: after an ignored terminal the parser has not moved, so the allowed set and exactness are
    kept; after a terminal the parser scans, the allowed set becomes the FOLLOW union and the
    configuration is inexact. A token reached by an exact configuration is context-independent
    (``out_w``); one reached only by inexact ones is a candidate (``out_c``).

    Parameters
    ----------
    s0 : int
        Lexer state of the hypothesis (0 = at a lexeme boundary).
    expected : (W,) uint64
        Terminals the parser expects now.
    ignore : (W,) uint64
        Ignored terminals (may occur between any two lexemes).
    scannable : (W,) uint64
        Terminals that occur in some rule (the parser can scan them).
    out_w : (ceil(V/32),) uint32
        Receives the context-independent allowed tokens.
    out_c : (V,) int32
        Receives the candidate token ids (duplicates of a byte string included).
    """
    num_words = expected.shape[0]
    max_depth = 1
    for i in range(node_depth.shape[0]):
        if node_depth[i] + 1 > max_depth:
            max_depth = node_depth[i] + 1
    cfg_n = np.zeros(max_depth, dtype=np.int32)
    cfg_over = np.zeros(max_depth, dtype=np.bool_)
    cfg_s = np.zeros((max_depth, _K), dtype=np.int32)
    cfg_x = np.zeros((max_depth, _K), dtype=np.bool_)
    cfg_bits = np.zeros((max_depth, _K, num_words), dtype=np.uint64)
    acc = np.zeros(num_words, dtype=np.uint64)
    tmp = np.zeros(num_words, dtype=np.uint64)
    for w in range(num_words):
        tmp[w] = expected[w] | ignore[w]
    cfg_n[0] = _add(s0, tmp, True, cfg_s, cfg_x, cfg_bits, 0, 0)
    nc = 0
    m = node_byte.shape[0]
    i = 1
    while i < m:
        d = node_depth[i]
        c = byte_class[node_byte[i]]
        sc = trans[0, c]
        n = 0
        over = cfg_over[d - 1]
        exact_alive = False
        for k in range(cfg_n[d - 1]):
            st = cfg_s[d - 1, k]
            exact = cfg_x[d - 1, k]
            bits = cfg_bits[d - 1, k]
            x = trans[st, c]
            if x >= 0 and _alive_bits(x, bits, alive_bits):
                r = _add(x, bits, exact, cfg_s, cfg_x, cfg_bits, d, n)
                if r < 0:
                    over = True
                else:
                    n = r
                    exact_alive = exact_alive or exact
            if st == 0 or sc < 0 or d == 1:
                # the hypothesis is normalised: a lexeme that could end before this token
                # already ended in a sibling hypothesis
                continue
            ign = False
            scan = False
            for w in range(num_words):
                a = accept_bits[st, w] & bits[w]
                if a & ignore[w] != 0:
                    ign = True
                acc[w] = a & (expected[w] if exact else scannable[w])
                if acc[w] != 0:
                    scan = True
            if ign and _alive_bits(sc, bits, alive_bits):
                r = _add(sc, bits, exact, cfg_s, cfg_x, cfg_bits, d, n)
                if r < 0:
                    over = True
                else:
                    n = r
                    exact_alive = exact_alive or exact
            if scan and _follow_union(acc, follow_bits, ignore, tmp):
                if _alive_bits(sc, tmp, alive_bits):
                    r = _add(sc, tmp, False, cfg_s, cfg_x, cfg_bits, d, n)
                    if r < 0:
                        over = True
                    else:
                        n = r
        cfg_n[d] = n
        cfg_over[d] = over
        tok = node_token[i]
        if exact_alive:
            while tok >= 0:
                out_w[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
                tok = token_next_dup[tok]
        elif n > 0 or over:
            while tok >= 0:
                out_c[nc] = tok
                nc += 1
                tok = token_next_dup[tok]
        if n == 0 and not over:
            i = node_end[i]
        else:
            i += 1
    return nc
