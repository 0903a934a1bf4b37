"""Stage 4b: token classes of the lexer states whose trie walks are dear.

Where a lexer state meets many parser configurations (SQL at a lexeme boundary: dozens of
expected-terminal sets) and its walks are dear, :class:`TokenClassifier` classifies its tokens once
(``numba_classify``: a walk whose configurations record the terminals scanned inside the token
instead of the parser's expected ones), and :class:`~constrain.tables.mask_tables.MaskTables` reads
its later entries from those classes in a pass over its live tokens, with the same result.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import numpy as np

from constrain._types import Int32Array, Int64Array
from constrain.automata.lexer import LexerDfa
from constrain.automata.pda import ParserTables
from constrain.kernels.entry import cached_entry
from constrain.kernels.numba_classify import (
    classified_entry_kernel,
    classify_walk_kernel,
    compact_sets_kernel,
)
from constrain.tables.set_stores import SymStore, trie_arrays
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["TokenClasses", "TokenClassifier"]

# A lexer state whose trie walks have cost _CLASSIFY_AFTER_NS in all, _CLASSIFY_MIN_WALK_NS each
# on average, gets one walk whose result serves all its later builds (a grammar with many parser
# configurations per lexer state, like SQL at a lexeme boundary). The classes of all states
# take at most a quarter of the tables' budget before they start over.
_CLASSIFY_AFTER_NS = 2_000_000
_CLASSIFY_MIN_WALK_NS = 500_000
# the read of a state's classes at which their cost is compared with its walks' (the first
# read may include loading the kernel)
_JUDGE_AT_READ = 2


class TokenClasses(NamedTuple):
    """A lexer state's token classes: its live tokens in trie order, each with its set."""

    tokens: Int32Array
    sets: Int32Array
    lcp: Int32Array
    # the sets, renumbered from 0: configurations of set f at fs_ptr[f]:fs_ptr[f + 1]
    fs_ptr: Int64Array
    fs_s: Int32Array
    fs_tag: Int64Array
    fs_flags: np.ndarray

    def nbytes(self) -> int:
        """Return the bytes held by the arrays."""
        return sum(a.nbytes for a in self)

    def kernel_arrays(self) -> tuple[np.ndarray, ...]:
        """Return the classes as ``classified_entry_kernel`` takes them (a plain tuple)."""
        return tuple(self)


class TokenClassifier:
    """The token classes of one :class:`~constrain.tables.mask_tables.MaskTables`' lexer states.

    Decides which states get classes (a ski rental over the time their trie walks cost, which
    the tables report with :meth:`record_walk`), computes them (:meth:`classes_of`) and sorts a
    state's classified tokens for one build (:meth:`build`). Thread-safe.

    Parameters
    ----------
    vocab : Vocabulary
        The vocabulary (its flat trie is walked).
    lexer : LexerDfa
        The combined lexer of the grammar's terminals.
    parser : ParserTables
        Parser tables (FOLLOW sets, ignored and scannable terminals).
    max_bytes : int
        Memory budget of the classes of all states; past it they start over.
    max_depth : int
        Above every trie depth (the longest token's length plus one).
    exact_scans : bool
        Whether scans may be exact (no ignored terminal is also scanned by the parser).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        lexer: LexerDfa,
        parser: ParserTables,
        *,
        max_bytes: int,
        max_depth: int,
        exact_scans: bool,
        restart: Int32Array,
    ) -> None:
        self.vocab = vocab
        self.lexer = lexer
        self.restart = restart
        self.parser = parser
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.exact_scans = exact_scans
        # token classes by lexer state (None: not worth it there), the time spent in trie
        # walks per state as [total ns, walks, reads of its classes], and the symbolic set
        # store
        self.classes: dict[int, TokenClasses | None] = {}
        self.walk_ns: dict[int, list[int]] = {}
        self.nbytes = 0
        self.sym: SymStore | None = None
        # classify_walk_kernel's walk_tables structure (built with the first classification)
        self._walk_tables: tuple[Any, ...] | None = None
        self._lock = threading.Lock()
        self._entries: dict[Any, Any] = {}  # kernel -> compiled entry (cached_entry)
        self.num_states_classified = 0
        self.num_class_builds = 0

    def memory_bytes(self) -> int:
        """Return the bytes of the classes (:attr:`nbytes`) and of the symbolic set store."""
        sym = self.sym
        return self.nbytes + (0 if sym is None else sum(int(a.nbytes) for a in sym.arrays))

    def set_lexer(self, lexer: LexerDfa, restart: Int32Array) -> None:
        """Replace the lexer by a grown copy of it (classes of existing states stay valid)."""
        with self._lock:
            self.lexer, self.restart = lexer, restart
            self._walk_tables = None

    def _call(self, dispatcher: Any, *args: Any) -> Any:
        """Call a numba kernel; through its compiled entry once called often (types fixed)."""
        return cached_entry(self._entries, dispatcher, dispatcher, args)(*args)

    def record_walk(self, state: int, ns: int) -> None:
        """Count one trie walk of ``state`` that took ``ns`` nanoseconds."""
        spent = self.walk_ns.setdefault(state, [0, 0, 0])
        spent[0] += ns
        spent[1] += 1

    def worth_classifying(self, state: int) -> bool:
        """Whether ``state``'s trie walks have cost enough to classify its tokens instead.

        A ski rental: the classification walk costs about one trie walk without the parser's
        pruning, so it is done once the state's walks have cost ``_CLASSIFY_AFTER_NS``, and
        only where a walk averages ``_CLASSIFY_MIN_WALK_NS`` (cheaper walks are pruned hard by
        the parser, and reading the classes would cost more than they do).
        """
        spent = self.walk_ns.get(state)
        return (
            spent is not None
            and spent[0] >= _CLASSIFY_AFTER_NS
            and spent[0] >= _CLASSIFY_MIN_WALK_NS * spent[1]
        )

    def classes_of(self, state: int, accepts: tuple[Int64Array, Int32Array]) -> TokenClasses | None:
        """Return ``state``'s token classes, computed now if worth it; None to walk the trie.

        ``accepts`` is the lexer's accept bits as CSR (``MaskTables._accepts``).
        """
        if state in self.classes:
            return self.classes[state]
        if not self.worth_classifying(state):
            return None
        return self._classify_state(state, accepts)

    def _classify_state(
        self, state: int, accepts: tuple[Int64Array, Int32Array]
    ) -> TokenClasses | None:
        """Compute and keep ``state``'s token classes (:mod:`~constrain.kernels.numba_classify`)."""
        with self._lock:
            if state in self.classes:
                return self.classes[state]
            parser, lexer, vocab = self.parser, self.lexer, self.vocab
            if self.sym is None or self._walk_tables is None:
                self.sym = SymStore(lexer.num_classes)
                self._walk_tables = (
                    parser.ignore_bits, parser.scannable_bits, lexer.byte_class, lexer.trans,
                    *accepts, lexer.alive_bits, parser.follow_bits | parser.ignore_bits,
                    self.restart,
                )  # fmt: skip
            sym = self.sym
            sym.room()
            size = max(vocab.size, 1)
            tokens = np.empty(size, dtype=np.int32)
            sets = np.empty(size, dtype=np.int32)
            lcp = np.empty(size, dtype=np.int32)
            n = self._call(
                classify_walk_kernel, state, self._walk_tables, trie_arrays(vocab),
                self.max_depth, (tokens, sets, lcp), sym.kernel_arrays,
            )  # fmt: skip
            ss_n, ss_flags, ss_s, ss_tag = (
                sym.arrays[0],
                sym.arrays[1],
                sym.arrays[3],
                sym.arrays[4],
            )
            local = np.full(ss_n.shape[0], -1, dtype=np.int32)
            order = np.empty(max(n, 1), dtype=np.int32)
            none64 = np.empty(0, dtype=np.int64)
            none32 = np.empty(0, dtype=np.int32)
            nf, total = self._call(
                compact_sets_kernel, sets, n, local, order, ss_n, ss_flags, ss_s, ss_tag, none64,
                none32, none64, np.empty(0, dtype=np.int8),
            )  # fmt: skip
            fs_ptr = np.empty(nf + 1, dtype=np.int64)
            fs_s = np.empty(total, dtype=np.int32)
            fs_tag = np.empty(total, dtype=np.int64)
            fs_flags = np.empty(nf, dtype=np.int8)
            self._call(
                compact_sets_kernel, sets, n, local, order, ss_n, ss_flags, ss_s, ss_tag, fs_ptr,
                fs_s, fs_tag, fs_flags,
            )  # fmt: skip
            classes = TokenClasses(
                tokens[:n].copy(), sets[:n].copy(), lcp[:n].copy(), fs_ptr, fs_s, fs_tag, fs_flags
            )
            if self.nbytes + classes.nbytes() > self.max_bytes:
                self.classes.clear()
                self.nbytes = 0
            self.classes[state] = classes
            self.nbytes += classes.nbytes()
            self.num_states_classified += 1
            return classes

    def build(
        self,
        state: int,
        classes: TokenClasses,
        inputs: tuple[np.ndarray, np.ndarray, np.ndarray],
        out: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> int:
        """Sort ``state``'s classified tokens for the build ``inputs`` into ``out``.

        ``inputs`` is ``(expected, next_bits, next_exact)`` and ``out`` the buffers ``(out_w,
        cands, lcp)`` of a table walk (``build_entry_kernel``); returns the candidate count.
        The first time, where this costs more than the state's trie walks did on average, the
        classes are dropped and the state walks the trie again.
        """
        start = time.perf_counter_ns()
        scratch = np.empty(max(classes.fs_flags.shape[0], 1), dtype=np.int8)
        nc = self._call(
            classified_entry_kernel, inputs, self.parser.ignore_bits, self.exact_scans,
            self.lexer.alive_bits, classes.kernel_arrays(), scratch, out,
        )  # fmt: skip
        self.num_class_builds += 1
        spent = self.walk_ns.get(state)
        if spent is not None:
            spent[2] += 1
            took = time.perf_counter_ns() - start
            if spent[2] == _JUDGE_AT_READ and took * spent[1] > spent[0]:
                with self._lock:  # dearer than an average walk: walk again
                    if self.classes.get(state) is classes:
                        self.classes[state] = None
                        self.nbytes -= classes.nbytes()
        return int(nc)
