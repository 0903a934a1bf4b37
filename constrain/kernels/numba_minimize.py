"""Numba kernels of stage 3: DFA minimisation, quotients and byte-class merging.

Minimisation (``minimize_kernel``, Valmari-Lehtinen) and the quotient by its blocks; the merging
of byte classes whose transition columns are equal (``column_hashes_kernel``,
``merge_classes_kernel``, ``take_columns_kernel``). The subset construction is in
:mod:`constrain.kernels.numba_subsets`, products and lexer analyses in
:mod:`constrain.kernels.numba_dfa`.

Every kernel works on flat numpy arrays and scalars only (no ``numba.typed`` containers, no
strings). The public wrappers live in :mod:`constrain.automata` (``subsets``); they fix the dtypes
(``int32`` states and edges, ``int64`` offsets) and validate the inputs. Hashing keeps every
intermediate below 2**52, so results do not depend on integer wrap-around and are identical with
``NUMBA_DISABLE_JIT=1``. Naive oracles: ``tests/reference.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "acyclic_classes_kernel",
    "column_hashes_kernel",
    "merge_classes_kernel",
    "minimize_kernel",
    "quotient_kernel",
    "take_columns_kernel",
]


@njit(cache=True, nogil=True, inline="always")
def _transitions_by_label(trans):  # type: ignore[no-untyped-def]
    """Return the transitions sorted by label: sources ``T``, labels ``LB``, targets ``H``."""
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
    for c in range(C):
        for q in range(nn):
            if trans[q, c] >= 0:
                T[t] = q
                LB[t] = c
                H[t] = trans[q, c]
                t += 1
    return T, LB, H


@njit(cache=True, nogil=True, inline="always")
def _initial_blocks(nn, init_block, num_init_blocks):  # type: ignore[no-untyped-def]
    """Return the block partition of ``init_block`` (counting sort, empty blocks dropped)."""
    bE = np.empty(nn, np.int32)
    bL = np.empty(nn, np.int32)
    bS = np.empty(nn, np.int32)
    bF = np.zeros(nn + 1, np.int32)
    bP = np.zeros(nn + 1, np.int32)
    dense = np.full(num_init_blocks, -1, np.int32)  # dense block ids
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
    return bE, bL, bS, bF, bP, bz


@njit(cache=True, nogil=True, inline="always")
def _initial_cords(LB):  # type: ignore[no-untyped-def]
    """Return the cord partition: the transitions (sorted by label) grouped by label."""
    mm = LB.shape[0]
    cE = np.arange(mm).astype(np.int32)
    cL = np.arange(mm).astype(np.int32)
    cS = np.zeros(mm, np.int32)
    cF = np.zeros(mm + 1, np.int32)
    cP = np.zeros(mm + 1, np.int32)
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
    return cE, cL, cS, cF, cP, cz


@njit(cache=True, nogil=True, inline="always")
def _incoming(H, nn):  # type: ignore[no-untyped-def]
    """Return the incoming transitions of each state as CSR ``(adj, A)``."""
    mm = H.shape[0]
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
    return adj, A


# The setup steps are helpers; the refinement loop is kept in place (measured): with the
# marking and splitting of an element written as helpers (``@njit(inline="always")``, called per
# element), the kernel took 2.15-2.17 ms instead of 0.74-0.79 ms (2.9x) on the 12 minimisations
# of building the SQL grammar's lexer, a JSON Schema with four long patterns and the JSON
# grammar (sum of per-call minima of 10 replays, 3 alternating runs per version); as helpers
# per cord and per block, 2.72 ms. numba increfs and decrefs the arrays a helper takes at
# every call, inlined or not.
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
    T, LB, H = _transitions_by_label(trans)
    bE, bL, bS, bF, bP, bz = _initial_blocks(nn, init_block, num_init_blocks)
    bM = np.zeros(nn + 1, np.int32)
    bW = np.empty(nn + 1, np.int32)
    cE, cL, cS, cF, cP, cz = _initial_cords(LB)
    cM = np.zeros(LB.shape[0] + 1, np.int32)
    cW = np.empty(LB.shape[0] + 1, np.int32)
    adj, A = _incoming(H, nn)
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
def acyclic_classes_kernel(indptr, child, label, is_end, out_cls):  # type: ignore[no-untyped-def]
    """Give the nodes of a tree automaton (a trie) classes by right language; return their count.

    Node ``v``'s edges are ``indptr[v]:indptr[v + 1]``, sorted by ``label``, to children with
    larger ids; ``is_end[v]``: a string ends at ``v``. Nodes are taken children first (ids
    descending), each keyed by ``(is_end, (label, class of child)...)`` in a hash table of
    representatives, a key compared in full on every hash match: ``out_cls[v]`` is then equal
    for two nodes exactly when the same strings lead from both to an end (the minimal acyclic
    automaton's states). Node 0, the root, keeps a class of its own. Hashes stay below 2**52.
    """
    n = is_end.shape[0]
    size = 1
    while size < 2 * n + 2:
        size *= 2
    table = np.full(size, -1, np.int64)
    count = 0
    for v in range(n - 1, 0, -1):
        h = np.int64(1 + is_end[v])
        for e in range(indptr[v], indptr[v + 1]):
            h = (h * 1000003 + label[e] + 1) % 2147483647
            h = (h * 1000003 + out_cls[child[e]] + 1) % 2147483647
        slot = h & (size - 1)
        while True:
            r = table[slot]
            if r < 0:
                table[slot] = v
                out_cls[v] = count
                count += 1
                break
            same = is_end[r] == is_end[v] and (
                indptr[r + 1] - indptr[r] == indptr[v + 1] - indptr[v]
            )
            if same:
                d = indptr[r] - indptr[v]
                for e in range(indptr[v], indptr[v + 1]):
                    if label[e] != label[e + d] or out_cls[child[e]] != out_cls[child[e + d]]:
                        same = False
                        break
            if same:
                out_cls[v] = out_cls[r]
                break
            slot = (slot + 1) & (size - 1)
    out_cls[0] = count  # the root
    return count + 1
