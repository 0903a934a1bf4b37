r"""Stage 1 (JSON Schema): JSON string encoding of content regexes, and whitespace.

JSON Schema string keywords (``pattern``, ``minLength``, ``format``) speak about the decoded
characters; the grammar reads the encoded text. :func:`encode_content` maps a content regex
through the JSON string encoding, character set by character set: a character may be written
raw (any code point from U+0020 except ``"`` and ``\``), as a short escape (``\"``, ``\\``,
``\/``, ``\n``, ...) or as ``\uHHHH`` (either hex case; a surrogate pair above U+FFFF), exactly
the spellings JSON allows. The encoding is injective and prefix-free, so it commutes with
intersection, and a complement becomes "an encoded string not in the encoded language". For a
character class of more than 64 ranges (large Unicode properties) only control characters get
``\uHHHH`` spellings, to keep the automaton small: the other ``\u`` spellings of such a class
are documented false negatives.
"""

from __future__ import annotations

import functools
import re

from constrain.ir import (
    ANY_CHAR,
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

__all__ = ["encode_content", "quoted", "quoted_text", "whitespace_regex"]

_RAW = CharSet(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)))
# the characters outside _RAW: those a JSON string must escape, and lone surrogates
_NOT_RAW = re.compile('[\x00-\x1f"\\\\\ud800-\udfff]')
_SHORT = {
    8: "\\b",
    9: "\\t",
    10: "\\n",
    12: "\\f",
    13: "\\r",
    0x22: '\\"',
    0x2F: "\\/",
    0x5C: "\\\\",
}


def _hex_digits(lo: int, hi: int) -> CharSet:
    """Return the hex digit characters (either case) of the values ``lo..hi``."""
    ranges: list[tuple[int, int]] = []
    if lo <= 9:
        ranges.append((48 + lo, 48 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        ranges += [(65 + a, 65 + b), (97 + a, 97 + b)]
    return CharSet.of(ranges)


def _hex_sequences(lo: int, hi: int, width: int) -> list[tuple[CharSet, ...]]:
    """Digit-by-digit sequences spelling every ``width``-digit hex number in ``lo..hi``."""
    if width == 0:
        return [()]
    base = 16 ** (width - 1)
    a, b = lo // base, hi // base
    if a == b:
        return [(_hex_digits(a, a), *t) for t in _hex_sequences(lo % base, hi % base, width - 1)]
    out: list[tuple[CharSet, ...]] = []
    first, last = a, b
    if lo % base:
        out += [(_hex_digits(a, a), *t) for t in _hex_sequences(lo % base, base - 1, width - 1)]
        first = a + 1
    tail: list[tuple[CharSet, ...]] = []
    if hi % base != base - 1:
        tail = [(_hex_digits(b, b), *t) for t in _hex_sequences(0, hi % base, width - 1)]
        last = b - 1
    if first <= last:
        out.append((_hex_digits(first, last), *([_hex_digits(0, 15)] * (width - 1))))
    return out + tail


_BACKSLASH_U = (CharSet(((0x5C, 0x5C),)), CharSet(((0x75, 0x75),)))


def _unicode_escapes(cs: CharSet) -> list[tuple[CharSet, ...]]:
    r"""``\uHHHH`` spellings (surrogate pairs above U+FFFF) of the code points of ``cs``."""
    out: list[tuple[CharSet, ...]] = []
    for lo, hi in cs.ranges:
        for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), min(hi, 0xFFFF))):
            if a <= b:
                out += [(*_BACKSLASH_U, *t) for t in _hex_sequences(a, b, 4)]
        a, b = max(lo, 0x10000), hi
        while a <= b:  # one high surrogate at a time, or a run of whole blocks
            high, low = 0xD800 + ((a - 0x10000) >> 10), (a - 0x10000) & 0x3FF
            if low == 0 and b - a >= 0x3FF:
                count = (b - a + 1) >> 10
                highs = _hex_sequences(high, high + count - 1, 4)
                lows = _hex_sequences(0xDC00, 0xDFFF, 4)
                a += count << 10
            else:
                end = min(b, a + (0x3FF - low))
                highs = _hex_sequences(high, high, 4)
                lows = _hex_sequences(0xDC00 + low, 0xDC00 + low + (end - a), 4)
                a = end + 1
            out += [(*_BACKSLASH_U, *h, *_BACKSLASH_U, *lw) for h in highs for lw in lows]
    return out


def _escapes(cs: CharSet) -> list[Regex]:
    r"""Escape sequences of the characters of ``cs``: short forms and ``\uHHHH``."""
    out: list[Regex] = [Literal(esc) for cp, esc in _SHORT.items() if cp in cs]
    if len(cs.ranges) > 64:  # a large Unicode class: \\u spellings of controls only
        cs = cs.intersect(CharSet(((0, 0x1F),)))
    out.extend(Concat(seq) for seq in _unicode_escapes(cs))
    return out


def _encode_charset(cs: CharSet) -> Regex:
    raw = cs.intersect(_RAW)
    parts: list[Regex] = [raw] if not raw.is_empty() else []
    parts.extend(_escapes(cs))
    if len(parts) == 1:
        return parts[0]
    return Alt(tuple(parts))


def _encode_text(text: str) -> Regex:
    if _NOT_RAW.search(text) is None:  # (an enum of 10,000 strings: 8 ms, not 200)
        return Literal(text)
    items: list[Regex] = []
    run: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp in _RAW:
            run.append(ch)
            continue
        if run:
            items.append(Literal("".join(run)))
            run = []
        items.append(_encode_charset(CharSet(((cp, cp),))))
    if run:
        items.append(Literal("".join(run)))
    return Concat(tuple(items))


def _encode_automaton(node: Automaton) -> Regex:
    edges: list[tuple[int, CharSet, int]] = []
    count = node.num_states
    for src, cs, dst in node.edges:
        raw = cs.intersect(_RAW)
        if not raw.is_empty():
            edges.append((src, raw, dst))
        for esc in _escapes(cs):
            chars = _literal_chars(esc)
            state = src
            for i, part in enumerate(chars):
                nxt = dst if i == len(chars) - 1 else count
                if nxt == count:
                    count += 1
                edges.append((state, part, nxt))
                state = nxt
    return Automaton(count, tuple(edges), node.start, node.accept)


def _literal_chars(node: Regex) -> list[CharSet]:
    """Flatten an escape sequence (literals and hex-digit sets) into one set per character."""
    if isinstance(node, Literal):
        return [CharSet(((ord(c), ord(c)),)) for c in node.text]
    if isinstance(node, CharSet):
        return [node]
    assert isinstance(node, Concat)
    return [cs for item in node.items for cs in _literal_chars(item)]


@functools.lru_cache(maxsize=8192)
def encode_content(node: Regex) -> Regex:
    """Return the IR of the JSON string bodies (no quotes) whose decoded text ``node`` matches.

    Parameters
    ----------
    node : Regex
        A regex over the decoded characters.

    Returns
    -------
    Regex
        A regex over the encoded text.
    """
    if isinstance(node, CharSet):
        return _encode_charset(node)
    if isinstance(node, Literal):
        return _encode_text(node.text)
    if isinstance(node, Concat):
        return Concat(tuple(encode_content(i) for i in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(encode_content(i) for i in node.items))
    if isinstance(node, Repeat):
        return Repeat(encode_content(node.item), node.min, node.max)
    if isinstance(node, Intersect):
        return Intersect(tuple(encode_content(i) for i in node.items))
    if isinstance(node, Complement):
        return Intersect((ANY_STRING_BODY, Complement(encode_content(node.item))))
    if isinstance(node, Automaton):
        return _encode_automaton(node)
    raise TypeError(f"not a regex IR node: {node!r}")


ANY_STRING_BODY: Regex = Repeat(_encode_charset(ANY_CHAR), 0, None)


def quoted_text(text: str) -> Regex:
    """Return the IR of the JSON string literals whose decoded text is ``text``."""
    if _NOT_RAW.search(text) is None:
        return Literal(f'"{text}"')  # one literal: enums of many strings stay cheap
    return Concat((Literal('"'), _encode_text(text), Literal('"')))


def quoted(content: Regex) -> Regex:
    """Return the IR of a JSON string literal (quotes included) with the given content."""
    if isinstance(content, Literal):
        return quoted_text(content.text)
    return Concat((Literal('"'), encode_content(content), Literal('"')))


def whitespace_regex(mode: str, max_run: int, indent: int) -> Regex | None:
    r"""Return the whitespace allowed after each lexeme, or None for compact output.

    ``"flexible"``: up to ``max_run`` characters of ``[ \t\n\r]``; ``"indent"``: an optional
    newline followed by up to ``max(max_run, 16 * indent)`` spaces. Never unbounded.
    """
    if mode == "compact":
        return None
    if mode == "flexible":
        return Repeat(CharSet(((9, 10), (13, 13), (32, 32))), 0, max_run)
    spaces = Repeat(Literal(" "), 0, max(max_run, 16 * indent))
    return Alt((spaces, Concat((Literal("\n"), spaces))))
