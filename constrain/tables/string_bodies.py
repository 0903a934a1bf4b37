r"""JSON string-body characters in a lexer: where a string slice of the vocabulary is taken.

:class:`~constrain.tables.MaskTables` asks, at a lexer state inside a JSON string, which
string-body characters keep it alive (the reach of a string slice of the vocabulary), and how
many more the string takes where a ``maxLength`` bounds it (:class:`BodySearches`); the shapes
below are the raw body characters (U+0020 and up, without ``"`` and ``\``) as UTF-8
byte-range sequences, and :func:`body_class_sequences` maps them to a lexer's byte classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from constrain._types import Int64Array
from constrain.automata.lexer import LexerDfa
from constrain.kernels.numba_table_inputs import body_bound_kernel, body_reach_kernel
from constrain.tables.scratch import TableScratch
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["BODY_SEQUENCES", "BodySearches", "body_class_sequences", "longest_body_token"]

# UTF-8 encodings of the raw JSON string-body characters (U+0020.., minus '"' and '\\'), as
# byte-range sequences: (lead range, continuation ranges...).
BODY_SEQUENCES = (
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


# the byte ranges of BODY_SEQUENCES flattened: every byte of every position, with its position
_BODY_BYTES = np.array(
    [b for seq in BODY_SEQUENCES for lo, hi in seq for b in range(lo, hi + 1)], dtype=np.int64
)
_BODY_POSITION = np.array(
    [p for p, (lo, hi) in enumerate(r for seq in BODY_SEQUENCES for r in seq)
     for _ in range(lo, hi + 1)],
    dtype=np.int64,
)  # fmt: skip
_BODY_POSITIONS = sum(len(seq) for seq in BODY_SEQUENCES)
_BODY_SEQ_PTR = np.cumsum([0] + [len(seq) for seq in BODY_SEQUENCES]).astype(np.int64)


def body_class_sequences(lexer: LexerDfa) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Return the distinct byte classes of each position of each string-body UTF-8 shape.

    Flat: ``classes[pos_ptr[p]:pos_ptr[p + 1]]`` are the classes of position ``p`` (ascending),
    and ``seq_ptr[q]:seq_ptr[q + 1]`` the positions of shape ``q``.
    """
    # one sorted pass over (position, class) pairs instead of a np.unique per position
    keys = np.unique(_BODY_POSITION * 256 + lexer.byte_class[_BODY_BYTES].astype(np.int64))
    classes = keys % 256
    pos_ptr = np.searchsorted(keys // 256, np.arange(_BODY_POSITIONS + 1)).astype(np.int64)
    return classes, pos_ptr, _BODY_SEQ_PTR


_UNSET = object()
_LONGEST: dict[str, int] = {}  # longest_body_token by vocabulary fingerprint


def longest_body_token(vocab: Vocabulary) -> int:
    """Return the characters of ``vocab``'s longest string-body token (once per vocabulary)."""
    found = _LONGEST.get(vocab.fingerprint)
    if found is None:
        found = _LONGEST[vocab.fingerprint] = int(vocab.body_chars.max(initial=0))
    return found


_NO_ROWS = np.zeros(0, dtype=np.bool_)  # an eager lexer's "rows built": all of them
_NO_ROWS.flags.writeable = False  # as a lazy lexer's flags (one kernel signature)


class BodySearches:
    """One grammar's string-body searches at its lexer states, memoised (MaskTables').

    ``reach_limit`` is the most states an unbounded reach lists (beyond, it is not taken).
    """

    def __init__(self, reach_limit: int) -> None:
        self.reach_limit = reach_limit
        self._reach: dict[tuple[int, int], np.ndarray | None] = {}
        self._bound: dict[tuple[int, int, bytes], int] = {}
        self._outside: set[int] = set()  # states a string-body character kills at once
        self._classes: tuple[Int64Array, Int64Array, Int64Array] | None = None

    def _shapes(self, lexer: LexerDfa) -> tuple[Int64Array, Int64Array, Int64Array]:
        if self._classes is None:  # first needed inside a lexeme, not at the first mask
            self._classes = body_class_sequences(lexer)
        return self._classes

    def reach(
        self,
        lexer: LexerDfa,
        built: np.ndarray | None,
        state: int,
        max_chars: int,
        sc: TableScratch,
        call: Callable[..., Any],
    ) -> np.ndarray | None:
        """Return the states string-body text can lead ``state`` to, or None.

        None when some raw JSON string-body text of at most ``max_chars`` characters (0: any)
        kills the lexeme from ``state``, or the set is large (``body_reach_kernel``). Otherwise
        each token of the vocabulary's string slice (``Vocabulary.string_slice`` with the same
        bound) lands on one of these states, inside the same lexeme: where an allowed terminal
        is alive at all of them, the whole slice is allowed and only the other tokens need a
        trie walk (llguidance's "slicer"). ``call`` calls a kernel, ``sc`` holds the scratch.
        ``built``: a lazy lexer's rows built, as for :meth:`bounded_slice` (the states of the
        tokens from ``state``; the search leaves out the others).
        """
        found = self._reach.get((state, max_chars), _UNSET)
        if found is not _UNSET:
            return found  # type: ignore[return-value]
        classes, pos_ptr, seq_ptr = self._shapes(lexer)
        n = call(
            body_reach_kernel, lexer.trans, _NO_ROWS if built is None else built, classes,
            pos_ptr, seq_ptr, state,
            max_chars or self.reach_limit, sc.reach, sc.visited, sc.mark, sc.cur, sc.nxt,
            sc.stamp,
        )  # fmt: skip
        result = None if n < 0 else sc.reach[:n].copy()
        if n == -1 and sc.reach[0] == 0:  # its first character: in no string body
            self._outside.add(state)
        self._reach[state, max_chars] = result
        return result

    def bounded_slice(
        self,
        lexer: LexerDfa,
        built: np.ndarray | None,
        state: int,
        allowed: np.ndarray,
        max_chars: int,
        max_body: int,
        sc: TableScratch,
        call: Callable[..., Any],
    ) -> int:
        """Return the string slice a ``maxLength`` allows whole at ``state``; -1: none.

        Where the string takes ``r <= max_chars`` more body characters and no more (an
        ``allowed`` terminal alive after each of up to ``r``, none after ``r + 1``, and no
        lexeme ending inside: ``body_bound_kernel``), its body tokens of at most ``r``
        characters are allowed and the longer ones not: the slice bounded by ``r``
        (``Vocabulary.string_slice_bits``), and only the tokens outside every slice are walked.
        0, the whole slice, where no bound comes within ``max_chars`` and that is at least
        ``max_body``, the longest body token's characters. ``built``: a lazy lexer's rows built
        (they hold the states of the tokens from ``state``: what the search finds holds for
        those tokens, which more rows built later do not change).
        """
        if state in self._outside:  # (a reach found it): no bound, whatever is allowed
            return -1
        key = (state, max_chars, allowed.tobytes())
        r = self._bound.get(key)
        if r is None:
            classes, pos_ptr, seq_ptr = self._shapes(lexer)
            rows = _NO_ROWS if built is None else built
            r = self._bound[key] = call(
                body_bound_kernel, lexer.trans, rows, lexer.alive_bits, lexer.accept_bits,
                allowed, classes, pos_ptr, seq_ptr, state, max_chars, sc.mark, sc.cur, sc.nxt,
                sc.stamp,
            )  # fmt: skip
        if r <= 0:
            return -1
        if r <= max_chars:
            return r
        return 0 if max_chars >= max_body else -1
