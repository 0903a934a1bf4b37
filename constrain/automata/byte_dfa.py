"""Stage 3: the byte-level DFA as flat arrays, and the constructions that need no NFA.

:class:`Dfa` is what every regular language of the engine compiles to (``byte_class:
uint8[256]``, ``trans: int32[S, C]`` with -1 = dead, ``accept: bool[S]``, start state 0);
:class:`DfaFragment` is a DFA as NFA material (its byte edges), spliced into a larger NFA by the
builder (:mod:`constrain.automata.nfa`). The modules above build these: the NFA builder and
subset construction (:mod:`~constrain.automata.nfa`), the products of intersections and
complements (:mod:`~constrain.automata.product`) and the regex compiler that joins them
(:mod:`~constrain.automata.dfa`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from constrain._types import BoolArray, ByteArray, Int32Array, Int64Array
from constrain.automata.subsets import determinize, minimize_classes
from constrain.kernels.numba_dfa import range_edges_kernel
from constrain.kernels.numba_subsets import state_bits_kernel

if TYPE_CHECKING:
    from constrain.automata.nfa_parts import Nfa

__all__ = [
    "Dfa",
    "DfaFragment",
    "dfa_fragment",
    "empty_dfa",
    "minimal_dfa",
    "nfa_to_dfa",
    "read_only",
    "walk_bytes",
]


def read_only(*arrays: np.ndarray) -> None:
    """Mark ``arrays`` read-only (automata are shared by caches and must not change)."""
    for arr in arrays:
        arr.flags.writeable = False


def walk_bytes(trans: Int32Array, byte_class: ByteArray, state: int, data: bytes) -> int:
    """Return the state of a byte DFA after reading ``data`` from ``state``; -1 once dead."""
    for byte in data:
        if state < 0:
            return -1
        state = int(trans[state, byte_class[byte]])
    return state


@dataclass(frozen=True, slots=True, eq=False)
class Dfa:
    """A minimal deterministic automaton over bytes; state 0 is initial.

    Semantics as a loop::

        state = 0
        for byte in data:
            state = trans[state, byte_class[byte]]
            if state < 0:
                return False  # dead: no continuation is accepted
        return accept[state]

    Parameters
    ----------
    byte_class : (256,) uint8
        Class of each byte.
    trans : (S, C) int32
        Next state per state and class; -1 is the (implicit) dead state.
    accept : (S,) bool
        Accepting states.
    live : (S,) bool
        States from which an accepting state is reachable. Dead states are removed, so this is
        all True except for the single state of the empty language.
    """

    byte_class: ByteArray
    trans: Int32Array
    accept: BoolArray
    live: BoolArray

    @property
    def num_states(self) -> int:
        """Number of states ``S``."""
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of byte classes ``C``."""
        return int(self.trans.shape[1])

    def step(self, state: int, byte: int) -> int:
        """Return the state after reading ``byte`` from ``state``; -1 when dead.

        Parameters
        ----------
        state : int
            A state id, or -1 (stays -1).
        byte : int
            A byte value in ``0..255``.

        Returns
        -------
        int
            The next state, or -1.
        """
        if state < 0:
            return -1
        return int(self.trans[state, self.byte_class[byte]])

    def walk(self, state: int, data: bytes) -> int:
        """Return the state after reading ``data`` from ``state``; -1 as soon as it dies.

        Parameters
        ----------
        state : int
            Start state (0 for the beginning of the string).
        data : bytes
            The bytes to read.

        Returns
        -------
        int
            The final state, or -1.
        """
        return walk_bytes(self.trans, self.byte_class, state, data)

    def matches(self, data: bytes) -> bool:
        """Return whether the whole of ``data`` is in the language."""
        state = self.walk(0, data)
        return state >= 0 and bool(self.accept[state])

    def is_empty_language(self) -> bool:
        """Return whether no string at all is accepted."""
        return not bool(self.live[0])

    def matches_empty(self) -> bool:
        """Return whether the empty string is accepted."""
        return bool(self.accept[0])


def empty_dfa() -> Dfa:
    """Return the one-state DFA of the empty language."""
    dfa = Dfa(
        np.zeros(256, dtype=np.uint8),
        np.full((1, 1), -1, dtype=np.int32),
        np.zeros(1, dtype=np.bool_),
        np.zeros(1, dtype=np.bool_),
    )
    read_only(dfa.byte_class, dfa.trans, dfa.accept, dfa.live)
    return dfa


def minimal_dfa(trans: Int32Array, byte_class: Int64Array, accept: BoolArray) -> Dfa:
    """Minimise a trimmed partial DFA (every state reachable and live) into a :class:`Dfa`.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions, -1 = dead; state 0 initial.
    byte_class : (256,) int64
        Class of each byte.
    accept : (S,) bool
        Accepting states.
    """
    blocks = accept.astype(np.int32)
    if blocks[0] == 1 and blocks.all():
        blocks[:] = 0
    classes, trans, reps = minimize_classes(trans, byte_class, blocks, int(blocks.max()) + 1)
    dfa = Dfa(classes, trans, accept[reps], np.ones(trans.shape[0], dtype=np.bool_))
    read_only(dfa.byte_class, dfa.trans, dfa.accept, dfa.live)
    return dfa


@dataclass(frozen=True, slots=True, eq=False)
class DfaFragment:
    """A minimal DFA as NFA material (internal to stage 3): state 0 is its entry.

    Parameters
    ----------
    num_states : int
        Number of states.
    table : (4, E) int32
        Byte edges ``src, lo, hi, dst`` over states ``0 .. num_states - 1``.
    accept_states : (F,) int64
        The accepting states.
    """

    num_states: int
    table: Int32Array
    accept_states: Int64Array


def dfa_fragment(dfa: Dfa) -> DfaFragment:
    """Return the byte edges of ``dfa``: one edge per state and run of bytes of one class.

    Parameters
    ----------
    dfa : Dfa
        The automaton.

    Returns
    -------
    DfaFragment
        Its states, edges and accepting states.
    """
    count = range_edges_kernel(dfa.trans, dfa.byte_class, np.empty((4, 0), np.int32))
    table = np.empty((4, count), np.int32)
    range_edges_kernel(dfa.trans, dfa.byte_class, table)
    return DfaFragment(dfa.num_states, table, np.flatnonzero(dfa.accept))


def nfa_to_dfa(nfa: Nfa, *, max_states: int, limit_name: str) -> Dfa:
    """Return the minimal DFA of ``nfa``'s terminal 0 (subset construction, then minimisation).

    Parameters
    ----------
    nfa : Nfa
        The automaton, as :meth:`NfaBuilder.finish` returns it.
    max_states : int
        Largest subset construction allowed.
    limit_name : str
        The limit reported in the error.

    Returns
    -------
    Dfa
        The minimal DFA; the empty language when no final state is reachable.

    Raises
    ------
    CompileLimitError
        As soon as the subset construction needs more than ``max_states`` states.
    """
    subsets = determinize(nfa, max_states=max_states, limit_name=limit_name)
    if subsets.trans.shape[0] == 0:
        return empty_dfa()
    num = subsets.trans.shape[0]
    accept_bits = np.zeros((num, 1), dtype=np.uint64)
    alive_bits = np.zeros((num, 1), dtype=np.uint64)
    state_bits_kernel(
        subsets.set_ptr, subsets.pool, nfa.tag, nfa.comp,
        (nfa.group_base, nfa.group_ptr, nfa.group_terms), accept_bits, alive_bits,
    )  # fmt: skip
    return minimal_dfa(subsets.trans, subsets.byte_class, accept_bits[:, 0] != 0)
