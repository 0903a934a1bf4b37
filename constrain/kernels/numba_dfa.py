"""Numba kernels of stage 3: NFA liveness, subset construction, DFA products and minimisation.

Every kernel works on flat numpy arrays and scalars only (no ``numba.typed`` containers, no
strings). The public wrappers live in :mod:`constrain.automata.dfa`; they fix the dtypes
(``int32`` states and edges, ``int64`` offsets) and validate the inputs. Kernels whose output
size is unknown in advance (the subset construction) grow their own buffers and return them.
Hashing keeps every intermediate below 2**52, so results do not depend on integer wrap-around
and are identical with ``NUMBA_DISABLE_JIT=1``. Naive oracles: ``tests/reference.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_HASH_MOD = 2147483647
_HASH_MUL = 1000003


@njit(cache=True, nogil=True)
def nfa_csr_kernel(num_states, src, lo, hi, dst, eps_src, eps_dst, tag, live):  # type: ignore[no-untyped-def]
    """Prepare an NFA for :func:`determinize_kernel`: byte classes and edges by source state.

    Parameters
    ----------
    num_states : int
        Number of NFA states ``N``.
    src, lo, hi, dst : (E,) int32
        Byte edges ``src --[lo..hi]--> dst``.
    eps_src, eps_dst : (F,) int32
        Epsilon edges.
    tag : (N,) int32
        Terminal accepted in each state, -1 for none.
    live : (N,) bool
        States that reach a final state.

    Returns
    -------
    byte_class : (256,) int64
        Byte to class id: the classes are the byte intervals between edge boundaries.
    num_classes : int
    bptr : (N + 1,) int64
        CSR offsets of the byte edges by source (edges in their original order within a source).
    bcls_lo, bcls_hi, bdst : (E,) int32
        Each edge's first and last class, and its target, in CSR order.
    eptr : (N + 1,) int64
        CSR offsets of the epsilon edges by source.
    edst : (F,) int32
        Epsilon targets in CSR order.
    keep : (N,) bool
        States a subset stores: live, and with a byte edge or accepting.
    """
    boundary = np.zeros(257, np.bool_)
    for e in range(src.shape[0]):
        boundary[lo[e]] = True
        boundary[hi[e] + 1] = True
    byte_class = np.empty(256, np.int64)
    c = -1 if boundary[0] else 0
    for b in range(256):
        if boundary[b]:
            c += 1
        byte_class[b] = c
    num_classes = c + 1
    bptr = np.zeros(num_states + 1, np.int64)
    for e in range(src.shape[0]):
        bptr[src[e] + 1] += 1
    for q in range(num_states):
        bptr[q + 1] += bptr[q]
    fill = bptr[:num_states].copy()
    bcls_lo = np.empty(src.shape[0], np.int32)
    bcls_hi = np.empty(src.shape[0], np.int32)
    bdst = np.empty(src.shape[0], np.int32)
    for e in range(src.shape[0]):
        i = fill[src[e]]
        fill[src[e]] = i + 1
        bcls_lo[i] = byte_class[lo[e]]
        bcls_hi[i] = byte_class[hi[e]]
        bdst[i] = dst[e]
    eptr = np.zeros(num_states + 1, np.int64)
    for e in range(eps_src.shape[0]):
        eptr[eps_src[e] + 1] += 1
    for q in range(num_states):
        eptr[q + 1] += eptr[q]
    fill = eptr[:num_states].copy()
    edst = np.empty(eps_src.shape[0], np.int32)
    for e in range(eps_src.shape[0]):
        i = fill[eps_src[e]]
        fill[eps_src[e]] = i + 1
        edst[i] = eps_dst[e]
    keep = np.empty(num_states, np.bool_)
    for q in range(num_states):
        keep[q] = live[q] and (bptr[q + 1] > bptr[q] or tag[q] >= 0)
    return byte_class, num_classes, bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep


@njit(cache=True, nogil=True)
def nfa_live_kernel(src, dst, finals, live):  # type: ignore[no-untyped-def]
    """Mark the NFA states from which a final state is reachable.

    Parameters
    ----------
    src, dst : (E,) int32
        All edges (byte and epsilon) of the NFA.
    finals : (F,) int32
        Final states.
    live : (N,) bool
        Output, all False on entry; ``live[q]`` is set when ``q`` reaches a final state.
    """
    n = live.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    for e in range(src.shape[0]):
        indptr[dst[e] + 1] += 1
    for q in range(n):
        indptr[q + 1] += indptr[q]
    fill = indptr[:n].copy()
    pred = np.empty(src.shape[0], np.int32)
    for e in range(src.shape[0]):
        d = dst[e]
        pred[fill[d]] = src[e]
        fill[d] += 1
    stack = np.empty(n, np.int32)
    top = 0
    for f in finals:
        if not live[f]:
            live[f] = True
            stack[top] = f
            top += 1
    while top > 0:
        top -= 1
        q = stack[top]
        for i in range(indptr[q], indptr[q + 1]):
            p = pred[i]
            if not live[p]:
                live[p] = True
                stack[top] = p
                top += 1


@njit(cache=True, nogil=True, inline="always")
def _closure_kernel(stack, nseed, eptr, edst, keep, live, mark, gen, members):  # type: ignore[no-untyped-def]
    """Epsilon-close the seeds ``stack[:nseed]`` (already marked); write kept states to members."""
    k = 0
    top = nseed
    while top > 0:
        top -= 1
        m = stack[top]
        if keep[m]:
            members[k] = m
            k += 1
        for e in range(eptr[m], eptr[m + 1]):
            t = edst[e]
            if live[t] and mark[t] != gen:
                mark[t] = gen
                stack[top] = t
                top += 1
    if k < 24:
        for i in range(1, k):
            v = members[i]
            j = i - 1
            while j >= 0 and members[j] > v:
                members[j + 1] = members[j]
                j -= 1
            members[j + 1] = v
    else:
        members[:k] = np.sort(members[:k])
    return k


@njit(cache=True, nogil=True, inline="always")
def _hash_kernel(members, k):  # type: ignore[no-untyped-def]
    h = np.int64(k)
    for i in range(k):
        h = (h * _HASH_MUL + np.int64(members[i]) + 1) % _HASH_MOD
    return h


@njit(cache=True, nogil=True)
def determinize_kernel(  # type: ignore[no-untyped-def]
    bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep, live, start, num_classes, max_states, keep_start
):
    """Subset construction over byte classes, keeping only live NFA states in each subset.

    Parameters
    ----------
    bptr : (N + 1,) int64
        CSR offsets of the byte edges by source state.
    bcls_lo, bcls_hi : (E,) int32
        Each byte edge covers the byte classes ``bcls_lo[e] .. bcls_hi[e]``.
    bdst : (E,) int32
        Target of each byte edge.
    eptr : (N + 1,) int64
        CSR offsets of the epsilon edges by source state.
    edst : (Ee,) int32
        Target of each epsilon edge.
    keep : (N,) bool
        States stored in subsets (live, with a byte edge or accepting).
    live : (N,) bool
        States that reach a final state; the others are dropped.
    start : int
        Initial NFA state.
    num_classes : int
        Number of byte classes ``C``.
    max_states : int
        Stop as soon as more DFA states would be needed.
    keep_start : bool
        Store ``start`` in the initial subset even if not kept, so that no transition can lead
        back to DFA state 0.

    Returns
    -------
    status : int
        0 on success, 1 when ``max_states`` was exceeded.
    num_states : int
        Number of DFA states (``max_states + 1`` on failure).
    trans : (S, C) int32
        Transitions, -1 for the dead state. State 0 is initial; states are numbered in BFS order.
    set_ptr : (S + 1,) int64
        CSR offsets of each state's NFA subset in ``pool``.
    pool : (P,) int32
        The sorted NFA subsets, concatenated.
    """
    n_nfa = bptr.shape[0] - 1
    C = num_classes
    mark = np.zeros(n_nfa, np.int64)
    stack = np.empty(n_nfa + 1, np.int32)
    members = np.empty(n_nfa + 1, np.int32)
    cap = 16
    trans = np.full((cap, C), -1, np.int32)
    set_ptr = np.zeros(cap + 1, np.int64)
    hashes = np.zeros(cap, np.int64)
    pool = np.empty(64, np.int32)
    hcap = 64
    htab = np.full(hcap, -1, np.int32)
    count = np.zeros(C + 1, np.int64)
    fill = np.zeros(C, np.int64)
    bucket = np.empty(64, np.int32)

    gen = 1
    k = 0
    if live[start]:
        mark[start] = gen
        stack[0] = start
        k = _closure_kernel(stack, 1, eptr, edst, keep, live, mark, gen, members)
        if keep_start and not keep[start]:
            members[k] = start
            k += 1
            members[:k] = np.sort(members[:k])
    if k == 0:
        return 0, 0, trans[:0], set_ptr[:1], pool[:0]
    if pool.shape[0] < k:
        pool = np.empty(2 * k, np.int32)
    pool[:k] = members[:k]
    set_ptr[1] = k
    h = _hash_kernel(members, k)
    hashes[0] = h
    htab[h & (hcap - 1)] = 0
    n = 1
    pool_len = k

    s = 0
    while s < n:
        a = set_ptr[s]
        b = set_ptr[s + 1]
        count[:] = 0
        total = 0
        for i in range(a, b):
            m = pool[i]
            for e in range(bptr[m], bptr[m + 1]):
                if live[bdst[e]]:
                    for c in range(bcls_lo[e], bcls_hi[e] + 1):
                        count[c + 1] += 1
                    total += bcls_hi[e] - bcls_lo[e] + 1
        if total == 0:
            s += 1
            continue
        if bucket.shape[0] < total:
            bucket = np.empty(2 * total, np.int32)
        for c in range(C):
            count[c + 1] += count[c]
            fill[c] = count[c]
        for i in range(a, b):
            m = pool[i]
            for e in range(bptr[m], bptr[m + 1]):
                t = bdst[e]
                if live[t]:
                    for c in range(bcls_lo[e], bcls_hi[e] + 1):
                        bucket[fill[c]] = t
                        fill[c] += 1
        prev = -1
        for c in range(C):
            if count[c] == count[c + 1]:
                continue
            # Adjacent classes often have the same targets: reuse the previous result.
            if prev >= 0 and count[c + 1] - count[c] == count[prev + 1] - count[prev]:
                same = True
                off = count[prev] - count[c]
                for i in range(count[c], count[c + 1]):
                    if bucket[i] != bucket[i + off]:
                        same = False
                        break
                if same:
                    trans[s, c] = trans[s, prev]
                    prev = c
                    continue
            prev = c
            gen += 1
            nseed = 0
            for i in range(count[c], count[c + 1]):
                t = bucket[i]
                if mark[t] != gen:
                    mark[t] = gen
                    stack[nseed] = t
                    nseed += 1
            k = _closure_kernel(stack, nseed, eptr, edst, keep, live, mark, gen, members)
            if k == 0:
                continue
            h = _hash_kernel(members, k)
            slot = h & (hcap - 1)
            d = -1
            while htab[slot] >= 0:
                q = htab[slot]
                if hashes[q] == h and set_ptr[q + 1] - set_ptr[q] == k:
                    base = set_ptr[q]
                    same = True
                    for j in range(k):
                        if pool[base + j] != members[j]:
                            same = False
                            break
                    if same:
                        d = q
                        break
                slot = (slot + 1) & (hcap - 1)
            if d < 0:
                if n >= max_states:
                    return 1, n + 1, trans[:0], set_ptr[:1], pool[:0]
                if n == cap:
                    cap *= 2
                    grown = np.full((cap, C), -1, np.int32)
                    grown[:n] = trans[:n]
                    trans = grown
                    grown_ptr = np.zeros(cap + 1, np.int64)
                    grown_ptr[: n + 1] = set_ptr[: n + 1]
                    set_ptr = grown_ptr
                    grown_hash = np.zeros(cap, np.int64)
                    grown_hash[:n] = hashes[:n]
                    hashes = grown_hash
                if pool_len + k > pool.shape[0]:
                    grown_pool = np.empty(2 * (pool_len + k), np.int32)
                    grown_pool[:pool_len] = pool[:pool_len]
                    pool = grown_pool
                pool[pool_len : pool_len + k] = members[:k]
                pool_len += k
                set_ptr[n + 1] = pool_len
                hashes[n] = h
                htab[slot] = n
                d = n
                n += 1
                if 2 * n > hcap:
                    hcap *= 2
                    htab = np.full(hcap, -1, np.int32)
                    for q in range(n):
                        slot = hashes[q] & (hcap - 1)
                        while htab[slot] >= 0:
                            slot = (slot + 1) & (hcap - 1)
                        htab[slot] = q
            trans[s, c] = d
        s += 1
    return 0, n, trans[:n], set_ptr[: n + 1], pool[:pool_len]


@njit(cache=True, nogil=True)
def state_bits_kernel(set_ptr, pool, tag, comp, accept_bits, alive_bits):  # type: ignore[no-untyped-def]
    """Summarise each DFA state's NFA subset as terminal bitsets.

    Parameters
    ----------
    set_ptr : (S + 1,) int64
        CSR offsets of the subsets in ``pool``.
    pool : (P,) int32
        NFA subsets (of live NFA states).
    tag : (N,) int32
        Terminal accepted in each NFA state, -1 for none.
    comp : (N,) int32
        Terminal whose automaton each NFA state belongs to, -1 for none.
    accept_bits, alive_bits : (S, W) uint64
        Outputs, zero on entry: bit ``t`` of a row is set when terminal ``t`` accepts (has a
        live component state) in that DFA state.
    """
    one = np.uint64(1)
    for s in range(set_ptr.shape[0] - 1):
        for i in range(set_ptr[s], set_ptr[s + 1]):
            m = pool[i]
            t = tag[m]
            if t >= 0:
                accept_bits[s, t >> 6] |= one << np.uint64(t & 63)
            t = comp[m]
            if t >= 0:
                alive_bits[s, t >> 6] |= one << np.uint64(t & 63)


@njit(cache=True, nogil=True)
def minimize_kernel(trans, init_block, num_init_blocks, block_out):  # type: ignore[no-untyped-def]
    """Coarsest refinement of an initial partition compatible with a partial DFA's transitions.

    Hopcroft's algorithm in the form of Valmari and Lehtinen ("Efficient minimization of DFAs
    with partial transition functions", STACS 2008): blocks of states and "cords" of
    transitions are refined in turn, so missing transitions (-1) need no sink state.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions, -1 for none. Every state must be reachable and live (the caller trims).
    init_block : (S,) int32
        Initial block of each state, ids ``0 .. num_init_blocks - 1`` (e.g. accepting or not;
        unused ids are allowed). States in different initial blocks are never merged.
    num_init_blocks : int
        Number of initial blocks.
    block_out : (S,) int32
        Output: the block of each state in the coarsest stable refinement.

    Returns
    -------
    int
        The number of blocks (states of the minimal DFA).
    """
    nn = trans.shape[0]
    C = trans.shape[1]
    mm = 0
    for q in range(nn):
        for c in range(C):
            if trans[q, c] >= 0:
                mm += 1
    T = np.empty(mm, np.int32)
    LB = np.empty(mm, np.int32)
    H = np.empty(mm, np.int32)
    t = 0
    for c in range(C):  # transitions sorted by label
        for q in range(nn):
            if trans[q, c] >= 0:
                T[t] = q
                LB[t] = c
                H[t] = trans[q, c]
                t += 1
    # Block partition, initialised from init_block by counting sort.
    bE = np.empty(nn, np.int32)
    bL = np.empty(nn, np.int32)
    bS = np.empty(nn, np.int32)
    bF = np.zeros(nn + 1, np.int32)
    bP = np.zeros(nn + 1, np.int32)
    bM = np.zeros(nn + 1, np.int32)
    bW = np.empty(nn + 1, np.int32)
    # Empty initial blocks are dropped, so block ids stay dense.
    dense = np.full(num_init_blocks, -1, np.int32)
    bz = 0
    for q in range(nn):
        if dense[init_block[q]] < 0:
            dense[init_block[q]] = bz
            bz += 1
    cnt = np.zeros(bz + 1, np.int64)
    for q in range(nn):
        cnt[dense[init_block[q]] + 1] += 1
    for b in range(bz):
        cnt[b + 1] += cnt[b]
        bF[b] = cnt[b]
        bP[b] = cnt[b + 1]
    for q in range(nn):
        b = dense[init_block[q]]
        i = cnt[b]
        cnt[b] += 1
        bE[i] = q
        bL[q] = i
        bS[q] = b
    # Cord partition: transitions grouped by label.
    cE = np.arange(mm).astype(np.int32)
    cL = np.arange(mm).astype(np.int32)
    cS = np.zeros(mm, np.int32)
    cF = np.zeros(mm + 1, np.int32)
    cP = np.zeros(mm + 1, np.int32)
    cM = np.zeros(mm + 1, np.int32)
    cW = np.empty(mm + 1, np.int32)
    cz = 0
    if mm > 0:
        label = LB[0]
        for i in range(mm):
            if LB[i] != label:
                label = LB[i]
                cP[cz] = i
                cz += 1
                cF[cz] = i
            cS[i] = cz
        cP[cz] = mm
        cz += 1
    # Incoming transitions of each state.
    adj = np.zeros(nn + 1, np.int64)
    for t in range(mm):
        adj[H[t] + 1] += 1
    for q in range(nn):
        adj[q + 1] += adj[q]
    pos = adj[:nn].copy()
    A = np.empty(mm, np.int32)
    for t in range(mm):
        A[pos[H[t]]] = t
        pos[H[t]] += 1
    # Marking and splitting are written out in place for both partitions: as helper kernels,
    # each call increfs and decrefs seven arrays (~30% of the time on lexer-sized DFAs).
    # Marking element e (E: elements grouped by set, L: position of each element, S: its set,
    # F/P: first/past-the-end position of each set, M: marked count, W: touched sets) moves it
    # to the marked front of its set; splitting gives the smaller part of each partly marked
    # touched set to a new set.
    bw = 0
    cw = 0
    b = 1
    c = 0
    while c < cz:
        for i in range(cF[c], cP[c]):  # mark the sources of cord c's transitions
            e = T[cE[i]]
            s = bS[e]
            i0 = bL[e]
            j = bF[s] + bM[s]
            bE[i0] = bE[j]
            bL[bE[i0]] = i0
            bE[j] = e
            bL[e] = j
            if bM[s] == 0:
                bW[bw] = s
                bw += 1
            bM[s] += 1
        while bw > 0:  # split the touched blocks
            bw -= 1
            s = bW[bw]
            j = bF[s] + bM[s]
            if j == bP[s]:
                bM[s] = 0
                continue
            if bM[s] <= bP[s] - j:
                bF[bz] = bF[s]
                bP[bz] = j
                bF[s] = j
            else:
                bP[bz] = bP[s]
                bF[bz] = j
                bP[s] = j
            for i in range(bF[bz], bP[bz]):
                bS[bE[i]] = bz
            bM[s] = 0
            bM[bz] = 0
            bz += 1
        c += 1
        while b < bz:
            for i in range(bF[b], bP[b]):  # mark the transitions into block b
                q = bE[i]
                for jj in range(adj[q], adj[q + 1]):
                    e = A[jj]
                    s = cS[e]
                    i0 = cL[e]
                    j = cF[s] + cM[s]
                    cE[i0] = cE[j]
                    cL[cE[i0]] = i0
                    cE[j] = e
                    cL[e] = j
                    if cM[s] == 0:
                        cW[cw] = s
                        cw += 1
                    cM[s] += 1
            while cw > 0:  # split the touched cords
                cw -= 1
                s = cW[cw]
                j = cF[s] + cM[s]
                if j == cP[s]:
                    cM[s] = 0
                    continue
                if cM[s] <= cP[s] - j:
                    cF[cz] = cF[s]
                    cP[cz] = j
                    cF[s] = j
                else:
                    cP[cz] = cP[s]
                    cF[cz] = j
                    cP[s] = j
                for i in range(cF[cz], cP[cz]):
                    cS[cE[i]] = cz
                cM[s] = 0
                cM[cz] = 0
                cz += 1
            b += 1
    for q in range(nn):
        block_out[q] = bS[q]
    return bz


@njit(cache=True, nogil=True)
def quotient_kernel(trans, block, num_blocks, out, reps):  # type: ignore[no-untyped-def]
    """Build the quotient automaton of a partition, numbering blocks by first appearance.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions, -1 = dead.
    block : (S,) int32
        Block of each state, ids ``0 .. num_blocks - 1``.
    num_blocks : int
        Number of blocks ``B``.
    out : (B, C) int32
        Output transitions; the block of state 0 becomes state 0.
    reps : (B,) int64
        Output: the lowest original state of each new state.
    """
    n = trans.shape[0]
    C = trans.shape[1]
    new_id = np.full(num_blocks, -1, np.int32)
    k = 0
    for q in range(n):
        b = block[q]
        if new_id[b] < 0:
            new_id[b] = k
            reps[k] = q
            k += 1
    for i in range(num_blocks):
        q = reps[i]
        for c in range(C):
            t = trans[q, c]
            out[i, c] = new_id[block[t]] if t >= 0 else -1


@njit(cache=True, nogil=True)
def column_hashes_kernel(trans, weights, out):  # type: ignore[no-untyped-def]
    """Hash each column of ``trans``: ``out[c] = sum_s weights[s] * trans[s, c]`` (wrapping).

    Row by row, so the table is read once in memory order (numpy's integer ``weights @
    trans`` reads it column by column, ~25x slower on a 180k-state lexer).

    Parameters
    ----------
    trans : (S, C) int32
        Transitions.
    weights : (S,) int64
        Fixed pseudo-random weights.
    out : (C,) int64
        Output.
    """
    S = trans.shape[0]
    C = trans.shape[1]
    for c in range(C):
        out[c] = 0
    for s in range(S):
        w = weights[s]
        for c in range(C):
            out[c] += w * trans[s, c]


@njit(cache=True, nogil=True)
def merge_classes_kernel(trans, hashes, new_class, keep):  # type: ignore[no-untyped-def]
    """Merge byte classes (columns) with identical transitions.

    Columns are grouped by hash first, then every grouping is checked against the table in
    one pass in memory order; if a check fails (a hash collision), columns are compared
    pairwise instead, so the result is exact either way.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions.
    hashes : (C,) int64
        A hash of each column (equal columns have equal hashes).
    new_class : (C,) int32
        Output: the merged class of each column, numbered by first column.
    keep : (C,) int64
        Output: ``keep[j]`` is the first column of merged class ``j``.

    Returns
    -------
    int
        The number of merged classes.
    """
    k = _group_columns(trans, hashes, new_class, keep, False)
    if k == trans.shape[1] or _groups_hold(trans, new_class, keep):
        return k
    return _group_columns(trans, hashes, new_class, keep, True)  # a hash collision


@njit(cache=True, nogil=True)
def _group_columns(trans, hashes, new_class, keep, compare):  # type: ignore[no-untyped-def]
    """Group columns by hash (and, with ``compare``, by content); return the group count."""
    S = trans.shape[0]
    k = 0
    for c in range(trans.shape[1]):
        found = -1
        for j in range(k):
            o = keep[j]
            if hashes[o] != hashes[c]:
                continue
            same = True
            if compare:
                for s in range(S):
                    if trans[s, o] != trans[s, c]:
                        same = False
                        break
            if same:
                found = j
                break
        if found < 0:
            keep[k] = c
            found = k
            k += 1
        new_class[c] = found
    return k


@njit(cache=True, nogil=True)
def _groups_hold(trans, new_class, keep):  # type: ignore[no-untyped-def]
    """Whether every column equals the first of its group (one pass in memory order)."""
    C = trans.shape[1]
    dup = np.empty(C, dtype=np.int64)  # grouped columns and the first of their group
    rep = np.empty(C, dtype=np.int64)
    m = 0
    for c in range(C):
        if keep[new_class[c]] != c:
            dup[m] = c
            rep[m] = keep[new_class[c]]
            m += 1
    for s in range(trans.shape[0]):
        differ = False
        for i in range(m):
            if trans[s, dup[i]] != trans[s, rep[i]]:
                differ = True
        if differ:
            return False
    return True


@njit(cache=True, nogil=True)
def take_columns_kernel(trans, cols, out):  # type: ignore[no-untyped-def]
    """``out[s, j] = trans[s, cols[j]]``, row by row (numpy's column gather is ~6x slower)."""
    for s in range(trans.shape[0]):
        for j in range(cols.shape[0]):
            out[s, j] = trans[s, cols[j]]


@njit(cache=True, nogil=True)
def product_kernel(trans_a, trans_b, col_a, col_b, b_sink, max_states):  # type: ignore[no-untyped-def]
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
    hcap = 64
    htab = np.full(hcap, -1, np.int32)
    keys[0] = 1  # the pair (0, 0)
    htab[((keys[0] % _HASH_MOD) * _HASH_MUL % _HASH_MOD) & (hcap - 1)] = 0
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
            slot = ((key % _HASH_MOD) * _HASH_MUL % _HASH_MOD) & (hcap - 1)
            d = -1
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
                htab[slot] = n
                d = n
                n += 1
                if 2 * n > hcap:
                    hcap *= 2
                    htab = np.full(hcap, -1, np.int32)
                    for q in range(n):
                        slot = ((keys[q] % _HASH_MOD) * _HASH_MUL % _HASH_MOD) & (hcap - 1)
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
            h = (h * 31 + np.int64(rows[q, w] % np.uint64(_HASH_MOD))) % _HASH_MOD
        slot = (h * _HASH_MUL % _HASH_MOD) & (hcap - 1)
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
        h = ((h ^ (np.int64(lcls[j]) << 20 | np.int64(cls[ldst[j]]))) * _HASH_MUL) & _SIG_MASK
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
