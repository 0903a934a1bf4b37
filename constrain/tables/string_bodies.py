r"""The UTF-8 shapes of JSON string-body characters, in a lexer's byte classes.

:class:`~constrain.tables.MaskTables` asks, at a lexer state inside a JSON string, which
string-body characters keep it alive (the reach of a string slice of the vocabulary); the
shapes below are the raw body characters (U+0020 and up, without ``"`` and ``\``) as UTF-8
byte-range sequences, and :func:`body_class_sequences` maps them to a lexer's byte classes.
"""

from __future__ import annotations

import numpy as np

from constrain._types import Int64Array
from constrain.automata.lexer import LexerDfa

__all__ = ["BODY_SEQUENCES", "body_class_sequences"]

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
