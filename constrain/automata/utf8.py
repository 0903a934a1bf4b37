"""Stage 3: the UTF-8 encoding of code-point ranges as byte-range sequences.

The NFA builder (:mod:`constrain.automata.nfa`) turns every character set into the few
byte-range sequences that encode it, as RE2 and Rust's ``utf8-ranges`` do; surrogates, which
UTF-8 cannot encode, are dropped. Special-token pseudo characters (``SPECIAL_BASE + i``, see
:func:`constrain.ir.special_token`) are encoded as ``0xFF`` and three continuation bytes
holding the 18 bits of ``i``: 0xFF never occurs in UTF-8, so no text spells them.
"""

from __future__ import annotations

from constrain.ir import SPECIAL_BASE

__all__ = ["SPECIAL_LEAD", "special_bytes", "utf8_sequences"]

_MAX_CODEPOINT = 0x10FFFF
SPECIAL_LEAD = 0xFF
"""The first byte of every special-token pseudo character (never a byte of UTF-8 text)."""


def special_bytes(index: int) -> bytes:
    """Return the 4 bytes of pseudo character ``SPECIAL_BASE + index``.

    Parameters
    ----------
    index : int
        In ``[0, 2**19)``: a token id (below ``2**18``) or a name placeholder.

    Returns
    -------
    bytes
        ``[0xFF, 0x80 | (index >> 12), 0x80 | ((index >> 6) & 63), 0x80 | (index & 63)]``.

    Raises
    ------
    ValueError
        If ``index`` is out of range.
    """
    if not 0 <= index < 2**19:
        raise ValueError(f"special pseudo character index {index} is outside [0, 2**19)")
    return bytes(
        (SPECIAL_LEAD, 0x80 | (index >> 12), 0x80 | ((index >> 6) & 63), 0x80 | (index & 63))
    )


def _special_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """Return the byte-range sequences of the pseudo characters ``SPECIAL_BASE + lo..hi``."""
    out: list[tuple[tuple[int, int], ...]] = []
    stack = [(lo, hi)]
    while stack:
        s, e = stack.pop()
        for i in (1, 2):  # align so that each byte position is a plain range
            m = (1 << (6 * i)) - 1
            if s & ~m != e & ~m:
                if s & m:
                    stack += [((s | m) + 1, e), (s, s | m)]
                    break
                if e & m != m:
                    stack += [(e & ~m, e), (s, (e & ~m) - 1)]
                    break
        else:
            out.append(tuple(zip(special_bytes(s), special_bytes(e), strict=True)))
    return out


def utf8_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """Return the byte-range sequences whose UTF-8 strings are exactly the code points lo..hi.

    Each sequence is a tuple of inclusive byte ranges, one per byte of the encoding; the
    sequences are disjoint and in increasing code-point order. Surrogates are skipped.

    Parameters
    ----------
    lo, hi : int
        Inclusive code-point range within ``[0, 0x10FFFF]``, or reaching above it into the
        special-token pseudo characters (encoded as :func:`special_bytes`, after the Unicode
        part).

    Returns
    -------
    list of tuple of (int, int)
        For example ``utf8_sequences(0, 0x7FF)`` is ``[((0, 0x7F),), ((0xC2, 0xDF), (0x80,
        0xBF))]``.
    """
    out: list[tuple[tuple[int, int], ...]] = []
    special = []
    if hi >= SPECIAL_BASE:
        special = _special_sequences(max(lo, SPECIAL_BASE) - SPECIAL_BASE, hi - SPECIAL_BASE)
    hi = min(hi, _MAX_CODEPOINT)
    stack = [(lo, hi)] if lo <= hi else []
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
    return out + special
