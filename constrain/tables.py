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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from constrain._types import Int32Array, Int64Array
from constrain._vocab_trie import subset_trie
from constrain.automata.lexer import LexerDfa
from constrain.automata.pda import ParserTables
from constrain.kernels.entry import entry_point
from constrain.kernels.numba_tables import (
    all_alive_kernel,
    bit_lists_kernel,
    body_reach_kernel,
    build_entry_kernel,
    entry_hash,
    entry_inputs_kernel,
    equivalent_within,
    index_insert,
    index_rehash,
    walk_single_kernel,
)
from constrain.vocab import Vocabulary

__all__ = ["MaskTables", "TableSnapshot"]

# Tables of lexer states that keep alive the same strings of up to _SHORT bytes agree on every
# token that short, so a new table can start from an equivalent state's and walk only the longer
# tokens (a few thousand of 128k in Llama 3's vocabulary). This is what makes counted repetition
# (`[^\n]{1,120}`: one lexer state per count) cheap: every count with more than _SHORT to go
# shares one full walk.
_SHORT = 16
_RECENT = 8
# what a build reads of an Earley kernel: expected terminals, next expected sets, whether each is
# exact, and all that as bytes (MaskTables._inputs)
_Inputs = tuple[np.ndarray, np.ndarray, np.ndarray, bytes]
_MAX_PAIRS = 4096


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    """An immutable view of the pools: entries ``0 .. num_entries - 1`` are valid in it.

    A new snapshot is published (one attribute store) after every insertion, so a reader that
    took a snapshot keeps a consistent view whatever writers do meanwhile.
    """

    index: dict[tuple[int, bytes], int]
    w_pool: np.ndarray
    c_indptr: Int64Array
    c_tokens: Int32Array
    c_lcp: Int32Array
    num_entries: int
    # the same index, readable from kernels (``numba_tables.find_entry``): per slot the hash,
    # the entry and the key (state, kernel in ``k_pool``)
    h_keys: Int64Array
    h_entry: Int32Array
    h_state: Int32Array
    h_koff: Int64Array
    h_klen: Int32Array
    k_pool: Int32Array


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
        Memory budget of the pools; past it the cache starts over.
    """

    def __init__(
        self, vocab: Vocabulary, lexer: LexerDfa, parser: ParserTables, *, max_bytes: int
    ) -> None:
        self.vocab = vocab
        self.lexer = lexer
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
        self._reach: dict[int, np.ndarray | None] = {}
        self._body_classes: tuple[Int64Array, Int64Array, Int64Array] | None = None
        # trie depths are byte lengths of token prefixes
        self._max_depth = vocab.max_token_length + 1
        # kernels whose walk never splits a lexeme inside a token -> (alive states, recent
        # full-trie tables as (state, within bits)), for the short-token reuse above
        self._single: dict[bytes, tuple[np.ndarray, list[tuple[int, np.ndarray]]]] = {}
        self._long: tuple[np.ndarray, Any] | None = None
        self._accept_csr: tuple[Int64Array, Int32Array] | None = None
        # the compiled entry of entry_inputs_kernel by the Earley kernel array's type (every
        # other argument's type is fixed for these tables)
        self._inputs_entry: dict[tuple[int, bool, bool, bool], Any] = {}
        # per-thread candidate buffers of vocabulary size (builds run outside the lock); fresh
        # ones per build were mapped and unmapped by the allocator each time (512 KB each)
        self._scratch = threading.local()
        self._reset()

    def _reset(self) -> None:
        self._snap = TableSnapshot(
            index={},
            w_pool=np.zeros((8, self.num_words), dtype=np.uint32),
            c_indptr=np.zeros(9, dtype=np.int64),
            c_tokens=np.zeros(1024, dtype=np.int32),
            c_lcp=np.zeros(1024, dtype=np.int32),
            num_entries=0,
            h_keys=np.full(16, -1, dtype=np.int64),
            h_entry=np.full(16, -1, dtype=np.int32),
            h_state=np.zeros(16, dtype=np.int32),
            h_koff=np.zeros(16, dtype=np.int64),
            h_klen=np.zeros(16, dtype=np.int32),
            k_pool=np.zeros(256, dtype=np.int32),
        )
        self._num_keys = 0
        self._k_used = 0
        # (state, build inputs) -> entry: keys whose builds would be identical share one entry
        self._by_inputs: dict[tuple[int, bytes], int] = {}

    def snapshot(self) -> TableSnapshot:
        """Return the current snapshot (entries never change once published)."""
        return self._snap

    def nbytes(self) -> int:
        """Return the memory held by the pools, in bytes."""
        snap = self._snap
        return int(
            snap.w_pool.nbytes
            + snap.c_indptr.nbytes
            + snap.c_tokens.nbytes
            + snap.c_lcp.nbytes
            + snap.k_pool.nbytes
            + snap.h_keys.nbytes * 3
        )

    def __len__(self) -> int:
        return self._snap.num_entries

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
        parser, lexer, vocab = self.parser, self.lexer, self.vocab
        key = kernel.tobytes()
        single = self._single.get(key)
        if single is not None and self.string_body_reach(state) is None:
            alive, recent = single
            for r, bits in list(recent):
                if equivalent_within(state, r, lexer.trans, alive, _SHORT, _MAX_PAIRS):
                    long_bits, long_trie = self._long_tokens()
                    out_w = bits & ~long_bits
                    walk_single_kernel(
                        state, alive, lexer.byte_class, lexer.trans, long_trie.node_byte,
                        long_trie.node_token, long_trie.node_end, long_trie.node_depth,
                        long_trie.token_next_dup, out_w, self._max_depth,
                    )  # fmt: skip
                    self.num_reused += 1
                    return out_w, np.zeros(0, np.int32), np.zeros(0, np.int32)
        expected, next_bits, next_exact, _ = self._inputs(kernel) if inputs is None else inputs
        out_w = np.zeros(self.num_words, dtype=np.uint32)
        out_c = getattr(self._scratch, "cands", None)
        if out_c is None:
            out_c = self._scratch.cands = np.empty(max(vocab.size, 1), dtype=np.int32)
            self._scratch.lcp = np.empty(max(vocab.size, 1), dtype=np.int32)
        out_lcp = self._scratch.lcp
        info = np.zeros(1, dtype=np.int64)
        trie: Any = vocab
        reach = self.string_body_reach(state)
        allowed = expected | parser.ignore_bits
        if reach is not None and all_alive_kernel(lexer.alive_bits, reach, allowed):
            bits, trie = vocab.string_slice()
            out_w |= bits
        nc = build_entry_kernel(
            state,
            expected,
            next_bits,
            next_exact,
            parser.ignore_bits,
            parser.scannable_bits,
            self.exact_scans,
            lexer.byte_class,
            lexer.trans,
            lexer.accept_bits,
            *self._accepts(),
            lexer.alive_bits,
            parser.follow_bits,
            trie.node_byte,
            trie.node_token,
            trie.node_end,
            trie.node_depth,
            trie.token_next_dup,
            out_w,
            out_c,
            out_lcp,
            self._max_depth,
            info,
        )
        self.num_builds += 1
        if info[0] == 1 and trie is vocab:
            if single is None:
                alive = np.any(lexer.alive_bits & allowed, axis=1)
                single = self._single[key] = (alive, [])
            recent = single[1]
            recent.append((state, out_w.copy()))
            if len(recent) > _RECENT:
                del recent[0]
        return out_w, out_c[:nc].copy(), out_lcp[:nc].copy()

    def _accepts(self) -> tuple[Int64Array, Int32Array]:
        """Return the terminals each lexer state accepts, as CSR (built once)."""
        if self._accept_csr is None:
            bits = self.lexer.accept_bits
            ptr = np.zeros(bits.shape[0] + 1, dtype=np.int64)
            terms = np.empty(bit_lists_kernel(bits, ptr, np.empty(0, np.int32)), np.int32)
            bit_lists_kernel(bits, ptr, terms)
            self._accept_csr = (ptr, terms)
        return self._accept_csr

    def _inputs(self, kernel: Int32Array) -> _Inputs:
        """Return what a build reads of ``kernel``, and that as a signature (bytes).

        That is the expected terminals and, per terminal, the exact next expected set and whether
        it is exact (:func:`~constrain.kernels.numba_tables.entry_inputs_kernel`).
        """
        parser = self.parser
        num_t = max(parser.num_terminals, 1)
        words = parser.num_words
        expected = np.zeros(words, dtype=np.uint64)
        next_bits = np.zeros((num_t, words), dtype=np.uint64)
        next_exact = np.ones(num_t, dtype=np.bool_)
        seen = np.zeros(num_t, dtype=np.bool_)
        sig = np.empty(words + num_t * (words + 2), dtype=np.uint64)
        args = (
            parser.item_next_t, parser.item_rest_first, parser.item_rest_nullable, kernel,
            expected, next_bits, next_exact, seen, sig,
        )  # fmt: skip
        flags = kernel.flags
        key = (kernel.dtype.num, flags.c_contiguous, flags.writeable, flags.aligned)
        entry = self._inputs_entry.get(key)
        if entry is None:
            entry = self._inputs_entry[key] = entry_point(entry_inputs_kernel, args)
        n = entry(*args)
        return expected, next_bits, next_exact, sig[:n].tobytes()

    def _long_tokens(self) -> tuple[np.ndarray, Any]:
        """Return the tokens longer than ``_SHORT`` bytes: their bitset and trie (built once)."""
        if self._long is None:
            vocab = self.vocab
            keep = vocab.token_lengths > _SHORT
            padded = np.zeros(self.num_words * 32, dtype=bool)
            padded[: vocab.size] = keep
            bits = np.packbits(padded.reshape(-1, 8)[:, ::-1]).view("<u4").astype(np.uint32)
            trie = subset_trie(vocab.token_indptr, vocab.token_bytes, keep)
            trie = trie._replace(token_next_dup=trie.token_next_dup[: vocab.size])
            self._long = (bits, trie)
        return self._long

    def string_body_reach(self, state: int) -> np.ndarray | None:
        """Return the states string-body text can lead ``state`` to, or None.

        None when some raw JSON string-body text kills the lexeme from ``state`` (or the set is
        large). Otherwise each token of the vocabulary's string slice lands on one of these
        states, inside the same lexeme: where an allowed terminal is alive at all of them
        (:meth:`build` checks), the whole slice is allowed and only the other tokens need a
        trie walk (llguidance's "slicer").
        """
        if state == 0:  # a lexeme boundary: no string body is open
            return None
        if state in self._reach:
            return self._reach[state]
        if self._body_classes is None:  # first needed inside a lexeme, not at the first mask
            self._body_classes = body_class_sequences(self.lexer)
        found = body_reach(self.lexer, self._body_classes, state)
        self._reach[state] = found
        return found

    def lookup(
        self, states: Int32Array, kernels: list[Int32Array]
    ) -> tuple[Int32Array, TableSnapshot]:
        """Return entry ids for ``(states[h], kernels[h])`` and a snapshot holding them.

        The common case (every entry present) takes no lock. Missing entries are computed
        outside the lock, so threads do not serialise on the kernel, then inserted.
        """
        snap = self._snap
        ids = np.empty(len(kernels), dtype=np.int32)
        keys = []
        complete = True
        for h, kernel in enumerate(kernels):
            key = (int(states[h]), kernel.tobytes())
            keys.append(key)
            e = snap.index.get(key, -1)
            if e < 0 or e >= snap.num_entries:
                complete = False
            ids[h] = e
        if complete:
            return ids, snap
        # A key whose build inputs equal an existing entry's shares that entry (different
        # Earley kernels often expect the same terminals with the same follow-ups).
        built: dict[tuple[int, bytes], tuple[np.ndarray, Int32Array, Int32Array]] = {}
        inputs: dict[tuple[int, bytes], tuple[int, bytes]] = {}
        for h, key in enumerate(keys):
            if key in built or key in inputs or key in snap.index:
                continue
            found = self._inputs(kernels[h])
            sig = (key[0], found[3])
            inputs[key] = sig
            if sig not in self._by_inputs:
                built[key] = self.build(key[0], kernels[h], found)
        with self._lock:
            extra = sum(w.nbytes + 2 * c.nbytes for w, c, _ in built.values())
            if self.nbytes() + extra > self.max_bytes and self._snap.num_entries:
                self._reset()
                self.num_resets += 1
            for h, key in enumerate(keys):
                e = self._snap.index.get(key, -1)
                if e < 0:
                    sig = inputs.get(key) or (key[0], self._inputs(kernels[h])[3])
                    e = self._by_inputs.get(sig, -1)
                    if e >= 0:
                        self._index_key(key, e)
                        self.num_shared += 1
                    else:
                        entry = built[key] if key in built else self.build(key[0], kernels[h])
                        e = self._insert(key, *entry)
                        self._by_inputs[sig] = e
                ids[h] = e
            return ids, self._snap

    def _insert(
        self, key: tuple[int, bytes], within: np.ndarray, cands: Int32Array, lcp: Int32Array
    ) -> int:
        snap = self._snap
        e = snap.num_entries
        w_pool, c_indptr = snap.w_pool, snap.c_indptr
        c_tokens, c_lcp = snap.c_tokens, snap.c_lcp
        if e >= w_pool.shape[0]:
            pool = np.zeros((2 * w_pool.shape[0], self.num_words), dtype=np.uint32)
            pool[:e] = w_pool[:e]
            indptr = np.zeros(pool.shape[0] + 1, dtype=np.int64)
            indptr[: e + 1] = c_indptr[: e + 1]
            w_pool, c_indptr = pool, indptr
        start = int(c_indptr[e])
        end = start + cands.shape[0]
        if end > c_tokens.shape[0]:
            size = max(2 * c_tokens.shape[0], end)
            tokens = np.zeros(size, dtype=np.int32)
            tokens[:start] = c_tokens[:start]
            lcps = np.zeros(size, dtype=np.int32)
            lcps[:start] = c_lcp[:start]
            c_tokens, c_lcp = tokens, lcps
        # Rows beyond num_entries are invisible to readers until the new snapshot is published.
        w_pool[e] = within
        c_tokens[start:end] = cands
        c_lcp[start:end] = lcp
        c_indptr[e + 1] = end
        self._snap = TableSnapshot(
            snap.index, w_pool, c_indptr, c_tokens, c_lcp, e + 1, snap.h_keys, snap.h_entry,
            snap.h_state, snap.h_koff, snap.h_klen, snap.k_pool,
        )  # fmt: skip
        self._index_key(key, e)
        return e

    def _index_key(self, key: tuple[int, bytes], e: int) -> None:
        """Add key -> entry ``e`` to both indexes and publish (under the lock)."""
        snap = self._snap
        kernel = np.frombuffer(key[1], dtype=np.int32)
        k_pool = snap.k_pool
        h_keys, h_entry, h_state, h_koff, h_klen = (
            snap.h_keys, snap.h_entry, snap.h_state, snap.h_koff, snap.h_klen
        )  # fmt: skip
        k_start = self._k_used
        k_end = k_start + kernel.shape[0]
        if k_end > k_pool.shape[0]:
            grown = np.zeros(max(2 * k_pool.shape[0], k_end), dtype=np.int32)
            grown[:k_start] = k_pool[:k_start]
            k_pool = grown
        k_pool[k_start:k_end] = kernel
        self._k_used = k_end
        if 2 * (self._num_keys + 1) > h_keys.shape[0]:
            size = 2 * h_keys.shape[0]
            table = (
                np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int32),
                np.zeros(size, dtype=np.int32), np.zeros(size, dtype=np.int64),
                np.zeros(size, dtype=np.int32),
            )  # fmt: skip
            index_rehash(h_keys, h_entry, h_state, h_koff, h_klen, *table)
            h_keys, h_entry, h_state, h_koff, h_klen = table
        h = entry_hash(key[0], kernel, kernel.shape[0])
        index_insert(h, e, key[0], k_start, kernel.shape[0], h_keys, h_entry, h_state, h_koff,
                     h_klen)  # fmt: skip
        self._num_keys += 1
        snap.index[key] = e
        self._snap = TableSnapshot(
            snap.index, snap.w_pool, snap.c_indptr, snap.c_tokens, snap.c_lcp,
            snap.num_entries, h_keys, h_entry, h_state, h_koff, h_klen, k_pool,
        )  # fmt: skip


# UTF-8 encodings of the raw JSON string-body characters (U+0020.., minus '"' and '\\'), as
# byte-range sequences: (lead range, continuation ranges...).
_BODY_SEQUENCES = (
    ((0x20, 0x21),),
    ((0x23, 0x5B),),
    ((0x5D, 0x7F),),
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)


def body_class_sequences(lexer: LexerDfa) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Return the distinct byte classes of each position of each string-body UTF-8 shape.

    Flat: ``classes[pos_ptr[p]:pos_ptr[p + 1]]`` are the classes of position ``p``, and
    ``seq_ptr[q]:seq_ptr[q + 1]`` the positions of shape ``q``.
    """
    nested = [
        [np.unique(lexer.byte_class[lo : hi + 1]).tolist() for lo, hi in seq]
        for seq in _BODY_SEQUENCES
    ]
    classes = np.array([c for seq in nested for pos in seq for c in pos], dtype=np.int64)
    pos_ptr = np.cumsum([0] + [len(pos) for seq in nested for pos in seq]).astype(np.int64)
    seq_ptr = np.cumsum([0] + [len(seq) for seq in nested]).astype(np.int64)
    return classes, pos_ptr, seq_ptr


def body_reach(
    lexer: LexerDfa,
    sequences: tuple[Int64Array, Int64Array, Int64Array],
    state: int,
    limit: int = 4096,
) -> np.ndarray | None:
    """Return the states reachable from ``state`` by string-body text (None: a path dies)."""
    classes, pos_ptr, seq_ptr = sequences
    out = np.empty(limit, dtype=np.int64)
    n = body_reach_kernel(lexer.trans, classes, pos_ptr, seq_ptr, state, out)
    return None if n < 0 else out[:n].copy()
