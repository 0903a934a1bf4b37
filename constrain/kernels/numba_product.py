"""Numba kernel of the lazy lexer's product regions: which item counts still lead to acceptance.

A product region ``X{lo,hi} & A`` (:class:`~constrain.automata.nfa_parts.CountedRegion` with
``other``) is run by :mod:`constrain.kernels.numba_lazy` with a count, a state of ``A`` and a
state of the item ``X``. To keep the lazy DFA trim, a virtual state is kept only if some
number of items still to read, allowed by its count, ends at an accepting boundary of ``A``:
:func:`product_counts_kernel` computes those numbers per state, as bits. The naive oracle is
the eager product (the tests compare the lazy and the eager lexers state by state).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["product_counts_kernel"]


@njit(cache=True, nogil=True)
def product_counts_kernel(atrans, accept, xtrans, width, order, hi, max_words):  # type: ignore[no-untyped-def]
    """Return, per state of a product region, the item counts that lead to acceptance.

    ``atrans`` is the other DFA ``A`` over the lexer's classes (``(nA * C,)``, -1 dead) and
    ``accept`` its accepting states; ``xtrans`` the item's table (``(width * C,)``, -1 dead,
    -2 complete; item state 0 its start) and ``order`` its states other than 0, each after
    the states it moves to (the item is acyclic). A state is ``a * width + x``.

    Returns ``(bits, nbits, ok)``: bit ``m < nbits - 1`` of state ``p``'s ``nw`` words says
    that completing exactly ``m`` more items (the current one included) can end at an
    accepting boundary of ``A``; the last bit says so of every ``m >= nbits - 1`` (the sets
    of boundaries that accept after ``m`` items stop changing there), or only of
    ``nbits - 1 = hi`` when they change up to ``hi``. ``ok`` is False when that needs more
    than ``max_words`` words, or the sets still change at ``hi`` past 4,096.
    """
    n_a = accept.shape[0]
    C = atrans.shape[0] // max(n_a, 1)
    # the boundaries one item leads to from each boundary, as a CSR (two passes)
    seen = np.zeros(n_a * width, np.int64)
    hit = np.zeros(n_a, np.int64)
    stack = np.empty(n_a * width + 1, np.int64)
    ptr = np.zeros(n_a + 1, np.int64)
    dst = np.empty(0, np.int64)
    for fill in range(2):
        used = 0
        for a0 in range(n_a):
            stamp = fill * n_a + a0 + 1
            top = 1
            stack[0] = a0 * width
            seen[a0 * width] = stamp
            while top > 0:
                top -= 1
                p = stack[top]
                a = p // width
                x = p - a * width
                for c in range(C):
                    x2 = xtrans[x * C + c]
                    a2 = atrans[a * C + c] if x2 != -1 else -1
                    if a2 < 0:
                        continue
                    if x2 == -2:
                        if hit[a2] != stamp:
                            hit[a2] = stamp
                            if fill == 1:
                                dst[used] = a2
                            used += 1
                    elif seen[a2 * width + x2] != stamp:
                        seen[a2 * width + x2] = stamp
                        stack[top] = a2 * width + x2
                        top += 1
            if fill == 0:
                ptr[a0 + 1] = used
        if fill == 0:
            dst = np.empty(used, np.int64)
    # B_m: the boundaries that accept after exactly m items; B_{m+1} = pre(B_m)
    cur = accept.copy()
    last = -1  # B_last = B_{last + 1}: stable from there
    m = 0
    cap = 64
    layers = np.zeros((cap, n_a), np.bool_)
    while True:
        if m == cap:
            grown = np.zeros((2 * cap, n_a), np.bool_)
            grown[:cap] = layers
            layers = grown
            cap *= 2
        layers[m] = cur
        if m == hi:
            break
        nxt = np.zeros(n_a, np.bool_)
        for a in range(n_a):
            for i in range(ptr[a], ptr[a + 1]):
                if cur[dst[i]]:
                    nxt[a] = True
                    break
        same = True
        for a in range(n_a):
            if nxt[a] != cur[a]:
                same = False
                break
        if same:
            last = m
            break
        if m >= 4096:
            return np.zeros(0, np.uint64), 0, False
        cur = nxt
        m += 1
    nbits = min(last + 2, hi + 1) if last >= 0 else hi + 1
    nw = (nbits + 63) // 64
    if n_a * width * nw > max_words:
        return np.zeros(0, np.uint64), 0, False
    bits = np.zeros(n_a * width * nw, np.uint64)
    one = np.uint64(1)
    for a in range(n_a):
        base = a * width * nw
        for j in range(nbits):
            if layers[min(j, m)][a]:
                bits[base + (j >> 6)] |= one << np.uint64(j & 63)
    # inside an item: the counts of its ways to finish, shifted by the item, successors first
    top_mask = (one << np.uint64(nbits & 63)) - one if nbits & 63 else ~np.uint64(0)
    for j in range(order.shape[0]):
        x = order[j]
        for a in range(n_a):
            p = (a * width + x) * nw
            for c in range(C):
                x2 = xtrans[x * C + c]
                if x2 == -1:
                    continue
                a2 = atrans[a * C + c]
                if a2 < 0:
                    continue
                if x2 == -2:  # the item completes: the boundary's counts, one more
                    q = a2 * width * nw
                    carry = np.uint64(0)
                    for w in range(nw):
                        word = bits[q + w]
                        bits[p + w] |= (word << one) | carry
                        carry = word >> np.uint64(63)
                else:
                    q = (a2 * width + x2) * nw
                    for w in range(nw):
                        bits[p + w] |= bits[q + w]
            bits[p + nw - 1] &= top_mask
    return bits, nbits, True
