r"""Stage 1: regular expressions (Python ``re`` or ECMAScript syntax) to the regex IR.

The pattern is parsed by Python's own parser (``re._parser``, ``sre_parse`` before 3.11), never by
a hand-written one, and its parse tree is converted to :mod:`constrain.ir` nodes. The language of
the result is the set of strings ``s`` with ``re.fullmatch(pattern, s, flags)``:

* ``\d``, ``\w``, ``\s`` and ``.`` have exactly Python's Unicode (or ``re.ASCII``) meaning; the
  code-point sets are computed once, lazily, by running Python's own engine over every code point;
* ``re.IGNORECASE`` follows Python's rules, simple case folding of non-ASCII included (literals are
  folded through ``_sre.unicode_tolower`` and Python's extra cases; character classes are resolved
  exactly by probing Python's engine on the few thousand case-sensitive code points);
* lazy quantifiers are greedy here (same language); atomic groups ``(?>...)`` and possessive
  quantifiers ``*+`` are read as plain groups and greedy quantifiers, which may accept *more*
  strings than Python when backtracking into them would be needed;
* ``^``/``\A`` at the very start and ``$``/``\Z`` at the very end are ignored (the match is whole
  anyway); anchors elsewhere, lookaround, backreferences, conditionals and ``\b``/``\B`` raise
  :class:`~constrain.errors.RegexError` naming the construct, with its offset in the pattern.

The ``"ecmascript"`` flavour (JSON Schema ``pattern``) reads ``\d`` as ``[0-9]``, ``\w`` as
``[A-Za-z0-9_]``, ``\s`` as the ECMAScript WhiteSpace and LineTerminator set and ``.`` as any
character but ``\n \r \u2028 \u2029``; ``(?<name>...)``, ``\cX``, ``\u{...}``, ``[^]``, ``[]``,
identity escapes such as ``\a`` and general-category property escapes (``\p{L}``, ``\P{Nd}``,
as with the ``u`` flag that JSON Schema recommends; categories from ``unicodedata``) are
translated first. Search (unanchored) semantics are the JSON Schema front end's business.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import re
import unicodedata
import warnings
from collections.abc import Sequence
from typing import Any
from typing import Literal as TypingLiteral

import numpy as np

from constrain.errors import RegexError
from constrain.ir.casefold import fold_class, fold_literal
from constrain.ir.nodes import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Alt,
    CharSet,
    Concat,
    Literal,
    Regex,
    Repeat,
)

__all__ = ["literal_regex", "parse_regex"]

try:  # Python >= 3.11
    _P: Any = importlib.import_module("re._parser")
    _C: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - Python 3.10
    _P = importlib.import_module("sre_parse")
    _C = importlib.import_module("sre_constants")

_SRE: Any = importlib.import_module("_sre")

Flavor = TypingLiteral["python", "ecmascript"]

_IGNORECASE = int(re.IGNORECASE)
_DOTALL = int(re.DOTALL)
_VERBOSE = int(re.VERBOSE)
_ASCII = int(re.ASCII)
_UNICODE = int(re.UNICODE)
_TYPE_FLAGS = _ASCII | _UNICODE | int(re.LOCALE)
_MAX_REPEAT = int(_C.MAXREPEAT)
_ATOMIC_GROUP = getattr(_C, "ATOMIC_GROUP", None)
_POSSESSIVE_REPEAT = getattr(_C, "POSSESSIVE_REPEAT", None)
_REPEATS = tuple(op for op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE_REPEAT) if op is not None)

_NEWLINE = CharSet(((10, 10),))
_BEGIN = frozenset((_C.AT_BEGINNING, _C.AT_BEGINNING_STRING))
_END = frozenset((_C.AT_END, _C.AT_END_STRING))
_ANY_RUN = Repeat(ANY_CHAR)
_ECMA_DOT_EXCLUDED = CharSet.of([(10, 10), (13, 13), (0x2028, 0x2029)])
_ECMA_SETS = {
    "digit": CharSet(((0x30, 0x39),)),
    "word": CharSet.of([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]),
    "space": CharSet.of(
        [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A)]
        + [(0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
        + [(0xFEFF, 0xFEFF)]
    ),
}
_CATEGORIES = {
    _C.CATEGORY_DIGIT: ("digit", False),
    _C.CATEGORY_NOT_DIGIT: ("digit", True),
    _C.CATEGORY_SPACE: ("space", False),
    _C.CATEGORY_NOT_SPACE: ("space", True),
    _C.CATEGORY_WORD: ("word", False),
    _C.CATEGORY_NOT_WORD: ("word", True),
}
_CATEGORY_ESCAPES = {"digit": "d", "space": "s", "word": "w"}

# Unsupported constructs: (kind used to locate it in the text, message).
_ASSERT_KINDS = {
    (False, 1): ("(?=", "lookahead (?=...) is not supported"),
    (True, 1): ("(?!", "negative lookahead (?!...) is not supported"),
    (False, -1): ("(?<=", "lookbehind (?<=...) is not supported"),
    (True, -1): ("(?<!", "negative lookbehind (?<!...) is not supported"),
}
_HINT = "; constrain compiles regular languages only, rewrite the pattern without it"


# --------------------------------------------------------------------------------------------
# Code-point tables (computed lazily, once, with Python's own engine)
# --------------------------------------------------------------------------------------------


def _all_code_points(top: int) -> str:
    """Return ``chr(0) + chr(1) + ... + chr(top - 1)``, surrogates included (about 10 ms)."""
    return np.arange(top, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@functools.cache
def _category_set(name: str, ascii_only: bool) -> CharSet:
    r"""Return Python's ``\d``, ``\s`` or ``\w`` set by running ``re`` over every code point."""
    text = _all_code_points(0x80 if ascii_only else 0x110000)
    pattern = "\\" + _CATEGORY_ESCAPES[name] + "+"
    flags = re.ASCII if ascii_only else 0
    return CharSet(tuple((m.start(), m.end() - 1) for m in re.finditer(pattern, text, flags)))


# --------------------------------------------------------------------------------------------
# Locating constructs in the pattern text (sre parse trees carry no positions)
# --------------------------------------------------------------------------------------------

_GROUP_PREFIXES = ("(?<=", "(?<!", "(?=", "(?!", "(?(", "(?P=")


def _locate(text: str, verbose: bool) -> dict[str, list[int]]:
    """Return the offsets of every construct that may be rejected, by kind, in text order."""
    found: dict[str, list[int]] = {}
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            d = text[i + 1 : i + 2]
            if d in ("b", "B", "A", "Z"):
                found.setdefault("\\" + d, []).append(i)
            elif d and d in "123456789":
                octal = d in "1234567" and all(ch in "01234567" for ch in text[i + 2 : i + 4])
                if not (octal and len(text[i + 2 : i + 4]) == 2):
                    found.setdefault("backreference", []).append(i)
            i += 2
            continue
        if c == "[":
            j = i + 1
            if text[j : j + 1] == "^":
                j += 1
            if text[j : j + 1] == "]":
                j += 1
            while j < n and text[j] != "]":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if text.startswith("(?#", i):
            end = text.find(")", i)
            i = n if end < 0 else end + 1
            continue
        if c == "(":
            for prefix in _GROUP_PREFIXES:
                if text.startswith(prefix, i):
                    kind = "backreference" if prefix == "(?P=" else prefix
                    found.setdefault(kind, []).append(i)
                    break
        elif c in "^$":
            found.setdefault(c, []).append(i)
        elif verbose and c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        i += 1
    return found


# --------------------------------------------------------------------------------------------
# ECMAScript syntax translation
# --------------------------------------------------------------------------------------------

_ECMA_ESCAPES = set("dDwWsSbBtnvfrcxukpP0123456789")
_GENERAL_CATEGORIES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me",
    "Number": "N", "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl",
    "Other_Number": "No", "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps", "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf", "Other_Punctuation": "Po",
    "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk",
    "Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs", "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc", "cntrl": "Cc", "Format": "Cf",
    "Surrogate": "Cs", "Private_Use": "Co", "Unassigned": "Cn",
}  # fmt: skip


@functools.cache
def _general_category_table() -> dict[str, CharSet]:
    """Return ``{two-letter category: set}`` from ``unicodedata`` (about 0.2 s, once)."""
    table: dict[str, list[tuple[int, int]]] = {}
    pos = 0
    categories = map(unicodedata.category, _all_code_points(0x110000))
    for category, run in itertools.groupby(categories):
        length = len(list(run))
        table.setdefault(category, []).append((pos, pos + length - 1))
        pos += length
    return {category: CharSet(tuple(ranges)) for category, ranges in table.items()}


def _property_set(name: str) -> CharSet | None:
    r"""Return the set of ``\p{name}`` (general categories, ``Any``, ``ASCII``), else None."""
    prop, _, value = name.rpartition("=")
    if prop not in ("", "General_Category", "gc"):
        return None
    if value == "Any" and not prop:
        return CharSet(((0, 0x10FFFF),))
    if value == "ASCII" and not prop:
        return CharSet(((0, 0x7F),))
    short = _GENERAL_CATEGORIES.get(value, value)
    table = _general_category_table()
    wanted: tuple[str, ...] = ("Lu", "Ll", "Lt") if short == "LC" else (short,)
    if len(short) == 1:
        wanted = tuple(key for key in table if key[0] == short)
    elif not all(key in table or key == "Cs" for key in wanted):
        return None
    return CharSet.of(r for key in wanted for r in table.get(key, CharSet(())).ranges)


def _ranges_text(cs: CharSet) -> str:
    return "".join(
        f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in cs.ranges
    )


def _translate_ecmascript(pattern: str) -> tuple[str, list[int]]:
    """Rewrite ECMAScript-only syntax for Python's parser.

    Returns the new text and, for each of its characters (plus one past the end), the offset of
    the character of ``pattern`` it comes from.
    """
    out: list[str] = []
    origin: list[int] = []

    def emit(piece: str, at: int) -> None:
        out.append(piece)
        origin.extend([at] * len(piece))

    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "c" and i + 2 < n and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
                emit(f"\\x{ord(pattern[i + 2]) % 32:02x}", i)
                i += 3
                continue
            if d == "u" and pattern.startswith("{", i + 2):
                end = pattern.find("}", i + 3)
                digits = pattern[i + 3 : end] if end > 0 else ""
                if digits and all(ch in "0123456789abcdefABCDEF" for ch in digits):
                    if int(digits, 16) > 0x10FFFF:
                        raise RegexError("code point out of range in \\u{...}", pattern, i)
                    emit(f"\\U{int(digits, 16):08x}", i)
                    i = end + 1
                    continue
            if d in "pP" and pattern.startswith("{", i + 2):
                end = pattern.find("}", i + 3)
                prop = _property_set(pattern[i + 3 : end]) if end > 0 else None
                if prop is None:
                    raise RegexError(
                        "only general-category property escapes such as \\p{L} or \\p{Nd} are "
                        "supported",
                        pattern,
                        i,
                    )
                if in_class:
                    emit(_ranges_text(prop if d == "p" else prop.negate()), i)
                else:
                    emit(("[" if d == "p" else "[^") + _ranges_text(prop) + "]", i)
                i = end + 1
                continue
            if d == "k" and pattern.startswith("<", i + 2) and not in_class:
                raise RegexError("backreference \\k<...> is not supported" + _HINT, pattern, i)
            if d.isascii() and d.isalpha() and (d not in _ECMA_ESCAPES or (in_class and d == "B")):
                emit(d, i)  # identity escape, e.g. \a is "a" in ECMAScript
            else:
                emit(c + d, i)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
                emit(c, i)
            elif c == "[":
                emit("\\[", i)  # a literal in ECMAScript, a "nested set" warning in Python
            else:
                emit(c, i)
            i += 1
            continue
        if pattern.startswith("[^]", i):
            emit("[\\s\\S]", i)
            i += 3
        elif pattern.startswith("[]", i):
            emit("(?!)", i)
            i += 2
        elif c == "[":
            in_class = True
            emit(c, i)
            i += 1
            if pattern.startswith("^", i):
                emit("^", i)
                i += 1
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            emit("(?P<", i)
            i += 3
        elif pattern.startswith("{,", i):
            emit("\\{", i)  # not a quantifier in ECMAScript
            i += 1
        else:
            emit(c, i)
            i += 1
    origin.append(n)
    return "".join(out), origin


# --------------------------------------------------------------------------------------------
# Parse tree -> IR
# --------------------------------------------------------------------------------------------


def _trim_counts(out: list[Regex], at: int) -> None:
    """Search mode: shorten the counted repetitions at an unanchored end of a sequence.

    ``.*X{m,n}B`` is ``.*X{m}B`` for ``m <= n`` (``n`` may be unbounded): a match with more
    copies ends with one of ``m`` copies, and ``m`` copies are a match. Likewise ``BX{m,n}.*``
    at the end (``at = -1``; ``at = 0``: the start). A count of 0 drops the repetition and the
    next item is looked at. An unanchored ``[a-z]{1,255}`` needed every count tracked in
    parallel (0.1 s to compile), for the language of ``.*[a-z].*``.
    """
    while out:
        node = out[at]
        if not isinstance(node, Repeat) or node.min == node.max:
            return
        if node.max is not None and node.min > node.max:  # the empty language: kept as is
            return
        if node.min > 0:
            out[at] = node.item if node.min == 1 else Repeat(node.item, node.min, node.min)
            return
        del out[at]


def _concat(parts: list[Regex]) -> Regex:
    """Concatenate, merging adjacent literals and dropping empty strings."""
    out: list[Regex] = []
    for node in parts:
        if node == NOTHING:
            return NOTHING
        if node == EMPTY or (isinstance(node, Literal) and not node.text):
            continue
        if isinstance(node, Literal) and out and isinstance(out[-1], Literal):
            out[-1] = Literal(out[-1].text + node.text)
        else:
            out.append(node)
    if not out:
        return EMPTY
    return out[0] if len(out) == 1 else Concat(tuple(out))


def _combine_flags(flags: int, add: int, remove: int) -> int:
    if add & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | add) & ~remove


class _Converter:
    """Walk an sre parse tree in text order, building IR and locating rejected constructs."""

    def __init__(self, pattern: str, text: str, origin: list[int] | None, flavor: str) -> None:
        self.pattern = pattern
        self.text = text
        self.origin = origin
        self.flavor = flavor
        self.seen: dict[str, int] = {}
        self._found: dict[str, list[int]] | None = None
        self.verbose = False
        self.search = False

    # -- errors -----------------------------------------------------------------------------

    def visit(self, kind: str) -> int:
        """Count one more occurrence of ``kind``; return its index among occurrences."""
        index = self.seen.get(kind, 0)
        self.seen[kind] = index + 1
        return index

    def fail(self, kind: str, index: int, message: str) -> RegexError:
        if self._found is None:
            self._found = _locate(self.text, self.verbose)
        offsets = self._found.get(kind, [])
        offset = offsets[min(index, len(offsets) - 1)] if offsets else 0
        if self.origin is not None:
            offset = self.origin[min(offset, len(self.origin) - 1)]
        return RegexError(message, self.pattern, offset)

    # -- character sets ---------------------------------------------------------------------

    def category(self, code: Any, flags: int) -> CharSet:
        name, negated = _CATEGORIES[code]
        if self.flavor == "ecmascript":
            cs = _ECMA_SETS[name]
        else:
            cs = _category_set(name, bool(flags & _ASCII))
        return cs.negate() if negated else cs

    def literal(self, cp: int, flags: int) -> CharSet | None:
        """Return the folded set of a literal, or None when it matches only itself."""
        if not flags & _IGNORECASE:
            return None
        return fold_literal(cp, bool(flags & _ASCII))

    def char_class(self, items: Sequence[tuple[Any, Any]], flags: int) -> CharSet:
        negate = False
        ranges: list[tuple[int, int]] = []
        parts: list[str] = []
        for op, av in items:
            if op == _C.NEGATE:
                negate = True
            elif op == _C.LITERAL:
                ranges.append((av, av))
                parts.append(f"\\U{av:08x}")
            elif op == _C.RANGE:
                ranges.append((av[0], av[1]))
                parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
            elif op == _C.CATEGORY:
                cs = self.category(av, flags)
                ranges.extend(cs.ranges)
                if self.flavor == "ecmascript":
                    parts.extend(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in cs.ranges)
                else:
                    name, neg = _CATEGORIES[av]
                    esc = _CATEGORY_ESCAPES[name]
                    parts.append("\\" + (esc.upper() if neg else esc))
            else:  # pragma: no cover - sre emits nothing else inside a class
                raise RegexError(f"unsupported class item {op}", self.pattern, 0)
        base = CharSet.of(ranges)
        if flags & _IGNORECASE:
            probe_flags = _IGNORECASE | (_ASCII if flags & _ASCII else 0)
            base = fold_class("[" + "".join(parts) + "]", probe_flags, base)
        return base.negate() if negate else base

    def any_char(self, flags: int) -> CharSet:
        if flags & _DOTALL:
            return ANY_CHAR
        excluded = _ECMA_DOT_EXCLUDED if self.flavor == "ecmascript" else _NEWLINE
        return ANY_CHAR.intersect(excluded.negate())

    # -- sequences --------------------------------------------------------------------------

    def sequence(
        self,
        data: Sequence[tuple[Any, Any]],
        flags: int,
        start: bool,
        end: bool,
        pinned: tuple[bool, bool] = (False, False),
    ) -> Regex:
        """Convert a list of ``(op, av)`` items; ``start``/``end``: it begins/ends the pattern.

        ``pinned`` (search mode): an enclosing sequence already anchors the start/end.
        """
        items = list(data)
        solid = [i for i, (op, _) in enumerate(items) if op != _C.AT]
        first = solid[0] if solid else len(items)
        last = solid[-1] if solid else -1
        pin_start = pinned[0] or any(op == _C.AT and av in _BEGIN for op, av in items[:first])
        pin_end = pinned[1] or any(op == _C.AT and av in _END for op, av in items[last + 1 :])
        out: list[Regex] = []
        chars: list[str] = []
        for i, (op, av) in enumerate(items):
            at_start, at_end = start and i <= first, end and i >= last
            if op == _C.LITERAL:
                folded = self.literal(av, flags)
                if folded is None:
                    chars.append(chr(av))
                    continue
                node: Regex = folded
            else:
                pin = (pin_start or i != first, pin_end or i != last)
                node = self.item(op, av, flags, at_start, at_end, pin)
            if chars:
                out.append(Literal("".join(chars)))
                chars = []
            if isinstance(node, Concat):
                out.extend(node.items)
            else:
                out.append(node)
        if chars:
            out.append(Literal("".join(chars)))
        if self.search:
            head = start and not pin_start and not self._delegates(items, first)
            tail = end and not pin_end and not self._delegates(items, last)
            if head:
                _trim_counts(out, 0)
            if tail:
                _trim_counts(out, -1)
            if head:
                out.insert(0, _ANY_RUN)
            if tail:
                out.append(_ANY_RUN)
        return _concat(out)

    @staticmethod
    def _delegates(items: list[Any], index: int) -> bool:
        """Search mode: whether the item at an unpinned end is a group that handles the end."""
        if 0 <= index < len(items):
            op = items[index][0]
            return bool(op in (_C.BRANCH, _C.SUBPATTERN) or op == _ATOMIC_GROUP)
        return False

    def item(
        self,
        op: Any,
        av: Any,
        flags: int,
        start: bool,
        end: bool,
        pin: tuple[bool, bool] = (True, True),
    ) -> Regex:
        if op == _C.NOT_LITERAL:
            folded = self.literal(av, flags)
            return (folded if folded is not None else CharSet(((av, av),))).negate()
        if op == _C.ANY:
            return self.any_char(flags)
        if op == _C.IN:
            return self.char_class(av, flags)
        if op == _C.BRANCH:
            alts = tuple(self.sequence(sub.data, flags, start, end, pin) for sub in av[1])
            return alts[0] if len(alts) == 1 else Alt(alts)
        if op == _C.SUBPATTERN:
            _, add, remove, sub = av
            return self.sequence(sub.data, _combine_flags(flags, add, remove), start, end, pin)
        if _ATOMIC_GROUP is not None and op == _ATOMIC_GROUP:
            return self.sequence(av.data, flags, start, end, pin)
        if op in _REPEATS:
            lo, hi, sub = av
            body = self.sequence(sub.data, flags, False, False)
            if hi == 0:
                return EMPTY
            return Repeat(body, int(lo), None if hi == _MAX_REPEAT else int(hi))
        if op == _C.AT:
            return self.anchor(av, start, end)
        if op in (_C.ASSERT, _C.ASSERT_NOT):
            kind, message = _ASSERT_KINDS[(op == _C.ASSERT_NOT, av[0])]
            index = self.visit(kind)
            if not av[1].data:  # (?=) always holds, (?!) never does
                return NOTHING if op == _C.ASSERT_NOT else EMPTY
            raise self.fail(kind, index, message + _HINT)
        if op == _C.GROUPREF:
            index = self.visit("backreference")
            message = f"backreference to group {av} is not supported"
            raise self.fail("backreference", index, message + _HINT)
        if op == _C.GROUPREF_EXISTS:
            index = self.visit("(?(")
            message = "conditional group (?(...)...) is not supported"
            raise self.fail("(?(", index, message + _HINT)
        raise self.fail("", 0, f"unsupported regex construct {op}")

    def anchor(self, code: Any, start: bool, end: bool) -> Regex:
        if code in (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING):
            kind = "^" if code == _C.AT_BEGINNING else "\\A"
            index = self.visit(kind)
            if start:
                return EMPTY
            message = f"anchor {kind} is only supported at the very start of the pattern"
            raise self.fail(kind, index, message)
        if code in (_C.AT_END, _C.AT_END_STRING):
            kind = "$" if code == _C.AT_END else "\\Z"
            index = self.visit(kind)
            if end:
                return EMPTY
            raise self.fail(kind, index, f"anchor {kind} is only supported at the very end")
        kind = "\\b" if code == _C.AT_BOUNDARY else "\\B"
        index = self.visit(kind)
        name = "word boundary \\b" if kind == "\\b" else "non-boundary \\B"
        raise self.fail(kind, index, f"{name} is not supported" + _HINT)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def parse_regex(
    pattern: str, *, flavor: Flavor = "python", flags: int = 0, search: bool = False
) -> Regex:
    r"""Convert a regular expression to the regex IR, with ``re.fullmatch`` semantics.

    Parameters
    ----------
    pattern : str
        The regular expression.
    flavor : {"python", "ecmascript"}, optional
        ``"python"`` (default) reads Python ``re`` syntax and semantics. ``"ecmascript"`` reads a
        JSON Schema ``pattern``: ASCII ``\d``/``\w``, the ECMAScript ``\s`` set, and ``.``
        excluding all line terminators (unanchored search is the caller's business).
    flags : int, optional
        ``re`` flags: ``IGNORECASE``, ``DOTALL``, ``MULTILINE`` (no effect on anchors at the
        ends), ``VERBOSE``, ``ASCII``/``UNICODE``. Inline flags such as ``(?i)`` and scoped ones
        such as ``(?i:...)`` work too.
    search : bool, optional
        Search semantics instead (``re.search``, JSON Schema ``pattern``): the strings that
        *contain* a match. Each alternative left (right) unanchored by ``^`` (``$``) gets any
        prefix (suffix), so ``^a|b`` is "starts with a, or contains b".

    Returns
    -------
    Regex
        An IR node whose language is ``{s : re.fullmatch(pattern, s, flags)}``, except that
        atomic groups and possessive quantifiers are read as plain ones (a superset).

    Raises
    ------
    RegexError
        If the pattern is invalid (the message and offset come from ``re``) or uses lookaround,
        a backreference, a conditional group, ``\b``/``\B`` or an anchor away from the ends;
        ``.offset`` points at the construct.
    TypeError
        If ``pattern`` is not a ``str``.
    ValueError
        If ``flavor`` is unknown.

    Examples
    --------
    >>> parse_regex("ab?")
    Concat(items=(Literal(text='a'), Repeat(item=Literal(text='b'), min=0, max=1)))
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    if flavor not in ("python", "ecmascript"):
        raise ValueError(f"flavor must be 'python' or 'ecmascript', got {flavor!r}")
    flags = int(flags) & ~int(re.DEBUG)
    text, origin = pattern, None
    if flavor == "ecmascript":
        text, origin = _translate_ecmascript(pattern)
    try:
        with warnings.catch_warnings():
            if flavor == "ecmascript":  # "--", "&&", "||", "~~" in classes are plain in JS
                warnings.simplefilter("ignore", FutureWarning)
            tree = _P.parse(text, flags)
    except re.error as err:
        pos = err.pos or 0
        if origin is not None:
            pos = origin[min(pos, len(origin) - 1)]
        raise RegexError(f"invalid regex: {err.msg}", pattern, pos) from err
    except (ValueError, OverflowError, RecursionError) as err:
        raise RegexError(f"invalid regex: {err}", pattern, 0) from err
    converter = _Converter(pattern, text, origin, flavor)
    top_flags = int(tree.state.flags)
    converter.verbose = bool(top_flags & _VERBOSE)
    converter.search = search
    return converter.sequence(tree.data, top_flags, True, True)


def literal_regex(text: str, *, ignore_case: bool = False) -> Regex:
    """Return the IR of an exact string, optionally case-insensitive by Python's rules.

    Parameters
    ----------
    text : str
        The string.
    ignore_case : bool, optional
        Match each cased character in any case, as ``re.fullmatch(re.escape(text), s,
        re.IGNORECASE)`` does (Unicode simple case folding).

    Returns
    -------
    Regex
        A :class:`~constrain.ir.Literal` or, with ``ignore_case``, a concatenation of literals
        and character sets.
    """
    if not ignore_case:
        return Literal(text)
    out: list[Regex] = []
    chars: list[str] = []
    for ch in text:
        folded = fold_literal(ord(ch), False)
        if folded is None:
            chars.append(ch)
            continue
        if chars:
            out.append(Literal("".join(chars)))
            chars = []
        out.append(folded)
    if chars or not out:
        out.append(Literal("".join(chars)))
    return out[0] if len(out) == 1 else Concat(tuple(out))
