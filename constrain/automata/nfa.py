"""Stage 3: regex IR to byte-level NFAs, and NFAs to minimal DFAs.

1. **NFA.** The IR becomes a Thompson-style NFA over bytes (:class:`NfaBuilder`). Each
   :class:`~constrain.ir.CharSet` is compiled once (and cached) into the few UTF-8 byte-range
   sequences that encode it, as RE2 and Rust's ``utf8-ranges`` do, with suffixes shared;
   surrogates are dropped. Alternations of literals share a byte trie. Counted repetition is
   unrolled (``x{2,4}`` = ``xx(x(x)?)?``) after an upfront size check. Small repetitions and
   alternations (whitespace, numbers, string bodies: the pieces every JSON terminal repeats)
   are built once per process and placed as offset copies, written out in one numpy pass. An
   :class:`~constrain.ir.Automaton` becomes one NFA state per state and a character-set fragment
   per edge. :class:`~constrain.ir.Intersect` and :class:`~constrain.ir.Complement` have no
   Thompson construction: the builder asks the function it was given (``boolean``, the products
   of :mod:`constrain.automata.product`) for their trim DFA and splices it in whole (a big
   count intersected with a language is left to the lazy lexer, as a product region).
2. **Byte classes.** Bytes that no edge tells apart form one class, so the DFA has ``C <= 256``
   columns.
3. **Subset construction** over byte classes, skipping NFA states that cannot reach a final
   state, so the DFA has no dead state (kernel ``determinize_kernel``).
4. **Minimisation** by partition refinement (Hopcroft / Valmari, kernel ``minimize_kernel``),
   then classes with identical columns are merged.

Steps 2-4 are :func:`~constrain.automata.byte_dfa.nfa_to_dfa`; :func:`regex_dfa` runs all four.
"""

from __future__ import annotations

import functools
import threading
from array import array
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from constrain._types import Int32Array
from constrain.automata.byte_dfa import Dfa, DfaFragment, dfa_fragment, nfa_to_dfa, read_only
from constrain.automata.nfa_parts import (
    CountedRegion,
    FoldableRepeat,
    FragmentCache,
    Nfa,
    Template,
    check_automaton,
    counted_operand,
    fifo_room,
    literal_bytes,
    literal_text,
    literal_trie,
    make_template,
    nullable,
    region_counts,
    simplify_repeat,
    trie_template,
    utf8_bytes,
)
from constrain.errors import CompileLimitError
from constrain.ir import (
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
)

__all__ = [
    "BooleanFragments",
    "REGION_MAX_WIDTH",
    "WIDE_ITEM",
    "WIDE_MIN_COUNT",
    "CountedRegion",
    "FoldableRepeat",
    "Nfa",
    "NfaBuilder",
    "nfa_to_dfa",
    "nullable",
    "regex_dfa",
]

_NFA_STATES_PER_DFA_STATE = 4
_NFA_SLACK = 4096


# --------------------------------------------------------------------------------------------
# Character sets as NFA fragments
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _charset_template(cs: CharSet) -> Template:
    """Return the minimal fragment of ``cs`` (cached): its minimal DFA, as byte-range edges."""
    trie = trie_template(cs)
    if trie.num_states <= 3:
        return trie
    builder = NfaBuilder(1 << 30, "max_dfa_states", 1 << 30)
    builder.num_states = trie.num_states
    builder._edges.extend(x for edge in trie.edges for x in edge)
    dfa = nfa_to_dfa(builder.finish(0, [1]), max_states=1 << 30, limit_name="max_dfa_states")
    # A class has no cycle, so DFA state 0 has no incoming edge and one state accepts: the exit.
    exit_state = int(np.flatnonzero(dfa.accept)[0])
    relabel = np.arange(dfa.num_states, dtype=np.int64)
    relabel[[1, exit_state]] = relabel[[exit_state, 1]]
    edges: list[tuple[int, int, int, int]] = []
    per_byte = dfa.trans[:, dfa.byte_class]  # (S, 256)
    for state in range(dfa.num_states):
        row = per_byte[state]
        cuts = np.flatnonzero(np.diff(row)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, 256] - 1, strict=True):
            if row[lo] >= 0:
                edges.append((int(relabel[state]), int(lo), int(hi), int(relabel[row[lo]])))
    return make_template(dfa.num_states, edges)


# --------------------------------------------------------------------------------------------
# NFA construction
# --------------------------------------------------------------------------------------------


# counted repetitions with at least this many copies are built by replicating one copy
_CHAIN_MIN = 16
# repetitions and alternations of at most this many NFA states are built once per process (and
# per limit) and placed from that copy: the same whitespace, number and string-body pieces recur
# in every terminal of a JSON Schema lexer and in every schema a server compiles
_SHARED_MAX_STATES = 256
_SHARED_CACHE_SIZE = 4096
# (node, max NFA states, limit name, limit) -> fragment; a limit error is never cached
_SHARED_TEMPLATES: dict[tuple[Regex, int, str, int], Template | None] = {}
_SHARED_LOCK = threading.Lock()
# alternations and concatenations of _DFA_MIN_STATES NFA states or more are spliced as their
# minimal DFA from their second build on: a ``format`` body recurs, 3-28x smaller as a DFA
_DFA_MIN_STATES = 2048
_DFA_MAX_STATES = 20_000
_DFA_SEEN: dict[Regex, int] = {}  # big nodes built as NFAs so far, by times built
# (repetition or alternation, whether counts may fold) -> NfaBuilder._size of it, for nodes of
# at most _SIZED_MAX_STATES states (a bigger node is dearer to build than to size again)
_SIZES: dict[tuple[Regex, bool], int] = {}
_SIZED_MAX_STATES = 16 * _SHARED_MAX_STATES
_DFA_FRAGMENTS = FragmentCache(_SHARED_CACHE_SIZE, max_bytes=64 << 20)  # their minimal DFAs
# (item, boolean operations) -> the item's DFA when a counted region may fold it, else None
_PREFIX_FREE: dict[tuple[Regex, int], Dfa | None] = {}


REGION_MAX_WIDTH = 512
r"""Widest item (states of its DFA) a counted region folds."""
WIDE_ITEM = 32
r"""An item with more DFA states than this (Unicode ``\w``: 309) is *wide*: the lazy lexer walks
its states along the tokens' own paths (a neighbourhood branches on every byte class), and a
repetition of it folds from ``WIDE_MIN_COUNT`` copies (``\w{256}`` unrolled: 79k states, 0.4 s
to build; folded, 5 ms)."""
WIDE_MIN_COUNT = 8
PRODUCT_FOLD = 50_000
r"""``X{lo,hi} & A`` is a product region (:class:`CountedRegion` with ``other``), built by the
lazy lexer as reached, when ``A``'s states times the count's would pass this many (and ``hi``
is at least ``_PRODUCT_MIN_COUNT``). Built whole, a Unicode ``\w`` ``pattern`` with
``maxLength: 1024`` (410,000) took 23-87 ms to the first mask, 0.12-0.2 s where its terminal
recurs (MaskBench ``o63937``, ``o63935``); as a region, 4-20 ms, but the whole lexer is then
lazy and those schemas' tokens cost 1.3-4x more (rows and tables built as tokens reach them)."""
_PRODUCT_MIN_COUNT = 64
# (count, rest, limit, PRODUCT_FOLD) -> (other DFA, its counts) of a product region, or None
_PRODUCTS: dict[tuple[Regex, Regex, int, int], tuple[Dfa, tuple[Any, int]] | None] = {}


def _prefix_free_dfa(item: Regex, builder: NfaBuilder) -> Dfa | None:
    """Return ``item``'s minimal DFA if its language is prefix-free and without ``""``.

    Memoised per process (a JSON string character: 0.9 ms to build, asked at every count).
    """
    if nullable(item) or builder.boolean is None:
        return None
    key = (item, id(builder.boolean))
    if key in _PREFIX_FREE:
        return _PREFIX_FREE[key]
    try:
        dfa: Dfa | None = regex_dfa(
            item, max_states=4096, limit_name=builder.limit_name, boolean=builder.boolean
        )
    except CompileLimitError:
        dfa = None
    if dfa is not None:
        finals = np.flatnonzero(dfa.accept)
        bad = finals.size != 1 or dfa.accept[0] or (dfa.trans[finals[0]] >= 0).any()
        if bad or dfa.num_states - 1 > REGION_MAX_WIDTH:
            dfa = None
    with _SHARED_LOCK:
        fifo_room(_PREFIX_FREE, _SHARED_CACHE_SIZE)[key] = dfa
    return dfa


class BooleanFragments(Protocol):
    """Compiles an intersection or a complement into NFA material (a trim DFA's edges)."""

    def __call__(
        self, node: Intersect | Complement, *, max_states: int, limit_name: str
    ) -> DfaFragment:
        """Return the fragment of ``node``, built within ``max_states`` (``limit_name``)."""
        ...


class NfaBuilder:
    """Build a Thompson-style byte NFA from regex IR nodes.

    Invariant: a fragment built by ``build(node, start)`` never adds an edge *into* ``start``, so
    alternatives and concatenations can share states without epsilon edges.

    Parameters
    ----------
    max_nfa_states : int
        Size at which construction stops with :class:`~constrain.errors.CompileLimitError`.
    limit_name, limit : str, int
        The user-facing limit reported in that error.
    boolean : BooleanFragments, optional
        Compiles :class:`~constrain.ir.Intersect` and :class:`~constrain.ir.Complement` nodes
        (by products); without it, building one raises :class:`TypeError`.
    """

    def __init__(
        self,
        max_nfa_states: int,
        limit_name: str,
        limit: int,
        boolean: BooleanFragments | None = None,
    ) -> None:
        self.num_states = 0
        self.max_nfa_states = max_nfa_states
        self.limit_name = limit_name
        self.limit = limit
        self.boolean = boolean
        self._edges = array("i")  # src, lo, hi, dst, ...
        self._eps = array("i")  # src, dst, ...
        self._chunks: list[Int32Array] = []
        # copies placed so far, written out in one pass by _arrays: the byte-edge tables and
        # their (base, entry, edge count); the epsilon tables of those that have some
        self._placed: list[Int32Array] = []
        self._placed_at = array("q")
        self._placed_eps: list[Int32Array] = []
        self._placed_eps_at = array("q")
        self._sizes: dict[int, tuple[Regex, int]] = {}
        self._fragments: dict[int, tuple[Regex, DfaFragment]] = {}
        self._templates: dict[int, tuple[Regex, Template | None]] = {}
        # counted repetitions left folded (the lazy lexer's regions), when enabled
        self.regions: list[CountedRegion] | None = None
        self.region_min = 0
        # raise FoldableRepeat at a foldable repetition of this many copies (eager builds that
        # hand large counts to the lazy lexer); None: never
        self.fold_signal: int | None = None
        # ... or at one of ``fold_small`` copies or more (None: never) once such counts add up
        # to ``fold_signal`` (many bounded strings: an eager build as dear as one long count)
        self.fold_small: int | None = None
        self.fold_mass = 0

    def _fold_threshold(self) -> int | None:
        """Return the fewest copies of a repetition that count towards folding; None: off."""
        small, signal = self.fold_small, self.fold_signal
        return signal if small is None or signal is None else min(small, signal)

    def enable_regions(self, region_min: int) -> None:
        """Fold counted repetitions of ``region_min`` copies or more into :attr:`regions`.

        Only repetitions of a prefix-free, non-nullable item (a character, a JSON string
        character with its escapes) whose DFA has at most ``REGION_MAX_WIDTH`` states are
        folded (alone, or intersected: :meth:`_product_region`); the lazy lexer counts them.
        """
        self.regions = []
        self.region_min = region_min

    def new_state(self) -> int:
        """Add a state and return its id."""
        self.num_states += 1
        return self.num_states - 1

    def add_eps(self, src: int, dst: int) -> None:
        """Add an epsilon edge."""
        self._eps.append(src)
        self._eps.append(dst)

    def _size(self, node: Regex) -> int:
        """Return the number of states :meth:`build` adds for ``node`` (memoised by identity).

        Repetitions and alternations are memoised process-wide too: the same string bodies and
        counted pieces recur across terminals and schemas, and were sized anew by each build.
        """
        found = self._sizes.get(id(node))
        if found is not None:
            return found[1]
        shared = isinstance(node, (Repeat, Alt))
        if shared:
            # an intersection is sized by its count alone where a lazy lexer may fold it
            key = (node, self.regions is not None or self.fold_signal is not None)
            size = _SIZES.get(key, -1)
            if size >= 0:
                self._sizes[id(node)] = (node, size)
                return size
        if isinstance(node, CharSet):
            size = _charset_template(node).num_states - 1
        elif isinstance(node, Literal):
            size = len(node.text.encode("utf-8", "surrogatepass"))
        elif isinstance(node, Concat):
            size = sum(self._size(item) for item in node.items)
        elif isinstance(node, Alt):
            size = 1 + sum(self._size(item) for item in node.items)
        elif isinstance(node, Repeat):
            simple = simplify_repeat(node)
            if simple is not node:
                size = self._size(simple)
            else:
                copies = node.min + (1 if node.max is None else node.max - node.min)
                size = 2 + copies * self._size(node.item)
        elif isinstance(node, Automaton):
            check_automaton(node)
            inner = sum(_charset_template(cs).num_states - 2 for _, cs, _ in node.edges)
            size = node.num_states + 1 + inner
        elif isinstance(node, (Intersect, Complement)):
            split = counted_operand(node) if isinstance(node, Intersect) else None
            lazy = self.regions is not None or self.fold_signal is not None
            if lazy and split is not None and (split[0].max or 0) >= _PRODUCT_MIN_COUNT:
                # maybe a product region: sized as its count alone, not built to be sized
                size = 2 + (split[0].max or 0) * self._size(split[0].item)
            else:
                size = self._fragment(node).num_states + 1
        else:
            raise TypeError(f"not a regex IR node: {node!r}")
        self._sizes[id(node)] = (node, size)  # holding `node` keeps its id from being reused
        if shared and size <= _SIZED_MAX_STATES:  # (a big node, e.g. an enum, is not kept alive)
            with _SHARED_LOCK:
                fifo_room(_SIZES, _SHARED_CACHE_SIZE)[key] = size
        return size

    def _check(self, extra: int) -> None:
        if self.num_states + extra > self.max_nfa_states:
            raise CompileLimitError(
                self.limit_name,
                self.limit,
                self.num_states + extra,
                hint=(
                    f"the regex unrolls to {self.num_states + extra} automaton positions "
                    f"(more than {self.max_nfa_states}); large counted repetitions such as "
                    "x{1,100000} are the usual cause: lower the bound or raise the limit"
                ),
            )

    def build(self, node: Regex, start: int) -> int:
        """Add the fragment of ``node`` starting at ``start``; return its end state."""
        if isinstance(node, Literal):
            cur = start
            data = utf8_bytes(node.text)
            if data is None:  # a surrogate: no UTF-8 string matches
                return self.new_state()
            edges = self._edges
            for byte in data:
                nxt = self.num_states
                self.num_states += 1
                edges.extend((cur, byte, byte, nxt))
                cur = nxt
            return cur
        if isinstance(node, CharSet):
            return self._charset(node, start)
        if isinstance(node, (Concat, Alt)):
            return self._compound(node, start)
        if isinstance(node, Repeat):
            return self._repeat(node, start)
        if isinstance(node, Automaton):
            return self._automaton(node, start)
        if isinstance(node, (Intersect, Complement)):
            end = self._product_region(node, start) if isinstance(node, Intersect) else -1
            return end if end >= 0 else self._splice(self._fragment(node), start)
        raise TypeError(f"not a regex IR node: {node!r}")

    def _compound(self, node: Concat | Alt, start: int) -> int:
        """Build a concatenation or an alternation, as its minimal DFA once it recurs (big)."""
        plain = self.regions is None and self.boolean is not None
        if plain and _DFA_FRAGMENTS and (frag := _DFA_FRAGMENTS.get(node)) is not None:
            return self._splice(frag, start)
        before, mass = self.num_states, self.fold_mass
        if isinstance(node, Alt):
            cur = self._alt(node, start)
        else:
            cur = start
            for item in node.items:
                cur = self.build(item, cur)
        # a node whose counts the lazy lexer may fold (``fold_mass`` grew) stays an NFA
        if plain and self.num_states - before >= _DFA_MIN_STATES and mass == self.fold_mass:
            self._recurring(node, self.num_states - before)
        return cur

    def _recurring(self, node: Concat | Alt, size: int) -> None:
        """Count a big build of ``node``; at the second one, cache its minimal DFA fragment."""
        with _SHARED_LOCK:
            seen = fifo_room(_DFA_SEEN, _SHARED_CACHE_SIZE)[node] = _DFA_SEEN.get(node, 0) + 1
            if seen != 2 or not _DFA_FRAGMENTS.claim(node):  # a concurrent build keeps its NFA
                return
        try:
            assert self.boolean is not None
            dfa = regex_dfa(
                node, max_states=min(self.limit, _DFA_MAX_STATES), limit_name=self.limit_name,
                boolean=self.boolean,
            )  # fmt: skip
        except CompileLimitError:
            return
        if 2 * dfa.num_states > size:
            return
        frag = dfa_fragment(dfa)
        with _SHARED_LOCK:
            _DFA_FRAGMENTS.add(node, frag)

    def _place(self, tpl: Template, start: int) -> int:
        """Add a copy of ``tpl`` entered at ``start`` (edges written by :meth:`_arrays`)."""
        base = self.num_states - 1  # local state j >= 1 becomes base + j
        self.num_states += tpl.num_states - 1
        self._placed.append(tpl.table)
        self._placed_at.extend((base, start, tpl.table.shape[1]))
        if tpl.eps.shape[1]:
            self._placed_eps.append(tpl.eps)
            self._placed_eps_at.extend((base, start, tpl.eps.shape[1]))
        return base + tpl.exit

    def _shared(self, node: Regex) -> Template | None:
        """Return the process-wide copy of a small ``node``'s fragment, None if not shareable.

        A cached copy is found without sizing ``node``; on a miss, ``node`` is sized (so a
        limit error fires before anything is built) and copied if small.
        """
        key = (node, self.max_nfa_states, self.limit_name, self.limit)
        if key in _SHARED_TEMPLATES:
            return _SHARED_TEMPLATES[key]
        if self._size(node) > _SHARED_MAX_STATES:
            return None
        tpl = _local_template(node, self)
        with _SHARED_LOCK:  # compilers may run in several threads
            fifo_room(_SHARED_TEMPLATES, _SHARED_CACHE_SIZE)[key] = tpl
        return tpl

    def _build_root(self, node: Regex, start: int) -> int:
        """Build ``node`` itself without placing it from a shared copy (its parts may be)."""
        if isinstance(node, Repeat):
            return self._unroll(node, start)
        if isinstance(node, Alt):
            return self._alt_direct(node, start)
        return self.build(node, start)

    def _arrays(self) -> tuple[Int32Array, Int32Array]:
        """Return all byte edges ``(4, E)`` and epsilon edges ``(2, F)`` added so far."""
        table = np.frombuffer(self._edges, dtype=np.int32).reshape(-1, 4).T
        eps = np.frombuffer(self._eps, dtype=np.int32).reshape(-1, 2).T
        parts = [table, *self._chunks]
        eps_parts = [eps]
        for local, where, out in (
            (self._placed, self._placed_at, parts),
            (self._placed_eps, self._placed_eps_at, eps_parts),
        ):
            if not local:
                continue
            at = np.frombuffer(where, dtype=np.int64).reshape(-1, 3)
            cat = np.concatenate(local, axis=1)
            base = np.repeat(at[:, 0], at[:, 2])
            entry = np.repeat(at[:, 1], at[:, 2])
            placed = cat.copy()
            for row in (0, cat.shape[0] - 1):  # source and destination
                placed[row] = np.where(cat[row] == 0, entry, base + cat[row])
            out.append(placed)
        table = np.concatenate(parts, axis=1) if len(parts) > 1 else table.copy()
        eps = np.concatenate(eps_parts, axis=1) if len(eps_parts) > 1 else eps.copy()
        return table, eps

    def _charset(self, cs: CharSet, start: int, exit_state: int = -1) -> int:
        """Add the fragment of ``cs`` from ``start`` to ``exit_state`` (a new state if -1)."""
        tpl = _charset_template(cs)
        if exit_state < 0:
            return self._place(tpl, start)
        base = self.num_states - 2  # template state r >= 2 becomes base + r
        self.num_states += tpl.num_states - 2
        if len(tpl.edges) <= 8:
            edges = self._edges
            for s, lo, hi, d in tpl.edges:
                src = start if s == 0 else exit_state if s == 1 else base + s
                edges.extend((src, lo, hi, exit_state if d == 1 else base + d))
        else:
            relabel = np.arange(base, base + tpl.num_states, dtype=np.int32)
            relabel[:2] = start, exit_state
            chunk = tpl.table.copy()
            chunk[0] = relabel[tpl.table[0]]
            chunk[3] = relabel[tpl.table[3]]
            self._chunks.append(chunk)
        return exit_state

    def _copy_template(self, item: Regex) -> Template | None:
        """Return ``item``'s fragment with local state ids (memoised), or None.

        None when the fragment ends at its entry (an empty match only), which cannot be
        chained. Small items come from the process-wide cache, large ones are memoised by
        identity for this build.
        """
        key = (item, self.max_nfa_states, self.limit_name, self.limit)
        if key in _SHARED_TEMPLATES or self._size(item) <= _SHARED_MAX_STATES:
            return self._shared(item)
        found = self._templates.get(id(item))
        if found is not None:
            return found[1]
        tpl = _local_template(item, self)
        self._templates[id(item)] = (item, tpl)  # holding `item` keeps its id from being reused
        return tpl

    def _chain(self, item: Regex, start: int, copies: int) -> np.ndarray | None:
        """Add ``copies`` fragments of ``item`` in sequence from ``start``; return their exits.

        The same states and edges as ``copies`` calls of :meth:`build`, written in one numpy
        operation from one copy built once: counted repetitions (``maxLength`` strings,
        digits) are the bulk of JSON Schema lexers. None when ``item`` cannot be chained.
        """
        tpl = self._copy_template(item)
        if tpl is None:
            return None
        exit_local, edges, eps = tpl.exit, tpl.table, tpl.eps
        width = tpl.num_states - 1  # new states per copy: local ids 1 .. num - 1
        first = self.num_states
        self.num_states += copies * width
        base = first - 1 + width * np.arange(copies, dtype=np.int64)  # local j >= 1 -> base + j
        exits = base + exit_local
        entries = np.empty(copies, dtype=np.int64)
        entries[0] = start
        entries[1:] = exits[:-1]

        def place(local: Int32Array) -> np.ndarray:
            ids = base[:, None] + local[None, :]
            return np.where(local[None, :] == 0, entries[:, None], ids).reshape(-1)

        if edges.shape[1]:
            chunk = np.empty((4, copies * edges.shape[1]), dtype=np.int32)
            chunk[0] = place(edges[0])
            chunk[1] = np.tile(edges[1], copies)
            chunk[2] = np.tile(edges[2], copies)
            chunk[3] = place(edges[3])
            self._chunks.append(chunk)
        if eps.shape[1]:
            pairs = np.empty((copies * eps.shape[1], 2), dtype=np.int32)
            pairs[:, 0] = place(eps[0])
            pairs[:, 1] = place(eps[1])
            self._eps.frombytes(pairs.tobytes())
        return exits

    def _automaton(self, node: Automaton, start: int) -> int:
        """Add an automaton: one NFA state per state, a CharSet fragment per edge."""
        self._check(self._size(node))
        base = self.num_states
        self.num_states += node.num_states + 1
        end = base + node.num_states
        self.add_eps(start, base + node.start)  # the start state may have edges into it
        for src, chars, dst in node.edges:
            self._charset(chars, base + src, base + dst)
        for state in sorted(node.accept):
            self.add_eps(base + state, end)
        return end

    def _fragment(self, node: Intersect | Complement) -> DfaFragment:
        """Return the minimal DFA of ``node`` as a fragment (memoised by identity and value)."""
        found = self._fragments.get(id(node))
        if found is None:
            if self.boolean is None:
                raise TypeError(
                    f"{type(node).__name__} needs products: give NfaBuilder the boolean "
                    "operations (constrain.automata.product.boolean_fragment)"
                )
            frag = self.boolean(node, max_states=self.limit, limit_name=self.limit_name)
            found = self._fragments[id(node)] = (node, frag)  # `node` keeps its id alive
        return found[1]

    def _splice(self, frag: DfaFragment, start: int) -> int:
        """Add a DFA (a DFA is an NFA): its state 0 follows ``start`` by an epsilon edge."""
        self._check(frag.num_states + 1)
        base = self.num_states
        self.num_states += frag.num_states + 1
        end = base + frag.num_states
        self.add_eps(start, base)
        if frag.table.shape[1]:
            self._chunks.append(frag.table + np.array([[base], [0], [0], [base]], np.int32))
        for state in frag.accept_states.tolist():
            self.add_eps(base + state, end)
        return end

    def _alt(self, node: Alt, start: int) -> int:
        texts = literal_bytes(node.items)
        if texts is None and not all(literal_text(item) is not None for item in node.items):
            tpl = self._shared(node)
            if tpl is not None:
                return self._place(tpl, start)
        return self._alt_direct(node, start, texts)

    def _alt_direct(self, node: Alt, start: int, texts: list[bytes] | None = None) -> int:
        """Build an alternation: its literal alternatives as one acyclic automaton (a trie)."""
        join = self.new_state()
        if texts is None:
            texts = []
            for item in node.items:
                text = literal_text(item)
                data = utf8_bytes(text) if text is not None else None
                if data is not None:
                    texts.append(data)
                else:
                    self.add_eps(self.build(item, start), join)
        if texts:
            edges, ends, count = literal_trie(texts, start, self.num_states)
            self._check(count)
            self.num_states += count
            self._edges.frombytes(edges.tobytes())
            pairs = np.empty((ends.shape[0], 2), dtype=np.int32)
            pairs[:, 0] = ends
            pairs[:, 1] = join
            self._eps.frombytes(pairs.tobytes())
        return join

    def _repeat(self, node: Repeat, start: int) -> int:
        simple = simplify_repeat(node)
        if simple is not node:
            return self.build(simple, start)
        count = node.min if node.max is None else node.max
        if self.regions is not None and count >= self.region_min:
            folded = self._region(node, start)
            if folded >= 0:
                return folded
        elif (least := self._fold_threshold()) is not None and count >= min(least, WIDE_MIN_COUNT):
            assert self.fold_signal is not None  # a threshold needs a signal
            dfa = _prefix_free_dfa(node.item, self)
            if dfa is not None and dfa.num_states - 1 > WIDE_ITEM and count >= WIDE_MIN_COUNT:
                raise FoldableRepeat(node, WIDE_MIN_COUNT)
            if dfa is not None and count >= least:
                self.fold_mass += count
                if count >= self.fold_signal or self.fold_mass >= self.fold_signal:
                    region_min = self.fold_signal if count >= self.fold_signal else least
                    raise FoldableRepeat(node, region_min)
        tpl = self._shared(node)
        if tpl is not None:
            self._check(tpl.num_states - 1)
            return self._place(tpl, start)
        self._check(self._size(node))
        return self._unroll(node, start)

    def _region(self, node: Repeat, start: int) -> int:
        """Fold ``node`` into a :class:`CountedRegion` from ``start``; -1 if it cannot be."""
        assert self.regions is not None
        dfa = _prefix_free_dfa(node.item, self)
        if dfa is None:
            return -1
        hi = node.min if node.max is None else node.max
        after = self.new_state()
        self.regions.append(CountedRegion(start, after, node.min, hi, node.item, dfa))
        # one detached copy of the item, so the byte classes tell its bytes apart
        regions, self.regions = self.regions, None
        self.build(node.item, self.new_state())
        self.regions = regions
        if node.max is None:  # x{lo,} = x{lo} x*
            return self.build(Repeat(node.item, 0, None), after)
        return after

    def _product_region(self, node: Intersect, start: int) -> int:
        """Fold a big ``X{lo,hi} & A`` into a lazy product region (eager: raise); -1: not folded."""
        split = counted_operand(node)
        if split is None or (self.regions is None and self.fold_signal is None):
            return -1
        count, rest = split
        assert count.max is not None and self.boolean is not None
        item = _prefix_free_dfa(count.item, self)
        if item is None or count.max < _PRODUCT_MIN_COUNT:
            return -1
        key = (count, rest, self.limit, PRODUCT_FOLD)  # an eager build, then a lazy one
        if (found := _PRODUCTS.get(key)) is None and key not in _PRODUCTS:
            lim, name = self.limit, self.limit_name
            other = regex_dfa(rest, max_states=lim, limit_name=name, boolean=self.boolean)
            big = other.num_states * (count.max + 1) * (item.num_states - 1) > PRODUCT_FOLD
            reach = region_counts(item, other, count.max) if big else None  # None: built whole
            found = None if reach is None else (other, reach)
            with _SHARED_LOCK:
                fifo_room(_PRODUCTS, 64)[key] = found
        if found is None:
            return -1
        other, reach = found
        if self.regions is None:
            raise FoldableRepeat(node, self._fold_threshold() or 0)
        after = self.new_state()
        region = CountedRegion(start, after, count.min, count.max, count.item, item, other, reach)
        self.regions.append(region)
        # detached copies, so the byte classes tell the item's and the other's bytes apart
        regions, self.regions = self.regions, None
        self.build(count.item, self.new_state())
        src, dst = self.new_state(), self.new_state()
        for lo in np.flatnonzero(np.diff(other.byte_class.astype(np.int64), prepend=-1)).tolist():
            self._edges.extend((src, lo, 255, dst))  # a class boundary at each run's start
        self.regions = regions
        return after

    def _unroll(self, node: Repeat, start: int) -> int:
        item, lo, hi = node.item, node.min, node.max
        if hi is not None and hi >= _CHAIN_MIN:
            exits = self._chain(item, start, hi)
            if exits is not None:
                if hi == lo:
                    return int(exits[-1])
                final = self.new_state()  # every prefix of at least `lo` copies may stop
                optional = exits[lo - 1 :] if lo > 0 else np.concatenate([[start], exits])
                pairs = np.empty((optional.shape[0], 2), dtype=np.int32)
                pairs[:, 0] = optional
                pairs[:, 1] = final
                self._eps.frombytes(pairs.tobytes())
                return final
        cur = start
        for _ in range(lo - 1 if hi is None and lo > 0 else lo):
            cur = self.build(item, cur)
        if hi is None:  # x* (lo == 0) or x+ for the last mandatory copy
            head = self.new_state()
            self.add_eps(cur, head)
            end = self.build(item, head)
            self.add_eps(end, head)
            return head if lo == 0 else end
        if hi == lo:
            return cur
        final = self.new_state()  # x{0,k} = (x(x(x)?)?)?, every prefix may stop at `final`
        self.add_eps(cur, final)
        for _ in range(hi - lo):
            cur = self.build(item, cur)
            self.add_eps(cur, final)
        return final

    def finish(self, start: int, finals: Sequence[int]) -> Nfa:
        """Return the NFA; ``finals[t]`` accepts terminal ``t``, every state is terminal 0's.

        (:func:`~constrain.automata.lexer.lexer_nfa` sets the tags and components of a union.)
        """
        self._check(0)
        n = self.num_states
        table, eps = self._arrays()
        tag = np.full(n, -1, dtype=np.int32)
        tag[np.asarray(finals, dtype=np.int64)] = np.arange(len(finals), dtype=np.int32)
        comp = np.zeros(n, dtype=np.int32)
        src, lo, hi, dst, eps_src, eps_dst = (np.ascontiguousarray(r) for r in (*table, *eps))
        return Nfa(n, src, lo, hi, dst, eps_src, eps_dst, start, tag, comp)


def _local_template(node: Regex, parent: NfaBuilder) -> Template | None:
    """Return ``node``'s fragment with local ids, None when it ends at its entry.

    Built under ``parent``'s limits and boolean operations, sharing its size memo (sizes depend
    on the node only): nested shared pieces were otherwise sized again at every level, most of a
    first SQL compile.
    """
    sub = NfaBuilder(parent.max_nfa_states, parent.limit_name, parent.limit, parent.boolean)
    sub._sizes = parent._sizes
    sub.num_states = 1
    exit_state = sub._build_root(node, 0)
    if exit_state == 0:
        return None
    table, eps = sub._arrays()
    read_only(table, eps)
    return Template(sub.num_states, exit_state, (), table, eps)


def regex_dfa(regex: Regex, *, max_states: int, limit_name: str, boolean: BooleanFragments) -> Dfa:
    """Return the minimal DFA of ``regex``: its NFA (:class:`NfaBuilder`), then :func:`nfa_to_dfa`.

    Parameters
    ----------
    regex : Regex
        The language.
    max_states : int
        Largest DFA allowed; the NFA may grow to ``4 * max_states + 4096`` states.
    limit_name : str
        The limit reported in the error.
    boolean : BooleanFragments
        Compiles the intersections and complements inside ``regex``.

    Returns
    -------
    Dfa
        The minimal DFA, without dead states; its arrays are read-only.

    Raises
    ------
    CompileLimitError
        When the NFA or the DFA grows past its limit.
    GrammarError
        If an :class:`~constrain.ir.Automaton` names a state outside ``0 .. num_states - 1``.
    """
    builder = NfaBuilder(
        _NFA_STATES_PER_DFA_STATE * max_states + _NFA_SLACK, limit_name, max_states, boolean
    )
    start = builder.new_state()
    end = builder.build(regex, start)
    return nfa_to_dfa(builder.finish(start, [end]), max_states=max_states, limit_name=limit_name)
