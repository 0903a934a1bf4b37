"""Matcher kernels: advance lexing/parsing hypotheses byte by byte, and fill token masks.

A matcher state is a small set of *hypotheses* ``(P, s)``: ``P`` an Earley set (the terminals
parsed so far) and ``s`` a lexer state (the bytes of the current, unfinished lexeme; ``s == 0``
means "at a lexeme boundary"). Lexing is non-deterministic: wherever the current lexeme could end,
both "end it here" and "keep going" are followed, which is why ``"list" | "listen"`` followed by
``"ed"`` accepts ``listed`` (no greedy-lexer rejections).

A hypothesis may continue with byte ``b`` if the lexer state after ``b`` can still complete one of
the terminals that ``P`` expects (``alive_bits & set_bits[P]``; ignored terminals always count).
The grammar is reduced (every rule productive), so every surviving hypothesis can be completed to
a sentence: the check is exact, not a heuristic.

Every byte-level simulation goes through :func:`simulate_kernel`, which runs a batch of *jobs*
(a start set of hypotheses and a byte range) in one call with the per-byte step inlined: calls
that pass dozens of arrays cost hundreds of nanoseconds in numba (reference counting), so the
hot loop makes none; only a memo miss calls into the Earley scanner.

Bundles: ``lex = (byte_class, trans, accept_bits, alive_bits, ignore_bits)`` (see
``constrain.automata.lexer``) and the chart arrays of ``constrain.kernels.numba_earley``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from constrain.kernels.numba_earley import ACC, MEMO_MISS, memo_get, memo_scan

__all__ = [
    "STATUS_HYPOTHESES",
    "end_accepting_kernel",
    "fill_mask_kernel",
    "simulate_kernel",
]

STATUS_HYPOTHESES = -4


@njit(cache=True, nogil=True)
def _alive(
    s: int, p: int, alive_bits: np.ndarray, set_bits: np.ndarray, ignore: np.ndarray
) -> bool:
    for w in range(alive_bits.shape[1]):
        if alive_bits[s, w] & (set_bits[p, w] | ignore[w]) != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _push(p: int, s: int, hyp: np.ndarray, n: int) -> int:
    for k in range(n):
        if hyp[0, k] == p and hyp[1, k] == s:
            return n
    if n >= hyp.shape[1]:
        return STATUS_HYPOTHESES
    hyp[0, n] = p
    hyp[1, n] = s
    return n + 1


@njit(cache=True, nogil=True)
def simulate_kernel(
    job_hyp_lo: np.ndarray,
    job_hyp_hi: np.ndarray,
    start_hyp: np.ndarray,
    job_lo: np.ndarray,
    job_hi: np.ndarray,
    data: np.ndarray,
    result: np.ndarray,
    cur: np.ndarray,
    nxt: np.ndarray,
    lex: tuple[Any, ...],
    num_terminals: int,
    memo: np.ndarray,
    par: tuple[Any, ...],
    items: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    counts: np.ndarray,
    scratch: np.ndarray,
    max_set_items: int,
    normalize: bool = False,
) -> int:
    """Run a batch of byte-simulation jobs.

    Job ``j`` starts from the hypotheses ``start_hyp[:, job_hyp_lo[j]:job_hyp_hi[j]]`` and
    consumes ``data[job_lo[j]:job_hi[j]]``.

    Start hypotheses must be *normalised*: a lexeme that could end was already ended (see
    below), so the first byte of a job only continues lexemes. ``result[j]`` receives the
    number of surviving hypotheses (0: rejected). The survivors of the last job are left in
    ``cur[:, :result[-1]]``; with ``normalize`` they are normalised: every hypothesis whose
    lexeme may end is split into the scanned alternatives ``(scan(P, t), 0)`` (``(P, 0)`` for an
    ignored terminal), and kept only if its lexeme can still grow (``cont_bits``). This is what
    lets the token tables treat most tokens as context-independent. ``cur``/``nxt`` are int32
    ``[2, H]`` scratch arrays. Returns 0 or a negative status (capacity, limit), in which case
    the results are void.
    """
    byte_class, trans, accept_bits, alive_bits, ignore = lex[0], lex[1], lex[2], lex[3], lex[4]
    num_words = accept_bits.shape[1]
    for j in range(job_lo.shape[0]):
        n = 0
        for k in range(job_hyp_lo[j], job_hyp_hi[j]):
            cur[0, n] = start_hyp[0, k]
            cur[1, n] = start_hyp[1, k]
            n += 1
        for pos in range(job_lo[j], job_hi[j]):
            c = byte_class[data[pos]]
            s0 = trans[0, c]
            m = 0
            for h in range(n):
                p = cur[0, h]
                s = cur[1, h]
                s2 = trans[s, c]
                if s2 >= 0 and _alive(s2, p, alive_bits, set_bits, ignore):
                    m = _push(p, s2, nxt, m)
                    if m < 0:
                        return m
                if s == 0 or s0 < 0 or pos == job_lo[j]:
                    continue
                for w in range(num_words):
                    bits = accept_bits[s, w] & (set_bits[p, w] | ignore[w])
                    t = w * 64
                    while bits != 0:
                        if bits & np.uint64(1):
                            one = np.uint64(1) << np.uint64(t & 63)
                            if ignore[w] & one and _alive(s0, p, alive_bits, set_bits, ignore):
                                m = _push(p, s0, nxt, m)
                                if m < 0:
                                    return m
                            if set_bits[p, w] & one:
                                q = memo_get(p, t, num_terminals, memo, sets, counts)
                                if q == MEMO_MISS:
                                    q = memo_scan(
                                        p, t, num_terminals, memo, par, items, sets, set_bits,
                                        counts, scratch, max_set_items,
                                    )  # fmt: skip
                                    if q < -1:
                                        return q
                                if q >= 0 and _alive(s0, q, alive_bits, set_bits, ignore):
                                    m = _push(q, s0, nxt, m)
                                    if m < 0:
                                        return m
                        bits = bits >> np.uint64(1)
                        t += 1
            for h in range(m):
                cur[0, h] = nxt[0, h]
                cur[1, h] = nxt[1, h]
            n = m
            if n == 0:
                break
        if normalize and n > 0:
            n = _normalize(
                cur,
                nxt,
                n,
                lex,
                num_terminals,
                memo,
                par,
                items,
                sets,
                set_bits,
                counts,
                scratch,
                max_set_items,
            )
            if n < 0:
                return n
        result[j] = n
    return 0


@njit(cache=True, nogil=True)
def _normalize(
    cur: np.ndarray,
    nxt: np.ndarray,
    n: int,
    lex: tuple[Any, ...],
    num_terminals: int,
    memo: np.ndarray,
    par: tuple[Any, ...],
    items: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    counts: np.ndarray,
    scratch: np.ndarray,
    max_set_items: int,
) -> int:
    """Split ended lexemes of ``cur[:, :n]`` into scanned hypotheses; result back in ``cur``."""
    accept_bits, ignore, cont_bits = lex[2], lex[4], lex[5]
    m = 0
    for h in range(n):
        p = cur[0, h]
        s = cur[1, h]
        if s == 0 or _alive(s, p, cont_bits, set_bits, ignore):
            m = _push(p, s, nxt, m)
            if m < 0:
                return m
        if s == 0:
            continue
        for w in range(accept_bits.shape[1]):
            bits = accept_bits[s, w] & (set_bits[p, w] | ignore[w])
            t = w * 64
            while bits != 0:
                if bits & np.uint64(1):
                    one = np.uint64(1) << np.uint64(t & 63)
                    if ignore[w] & one:
                        m = _push(p, 0, nxt, m)
                        if m < 0:
                            return m
                    if set_bits[p, w] & one:
                        q = memo_get(p, t, num_terminals, memo, sets, counts)
                        if q == MEMO_MISS:
                            q = memo_scan(
                                p, t, num_terminals, memo, par, items, sets, set_bits, counts,
                                scratch, max_set_items,
                            )  # fmt: skip
                            if q < -1:
                                return q
                        if q >= 0:
                            m = _push(q, 0, nxt, m)
                            if m < 0:
                                return m
                bits = bits >> np.uint64(1)
                t += 1
    for h in range(m):
        cur[0, h] = nxt[0, h]
        cur[1, h] = nxt[1, h]
    return m


@njit(cache=True, nogil=True)
def end_accepting_kernel(
    hyp: np.ndarray,
    n_hyp: int,
    lex: tuple[Any, ...],
    num_terminals: int,
    memo: np.ndarray,
    par: tuple[Any, ...],
    items: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    counts: np.ndarray,
    scratch: np.ndarray,
    max_set_items: int,
) -> int:
    """Return 1 if the input so far is a complete sentence, 0 if not, or a negative status."""
    accept_bits, ignore = lex[2], lex[4]
    for h in range(n_hyp):
        p = hyp[0, h]
        s = hyp[1, h]
        if s == 0:
            if sets[ACC, p]:
                return 1
            continue
        for w in range(accept_bits.shape[1]):
            bits = accept_bits[s, w] & (set_bits[p, w] | ignore[w])
            t = w * 64
            while bits != 0:
                if bits & np.uint64(1):
                    one = np.uint64(1) << np.uint64(t & 63)
                    if ignore[w] & one and sets[ACC, p]:
                        return 1
                    if set_bits[p, w] & one:
                        q = memo_get(p, t, num_terminals, memo, sets, counts)
                        if q == MEMO_MISS:
                            q = memo_scan(
                                p, t, num_terminals, memo, par, items, sets, set_bits, counts,
                                scratch, max_set_items,
                            )  # fmt: skip
                            if q < -1:
                                return q
                        if q >= 0 and sets[ACC, q]:
                            return 1
                bits = bits >> np.uint64(1)
                t += 1
    return 0


@njit(cache=True, nogil=True)
def fill_mask_kernel(
    hyp: np.ndarray,
    n_hyp: int,
    entry_ids: np.ndarray,
    w_pool: np.ndarray,
    c_indptr: np.ndarray,
    c_tokens: np.ndarray,
    token_indptr: np.ndarray,
    token_bytes: np.ndarray,
    out_row: np.ndarray,
    cur: np.ndarray,
    nxt: np.ndarray,
    lex: tuple[Any, ...],
    num_terminals: int,
    memo: np.ndarray,
    par: tuple[Any, ...],
    items: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    counts: np.ndarray,
    scratch: np.ndarray,
    max_set_items: int,
) -> int:
    """OR the allowed tokens of every hypothesis into ``out_row`` (uint32 words, pre-zeroed).

    Entry ``entry_ids[h]`` of the token tables holds, for hypothesis ``h``, the tokens that stay
    inside the current lexeme (``w_pool`` row: always allowed) and the candidates that cross a
    lexeme boundary (``c_tokens[c_indptr[e]:c_indptr[e+1]]``), which are checked here against the
    parser by simulating their bytes. Returns 0 or a negative status.
    """
    for h in range(n_hyp):
        e = entry_ids[h]
        for w in range(out_row.shape[0]):
            out_row[w] |= w_pool[e, w]
    total = 0
    for h in range(n_hyp):
        e = entry_ids[h]
        total += c_indptr[e + 1] - c_indptr[e]
    if total == 0:
        return 0
    job_tok = np.empty(total, dtype=np.int32)
    job_hyp = np.empty(total, dtype=np.int32)
    nj = 0
    for h in range(n_hyp):
        e = entry_ids[h]
        for j in range(c_indptr[e], c_indptr[e + 1]):
            tok = c_tokens[j]
            if out_row[tok >> 5] & (np.uint32(1) << np.uint32(tok & 31)) == 0:
                job_tok[nj] = tok
                job_hyp[nj] = h
                nj += 1
    # One job per (hypothesis, candidate); each starts from that single hypothesis.
    job_hyp_lo = np.arange(nj, dtype=np.int64)
    start_hyp = np.empty((2, nj), dtype=np.int32)
    job_lo = np.empty(nj, dtype=np.int64)
    job_hi = np.empty(nj, dtype=np.int64)
    for j in range(nj):
        start_hyp[0, j] = hyp[0, job_hyp[j]]
        start_hyp[1, j] = hyp[1, job_hyp[j]]
        job_lo[j] = token_indptr[job_tok[j]]
        job_hi[j] = token_indptr[job_tok[j] + 1]
    result = np.zeros(nj, dtype=np.int32)
    st = simulate_kernel(
        job_hyp_lo, job_hyp_lo + 1, start_hyp, job_lo, job_hi, token_bytes, result, cur, nxt, lex,
        num_terminals, memo, par, items, sets, set_bits, counts, scratch, max_set_items,
    )  # fmt: skip
    if st < 0:
        return st
    for j in range(nj):
        if result[j] > 0:
            tok = job_tok[j]
            out_row[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
    return 0
