"""Numba kernels of the lazy lexer: subset construction state by state, with counted regions.

The lazy lexer (:mod:`constrain.automata.lazy_lexer`) determinises an NFA whose large counted
repetitions are *regions*: ``X{lo,hi}`` with a prefix-free ``X`` (a UTF-8 character, a JSON
string character with its escapes) is not unrolled into ``hi`` copies; its states are virtual
NFA states ``(r, k, q)``: region ``r``, ``k`` complete copies of ``X`` read, state ``q`` of
``X``'s minimal DFA (``q = 0`` its start). A virtual id is ``num_real + base[r] + k * width[r]
+ q``. From ``(r, k, q)`` a byte of class ``c`` leads to ``(r, k, q')`` with ``q' =
xtrans[r][q, c]``, or to ``(r, k + 1, 0)`` when it completes ``X`` (``xtrans == -2``; ``X`` is
prefix-free, so its accepting state has no transition and is folded into the next count);
``(r, k, 0)`` with ``k >= lo`` also stands for the region's exit state ``after[r]`` (an epsilon
edge), and ``(r, hi, 0)`` has no byte edge. Real states enter a region by the list
``vptr``/``vreg`` (an epsilon edge into ``(r, 0, 0)``).

A *product region* ``X{lo,hi} & A`` also carries a state ``a`` of ``A``'s DFA along the count:
``q = a * width_X + x`` (a plain region is the case of one ``a`` that stays put). A byte
moves ``a`` by ``atrans`` too; the exit needs ``a`` accepting (``aexit``); and a virtual state
is kept only if some number of items still to read from it, allowed by its count and the
bounds, ends at an accepting boundary (the bits per ``q`` of
:func:`~constrain.kernels.numba_product.product_counts_kernel`), so the lazy DFA stays trim:
every state it keeps can still reach the region's exit.

:func:`expand_row` computes the transition row of one DFA state, creating the subsets it
reaches; which rows are built (neighbourhoods of states, walks of the token trie) is
:mod:`constrain.kernels.numba_lazy_walk`'s. A row whose members are all real NFA states with few
byte edges is split into runs of classes by the edges' bounds, as in the eager construction;
another row counts its targets class by class. Subsets are sorted ``int64`` arrays of NFA ids
(real and virtual) in a pool, indexed by an open-addressing hash table, as in
:func:`~constrain.kernels.numba_subsets.determinize_kernel`, whose result on a region-free NFA
this equals state for state when everything is expanded breadth first from state 0. The naive
oracle is the eager lexer (:func:`~constrain.automata.lexer.build_lexer`): the tests compare the
languages.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from constrain.kernels.numba_subsets import (
    FEW_EDGES,
    HASH_MOD,
    HASH_MUL,
    edge_runs,
    few_edges,
    mix_hash,
    same_targets,
    set_terminal_bits,
)

__all__ = ["expand_row", "lazy_bits_kernel", "lazy_start_kernel", "make_room", "new_work"]


@njit(cache=True, nogil=True, inline="always")
def _region_of(v, num_real, r_base):  # type: ignore[no-untyped-def]
    """Return the region of virtual id ``v`` (binary search of the region bases)."""
    off = v - num_real
    lo = 0
    hi = r_base.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if r_base[mid] <= off:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, nogil=True, inline="always")
def _close_room(nseed, num_real, vreg):  # type: ignore[no-untyped-def]
    """Room :func:`_close` needs for its stack and members from ``nseed`` seeds.

    Each real state is pushed once (marks), and pushes its regions' entries once.
    """
    return nseed + num_real + vreg.shape[0] + 2


@njit(cache=True, nogil=True, inline="always")
def _close(  # type: ignore[no-untyped-def]
    seeds, nseed, num_real, eptr, edst, keep, live, vptr, vreg, reg, mark, gen, stack, members
):
    """Epsilon-close ``seeds[:nseed]``; return the count of sorted, distinct kept members.

    ``reg`` is ``(r_after, r_lo, r_hi, r_width, r_base, r_live, r_iw, r_eoff, aexit, r_boff,
    r_nw, r_nbits, rbits)`` (:class:`~constrain.automata.lazy_lexer.LazyLexer`). Real states
    are deduplicated by ``mark`` (stamped ``gen``), virtual ones by a final sort. ``stack``
    and ``members`` must hold :func:`_close_room` entries (no array is grown in the loop: a
    reassigned array costs reference counting at every step).
    """
    r_after, r_lo, r_hi, r_width, r_base, r_live, r_iw, r_eoff, aexit = reg[:9]
    top = 0
    k = 0
    for i in range(nseed):
        v = seeds[i]
        if v < num_real:
            if not live[v] or mark[v] == gen:
                continue
            mark[v] = gen
        stack[top] = v
        top += 1
    while top > 0:
        top -= 1
        v = stack[top]
        if v < num_real:
            if keep[v]:
                members[k] = v
                k += 1
            for e in range(eptr[v], eptr[v + 1]):
                t = edst[e]
                if live[t] and mark[t] != gen:
                    mark[t] = gen
                    stack[top] = t
                    top += 1
            for e in range(vptr[v], vptr[v + 1]):
                r = vreg[e]
                if r_live[r] and _alive(r, 0, 0, reg):
                    stack[top] = num_real + r_base[r]  # (r, 0, 0)
                    top += 1
        else:
            r = _region_of(v, num_real, r_base)
            off = v - num_real - r_base[r]
            count = off // r_width[r]
            q = off - count * r_width[r]
            a = q // r_iw[r]
            boundary = q == a * r_iw[r]
            if not boundary or count < r_hi[r]:
                members[k] = v
                k += 1
            if boundary and count >= r_lo[r] and aexit[r_eoff[r] + a]:
                t = r_after[r]
                if live[t] and mark[t] != gen:
                    mark[t] = gen
                    stack[top] = t
                    top += 1
    if k < 24:  # insertion sort: np.sort allocates, and subsets are mostly small
        for i in range(1, k):
            x = members[i]
            j = i - 1
            while j >= 0 and members[j] > x:
                members[j + 1] = members[j]
                j -= 1
            members[j + 1] = x
    else:
        members[:k] = np.sort(members[:k])
    j = 0
    for i in range(k):
        if i == 0 or members[i] != members[j - 1]:
            members[j] = members[i]
            j += 1
    return j


@njit(cache=True, nogil=True, inline="always")
def _hash(members, k):  # type: ignore[no-untyped-def]
    h = np.int64(k)
    for i in range(k):
        h = (h * HASH_MUL + members[i] % HASH_MOD + 1) % HASH_MOD
    return mix_hash(h)


@njit(cache=True, nogil=True, inline="always")
def _find(members, k, hashes, htab, set_ptr, pool):  # type: ignore[no-untyped-def]
    """Return the DFA state of subset ``members[:k]`` (-1 if none yet) and the probe's last slot.

    The slot is where a new state for the subset goes.
    """
    h = _hash(members, k)
    mask = htab.shape[0] - 1
    slot = h & mask
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
                return q, slot
        slot = (slot + 1) & mask
    return -1, slot


@njit(cache=True, nogil=True)
def _reserve(store, states, members):  # type: ignore[no-untyped-def]
    """Return ``store`` with room for ``states`` more states of ``members`` members in all.

    Arrays grow 2x (or to what is needed) and the hash table keeps a load of at most one half,
    so :func:`_add` never reallocates.
    """
    trans, expanded, set_ptr, pool, hashes, htab, meta, order = store
    n = meta[0]
    if n + states > trans.shape[0]:
        cap = max(2 * trans.shape[0], n + states)
        grown = np.full((cap, trans.shape[1]), -1, np.int32)
        grown[:n] = trans[:n]
        trans = grown
        grown_e = np.zeros(cap, np.bool_)
        grown_e[:n] = expanded[:n]
        expanded = grown_e
        grown_p = np.zeros(cap + 1, np.int64)
        grown_p[: n + 1] = set_ptr[: n + 1]
        set_ptr = grown_p
        grown_h = np.zeros(cap, np.int64)
        grown_h[:n] = hashes[:n]
        hashes = grown_h
        grown_o = np.zeros(cap, np.int32)
        grown_o[: meta[1]] = order[: meta[1]]
        order = grown_o
    used = set_ptr[n]
    if used + members > pool.shape[0]:
        grown_pool = np.empty(max(2 * pool.shape[0], used + members), np.int64)
        grown_pool[:used] = pool[:used]
        pool = grown_pool
    if 2 * (n + states) > htab.shape[0]:
        cap = htab.shape[0]
        while 2 * (n + states) > cap:
            cap *= 2
        htab = np.full(cap, -1, np.int32)
        for q in range(n):
            slot = hashes[q] & (cap - 1)
            while htab[slot] >= 0:
                slot = (slot + 1) & (cap - 1)
            htab[slot] = q
    return trans, expanded, set_ptr, pool, hashes, htab, meta, order


@njit(cache=True, nogil=True, inline="always")
def _add(members, k, slot, set_ptr, pool, hashes, htab, meta):  # type: ignore[no-untyped-def]
    """Add subset ``members[:k]`` as a new state at hash slot ``slot``; return its id.

    The store must have room (:func:`_reserve`).
    """
    n = meta[0]
    used = set_ptr[n]
    pool[used : used + k] = members[:k]
    set_ptr[n + 1] = used + k
    hashes[n] = _hash(members, k)
    htab[slot] = n
    meta[0] = n + 1
    return n


@njit(cache=True, nogil=True)
def lazy_start_kernel(nfa, reg, num_real, start, num_classes, max_states):  # type: ignore[no-untyped-def]
    """Return a new store holding the initial subset (``start`` kept in it) as state 0.

    ``nfa`` is ``(bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep, live, vptr, vreg, xtrans,
    r_toff, atrans, r_aoff)``, ``reg`` as for :func:`_close`.
    The store is ``(trans, expanded, set_ptr, pool, hashes, htab, meta, order)``: ``meta[0]``
    states, ``meta[1]`` rows built, ``order[: meta[1]]`` the states whose rows were built, in
    that order (what is new since a count: a slice, not a scan). A dead ``start`` (no terminal
    at all) is state 0 alone, every byte dead, as in the eager lexer.
    """
    eptr, edst, keep, live, vptr, vreg = nfa[4], nfa[5], nfa[6], nfa[7], nfa[8], nfa[9]
    trans = np.full((64, num_classes), -1, np.int32)
    store = (
        trans,
        np.zeros(64, np.bool_),
        np.zeros(65, np.int64),
        np.empty(256, np.int64),
        np.zeros(64, np.int64),
        np.full(128, -1, np.int32),
        np.zeros(2, np.int64),
        np.zeros(64, np.int32),
    )
    mark = np.zeros(num_real, np.int64)
    seeds = np.empty(1, np.int64)
    seeds[0] = start
    room = _close_room(1, num_real, vreg)
    members = np.empty(room, np.int64)
    k = 0  # a dead start: state 0 of no member (no terminal alive, every byte dead)
    if live[start]:
        k = _close(
            seeds, 1, num_real, eptr, edst, keep, live, vptr, vreg, reg, mark, 1,
            np.empty(room, np.int64), members,
        )  # fmt: skip
    if live[start] and not keep[start]:
        members2 = np.empty(k + 1, np.int64)
        members2[:k] = members[:k]
        members2[k] = start
        members = np.sort(members2)
        k += 1
    store = _reserve(store, 1, k)
    slot = _find(members, k, store[4], store[5], store[2], store[3])[1]
    _add(members, k, slot, store[2], store[3], store[4], store[5], store[6])
    return store


@njit(cache=True, nogil=True, inline="always")
def expand_row(s, nfa, reg, num_real, store, max_states, work):  # type: ignore[no-untyped-def]
    """Build the transition row of DFA state ``s``; return 0 (done), 1 (limit) or 2 (no room).

    On 2 nothing of the row is written (the states it added so far stay, and are found again):
    :func:`make_room` grows the store and the scratch, and the row is tried again. Growing
    apart keeps the arrays out of the return value: a row that returned the store and the
    scratch (24 arrays) cost their references' counting at every row.
    """
    stack = work[4]
    ne = few_edges(
        store[2][s], store[2][s + 1], store[3], num_real, nfa[0], nfa[1], nfa[2], nfa[3], nfa[7],
        work[10],
    )  # fmt: skip
    if ne >= 0:
        runs = 0
        if ne > 0:  # (run_tgt holds every run of FEW_EDGES edges: it is never regrown)
            runs = edge_runs(ne, work[10], work[11], work[12], work[13], work[14], work[15])[0]
        if stack.shape[0] < _close_room(ne, num_real, nfa[9]):
            return 2
        return _runs_row(s, nfa, reg, num_real, store, max_states, work, runs)
    total = _count_targets(s, nfa, reg, num_real, store[2], store[3], work[1])
    if work[3].shape[0] < total or stack.shape[0] < _close_room(total, num_real, nfa[9]):
        return 2
    return _row_kernel(s, nfa, reg, num_real, store, max_states, work, total)


@njit(cache=True, nogil=True)
def make_room(s, nfa, reg, num_real, store, work):  # type: ignore[no-untyped-def]
    """Return the store and the scratch grown for the row of ``s`` (:func:`expand_row`).

    Room for a row's every class to be a new state, and for its largest possible subset.
    """
    mark, count, fill, bucket, stack, members = work[:6]
    ne = few_edges(
        store[2][s], store[2][s + 1], store[3], num_real, nfa[0], nfa[1], nfa[2], nfa[3], nfa[7],
        work[10],
    )  # fmt: skip
    total = ne if ne >= 0 else _count_targets(s, nfa, reg, num_real, store[2], store[3], count)
    room = _close_room(total, num_real, nfa[9])
    if bucket.shape[0] < total:
        bucket = np.empty(2 * total, np.int64)
    if stack.shape[0] < room:
        stack = np.empty(2 * room, np.int64)
        members = np.empty(2 * room, np.int64)
    work = (mark, count, fill, bucket, stack, members) + work[6:]
    return _reserve(store, fill.shape[0], room), work


@njit(cache=True, nogil=True, inline="always")
def _state_of(members, k, trans, set_ptr, pool, hashes, htab, meta, max_states):  # type: ignore[no-untyped-def]
    """Return the state of subset ``members[:k]``, added if new (the store's arrays).

    -1 when a new state would pass ``max_states``, -2 when the store has no room for it.
    """
    d, slot = _find(members, k, hashes, htab, set_ptr, pool)
    if d >= 0:
        return d
    n = meta[0]
    if n >= max_states:
        return -1
    if n >= trans.shape[0] or set_ptr[n] + k > pool.shape[0] or 2 * (n + 1) > htab.shape[0]:
        return -2
    return _add(members, k, slot, set_ptr, pool, hashes, htab, meta)


@njit(cache=True, nogil=True, inline="always")
def _runs_row(s, nfa, reg, num_real, store, max_states, work, runs):  # type: ignore[no-untyped-def]
    """Build the row of ``s`` from its ``runs`` runs of classes (:func:`expand_row`)."""
    eptr, edst, keep, live, vptr, vreg = nfa[4], nfa[5], nfa[6], nfa[7], nfa[8], nfa[9]
    mark, stack, members, gen_box, row_out = work[0], work[4], work[5], work[6], work[7]
    run_lo, run_hi, run_ptr, run_tgt = work[12], work[13], work[14], work[15]
    trans, expanded, set_ptr, pool, hashes, htab, meta, order = store
    row_out[:] = -1
    d = -1
    for j in range(runs):
        p, q = run_ptr[j], run_ptr[j + 1]
        # runs often have the previous run's targets (classes apart): reuse its state
        if not same_targets(j, run_ptr, run_tgt):
            gen_box[0] += 1
            k = _close(
                run_tgt[p:q], q - p, num_real, eptr, edst, keep, live, vptr, vreg, reg, mark,
                gen_box[0], stack, members,
            )  # fmt: skip
            d = -1
            if k > 0:
                d = _state_of(members, k, trans, set_ptr, pool, hashes, htab, meta, max_states)
                if d < 0:
                    return 1 if d == -1 else 2
        if d >= 0:
            for c in range(run_lo[j], run_hi[j] + 1):
                row_out[c] = d
    trans[s, :] = row_out
    expanded[s] = True
    order[meta[1]] = s
    meta[1] += 1
    return 0


@njit(cache=True, nogil=True, inline="always")
def _alive(r, count, q, reg):  # type: ignore[no-untyped-def]
    """Whether state ``q`` of region ``r`` at ``count`` items can still leave the region."""
    r_lo, r_hi, r_boff, r_nw, r_nbits, rbits = reg[1], reg[2], reg[9], reg[10], reg[11], reg[12]
    top = r_nbits[r] - 1
    hi = min(r_hi[r] - count, top)
    lo = min(max(r_lo[r] - count, 0), top)
    if hi < lo:
        return False
    base = r_boff[r] + q * r_nw[r]
    for w in range(lo >> 6, (hi >> 6) + 1):
        word = rbits[base + w]
        if w == lo >> 6:
            word &= ~np.uint64(0) << np.uint64(lo & 63)
        if w == hi >> 6 and (hi & 63) != 63:
            word &= (np.uint64(1) << np.uint64((hi & 63) + 1)) - np.uint64(1)
        if word != 0:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _region_step(v, r, count, q, c, nfa, reg, C):  # type: ignore[no-untyped-def]
    """Return the virtual state a byte of class ``c`` leads to from virtual ``v``; -1: none.

    ``v`` is state ``q`` of region ``r`` at ``count`` items. None where the item or the other
    DFA dies, or where the target could never leave the region (:func:`_alive`).
    """
    xtrans, r_toff, atrans, r_aoff = nfa[10], nfa[11], nfa[12], nfa[13]
    w, r_iw = reg[3][r], reg[6]
    a = q // r_iw[r]
    q2 = xtrans[r_toff[r] + (q - a * r_iw[r]) * C + c]
    if q2 == -1:
        return -1
    a2 = atrans[r_aoff[r] + a * C + c]
    if a2 < 0:
        return -1
    t = a2 * r_iw[r]
    count0 = count
    if q2 == -2:  # X complete: the next count's boundary
        count += 1
    else:
        t += q2
    if not _alive(r, count, t, reg):
        return -1
    return v - q + (count - count0) * w + t


@njit(cache=True, nogil=True)
def _count_targets(s, nfa, reg, num_real, set_ptr, pool, count):  # type: ignore[no-untyped-def]
    """Count the targets of ``s``'s members by class into ``count[1:]``; return the total."""
    bptr, bcls_lo, bcls_hi, bdst, live = nfa[0], nfa[1], nfa[2], nfa[3], nfa[7]
    C = count.shape[0] - 1
    count[:] = 0
    total = 0
    for i in range(set_ptr[s], set_ptr[s + 1]):
        v = pool[i]
        if v < num_real:
            for e in range(bptr[v], bptr[v + 1]):
                if live[bdst[e]]:
                    for c in range(bcls_lo[e], bcls_hi[e] + 1):
                        count[c + 1] += 1
                    total += bcls_hi[e] - bcls_lo[e] + 1
        else:
            r = _region_of(v, num_real, reg[4])
            off = v - num_real - reg[4][r]
            n = off // reg[3][r]
            q = off - n * reg[3][r]
            if reg[3][r] == reg[6][r]:  # a plain region: every state it reaches can leave it
                row = nfa[11][r] + q * C
                for c in range(C):
                    if nfa[10][row + c] != -1:
                        count[c + 1] += 1
                        total += 1
                continue
            for c in range(C):
                if _region_step(v, r, n, q, c, nfa, reg, C) >= 0:
                    count[c + 1] += 1
                    total += 1
    return total


@njit(cache=True, nogil=True, inline="always")
def _row_kernel(s, nfa, reg, num_real, store, max_states, work, total):  # type: ignore[no-untyped-def]
    """Build the row of ``s`` (counts by :func:`_count_targets`, room by :func:`expand_row`)."""
    bptr, bcls_lo, bcls_hi, bdst = nfa[0], nfa[1], nfa[2], nfa[3]
    eptr, edst, keep, live, vptr, vreg = nfa[4], nfa[5], nfa[6], nfa[7], nfa[8], nfa[9]
    r_width, r_base, r_iw = reg[3], reg[4], reg[6]
    mark, count, fill, bucket, stack, members, gen_box, row_out, single_v, single_d = work[:10]
    trans, expanded, set_ptr, pool, hashes, htab, meta, order = store
    C = fill.shape[0]
    a = set_ptr[s]
    b = set_ptr[s + 1]
    row_out[:] = -1
    if total > 0:
        for c in range(C):
            count[c + 1] += count[c]
            fill[c] = count[c]
        for i in range(a, b):
            v = pool[i]
            if v < num_real:
                for e in range(bptr[v], bptr[v + 1]):
                    t = bdst[e]
                    if live[t]:
                        for c in range(bcls_lo[e], bcls_hi[e] + 1):
                            bucket[fill[c]] = t
                            fill[c] += 1
            else:
                r = _region_of(v, num_real, r_base)
                off = v - num_real - r_base[r]
                n = off // r_width[r]
                q = off - n * r_width[r]
                if r_width[r] == r_iw[r]:  # a plain region
                    row = nfa[11][r] + q * C
                    for c in range(C):
                        q2 = nfa[10][row + c]
                        if q2 != -1:  # X complete: the next count's start
                            bucket[fill[c]] = v - q + (r_width[r] if q2 == -2 else q2)
                            fill[c] += 1
                    continue
                for c in range(C):
                    t = _region_step(v, r, n, q, c, nfa, reg, C)
                    if t >= 0:
                        bucket[fill[c]] = t
                        fill[c] += 1
    prev = -1
    # classes with one target each (most of a counted region's row), and their states
    n_single = 0
    for c in range(C):
        if count[c] == count[c + 1]:
            continue
        if prev >= 0 and count[c + 1] - count[c] == count[prev + 1] - count[prev]:
            same = True
            off2 = count[prev] - count[c]
            for i in range(count[c], count[c + 1]):
                if bucket[i] != bucket[i + off2]:
                    same = False
                    break
            if same:
                row_out[c] = row_out[prev]
                prev = c
                continue
        prev = c
        v = bucket[count[c]]
        if count[c + 1] - count[c] == 1:  # one target: maybe an earlier class's
            found = -1
            for j in range(n_single):
                if single_v[j] == v:
                    found = single_d[j]
                    break
            if found >= 0:
                row_out[c] = found
                continue
        k = 0
        if count[c + 1] - count[c] == 1 and v >= num_real:
            r = _region_of(v, num_real, r_base)
            if (v - num_real - r_base[r]) % r_width[r] % r_iw[r] != 0:  # inside an item
                members[0] = v
                k = 1
        if k == 0:
            gen_box[0] += 1
            k = _close(
                bucket[count[c] : count[c + 1]], count[c + 1] - count[c], num_real, eptr,
                edst, keep, live, vptr, vreg, reg, mark, gen_box[0], stack, members,
            )  # fmt: skip
            if k == 0:
                continue
        d = _state_of(members, k, trans, set_ptr, pool, hashes, htab, meta, max_states)
        if d < 0:
            return 1 if d == -1 else 2
        row_out[c] = d
        if count[c + 1] - count[c] == 1:
            single_v[n_single] = v
            single_d[n_single] = d
            n_single += 1
    trans[s, :] = row_out
    expanded[s] = True
    order[meta[1]] = s  # the rows in the order they were built
    meta[1] += 1  # rows built so far
    return 0


@njit(cache=True, nogil=True, inline="always")
def new_work(mark, gen_box, num_classes):  # type: ignore[no-untyped-def]
    """Return the scratch of :func:`expand_row`: marks, counts, buckets, a stamp, rows, runs.

    The edges and runs are :func:`_runs_row`'s. The marks and their generation are the lazy
    DFA's own (``LazyLexer``), kept between calls: a generation only grows, so marks need no
    clearing, and zeroing ``num_real`` of them anew cost ~12 µs a call for a schema of 96,000
    NFA states, where most calls build one row or none. The rest is small and made here
    (returned to Python, every array is boxed).
    """
    return (
        mark,
        np.zeros(num_classes + 1, np.int64),
        np.zeros(num_classes, np.int64),
        np.empty(64, np.int64),
        np.empty(64, np.int64),
        np.empty(64, np.int64),
        gen_box,
        np.empty(num_classes, np.int32),
        np.empty(num_classes, np.int64),
        np.empty(num_classes, np.int32),
        np.empty((3, FEW_EDGES), np.int64),
        np.empty(2 * FEW_EDGES, np.int64),
        np.empty(num_classes, np.int64),
        np.empty(num_classes, np.int64),
        np.zeros(num_classes + 1, np.int64),
        np.empty(2 * FEW_EDGES * FEW_EDGES, np.int64),
    )


@njit(cache=True, nogil=True)
def lazy_bits_kernel(  # type: ignore[no-untyped-def]
    set_ptr, pool, lo, hi, num_real, tag, comp, groups, r_base, r_comp, accept_bits, alive_bits
):
    """Write the terminal bitsets of DFA states ``lo .. hi - 1`` (rows of the outputs).

    Bit ``t`` of ``accept_bits[s]`` is set when a real member accepts terminal ``t``, of
    ``alive_bits[s]`` when a member (real, or virtual in a region of terminal ``t``) belongs
    to terminal ``t``; ``groups`` as for :func:`~constrain.kernels.numba_subsets.
    state_bits_kernel`. Rows ``lo .. hi - 1`` must be zero on entry.
    """
    for s in range(lo, hi):
        for i in range(set_ptr[s], set_ptr[s + 1]):
            v = pool[i]
            if v < num_real:
                t = tag[v]
                if t >= 0:
                    set_terminal_bits(accept_bits, s, t, groups)
                t = comp[v]
            else:
                t = r_comp[_region_of(v, num_real, r_base)]
            if t >= 0:
                set_terminal_bits(alive_bits, s, t, groups)
