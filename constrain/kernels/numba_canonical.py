"""Kernels of canonical tokenization: BPE derivations and the pairs a BPE tokenizer never writes.

A BPE tokenizer merges adjacent pieces in rank order (the lowest rank first, the leftmost of
equal ranks first). Two tokens ``a b`` inside one pre-token are its canonical encoding only if
no merge across their boundary fires before both are complete (Vieira et al., "Language Models
over Canonical Byte-Pair Encodings", ICML 2025): with ``x`` on the right spine of ``a``'s merge
tree (``a``, its right child, that one's right child, ... down to a byte), alive until its parent
merge ``px`` (``a`` itself: forever), and ``y`` on the left spine of ``b`` (alive until ``py``),
a merge ``(x, y)`` of rank ``k`` conflicts when both exist by then (``rank[x] < k``,
``rank[y] < k``), ``k < px`` (on ``a``'s side the leftmost merge wins a tie) and ``k <= py``.

:func:`conflict_row_kernel` marks every ``b`` that conflicts with one ``a`` in one pass over the
merges that start with a node of ``a``'s right spine; :func:`derive_kernel` runs BPE on every
token's own bytes and records its last merge (its derivation). The naive definitions they
implement are in ``tests/reference.py`` (``bpe_encode`` on the pair's bytes).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["conflict_row_kernel", "derive_kernel", "merge_lookup", "spines_kernel"]

NO_PARENT = np.int64(2**62)


@njit(cache=True, nogil=True)
def merge_lookup(keys, x, y, vocab_size):  # type: ignore[no-untyped-def]
    """Return the index of merge ``(x, y)`` in the sorted ``keys`` (``x * V + y``), or -1."""
    key = np.int64(x) * vocab_size + y
    i = np.searchsorted(keys, key)
    if i < keys.shape[0] and keys[i] == key:
        return i
    return -1


@njit(cache=True, nogil=True)
def derive_kernel(  # type: ignore[no-untyped-def]
    indptr,
    data,
    byte_token,
    char_keys,
    char_ids,
    keys,
    mrank,
    mresult,
    vocab_size,
    left,
    right,
    rank,
    standalone,
):
    """Run BPE on every token's bytes; record each token's last merge and whether it is whole.

    The first pieces are bytes (``byte_token``), or, where ``char_keys`` (sorted, a multi-byte
    character's UTF-8 bytes packed big-endian) holds a character, that character's token
    ``char_ids`` (SentencePiece-style BPE starts from characters, bytes only as a fallback).
    ``left[t], right[t]`` are the two pieces the last merge of ``t``'s own BPE joined and
    ``rank[t]`` that merge's rank (-1 for a first piece); ``standalone[t]`` is 1 when BPE of
    ``t``'s bytes gives ``t`` alone.
    """
    n = indptr.shape[0] - 1
    pieces = np.empty(4096, dtype=np.int64)
    for t in range(n):
        a, b = indptr[t], indptr[t + 1]
        if b == a or b - a > 4096:
            continue
        m = 0
        i = a
        ok = True
        while i < b:
            lead = data[i]
            width = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            found = -1
            if width > 1 and i + width <= b and char_keys.shape[0] > 0:
                key = np.int64(0)
                for k in range(width):
                    key = key * 256 + data[i + k]
                j = np.searchsorted(char_keys, key)
                if j < char_keys.shape[0] and char_keys[j] == key:
                    found = char_ids[j]
            if found >= 0:
                pieces[m] = found
                m += 1
                i += width
                continue
            p = byte_token[data[i]]
            if p < 0:
                ok = False
                break
            pieces[m] = p
            m += 1
            i += 1
        if not ok:
            continue
        last_l = -1
        last_r = -1
        last_k = np.int64(-1)
        while m > 1:
            best = NO_PARENT
            at = -1
            hit = -1
            for i in range(m - 1):
                j = merge_lookup(keys, pieces[i], pieces[i + 1], vocab_size)
                if j >= 0 and mrank[j] < best:
                    best = mrank[j]
                    at = i
                    hit = j
            if at < 0:
                break
            last_l = pieces[at]
            last_r = pieces[at + 1]
            last_k = best
            pieces[at] = mresult[hit]
            for i in range(at + 1, m - 1):
                pieces[i] = pieces[i + 1]
            m -= 1
        if m == 1 and pieces[0] == t:
            standalone[t] = 1
            left[t] = last_l
            right[t] = last_r
            rank[t] = last_k


@njit(cache=True, nogil=True)
def spines_kernel(child, rank, standalone, ptr, node, parent):  # type: ignore[no-untyped-def]
    """Fill one spine per whole token: ``t``, ``child[t]``, ``child[child[t]]`` ... (CSR).

    ``parent[i]`` is the rank of the merge that consumes ``node[i]`` (``NO_PARENT`` for ``t``).
    ``ptr`` has the offsets already (each spine's length computed by the caller).
    """
    for t in range(standalone.shape[0]):
        if not standalone[t]:
            continue
        i = ptr[t]
        x = t
        p = NO_PARENT
        while x >= 0:
            node[i] = x
            parent[i] = p
            i += 1
            p = rank[x]
            x = child[x]


@njit(cache=True, nogil=True)
def conflict_row_kernel(  # type: ignore[no-untyped-def]
    a, rs_ptr, rs_node, rs_parent, m_ptr, m_right, m_rank, rank, occ_ptr, occ_tok, occ_parent, out
):
    """Set ``out[b] = 1`` for every ``b`` whose pair ``(a, b)`` has a conflicting merge.

    ``m_*`` is the merge table by left piece (CSR over ``m_ptr``); ``occ_*`` lists, per piece
    ``y``, the tokens with ``y`` on their left spine and the rank that consumes it there,
    sorted by that rank, highest first (so the conflicting ones are a prefix).
    """
    for i in range(rs_ptr[a], rs_ptr[a + 1]):
        x = rs_node[i]
        px = rs_parent[i]
        rx = rank[x]
        for j in range(m_ptr[x], m_ptr[x + 1]):
            k = m_rank[j]
            if k >= px or k <= rx:
                continue
            y = m_right[j]
            if rank[y] >= k:
                continue
            for o in range(occ_ptr[y], occ_ptr[y + 1]):
                if occ_parent[o] < k:
                    break
                out[occ_tok[o]] = 1
