"""Stage 4b: what the token-table walks keep and share: configuration-set stores, the trie.

A table walk (:func:`~constrain.kernels.numba_tables.build_entry_kernel`) and a token classification
walk (:func:`~constrain.kernels.numba_classify.classify_walk_kernel`) build, lazily, a DFA over sets
of lexer configurations; the sets and their transitions are kept here between walks, so most walks
only look transitions up. :class:`SetStore` is one thread's store of concrete sets
(``constrain.tables.mask_tables``), :class:`SymStore` a grammar's store of symbolic sets
(``constrain.tables.token_classes``); both grow by doubling (:func:`make_room`) up to a bound, then
start over. :func:`trie_arrays` gives both walks the token trie as one structure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from constrain.kernels.numba_classify import SYM_CONFIGS
from constrain.kernels.numba_tables import CONFIGS, rehash_sets_kernel

__all__ = ["SetStore", "SymStore", "make_room", "trie_arrays"]

# a walk adds at most this many configuration sets (the room kept free before each walk), and
# a thread's set store holds at most _MAX_SETS sets and about _MAX_SET_BYTES (but room for two
# walks) before it starts over
_WALK_SETS = 4096
_MAX_SETS = 1 << 16
_MAX_SET_BYTES = 16 << 20
# the symbolic set store keeps room for _SYM_ROOM new sets per walk and holds at most about
# _SYM_BYTES before it starts over
_SYM_ROOM = 16384
_SYM_BYTES = 32 << 20


class SetStore:
    """One thread's configuration sets of the table walk (``build_entry_kernel``).

    The walk's lazily built DFA over lexer-configuration sets: a set's transitions depend on
    the lexer and parser tables, and for sets holding root-lineage configurations on the build
    inputs, identified by a small id (the one :meth:`room` returns). Kept across walks, most
    walks only look transitions up (a new walk met ~170 new transitions, ~100 ns each). Grows
    by doubling to ``max_sets`` sets (``_MAX_SETS``, fewer where rows are wide: about
    ``_MAX_SET_BYTES`` per thread and grammar), then starts over.
    """

    __slots__ = ("num_classes", "words", "arrays", "kernel_arrays", "store", "max_sets", "_ids")

    def __init__(self, num_classes: int, words: int) -> None:
        self.num_classes = max(num_classes, 1)
        self.words = words
        row_bytes = CONFIGS * (4 + 1 + 8 * words) + 4 * self.num_classes + 4 * 4 + 17
        self.max_sets = max(2 * _WALK_SETS, min(_MAX_SETS, _MAX_SET_BYTES // row_bytes))
        self.store = np.zeros(1, dtype=np.int64)
        self._ids: dict[bytes, int] = {}
        self.arrays = self._allocate(_WALK_SETS)
        # build_entry_kernel's set_store structure: the arrays and the count
        self.kernel_arrays = (*self.arrays, self.store)

    def _allocate(self, capacity: int) -> tuple[np.ndarray, ...]:
        # (cs_n, cs_flags, cs_inp, cs_hash, cs_s, cs_x, cs_bits, cs_trans, table): rows are
        # written when their set is created, so unused capacity is address space only
        return (
            np.zeros(capacity, dtype=np.int32),
            np.zeros(capacity, dtype=np.int8),
            np.zeros(capacity, dtype=np.int32),
            np.zeros(capacity, dtype=np.int64),
            np.empty((capacity, CONFIGS), dtype=np.int32),
            np.empty((capacity, CONFIGS), dtype=np.int8),
            np.empty((capacity, CONFIGS, self.words), dtype=np.uint64),
            np.empty((capacity, self.num_classes), dtype=np.int32),
            np.full(4 * capacity, -1, dtype=np.int32),
        )

    def room(self, inputs: bytes) -> int:
        """Make room for one walk; return the id of the build ``inputs``."""
        arrays, restarted = make_room(
            self.arrays, self.store, _WALK_SETS, self.max_sets, self._allocate, 3
        )
        if arrays is not self.arrays:  # grown: the only place the structure changes
            self.arrays = arrays
            self.kernel_arrays = (*arrays, self.store)
        if restarted:
            self._ids.clear()
        found = self._ids.get(inputs)
        if found is None:
            found = self._ids[inputs] = len(self._ids)
        return found


class SymStore:
    """The symbolic configuration sets of ``classify_walk_kernel``, kept across walks.

    Symbolic sets depend on the lexer and parser tables only, so one store serves every lexer
    state (guarded by the tables' classification lock). Grows by doubling to ``max_sets``,
    then starts over (the classes already computed keep their own copies of their sets).
    """

    __slots__ = ("num_classes", "arrays", "kernel_arrays", "store", "max_sets")

    def __init__(self, num_classes: int) -> None:
        self.num_classes = max(num_classes, 1)
        row_bytes = SYM_CONFIGS * 12 + 4 * self.num_classes + 4 * 4 + 13
        self.max_sets = max(2 * _SYM_ROOM, _SYM_BYTES // row_bytes)
        self.store = np.zeros(1, dtype=np.int64)
        self.arrays = self._allocate(_SYM_ROOM)
        # classify_walk_kernel's sym_store structure: the arrays and the count
        self.kernel_arrays = (*self.arrays, self.store)

    def _allocate(self, capacity: int) -> tuple[np.ndarray, ...]:
        # (ss_n, ss_flags, ss_hash, ss_s, ss_tag, ss_trans, table)
        return (
            np.zeros(capacity, dtype=np.int32),
            np.zeros(capacity, dtype=np.int8),
            np.zeros(capacity, dtype=np.int64),
            np.empty((capacity, SYM_CONFIGS), dtype=np.int32),
            np.empty((capacity, SYM_CONFIGS), dtype=np.int64),
            np.empty((capacity, self.num_classes), dtype=np.int32),
            np.full(4 * capacity, -1, dtype=np.int32),
        )

    def room(self) -> None:
        """Make room for one walk's new sets."""
        arrays, _ = make_room(self.arrays, self.store, _SYM_ROOM, self.max_sets, self._allocate, 2)
        if arrays is not self.arrays:  # grown: the only place the structure changes
            self.arrays = arrays
            self.kernel_arrays = (*arrays, self.store)


def trie_arrays(trie: Any) -> tuple[np.ndarray, ...]:
    """Return the walks' ``trie`` structure of a ``Trie`` or a ``Vocabulary``.

    That is ``(node_byte, node_token, node_end, node_depth, token_next_dup)``.
    """
    return (trie.node_byte, trie.node_token, trie.node_end, trie.node_depth, trie.token_next_dup)


def make_room(
    arrays: tuple[np.ndarray, ...],
    store: np.ndarray,
    room: int,
    max_sets: int,
    allocate: Callable[[int], tuple[np.ndarray, ...]],
    hash_at: int,
) -> tuple[tuple[np.ndarray, ...], bool]:
    """Leave ``room`` free sets in a set store; return its arrays and whether it started over.

    ``arrays`` are per-set rows, ``arrays[hash_at]`` the sets' hashes and the last one the
    open-addressed table; ``store[0]`` the sets used. The store doubles (rows copied, table
    rebuilt by ``rehash_sets_kernel``) while that stays within ``max_sets``, else starts over.
    """
    used = int(store[0])
    capacity = arrays[0].shape[0]
    if capacity - used >= room:
        return arrays, False
    if 2 * capacity > max_sets:
        arrays[-1].fill(-1)
        store[0] = 0
        return arrays, True
    new = allocate(2 * capacity)
    for a, b in zip(arrays[:-1], new[:-1], strict=True):
        b[:used] = a[:used]
    rehash_sets_kernel(new[hash_at], used, new[-1])
    return new, False
