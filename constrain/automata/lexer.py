"""Stage 3: the combined lexer DFA over all terminals of a grammar.

:func:`build_lexer` runs one subset construction over the union of the terminals' byte NFAs (a
product construction of their automata) and minimises the result with respect to the pair of
terminal bitsets ``(accept_bits, alive_bits)``, so different terminals stay distinguishable. The
CFG engine walks it byte by byte: ``accept_bits[s]`` says which terminals may end a lexeme here,
``alive_bits[s]`` which ones may still be completed. State 0 is the lexeme boundary (nothing
consumed) and no transition ever leads back to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import numpy as np

from constrain._types import ByteArray, Int32Array, UInt64Array
from constrain.automata.byte_dfa import walk_bytes
from constrain.automata.key_groups import key_groups
from constrain.automata.nfa import CountedRegion, Nfa, NfaBuilder, nullable
from constrain.automata.product import boolean_fragment
from constrain.automata.subsets import (
    OverBudget,
    compress_classes,
    determinize,
    minimize_classes,
    nfa_live,
)
from constrain.errors import EmptyTerminalError, GrammarError
from constrain.ir import Alt, Concat, Grammar, Regex, Repeat, Terminal
from constrain.kernels.numba_dfa import bounded_classes_kernel, closure_csr_kernel, row_ids_kernel
from constrain.kernels.numba_subsets import state_bits_kernel

__all__ = [
    "MINIMIZE_MAX_CELLS",
    "EmptyTerminalError",
    "LargeLexer",
    "LexerDfa",
    "build_lexer",
    "grammar_lexer",
    "ignored_as_prefixes",
    "lexer_nfa",
    "lexer_restarts",
]


_NFA_STATES_PER_DFA_STATE = 4
_NFA_SLACK = 4096

MINIMIZE_MAX_CELLS = 1 << 13
"""Lexers of more transition cells (states x byte classes) are not minimised. Masks depend only
on the language, and minimisation costs ~35 ns a cell for mostly ~10% fewer states (MaskBench:
43,080 -> 39,227 states in 122 ms; a ``format: uri`` body built from its NFA, 3.4x). A table
is built per state *visited*, and equivalent states are rarely both visited: over 160 MaskBench
schemas' instances minimisation saved 21 of 12,870 table builds (59,785 tokens), for 8-15% of
their median time to the first mask."""


_ARRAY_DTYPES: dict[str, np.dtype[Any]] = {
    "byte_class": np.dtype(np.uint8),
    "trans": np.dtype(np.int32),
    "accept_bits": np.dtype(np.uint64),
    "alive_bits": np.dtype(np.uint64),
}


def _read_only(a: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Return ``a`` as a read-only, aligned, C-contiguous native array of ``dtype``.

    No copy when ``a`` already is one; a writable ``a`` stays writable (the result is a view).
    """
    flags = a.flags
    if a.dtype == dtype and flags.c_contiguous and flags.aligned:
        out = a  # (np.require checks the same, slower: a lazy lexer publishes every step)
    else:
        out = np.require(a, dtype=dtype, requirements=("C", "A"))
    if out is a and a.flags.writeable:
        out = a.view()
    out.flags.writeable = False
    return out


def _bits(row: UInt64Array) -> list[int]:
    out: list[int] = []
    for word_index, word in enumerate(row.tolist()):
        while word:
            low = word & -word
            out.append(word_index * 64 + low.bit_length() - 1)
            word ^= low
    return out


@dataclass(frozen=True, slots=True, eq=False)
class LexerDfa:
    """A DFA over bytes that runs every terminal's automaton at once.

    Semantics as a loop (``T`` terminals, ``W = max(1, ceil(T / 64))`` words per bitset)::

        state = 0                                   # lexeme boundary
        for byte in lexeme:
            state = trans[state, byte_class[byte]]  # never 0 again; -1 = no terminal fits
        accepted = [t for t in range(T) if accept_bits[state, t // 64] >> (t % 64) & 1]

    Parameters
    ----------
    byte_class : (256,) uint8
        Class of each byte.
    trans : (S, C) int32
        Next state per state and class; -1 when no terminal can continue.
    accept_bits : (S, W) uint64
        Bit ``t`` is set when terminal ``t`` matches the bytes read so far.
    alive_bits : (S, W) uint64
        Bit ``t`` is set when the bytes read so far are a prefix of some lexeme of terminal
        ``t``. Every state but a lone initial one has at least one bit set.
    names : tuple of str
        Terminal names, indexed by terminal id.
    """

    byte_class: ByteArray
    trans: Int32Array
    accept_bits: UInt64Array
    alive_bits: UInt64Array
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        # The one boundary where lexer arrays enter (built, empty or loaded from a file): each
        # becomes a read-only, C-contiguous array of its exact dtype, so the kernels that take
        # them see one type whatever the origin and are compiled once (no JIT on a request).
        for name, dtype in _ARRAY_DTYPES.items():
            object.__setattr__(self, name, _read_only(getattr(self, name), dtype))

    @property
    def num_terminals(self) -> int:
        """Number of terminals ``T``."""
        return len(self.names)

    @property
    def num_states(self) -> int:
        """Number of states ``S``."""
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of byte classes ``C``."""
        return int(self.trans.shape[1])

    def step(self, state: int, byte: int) -> int:
        """Return the state after ``byte`` from ``state`` (-1 when dead or already dead)."""
        if state < 0:
            return -1
        return int(self.trans[state, self.byte_class[byte]])

    def walk(self, state: int, data: bytes) -> int:
        """Return the state after reading ``data`` from ``state``; -1 as soon as it dies.

        Parameters
        ----------
        state : int
            Start state (0 at a lexeme boundary).
        data : bytes
            The bytes to read.

        Returns
        -------
        int
            The final state, or -1.
        """
        return walk_bytes(self.trans, self.byte_class, state, data)

    def terminals_accepting(self, state: int) -> list[int]:
        """Return the ids of the terminals that match exactly the bytes read to ``state``."""
        if state < 0:
            return []
        return _bits(self.accept_bits[state])

    def terminals_alive(self, state: int) -> list[int]:
        """Return the ids of the terminals that can still be completed from ``state``."""
        if state < 0:
            return []
        return _bits(self.alive_bits[state])

    def bounded_classes(
        self, depth: int, starts: Sequence[int] = (0,), max_states: int | None = None
    ) -> tuple[Int32Array, Int32Array] | None:
        """Return classes of the states reachable from ``starts``, alike on strings to ``depth``.

        States ``p`` and ``q`` share a class when, for every byte string ``w`` with
        ``len(w) <= depth``, the states after ``w`` accept and keep alive the same terminals (or
        are both dead). The lexer is minimal, so with an unbounded depth every state is a class
        of its own; with a token's length as the depth, the states of a long counted
        repetition (``maxLength`` strings: one state per count) fall into a few classes, and any
        walk of tokens that short sees the same from every state of a class.

        Returns
        -------
        states : (R,) int32
            The states reachable from ``starts`` (those first; all of them from state 0).
        classes : (R,) int32
            Their classes, ``0 .. k - 1``.

        None when more than ``max_states`` states are reachable (the search stops there).
        """
        local = np.full(self.num_states, -1, dtype=np.int32)
        limit = self.num_states if max_states is None else max_states
        first = np.asarray(starts, dtype=np.int32)
        states, lptr, lcls, ldst = closure_csr_kernel(self.trans, first, local, limit)
        if states.shape[0] == 0:
            return None
        outputs = np.concatenate([self.accept_bits[states], self.alive_bits[states]], axis=1)
        cls = np.empty(states.shape[0], dtype=np.int32)
        num_blocks = row_ids_kernel(outputs, cls)
        bounded_classes_kernel(lptr, lcls, ldst, cls, num_blocks, depth)
        return states, cls


def lexer_restarts(
    lexer: LexerDfa, greedy: bool, ignored: Sequence[int] = ()
) -> tuple[LexerDfa, Int32Array]:
    r"""Return the lexer the matcher kernels run, and where a lexeme ended at each state restarts.

    Without ``greedy``: ``lexer`` itself and all zeros (a lexeme that ends anywhere restarts at
    the boundary state 0, and the next byte may start any terminal). With ``greedy`` (longest
    match): a lexeme may end at state ``s`` before byte ``b`` only if no terminal continues with
    ``b`` from ``s``. That is a restriction of the boundary, one per distinct set of such bytes:
    for each, a *restart state* is appended, a copy of state 0 whose transitions on the bytes
    that would have continued the lexeme are dead; ``restart[s]`` names the one for an accepting
    ``s``. Restart states accept nothing, have no incoming edge and are their own restart
    (``restart[r] == r``: a boundary); ``restart[0] == 0``.

    Greedy lexing also never lets an ignored terminal follow itself: where a lexeme that only
    ignored terminals accept ends, the bytes that could only start one of those terminals again
    are dead too. So a bounded ignored terminal bounds the run (``WS: /[ \t\n]{1,8}/`` allows
    at most 8 blanks in a row, where without this rule two lexemes of 8 could follow each other);
    for an unbounded one nothing changes, since greedy lexing has taken the whole run already.

    Parameters
    ----------
    lexer : LexerDfa
        The combined lexer of a grammar.
    greedy : bool
        Lex greedily.
    ignored : sequence of int, optional
        The ignored terminals (``%ignore``), by id.

    Returns
    -------
    tuple of (LexerDfa, (S',) int32)
        The lexer with the restart states appended (``S' >= S``) and the restart of each state.
    """
    num_states = lexer.num_states
    restart = np.zeros(num_states, dtype=np.int32)
    if not greedy or num_states == 0:
        restart.flags.writeable = False
        return lexer, restart
    trans = lexer.trans
    live = (lexer.alive_bits != 0).any(axis=1)
    continues = (trans >= 0) & live[np.maximum(trans, 0)]
    accepting = np.flatnonzero((lexer.accept_bits != 0).any(axis=1))
    ignore_mask = np.zeros(lexer.accept_bits.shape[1], dtype=np.uint64)
    for t in ignored:
        ignore_mask[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    first = trans[0]
    first_alive = lexer.alive_bits[np.maximum(first, 0)]
    rows: dict[bytes, int] = {}
    new_trans: list[np.ndarray[Any, Any]] = []
    for s in accepting.tolist():
        dead = continues[s]
        accepted = lexer.accept_bits[s]
        if ignored and not (accepted & ~ignore_mask).any():
            # only ignored terminals end here: none of them may start again right away
            again = (first >= 0) & ~(first_alive & ~accepted).any(axis=1)
            dead = dead | again
        key = np.packbits(dead).tobytes()
        r = rows.get(key)
        if r is None:
            r = rows[key] = num_states + len(rows)
            new_trans.append(np.where(dead, -1, first).astype(np.int32))
        restart[s] = r
    if not rows:
        restart.flags.writeable = False
        return lexer, restart
    extra = np.stack(new_trans)
    alive_extra = np.zeros((extra.shape[0], lexer.alive_bits.shape[1]), dtype=np.uint64)
    for k in range(extra.shape[0]):
        targets = extra[k][extra[k] >= 0]
        if targets.size:
            alive_extra[k] = np.bitwise_or.reduce(lexer.alive_bits[targets], axis=0)
    extended = LexerDfa(
        lexer.byte_class,
        np.concatenate([trans, extra]),
        np.concatenate([lexer.accept_bits, np.zeros_like(alive_extra)]),
        np.concatenate([lexer.alive_bits, alive_extra]),
        lexer.names,
    )
    out = np.concatenate([restart, np.arange(num_states, num_states + len(rows), dtype=np.int32)])
    out.flags.writeable = False
    return extended, out


_Built = TypeVar("_Built")


def _eager(terminals: Sequence[tuple[str, Regex]], *, max_states: int) -> LexerDfa:
    return build_lexer(terminals, max_states=max_states)


@overload
def grammar_lexer(
    grammar: Grammar, *, max_states: int = ..., normalised: bool = ...
) -> tuple[Grammar, LexerDfa]: ...


@overload
def grammar_lexer(
    grammar: Grammar,
    *,
    max_states: int = ...,
    build: Callable[..., _Built],
    normalised: bool = ...,
) -> tuple[Grammar, _Built]: ...


def grammar_lexer(
    grammar: Grammar,
    *,
    max_states: int = 200_000,
    build: Callable[..., Any] = _eager,
    normalised: bool = False,
) -> tuple[Grammar, Any]:
    """Normalise a grammar and build its lexer, dropping terminals that match no string.

    A terminal with an empty language (an intersection nothing satisfies, ``minLength`` above
    ``maxLength``) makes every alternative that uses it derive nothing: those alternatives are
    removed and the grammar normalised again, until every terminal matches some string.

    Parameters
    ----------
    grammar : Grammar
        Any grammar.
    max_states : int, optional
        As for :func:`build_lexer`.
    build : callable, optional
        What builds the lexer from ``(name, regex)`` pairs and ``max_states=``:
        :func:`build_lexer` by default, or the lazy lexer's constructor.
    normalised : bool, optional
        ``grammar`` is already :meth:`Grammar.normalise`'s result (a compile that tries an
        eager and then a lazy lexer normalises once: 20 ms on MaskBench's 3,243-rule o9916).

    Returns
    -------
    tuple of (Grammar, LexerDfa)
        The normalised grammar without empty terminals, and its lexer (bit ``t`` is terminal
        ``t`` of the returned grammar), as ``build`` returns it.

    Raises
    ------
    GrammarError
        If the grammar accepts no string; when terminals were dropped the message names them.
    CompileLimitError
        As for :func:`build_lexer`.
    """
    dropped: list[str] = []
    try:
        g = grammar if normalised else grammar.normalise()
        while True:
            try:
                lexed = g
                if not g.ignore_at_end and g.ignore:
                    lexed = ignored_as_prefixes(g, max_states=max_states)
                return lexed, build(
                    [(t.name, t.regex) for t in lexed.terminals], max_states=max_states
                )
            except EmptyTerminalError as err:
                dropped += err.names
                g = g.without_terminals(err.names).normalise()
    except EmptyTerminalError:
        raise
    except GrammarError as err:
        if not dropped:
            raise
        listed = ", ".join(repr(n) for n in dropped[:5]) + (" ..." if len(dropped) > 5 else "")
        raise GrammarError(
            f"the grammar accepts no string: every derivation of rule {grammar.start!r} needs "
            f"one of the terminals {listed}, which match no string at all (for a JSON Schema: "
            "no instance satisfies it, e.g. minLength above maxLength)"
        ) from err


def ignored_as_prefixes(grammar: Grammar, *, max_states: int = 200_000) -> Grammar:
    """Return ``grammar`` (``ignore_at_end=False``) with its ignored terminals as prefixes.

    Every other terminal ``T`` becomes ``I* T``, where ``I`` is the alternation of the ignored
    terminals, and nothing is ignored any more: the parser is unchanged and a text can no
    longer end in an ignored lexeme. Under greedy lexing the prefix is ``I?`` (greedy lexing
    never puts an ignored terminal right after itself), so the language is exactly the
    grammar's (greedy or not) minus the texts that end in an ignored lexeme.

    Parameters
    ----------
    grammar : Grammar
        A normalised grammar with ``ignore_at_end=False`` and at least one ignored terminal.
    max_states : int, optional
        As for :func:`build_lexer` (the greedy check builds two small lexers).

    Returns
    -------
    Grammar
        The rewritten grammar: same rules and terminal names, ``ignore=()``.

    Raises
    ------
    GrammarError
        If a rule uses an ignored terminal; under greedy lexing, if the grammar ignores more
        than one terminal, or a terminal may start with a byte that may start or continue the
        ignored one (the prefixed terminal would accept splits that greedy lexing refuses).
    EmptyTerminalError
        If a terminal matches no string (:func:`grammar_lexer` drops it and tries again).
    """
    ignored = set(grammar.ignore)
    for rule in grammar.rules:
        used = ignored.intersection(s for alt in rule.alternatives for s in alt)
        if used:
            raise GrammarError(
                f"ignore_at_end=False: the ignored terminal {sorted(used)[0]!r} is also used in "
                f"rule {rule.name!r}; give the rule a terminal of its own"
            )
    terms = grammar.terminal_map()
    others = [t for t in grammar.terminals if t.name not in ignored]
    if not grammar.greedy:
        prefix: Regex = Repeat(Alt(tuple(terms[n].regex for n in grammar.ignore)), 0, None)
    else:
        if len(grammar.ignore) > 1:
            names = " | ".join(grammar.ignore)
            raise GrammarError(
                "ignore_at_end=False with greedy lexing takes one ignored terminal, this "
                f"grammar ignores {len(grammar.ignore)}: join them into one (IGNORED: "
                f"({names})+, then %ignore IGNORED)"
            )
        (name,) = grammar.ignore
        _check_greedy_prefix(name, terms[name].regex, others, max_states)
        prefix = Repeat(terms[name].regex, 0, 1)
    prefixed = tuple(Terminal(t.name, Concat((prefix, t.regex))) for t in others)
    return dataclasses.replace(grammar, terminals=prefixed, ignore=())


def _check_greedy_prefix(
    name: str, ignored: Regex, others: Sequence[Terminal], max_states: int
) -> None:
    """Refuse a greedy ``I? T`` rewrite that could split differently from greedy lexing.

    Greedy lexing reads ``I`` then ``T`` only where ``T``'s first byte can neither continue
    ``I`` nor start it (else the lexeme would run on as ``I``, or as another terminal that
    starts like ``I``); ``I? T`` reads that split anywhere. So no terminal may start with a
    byte that starts or continues ``I``.
    """
    if not others:
        return
    alone = build_lexer([(name, ignored)], max_states=max_states)
    ends = (alone.accept_bits != 0).any(axis=1)
    continues = (alone.trans[ends][:, alone.byte_class] >= 0).any(axis=0)
    begins = alone.trans[0, alone.byte_class] >= 0
    rest = build_lexer([(t.name, t.regex) for t in others], max_states=max_states)
    starts = rest.trans[0, rest.byte_class] >= 0
    clash = np.flatnonzero((continues | begins) & starts)
    if clash.size:
        byte = int(clash[0])
        first = others[_bits(rest.alive_bits[rest.trans[0, rest.byte_class[byte]]])[0]].name
        raise GrammarError(
            f"ignore_at_end=False with greedy lexing: terminal {first!r} may start with byte "
            f"{bytes([byte])!r} (as a UTF-8 byte), which may also start or continue the ignored "
            f"terminal {name!r}; make the two disjoint (or keep ignored lexemes at the end)"
        )


class LargeLexer(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :func:`build_lexer` past ``eager_members``: build this lexer lazily instead.

    ``nfa`` and ``entries`` are the union NFA and the terminals' first states
    (:func:`lexer_nfa`), for the lazy lexer to start from rather than build them again.
    """

    def __init__(self, nfa: Nfa, entries: list[list[int]]) -> None:
        super().__init__("the lexer outgrew the eager build's budget")
        self.nfa = nfa
        self.entries = entries


def lexer_nfa(
    terminals: Sequence[tuple[str, Regex]],
    *,
    max_states: int,
    region_min: int | None = None,
    fold_signal: int | None = None,
    fold_small: int | None = None,
) -> tuple[Nfa, list[list[int]], list[CountedRegion]]:
    """Return the union NFA of the terminals, each terminal's first states, and its regions.

    State 0 starts every terminal (an epsilon edge to each one's first state, or to each of
    the shared fragments that make it up, :mod:`~constrain.automata.key_groups`: their states
    are tagged with groups of terminals, :class:`~constrain.automata.nfa_parts.Nfa`). With
    ``region_min``, counted repetitions of that many copies or more are left folded
    (:meth:`NfaBuilder.enable_regions`); with ``fold_signal``, such a repetition raises
    :class:`~constrain.automata.nfa.FoldableRepeat` instead (the caller builds the lazy
    lexer), and so does one of ``fold_small`` copies or more once the copies of such
    repetitions add up to ``fold_signal``.

    Raises
    ------
    GrammarError
        If a terminal matches the empty string.
    CompileLimitError
        If the NFA outgrows ``4 * max_states + 4096`` states.
    """
    for name, regex in terminals:
        if nullable(regex):
            raise GrammarError(
                f"terminal {name!r} matches the empty string; every lexeme must consume at least "
                "one byte (make it non-optional, e.g. X+ instead of X*, and move the optionality "
                "into a rule)"
            )
    builder = NfaBuilder(
        _NFA_STATES_PER_DFA_STATE * max_states + _NFA_SLACK,
        "max_lexer_states",
        max_states,
        boolean_fragment,
    )
    if region_min is not None:
        builder.enable_regions(region_min)
    builder.fold_signal = fold_signal
    builder.fold_small = fold_small
    start = builder.new_state()
    plan = key_groups([regex for _, regex in terminals])
    entries: list[list[int]] = [[] for _ in terminals]
    pieces: list[tuple[int, int, int, int]] = []  # first state, end, final, owner
    groups: list[tuple[int, ...]] = []

    def add(regex: Regex, owners: tuple[int, ...]) -> None:
        entry = builder.new_state()
        builder.add_eps(start, entry)
        final = builder.build(regex, entry)
        owner = owners[0]
        if len(owners) > 1:  # a group's tag (key_groups)
            owner = len(terminals) + len(groups)
            groups.append(owners)
        pieces.append((entry, builder.num_states, final, owner))
        for t in owners:
            entries[t].append(entry)

    for t, (_, regex) in enumerate(terminals):
        if t not in plan.grouped:
            add(regex, (t,))
    for regex, owners in plan.fragments:
        add(regex, owners)
    nfa = builder.finish(start, [])
    tag = np.full(nfa.num_states, -1, dtype=np.int32)
    comp = np.full(nfa.num_states, -1, dtype=np.int32)
    for entry, end, final, owner in pieces:
        comp[entry:end] = owner
        tag[final] = owner
    nfa = dataclasses.replace(nfa, tag=tag, comp=comp)
    if groups:  # else the NFA keeps NO_GROUPS
        group_ptr = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum([len(g) for g in groups], out=group_ptr[1:])
        group_terms = np.array([t for g in groups for t in g], dtype=np.int32)
        nfa = dataclasses.replace(
            nfa, group_base=len(terminals), group_ptr=group_ptr, group_terms=group_terms
        )
    return nfa, entries, list(builder.regions or ())


def build_lexer(
    terminals: Sequence[tuple[str, Regex]],
    *,
    max_states: int = 200_000,
    fold_signal: int | None = None,
    fold_small: int | None = None,
    eager_members: int | None = None,
) -> LexerDfa:
    """Build the combined lexer DFA of several terminals (minimal up to ``MINIMIZE_MAX_CELLS``).

    Parameters
    ----------
    terminals : sequence of (str, Regex)
        Terminal names and languages; terminal ``t`` is bit ``t`` of the bitsets.
    max_states : int, optional
        Construction stops with :class:`~constrain.errors.CompileLimitError` as soon as the
        subset construction needs more states (or the NFA would exceed ``4 * max_states +
        4096`` states).
    fold_signal : int, optional
        Raise :class:`~constrain.automata.nfa.FoldableRepeat` at a repetition of this many
        copies that the lazy lexer folds (:func:`lexer_nfa`).
    fold_small : int, optional
        ... or at one of this many copies once such copies add up to ``fold_signal``.
    eager_members : int, optional
        Raise :class:`LargeLexer` (with the union NFA) as soon as the subset construction's
        subsets hold more NFA states than this in all (its work): the caller builds the lexer
        lazily instead.

    Returns
    -------
    LexerDfa
        State 0 is initial and never re-entered; no dead state is kept.

    Raises
    ------
    GrammarError
        If a terminal matches the empty string or no string at all (the message names it), or
        an :class:`~constrain.ir.Automaton` in it names a state out of range.
    CompileLimitError
        With ``limit_name="max_lexer_states"`` when the automaton (or an intersection or
        complement inside a terminal) is too large.
    """
    if max_states < 1:
        raise ValueError(f"max_states must be positive, got {max_states}")
    names = tuple(name for name, _ in terminals)
    nfa, entries, _ = lexer_nfa(
        terminals, max_states=max_states, fold_signal=fold_signal, fold_small=fold_small
    )
    live = nfa_live(nfa)
    empty = [name for name, ent in zip(names, entries, strict=True) if not live[ent].any()]
    if empty:
        raise EmptyTerminalError(empty)
    # at least one word, as the parser's bitsets: kernels read word 0 even without terminals
    num_words = max(1, -(-len(names) // 64))
    try:
        subsets = determinize(
            nfa, max_states=max_states, limit_name="max_lexer_states", keep_start=True, live=live,
            max_members=eager_members,
        )  # fmt: skip
    except OverBudget:
        raise LargeLexer(nfa, entries) from None
    num = subsets.trans.shape[0]
    if num == 0:  # no terminal at all
        return LexerDfa(
            np.zeros(256, dtype=np.uint8),
            np.full((1, 1), -1, dtype=np.int32),
            np.zeros((1, num_words), dtype=np.uint64),
            np.zeros((1, num_words), dtype=np.uint64),
            names,
        )
    accept_bits = np.zeros((num, num_words), dtype=np.uint64)
    alive_bits = np.zeros((num, num_words), dtype=np.uint64)
    state_bits_kernel(
        subsets.set_ptr, subsets.pool, nfa.tag, nfa.comp,
        (nfa.group_base, nfa.group_ptr, nfa.group_terms), accept_bits, alive_bits,
    )  # fmt: skip
    if num * subsets.trans.shape[1] > MINIMIZE_MAX_CELLS:
        byte_class, trans = compress_classes(subsets.trans, subsets.byte_class)
        return LexerDfa(byte_class, trans, accept_bits, alive_bits, names)
    signature = np.concatenate(
        (
            (np.arange(num) == 0).astype(np.uint64)[:, None],
            accept_bits,
            alive_bits,
        ),
        axis=1,
    )
    init_block = np.empty(num, dtype=np.int32)
    num_blocks = int(row_ids_kernel(signature, init_block))
    byte_class, trans, reps = minimize_classes(
        subsets.trans, subsets.byte_class, init_block, num_blocks
    )
    return LexerDfa(byte_class, trans, accept_bits[reps], alive_bits[reps], names)
