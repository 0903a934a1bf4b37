"""Numba kernels of stage 3, from NFA to DFA: liveness, CSR preparation, subset construction.

Also the per-state terminal bitsets of a determinised lexer (``state_bits_kernel``). The other
stage-3 kernels: minimisation and byte-class merging in :mod:`constrain.kernels.numba_minimize`,
products and lexer analyses in :mod:`constrain.kernels.numba_dfa`.

Every kernel works on flat numpy arrays and scalars only (no ``numba.typed`` containers, no
strings). The public wrappers live in :mod:`constrain.automata` (``subsets``, ``nfa``, ``product``,
``lexer``); they fix the dtypes (``int32`` states and edges, ``int64`` offsets) and validate the
inputs. The subset construction grows its own buffers (its output size is unknown in advance) and
returns them. Hashing keeps every intermediate below 2**52, so results do not depend on integer
wrap-around and are identical with ``NUMBA_DISABLE_JIT=1``. Naive oracles: ``tests/reference.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "HASH_MOD",
    "FEW_EDGES",
    "HASH_MUL",
    "determinize_kernel",
    "edge_runs",
    "few_edges",
    "mix_hash",
    "nfa_csr_kernel",
    "nfa_live_kernel",
    "same_targets",
    "set_terminal_bits",
    "state_bits_kernel",
]

HASH_MOD = 2147483647
"""Modulus of the kernels' open-addressing hashes (a prime below 2**31)."""
HASH_MUL = 1000003
"""Multiplier of the kernels' open-addressing hashes."""


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
        h = (h * HASH_MUL + np.int64(members[i]) + 1) % HASH_MOD
    return mix_hash(h)


@njit(cache=True, nogil=True, inline="always")
def mix_hash(h):  # type: ignore[no-untyped-def]
    """Spread a polynomial hash's bits (Fibonacci hashing; 31 bits, non-negative).

    The tables take a hash's low bits as the slot; without this, subsets one NFA id apart
    (a counted region's consecutive counts) hash to consecutive slots, and linear probing
    then walks runs of thousands of filled slots for every miss.
    """
    x = np.uint64(h) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return np.int64(x >> np.uint64(33))


@njit(cache=True, nogil=True, inline="always")
def _start_subset(start, keep_start, eptr, edst, keep, live, mark, gen, stack, members):  # type: ignore[no-untyped-def]
    """Write the initial subset to ``members``; return its size (0 when ``start`` is dead)."""
    k = 0
    if live[start]:
        mark[start] = gen
        stack[0] = start
        k = _closure_kernel(stack, 1, eptr, edst, keep, live, mark, gen, members)
        if keep_start and not keep[start]:
            members[k] = start
            k += 1
            members[:k] = np.sort(members[:k])
    return k


# The per-run steps (the reuse of the previous run's result, the lookup of a subset) are kept
# in place (measured, when they were per class): as helpers (``@njit(inline="always")``) the
# kernel took 5.22-5.29 ms instead of 4.16-4.20 ms (+26%) on the 12 subset constructions of
# building the SQL grammar's lexer, a JSON Schema with four long patterns and the JSON grammar
# (sum of per-call minima of 10 replays, 3 alternating runs per version); numba increfs and
# decrefs the arrays a helper takes at every call. The helpers below run once per state or per
# growth. Runs instead of classes (a subset's few edges split the classes into a few runs:
# 3 runs and 4 edges a state on average for a JSON object's lexer of 62 classes) took the
# subset constructions of 40 MaskBench lexers from 11.7 to 8.8 ms, of 6 large ones (15-33k
# states) from 298 to 273 ms, with the same output for every construction of 500 schemas.
@njit(cache=True, nogil=True, inline="always")
def _targets_by_class(a, b, pool, bptr, bcls_lo, bcls_hi, bdst, live, count, fill, bucket):  # type: ignore[no-untyped-def]
    """Bucket the live byte-edge targets of subset ``pool[a:b]`` by class (counting sort).

    Class ``c``'s targets end up in ``bucket[count[c]:count[c + 1]]`` (``count[C]`` is their
    total); returns the bucket (grown when too small). ``count`` has ``C + 1`` entries,
    ``fill`` ``C``.
    """
    C = fill.shape[0]
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
        return bucket
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
    return bucket


@njit(cache=True, nogil=True, inline="always")
def _grow_states(trans, set_ptr, hashes, n):  # type: ignore[no-untyped-def]
    """Double the room for states of ``trans``, ``set_ptr`` and ``hashes`` (``n`` used)."""
    cap = 2 * trans.shape[0]
    grown = np.full((cap, trans.shape[1]), -1, np.int32)
    grown[:n] = trans[:n]
    grown_ptr = np.zeros(cap + 1, np.int64)
    grown_ptr[: n + 1] = set_ptr[: n + 1]
    grown_hash = np.zeros(cap, np.int64)
    grown_hash[:n] = hashes[:n]
    return grown, grown_ptr, grown_hash


@njit(cache=True, nogil=True, inline="always")
def _rehash(hashes, n, hcap):  # type: ignore[no-untyped-def]
    """Return a table of ``hcap`` slots (a power of two) indexing states ``0 .. n - 1``."""
    htab = np.full(hcap, -1, np.int32)
    for q in range(n):
        slot = hashes[q] & (hcap - 1)
        while htab[slot] >= 0:
            slot = (slot + 1) & (hcap - 1)
        htab[slot] = q
    return htab


FEW_EDGES = 32
"""A subset with at most this many live byte edges (``few_edges``) is split into runs of classes
by the edges' bounds (``edge_runs``); a larger one by a counting sort over the classes (here
``_targets_by_class``, in a lazy lexer ``numba_lazy._count_targets``)."""


@njit(cache=True, nogil=True, inline="always")
def few_edges(a, b, pool, num_real, bptr, bcls_lo, bcls_hi, bdst, live, edges):  # type: ignore[no-untyped-def]
    """Copy the live byte edges of subset ``pool[a:b]`` to ``edges`` (rows lo, hi, target).

    Returns their number, or -1 when there are more than ``edges`` holds or a member is
    ``num_real`` or more (a lazy lexer's virtual state, which has no edges of its own).
    """
    ne = 0
    cap = edges.shape[1]
    for i in range(a, b):
        m = pool[i]
        if m >= num_real:
            return -1
        for e in range(bptr[m], bptr[m + 1]):
            t = bdst[e]
            if live[t]:
                if ne == cap:
                    return -1
                edges[0, ne] = bcls_lo[e]
                edges[1, ne] = bcls_hi[e]
                edges[2, ne] = t
                ne += 1
    return ne


@njit(cache=True, nogil=True, inline="always")
def edge_runs(ne, edges, cuts, run_lo, run_hi, run_ptr, run_tgt):  # type: ignore[no-untyped-def]
    """Split the classes of ``ne`` edges into runs with the same targets.

    ``edges`` holds the edges' first classes, last classes and targets (rows 0, 1, 2), ``cuts``
    room for ``2 * ne`` bounds; run ``j`` covers classes ``run_lo[j] .. run_hi[j]`` and its
    targets are ``run_tgt[run_ptr[j] : run_ptr[j + 1]]`` (:func:`determinize_kernel`, and the
    lazy lexer's rows). Between two consecutive edge bounds the same edges apply: the runs are
    those stretches (with targets), adjacent ones with the same targets merged. Returns the
    number of runs and ``run_tgt`` (grown when too small).
    """
    nc = 0
    for j in range(2 * ne):  # the bounds, sorted (insertion sort: a few) and unique
        v = edges[0, j >> 1] if j & 1 == 0 else edges[1, j >> 1] + 1
        i = nc
        while i > 0 and cuts[i - 1] > v:
            i -= 1
        if i > 0 and cuts[i - 1] == v:
            continue
        for r in range(nc, i, -1):
            cuts[r] = cuts[r - 1]
        cuts[i] = v
        nc += 1
    if run_tgt.shape[0] < ne * (nc - 1):
        run_tgt = np.empty(2 * ne * (nc - 1), run_tgt.dtype)
    runs = 0
    used = 0
    for r in range(nc - 1):
        x = cuts[r]
        start = used
        for j in range(ne):
            if edges[0, j] <= x and x <= edges[1, j]:
                run_tgt[used] = edges[2, j]
                used += 1
        if used == start:
            continue
        if runs > 0 and run_hi[runs - 1] == x - 1 and used - start == start - run_ptr[runs - 1]:
            same = True
            off = run_ptr[runs - 1] - start
            for i in range(start, used):
                if run_tgt[i] != run_tgt[i + off]:
                    same = False
                    break
            if same:
                run_hi[runs - 1] = cuts[r + 1] - 1
                used = start
                continue
        run_lo[runs] = x
        run_hi[runs] = cuts[r + 1] - 1
        run_ptr[runs + 1] = used
        runs += 1
    return runs, run_tgt


@njit(cache=True, nogil=True, inline="always")
def same_targets(j, run_ptr, run_tgt):  # type: ignore[no-untyped-def]
    """Whether run ``j`` has the same targets as run ``j - 1`` (``edge_runs``' runs)."""
    p, q = run_ptr[j], run_ptr[j + 1]
    if j == 0 or q - p != p - run_ptr[j - 1]:
        return False
    off = run_ptr[j - 1] - p
    for i in range(p, q):
        if run_tgt[i] != run_tgt[i + off]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _class_runs(count, bucket, run_lo, run_hi, run_ptr, run_tgt):  # type: ignore[no-untyped-def]
    """Split the classes into runs with the same targets from ``_targets_by_class``'s buckets.

    Returns the number of runs and ``run_tgt`` (grown when too small). The merge with the last
    run repeats ``edge_runs``' in place (measured: as a shared helper, the 40 lexers'
    constructions took 9.5 instead of 8.7 ms).
    """
    C = count.shape[0] - 1
    if run_tgt.shape[0] < count[C]:
        run_tgt = np.empty(2 * count[C], np.int32)
    runs = 0
    used = 0
    for c in range(C):
        p, q = count[c], count[c + 1]
        if p == q:
            continue
        if runs > 0 and run_hi[runs - 1] == c - 1 and q - p == used - run_ptr[runs - 1]:
            same = True
            off = run_ptr[runs - 1] - p
            for i in range(p, q):
                if bucket[i] != run_tgt[i + off]:
                    same = False
                    break
            if same:
                run_hi[runs - 1] = c
                continue
        for i in range(p, q):
            run_tgt[used] = bucket[i]
            used += 1
        run_lo[runs] = c
        run_hi[runs] = c
        run_ptr[runs + 1] = used
        runs += 1
    return runs, run_tgt


@njit(cache=True, nogil=True)
def determinize_kernel(  # type: ignore[no-untyped-def]
    bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep, live, start, num_classes, max_states,
    keep_start, max_members,
):  # fmt: skip
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
    max_members : int
        Stop as soon as the subsets would hold more NFA states in all (a budget of work: each
        member costs a closure step, a sort and a hash).

    Returns
    -------
    status : int
        0 on success, 1 when ``max_states`` was exceeded, 2 when ``max_members`` was.
    num_states : int
        Number of DFA states (``max_states + 1`` on status 1).
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
    trans = np.full((16, C), -1, np.int32)
    set_ptr = np.zeros(16 + 1, np.int64)
    hashes = np.zeros(16, np.int64)
    pool = np.empty(64, np.int32)
    htab = np.full(64, -1, np.int32)
    count = np.zeros(C + 1, np.int64)
    fill = np.zeros(C, np.int64)
    bucket = np.empty(64, np.int32)
    # a subset's successors as runs of classes with the same targets (``edge_runs``,
    # ``_class_runs``): run ``j`` covers classes ``run_lo[j] .. run_hi[j]``, its targets are
    # ``run_tgt[run_ptr[j] : run_ptr[j + 1]]``
    edges = np.empty((3, FEW_EDGES), np.int32)
    cuts = np.empty(2 * FEW_EDGES, np.int32)
    run_lo = np.empty(C, np.int32)
    run_hi = np.empty(C, np.int32)
    run_ptr = np.zeros(C + 1, np.int64)
    run_tgt = np.empty(64, np.int32)

    gen = 1
    k = _start_subset(start, keep_start, eptr, edst, keep, live, mark, gen, stack, members)
    if k == 0:
        return 0, 0, trans[:0], set_ptr[:1], pool[:0]
    if pool.shape[0] < k:
        pool = np.empty(2 * k, np.int32)
    pool[:k] = members[:k]
    set_ptr[1] = k
    h = _hash_kernel(members, k)
    hashes[0] = h
    htab[h & (htab.shape[0] - 1)] = 0
    n = 1
    pool_len = k

    s = 0
    while s < n:
        a, b = set_ptr[s], set_ptr[s + 1]
        ne = few_edges(a, b, pool, n_nfa, bptr, bcls_lo, bcls_hi, bdst, live, edges)
        if ne > 0:
            runs, run_tgt = edge_runs(ne, edges, cuts, run_lo, run_hi, run_ptr, run_tgt)
        elif ne < 0:
            bucket = _targets_by_class(
                a, b, pool, bptr, bcls_lo, bcls_hi, bdst, live, count, fill, bucket
            )  # fmt: skip
            runs, run_tgt = _class_runs(count, bucket, run_lo, run_hi, run_ptr, run_tgt)
        else:
            runs = 0
        d = -1
        for j in range(runs):
            p, q = run_ptr[j], run_ptr[j + 1]
            # Runs often have the previous run's targets (classes apart): reuse its result.
            if not same_targets(j, run_ptr, run_tgt):
                gen += 1
                nseed = 0
                for i in range(p, q):
                    t = run_tgt[i]
                    if mark[t] != gen:
                        mark[t] = gen
                        stack[nseed] = t
                        nseed += 1
                k = _closure_kernel(stack, nseed, eptr, edst, keep, live, mark, gen, members)
                d = -1
                if k > 0:
                    h = _hash_kernel(members, k)
                    slot = h & (htab.shape[0] - 1)
                    while htab[slot] >= 0:
                        q0 = htab[slot]
                        if hashes[q0] == h and set_ptr[q0 + 1] - set_ptr[q0] == k:
                            base = set_ptr[q0]
                            found = True
                            for i in range(k):
                                if pool[base + i] != members[i]:
                                    found = False
                                    break
                            if found:
                                d = q0
                                break
                        slot = (slot + 1) & (htab.shape[0] - 1)
                    if d < 0:  # a new state
                        if n >= max_states:
                            return 1, n + 1, trans[:0], set_ptr[:1], pool[:0]
                        if pool_len + k > max_members:
                            return 2, n, trans[:0], set_ptr[:1], pool[:0]
                        if n == trans.shape[0]:
                            trans, set_ptr, hashes = _grow_states(trans, set_ptr, hashes, n)
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
                        if 2 * n > htab.shape[0]:
                            htab = _rehash(hashes, n, 2 * htab.shape[0])
            if d >= 0:
                for c in range(run_lo[j], run_hi[j] + 1):
                    trans[s, c] = d
        s += 1
    return 0, n, trans[:n], set_ptr[: n + 1], pool[:pool_len]


@njit(cache=True, nogil=True, inline="always")
def set_terminal_bits(bits, s, t, groups):  # type: ignore[no-untyped-def]
    """Set bit ``t`` of ``bits[s]``, or every terminal's of group ``t - base`` (``t >= base``).

    ``groups`` is ``(base, group_ptr, group_terms)`` (:class:`~constrain.automata.nfa_parts.
    Nfa`).
    """
    one = np.uint64(1)
    base, group_ptr, group_terms = groups
    if t < base:
        bits[s, t >> 6] |= one << np.uint64(t & 63)
        return
    for j in range(group_ptr[t - base], group_ptr[t - base + 1]):
        u = group_terms[j]
        bits[s, u >> 6] |= one << np.uint64(u & 63)


@njit(cache=True, nogil=True)
def state_bits_kernel(set_ptr, pool, tag, comp, groups, accept_bits, alive_bits):  # type: ignore[no-untyped-def]
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
    groups : tuple
        ``(base, group_ptr, group_terms)``: tags and components of ``base`` or more are groups
        of terminals (:class:`~constrain.automata.nfa_parts.Nfa`).
    accept_bits, alive_bits : (S, W) uint64
        Outputs, zero on entry: bit ``t`` of a row is set when terminal ``t`` accepts (has a
        live component state) in that DFA state.
    """
    for s in range(set_ptr.shape[0] - 1):
        for i in range(set_ptr[s], set_ptr[s + 1]):
            m = pool[i]
            t = tag[m]
            if t >= 0:
                set_terminal_bits(accept_bits, s, t, groups)
            t = comp[m]
            if t >= 0:
                set_terminal_bits(alive_bits, s, t, groups)
