"""Stage 3: the UTF-8 encoding of code-point ranges as byte-range sequences.

The NFA builder (:mod:`constrain.automata.nfa`) turns every character set into the few
byte-range sequences that encode it, as RE2 and Rust's ``utf8-ranges`` do; surrogates, which
UTF-8 cannot encode, are dropped.
"""

from __future__ import annotations

__all__ = ["utf8_sequences"]


def utf8_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """Return the byte-range sequences whose UTF-8 strings are exactly the code points lo..hi.

    Each sequence is a tuple of inclusive byte ranges, one per byte of the encoding; the
    sequences are disjoint and in increasing code-point order. Surrogates are skipped.

    Parameters
    ----------
    lo, hi : int
        Inclusive code-point range within ``[0, 0x10FFFF]``.

    Returns
    -------
    list of tuple of (int, int)
        For example ``utf8_sequences(0, 0x7FF)`` is ``[((0, 0x7F),), ((0xC2, 0xDF), (0x80,
        0xBF))]``.
    """
    out: list[tuple[tuple[int, int], ...]] = []
    stack = [(lo, hi)]
    while stack:
        s, e = stack.pop()
        while s <= e:
            if s <= 0xDFFF and e >= 0xD800:  # drop surrogates
                if e > 0xDFFF:
                    stack.append((0xE000, e))
                e = 0xD7FF
                continue
            for top in (0x7F, 0x7FF, 0xFFFF):  # one encoded length at a time
                if s <= top < e:
                    stack.append((top + 1, e))
                    e = top
                    break
            else:
                if e <= 0x7F:
                    out.append(((s, e),))
                    break
                for i in (1, 2, 3):  # align so that each byte position is a plain range
                    m = (1 << (6 * i)) - 1
                    if s & ~m != e & ~m:
                        if s & m:
                            stack.append(((s | m) + 1, e))
                            e = s | m
                            break
                        if e & m != m:
                            stack.append((e & ~m, e))
                            e = (e & ~m) - 1
                            break
                else:
                    out.append(tuple(zip(chr(s).encode(), chr(e).encode(), strict=True)))
                    break
    return out
