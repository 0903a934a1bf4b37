"""Stage 3: the lexer DFA built state by state, for grammars with large counted repetitions.

:func:`~constrain.automata.lexer.build_lexer` determinises and minimises the whole lexer up
front, so ``maxLength: 65536`` costs one lexer state per count and character shape, about a
million states, before the first mask. :class:`LazyLexer` builds the same language lazily:

- counted repetitions of a prefix-free item with many copies (``[a-z]{1,65536}``, a JSON
  string's characters with ``maxLength``) stay folded (:class:`~constrain.automata.nfa.
  CountedRegion`), their NFA states virtual (a count and a state of the item's DFA), so the NFA
  is as small as for ``{1,2}``;
- the subset construction runs on demand (:func:`~constrain.kernels.numba_lazy_walk.
  lazy_expand_kernel`): :meth:`LazyLexer.expand` computes the transition rows of every DFA state
  within a number of bytes of some states, and :meth:`LazyLexer.walk` those a trie of tokens
  reads from some states. The matcher needs the rows a token can read from its current states
  (:meth:`LazyLexer.ensure`: 16 bytes around, then the longer tokens), and from state 0 the
  rows a token's rest reads after a lexeme ends inside it (:meth:`LazyLexer.prime`: every
  token suffix); the rows it never asks for are never built. Built rows are kept: a long text
  inside one counted repetition adds ~10-20 states a character until ``max_states``.

The DFA is not minimised (minimisation needs the whole automaton); masks do not depend on
state identity, only on the language, so they equal the eager lexer's.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from constrain._types import Int32Array, UInt64Array
from constrain.automata.lexer import LargeLexer, LexerDfa, lexer_nfa
from constrain.automata.nfa import WIDE_ITEM, CountedRegion
from constrain.automata.nfa_parts import item_table
from constrain.errors import CompileLimitError, EmptyTerminalError
from constrain.ir import Regex
from constrain.kernels.numba_lazy import lazy_bits_kernel, lazy_start_kernel
from constrain.kernels.numba_lazy_walk import lazy_expand_kernel, lazy_walk_kernel
from constrain.kernels.numba_subsets import nfa_csr_kernel, nfa_live_kernel

__all__ = ["EAGER_MEMBERS", "FORCE", "REGION_MIN", "REGION_SMALL", "LazyLexer", "TokenTries"]

REGION_MIN = 1024
"""Counted repetitions with at least this many copies are folded (when the item allows)."""

REGION_SMALL = 64
"""... and so are those of this many copies or more, once their copies add up to REGION_MIN
(many bounded strings of a schema, e.g. ``maxLength`` 100-1,000: eagerly, their lexer is a
product of every count and takes 0.2-0.7 s to build; lazily, a few ms)."""

EAGER_MEMBERS = 1 << 20
"""A lexer whose eager subset construction outgrows this many subset members in all (0.5-0.8 s
of work) is built lazily instead, from the union NFA already built. Lower, more lexers would
switch, and their first masks come sooner (MaskBench lexers of 5,000-85,000 eager states:
1.2-8x), but their later masks cost more while the lazy lexer builds rows as tokens reach them
(2.5-27x the mean time a token on five such schemas)."""

FORCE: int | None = None
"""For tests: build every non-greedy grammar's lexer lazily, folding the repetitions of this many
copies or more (``pytest --force-lazy``, ``benchmarks/lazy_exactness.py``); None: chosen by
the counts."""


# ensure(): a neighbourhood a longest token deep is tried while it needs at most
# _DEEP_BUDGET new states a byte of depth, until it has failed _DEEP_MISSES times
_DEEP_BUDGET = 8
_DEEP_MISSES = 3
# prime(): the neighbourhood of state 0 is built while it needs at most this many new states (in
# a product region it branches on every class: 51,545 states, 0.37 s, for MaskBench allany23).
# Half as deep first, within a quarter of it: neighbourhoods grow faster than their depth (the
# other 86 lazy schemas of the MaskBench sample: 16 bytes deep, 3-10x the states of 8 bytes deep,
# at most 1,587 states at 8 bytes), so a failed half-depth try (allany23: 10,873 states at 8
# bytes) stops before the full budget is spent.
_PRIME_BUDGET = 16384


class TokenTries(NamedTuple):
    """A vocabulary's tokens as tries for :meth:`LazyLexer.ensure`.

    ``depth`` is the longest token's length (the radius that covers every token);
    ``longer[i] = (n, trie)``: the trie ``(node_byte, node_end, node_depth)`` of the tokens
    longer than ``n`` bytes, ``n`` ascending; ``suffixes``: the trie of every non-empty suffix
    of a token (whole tokens included), what is read from the boundary state 0 after a lexeme
    ends inside a token; ``tokens``: the trie of every token (None: use ``suffixes``), walked
    from a state inside a product region.
    """

    depth: int
    longer: tuple[tuple[int, tuple[np.ndarray, ...]], ...]
    suffixes: tuple[np.ndarray, ...]
    tokens: tuple[np.ndarray, ...] | None = None


class LazyLexer:
    """The combined lexer of some terminals, its DFA states built when first needed.

    Parameters
    ----------
    terminals : sequence of (str, Regex)
        Terminal names and languages, as for :func:`~constrain.automata.lexer.build_lexer`.
    max_states : int, optional
        The DFA may grow to this many states; :meth:`expand` raises
        :class:`~constrain.errors.CompileLimitError` (``max_lexer_states``) past it.
    region_min : int, optional
        Fold counted repetitions of at least this many copies (default :data:`REGION_MIN`).
    built : LargeLexer, optional
        The signal of an eager build of the same terminals that outgrew its budget: its union
        NFA (no counted region: that build had found none to fold) is used as it is.

    Attributes
    ----------
    regions : tuple of CountedRegion
        The folded repetitions (none: the lexer is small enough to be built eagerly).
    """

    def __init__(
        self,
        terminals: Sequence[tuple[str, Regex]],
        *,
        max_states: int = 200_000,
        region_min: int | None = None,
        built: LargeLexer | None = None,
    ) -> None:
        if region_min is None:
            region_min = REGION_MIN
        self.names = tuple(name for name, _ in terminals)
        self.max_states = max_states
        regions: list[CountedRegion] = []
        if built is not None and len(built.entries) == len(terminals):
            nfa, entries = built.nfa, built.entries
        else:
            nfa, entries, regions = lexer_nfa(
                terminals, max_states=max_states, region_min=region_min
            )
        start = 0
        self.regions: tuple[CountedRegion, ...] = tuple(regions)
        num_real = nfa.num_states
        # liveness: a region is passable (its item is not empty), so its entry reaches its exit
        live = np.zeros(num_real, dtype=np.bool_)
        r_enter = np.array([r.enter for r in self.regions], dtype=np.int32)
        r_after = np.array([r.after for r in self.regions], dtype=np.int32)
        nfa_live_kernel(
            np.concatenate((nfa.src, nfa.eps_src, r_enter)),
            np.concatenate((nfa.dst, nfa.eps_dst, r_after)),
            np.flatnonzero(nfa.tag >= 0).astype(np.int32),
            live,
        )
        empty = [n for n, ent in zip(self.names, entries, strict=True) if not live[ent].any()]
        if empty:
            raise EmptyTerminalError(empty)
        byte_class, num_classes, bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep = nfa_csr_kernel(
            num_real, nfa.src, nfa.lo, nfa.hi, nfa.dst, nfa.eps_src, nfa.eps_dst, nfa.tag, live
        )
        num_classes = max(int(num_classes), 1)
        self.byte_class = byte_class.astype(np.uint8)
        self.byte_class.flags.writeable = False
        # regions entered from each real state (CSR)
        order = np.argsort(r_enter, kind="stable")
        vptr = np.zeros(num_real + 1, dtype=np.int64)
        np.add.at(vptr, r_enter.astype(np.int64) + 1, 1)
        vptr = np.cumsum(vptr)
        vreg = order.astype(np.int64)
        # each region's item DFA over the lexer's byte classes: -1 dead, -2 item complete
        reps = np.searchsorted(byte_class, np.arange(num_classes))  # first byte of each class
        tables: list[np.ndarray[Any, Any]] = []
        widths: list[int] = []
        # a product region's other DFA over the same classes (-1 dead), and where it accepts;
        # a plain region's is one state that stays put and accepts
        others: list[np.ndarray[Any, Any]] = []
        exits: list[np.ndarray[Any, Any]] = []
        # per (other, item) state, the counts of items still to read that reach acceptance
        reach: list[tuple[np.ndarray[Any, Any], int]] = []
        comp = nfa.comp
        for region in self.regions:
            if region.other is None:
                others.append(np.zeros(num_classes, dtype=np.int32))
                exits.append(np.ones(1, dtype=np.bool_))
            else:
                other = region.other
                others.append(other.trans[:, other.byte_class[reps]].reshape(-1).astype(np.int32))
                exits.append(np.asarray(other.accept, dtype=np.bool_))
            table = item_table(region.dfa, reps)
            tables.append(table.reshape(-1))
            widths.append(int(table.shape[0]))
            if region.reach is None:  # a plain region: any count, one more inside an item
                bits = np.full(table.shape[0], 2, dtype=np.uint64)
                bits[0] = 3
                reach.append((bits, 2))
            else:
                reach.append(region.reach)
        wide = [w * e.size for w, e in zip(widths, exits, strict=True)]  # (other, item) states
        sizes = [(r.hi + 1) * w for r, w in zip(self.regions, wide, strict=True)]
        r_base = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        r_toff = np.concatenate(
            ([0], np.cumsum([t.size for t in tables])[:-1]) if tables else ([0],)
        ).astype(np.int64)[: len(tables)]
        xtrans = np.concatenate(tables) if tables else np.zeros(1, dtype=np.int32)
        atrans = np.concatenate(others) if others else np.zeros(1, dtype=np.int32)
        r_aoff = np.concatenate(([0], np.cumsum([t.size for t in others])[:-1])).astype(np.int64)
        r_eoff = np.concatenate(([0], np.cumsum([e.size for e in exits])[:-1])).astype(np.int64)
        r_boff = np.concatenate(([0], np.cumsum([b.size for b, _ in reach])[:-1])).astype(np.int64)
        r_comp = comp[r_enter] if self.regions else np.zeros(0, dtype=np.int32)
        self._nfa = (
            bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep, live, vptr, vreg, xtrans, r_toff,
            atrans, r_aoff,
        )  # fmt: skip
        self._reg = (
            r_after.astype(np.int64),
            np.array([r.lo for r in self.regions], dtype=np.int64),
            np.array([r.hi for r in self.regions], dtype=np.int64),
            np.array(wide, dtype=np.int64),
            r_base,
            live[r_after] if self.regions else np.zeros(0, dtype=np.bool_),
            np.array(widths, dtype=np.int64),
            r_eoff,
            np.concatenate(exits) if exits else np.zeros(0, dtype=np.bool_),
            r_boff,
            np.array([(n + 63) // 64 for _, n in reach], dtype=np.int64),
            np.array([n for _, n in reach], dtype=np.int64),
            np.concatenate([b for b, _ in reach]) if reach else np.zeros(0, dtype=np.uint64),
        )
        if not self.regions:  # the kernels index the region arrays: give them one dummy
            self._reg = tuple(np.zeros(1, dtype=a.dtype) for a in self._reg)  # type: ignore[assignment]
        self._tag = nfa.tag
        self._comp = comp
        self._groups = (nfa.group_base, nfa.group_ptr, nfa.group_terms)
        self._r_comp = r_comp.astype(np.int32) if self.regions else np.full(1, -1, np.int32)
        self.num_real = num_real
        self.num_classes = num_classes
        self.num_words = max(1, -(-len(self.names) // 64))
        self._store = lazy_start_kernel(
            self._nfa, self._reg, num_real, start, num_classes, max_states
        )
        # the kernels' closure marks and their generation (under the lock)
        self._marks = (np.zeros(num_real, dtype=np.int64), np.zeros(1, dtype=np.int64))
        self._stamp = np.zeros(64, dtype=np.int64)
        self._radius = np.full(64, -1, dtype=np.int64)
        self._call = 0
        self._accept = np.zeros((64, self.num_words), dtype=np.uint64)
        self._alive = np.zeros((64, self.num_words), dtype=np.uint64)
        self._bits_done = 0
        self._lock = threading.RLock()  # view() takes snapshot() and the new rows at once
        # view()'s rows-built flags: one array per generation of the store's rows (a reader's
        # flags and rows agree), set as rows are built (a view costs the rows built since)
        self._flags: tuple[np.ndarray, np.ndarray, int] | None = None  # (rows, flags, count)
        self._bits(self.num_states)
        self.version = 0
        # states whose token walks' rows are built (ensure)
        self._done = np.zeros(64, dtype=np.bool_)
        self._deep_misses = 0  # neighbourhoods a token deep that outgrew their budget
        self._boundary_depth = 0  # prime()'s neighbourhood, left to the first ensure()
        self._byte_class64 = self.byte_class.astype(np.int64)
        self._walked = np.array(
            [r.other is not None or r.dfa.num_states - 1 > WIDE_ITEM for r in self.regions],
            dtype=np.bool_,
        )
        # share(): state -> the state it shares token tables with; subset key -> that state
        self._shares: dict[int, int] = {}
        # ... the regions' first virtual ids, lo, hi, widths and count bits, as lists: a key is
        # computed for every new state (Python on a few members beats numpy's per-call cost)
        self._reg_lists = tuple(self._reg[i].tolist() for i in (4, 1, 2, 3, 11))
        self._share_keys: dict[tuple[Any, ...], int] = {}
        self.num_shared = 0  # states ensured through another's tables (share)

    @property
    def num_states(self) -> int:
        """DFA states created so far (expanded or not)."""
        return int(self._store[6][0])

    @property
    def rows_built(self) -> int:
        """Transition rows built so far (each once)."""
        return int(self._store[6][1])

    def expanded(self, state: int) -> bool:
        """Whether the transition row of ``state`` is built."""
        return bool(self._store[1][state])

    def _bits(self, n: int) -> None:
        """Compute the terminal bitsets of states ``_bits_done .. n - 1`` (room grows 2x)."""
        old = self._bits_done
        if n <= old:
            return
        if n > self._accept.shape[0]:
            cap = max(2 * self._accept.shape[0], n)
            accept = np.zeros((cap, self.num_words), dtype=np.uint64)
            alive = np.zeros((cap, self.num_words), dtype=np.uint64)
            accept[:old] = self._accept[:old]
            alive[:old] = self._alive[:old]
            self._accept, self._alive = accept, alive
        set_ptr, pool = self._store[2], self._store[3]
        lazy_bits_kernel(
            set_ptr, pool, old, n, self.num_real, self._tag, self._comp, self._groups,
            self._reg[4], self._r_comp, self._accept, self._alive,
        )  # fmt: skip
        self._bits_done = n

    def expand(self, seeds: Sequence[int] | Int32Array, depth: int) -> bool:
        """Build the rows of every state within ``depth`` bytes of ``seeds``.

        Returns whether anything new was built (then :attr:`version` has grown). Thread-safe.

        Raises
        ------
        CompileLimitError
            ``max_lexer_states``, when the lexer would outgrow ``max_states``.
        """
        with self._lock:
            before = self.rows_built
            self._call += 1
            status, store, stamp, radius = lazy_expand_kernel(
                self._nfa, self._reg, self.num_real, self._store,
                np.asarray(seeds, dtype=np.int64), depth, self.max_states, self._stamp,
                self._call, self._radius, self._marks,
            )  # fmt: skip
            self._stamp, self._radius = stamp, radius
            return self._grown(store, before, status)

    def try_expand(self, seeds: Sequence[int] | Int32Array, depth: int, budget: int) -> bool:
        """:meth:`expand` if it needs at most ``budget`` new states; return whether it did.

        Stopped by the budget, it leaves the rows it built (valid rows) and no radius behind.
        """
        with self._lock:
            cap = min(self.max_states, self.num_states + budget)
            before = self.rows_built
            self._call += 1
            status, store, stamp, radius = lazy_expand_kernel(
                self._nfa, self._reg, self.num_real, self._store,
                np.asarray(seeds, dtype=np.int64), depth, cap, self._stamp, self._call,
                self._radius, self._marks,
            )  # fmt: skip
            self._stamp, self._radius = stamp, radius
            stopped = status != 0 and cap < self.max_states
            self._grown(store, before, 0 if stopped else status)
            return not stopped

    def _grown(self, store: tuple[np.ndarray, ...], before: int, status: int) -> bool:
        """Keep a kernel's grown store (under the lock); publish new states' bits."""
        self._store = store
        self._bits(self.num_states)
        grew = self.rows_built != before
        if grew:
            self.version += 1
        if status != 0:
            raise CompileLimitError(
                "max_lexer_states",
                self.max_states,
                self.max_states + 1,
                hint="the lexer needs more states for this input than the limit allows",
            )
        return grew

    def walk(self, states: Int32Array, trie: tuple[np.ndarray, ...]) -> bool:
        """Build the rows a walk of ``trie`` from each of ``states`` reads.

        ``trie`` is ``(node_byte, node_end, node_depth)``: with the rows from state 0 built
        along the same texts' suffixes (:meth:`prime` for tokens), that is every row a token
        (or a text, as a one-path trie) read from ``states`` meets, lexemes ending inside it
        included. Returns whether the lexer grew. Thread-safe.

        Raises
        ------
        CompileLimitError
            ``max_lexer_states``, when the lexer would outgrow ``max_states``.
        """
        with self._lock:
            before = self.rows_built
            status, store = lazy_walk_kernel(
                self._nfa, self._reg, self.num_real, self._store,
                np.asarray(states, dtype=np.int64), trie, self._byte_class64, self.max_states,
                self._marks,
            )  # fmt: skip
            return self._grown(store, before, status)

    def is_done(self, states: Int32Array) -> bool:
        """Whether :meth:`ensure` has built every row a token read from ``states`` meets."""
        done = self._done
        size = done.shape[0]
        for state in states.tolist():  # a few states: faster than numpy's reductions
            if state >= size or not done[state]:
                return False
        return True

    def ensure(self, states: Int32Array, tries: TokenTries, *, light: bool = False) -> bool:
        """Build every row a token read from ``states`` meets; memoised per state.

        Around a state whose rows are built within radius ``r`` (:meth:`expand` leaves that
        behind) only tokens longer than ``r`` can read farther: those are walked
        (``tries.longer``); a state with a radius under the shortest of those lengths first gets
        a neighbourhood of that radius (16 bytes: a deeper one would build every lexeme's
        first bytes, for all properties of a schema after a ``"``). The matcher calls it before
        every step with its current states. Returns whether the lexer grew.

        With ``light``, a state that shares its token tables with another (:meth:`share`) gets
        its own row only, and that other state the whole: a mask then needs the rows of its
        candidate tokens alone (:meth:`walk` them); the state is not :meth:`is_done`.
        """
        if self.is_done(states):
            return False
        grew = self._boundary_neighbourhood()
        short = tries.longer[0][0] if tries.longer else tries.depth
        whole = []
        for state in np.unique(states).tolist():
            if state < self._done.shape[0] and self._done[state]:
                continue
            rep = self.share(state, tries) if light else state
            if rep != state:
                grew |= self.ensure(np.array([rep], dtype=np.int32), tries)
                if not self.expanded(state):
                    grew |= self.expand([state], 1)
                with self._lock:
                    self.num_shared += 1
                continue
            whole.append(state)
            r = int(self._radius[state]) if state < self._radius.shape[0] else -1
            if r >= tries.depth:
                continue
            if self._walked_at(state):
                # a product's neighbourhood branches on every class at every byte (its other
                # automaton's state differs by class): the tokens' own paths instead
                every = tries.suffixes if tries.tokens is None else tries.tokens
                grew |= self.walk(np.array([state], dtype=np.int32), every)
                continue
            if r < short:
                # a whole token's neighbourhood where it is small (a narrow class counted:
                # one row a byte, and no walk for many steps); else 16 bytes and the walks
                if self._deep_misses < _DEEP_MISSES and self._try_deep(state, short, tries.depth):
                    grew = True
                    continue
                self._deep_misses += 1
                grew |= self.expand([state], short)
                r = short
            longer = [trie for n, trie in tries.longer if n <= r]
            if longer and r < tries.depth:
                grew |= self.walk(np.array([state], dtype=np.int32), longer[-1])
        with self._lock:
            if self._done.shape[0] < self.num_states:
                grown = np.zeros(2 * self.num_states, dtype=np.bool_)
                grown[: self._done.shape[0]] = self._done
                self._done = grown
            self._done[whole] = True
        return grew

    def _try_deep(self, state: int, short: int, depth: int) -> bool:
        """Build the neighbourhood ``depth`` bytes deep of ``state`` if it stays small.

        Deeper by doubling from ``short`` bytes, each within ``_DEEP_BUDGET`` new states a byte
        of depth: a neighbourhood that outgrows its budget does so at the first depth past its
        width, having built at most twice the rows of the last one that fit (a single try at
        ``depth`` builds up to ``_DEEP_BUDGET * depth`` states before it fails). Returns whether
        it got to ``depth``.
        """
        depths = [short]
        while depths[-1] < depth:
            depths.append(min(2 * depths[-1], depth))
        return self._expand_within(state, [(d, _DEEP_BUDGET * d) for d in depths])

    def _expand_within(self, state: int, steps: Sequence[tuple[int, int]]) -> bool:
        """Return whether :meth:`try_expand` of ``state`` fits each ``(depth, budget)`` in turn.

        Stops at the first that does not fit (its rows built so far stay).
        """
        return all(self.try_expand([state], depth, budget) for depth, budget in steps)

    def _virtual(self, state: int) -> tuple[tuple[int, ...], list[tuple[int, int]]]:
        """Return ``state``'s real members and its virtual ones as (region, offset) pairs.

        Plain lists: a subset has a few members, and numpy's per-call cost would dominate.
        """
        set_ptr, pool = self._store[2], self._store[3]
        members = pool[set_ptr[state] : set_ptr[state + 1]].tolist()
        num_real, base = self.num_real, self._reg_lists[0]
        real = tuple(m for m in members if m < num_real)
        virtual = []
        for member in members[len(real) :]:  # (sorted: the virtual ids come last)
            region = bisect.bisect_right(base, member - num_real) - 1
            virtual.append((region, member - num_real - base[region]))
        return real, virtual

    def _walked_at(self, state: int) -> bool:
        """Whether ``state``'s subset holds a state of a product region or a wide item."""
        if not self._walked.any():
            return False
        return any(self._walked[region] for region, _ in self._virtual(state)[1])

    def share(self, state: int, tries: TokenTries) -> int:
        """Return the state whose token tables ``state``'s equal: the first one counted alike.

        Over a longest token's bytes (``tries.depth``), a virtual state ``(r, k, q)`` acts as
        ``(r, k', q)`` while both counts keep clear of the region's bounds: both at least
        ``lo`` or both that far below it, and both that far below ``hi`` (and its count bits'
        window, in a product region). A subset is keyed by its real members and its virtual
        ones, such counts replaced by their side of ``lo``; the first state of a key asked for
        represents it. A mask build reads tokens from a state (a string slice is tokens too;
        the unbounded slice check only chooses how the same tokens are found), so shared
        states build the same tables. Inside a long string every character is a new state,
        and all but those near the bounds share one set of tables.
        """
        found = self._shares.get(state)
        if found is not None:
            return found
        real, virtual = self._virtual(state)
        margin = tries.depth
        _, r_lo, r_hi, r_width, r_nbits = self._reg_lists
        rows: set[tuple[int, int, int]] = set()
        clear = False
        for region, off in virtual:
            count, lo, top = off // r_width[region], r_lo[region], r_nbits[region] - 1
            zone = count
            if r_hi[region] - count - margin >= top:
                if count >= lo:
                    zone, clear = -2, True  # above lo
                elif lo - count >= top + margin:
                    zone, clear = -1, True  # below lo
            rows.add((region, zone, off % r_width[region]))
        rep = state
        if clear:
            key = (margin, real, tuple(sorted(rows)))
            with self._lock:
                rep = self._share_keys.setdefault(key, state)
        with self._lock:
            self._shares[state] = rep
        return rep

    def prime(self, tries: TokenTries, short: int = 16) -> None:
        """Build the rows read from the boundary state 0: lexemes restart there.

        After a lexeme ends inside a token, the rest of the token is read from state 0: the
        walk of every token suffix from it builds exactly those rows, all that a mask at state
        0 reads (a breadth-first neighbourhood a longest token deep would build every lexeme's
        first 128 bytes: with many properties, more states than the limit allows). A
        neighbourhood of ``short`` bytes then builds ahead the rows that the first steps'
        neighbourhoods would (cheaper in one call): the first mask does not read it, so the
        first :meth:`ensure` builds it, after the first mask (MaskBench's o9916: 11,408 states,
        30 ms). It is built where it needs at most ``_PRIME_BUDGET`` new states (and its
        half-depth part a quarter of that): entering a product region it branches on every
        class, and the token walks build what a mask reads.
        """
        zero = np.zeros(1, dtype=np.int32)
        self.walk(zero, tries.suffixes)
        with self._lock:
            self._done[0] = True
            self._boundary_depth = short

    def _boundary_neighbourhood(self) -> bool:
        """Build the neighbourhood :meth:`prime` left (once); return whether the lexer grew."""
        if not self._boundary_depth:  # built already (read without the lock: it only drops)
            return False
        with self._lock:
            short, self._boundary_depth = self._boundary_depth, 0
        if not short or self._walked_at(0):
            return False
        before = self.rows_built
        self._expand_within(0, [(short // 2, _PRIME_BUDGET // 4), (short, _PRIME_BUDGET)])
        return self.rows_built != before

    def expand_all(self) -> None:
        """Build every state (up to ``max_states``: else :class:`CompileLimitError`)."""
        while self.expand(np.arange(self.num_states, dtype=np.int32), 1 << 30):
            pass

    def view(self, since: int) -> tuple[LexerDfa, Int32Array, int, np.ndarray]:
        """Return :meth:`snapshot`, the rows built after the first ``since``, the count, flags.

        The rows are the states whose rows were built, in build order (a copy), the count
        :attr:`rows_built`, and read-only flags whether each of the snapshot's states has its
        row built; taken together (one lock). The flags are a view: they go on to mark rows
        built later (rows the snapshot's transitions hold; their targets may be states past
        it), until the store's rows are reallocated. Kept up to date, they cost the rows built
        since the last view, not the lexer's size (a long generation stays linear).
        """
        with self._lock:
            built, n = self.rows_built, self.num_states
            trans, order = self._store[0], self._store[7]
            if self._flags is None or self._flags[0] is not trans:  # a new generation
                flags = self._store[1].copy()
            else:
                flags = self._flags[1]
                flags[order[self._flags[2] : built]] = True
            self._flags = (trans, flags, built)
            mine = flags[:n]
            mine.flags.writeable = False
            return self.snapshot(), order[since:built].copy(), built, mine

    def snapshot(self) -> LexerDfa:
        """Return the lexer built so far as a :class:`LexerDfa` (rows not built read -1)."""
        with self._lock:
            n = self.num_states
            return LexerDfa(
                self.byte_class, self._store[0][:n], self._accept[:n], self._alive[:n], self.names
            )

    def accept_alive(self) -> tuple[UInt64Array, UInt64Array]:
        """Return the terminal bitsets of the states built so far."""
        with self._lock:
            n = self.num_states
            return self._accept[:n], self._alive[:n]
