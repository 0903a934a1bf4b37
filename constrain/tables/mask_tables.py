"""Stage 4b: token-mask tables, computed lazily per (lexer state, Earley kernel).

The key of an entry is a lexer state and the *kernel* of an Earley set: the sorted ids of its
items that have a terminal after the dot. The kernel fixes the terminals the parser expects and,
for most terminals, exactly what it expects after scanning them (``ParserTables.item_rest_first``),
independently of item origins, so many tokens that span two lexemes are still decided here.
For every key met at run time, :class:`MaskTables` stores

- a packed bitset (``uint32[ceil(V/32)]``) of the tokens that stay inside the current lexeme:
  context-independent, so copied into the mask as is (XGrammar's "accepted" cache);
- a list of candidate tokens that cross a lexeme boundary: context-dependent, checked against the
  parser by the matcher (XGrammar's "uncertain" tokens).

Entries are appended to pooled arrays (``w_pool[E, words]``; ``c_indptr``/``c_tokens`` as CSR) so
the fill kernel receives a few flat arrays. Pools grow by copying, and existing rows are never
modified, so a reader holding a snapshot is never disturbed by a writer; the index is guarded by a
lock, which makes one ``MaskTables`` safe to share between threads and matchers. When the pools
outgrow ``max_bytes`` the cache starts over (bounded memory, never a leak).

An entry is computed by a walk of the token trie under the entry's lexer state and inputs
(``numba_tables.build_entry_kernel``, its configuration sets kept in this thread's
:class:`~constrain.tables.set_stores.SetStore`). Where a lexer state's walks are dear, its
entries are read from its token classes instead (:mod:`constrain.tables.token_classes`), with
the same result.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from constrain._types import Int32Array, Int64Array
from constrain.automata.lexer import LexerDfa
from constrain.automata.pda import ParserTables
from constrain.kernels.entry import cached_entry
from constrain.kernels.numba_table_inputs import (
    all_alive_kernel,
    bit_lists_kernel,
    entry_inputs_kernel,
    equivalent_within,
)
from constrain.kernels.numba_table_store import index_add, index_rehash, store_entry_kernel
from constrain.kernels.numba_tables import build_entry_kernel, walk_single_kernel
from constrain.tables.scratch import TableScratch
from constrain.tables.set_stores import trie_arrays
from constrain.tables.string_bodies import BodySearches, longest_body_token
from constrain.tables.token_classes import TokenClassifier
from constrain.vocab.trie import subset_trie, token_bits
from constrain.vocab.vocabulary import SHORT_SLICE_CHARS, Vocabulary

__all__ = ["SLICE_CHARS", "MaskTables", "TableSnapshot"]

# States alike on strings of up to _SHORT bytes agree on every token that short: a new table
# starts from an alike state's and walks only the longer tokens (a few thousand of Llama 3's
# 128k), so the counts of `[^\n]{1,120}` more than _SHORT from the end share one full walk.
_SHORT = 16
_RECENT = 8
# what a build reads of an Earley kernel (expected, next sets, exactness, as bytes: _inputs)
_Inputs = tuple[np.ndarray, np.ndarray, np.ndarray, bytes]
_MAX_PAIRS = 4096
# After this many failed pair searches (equivalent_within), the classes alike within _SHORT bytes
# are computed once instead, for a lexer of at most this many cells: Unicode `\w{64}` (19,779
# states, 97 classes) overflowed 7 searches a token at 1.8 ms each; its classes take ~ms once.
_PAIR_MISSES = 2
_SHORT_CLASSES_MAX_CELLS = 1 << 24
_REACH_LIMIT = 4096  # string-body reach searches stop here (SLICE_CHARS' bounded one decides)
_FIRST_ROWS = 256
# LexerDfa.bounded_classes' cost per state (ns); computed once the builds they would have saved
# cost _CLASS_RENT times as much (on MaskBench, 1 lost more on short strings than it won), and
# tried after _CLASS_MIN_NS of such builds at the earliest.
_CLASS_NS_PER_STATE = 400
_CLASS_RENT = 2
_CLASS_MIN_NS = 500_000
# Inside a bounded string body (``maxLength``) long text kills the lexeme, so the whole string
# slice cannot be taken; its tokens of at most SLICE_CHARS characters can where all text that
# short keeps it alive (but the last counts); 699 of Llama 3's 121,825 slice tokens are longer.
SLICE_CHARS = SHORT_SLICE_CHARS


def _list_limit(num_words: int) -> int:
    """Most tokens an entry keeps as a list: half the bytes of a row of its own."""
    return max(num_words // 2, 1)


class TableSnapshot(NamedTuple):
    """An immutable view of the pools: entries ``0 .. num_entries - 1`` are valid in it.

    A new snapshot is published (one attribute store) after every insertion, so a reader that
    took a snapshot keeps a consistent view whatever writers do meanwhile.
    """

    key_index: dict[tuple[int, bytes], int]
    # within tokens of entry e: row w_row[e] of w_pool (none when -1: the row is then all
    # zero), OR the tokens w_extra[w_indptr[e]:w_indptr[e + 1]] (the adaptive storage of
    # XGrammar: a short list where few tokens differ from a shared row, else a row of its own)
    w_pool: np.ndarray
    w_row: Int32Array
    w_indptr: Int64Array
    w_extra: Int32Array
    c_indptr: Int64Array
    c_tokens: Int32Array
    c_lcp: Int32Array
    num_entries: int
    # the same index, readable from kernels (``numba_table_store.find_entry``): per slot the hash,
    # the entry and the key (state, kernel in ``k_pool``)
    h_keys: Int64Array
    h_entry: Int32Array
    h_state: Int32Array
    h_koff: Int64Array
    h_klen: Int32Array
    k_pool: Int32Array
    # the fill kernels' ``tables`` structure (numba_match): (w_pool, w_row, w_indptr, w_extra,
    # c_indptr, c_tokens, c_lcp, index), index = (h_keys, h_entry, h_state, h_koff, h_klen,
    # k_pool, num_entries); a plain tuple, built once per snapshot (_publish)
    arrays: tuple[Any, ...]

    def within(self, e: int) -> np.ndarray:
        """Return entry ``e``'s context-independent tokens as a ``(ceil(V/32),)`` uint32 bitset."""
        row = int(self.w_row[e])
        out: np.ndarray = self.w_pool[row].copy() if row >= 0 else np.zeros_like(self.w_pool[0])
        extra = self.w_extra[self.w_indptr[e] : self.w_indptr[e + 1]]
        np.bitwise_or.at(
            out, extra >> 5, np.left_shift(np.uint32(1), (extra & 31).astype(np.uint32))
        )
        return out


def _publish(
    key_index: dict[tuple[int, bytes], int],
    pools: tuple[np.ndarray, ...],
    num_entries: int,
    slots: tuple[np.ndarray, ...],
    k_pool: Int32Array,
) -> TableSnapshot:
    """Return the snapshot of ``pools`` (``w_pool`` ... ``c_lcp``) and an index's arrays.

    The one place a snapshot, and with it the kernels' ``arrays`` structure, is made.
    """
    w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp = pools
    h_keys, h_entry, h_state, h_koff, h_klen = slots
    index = (*slots, k_pool, num_entries)
    return TableSnapshot(
        key_index, w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp, num_entries,
        h_keys, h_entry, h_state, h_koff, h_klen, k_pool, (*pools, index),
    )  # fmt: skip


class MaskTables:
    """Lazily filled, thread-safe token tables of one compiled grammar.

    Parameters
    ----------
    vocab : Vocabulary
        The vocabulary (its flat trie is walked).
    lexer : LexerDfa
        The combined lexer of the grammar's terminals.
    parser : ParserTables
        Parser tables (FOLLOW sets, ignored and scannable terminals).
    max_bytes : int
        Memory budget of the pools and token classes (these at most a quarter of it); past
        it the cache starts over.
    restart : (S,) int32, optional
        Where a lexeme ended at each state restarts (:func:`~constrain.automata.lexer.
        lexer_restarts`); all zeros (state 0) when omitted.
    lazy : bool, optional
        The lexer is built as it is reached (:class:`~constrain.automata.lazy_lexer.
        LazyLexer`): only rows within a token's length of the states asked about are built,
        so the classes computed over the whole lexer are not used; :meth:`set_lexer` gives
        the grown lexer.
    share : callable, optional
        A lazy lexer's :meth:`~constrain.automata.lazy_lexer.LazyLexer.share`: a state whose
        builds equal a state's, its rows built; builds are shared, and walked from it.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        lexer: LexerDfa,
        parser: ParserTables,
        *,
        max_bytes: int,
        restart: Int32Array | None = None,
        lazy: bool = False,
        share: Callable[[int], int] | None = None,
        built: np.ndarray | None = None,
    ) -> None:
        self.vocab = vocab
        self._share = share
        self.lexer = lexer
        # a lazy lexer grows (set_lexer): what reads the whole lexer at once is not used
        self.lazy = lazy
        if restart is None:
            restart = np.zeros(lexer.num_states, dtype=np.int32)
            restart.flags.writeable = False
        self.restart = restart
        self._view = (lexer, restart, built)
        self.parser = parser
        self.max_bytes = max_bytes
        self.num_words = (vocab.size + 31) // 32
        # Exact scans assume an ignored terminal is never also scanned by the parser.
        self.exact_scans = not bool(np.any(parser.ignore_bits & parser.scannable_bits))
        self._lock = threading.Lock()
        self.num_builds = 0
        self.num_reused = 0
        self.num_shared = 0
        self.num_resets = 0
        # Builds inside counted string bodies (the bounded string slice taken) with inputs
        # built before at another state: one lexer state per count, where the bounded classes
        # pay (_classify). Their time since the last classification, and the time past which
        # the next one is tried.
        self.counted_ns = 0
        self._counted_inputs: set[bytes] = set()
        self._classify_after_ns = _CLASS_MIN_NS
        self._bodies = BodySearches(_REACH_LIMIT)  # string_body_reach and _bounded_slice
        # trie depths are byte lengths of token prefixes
        self._max_depth = vocab.max_token_length + 1
        # kernels whose walk never splits a lexeme inside a token -> (alive states, recent
        # full-trie tables as (state, within bits)), for the short-token reuse above
        # (and the terminals allowed, to extend the alive states when a lazy lexer grows)
        self._single: dict[bytes, tuple[np.ndarray, list[tuple[int, np.ndarray]], np.ndarray]]
        self._single = {}
        # failed pair searches, then the classes of states alike within _SHORT bytes
        self._pair_misses = 0
        self._short_classes: np.ndarray | None = None
        self._long: tuple[np.ndarray, Any] | None = None
        # (lexer, its accept bits as CSR) and (lexer, the walk's lexer tuple): each cached for
        # one lexer, so a growing lexer's readers never mix two of them
        self._accept_csr: tuple[LexerDfa, tuple[Int64Array, Int32Array]] | None = None
        # the compiled entry of entry_inputs_kernel by the Earley kernel array's type (every
        # other argument's type is fixed for these tables)
        self._inputs_entry: dict[tuple[int, bool, bool, bool], Any] = {}
        # build_entry_kernel's walk_tables structure, and its compiled entry by slice
        self._walk_tables: tuple[LexerDfa, tuple[Any, ...]] | None = None
        self._walk_entries: dict[int, Any] = {}
        self._entries: dict[Any, Any] = {}  # kernel -> compiled entry (_call)
        self._scratch = threading.local()
        self._all_scratch: weakref.WeakSet[TableScratch] = weakref.WeakSet()  # for nbytes()
        self._scratch_lock = threading.Lock()
        # the bounded class of each lexer state (LexerDfa.bounded_classes(self._max_depth)),
        # -1 where none was computed; ids are fresh at each computation, never reused
        self._class_of = np.full(lexer.num_states, -1, dtype=np.int64)
        self._num_classes = 0
        self.num_classified = 0
        # token classes of the states whose walks are dear: at most a quarter of the budget
        self.classifier = TokenClassifier(
            vocab, lexer, parser, max_bytes=max_bytes // 4, max_depth=self._max_depth,
            exact_scans=self.exact_scans, restart=self.restart,
        )  # fmt: skip
        self._reset()

    def set_lexer(
        self, lexer: LexerDfa, restart: Int32Array, built: np.ndarray | None = None
    ) -> None:
        """Replace the lexer by a grown copy of it (a lazy lexer's new states appended).

        Entries stay valid: rows of the states they were built from do not change.
        """
        with self._lock:
            self._view = (lexer, restart, built)  # one attribute: readers take all at once
            self.lexer, self.restart = lexer, restart
            self.classifier.set_lexer(lexer, restart)

    def _reset(self) -> None:
        # Room for _FIRST_ROWS entries up front: the allocator maps pages only as rows are
        # written, so an unused row costs address space, not memory, and most grammars never
        # grow the pools (growing copies every row written so far).
        rows = _FIRST_ROWS
        pools: tuple[np.ndarray, ...] = (
            np.zeros((rows // 4, self.num_words), dtype=np.uint32),  # w_pool
            np.full(rows, -1, dtype=np.int32),  # w_row
            np.zeros(rows + 1, dtype=np.int64),  # w_indptr
            np.zeros(64 * rows, dtype=np.int32),  # w_extra
            np.zeros(rows + 1, dtype=np.int64),  # c_indptr
            np.zeros(16 * rows, dtype=np.int32),  # c_tokens
            np.zeros(16 * rows, dtype=np.int32),  # c_lcp
        )
        slots = _new_slots(4 * rows)
        k_pool = np.zeros(32 * rows, dtype=np.int32)
        self._snap = _publish({}, pools, 0, slots, k_pool)
        self._nbytes = sum(a.nbytes for a in (*pools, *slots, k_pool))
        self._num_keys = 0
        self._k_used = 0
        self._rows_used = 0
        # w_pool rows holding a string slice's tokens, by its character bound (0: unbounded)
        self._base_rows: dict[int, int] = {}
        # (state, build inputs) -> entry: keys whose builds would be identical share one entry
        self._by_inputs: dict[tuple[int, bytes], int] = {}

    def snapshot(self) -> TableSnapshot:
        """Return the current snapshot (entries never change once published)."""
        return self._snap

    @property
    def num_states_classified(self) -> int:
        """Lexer states whose tokens were classified (:class:`TokenClassifier`)."""
        return self.classifier.num_states_classified

    @property
    def num_class_builds(self) -> int:
        """Entries read from token classes instead of a trie walk."""
        return self.classifier.num_class_builds

    def nbytes(self) -> int:
        """Return the memory held now, in bytes.

        The pools (their capacity), the token classes and their symbolic set store, and each
        live thread's scratch buffers and configuration-set store (only the pools and the
        classes count toward ``max_bytes``; the per-thread stores have their own bounds).
        """
        with self._scratch_lock:
            buffers = list(self._all_scratch)
        threads = sum(sc.nbytes() for sc in buffers)
        return self._nbytes + self.classifier.memory_bytes() + threads

    def __len__(self) -> int:
        return self._snap.num_entries

    def _buffers(self, lexer: LexerDfa | None = None) -> TableScratch:
        """Return this thread's scratch buffers (with room for ``lexer``'s states)."""
        sc: TableScratch | None = getattr(self._scratch, "buffers", None)
        if sc is None:
            lex = self._view[0]
            sc = self._scratch.buffers = TableScratch(
                self.vocab.size, self.parser, self.num_words, max(lex.num_states, 1),
                lex.num_classes, _REACH_LIMIT, _list_limit(self.num_words),
            )  # fmt: skip
            with self._scratch_lock:
                self._all_scratch.add(sc)
        elif lexer is not None and sc.visited.shape[0] < lexer.num_states:  # a lazy lexer grew
            sc.grow_states(2 * lexer.num_states)
        return sc

    def build(
        self, state: int, kernel: Int32Array, inputs: _Inputs | None = None
    ) -> tuple[np.ndarray, Int32Array, Int32Array]:
        """Compute one entry without caching it (``inputs``: :meth:`_inputs` of ``kernel``).

        Parameters
        ----------
        state : int
            Lexer state.
        kernel : (k,) int32
            Sorted ids of the Earley items with a terminal after the dot.

        Returns
        -------
        within : (ceil(V/32),) uint32
            Bitset of the context-independent tokens.
        candidates : (n,) int32
            Token ids to check against the parser, in trie (lexicographic) order.
        lcp : (n,) int32
            Byte prefix each candidate shares with the previous one.
        """
        within, nc, _, _ = self._walk(state, kernel, inputs)
        sc = self._buffers()
        return within.copy(), sc.cands[:nc].copy(), sc.lcp[:nc].copy()

    def _walk(
        self, state: int, kernel: Int32Array, inputs: _Inputs | None
    ) -> tuple[np.ndarray, int, int, bool]:
        """Walk the trie for one entry: its within bitset, candidate count, slice, counted.

        The bitset may be this thread's scratch and the candidates are in its ``cands`` and
        ``lcp`` buffers: both are valid until the thread's next walk. The slice is the
        character bound of the string slice taken wholesale (:meth:`Vocabulary.string_slice`;
        its tokens are within), -1 when none was. Counted: inside a string whose ``maxLength``
        is a token's length or more away, or whose bound the search did not find (a
        ``pattern`` or ``format`` besides): its counts may be alike.
        """
        parser, vocab = self.parser, self.vocab
        lexer, restart, _ = self._view
        key = kernel.tobytes()
        single = self._single.get(key)
        if single is not None and single[0].shape[0] < lexer.num_states:  # a lazy lexer grew:
            self._single.pop(key, None)  # a new state may end a lexeme: a build judges again
            single = None
        if single is not None and self.string_body_reach(state, SLICE_CHARS) is None:
            alive, recent, _ = single
            short = self._short_classes_of() if self._pair_misses >= _PAIR_MISSES else None
            for r, bits in list(recent):
                if short is not None:
                    alike = bool(short[state] == short[r] >= 0)
                else:
                    alike = equivalent_within(state, r, lexer.trans, alive, _SHORT, _MAX_PAIRS)
                    self._pair_misses += not alike
                if alike:
                    long_bits, long_trie = self._long_tokens()
                    out_w = bits & ~long_bits
                    walk_single_kernel(
                        state, alive, lexer.byte_class, lexer.trans, long_trie, out_w,
                        self._max_depth,
                    )  # fmt: skip
                    self.num_reused += 1
                    return out_w, 0, -1, False
        expected, next_bits, next_exact, sig = self._inputs(kernel) if inputs is None else inputs
        sc = self._buffers()
        out_w = sc.out_w
        trie: Any = vocab
        sliced = -1
        exact = counted = False
        allowed = expected | parser.ignore_bits
        # the bounded reach first: it is cheap, and where it fails the unbounded one does too
        reach = self.string_body_reach(state, SLICE_CHARS)
        if reach is not None and self._call(all_alive_kernel, lexer.alive_bits, reach, allowed):
            reach = self.string_body_reach(state)
            if reach is not None and self._call(all_alive_kernel, lexer.alive_bits, reach, allowed):
                sliced = 0
            else:  # a maxLength farther than SLICE_CHARS, or none
                sliced = self._bounded_slice(state, allowed)
                exact = sliced >= 0
                counted = sliced == 0 or not exact  # a bound a token's length or more away
                sliced = sliced if exact else SLICE_CHARS
        else:  # a maxLength within SLICE_CHARS characters, or no string body
            sliced = self._bounded_slice(state, allowed, SLICE_CHARS)
            exact = sliced >= 0
        if exact:  # the body tokens past the bound are out: only the others walked
            bits, trie = vocab.string_slice_bits(sliced), vocab.string_slice(0)[1]
        elif sliced >= 0:
            bits, trie = vocab.string_slice(sliced)
        if trie is vocab:
            out_w.fill(0)
            classes = None if self.lazy else self.classifier.classes_of(state, self._accepts())
            if classes is not None:
                read = (expected, next_bits, next_exact)
                nc = self.classifier.build(state, classes, read, (out_w, sc.cands, sc.lcp))
                return out_w, nc, -1, False
        else:
            np.copyto(out_w, bits)
        start = time.perf_counter_ns()
        info = sc.info
        cached = self._walk_tables
        if cached is not None and cached[0] is lexer:
            walk_tables = cached[1]
        else:
            walk_tables = (
                parser.ignore_bits, parser.scannable_bits, self.exact_scans, lexer.byte_class,
                lexer.trans, lexer.accept_bits, *self._accepts(lexer), lexer.alive_bits,
                parser.follow_bits, restart,
            )  # fmt: skip
            self._walk_tables = (lexer, walk_tables)
        sets = sc.sets
        inp = sets.room(sig)
        args = (
            state, (expected, next_bits, next_exact), inp, walk_tables,
            trie_arrays(trie), (out_w, sc.cands, sc.lcp, info), self._max_depth,
            sets.kernel_arrays,
        )  # fmt: skip
        if expected is sc.expected:  # this thread's buffers: types fixed per trie
            site = 0 if exact else sliced  # (the trie's types: one per trie)
            nc = cached_entry(self._walk_entries, site, build_entry_kernel, args)(*args)
        else:
            nc = build_entry_kernel(*args)
        self.num_builds += 1
        if trie is vocab:
            self.classifier.record_walk(state, time.perf_counter_ns() - start)
        if info[0] == 1 and trie is vocab:
            if single is None:
                alive = np.any(lexer.alive_bits & allowed, axis=1)
                single = self._single[key] = (alive, [], allowed.copy())
            recent = single[1]
            recent.append((state, out_w.copy()))
            if len(recent) > _RECENT:
                del recent[0]
        return out_w, int(nc), sliced, counted

    def _short_classes_of(self) -> np.ndarray | None:
        """Return each lexer state's class alike within ``_SHORT`` bytes (-1: none), or None.

        States of one class accept and keep alive the same terminals after every string of at
        most ``_SHORT`` bytes, a stronger relation than :func:`equivalent_within`'s (which
        compares the walk's aliveness only), so the reuse it allows is sound. None for a lexer
        too large to classify at once.
        """
        if self.lazy:  # the classes need the whole lexer
            return None
        if self._short_classes is None:
            lexer = self.lexer
            if lexer.num_states * lexer.num_classes > _SHORT_CLASSES_MAX_CELLS:
                return None
            found = lexer.bounded_classes(_SHORT)
            out = np.full(lexer.num_states, -1, dtype=np.int64)
            if found is not None:
                states, classes = found
                out[states] = classes
            self._short_classes = out
        return self._short_classes

    def _share_state(self, state: int) -> int:
        """Return the key under which ``state``'s builds are shared: itself, or its class.

        States that agree on every string up to the longest token's length build identical
        entries for identical inputs (:meth:`LexerDfa.bounded_classes`). Class keys are
        negative (``-1 - class``), apart from states'.
        """
        if self.lazy:  # no classes over a growing lexer: its own sharing, if any
            return state if self._share is None else -1 - self._share(state)
        c = int(self._class_of[state])
        return state if c < 0 else -1 - c

    def _classify(self, state: int) -> bool:
        """Compute the bounded classes of the states reachable from ``state``, if worth it.

        Inside a long ``maxLength`` string body each character leads to a new lexer state, all
        but the last few alike to a token's depth: their classes let one build serve them all.
        Classes cost ~0.4 us a reachable state, so they are computed once the builds they would
        have saved since the last computation (repeats inside counted string bodies) have cost
        twice as much: a ski rental, within a small factor of the better of the two choices.
        Returns whether they were computed.
        """
        if self.counted_ns < self._classify_after_ns or self.lazy:
            return False
        limit = self.counted_ns // (_CLASS_RENT * _CLASS_NS_PER_STATE)
        found = self.lexer.bounded_classes(self._max_depth, [state], max_states=limit)
        if found is None:  # more states than that time pays for: wait for twice the time
            self._classify_after_ns = 2 * self.counted_ns
            return False
        states, classes = found
        with self._lock:
            self._class_of[states] = classes.astype(np.int64) + self._num_classes
            self._num_classes += int(classes.max()) + 1
            self.num_classified += 1
            self.counted_ns = 0
            self._classify_after_ns = _CLASS_MIN_NS
        return True

    def _call(self, dispatcher: Any, *args: Any) -> Any:
        """Call a numba kernel; through its compiled entry once these tables call it often.

        The kernels called so take arguments whose types are fixed per tables (the lexer's and
        the pools' arrays, this module's scratch and copies, Python ints), which is what the
        entry assumes (:func:`~constrain.kernels.entry.cached_entry`).
        """
        return cached_entry(self._entries, dispatcher, dispatcher, args)(*args)

    def _accepts(self, lexer: LexerDfa | None = None) -> tuple[Int64Array, Int32Array]:
        """Return the terminals each state of ``lexer`` (default: the current one) accepts.

        As CSR, built once per lexer.
        """
        lexer = self._view[0] if lexer is None else lexer
        cached = self._accept_csr
        if cached is not None and cached[0] is lexer:
            return cached[1]
        bits = lexer.accept_bits
        done = 0  # a lazy lexer's grown copy keeps its old states' rows: only new rows are read
        if cached is not None and self.lazy and cached[1][0].shape[0] - 1 <= bits.shape[0]:
            done = cached[1][0].shape[0] - 1
        new = bits[done:]
        ptr = np.zeros(new.shape[0] + 1, dtype=np.int64)
        terms = np.empty(bit_lists_kernel(new, ptr, np.empty(0, np.int32)), np.int32)
        bit_lists_kernel(new, ptr, terms)
        if done:
            old_ptr, old_terms = cached[1]  # type: ignore[index]
            ptr = np.concatenate((old_ptr[:-1], ptr + old_ptr[-1]))
            terms = np.concatenate((old_terms, terms))
        self._accept_csr = (lexer, (ptr, terms))
        return ptr, terms

    def _inputs(self, kernel: Int32Array) -> _Inputs:
        """Return what a build reads of ``kernel``, and that as a signature (bytes).

        That is the expected terminals and, per terminal, the exact next expected set and whether
        it is exact (:func:`~constrain.kernels.numba_table_inputs.entry_inputs_kernel`). The
        arrays are this thread's scratch, valid until its next call.
        """
        parser = self.parser
        sc = self._buffers()
        args = (
            parser.item_next_t, parser.item_rest_first, parser.item_rest_nullable, kernel,
            sc.expected, sc.next_bits, sc.next_exact, sc.seen, sc.sig,
        )  # fmt: skip
        flags = kernel.flags
        key = (kernel.dtype.num, flags.c_contiguous, flags.writeable, flags.aligned)
        n = cached_entry(self._inputs_entry, key, entry_inputs_kernel, args)(*args)
        return sc.expected, sc.next_bits, sc.next_exact, sc.sig[:n].tobytes()

    def _long_tokens(self) -> tuple[np.ndarray, Any]:
        """Return the tokens longer than ``_SHORT`` bytes: their bitset and trie (built once)."""
        if self._long is None:
            vocab = self.vocab
            keep = vocab.token_lengths > _SHORT
            bits = token_bits(keep, vocab.size)
            trie = subset_trie(vocab.token_indptr, vocab.token_bytes, keep)
            trie = trie._replace(token_next_dup=trie.token_next_dup[: vocab.size])
            self._long = (bits, trie)
        return self._long

    def string_body_reach(self, state: int, max_chars: int = 0) -> np.ndarray | None:
        """Return :meth:`BodySearches.reach` of ``state`` (``max_chars`` 0: any length)."""
        state, max_chars = int(state), int(max_chars)
        lexer, _, built = self._view  # one lexer for the buffers' size and the walk
        if state == 0 or self.lazy and built is None:  # (0: a boundary, no string body open)
            return None
        return self._bodies.reach(lexer, built, state, max_chars, self._buffers(lexer), self._call)

    def _bounded_slice(self, state: int, allowed: np.ndarray, max_chars: int = 0) -> int:
        """Return :meth:`BodySearches.bounded_slice` at ``state`` (``max_chars`` 0: all)."""
        lexer, _, built = self._view
        if state == 0 or self.lazy and built is None:  # (0: a lexeme boundary)
            return -1
        # the whole slice needs a search to the longest body token (none from a shorter one)
        longest = max_chars + 1 if max_chars else longest_body_token(self.vocab)
        sc = self._buffers(lexer)
        return self._bodies.bounded_slice(
            lexer, built, state, allowed, max_chars or longest, longest, sc, self._call
        )

    def lookup(
        self, states: Int32Array, kernels: list[Int32Array]
    ) -> tuple[Int32Array, TableSnapshot]:
        """Return entry ids for ``(states[h], kernels[h])`` and a snapshot holding them.

        The common case (every entry present) takes no lock. Missing entries are computed
        outside the lock, so threads do not serialise on the kernel, then inserted.
        """
        may_reset = True
        while True:
            resets = self.num_resets
            snap = self._snap
            index = snap.key_index
            ids = np.empty(len(kernels), dtype=np.int32)
            missing: list[tuple[int, tuple[int, bytes]]] = []
            for h, kernel in enumerate(kernels):
                key = (int(states[h]), kernel.tobytes())
                e = index.get(key, -1)
                if e < 0 or e >= snap.num_entries:
                    missing.append((h, key))
                ids[h] = e
            if not missing:
                return ids, snap
            for h, key in missing:
                ids[h] = self._add(key, kernels[h], may_reset)
            with self._lock:
                if self.num_resets == resets:
                    return ids, self._snap
            # the cache started over meanwhile: the ids found first are gone, look again,
            # this time keeping this lookup's entries even past the budget (a budget smaller
            # than one lookup's entries would otherwise start over forever)
            may_reset = False

    def _add(self, key: tuple[int, bytes], kernel: Int32Array, may_reset: bool = True) -> int:
        """Find or build the entry of a key missing from the index; return its id.

        Past the byte budget the cache starts over first, unless ``may_reset`` is false.
        """
        inputs = self._inputs(kernel)
        at = key[0] if self._share is None else self._share(key[0])  # walked from (rows built)
        sig = (self._share_state(key[0]), inputs[3])
        walked: tuple[np.ndarray, int, int, bool] | None = None
        if sig not in self._by_inputs:
            # A key whose build inputs equal an existing entry's shares that entry (different
            # Earley kernels often expect the same terminals with the same follow-ups).
            start = time.perf_counter_ns()
            walked = self._walk(at, kernel, inputs)
            if walked[3] and sig[0] >= 0:
                # inside a counted string body (its whole slice taken where the bound is past
                # the longest token): a repeat of a build with the same inputs at another count
                # is what the bounded classes would save, where the string has a token's length
                # or more to go (else every count is a class of its own)
                if inputs[3] not in self._counted_inputs:
                    self._counted_inputs.add(inputs[3])
                elif self.string_body_reach(key[0], self._max_depth) is not None:
                    self.counted_ns += time.perf_counter_ns() - start
                    if self._classify(key[0]):
                        sig = (self._share_state(key[0]), inputs[3])
        with self._lock:
            snap = self._snap
            e = snap.key_index.get(key, -1)
            if 0 <= e < snap.num_entries:
                return e  # another thread added it meanwhile
            e = self._by_inputs.get(sig, -1)
            if e >= 0:
                self._index_key(key, kernel, e)
                self.num_shared += 1
                return e
            if walked is None:  # the shared entry went with a reset: build it here
                walked = self._walk(at, kernel, self._inputs(kernel))
            within, nc, sliced, _ = walked
            over = self._nbytes + self.classifier.nbytes + within.nbytes + 8 * nc > self.max_bytes
            if over and may_reset and snap.num_entries:
                self._reset()
                self.num_resets += 1
            e = self._insert(key, kernel, within, sliced, nc)
            self._by_inputs[sig] = e
            return e

    def _insert(
        self, key: tuple[int, bytes], kernel: Int32Array, within: np.ndarray, sliced: int, nc: int
    ) -> int:
        """Append an entry to the pools and index it (under the lock); return its id.

        ``within`` holds the entry's context-independent tokens, of which the string slice
        ``sliced`` (-1: none) is a part; the candidates are this thread's last walk's.
        """
        snap = self._snap
        sc = self._buffers()
        e = snap.num_entries
        w_pool, w_row, w_indptr, w_extra = snap.w_pool, snap.w_row, snap.w_indptr, snap.w_extra
        c_indptr, c_tokens, c_lcp = snap.c_indptr, snap.c_tokens, snap.c_lcp
        # room first (the store kernel writes without checking): a row, the longest token
        # list, the candidates
        if e >= w_row.shape[0]:
            w_row = self._grow(w_row, e, 2 * w_row.shape[0])
            w_indptr = self._grow(w_indptr, e + 1, w_row.shape[0] + 1)
            c_indptr = self._grow(c_indptr, e + 1, w_row.shape[0] + 1)
        base = -1
        if sliced >= 0:
            base = self._base_rows.get(sliced, -1)
            if base < 0:
                if self._rows_used >= w_pool.shape[0]:
                    w_pool = self._grow(w_pool, self._rows_used, 2 * w_pool.shape[0])
                base = self._base_rows[sliced] = self._rows_used
                w_pool[base] = self.vocab.string_slice_bits(sliced)
                self._rows_used += 1
        if self._rows_used >= w_pool.shape[0]:
            w_pool = self._grow(w_pool, self._rows_used, 2 * w_pool.shape[0])
        start = int(w_indptr[e])
        limit = sc.extra.shape[0]
        if start + limit > w_extra.shape[0]:
            w_extra = self._grow(w_extra, start, max(2 * w_extra.shape[0], start + limit))
        c_start = int(c_indptr[e])
        if c_start + nc > c_tokens.shape[0]:
            size = max(2 * c_tokens.shape[0], c_start + nc)
            c_tokens = self._grow(c_tokens, c_start, size)
            c_lcp = self._grow(c_lcp, c_start, size)
        # Rows beyond num_entries are invisible to readers until the new snapshot is published.
        pools = (w_pool, w_row, w_indptr, w_extra, c_indptr, c_tokens, c_lcp)
        self._rows_used += self._call(
            store_entry_kernel, e, within, base, self._rows_used, limit, sc.cands, sc.lcp, nc,
            pools,
        )  # fmt: skip
        slots, k_pool = self._index_arrays(key, kernel, e, snap)
        self._snap = _publish(snap.key_index, pools, e + 1, slots, k_pool)
        return e

    def _grow(self, a: np.ndarray, used: int, size: int) -> np.ndarray:
        """Return ``a`` grown to ``size`` rows, the first ``used`` kept (the byte count kept)."""
        out = _grown(a, used, size)
        self._nbytes += out.nbytes - a.nbytes
        return out

    def _index_key(self, key: tuple[int, bytes], kernel: Int32Array, e: int) -> None:
        """Add key -> existing entry ``e`` to both indexes and publish (under the lock)."""
        snap = self._snap
        slots, k_pool = self._index_arrays(key, kernel, e, snap)
        pools = (snap.w_pool, snap.w_row, snap.w_indptr, snap.w_extra, snap.c_indptr,
                 snap.c_tokens, snap.c_lcp)  # fmt: skip
        self._snap = _publish(snap.key_index, pools, snap.num_entries, slots, k_pool)

    def _index_arrays(
        self, key: tuple[int, bytes], kernel: Int32Array, e: int, snap: TableSnapshot
    ) -> tuple[tuple[np.ndarray, ...], Int32Array]:
        """Add key -> entry ``e`` to both indexes (under the lock); return the slots and k_pool.

        They are ``snap``'s, or grown copies to publish; ``kernel`` is ``key[1]`` as an array.
        """
        kernel = np.array(kernel, dtype=np.int32)  # C-contiguous and writable: one entry type
        k_pool = snap.k_pool
        slots: tuple[np.ndarray, ...] = (
            snap.h_keys, snap.h_entry, snap.h_state, snap.h_koff, snap.h_klen
        )  # fmt: skip
        k_start = self._k_used
        k_end = k_start + kernel.shape[0]
        if k_end > k_pool.shape[0]:
            k_pool = self._grow(k_pool, k_start, max(2 * k_pool.shape[0], k_end))
        self._k_used = k_end
        if 2 * (self._num_keys + 1) > slots[0].shape[0]:
            grown = _new_slots(2 * slots[0].shape[0])
            index_rehash(slots, grown)
            self._nbytes += sum(a.nbytes for a in grown) // 2
            slots = grown
        self._call(index_add, key[0], kernel, e, k_pool, k_start, slots)
        self._num_keys += 1
        snap.key_index[key] = e
        return slots, k_pool


def _new_slots(size: int) -> tuple[np.ndarray, ...]:
    """Return empty index slots ``(h_keys, h_entry, h_state, h_koff, h_klen)`` of ``size``."""
    return (
        np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int32),
        np.zeros(size, dtype=np.int32), np.zeros(size, dtype=np.int64),
        np.zeros(size, dtype=np.int32),
    )  # fmt: skip


def _grown(a: np.ndarray, used: int, size: int) -> np.ndarray:
    """Return a copy of ``a`` with ``size`` rows, the first ``used`` kept, the rest unset.

    Unset, not zeroed: rows past ``used`` are written before a snapshot shows them, and the
    allocator maps pages only as they are written.
    """
    out = np.empty((size, *a.shape[1:]), dtype=a.dtype)
    out[:used] = a[:used]
    return out
