"""Compile a Grammar for a Vocabulary: stages 1-4 plus a bounded LRU cache.

``Compiler(vocab).compile(grammar)`` normalises the grammar, builds the combined byte-level lexer
of its terminals and the Earley tables of its rules, and returns an immutable
:class:`CompiledGrammar` that any number of :class:`~constrain.Matcher` objects (in any threads)
share. Token tables are computed lazily, per (lexer state, allowed terminals) pair met at run time,
inside the compiled grammar (see ``constrain.tables``).

Compiled grammars are cached by (grammar text, vocabulary fingerprint) in an LRU bounded in bytes,
and can be saved to and loaded from disk in a versioned ``.npz`` format.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from constrain._gc import paused_gc
from constrain._types import Int32Array
from constrain._version import __version__
from constrain.automata import lazy_lexer
from constrain.automata.lazy_lexer import LazyLexer, TokenTries
from constrain.automata.lexer import (
    LargeLexer,
    LexerDfa,
    build_lexer,
    grammar_lexer,
    lexer_restarts,
)
from constrain.automata.nfa import FoldableRepeat
from constrain.automata.nfa_parts import fifo_room
from constrain.automata.pda import ParserTables, build_parser_tables
from constrain.compiled_file import read_compiled_file, write_compiled_file
from constrain.errors import CompileLimitError, GrammarError, SavedFileError, VocabularyError
from constrain.ir import Grammar
from constrain.kernels.numba_dfa import continuation_bits_kernel
from constrain.tables import MaskTables, TableSnapshot
from constrain.vocab.grammar_specials import resolve_special_tokens, special_chars
from constrain.vocab.trie import subset_trie
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "CompileLimits",
    "CompiledGrammar",
    "Compiler",
]


@dataclass(frozen=True, slots=True)
class CompileLimits:
    """Resource limits; exceeding one raises :class:`~constrain.CompileLimitError` naming it.

    Parameters
    ----------
    max_lexer_states : int
        States of the combined lexer DFA (and of any single terminal's DFA).
    max_grammar_items : int
        Dotted Earley items (grammar size).
    max_set_items : int
        Items in one Earley set at run time (guards against pathological ambiguity).
    max_hypotheses : int
        Simultaneous lexing/parsing hypotheses of one matcher.
    mask_cache_bytes : int
        Memory budget of each compiled grammar's lazily filled token tables (their entries,
        and the token classes of lexer states with many parser configurations: at most a
        quarter of it).
    precompute_ms : float
        Time budget spent at compile time building the token tables of a regular grammar's
        first lexer states (breadth first from the start); the rest are built lazily. Not
        spent where the lexer itself is built as it is reached.
    """

    max_lexer_states: int = 200_000
    max_grammar_items: int = 2_000_000
    max_set_items: int = 200_000
    max_hypotheses: int = 1024
    mask_cache_bytes: int = 256 * 2**20
    precompute_ms: float = 5.0


# the cache reads its grammars' sizes again: the most recently used on each miss, all of them
# every _RESIZE_ALL misses
_RESIZE_MRU = 8
_RESIZE_ALL = 64


def _eager(fold: int | None) -> Any:
    """Return the eager lexer's builder, raising FoldableRepeat at a count of ``fold``.

    Also when counts of ``lazy_lexer.REGION_SMALL`` copies or more add up to ``fold``, and
    (``fold`` set) LargeLexer past ``lazy_lexer.EAGER_MEMBERS`` subset members.
    """
    eager_members = None if fold is None else lazy_lexer.EAGER_MEMBERS

    def build(terminals: Any, *, max_states: int) -> LexerDfa:
        return build_lexer(
            terminals, max_states=max_states, fold_signal=fold,
            fold_small=lazy_lexer.REGION_SMALL, eager_members=eager_members,
        )  # fmt: skip

    return build


_TRIES: dict[str, TokenTries] = {}
_CANDIDATES_WALKED = 4096  # (state, candidates) pairs a compiled grammar remembers walking
_CANDIDATE_TRIES = 64  # tries of candidate lists a compiled grammar keeps
_TRIES_LOCK = threading.Lock()


def token_tries(vocab: Vocabulary) -> TokenTries:
    """Return the tries of ``vocab``'s longer tokens (built once per vocabulary, a few kept)."""
    with _TRIES_LOCK:
        found = _TRIES.get(vocab.fingerprint)
    if found is None:
        lengths = np.diff(vocab.token_indptr)
        longer = []
        for n in (16, 32, 64):
            trie = subset_trie(vocab.token_indptr, vocab.token_bytes, lengths > n)
            longer.append((n, (trie.node_byte, trie.node_end, trie.node_depth)))
        every = subset_trie(vocab.token_indptr, vocab.token_bytes, lengths > 0)
        found = TokenTries(
            int(lengths.max(initial=0)) + 1,
            tuple(longer),
            _suffix_trie(vocab),
            (every.node_byte, every.node_end, every.node_depth),
        )
        with _TRIES_LOCK:
            while len(_TRIES) >= 4:
                _TRIES.pop(next(iter(_TRIES)))
            _TRIES[vocab.fingerprint] = found
    return found


def _suffix_trie(vocab: Vocabulary) -> tuple[np.ndarray, ...]:
    """Return the trie of every distinct non-empty suffix of a token of ``vocab`` (read-only)."""
    indptr = vocab.token_indptr
    raw = np.asarray(vocab.token_bytes).tobytes()
    ends = indptr[1:].tolist()
    suffixes = sorted(
        {raw[k:end] for start, end in zip(indptr[:-1].tolist(), ends, strict=True)
         for k in range(start, end)}
    )  # fmt: skip
    lengths = np.fromiter(map(len, suffixes), dtype=np.int64, count=len(suffixes))
    ptr = np.zeros(len(suffixes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    data = np.frombuffer(b"".join(suffixes), dtype=np.uint8)
    trie = subset_trie(ptr, data, np.ones(len(suffixes), dtype=np.bool_))
    arrays = (trie.node_byte, trie.node_end, trie.node_depth)
    for a in arrays:
        a.flags.writeable = False
    return arrays


def continuation_bits(lexer: LexerDfa) -> np.ndarray:
    """Return ``uint64[S, W]``: terminals whose lexeme can still grow by a byte from each state."""
    out = np.zeros_like(lexer.alive_bits)
    continuation_bits_kernel(lexer.trans, lexer.alive_bits, out)
    out.setflags(write=False)
    return out


class CompiledGrammar:
    """A grammar compiled for one vocabulary: lexer, parser tables and lazy token tables.

    Immutable apart from its internal, thread-safe token-table cache, so it can be shared by any
    number of matchers and threads. Build it with :meth:`Compiler.compile`.

    Attributes
    ----------
    grammar : Grammar
        The normalised grammar.
    vocab : Vocabulary
        The vocabulary it was compiled for.
    lexer : LexerDfa
        The combined byte-level lexer (what :meth:`save` writes). For a lazy lexer, the states
        built so far: it grows as matchers reach new states.
    lazy : LazyLexer or None
        The lexer built as it is reached, for a grammar that counts to
        :data:`~constrain.automata.lazy_lexer.REGION_MIN` or more; None when it is built whole.
    kernel_lexer : LexerDfa
        What the kernels run: ``lexer``, with the restart states of a greedy grammar appended
        (:func:`~constrain.automata.lexer.lexer_restarts`).
    restart : (S,) int32
        The boundary state a lexeme ended at each kernel-lexer state restarts from.
    parser : ParserTables
        The Earley tables.
    limits : CompileLimits
        The limits it was compiled under (run-time limits apply to its matchers).
    match_arrays : tuple
        The matcher kernels' ``grammar`` structure, ``(lex, par, vocab)``
        (``constrain.kernels.numba_match``).
    token_budgets : tuple of (int, int)
        ``(terminal, max tokens)`` of the grammar's token budgets (``Grammar.token_budgets``),
        enforced by its matchers.
    token_aligned : tuple of (int, str)
        ``(terminal, "end" | "token")`` of the grammar's token-aligned terminals
        (``Grammar.token_aligned``): the kernels end them only at a token's end (the lexer's
        ``inner_ends`` leave them out inside a token, and the token tables read a lexer that
        never accepts them), and the matcher ends a ``"token"`` one at every token boundary.
    """

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        lexer: LexerDfa,
        parser: ParserTables,
        limits: CompileLimits,
        *,
        lazy: LazyLexer | None = None,
    ) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.parser = parser
        self.limits = limits
        # a lazy lexer is built around the states the matchers reach, a token's length away
        self.lazy = lazy
        self.reach_depth = vocab.max_token_length + 1
        self._tries: TokenTries | None = None  # built when a lazy lexer first needs them
        share = None  # states counted alike share token tables (LazyLexer.share)
        built = None  # and a lazy lexer's rows built, as flags per state
        if lazy is not None:  # the rows read from the boundary, where lexemes restart
            self._tries = token_tries(vocab)
            lazy.prime(self._tries)
            lexer, _, _, built = lazy.view(0)
            share = functools.partial(lazy.share, tries=self._tries)
        self.lexer = lexer
        self._sized_lexer: LexerDfa | None = None  # the lexer whose size nbytes() has
        self._static_bytes = 0
        # what the kernels run: the lexer with a greedy grammar's restart states appended
        ignored = [lexer.names.index(n) for n in grammar.ignore if n in lexer.names]
        self.kernel_lexer, self.restart = lexer_restarts(lexer, grammar.greedy, ignored)
        klex = self.kernel_lexer
        self.terminal_names = tuple(lexer.names)
        # (terminal, max tokens) of the grammar's token budgets, which its matchers enforce
        index = {name: t for t, name in enumerate(self.terminal_names)}
        self.token_budgets = tuple(
            (index[name], limit) for name, limit in grammar.token_budgets if name in index
        )
        self.token_aligned = tuple(
            (index[name], kind) for name, kind in grammar.token_aligned if name in index
        )
        # the terminals a lexeme may end as inside a token (all but the token-aligned ones)
        inner = np.full(klex.accept_bits.shape[1], ~np.uint64(0), dtype=np.uint64)
        for term, _ in self.token_aligned:
            inner[term >> 6] &= ~(np.uint64(1) << np.uint64(term & 63))
        inner.flags.writeable = False
        self.inner_ends = inner
        self.tables = MaskTables(
            vocab, self._table_lexer(klex), parser, max_bytes=limits.mask_cache_bytes,
            restart=self.restart, lazy=lazy is not None, share=share, built=built,
        )  # fmt: skip
        self.cont_bits = continuation_bits(klex)
        self._lazy_version = 0 if lazy is None else lazy.version
        self._lazy_lock = threading.Lock()
        # (state, candidate tokens) whose rows candidate_rows built
        self._candidates_walked: dict[tuple[int, bytes], None] = {}
        self._candidate_tries: dict[bytes, tuple[np.ndarray, ...]] = {}  # by candidates
        # a lazy lexer's rows (in build order) whose cont_bits were computed (others are zero)
        self._cont_seen = 0 if lazy is None else lazy.rows_built
        self._cont_room = self.cont_bits.copy()  # where a lazy lexer's new rows are written
        self._restart_room = self.restart  # zeros (no lazy lexer is greedy), grown 2x
        self.match_arrays = self._match_arrays()
        # compiled kernel entries for its matchers' argument types (constrain.kernels.entry):
        # every matcher of this grammar passes arrays of the same types
        self.kernel_entries: dict[str, Any] = {}

    def _table_lexer(self, lexer: LexerDfa) -> LexerDfa:
        """Return the lexer the token tables walk: one that ends no token-aligned terminal.

        A table describes what a token does inside its bytes; a token-aligned lexeme may only
        end at the token's end, where the matcher's own step (not the table) ends it.
        """
        if not self.token_aligned:
            return lexer
        bits = lexer.accept_bits & self.inner_ends
        return LexerDfa(lexer.byte_class, lexer.trans, bits, lexer.alive_bits, lexer.names)

    def _match_arrays(self) -> tuple[Any, ...]:
        """Return the matcher kernels' ``grammar`` structure (constrain.kernels.numba_match).

        A plain tuple, since numba types a named tuple argument outside its C fast path (+1 µs
        a call).
        """
        klex, parser, vocab = self.kernel_lexer, self.parser, self.vocab
        return (
            (klex.byte_class, klex.trans, klex.accept_bits, klex.alive_bits,
             parser.ignore_bits, self.cont_bits, self.restart, self.inner_ends),
            (parser.item_rule, parser.item_next_nt, parser.item_next_t, parser.rule_lhs,
             parser.rule_first_item, parser.nt_rules_indptr, parser.nt_rules, parser.nullable,
             parser.final_item, parser.num_terminals, self.limits.max_set_items),
            (vocab.token_indptr, vocab.token_bytes, np.asarray(vocab.eos_ids, dtype=np.int64)),
        )  # fmt: skip

    def reach(
        self,
        states: Int32Array,
        path: np.ndarray | None = None,
        *,
        light: bool = False,
        token: int = -1,
    ) -> tuple[Any, ...]:
        """Return :attr:`match_arrays` with the lexer rows a step from ``states`` reads built.

        For a lazy lexer: the rows any token read from ``states`` meets, or those of the bytes
        ``path`` (at most a token's length), or of the token ``token`` (whose suffixes from
        state 0 :meth:`LazyLexer.prime` built) when given. With ``light``, a state that shares
        its token tables (:meth:`LazyLexer.share`) gets its own row only, and a mask from it
        then needs :meth:`candidate_rows`. Other grammars: the arrays as they are. Thread-safe.

        Raises
        ------
        CompileLimitError
            ``max_lexer_states``, when the lexer would grow past it.
        """
        lazy = self.lazy
        if lazy is not None:
            if token >= 0 and not lazy.is_done(states):  # (from a state done: rows built)
                ptr = self.vocab.token_indptr
                path = self.vocab.token_bytes[ptr[token] : ptr[token + 1]]
            if path is None and token < 0:
                if self._tries is None:
                    self._tries = token_tries(self.vocab)
                lazy.ensure(states, self._tries, light=light)
            elif path is not None:
                size = path.shape[0] + 1
                nodes = np.zeros(size, dtype=np.uint8)
                nodes[1:] = path
                ends = np.full(size, size, dtype=np.int32)
                depths = np.arange(size, dtype=np.int32)
                for a in (nodes, ends, depths):  # the vocabulary's trie is read-only too
                    a.flags.writeable = False
                lazy.walk(states, (nodes, ends, depths))
                # after a lexeme ends inside the text, its rest is read from state 0: each
                # suffix (a token's are walked by LazyLexer.prime; a text's may be none)
                n = 0 if token >= 0 else path.shape[0]
                if n:
                    ptr = np.concatenate(([0], np.cumsum(np.arange(n, 0, -1)))).astype(np.int64)
                    data = np.concatenate([path[k:] for k in range(n)]).astype(np.uint8)
                    trie = subset_trie(ptr, data, np.ones(n, dtype=np.bool_))
                    suffixes = (trie.node_byte, trie.node_end, trie.node_depth)
                    for a in suffixes:
                        a.flags.writeable = False
                    lazy.walk(np.zeros(1, dtype=np.int32), suffixes)
            if self._lazy_version != lazy.version:
                self._refresh()
        return self.match_arrays

    def pending(self, states: Int32Array) -> bool:
        """Whether some of ``states`` got only their own row from a ``light`` :meth:`reach`."""
        return self.lazy is not None and not self.lazy.is_done(states)

    def candidate_rows(
        self, states: Int32Array, entry_ids: Int32Array, snap: TableSnapshot
    ) -> tuple[Any, ...]:
        """Return :attr:`match_arrays` with the rows of the entries' candidates built.

        A mask is the entries' tokens within a lexeme and their candidates, each simulated
        from its state: after a ``light`` :meth:`reach` only the candidates' paths need rows.
        """
        lazy, vocab, walked = self.lazy, self.vocab, self._candidates_walked
        assert lazy is not None
        for state, e in zip(states.tolist(), entry_ids.tolist(), strict=True):
            at = np.array([state], dtype=np.int32)
            tokens = snap.c_tokens[snap.c_indptr[e] : snap.c_indptr[e + 1]]
            key = (state, tokens.tobytes())
            if tokens.size == 0 or lazy.is_done(at) or key in walked:
                continue
            arrays = self._candidate_tries.get(key[1])  # an entry's: shared by many states
            if arrays is None:
                chosen = np.zeros(vocab.size, dtype=np.bool_)
                chosen[tokens] = True
                trie = subset_trie(vocab.token_indptr, vocab.token_bytes, chosen)
                arrays = (trie.node_byte, trie.node_end, trie.node_depth)
                for a in arrays:
                    a.flags.writeable = False
                with self._lazy_lock:
                    fifo_room(self._candidate_tries, _CANDIDATE_TRIES)[key[1]] = arrays
            lazy.walk(at, arrays)
            with self._lazy_lock:
                fifo_room(walked, _CANDIDATES_WALKED)[key] = None
        if self._lazy_version != lazy.version:
            self._refresh()
        return self.match_arrays

    def _refresh(self) -> None:
        """Publish what the lazy lexer has built since: lexer, continuation bits, tables."""
        lazy = self.lazy
        assert lazy is not None
        with self._lazy_lock:
            version = lazy.version
            if version == self._lazy_version:
                return
            # one lock: the lexer and the rows built since agree (a step costs what it
            # built, not the lexer's size: a long generation stays linear)
            lexer, todo, self._cont_seen, built = lazy.view(self._cont_seen)
            n = lexer.num_states
            room, restart = self._cont_room, self._restart_room
            if room.shape[0] < n:  # rooms grow 2x: a long generation copies O(S) in all
                room = np.zeros((max(2 * room.shape[0], n), lexer.alive_bits.shape[1]), np.uint64)
                room[: self.cont_bits.shape[0]] = self.cont_bits
                self._cont_room = room
            if restart.shape[0] < n:
                restart = np.zeros(room.shape[0], dtype=np.int32)
                restart.flags.writeable = False
                self._restart_room = restart
            if todo.size:
                rows = lexer.trans[todo]
                rows.flags.writeable = False
                out = np.zeros((todo.size, room.shape[1]), dtype=np.uint64)
                continuation_bits_kernel(rows, lexer.alive_bits, out)
                room[todo] = out
            cont = room[:n].view()
            cont.flags.writeable = False
            restart = restart[:n]
            self.lexer = self.kernel_lexer = lexer
            self.cont_bits, self.restart = cont, restart
            self.tables.set_lexer(self._table_lexer(lexer), restart, built)
            self.match_arrays = self._match_arrays()
            self._lazy_version = version

    def full_lexer(self) -> LexerDfa:
        """Return the whole lexer (a lazy one is built to the end first, within the limit).

        Raises
        ------
        CompileLimitError
            ``max_lexer_states``, when a lazy lexer has more states than the limit allows.
        """
        if self.lazy is not None:
            self.lazy.expand_all()
            self.reach(np.zeros(1, dtype=np.int32))
        return self.lexer

    def precompute(self, budget_s: float) -> int:
        """Build the token tables of the lexer states reachable from the start, breadth first.

        Only meaningful for a grammar that is one regular terminal (its Earley set never
        changes while the terminal is being matched, so each lexer state has one table).
        Stops when ``budget_s`` seconds are spent; returns the number of tables built.

        Parameters
        ----------
        budget_s : float
            Time budget in seconds.
        """
        deadline = time.perf_counter() + budget_s
        kernel = self.root_kernel()
        seen = {0}
        order = [0]
        built = 0
        for state in order:
            if time.perf_counter() > deadline:
                break
            at = np.array([state], dtype=np.int32)
            self.reach(at)  # a lazy lexer: the rows a token from here reads
            self.tables.lookup(at, [kernel])
            built += 1
            for nxt in np.unique(self.lexer.trans[state]).tolist():
                if nxt >= 0 and nxt not in seen:
                    seen.add(nxt)
                    order.append(nxt)
        return built

    def root_kernel(self) -> np.ndarray:
        """Return the kernel (sorted item ids with a terminal after the dot) of the start set."""
        par = self.parser
        todo = [int(par.rule_first_item[0])]
        seen = set(todo)
        while todo:
            item = todo.pop()
            nt = int(par.item_next_nt[item])
            if nt < 0:
                continue
            nxt = [int(par.rule_first_item[r]) for r in par.nt_rules[
                par.nt_rules_indptr[nt] : par.nt_rules_indptr[nt + 1]
            ]]  # fmt: skip
            if par.nullable[nt]:
                nxt.append(item + 1)
            for other in nxt:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        kernel = sorted(i for i in seen if par.item_next_t[i] >= 0)
        return np.array(kernel, dtype=np.int32)

    def nbytes(self) -> int:
        """Return the memory this grammar holds now, in bytes.

        The lexer and parser tables, and what grows as matchers use it: the token tables and
        token classes, each thread's walk buffers, and a lazy lexer's states built so far.
        """
        lexer = self.lexer
        if lexer is not self._sized_lexer:  # a lazy lexer published a grown copy
            self._static_bytes = self.parser.nbytes() + sum(
                int(getattr(lexer, f.name).nbytes)
                for f in dataclasses.fields(lexer)
                if isinstance(getattr(lexer, f.name), np.ndarray)
            )
            self._sized_lexer = lexer
        return self._static_bytes + self.tables.nbytes()

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar(terminals={self.parser.num_terminals}, "
            f"rules={len(self.grammar.rules)}, lexer_states={self.lexer.trans.shape[0]}, "
            f"vocab_size={self.vocab.size})"
        )

    def save(self, path: str | Path) -> None:
        """Save to a versioned, checksummed ``.npz`` file (:mod:`constrain.compiled_file`).

        The file holds the grammar IR, the lexer and the limits; the parser tables are rebuilt
        and the token tables filled lazily after :meth:`load`. A grammar loads back with the
        same masks. A lexer built as it is reached (:attr:`lazy`) is built to the end first,
        which a count of millions cannot be within ``max_lexer_states``.

        Parameters
        ----------
        path : str or Path
            Destination file, written atomically (a temporary file in its folder, renamed).

        Raises
        ------
        OSError
            If the file cannot be written.
        CompileLimitError
            ``max_lexer_states``, when a lazy lexer has more states than the limit allows.
        """
        write_compiled_file(
            Path(path),
            grammar=self.grammar,
            lexer=self.full_lexer(),
            vocab_fingerprint=self.vocab.fingerprint,
            limits=dataclasses.asdict(self.limits),
            constrain_version=__version__,
        )

    @classmethod
    def load(cls, path: str | Path, vocab: Vocabulary) -> CompiledGrammar:
        """Load a grammar saved by :meth:`save` for the same vocabulary.

        The file is untrusted input: it is validated (format version, checksum, the grammar
        IR, every array's shape, dtype and index ranges) before any kernel sees it.

        Parameters
        ----------
        path : str or Path
            A file written by :meth:`save`.
        vocab : Vocabulary
            The vocabulary it was compiled for.

        Returns
        -------
        CompiledGrammar
            Masks identical to those of the grammar that was saved.

        Raises
        ------
        SavedFileError
            If the file cannot be read, is not a compiled grammar, has another format version,
            was compiled for another vocabulary, or is damaged or inconsistent in any way (the
            message names the file and the problem).
        """
        path = Path(path)
        types = {f.name: type(f.default) for f in dataclasses.fields(CompileLimits)}
        derived = [vocab]

        def fingerprint(grammar: Grammar) -> str:  # of the vocabulary with its special tokens
            try:
                derived[0] = vocab.with_special_bytes(special_chars(grammar)[0])
            except VocabularyError:
                return ""  # not this vocabulary's special tokens: "another vocabulary"
            return derived[0].fingerprint

        saved = read_compiled_file(path, fingerprint, types)
        vocab = derived[0]
        limits = CompileLimits(**saved.limits)
        names = list(saved.lexer.names)
        try:
            parser = build_parser_tables(saved.grammar, names, max_items=limits.max_grammar_items)
        except (GrammarError, CompileLimitError) as err:
            raise SavedFileError(path, f"corrupt compiled grammar: {err}") from None
        return cls(saved.grammar, vocab, saved.lexer, parser, limits)


class Compiler:
    r"""Compile grammars for one vocabulary, with a thread-safe LRU cache bounded in bytes.

    Parameters
    ----------
    vocab : Vocabulary
        The tokenizer's vocabulary.
    limits : CompileLimits, optional
        Resource limits applied to every compilation.
    cache_bytes : int, optional
        Byte budget of the cache of compiled grammars (0 disables caching). A grammar counts
        with what it grows as matchers use it (:meth:`CompiledGrammar.nbytes`), read again for
        the most recently used grammars on every compile and for all of them every 64 compiles
        and in :meth:`cache_info`; the least recently used are dropped past the budget.

    Examples
    --------
    >>> compiled = Compiler(vocab).compile(Grammar.from_regex(r"\\d{3}-\\d{4}"))  # doctest: +SKIP
    """

    def __init__(
        self,
        vocab: Vocabulary,
        *,
        limits: CompileLimits | None = None,
        cache_bytes: int = 512 * 2**20,
    ) -> None:
        self.vocab = vocab
        self.limits = limits or CompileLimits()
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[Grammar, CompiledGrammar] = OrderedDict()
        # special token ids -> the vocabulary in which they have bytes (with_special_bytes)
        self._special_vocabs: dict[frozenset[int], Vocabulary] = {}
        self._sizes: dict[Grammar, int] = {}  # each cached grammar's size when last read
        self._cache_used = 0
        self._misses = 0
        self._lock = threading.Lock()

    def compile(self, grammar: Grammar) -> CompiledGrammar:
        """Compile a grammar (or return the cached result for an identical grammar).

        Parameters
        ----------
        grammar : Grammar
            Any grammar IR (from a regex or a Lark grammar).

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        GrammarError
            If the grammar is invalid or accepts no string.
        CompileLimitError
            If an automaton or table grows past a limit.
        """
        if not isinstance(grammar, Grammar):
            raise TypeError(
                f"compile() takes a constrain.Grammar, got {type(grammar).__name__}; build one "
                "with Grammar.from_regex / from_lark / builtin"
            )
        # The IR is frozen dataclasses (regex nodes cache their hash): the grammar itself is
        # the key, compared field by field on a hash match, so a hit is always exact.
        key = grammar
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        with paused_gc():  # the IR and NFA pieces are acyclic: see constrain._gc
            compiled = self._compile(grammar)
        size = compiled.nbytes()
        with self._lock:
            if key not in self._cache and size <= self.cache_bytes:
                self._cache[key] = compiled
                self._sizes[key] = size
                self._cache_used += size
                self._misses += 1
                # cached grammars grow while matchers use them (token tables, walk buffers):
                # their sizes are read again, the most recently used on every miss, all of
                # them every _RESIZE_ALL misses (amortised: a miss costs O(1) in the cache)
                self._resize(len(self._cache) if self._misses % _RESIZE_ALL == 0 else _RESIZE_MRU)
        return compiled

    def _resize(self, count: int) -> None:
        """Read again the sizes of the ``count`` most recently used cached grammars.

        Then drop the least recently used while the cache is over its budget (called under
        ``self._lock``).
        """
        for key in list(itertools.islice(reversed(self._cache), count)):
            size = self._cache[key].nbytes()
            self._cache_used += size - self._sizes[key]
            self._sizes[key] = size
        while self._cache_used > self.cache_bytes and self._cache:
            old, _ = self._cache.popitem(last=False)
            self._cache_used -= self._sizes.pop(old)

    def _compile(self, grammar: Grammar) -> CompiledGrammar:
        grammar, ids = resolve_special_tokens(grammar, self.vocab)
        vocab = self.vocab
        if ids:
            with self._lock:
                found = self._special_vocabs.get(ids)
            if found is None:
                found = vocab.with_special_bytes(ids)
                with self._lock:
                    found = self._special_vocabs.setdefault(ids, found)
            vocab = found
        max_states = self.limits.max_lexer_states
        lazy: LazyLexer | None = None
        large: LargeLexer | None = None
        # A non-greedy grammar that counts to REGION_MIN gets a lexer built as it is reached:
        # the eager build signals the first such count (nothing to scan beforehand).
        fold = None if grammar.greedy else lazy_lexer.REGION_MIN
        region_min = None if grammar.greedy else lazy_lexer.FORCE
        grammar = grammar.normalise()  # once, for both tries
        if region_min is None:
            try:
                g, lexer = grammar_lexer(
                    grammar, max_states=max_states, build=_eager(fold), normalised=True
                )
            except FoldableRepeat as signal:
                region_min = signal.region_min
            except LargeLexer as signal:
                region_min, large = lazy_lexer.REGION_MIN, signal
        if region_min is not None:
            build = functools.partial(LazyLexer, region_min=region_min, built=large)
            g, built = grammar_lexer(grammar, max_states=max_states, build=build, normalised=True)
            lazy, lexer = built, built.snapshot()
        names = [t.name for t in g.terminals]
        parser = build_parser_tables(g, names, max_items=self.limits.max_grammar_items)
        compiled = CompiledGrammar(g, vocab, lexer, parser, self.limits, lazy=lazy)
        # (a lazy lexer's states are mostly new counts: tables built ahead would go unused)
        if g.is_regular_terminal() and self.limits.precompute_ms > 0 and lazy is None:
            compiled.precompute(self.limits.precompute_ms / 1e3)
        return compiled

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """Compile a Python ``re`` pattern (full match)."""
        return self.compile(Grammar.from_regex(pattern))

    def compile_lark(self, text: str, *, start: str = "start") -> CompiledGrammar:
        """Compile a Lark grammar text."""
        return self.compile(Grammar.from_lark(text, start=start))

    def compile_builtin(self, name: str) -> CompiledGrammar:
        """Compile a grammar shipped in ``constrain.grammars`` (e.g. ``"json"``, ``"sql"``)."""
        return self.compile(Grammar.builtin(name))

    def cache_info(self) -> dict[str, int]:
        """Return ``{"entries": n, "bytes": used, "capacity": cache_bytes}``.

        Every cached grammar's size is read again first (dropping the least recently used
        while over the budget), so ``bytes`` is what the cached grammars hold now.
        """
        with self._lock:
            self._resize(len(self._cache))
            return {
                "entries": len(self._cache),
                "bytes": self._cache_used,
                "capacity": self.cache_bytes,
            }

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar (and the vocabularies derived for special tokens)."""
        with self._lock:
            self._cache.clear()
            self._sizes.clear()
            self._special_vocabs.clear()
            self._cache_used = 0
