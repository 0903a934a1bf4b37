"""Matcher kernels: advance lexing/parsing hypotheses byte by byte, and fill token masks.

A matcher state is a small set of *hypotheses* ``(P, s)``: ``P`` an Earley set (the terminals
parsed so far) and ``s`` a lexer state (the bytes of the current, unfinished lexeme; a boundary
state, ``restart[s] == s``, means "at a lexeme boundary": 0, or a restart state of a greedy
lexer). Lexing is non-deterministic: wherever the current lexeme could end, both "end it here"
and "keep going" are followed, which is why ``"list" | "listen"`` followed by ``"ed"`` accepts
``listed``; a greedy grammar's restart states allow the end only before a byte that no terminal
could take next.

A hypothesis may continue with byte ``b`` if the lexer state after ``b`` can still complete one of
the terminals that ``P`` expects (``alive_bits & set_bits[P]``; ignored terminals always count).
The grammar is reduced (every rule productive), so every surviving hypothesis can be completed to
a sentence: the check is exact, not a heuristic.

Every byte-level simulation goes through :func:`simulate_kernel`, which runs a batch of *jobs*
(a start set of hypotheses and a byte range) in one call with the per-byte step inlined: calls
that pass dozens of arrays cost hundreds of nanoseconds in numba (reference counting), so the
hot loop makes none; only a memo miss calls into the Earley scanner.

Kernel parameters are grouped into plain tuples of arrays (``kernels/README.md``, section 5):

- ``grammar`` (per compiled grammar, ``CompiledGrammar.match_arrays``): ``(lex, par, vocab)``
  with ``lex = (byte_class, trans, accept_bits, alive_bits, ignore_bits, cont_bits, restart,
  inner_ends)``
  (see ``constrain.automata.lexer``; ``restart[s]`` is the boundary state a lexeme ended at
  ``s`` restarts from: 0, or under greedy lexing a copy of 0 without the bytes that would have
  continued the lexeme; a boundary state is its own restart; ``inner_ends`` the terminals a
  lexeme may end as inside a token, all but the token-aligned ones), ``par`` the parser tables of
  ``numba_earley`` (with ``num_terminals`` and ``max_set_items``; the Earley kernels get
  ``par`` alone) and ``vocab = (token_indptr, token_bytes, eos_ids)``;
- ``chart`` (per matcher): the Earley chart and scan memo of ``numba_earley``;
- ``tables`` (per token-table snapshot, ``TableSnapshot.arrays``): ``(w_pool, w_row, w_indptr,
  w_extra, c_indptr, c_tokens, c_lcp, index)``, ``index`` as :func:`find_entry` reads it;
- ``fill_work`` (per matcher, the fill's buffers): ``(kbuf, stack, stack_n, big, rm_n, rm_key,
  rm_rows, rm_next)``; ``step_work`` (per matcher, the accept's buffers): ``(job, no_lcp,
  result, stack, stack_n, cur, hist, hist_hyp, hist_len)``;
- ``jobs`` (per :func:`simulate_kernel` call): ``(hyp_lo, hyp_hi, lo, hi, lcp)``.

Tuples, not named tuples: numba's dispatcher types a plain tuple argument on its C fast path,
a named tuple through Python (measured on 12 arrays: 1.0 µs vs 1.8 µs per call; through a
compiled entry, ``constrain.kernels.entry``, both 0.75 µs), and the matcher calls a kernel per
token.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from constrain.kernels.numba_earley import (
    ACC,
    MEMO_MISS,
    UID,
    memo_get,
    memo_scan,
    memo_union,
    scan_kernel_items,
)
from constrain.kernels.numba_table_store import find_entry

__all__ = [
    "MEMO_HYPS",
    "STATUS_ENTRY_MISS",
    "STATUS_HISTORY",
    "accept_token_kernel",
    "fill_row_kernel",
    "STATUS_HYPOTHESES",
    "end_accepting_kernel",
    "fill_mask_kernel",
    "simulate_kernel",
]

STATUS_HYPOTHESES = -4
STATUS_ENTRY_MISS = -6
STATUS_HISTORY = -7
MEMO_HYPS = 8  # rows are memoised for states of at most this many hypotheses

# columns of a matcher's history rows (one per accepted step, for rollback)
H_OFF, H_NUM, H_SETS, H_ITEMS, H_TERM = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def _alive(
    s: int, p: int, alive_bits: np.ndarray, set_bits: np.ndarray, ignore: np.ndarray
) -> bool:
    for w in range(alive_bits.shape[1]):
        if alive_bits[s, w] & (set_bits[p, w] | ignore[w]) != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _push3(p: int, s: int, stack: np.ndarray, d: int, n: int) -> int:
    for k in range(n):
        if stack[d, 0, k] == p and stack[d, 1, k] == s:
            return n
    if n >= stack.shape[2]:
        return STATUS_HYPOTHESES
    stack[d, 0, n] = p
    stack[d, 1, n] = s
    return n + 1


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
    jobs: tuple[Any, ...],
    start_hyp: np.ndarray,
    data: np.ndarray,
    result: np.ndarray,
    stack: np.ndarray,
    stack_n: np.ndarray,
    out_hyp: np.ndarray,
    strict: bool,
    normalize: bool,
    grammar: tuple[Any, ...],
    chart: tuple[Any, ...],
) -> int:
    """Run a batch of byte-simulation jobs, sharing the work of common prefixes.

    ``jobs`` is ``(job_hyp_lo, job_hyp_hi, job_lo, job_hi, job_lcp)``, int64 arrays of one
    length. Job ``j`` starts from the hypotheses ``start_hyp[:, job_hyp_lo[j]:job_hyp_hi[j]]`` and
    consumes ``data[job_lo[j]:job_hi[j]]``. When a job has the same start as the previous one and
    its first ``job_lcp[j]`` bytes equal the previous job's, the hypothesis sets computed for
    that prefix are reused (jobs are token candidates in trie order, so neighbours share
    prefixes). ``stack`` (int32 ``[D, 2, H]``) holds one hypothesis set per byte depth; with
    ``D == 2`` it is used as a ping-pong buffer and ``job_lcp`` must be 0.

    Start hypotheses must be *normalised*: a lexeme that could end was already ended, so the
    first byte of a job only continues lexemes. ``result[j]`` receives the number of surviving
    hypotheses (0: rejected; -1: more than ``H`` hypotheses and ``strict`` is false, the caller
    must rerun the job with a larger ``H``). The survivors of the last job are copied to
    ``out_hyp``, normalised if ``normalize``: every hypothesis whose lexeme may end is split into
    the scanned alternatives ``(scan(P, t), 0)`` (``(P, 0)`` for an ignored terminal) and kept
    only if its lexeme can still grow (``cont_bits``); this is what lets the token tables treat
    most tokens as context-independent. Returns 0 or a negative status (capacity, limit, or
    hypotheses when ``strict``), in which case the results are void.
    """
    job_hyp_lo, job_hyp_hi, job_lo, job_hi, job_lcp = jobs
    byte_class, trans, accept_bits, alive_bits, ignore, _, restart, inner = grammar[0]
    par = grammar[1]
    num_terminals = par[9]
    sets, set_bits, counts, memo = chart[1], chart[2], chart[3], chart[5]
    num_words = accept_bits.shape[1]
    depth = stack.shape[0]
    cap = stack.shape[2]
    valid = -1
    dead = 1 << 30
    for j in range(job_lo.shape[0]):
        share = job_lcp[j]
        if j > 0 and (job_hyp_lo[j] != job_hyp_lo[j - 1] or job_hyp_hi[j] != job_hyp_hi[j - 1]):
            share = 0
        if share == 0:
            valid = -1
            dead = 1 << 30
        else:
            if share < valid:
                valid = share
            if dead <= valid:
                result[j] = 0
                continue
            dead = 1 << 30
        if valid < 0:
            n = 0
            for k in range(job_hyp_lo[j], job_hyp_hi[j]):
                if n >= cap:
                    return STATUS_HYPOTHESES
                stack[0, 0, n] = start_hyp[0, k]
                stack[0, 1, n] = start_hyp[1, k]
                n += 1
            stack_n[0] = n
            valid = 0
        length = job_hi[j] - job_lo[j]
        overflow = False
        for lvl in range(valid, length):
            src = lvl % depth
            dst = (lvl + 1) % depth
            c = byte_class[data[job_lo[j] + lvl]]
            m = 0
            for h in range(stack_n[src]):
                p = stack[src, 0, h]
                s = stack[src, 1, h]
                s2 = trans[s, c]
                if s2 >= 0 and _alive(s2, p, alive_bits, set_bits, ignore):
                    m = _push3(p, s2, stack, dst, m)
                    if m < 0:
                        break
                r = restart[s]
                if r == s or lvl == 0:
                    continue
                s0 = trans[r, c]  # the next lexeme's first byte (none: greedy, or no terminal)
                if s0 < 0:
                    continue
                for w in range(num_words):
                    # (a token-aligned terminal ends only at a token's end: _normalize)
                    bits = accept_bits[s, w] & (set_bits[p, w] | ignore[w]) & inner[w]
                    t = w * 64
                    while bits != 0 and m >= 0:
                        if bits & np.uint64(1):
                            one = np.uint64(1) << np.uint64(t & 63)
                            if ignore[w] & one and _alive(s0, p, alive_bits, set_bits, ignore):
                                m = _push3(p, s0, stack, dst, m)
                            if m >= 0 and set_bits[p, w] & one:
                                q = memo_get(p, t, num_terminals, memo, sets, counts)
                                if q == MEMO_MISS:
                                    q = memo_scan(p, t, par, chart)
                                    if q < -1:
                                        return q
                                if q >= 0 and _alive(s0, q, alive_bits, set_bits, ignore):
                                    m = _push3(q, s0, stack, dst, m)
                        bits = bits >> np.uint64(1)
                        t += 1
                if m < 0:
                    break
            if m < 0:
                if strict:
                    return m
                overflow = True
                valid = -1
                break
            stack_n[dst] = m
            valid = lvl + 1
            if m == 0:
                dead = lvl + 1
                break
        if overflow:
            result[j] = -1
            continue
        n = stack_n[length % depth] if valid == length else 0
        result[j] = n
        if j == job_lo.shape[0] - 1 and 0 < n <= out_hyp.shape[1]:
            top = length % depth
            for h in range(n):
                out_hyp[0, h] = stack[top, 0, h]
                out_hyp[1, h] = stack[top, 1, h]
            if normalize:
                n = _normalize(out_hyp, stack[(length + 1) % depth], n, grammar, chart)
                if n < 0:
                    return n
                result[j] = n
    return 0


@njit(cache=True, nogil=True)
def _normalize(
    cur: np.ndarray, nxt: np.ndarray, n: int, grammar: tuple[Any, ...], chart: tuple[Any, ...]
) -> int:
    """Split ended lexemes of ``cur[:, :n]`` into scanned hypotheses; result back in ``cur``."""
    lex, par = grammar[0], grammar[1]
    accept_bits, ignore, cont_bits, restart = lex[2], lex[4], lex[5], lex[6]
    sets, set_bits = chart[1], chart[2]
    m = 0
    for h in range(n):
        p = cur[0, h]
        s = cur[1, h]
        r = restart[s]
        if r == s or _alive(s, p, cont_bits, set_bits, ignore):
            m = _push(p, s, nxt, m)
            if m < 0:
                return m
        if r == s:
            continue
        for w in range(accept_bits.shape[1]):
            bits = accept_bits[s, w] & (set_bits[p, w] | ignore[w])
            t = w * 64
            while bits != 0:
                if bits & np.uint64(1):
                    one = np.uint64(1) << np.uint64(t & 63)
                    # (a greedy restart r != 0 keeps a parse only if it may end here or a
                    # terminal it expects can start at r: one byte of look-ahead)
                    if ignore[w] & one and (
                        r == 0 or sets[ACC, p] or _alive(r, p, cont_bits, set_bits, ignore)
                    ):
                        m = _push(p, r, nxt, m)
                        if m < 0:
                            return m
                    if set_bits[p, w] & one:
                        q = memo_scan(p, t, par, chart)
                        if q < -1:
                            return q
                        if q >= 0 and (
                            r == 0 or sets[ACC, q] or _alive(r, q, cont_bits, set_bits, ignore)
                        ):
                            m = _push(q, r, nxt, m)
                            if m < 0:
                                return m
                bits = bits >> np.uint64(1)
                t += 1
    # one hypothesis per lexer state: merge the Earley sets of hypotheses that share it
    n_out = 0
    for h in range(m):
        p = nxt[0, h]
        s = nxt[1, h]
        merged = False
        for k in range(n_out):
            if cur[1, k] == s:
                q = memo_union(cur[0, k], p, chart)
                if q < 0:
                    return q
                cur[0, k] = q
                merged = True
                break
        if not merged:
            cur[0, n_out] = p
            cur[1, n_out] = s
            n_out += 1
    return n_out


@njit(cache=True, nogil=True)
def end_accepting_kernel(
    hyp: np.ndarray, n_hyp: int, grammar: tuple[Any, ...], chart: tuple[Any, ...]
) -> int:
    """Return 1 if the input so far is a complete sentence, 0 if not, or a negative status."""
    lex, par = grammar[0], grammar[1]
    accept_bits, ignore, restart = lex[2], lex[4], lex[6]
    sets, set_bits = chart[1], chart[2]
    for h in range(n_hyp):
        p = hyp[0, h]
        s = hyp[1, h]
        if restart[s] == s:  # a boundary
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
                        q = memo_scan(p, t, par, chart)
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
    out_row: np.ndarray,
    grammar: tuple[Any, ...],
    tables: tuple[Any, ...],
    chart: tuple[Any, ...],
    fill_work: tuple[Any, ...],
) -> int:
    """OR the allowed tokens of every hypothesis into ``out_row`` (uint32 words, pre-zeroed).

    Entry ``entry_ids[h]`` of the token ``tables`` holds, for hypothesis ``h``, the tokens that
    stay context-independent (always allowed: row ``w_row[e]`` of ``w_pool`` unless negative, and
    the tokens ``w_extra[w_indptr[e]:w_indptr[e+1]]``) and the candidates whose validity depends
    on the parser (``c_tokens[c_indptr[e]:c_indptr[e+1]]``, in trie order, with ``c_lcp`` the
    common prefix length with the previous candidate), which are checked here by simulating their
    bytes, sharing the work of common prefixes. Of ``fill_work``, ``stack`` is int32
    ``[D, 2, H]`` with ``D`` above the longest token (``stack_n`` its counts); ``big`` is int32
    ``[2, 2, H_max]`` for candidates with more than ``H`` hypotheses. Returns a negative
    status, else 1 if the input so far is a complete sentence (the caller then allows EOS) and
    0 if not.

    An ``entry_ids[h]`` below 0 (the array is read, never written) is looked up here, by the
    scan kernel of the hypothesis's Earley set and its lexer state, in the tables' ``index``
    (see ``numba_table_store.find_entry``); ``STATUS_ENTRY_MISS`` when one is not there (the caller
    then builds the entry and calls again with explicit ids). ``kbuf`` is int32 scratch for
    kernels.
    """
    w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp, index = tables
    kbuf, stack, stack_n, big = fill_work[0], fill_work[1], fill_work[2], fill_work[3]
    token_indptr, token_bytes = grammar[2][0], grammar[2][1]
    items, sets = chart[0], chart[1]
    # the entries found here go to a copy: ``entry_ids`` is only read (the caller passes the
    # same all -1 array every time, without resetting it)
    given = entry_ids
    entry_ids = np.empty(n_hyp, dtype=np.int32)
    for h in range(n_hyp):
        entry_ids[h] = given[h]
        if entry_ids[h] < 0:
            k = scan_kernel_items(hyp[0, h], items, sets, grammar[1][2], kbuf)
            if k < 0:
                return STATUS_ENTRY_MISS
            e = find_entry(hyp[1, h], kbuf, k, index)
            if e < 0:
                return STATUS_ENTRY_MISS
            entry_ids[h] = e
    for h in range(n_hyp):
        e = entry_ids[h]
        r = w_row[e]
        if r >= 0:
            for w in range(out_row.shape[0]):
                out_row[w] |= w_pool[r, w]
        for j in range(w_indptr[e], w_indptr[e + 1]):
            tok = w_extra[j]
            out_row[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
    total = 0
    for h in range(n_hyp):
        e = entry_ids[h]
        total += c_indptr[e + 1] - c_indptr[e]
    if total == 0:
        return end_accepting_kernel(hyp, n_hyp, grammar, chart)
    job_tok = np.empty(total, dtype=np.int32)
    hyp_lo = np.empty(total, dtype=np.int64)
    lo = np.empty(total, dtype=np.int64)
    hi = np.empty(total, dtype=np.int64)
    lcp = np.empty(total, dtype=np.int64)
    nj = 0
    for h in range(n_hyp):
        e = entry_ids[h]
        run = 0
        for j in range(c_indptr[e], c_indptr[e + 1]):
            # the common prefix with the last *kept* candidate is the running minimum of the
            # neighbour LCPs (candidates are in lexicographic order)
            run = 0 if j == c_indptr[e] else min(run, c_lcp[j])
            tok = c_tokens[j]
            if out_row[tok >> 5] & (np.uint32(1) << np.uint32(tok & 31)):
                continue
            job_tok[nj] = tok
            hyp_lo[nj] = h
            lo[nj] = token_indptr[tok]
            hi[nj] = token_indptr[tok + 1]
            lcp[nj] = run
            run = 1 << 30
            nj += 1
    result = np.zeros(nj, dtype=np.int32)
    out = np.empty((2, 1), dtype=np.int32)
    hyp_lo, lo, hi, lcp = hyp_lo[:nj], lo[:nj], hi[:nj], lcp[:nj]
    st = simulate_kernel(
        (hyp_lo, hyp_lo + 1, lo, hi, lcp), hyp, token_bytes, result, stack, stack_n, out, False,
        False, grammar, chart,
    )  # fmt: skip
    if st < 0:
        return st
    redo = 0
    for j in range(nj):
        if result[j] < 0:
            redo += 1
    if redo:
        # candidates with more hypotheses than the shared stack holds: rerun one by one
        r_idx = np.empty(redo, dtype=np.int64)
        k = 0
        for j in range(nj):
            if result[j] < 0:
                r_idx[k] = j
                k += 1
        one = np.zeros(1, dtype=np.int32)
        zero = np.zeros(1, dtype=np.int64)
        big_n = np.zeros(2, dtype=np.int32)
        for k in range(redo):
            j = r_idx[k]
            job = (hyp_lo[j : j + 1], hyp_lo[j : j + 1] + 1, lo[j : j + 1], hi[j : j + 1], zero)
            st = simulate_kernel(job, hyp, token_bytes, one, big, big_n, out, True, False,
                                 grammar, chart)  # fmt: skip
            if st < 0:
                return st
            result[j] = one[0]
    for j in range(nj):
        if result[j] > 0:
            tok = job_tok[j]
            out_row[tok >> 5] |= np.uint32(1) << np.uint32(tok & 31)
    return end_accepting_kernel(hyp, n_hyp, grammar, chart)


@njit(cache=True, nogil=True)
def accept_token_kernel(
    tok: int,
    hyp: np.ndarray,
    n_hyp: int,
    grammar: tuple[Any, ...],
    chart: tuple[Any, ...],
    step_work: tuple[Any, ...],
) -> int:
    """Advance the hypotheses ``hyp[:, :n_hyp]`` over token ``tok``'s bytes, in place.

    Returns the new number of hypotheses (the state is then advanced and the previous one pushed
    on the history: ``hist[k] = (offset in hist_hyp, count, chart sets, chart items, 0)``,
    ``hist_len = [rows, hist_hyp columns used]``), 0 when the token is rejected (state unchanged),
    or a negative status: ``STATUS_HISTORY`` (grow the history, retry) or one of
    :func:`simulate_kernel`'s.

    A single hypothesis ``(P, s)`` whose lexeme stays alive through the token without any allowed
    terminal ending inside it or at its end (no scan, no split) moves to ``(P, walk(s, token))``
    directly; everything else goes through :func:`simulate_kernel`. ``step_work`` holds the
    buffers ``(job, no_lcp, result, stack, stack_n, cur, hist, hist_hyp, hist_len)``.
    """
    job, no_lcp, result, stack, stack_n, cur, hist, hist_hyp, hist_len = step_work
    token_indptr, token_bytes = grammar[2][0], grammar[2][1]
    set_bits, counts = chart[2], chart[3]
    rows, used = hist_len[0], hist_len[1]
    if rows >= hist.shape[0] or used + n_hyp > hist_hyp.shape[1]:
        return STATUS_HISTORY
    start, end = token_indptr[tok], token_indptr[tok + 1]
    if start == end:
        return 0
    saved_sets, saved_items = counts[0], counts[1]
    n_new = -1
    if n_hyp == 1:
        byte_class, trans, accept_bits, alive_bits, ignore, _, _, _ = grammar[0]
        p = hyp[0, 0]
        s = hyp[1, 0]
        fast = True
        for k in range(start, end):
            s = trans[s, byte_class[token_bytes[k]]]
            if s < 0:
                fast = False
                break
            for w in range(accept_bits.shape[1]):
                if accept_bits[s, w] & (set_bits[p, w] | ignore[w]) != 0:
                    fast = False
                    break
            if not fast:
                break
        if fast and _alive(s, p, alive_bits, set_bits, ignore):
            cur[0, 0] = p
            cur[1, 0] = s
            n_new = 1
    if n_new < 0:
        job[0, 0] = 0
        job[1, 0] = n_hyp
        job[2, 0] = start
        job[3, 0] = end
        st = simulate_kernel(
            (job[0], job[1], job[2], job[3], no_lcp), hyp, token_bytes, result, stack, stack_n,
            cur, True, True, grammar, chart,
        )  # fmt: skip
        if st < 0:
            return st
        n_new = result[0]
        if n_new <= 0:
            return 0
    hist[rows, H_OFF] = used
    hist[rows, H_NUM] = n_hyp
    hist[rows, H_SETS] = saved_sets
    hist[rows, H_ITEMS] = saved_items
    hist[rows, H_TERM] = 0
    for h in range(n_hyp):
        hist_hyp[0, used + h] = hyp[0, h]
        hist_hyp[1, used + h] = hyp[1, h]
    hist_len[0] = rows + 1
    hist_len[1] = used + n_hyp
    for h in range(n_new):
        hyp[0, h] = cur[0, h]
        hyp[1, h] = cur[1, h]
    return int(n_new)


@njit(cache=True, nogil=True)
def fill_row_kernel(
    hyp: np.ndarray,
    n_hyp: int,
    entry_ids: np.ndarray,
    out_row: np.ndarray,
    grammar: tuple[Any, ...],
    tables: tuple[Any, ...],
    chart: tuple[Any, ...],
    fill_work: tuple[Any, ...],
) -> int:
    """Write the whole mask row of the hypotheses into ``out_row`` (EOS bits included).

    The row is a function of the hypotheses ``(uid of the Earley set, lexer state)`` alone
    (sets never change once built, uids are never reused), so the last ``rm_n.shape[0]`` rows
    are memoised (``rm_n[k]`` hypotheses, ``rm_key[k]`` their (uid, state) pairs, ``rm_rows[k]``
    the row; ``rm_n[k] = -1`` for an empty slot, ``rm_next`` the slot written next; the last four
    arrays of ``fill_work``): inside a JSON
    string or a long identifier the hypotheses repeat token after token. Otherwise the row is
    zeroed and filled by :func:`fill_mask_kernel` (same arguments and statuses; the caller retries
    on a negative status), EOS bits are set when the input so far is complete, and the row is
    memoised. Returns 0 (filled), 2 (memo hit) or a negative status.
    """
    rm_n, rm_key, rm_rows, rm_next = fill_work[4], fill_work[5], fill_work[6], fill_work[7]
    eos_ids = grammar[2][2]
    uid_row = chart[1][UID]
    if n_hyp <= MEMO_HYPS:
        for k in range(rm_n.shape[0]):
            if rm_n[k] != n_hyp:
                continue
            same = True
            for h in range(n_hyp):
                if rm_key[k, 2 * h] != uid_row[hyp[0, h]] or rm_key[k, 2 * h + 1] != hyp[1, h]:
                    same = False
                    break
            if same:
                for w in range(out_row.shape[0]):
                    out_row[w] = rm_rows[k, w]
                return 2
    for w in range(out_row.shape[0]):
        out_row[w] = 0
    res = fill_mask_kernel(hyp, n_hyp, entry_ids, out_row, grammar, tables, chart, fill_work)
    if res < 0:
        return res
    if res == 1:
        for j in range(eos_ids.shape[0]):
            e = eos_ids[j]
            if e < 32 * out_row.shape[0]:
                out_row[e >> 5] |= np.uint32(1) << np.uint32(e & 31)
    if n_hyp <= MEMO_HYPS:
        k = rm_next[0]
        rm_next[0] = (k + 1) % rm_n.shape[0]
        rm_n[k] = n_hyp
        for h in range(n_hyp):
            rm_key[k, 2 * h] = uid_row[hyp[0, h]]
            rm_key[k, 2 * h + 1] = hyp[1, h]
        for w in range(out_row.shape[0]):
            rm_rows[k, w] = out_row[w]
    return 0
