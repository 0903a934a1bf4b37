"""Numba kernels of stage 3 over finished DFAs: products and lexer analyses.

Products of two DFAs (``product_kernel``: intersections, differences), a DFA as NFA material
(``range_edges_kernel``), and the lexer's analyses: continuation bits, row ids for the initial
partition of its minimisation, the closure CSR and bounded classes of lexer states. NFA to DFA
is in :mod:`constrain.kernels.numba_subsets`, minimisation in
:mod:`constrain.kernels.numba_minimize`.

Every kernel works on flat numpy arrays and scalars only (no ``numba.typed`` containers, no
strings). The public wrappers live in :mod:`constrain.automata` (``product``, ``byte_dfa``,
``lexer``); they fix the dtypes (``int32`` states and edges, ``int64`` offsets) and validate the
inputs. Hashing keeps every intermediate below 2**52, so results do not depend on integer
wrap-around and are identical with ``NUMBA_DISABLE_JIT=1``. Naive oracles: ``tests/reference.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from constrain.kernels.numba_subsets import HASH_MOD, HASH_MUL

__all__ = [
    "bounded_classes_kernel",
    "closure_csr_kernel",
    "continuation_bits_kernel",
    "product_kernel",
    "range_edges_kernel",
    "row_ids_kernel",
]


@njit(cache=True, nogil=True)
def product_kernel(trans_a, trans_b, col_a, col_b, b_sink, max_states, dense_pairs):  # type: ignore[no-untyped-def]
    """Product construction of two partial DFAs over joint byte classes (reachable pairs only).

    Semantics as a loop, with ``-1`` the dead state of either side::

        pairs = [(0, 0)]
        for a, b in pairs:                       # grows while it is walked
            for c in range(C):
                na = trans_a[a, col_a[c]]
                nb = trans_b[b, col_b[c]] if b >= 0 else -1
                if na < 0 or (nb < 0 and not b_sink):
                    continue                     # dead pair
                add (na, nb) to pairs if new; trans[pairs.index((a, b)), c] = its index

    Parameters
    ----------
    trans_a : (SA, CA) int32
        First DFA; state 0 initial, -1 dead.
    trans_b : (SB, CB) int32
        Second DFA.
    col_a, col_b : (C,) int32
        Class of each side for each joint class.
    b_sink : bool
        Keep pairs whose second component is dead (-1 then stands for a non-accepting sink, as
        needed for the difference ``L(a) - L(b)``); otherwise such pairs are dead
        (intersection).
    max_states : int
        Stop as soon as more pairs would be needed.
    dense_pairs : int
        Pairs are found in a hash table, then in a table of all ``SA * (SB + 1)`` pairs once
        they fill a 64th of it, if it has at most this many entries (int32 each); the
        result is the same.

    Returns
    -------
    status : int
        0 on success, 1 when ``max_states`` was exceeded.
    num_states : int
        Number of pairs ``S`` (``max_states + 1`` on failure).
    trans : (S, C) int32
        Transitions between pairs, -1 dead; pair 0 is ``(0, 0)``.
    pair_a, pair_b : (S,) int32
        The components of each pair (``pair_b`` may be -1 when ``b_sink``).
    """
    C = col_a.shape[0]
    sb1 = np.int64(trans_b.shape[0] + 1)
    cap = 16
    trans = np.full((cap, C), -1, np.int32)
    pair_a = np.zeros(cap, np.int32)
    pair_b = np.zeros(cap, np.int32)
    keys = np.zeros(cap, np.int64)
    # Pairs are looked up in a hash table, then, once they fill a 64th of all the pairs
    # (when those are at most ``dense_pairs``), in a table of all pairs: a product that stops
    # early never pays for a large table.
    total = trans_a.shape[0] * sb1
    dense = False
    index = np.full(0, -1, np.int32)
    hcap = 64
    htab = np.full(hcap, -1, np.int32)
    keys[0] = 1  # the pair (0, 0)
    htab[((keys[0] % HASH_MOD) * HASH_MUL % HASH_MOD) & (hcap - 1)] = 0
    n = 1
    s = 0
    while s < n:
        a = pair_a[s]
        b = pair_b[s]
        for c in range(C):
            na = trans_a[a, col_a[c]]
            if na < 0:
                continue
            nb = -1
            if b >= 0:
                nb = trans_b[b, col_b[c]]
            if nb < 0 and not b_sink:
                continue
            key = np.int64(na) * sb1 + nb + 1
            slot = np.int64(0)
            d = -1
            if dense:
                d = index[key]
            else:
                slot = ((key % HASH_MOD) * HASH_MUL % HASH_MOD) & (hcap - 1)
                while htab[slot] >= 0:
                    if keys[htab[slot]] == key:
                        d = htab[slot]
                        break
                    slot = (slot + 1) & (hcap - 1)
            if d < 0:
                if n >= max_states:
                    return 1, n + 1, trans[:0], pair_a[:0], pair_b[:0]
                if n == cap:
                    cap *= 2
                    grown = np.full((cap, C), -1, np.int32)
                    grown[:n] = trans[:n]
                    trans = grown
                    grown_a = np.zeros(cap, np.int32)
                    grown_a[:n] = pair_a[:n]
                    pair_a = grown_a
                    grown_b = np.zeros(cap, np.int32)
                    grown_b[:n] = pair_b[:n]
                    pair_b = grown_b
                    grown_keys = np.zeros(cap, np.int64)
                    grown_keys[:n] = keys[:n]
                    keys = grown_keys
                pair_a[n] = na
                pair_b[n] = nb
                keys[n] = key
                d = n
                n += 1
                if dense:
                    index[key] = d
                else:
                    htab[slot] = d
                    if 2 * n > hcap and 64 * n >= total and total <= dense_pairs:
                        index = np.full(total, -1, np.int32)
                        for q in range(n):
                            index[keys[q]] = q
                        dense = True
                    elif 2 * n > hcap:
                        hcap *= 2
                        htab = np.full(hcap, -1, np.int32)
                        for q in range(n):
                            slot = ((keys[q] % HASH_MOD) * HASH_MUL % HASH_MOD) & (hcap - 1)
                            while htab[slot] >= 0:
                                slot = (slot + 1) & (hcap - 1)
                            htab[slot] = q
            trans[s, c] = d
        s += 1
    return 0, n, trans[:n], pair_a[:n], pair_b[:n]


@njit(cache=True, nogil=True)
def continuation_bits_kernel(trans, alive_bits, out):  # type: ignore[no-untyped-def]
    """OR into ``out[s]`` the ``alive_bits`` of every successor of state ``s`` (any byte class).

    Reference: ``for c: out[trans[:, c] >= 0] |= alive_bits[trans[trans[:, c] >= 0, c]]``.
    """
    for s in range(trans.shape[0]):
        for c in range(trans.shape[1]):
            x = trans[s, c]
            if x >= 0:
                for w in range(out.shape[1]):
                    out[s, w] |= alive_bits[x, w]


@njit(cache=True, nogil=True)
def range_edges_kernel(trans, byte_class, out):  # type: ignore[no-untyped-def]
    """List a DFA's transitions as byte-range edges, one per state and run of one class.

    A run is a maximal range of consecutive bytes of one class.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions, -1 = dead.
    byte_class : (256,) uint8
        Class of each byte.
    out : (4, E) int32
        Receives ``src, lo, hi, dst`` in state then byte order; with ``E == 0`` nothing is
        written and only the count is returned.

    Returns
    -------
    int
        The number of edges.
    """
    run_lo = np.empty(256, np.int64)
    run_hi = np.empty(256, np.int64)
    runs = 0
    for b in range(256):
        if b == 0 or byte_class[b] != byte_class[b - 1]:
            run_lo[runs] = b
            runs += 1
        run_hi[runs - 1] = b
    fill = out.shape[1] > 0
    n = 0
    for s in range(trans.shape[0]):
        for r in range(runs):
            d = trans[s, byte_class[run_lo[r]]]
            if d >= 0:
                if fill:
                    out[0, n] = s
                    out[1, n] = run_lo[r]
                    out[2, n] = run_hi[r]
                    out[3, n] = d
                n += 1
    return n


@njit(cache=True, nogil=True)
def row_ids_kernel(rows, ids):  # type: ignore[no-untyped-def]
    """Give the distinct rows of ``rows`` (S, W) uint64 ids by first appearance.

    Parameters
    ----------
    rows : (S, W) uint64
        The rows.
    ids : (S,) int32
        Output: equal rows get equal ids, ``0 .. n - 1`` in order of first appearance.

    Returns
    -------
    int
        The number of distinct rows ``n``.
    """
    num = rows.shape[0]
    width = rows.shape[1]
    hcap = 16
    while hcap < 2 * num:
        hcap *= 2
    table = np.full(hcap, -1, np.int64)  # a row index per slot
    n = 0
    for q in range(num):
        h = np.int64(width)
        for w in range(width):
            h = (h * 31 + np.int64(rows[q, w] % np.uint64(HASH_MOD))) % HASH_MOD
        slot = (h * HASH_MUL % HASH_MOD) & (hcap - 1)
        found = -1
        while table[slot] >= 0:
            r = table[slot]
            same = True
            for w in range(width):
                if rows[r, w] != rows[q, w]:
                    same = False
                    break
            if same:
                found = ids[r]
                break
            slot = (slot + 1) & (hcap - 1)
        if found < 0:
            table[slot] = q
            found = n
            n += 1
        ids[q] = found
    return n


_SIG_MASK = (1 << 40) - 1


@njit(cache=True, nogil=True, inline="always")
def _signature_hash(lptr, lcls, ldst, cls, s):  # type: ignore[no-untyped-def]
    # below 2**60 throughout: no wrap-around, the same with and without the JIT
    h = np.int64(cls[s]) + 1
    for j in range(lptr[s], lptr[s + 1]):
        h = ((h ^ (np.int64(lcls[j]) << 20 | np.int64(cls[ldst[j]]))) * HASH_MUL) & _SIG_MASK
    return h ^ (h >> 23)


@njit(cache=True, nogil=True, inline="always")
def _same_signature(lptr, lcls, ldst, cls, a, b):  # type: ignore[no-untyped-def]
    if cls[a] != cls[b] or lptr[a + 1] - lptr[a] != lptr[b + 1] - lptr[b]:
        return False
    d = lptr[b] - lptr[a]
    for j in range(lptr[a], lptr[a + 1]):
        if lcls[j] != lcls[j + d] or cls[ldst[j]] != cls[ldst[j + d]]:
            return False
    return True


@njit(cache=True, nogil=True)
def closure_csr_kernel(trans, starts, local, max_states):  # type: ignore[no-untyped-def]
    """Return the states reachable from ``starts`` and their live transitions, renumbered.

    ``local`` (S,) int32 is all -1 on entry and on return (scratch). Returns ``(states, lptr,
    lcls, ldst)``: ``states[i]`` is the lexer state of local state ``i`` (the distinct
    ``starts`` first, then breadth-first order), and local state ``i``'s live transitions are
    the pairs ``(lcls[j], ldst[j])`` for ``j`` in ``lptr[i]:lptr[i + 1]`` (class, local
    target), by class. When more than ``max_states`` states are reachable, the search stops
    there and ``states`` is empty.
    """
    n = trans.shape[0]
    num_classes = trans.shape[1]
    # the search stops once past max_states, each popped state adding at most num_classes
    states = np.empty(min(n, max_states + num_classes + starts.shape[0]), np.int32)
    m = 0
    for k in range(starts.shape[0]):
        if local[starts[k]] < 0:
            local[starts[k]] = m
            states[m] = starts[k]
            m += 1
    nnz = 0
    i = 0
    while i < m and m <= max_states:
        s = states[i]
        for c in range(num_classes):
            t = trans[s, c]
            if t >= 0:
                nnz += 1
                if local[t] < 0:
                    local[t] = m
                    states[m] = t
                    m += 1
        i += 1
    if m > max_states:
        for i in range(m):
            local[states[i]] = -1
        return states[:0].copy(), np.zeros(1, np.int64), states[:0].copy(), states[:0].copy()
    lptr = np.zeros(m + 1, np.int64)
    lcls = np.empty(nnz, np.int32)
    ldst = np.empty(nnz, np.int32)
    j = 0
    for i in range(m):
        s = states[i]
        for c in range(num_classes):
            t = trans[s, c]
            if t >= 0:
                lcls[j] = c
                ldst[j] = local[t]
                j += 1
        lptr[i + 1] = j
    for i in range(m):
        local[states[i]] = -1
    return states[:m].copy(), lptr, lcls, ldst


@njit(cache=True, nogil=True)
def bounded_classes_kernel(lptr, lcls, ldst, cls, num_blocks, depth):  # type: ignore[no-untyped-def]
    """Refine ``cls`` to the classes of states that agree on every string of ``depth`` bytes.

    Moore's refinement, ``depth`` rounds, each round re-signing only the states with a successor
    whose class changed in the round before (a block whose other members kept their successors
    keeps its id; of a block re-signed whole, the largest part keeps it). A minimal DFA's states
    are all distinguishable, but a counted repetition (``[^"]{0,30000}``) puts its distinctions
    ``30000`` bytes deep: states closer than ``depth`` to none of them fall into one class.

    Parameters
    ----------
    lptr, lcls, ldst : CSR
        The live transitions ``(class, target)`` of each state, by class, over a set of states
        closed under transitions (:func:`closure_csr_kernel`).
    cls : (S,) int32
        On entry the classes of the states' outputs, ``0 .. num_blocks - 1`` (states with equal
        outputs share one); on return the classes after ``depth`` rounds (ids below ``S``).
    num_blocks : int
        The number of classes on entry.
    depth : int
        The number of rounds (string length).

    Returns
    -------
    int
        The number of classes on return.
    """
    n = lptr.shape[0] - 1
    # predecessors as CSR (a state once per edge; the stamps below drop repeats)
    pptr = np.zeros(n + 1, np.int64)
    for j in range(ldst.shape[0]):
        pptr[ldst[j] + 1] += 1
    for s in range(n):
        pptr[s + 1] += pptr[s]
    preds = np.empty(pptr[n], np.int32)
    fill = pptr[:n].copy()
    for s in range(n):
        for j in range(lptr[s], lptr[s + 1]):
            t = ldst[j]
            preds[fill[t]] = s
            fill[t] += 1
    size = np.zeros(n, np.int64)
    for s in range(n):
        size[cls[s]] += 1
    changed = np.arange(n).astype(np.int32)
    num_changed = n
    mark = np.full(n, -1, np.int64)
    cand = np.empty(n, np.int32)
    gid = np.empty(n, np.int32)  # group of each candidate
    lead = np.empty(n, np.int32)  # first state of each group
    gsize = np.empty(n, np.int64)
    new_id = np.empty(n, np.int32)
    in_block = np.zeros(n, np.int64)  # candidates per block (reset after each round)
    best = np.full(n, -1, np.int32)  # largest group of a block re-signed whole
    cap = 16
    while cap < 2 * n:
        cap *= 2
    table = np.full(cap, -1, np.int32)  # a group per slot
    for step in range(depth):
        m = 0
        for k in range(num_changed):
            t = changed[k]
            for j in range(pptr[t], pptr[t + 1]):
                p = preds[j]
                if mark[p] != step:
                    mark[p] = step
                    cand[m] = p
                    m += 1
        if m == 0:
            break
        mask = 16
        while mask < 2 * m:
            mask *= 2
        mask -= 1
        num_groups = 0
        for k in range(m):
            s = cand[k]
            slot = _signature_hash(lptr, lcls, ldst, cls, s) & mask
            g = -1
            while table[slot] >= 0:
                q = table[slot]
                if _same_signature(lptr, lcls, ldst, cls, lead[q], s):
                    g = q
                    break
                slot = (slot + 1) & mask
            if g < 0:
                g = num_groups
                num_groups += 1
                table[slot] = g
                lead[g] = s
                gsize[g] = 0
            gid[k] = g
            gsize[g] += 1
        table[: mask + 1] = -1
        for g in range(num_groups):
            in_block[cls[lead[g]]] += gsize[g]
        for g in range(num_groups):
            b = cls[lead[g]]
            if in_block[b] == size[b] and (best[b] < 0 or gsize[g] > gsize[best[b]]):
                best[b] = g
        # the other members of a block keep its id (their signatures did not change and they
        # all share one, which no re-signed member has: one of its successors moved)
        for g in range(num_groups):
            b = cls[lead[g]]
            if best[b] == g:
                new_id[g] = b
            else:
                new_id[g] = num_blocks
                size[num_blocks] = gsize[g]
                size[b] -= gsize[g]
                num_blocks += 1
        for g in range(num_groups):
            b = cls[lead[g]]
            in_block[b] = 0
            best[b] = -1
        num_changed = 0
        for k in range(m):
            s = cand[k]
            g = new_id[gid[k]]
            if g != cls[s]:
                cls[s] = g
                changed[num_changed] = s
                num_changed += 1
        if num_changed == 0:
            break
    return num_blocks
