"""Stage 4b: the per-thread buffers of a :class:`~constrain.tables.MaskTables`.

Table builds run outside the tables' lock, each thread with its own buffers: candidate lists
of vocabulary size (fresh ones per build were mapped and unmapped by the allocator each time,
512 KB each), the build inputs, the string-body reach search's per-state marks, and the
configuration-set store of the trie walks.
"""

from __future__ import annotations

import numpy as np

from constrain.automata.pda import ParserTables
from constrain.tables.set_stores import SetStore

__all__ = ["TableScratch"]


class TableScratch:
    """Per-thread buffers of one :class:`~constrain.tables.MaskTables`.

    Parameters
    ----------
    vocab_size : int
        Tokens of the vocabulary.
    parser : ParserTables
        The grammar's Earley tables.
    num_words : int
        32-bit words of a mask row.
    num_states : int
        Lexer states the per-state marks have room for (:meth:`grow_states` adds more).
    num_classes : int
        The lexer's byte classes.
    reach_limit : int
        Most states a string-body reach search lists.
    list_limit : int
        Most tokens a sparse entry lists.
    """

    __slots__ = (
        "cands", "lcp", "out_w", "info", "expected", "next_bits", "next_exact", "seen", "sig",
        "reach", "visited", "mark", "cur", "nxt", "stamp", "extra", "sets", "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        vocab_size: int,
        parser: ParserTables,
        num_words: int,
        num_states: int,
        num_classes: int,
        reach_limit: int,
        list_limit: int,
    ) -> None:
        size = max(vocab_size, 1)
        num_t = max(parser.num_terminals, 1)
        words = parser.num_words
        self.cands = np.empty(size, dtype=np.int32)
        self.lcp = np.empty(size, dtype=np.int32)
        self.out_w = np.zeros(num_words, dtype=np.uint32)
        self.info = np.zeros(1, dtype=np.int64)
        self.expected = np.zeros(words, dtype=np.uint64)
        self.next_bits = np.zeros((num_t, words), dtype=np.uint64)
        self.next_exact = np.ones(num_t, dtype=np.bool_)
        self.seen = np.zeros(num_t, dtype=np.bool_)
        self.sig = np.empty(words + num_t * (words + 2), dtype=np.uint64)
        self.reach = np.empty(reach_limit, dtype=np.int64)
        self.grow_states(num_states)
        self.stamp = np.zeros(1, dtype=np.int64)
        # a sparse entry's token list: at most half a row's bytes (the store kernel's limit)
        self.extra = np.empty(list_limit, dtype=np.int32)
        self.sets = SetStore(num_classes, words)

    def grow_states(self, size: int) -> None:
        """Make room for ``size`` lexer states in the per-state marks (cleared)."""
        self.visited = np.zeros(size, dtype=np.int64)
        self.mark = np.zeros(size, dtype=np.int64)
        self.cur = np.empty(size, dtype=np.int64)
        self.nxt = np.empty(size, dtype=np.int64)
        self.stamp = np.zeros(1, dtype=np.int64)

    def nbytes(self) -> int:
        """Return the bytes of these buffers and of the thread's configuration-set store."""
        own = sum(
            int(getattr(self, name).nbytes) for name in self.__slots__ if name not in _NOT_ARRAYS
        )
        return own + sum(int(a.nbytes) for a in self.sets.arrays)


_NOT_ARRAYS = frozenset(("sets", "__weakref__"))
