"""Stage 4a: special tokens matched by id, and their names.

A grammar requires a special token (``<|im_end|>``, ``[TOOL_CALLS]``) as a pseudo character
above Unicode (:func:`constrain.ir.special_token`), which the automata encode as the 4 bytes
``0xFF, 0x80 | (id >> 12), 0x80 | ((id >> 6) & 63), 0x80 | (id & 63)``
(:func:`constrain.automata.utf8.special_bytes`). :func:`special_byte_arrays` gives the token
arrays of a vocabulary in which exactly the required ids have those bytes, so that a mask allows
that id and no ordinary token can spell the sequence: byte 0xFF never occurs in UTF-8 text, and
every ordinary token holding a 0xFF byte (raw-byte tokens) becomes special (empty) there.
:func:`decode_text` renders an output with its special tokens by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from constrain._types import BYTE_DTYPE, INDPTR_DTYPE, ByteArray, Int32Array, Int64Array
from constrain.automata.utf8 import SPECIAL_LEAD, special_bytes
from constrain.errors import VocabularyError
from constrain.ir import MAX_SPECIAL_TOKENS

__all__ = ["MAX_SPECIAL_ID", "check_special_names", "decode_text", "special_byte_arrays"]

MAX_SPECIAL_ID = MAX_SPECIAL_TOKENS - 1
"""The largest token id a grammar can require by id (ids are encoded on 18 bits)."""


def check_special_names(names: Mapping[str, int], size: int) -> dict[str, int]:
    """Return a name table as a plain dict after checking its names and ids.

    Parameters
    ----------
    names : mapping of str to int
        Special token names and their ids.
    size : int
        The vocabulary's number of ids.

    Returns
    -------
    dict of str to int
        The table, sorted by name.

    Raises
    ------
    VocabularyError
        If a name is not a non-empty string or an id is outside ``[0, size)``.
    """
    out: dict[str, int] = {}
    for name, tid in sorted(names.items()):
        if not isinstance(name, str) or not name:
            raise VocabularyError(f"special token name {name!r} is not a non-empty string")
        if not 0 <= int(tid) < size:
            raise VocabularyError(
                f"special token {name!r} has id {int(tid)}, outside the vocabulary's [0, {size})"
            )
        out[name] = int(tid)
    return out


def special_byte_arrays(
    indptr: Int64Array,
    data: ByteArray,
    lengths: Int32Array,
    eos_ids: Iterable[int],
    token_ids: Iterable[int],
) -> tuple[Int64Array, ByteArray]:
    """Return CSR token arrays in which ``token_ids`` have their pseudo bytes.

    Every ordinary token whose bytes contain 0xFF becomes empty (special), so that no sequence
    of ordinary tokens can spell a special token's bytes.

    Parameters
    ----------
    indptr, data, lengths : numpy.ndarray
        The vocabulary's CSR arrays and token lengths.
    eos_ids : iterable of int
        Its EOS ids (refused in ``token_ids``).
    token_ids : iterable of int
        Special ids (empty bytes) to give their pseudo bytes.

    Returns
    -------
    tuple of numpy.ndarray
        The new ``(indptr, data)``.

    Raises
    ------
    VocabularyError
        If an id is out of range, above :data:`MAX_SPECIAL_ID`, has bytes (an ordinary token)
        or is an EOS id.
    """
    size = lengths.shape[0]
    ids = sorted({int(i) for i in token_ids})
    eos = {int(i) for i in eos_ids}
    for tid in ids:
        if not 0 <= tid < min(size, MAX_SPECIAL_ID + 1):
            raise VocabularyError(
                f"token id {tid} cannot be required by id: it must be in [0, {size}) and at "
                f"most {MAX_SPECIAL_ID}"
            )
        if tid in eos:
            raise VocabularyError(
                f"token id {tid} is an end-of-sequence token: a grammar cannot require it as a "
                "terminal; end the grammar there instead (the matcher allows EOS exactly when "
                "the grammar accepts)"
            )
        if lengths[tid] != 0:
            raise VocabularyError(
                f"token id {tid} is an ordinary token (it has bytes); only special tokens "
                "(empty bytes) can be required by id: write its text instead"
            )
    ff = np.zeros(data.shape[0] + 1, dtype=np.int64)
    np.cumsum(data == SPECIAL_LEAD, out=ff[1:])
    has_ff = ff[indptr[1:]] != ff[indptr[:-1]]
    keep = ~has_ff
    new_lengths = np.where(keep, lengths, 0).astype(np.int64)
    is_id = np.zeros(size, dtype=bool)
    is_id[ids] = True
    new_lengths[ids] = 4
    new_indptr = np.zeros(size + 1, dtype=INDPTR_DTYPE)
    np.cumsum(new_lengths, out=new_indptr[1:])
    new_data = np.empty(int(new_indptr[-1]), dtype=BYTE_DTYPE)
    from_old = np.repeat(~is_id, new_lengths)
    new_data[from_old] = data[np.repeat(keep, lengths)]
    new_data[~from_old] = np.frombuffer(b"".join(special_bytes(i) for i in ids), dtype=BYTE_DTYPE)
    return new_indptr, new_data


def decode_text(pieces: Iterable[tuple[int, bytes]], names: Mapping[str, int]) -> str:
    """Return the text of ``(token id, token bytes)`` pieces, special tokens by name.

    Parameters
    ----------
    pieces : iterable of (int, bytes)
        Each token of the output and its bytes.
    names : mapping of str to int
        The vocabulary's special token names (the shortest name of an id is used).

    Returns
    -------
    str
        Runs of token bytes decoded as UTF-8 (``errors="replace"``); a named token as its name,
        a token required by id with no name (its bytes are its pseudo bytes) as ``<[id]>``.
    """
    by_id: dict[int, str] = {}
    for known, tid in sorted(names.items(), key=lambda kv: (len(kv[0]), kv[0])):
        by_id.setdefault(tid, known)
    out: list[str] = []
    run = bytearray()
    for tid, raw in pieces:
        name = by_id.get(tid)
        if name is None and len(raw) == 4 and raw[0] == SPECIAL_LEAD and tid <= MAX_SPECIAL_ID:
            name = f"<[{tid}]>" if raw == special_bytes(tid) else None
        if name is None:
            run += raw
            continue
        out.append(run.decode("utf-8", errors="replace"))
        run.clear()
        out.append(name)
    out.append(run.decode("utf-8", errors="replace"))
    return "".join(out)
