"""Stage 3: subset construction and minimisation of byte automata (wrappers over the kernels).

:func:`determinize` turns an NFA (:class:`~constrain.automata.nfa.Nfa`) into a partial DFA over
byte classes, :func:`minimize` merges its equivalent states and :func:`compress_classes` merges
byte classes that no state tells apart. The NFA compiler (:mod:`constrain.automata.nfa`) and
the lexer (:mod:`constrain.automata.lexer`) share them; the kernels live in
:mod:`constrain.kernels.numba_subsets` and :mod:`constrain.kernels.numba_minimize`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from constrain._types import BoolArray, ByteArray, Int32Array, Int64Array
from constrain.errors import CompileLimitError
from constrain.kernels.numba_minimize import (
    column_hashes_kernel,
    merge_classes_kernel,
    minimize_kernel,
    quotient_kernel,
    take_columns_kernel,
)
from constrain.kernels.numba_subsets import determinize_kernel, nfa_csr_kernel, nfa_live_kernel

if TYPE_CHECKING:
    from constrain.automata.nfa import Nfa

__all__ = [
    "OverBudget",
    "Subsets",
    "compress_classes",
    "determinize",
    "minimize",
    "minimize_classes",
    "nfa_live",
]


_NO_BUDGET = 1 << 62


class OverBudget(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :func:`determinize` past its ``max_members`` budget."""


@dataclass(frozen=True, slots=True, eq=False)
class Subsets:
    """Result of the subset construction (internal to stage 3).

    Parameters
    ----------
    byte_class : (256,) int64
        Byte to class id (classes are byte intervals).
    trans : (S, C) int32
        Transitions, -1 = dead; state 0 initial.
    set_ptr : (S + 1,) int64
        CSR offsets of each state's NFA subset in ``pool``.
    pool : (P,) int32
        The NFA subsets.
    """

    byte_class: Int64Array
    trans: Int32Array
    set_ptr: Int64Array
    pool: Int32Array


def nfa_live(nfa: Nfa) -> BoolArray:
    """Return ``live[q]``: whether NFA state ``q`` can reach a final state."""
    live = np.zeros(nfa.num_states, dtype=np.bool_)
    nfa_live_kernel(
        np.concatenate((nfa.src, nfa.eps_src)),
        np.concatenate((nfa.dst, nfa.eps_dst)),
        np.flatnonzero(nfa.tag >= 0).astype(np.int32),
        live,
    )
    return live


def determinize(
    nfa: Nfa,
    *,
    max_states: int,
    limit_name: str,
    keep_start: bool = False,
    live: BoolArray | None = None,
    max_members: int | None = None,
) -> Subsets:
    """Run the subset construction on ``nfa`` over its byte classes.

    Parameters
    ----------
    nfa : Nfa
        The automaton.
    max_states : int
        Limit on the number of DFA states.
    limit_name : str
        Name reported in the error.
    keep_start : bool, optional
        Keep the start state in the initial subset, so no transition re-enters DFA state 0.
    live : (N,) bool, optional
        :func:`nfa_live` of ``nfa`` when already computed.
    max_members : int, optional
        Raise :class:`OverBudget` as soon as the subsets would hold more NFA states in all.

    Returns
    -------
    Subsets
        The DFA over byte classes, with no dead state; empty when the language is empty.

    Raises
    ------
    CompileLimitError
        As soon as more than ``max_states`` DFA states are needed.
    """
    if live is None:
        live = nfa_live(nfa)
    byte_class, num_classes, bptr, bcls_lo, bcls_hi, bdst, eptr, edst, keep = nfa_csr_kernel(
        nfa.num_states, nfa.src, nfa.lo, nfa.hi, nfa.dst, nfa.eps_src, nfa.eps_dst, nfa.tag, live
    )
    status, count, trans, set_ptr, pool = determinize_kernel(
        bptr,
        bcls_lo,
        bcls_hi,
        bdst,
        eptr,
        edst,
        keep,
        live,
        nfa.start,
        num_classes,
        max_states,
        keep_start,
        _NO_BUDGET if max_members is None else max_members,
    )
    if status == 2:
        raise OverBudget(max_members)
    if status != 0:
        raise CompileLimitError(
            limit_name,
            max_states,
            int(count),
            hint="the automaton has too many states; simplify the pattern (bounded repetitions "
            "of large classes and long alternations multiply states) or raise the limit",
        )
    return Subsets(byte_class, trans, set_ptr, pool)


def minimize(
    trans: Int32Array, init_block: Int32Array, num_init_blocks: int
) -> tuple[Int32Array, Int64Array]:
    """Merge equivalent states of a trimmed partial DFA.

    Parameters
    ----------
    trans : (S, C) int32
        Transitions, -1 = dead; every state reachable from state 0 and live.
    init_block : (S,) int32
        Initial blocks, ids ``0 .. num_init_blocks - 1``: states in different blocks (different
        acceptance signatures) are never merged.
    num_init_blocks : int
        Number of initial blocks.

    Returns
    -------
    trans : (S', C) int32
        The quotient automaton, states numbered by first appearance (state 0 stays initial).
    reps : (S',) int64
        For each new state, the lowest original state it stands for.
    """
    block = np.empty(trans.shape[0], dtype=np.int32)
    num_blocks = int(minimize_kernel(trans, init_block, num_init_blocks, block))
    out = np.empty((num_blocks, trans.shape[1]), dtype=np.int32)
    reps = np.empty(num_blocks, dtype=np.int64)
    quotient_kernel(trans, block, num_blocks, out, reps)
    return out, reps


_WEIGHTS = np.random.default_rng(0x5EED).integers(1, 1 << 62, size=1024, dtype=np.int64)


def _row_weights(num: int) -> Int64Array:
    """Return ``num`` fixed pseudo-random int64 weights (grown on demand, never changed)."""
    global _WEIGHTS
    if _WEIGHTS.shape[0] < num:
        rng = np.random.default_rng(0x5EED + _WEIGHTS.shape[0])
        more = rng.integers(1, 1 << 62, size=max(num, 2 * _WEIGHTS.shape[0]), dtype=np.int64)
        _WEIGHTS = np.concatenate((_WEIGHTS, more))
    return _WEIGHTS[:num]


def compress_classes(
    trans: Int32Array, byte_class: Int64Array | ByteArray
) -> tuple[ByteArray, Int32Array]:
    """Merge byte classes whose columns are identical; return ``(byte_class, trans)``.

    New class ids follow the order of the lowest byte of each class.
    """
    num_classes = trans.shape[1]
    new_class = np.empty(num_classes, dtype=np.int32)
    keep = np.empty(num_classes, dtype=np.int64)
    trans = np.ascontiguousarray(trans, dtype=np.int32)
    hashes = np.empty(num_classes, dtype=np.int64)
    column_hashes_kernel(trans, _row_weights(trans.shape[0]), hashes)
    count = int(merge_classes_kernel(trans, hashes, new_class, keep))
    if count < num_classes:
        out = np.empty((trans.shape[0], count), dtype=np.int32)
        take_columns_kernel(trans, keep[:count], out)
        trans = out
    return new_class[byte_class].astype(np.uint8), trans


def minimize_classes(
    trans: Int32Array,
    byte_class: Int64Array | ByteArray,
    init_block: Int32Array,
    num_init_blocks: int,
) -> tuple[ByteArray, Int32Array, Int64Array]:
    """:func:`minimize` with identical byte-class columns merged before and after.

    Merging first leaves fewer transitions to refine (same partition: equal columns never
    tell states apart); merging again catches columns made equal by the quotient. Returns
    ``(byte_class, trans, reps)``.
    """
    byte_class, trans = compress_classes(trans, byte_class)
    trans, reps = minimize(trans, init_block, num_init_blocks)
    byte_class, trans = compress_classes(trans, byte_class)
    return byte_class, trans, reps
