r"""Stage 1 (JSON Schema): JSON string encoding of content regexes, and whitespace.

JSON Schema string keywords (``pattern``, ``minLength``, ``format``) speak about the decoded
characters; the grammar reads the encoded text. :func:`encode_content` maps a content regex
through the JSON string encoding, character set by character set: a character is written raw
(any code point from U+0020 except ``"`` and ``\``), ``"`` and ``\`` as ``\"`` and ``\\``,
control characters as their short escape (``\n``, ...) or ``\u00XX`` (either hex case).
The encoding is an injective, prefix-free map, so it commutes with intersection, and a
complement becomes "an encoded string not in the encoded language". ``\/`` and ``\uXXXX``
spellings of ordinary characters are not generated or accepted (no serializer emits them for
printable characters; they are documented false negatives).
"""

from __future__ import annotations

import functools

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

__all__ = ["encode_content", "quoted", "whitespace_regex"]

_RAW = CharSet(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)))
_SHORT = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 0x22: '\\"', 0x5C: "\\\\"}
_HEX = CharSet(((48, 57), (65, 70), (97, 102)))


def _hex_digit(value: int) -> Regex:
    char = "0123456789abcdef"[value]
    if char.isdigit():
        return Literal(char)
    return CharSet(((ord(char.upper()), ord(char.upper())), (ord(char), ord(char))))


def _escapes(cs: CharSet) -> list[Regex]:
    """Escape sequences of the characters of ``cs`` that cannot be written raw."""
    out: list[Regex] = []
    for lo, hi in cs.ranges:
        for cp in range(lo, min(hi, 0x1F) + 1):
            forms: list[Regex] = [
                Concat((Literal("\\u00"), _hex_digit(cp >> 4), _hex_digit(cp & 15)))
            ]
            if cp in _SHORT:
                forms.append(Literal(_SHORT[cp]))
            out.extend(forms)
        out.extend(Literal(_SHORT[cp]) for cp in (0x22, 0x5C) if lo <= cp <= hi)
    return out


def _encode_charset(cs: CharSet) -> Regex:
    raw = cs.intersect(_RAW)
    parts: list[Regex] = [raw] if not raw.is_empty() else []
    parts.extend(_escapes(cs))
    if len(parts) == 1:
        return parts[0]
    return Alt(tuple(parts))


def _encode_text(text: str) -> Regex:
    if all(ch in _RAW for ch in map(ord, text)):
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


def quoted(content: Regex) -> Regex:
    """Return the IR of a JSON string literal (quotes included) with the given content."""
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
