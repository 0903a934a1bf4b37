"""Token-table kernels: the pools that store entries and the index that finds them.

A :class:`~constrain.tables.MaskTables` appends each entry it builds to pooled arrays
(``store_entry_kernel``: the within tokens as a row of ``w_pool`` or a short list in
``w_extra``, the candidates as CSR) and indexes it by key, (lexer state, Earley kernel), in an
open-addressing table that kernels read (``find_entry``: the matcher's fill finds its entries
itself). The entries are built by :mod:`constrain.kernels.numba_tables`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = [
    "entry_hash",
    "find_entry",
    "index_add",
    "index_insert",
    "index_rehash",
    "store_entry_kernel",
]


# -- the entry index: (lexer state, Earley kernel) -> entry id, readable from kernels ----------
#
# An open-addressing table: per slot the hash (``h_keys``, -1 when empty), the entry id
# (``h_entry``) and the key itself (``h_state``, kernel ``k_pool[h_koff:h_koff + h_klen]``),
# compared in full on every hit, so a hash collision can never return a wrong entry. Several keys
# may share an entry (equal build inputs). Writers fill a slot's key and entry first and its
# hash last; a reader that meets an entry beyond its snapshot's ``num_entries`` treats it as a
# miss.


@njit(cache=True, nogil=True)
def entry_hash(state: int, kernel: np.ndarray, n: int) -> int:
    """Hash ``(state, kernel[:n])`` to 31 bits (no overflow: the same with and without JIT)."""
    h = (int(state) * 40503 + 2166136261) & 0x7FFFFFFF
    for j in range(n):
        h = ((h ^ (int(kernel[j]) & 0x7FFFFFFF)) * 16777619) & 0x7FFFFFFF
    return h


@njit(cache=True, nogil=True)
def find_entry(state: int, kernel: np.ndarray, n: int, index: tuple[Any, ...]) -> int:
    """Return the entry id of ``(state, kernel[:n])``, or -1 when it is not (yet) in the index.

    ``index`` is a snapshot's ``(h_keys, h_entry, h_state, h_koff, h_klen, k_pool,
    num_entries)``: the slots (hash, entry, key state, key offset and length in ``k_pool``)
    and the entries visible in that snapshot.
    """
    h_keys, h_entry, h_state, h_koff, h_klen, k_pool, num_entries = index
    h = entry_hash(state, kernel, n)
    mask = h_keys.shape[0] - 1
    slot = (int(h) * 0x9E3779B1) & mask
    for _ in range(h_keys.shape[0]):
        k = h_keys[slot]
        if k == -1:
            return -1
        if k == h and h_state[slot] == state and h_klen[slot] == n:
            e = h_entry[slot]
            if 0 <= e < num_entries:
                base = h_koff[slot]
                same = True
                for j in range(n):
                    if k_pool[base + j] != kernel[j]:
                        same = False
                        break
                if same:
                    return int(e)
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def index_insert(h: int, e: int, state: int, koff: int, klen: int, slots: tuple[Any, ...]) -> None:
    """Put key ``(state, k_pool[koff:koff + klen])`` of hash ``h`` -> entry ``e`` in a free slot.

    ``slots`` is ``(h_keys, h_entry, h_state, h_koff, h_klen)``, the first five arrays of an
    index (:func:`find_entry`).
    """
    h_keys, h_entry, h_state, h_koff, h_klen = slots
    mask = h_keys.shape[0] - 1
    slot = (int(h) * 0x9E3779B1) & mask
    while h_keys[slot] != -1:
        slot = (slot + 1) & mask
    h_entry[slot] = e
    h_state[slot] = state
    h_koff[slot] = koff
    h_klen[slot] = klen
    h_keys[slot] = h


@njit(cache=True, nogil=True)
def index_add(
    state: int, kernel: np.ndarray, e: int, k_pool: np.ndarray, koff: int, slots: tuple[Any, ...]
) -> None:
    """Copy ``kernel`` to ``k_pool[koff:]`` and index ``(state, kernel)`` -> entry ``e``.

    The caller has made room in ``k_pool`` and kept the ``slots`` (:func:`index_insert`) at
    most half full.
    """
    n = kernel.shape[0]
    for j in range(n):
        k_pool[koff + j] = kernel[j]
    h = entry_hash(state, kernel, n)
    index_insert(h, e, state, koff, n, slots)


@njit(cache=True, nogil=True)
def index_rehash(slots: tuple[Any, ...], new_slots: tuple[Any, ...]) -> None:
    """Insert every occupied slot of ``slots`` into the (empty, larger) ``new_slots``."""
    h_keys, h_entry, h_state, h_koff, h_klen = slots
    for slot in range(h_keys.shape[0]):
        if h_keys[slot] != -1:
            index_insert(h_keys[slot], h_entry[slot], h_state[slot], h_koff[slot],
                         h_klen[slot], new_slots)  # fmt: skip


# bit index of a uint32 power of two p: _DEBRUIJN[((p * 0x077CB531) mod 2**32) >> 27]
_DEBRUIJN = np.array(
    [0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
     31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9],
    dtype=np.int64,
)  # fmt: skip


@njit(cache=True, nogil=True)
def store_entry_kernel(
    e: int,
    within: np.ndarray,
    base: int,
    free_row: int,
    limit: int,
    cands: np.ndarray,
    lcp: np.ndarray,
    nc: int,
    pools: tuple[Any, ...],
) -> int:
    """Store entry ``e`` in the mask tables' pools; return the ``w_pool`` rows it took (0, 1).

    ``pools`` is ``(w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp)``, the first
    arrays of a ``tables.TableSnapshot``'s ``arrays`` (possibly grown copies). The within bitset
    ``within`` is kept as row ``base`` of ``w_pool`` (its tokens a part of ``within``; none when
    -1) plus the list of the other tokens, in increasing order, at ``w_extra[w_indptr[e]:]``,
    when that list has at most ``limit`` tokens; else ``within`` is copied to row ``free_row``.
    The candidates ``cands[:nc]``, ``lcp[:nc]`` go to ``c_tokens``, ``c_lcp`` from
    ``c_indptr[e]``. The caller has made room for all of it.
    """
    w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp = pools
    start = w_indptr[e]
    n = 0
    dense = False
    for w in range(within.shape[0]):
        x = int(within[w] & ~w_pool[base, w]) if base >= 0 else int(within[w])
        while x != 0:
            if n >= limit:
                dense = True
                break
            low = x & -x
            w_extra[start + n] = 32 * w + _DEBRUIJN[((low * 0x077CB531) & 0xFFFFFFFF) >> 27]
            n += 1
            x ^= low
        if dense:
            break
    if dense:
        for w in range(within.shape[0]):
            w_pool[free_row, w] = within[w]
        w_row[e] = free_row
        w_indptr[e + 1] = start
    else:
        w_row[e] = base
        w_indptr[e + 1] = start + n
    c_start = c_indptr[e]
    for j in range(nc):
        c_tokens[c_start + j] = cands[j]
        c_lcp[c_start + j] = lcp[j]
    c_indptr[e + 1] = c_start + nc
    return 1 if dense else 0
