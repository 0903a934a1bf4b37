"""Stage 4a: the rank file of a tiktoken tokenizer, read as the bytes of every token id.

A ``.tiktoken`` file has one line per token, ``base64(token_bytes) rank``; special tokens are
not in it and get their ids from the caller (:meth:`constrain.Vocabulary.from_tiktoken`).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence

from constrain.errors import VocabularyError

__all__ = ["read_tiktoken"]


def read_tiktoken(
    path: str | os.PathLike[str], specials: Mapping[str, int], eos_tokens: Sequence[str]
) -> list[bytes | None]:
    """Return the bytes of every id of a tiktoken rank file (``None`` for special ids and holes).

    Parameters
    ----------
    path : str or PathLike
        The ``.tiktoken`` file.
    specials : mapping of str to int
        Special tokens and their ids.
    eos_tokens : sequence of str
        Names in ``specials`` that end a sequence (checked here).

    Returns
    -------
    list of bytes or None
        ``table[i]`` is the bytes of id ``i``; the table covers every rank and special id.

    Raises
    ------
    VocabularyError
        If the file is malformed, a rank repeats, a special id collides with a rank, or an EOS
        name is not a special token.
    """
    ranks: dict[int, bytes] = {}
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if len(parts) != 2:
                    raise ValueError("expected 2 fields")
                tok, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
            except (ValueError, binascii.Error) as err:
                raise VocabularyError(
                    f"{path}:{lineno}: not a tiktoken rank line ({err}): {line[:60]!r}"
                ) from err
            if rank < 0 or rank in ranks:
                raise VocabularyError(f"{path}:{lineno}: rank {rank} is negative or repeated")
            ranks[rank] = tok
    for name, sid in specials.items():
        if sid in ranks or sid < 0:
            raise VocabularyError(f"special token {name!r} id {sid} collides with a rank")
    missing = [t for t in eos_tokens if t not in specials]
    if missing:
        raise VocabularyError(f"eos_tokens {missing} are not in special_tokens")
    n = max([*ranks, *specials.values(), -1]) + 1
    table: list[bytes | None] = [None] * n
    for rank, tok in ranks.items():
        table[rank] = tok
    return table
