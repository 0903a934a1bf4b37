"""The flat DFS token trie of a :class:`constrain.Vocabulary`, built with vectorised numpy.

Layout (llguidance ``docs/toktrie.md``): node 0 is the root; in DFS pre-order the first child of
node ``n`` is ``n + 1`` when ``n + 1 < node_end[n]`` and the next sibling of a child ``c`` is
``node_end[c]``; children are sorted by byte. ``node_token`` holds the smallest id spelling the
node's path and ``token_next_dup`` chains the other ids with the same bytes.

The oracle is ``naive_token_trie`` in ``tests/reference.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from constrain._types import BYTE_DTYPE, TOKEN_DTYPE, ByteArray, Int32Array, Int64Array
from constrain.errors import VocabularyError

__all__ = ["Trie", "build_trie", "check_trie", "frozen"]


class Trie(NamedTuple):
    """The flat token trie arrays (see :class:`constrain.Vocabulary`)."""

    node_byte: ByteArray
    node_token: Int32Array
    node_end: Int32Array
    node_depth: Int32Array
    token_next_dup: Int32Array


def frozen(a: np.ndarray[Any, Any]) -> Any:
    """Make ``a`` read-only and return it."""
    a.setflags(write=False)
    return a


def build_trie(indptr: Int64Array, data: ByteArray) -> Trie:
    """Build the flat DFS token trie (see the module docstring) with vectorised numpy.

    Sort the non-empty byte strings (stable, so equal strings keep ascending ids), take the
    longest common prefix (LCP) of neighbours; in sorted order token ``k`` adds the nodes at depths
    ``lcp_k + 1 .. len_k``, which is exactly DFS pre-order; ``node_end`` is each node plus its
    subtree size, summed bottom-up one depth level at a time.
    """
    v = indptr.shape[0] - 1
    lens_all = np.diff(indptr)
    ids = np.flatnonzero(lens_all > 0)
    n = ids.shape[0]
    next_dup = np.full(v, -1, dtype=TOKEN_DTYPE)
    if n == 0:
        root = Trie(
            np.zeros(1, BYTE_DTYPE),
            np.full(1, -1, TOKEN_DTYPE),
            np.ones(1, TOKEN_DTYPE),
            np.zeros(1, TOKEN_DTYPE),
            next_dup,
        )
        return Trie(*(frozen(a) for a in root))
    starts = indptr[ids]
    lens = lens_all[ids]
    width = int(min(32, -(-int(lens.max()) // 8) * 8))
    padded = _padded_prefixes(data, starts, lens, width)
    perm = _sort_order(padded, lens, width, data, starts)
    order = ids[perm]
    lens = lens[perm]
    lcp = _neighbour_lcp(padded[perm], lens, width, data, starts[perm])
    dup = np.zeros(n, dtype=bool)
    dup[1:] = (lcp[1:] == lens[1:]) & (lens[1:] == lens[:-1])
    next_dup[order[:-1][dup[1:]]] = order[1:][dup[1:]]
    count = np.where(dup, 0, lens - lcp)  # nodes added by each sorted token
    m = 1 + int(count.sum())
    first = 1 + np.cumsum(count) - count  # position of each token's first new node
    owner = np.repeat(np.arange(n), count)  # sorted token that added node p (p >= 1)
    depth = np.zeros(m, dtype=TOKEN_DTYPE)
    depth[1:] = lcp[owner] + 1 + (np.arange(m - 1) - (first[owner] - 1))
    node_byte = np.zeros(m, dtype=BYTE_DTYPE)
    node_byte[1:] = data[indptr[order[owner]] + depth[1:] - 1]
    node_token = np.full(m, -1, dtype=TOKEN_DTYPE)
    node_token[(first + count - 1)[~dup]] = order[~dup]
    # node_end = node + subtree size; sizes summed bottom-up one depth level at a time, the
    # parent of a node being the last node one level up that precedes it (pre-order).
    max_depth = int(depth.max())
    small = np.int16 if max_depth < 2**15 else np.int32
    by_depth = np.argsort(depth.astype(small), kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(max_depth + 2))
    subtree = np.ones(m, dtype=np.int64)
    for d in range(max_depth, 0, -1):
        nodes = by_depth[bounds[d] : bounds[d + 1]]
        parents = by_depth[bounds[d - 1] : bounds[d]]
        slot = np.searchsorted(parents, nodes) - 1
        subtree[parents] += np.bincount(
            slot, weights=subtree[nodes], minlength=parents.shape[0]
        ).astype(np.int64)
    node_end = (np.arange(m) + subtree).astype(TOKEN_DTYPE)
    trie = Trie(node_byte, node_token, node_end, depth, next_dup)
    return Trie(*(frozen(a) for a in trie))


def _padded_prefixes(
    data: ByteArray, starts: Int64Array, lens: Int64Array, width: int
) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """``(n, width)`` uint8: the first ``width`` bytes of each string, zero-padded."""
    n = lens.shape[0]
    clipped = np.minimum(lens, width)
    padded = np.zeros((n, width), dtype=np.uint8)
    rows = np.repeat(np.arange(n), clipped)
    cols = np.arange(int(clipped.sum())) - np.repeat(np.cumsum(clipped) - clipped, clipped)
    padded[rows, cols] = data[np.repeat(starts, clipped) + cols]
    return padded


def _sort_order(
    padded: np.ndarray[Any, np.dtype[np.uint8]],
    lens: Int64Array,
    width: int,
    data: ByteArray,
    starts: Int64Array,
) -> Int64Array:
    """Stable lexicographic order of the strings.

    Sorting by (zero-padded prefix, length) is exact for strings of at most ``width`` bytes: a
    shorter string that pads to the same prefix is a prefix of the other. Strings longer than
    ``width`` that share their prefix end each such group; those runs are re-sorted in Python.
    """
    keys = padded.view(f"S{width}").ravel()
    perm = np.lexsort((lens, keys))
    sorted_keys, sorted_long = keys[perm], lens[perm] > width
    tie = (sorted_keys[1:] == sorted_keys[:-1]) & sorted_long[1:] & sorted_long[:-1]
    if tie.any():
        edges = np.diff(np.concatenate(([0], tie.view(np.int8), [0])))
        buf = data.tobytes()
        for lo, hi in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
            run = perm[lo : hi + 1].tolist()
            perm[lo : hi + 1] = sorted(
                run, key=lambda r: buf[int(starts[r]) : int(starts[r] + lens[r])]
            )
    return perm


def _neighbour_lcp(
    padded: np.ndarray[Any, np.dtype[np.uint8]],
    lens: Int64Array,
    width: int,
    data: ByteArray,
    starts: Int64Array,
) -> Int64Array:
    """Longest common prefix of each sorted string with the previous one (0 for the first).

    Compares the zero-padded first ``width`` bytes as little-endian uint64 words (the lowest
    differing byte of the XOR is the first mismatch); the rare neighbours that agree on all
    ``width`` bytes and are longer are finished in Python.
    """
    n = lens.shape[0]
    words = padded.view("<u8")
    x = words[1:] ^ words[:-1]
    nz = x != 0
    w = nz.argmax(axis=1)
    xw = x[np.arange(n - 1), w]
    low = xw & (~xw + np.uint64(1))
    bit = np.frexp(low.astype(np.float64))[1] - 1
    mismatch = np.where(nz.any(axis=1), w * 8 + bit // 8, width)
    lcp = np.zeros(n, dtype=np.int64)
    lcp[1:] = np.minimum(mismatch, np.minimum(lens[1:], lens[:-1]))
    for k in np.flatnonzero(lcp[1:] >= width).tolist():
        a0, b0 = int(starts[k]), int(starts[k + 1])
        limit = int(min(lens[k], lens[k + 1]))
        a = data[a0 : a0 + limit]
        b = data[b0 : b0 + limit]
        diff = np.flatnonzero(a != b)
        lcp[k + 1] = int(diff[0]) if diff.size else limit
    return lcp


def check_trie(trie: Trie, indptr: Int64Array, data: ByteArray) -> None:
    """Check that ``trie`` is exactly ``build_trie(indptr, data)`` (a trie read from a file).

    Vectorised, in O(M + N) for M nodes and N token bytes, without sorting the tokens (a few
    milliseconds for Llama 3, a fraction of a rebuild). The checks, in order:

    * shape: the depths are a pre-order depth sequence (root 0, then each node at most one
      deeper than the node before it), which fixes the tree; ``node_end`` is right when every
      subtree ends at a node no deeper than its root (or at ``M``) and every node lies in
      exactly ``depth + 1`` of the intervals ``[n, node_end[n])`` (its ancestors and itself);
    * tokens: every leaf holds a token, ``node_token`` holds ids of the token's byte length,
      ``token_next_dup`` chains ascend through ids with equal bytes, and every non-special id
      sits in exactly one chain headed by a node's token;
    * bytes: the path of node ``n`` is read from the token of the last leaf under it; its last
      byte is ``node_byte[n]``, adjacent siblings' paths agree before their last byte and their
      bytes ascend strictly, and a token held by an inner node spells that node's path.

    Parameters
    ----------
    trie : Trie
        The arrays to check.
    indptr : (V + 1,) int64
        Valid CSR offsets of the token bytes.
    data : (N,) uint8
        The token bytes.

    Raises
    ------
    VocabularyError
        Naming the first property the arrays violate.
    """
    node_byte, node_token, node_end, node_depth, next_dup = trie
    size, m = indptr.shape[0] - 1, node_byte.shape[0]
    _need(
        node_byte.dtype == BYTE_DTYPE
        and all(a.dtype == TOKEN_DTYPE for a in trie[1:])
        and all(a.ndim == 1 for a in trie)
        and node_token.shape[0] == node_end.shape[0] == node_depth.shape[0] == m
        and next_dup.shape[0] == size,
        "the arrays' dtypes or lengths do not fit the vocabulary",
    )
    _need(1 <= m <= data.shape[0] + 1, f"{m} nodes for {data.shape[0]} token bytes")
    idx = np.arange(m, dtype=TOKEN_DTYPE)
    depth, end = node_depth, node_end  # int32: depth + 1 cannot wrap below the checks
    _need(
        node_end[0] == m and depth[0] == 0 and node_byte[0] == 0 and node_token[0] == -1,
        "the root (node 0) is malformed",
    )
    _need(
        bool((depth[1:] >= 1).all() and (depth[1:] <= depth[:-1] + 1).all()),
        "node_depth is not a pre-order depth sequence",
    )
    _need(bool(((end > idx) & (end <= m)).all()), "node_end has an index out of range")
    inner = end < m
    _need(bool((depth[end[inner]] <= depth[inner]).all()), "node_end does not end a subtree")
    cover = np.cumsum(1 - np.bincount(end, minlength=m + 1)[:m])
    _need(bool((cover == depth + 1).all()), "node_end does not match node_depth")

    lengths = np.diff(indptr)
    _need(
        bool(((node_token >= -1) & (node_token < size)).all()),
        "node_token has an id out of range",
    )
    _need(
        bool(((next_dup >= -1) & (next_dup < size)).all()), "token_next_dup has an id out of range"
    )
    leaf = end == idx + 1
    leaf[0] = False
    _need(bool((node_token[leaf] >= 0).all()), "a leaf holds no token")
    holders = np.flatnonzero(node_token >= 0)
    heads = node_token[holders].astype(np.int64)
    _need(bool((lengths[heads] == depth[holders]).all()), "a node holds a token of another length")
    src = np.flatnonzero(next_dup >= 0)
    dst = next_dup[src].astype(np.int64)
    _need(
        bool(
            (dst > src).all() and (lengths[src] == lengths[dst]).all() and (lengths[src] > 0).all()
        )
        and _same_bytes(data, indptr[src], indptr[dst], lengths[src]),
        "token_next_dup does not chain ascending ids of equal bytes",
    )
    in_degree = np.bincount(dst, minlength=size)
    held = np.bincount(heads, minlength=size)
    _need(
        bool(
            (in_degree <= 1).all()
            and (held <= 1).all()
            and ((held == 1) == ((lengths > 0) & (in_degree == 0))).all()
        ),
        "the trie's tokens are not the vocabulary's non-special tokens",
    )

    ref = np.full(m, -1, dtype=np.int64)  # the token of the last leaf under each node
    ref[1:] = node_token[end[1:] - 1]
    ref_start = indptr[np.maximum(ref, 0)]
    _need(
        bool((data[ref_start[1:] + depth[1:] - 1] == node_byte[1:]).all()),
        "node_byte disagrees with the tokens under the node",
    )
    sib = np.flatnonzero(inner)
    sib = sib[(sib > 0) & (depth[end[sib]] == depth[sib])]  # nodes with a next sibling
    nxt = end[sib]
    _need(bool((node_byte[sib] < node_byte[nxt]).all()), "siblings are not sorted by byte")
    inner_holders = holders[~leaf[holders]]
    _need(
        _same_bytes(  # siblings' paths agree before their last byte; inner tokens spell paths
            data,
            np.concatenate((ref_start[sib], indptr[node_token[inner_holders]])),
            np.concatenate((ref_start[nxt], ref_start[inner_holders])),
            np.concatenate((depth[sib] - 1, depth[inner_holders])),
        ),
        "a node's path disagrees with its sibling's or with the token it holds",
    )


def _need(ok: bool, problem: str) -> None:
    if not ok:
        raise VocabularyError(f"token trie: {problem}")


def _same_bytes(data: ByteArray, a: Int64Array, b: Int64Array, lens: Int64Array) -> bool:
    """Whether ``data[a[i]:a[i] + lens[i]] == data[b[i]:b[i] + lens[i]]`` for every ``i``."""
    lens = lens.astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return True
    out_start = np.cumsum(lens) - lens
    pos = np.arange(total, dtype=np.int64)
    return bool(
        (
            data[np.repeat(a - out_start, lens) + pos] == data[np.repeat(b - out_start, lens) + pos]
        ).all()
    )


def string_body_tokens(indptr: Int64Array, data: ByteArray, special: Int32Array) -> np.ndarray:
    r"""Return a bool mask of the tokens that are complete, raw JSON string-body text.

    A token qualifies when its bytes are valid UTF-8 made only of characters a JSON string may
    hold unescaped (``U+0020`` and up, except ``"`` and ``\\``). Inside a lexer state that loops
    on every such character, each of these tokens leaves the state unchanged (llguidance's
    "slicer" idea), so the mask can take them wholesale and walk only the others.
    """
    v = indptr.shape[0] - 1
    lens = np.diff(indptr)
    out = np.zeros(v, dtype=bool)
    if data.shape[0] == 0:
        return out
    starts = np.minimum(indptr[:-1], data.shape[0] - 1)
    bad = (data < 0x20) | (data == 0x22) | (data == 0x5C)
    high = data >= 0x80
    has_bad = np.add.reduceat(bad.astype(np.int32), starts) > 0
    has_high = np.add.reduceat(high.astype(np.int32), starts) > 0
    clean = (lens > 0) & ~has_bad
    out[clean & ~has_high] = True
    raw = data.tobytes()
    for t in np.flatnonzero(clean & has_high).tolist():
        try:
            raw[indptr[t] : indptr[t + 1]].decode("utf-8")  # strict: no surrogates, no overlongs
        except UnicodeDecodeError:
            continue
        out[t] = True
    out[special] = False
    return out


def subset_trie(indptr: Int64Array, data: ByteArray, keep: np.ndarray) -> Trie:
    """Return the trie of the tokens where ``keep`` is True (the others become absent)."""
    lens = np.diff(indptr)
    lens = np.where(keep, lens, 0)
    new_indptr = np.zeros_like(indptr)
    np.cumsum(lens, out=new_indptr[1:])
    pos = np.repeat(indptr[:-1] - new_indptr[:-1], lens) + np.arange(int(lens.sum()))
    return build_trie(new_indptr, np.ascontiguousarray(data[pos]))


def body_token_chars(indptr: Int64Array, data: ByteArray, special: Int32Array) -> Int64Array:
    """Return, per token, its characters where it is string-body text, else -1.

    String-body text as for :func:`string_body_tokens`; characters are the bytes that are not
    UTF-8 continuation bytes.
    """
    mask = string_body_tokens(indptr, data, special)
    lead = np.zeros(data.shape[0] + 1, dtype=np.int64)
    np.cumsum((data & 0xC0) != 0x80, out=lead[1:])
    chars = lead[indptr[1:]] - lead[indptr[:-1]]
    return np.where(mask, chars[: mask.shape[0]], -1).astype(np.int64)


def token_bits(mask: np.ndarray, size: int) -> np.ndarray:
    """Return ``mask[:size]`` (bool per token) as a ``(ceil(size/32),) uint32`` bitset."""
    padded = np.zeros((size + 31) // 32 * 32, dtype=bool)
    n = min(mask.shape[0], size)
    padded[:n] = mask[:n]
    return np.packbits(padded.reshape(-1, 8)[:, ::-1]).view("<u4").astype(np.uint32)
