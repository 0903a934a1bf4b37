"""Stage 1: Lark terminal definitions -> regex IR, for :mod:`constrain.frontends.lark`.

A string terminal becomes a :class:`~constrain.ir.Literal` (``"select"i``: one
:class:`~constrain.ir.CharSet` per character, :func:`~constrain.ir.ignorecase_literal`); a regex
terminal goes through :func:`constrain.frontends.regex.parse_regex` with its flags (``l`` is
refused). Lookaround is refused, naming the terminal, except the lookbehind of
``common.ESCAPED_STRING`` (built from ``_STRING_ESC_INNER``), replaced by the lookaround-free
regex of the same language. Errors point into the grammar text (line, column, caret).

Special tokens (llguidance's syntax) are read by :func:`special_terminal`: ``<[128010]>`` is the
token of that id (:func:`~constrain.ir.special_token`), ``<|im_end|>`` or any other ``<name>``
without whitespace is a name resolved when the grammar is compiled for a vocabulary (a
placeholder, :func:`~constrain.ir.special_placeholder`, indexing the grammar's
``special_names``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lark.lexer import PatternRE, PatternStr, TerminalDef

from constrain.errors import LarkGrammarError, RegexError, caret_context, line_col
from constrain.frontends.regex import parse_regex
from constrain.ir import (
    Alt,
    CharSet,
    Concat,
    Literal,
    Regex,
    Repeat,
    Terminal,
    ignorecase_literal,
    matches_empty,
    special_placeholder,
    special_token,
)

__all__ = [
    "SPECIAL_TOKEN",
    "definition_pattern",
    "error_at_offset",
    "find",
    "lark_terminal",
    "special_terminal",
]

SPECIAL_TOKEN = r"<([^\s<>]+)>"
"""The syntax of a special token in a Lark grammar (group 1: ``[id]`` or the name)."""


def special_terminal(content: str, names: list[str], text: str, at: int) -> Regex:
    """Return the regex of a special token ``<content>`` met at offset ``at`` of ``text``.

    Parameters
    ----------
    content : str
        What is between ``<`` and ``>``: ``[id]`` (a decimal token id) or anything else, a
        name: ``<|im_end|>`` is recorded as the name ``"<|im_end|>"`` (the compiler also tries
        the text between the brackets, so ``<[TOOL_CALLS]>`` finds ``"[TOOL_CALLS]"``).
    names : list of str
        The special token names met so far (the grammar's ``special_names``), extended in place
        with a new name.
    text : str
        The grammar text, for errors.
    at : int
        The offset of the ``<``.

    Returns
    -------
    Regex
        ``special_token(id)`` or the name's placeholder.

    Raises
    ------
    LarkGrammarError
        If an id is ``2**18`` or more.
    """
    if re.fullmatch(r"\[[0-9]+\]", content):
        try:
            return special_token(int(content[1:-1]))
        except ValueError as err:
            raise error_at_offset(f"special token <{content}>: {err}", text, at) from None
    name = f"<{content}>"
    if name not in names:
        names.append(name)
    return special_placeholder(names.index(name))


_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "u": 0}
# The compiled text of Lark's ``_STRING_ESC_INNER`` (``/.*?/ /(?<!\\)(\\\\)*?/``).
_ESC_INNER = r".*?(?<!\\)(\\\\)*?"
_DELIMITED_ESC = re.compile(r"(\\?.)" + re.escape(_ESC_INNER) + r"(\\?.)", re.DOTALL)
_LOOKAROUND = re.compile(r"\(\?(?:<?[=!])")
_LOOKAROUND_NAMES = {
    "(?=": "lookahead",
    "(?!": "negative lookahead",
    "(?<=": "lookbehind",
    "(?<!": "negative lookbehind",
}


def definition_pattern(name: str) -> str:
    """Return the regex of the line that defines rule or terminal ``name``."""
    return rf"^[ \t]*(?:%override[ \t]+|%extend[ \t]+)?[?!]?{re.escape(name)}(?=\s*[.:{{])"


def find(text: str, pattern: str, flags: int = 0) -> int | None:
    """Return where ``pattern`` first matches (its last group's start, if it has groups)."""
    m = re.search(pattern, text, flags)
    return None if m is None else m.start(m.re.groups)


def error_at_offset(message: str, text: str, offset: int | None) -> LarkGrammarError:
    """Return a LarkGrammarError at ``offset`` of ``text`` (line, column, caret), if known."""
    if offset is None:
        return LarkGrammarError(message)
    line, column = line_col(text, offset)
    return LarkGrammarError(message, line, column, caret_context(text, offset))


def lark_terminal(term: TerminalDef, text: str) -> Terminal:
    """Return the IR terminal of one of lark's terminal definitions (``text``: for errors)."""
    pattern = term.pattern
    flags = set(pattern.flags)
    if isinstance(pattern, PatternStr):
        regex: Regex = ignorecase_literal(pattern.value) if "i" in flags else Literal(pattern.value)
    else:
        assert isinstance(pattern, PatternRE)
        regex = _regex_terminal(term, text)
    if matches_empty(regex):
        raise error_at_offset(
            f"terminal {term.name} matches the empty string ({pattern.to_regexp()!r}); a token "
            "must have at least one character. Make the terminal non-empty (e.g. /a+/ instead "
            "of /a*/) and mark its use optional in the rule (NAME? or [NAME])",
            text,
            _terminal_offset(term, text),
        )
    return Terminal(str(term.name), regex)


def _regex_terminal(term: TerminalDef, text: str) -> Regex:
    pattern = term.pattern
    value, flags = pattern.value, set(pattern.flags)
    escaped = _escaped_string(value, flags)
    if escaped is not None:
        return escaped
    if "l" in flags:
        raise error_at_offset(
            f"terminal {term.name} uses the 'l' (LOCALE) flag, which only applies to bytes "
            "patterns; remove it",
            text,
            _terminal_offset(term, text),
        )
    look = _find_lookaround(value)
    if look is not None:
        construct = value[look : look + 4 if value.startswith("(?<", look) else look + 3]
        hint = (
            " (_STRING_ESC_INNER is supported only as a whole terminal between two equal "
            'one-character delimiters, as in ESCAPED_STRING: "\\"" _STRING_ESC_INNER "\\"")'
            if _ESC_INNER in value
            else ""
        )
        raise error_at_offset(
            f"terminal {term.name} uses a {_LOOKAROUND_NAMES[construct]} '{construct}' (at "
            f"offset {look} of /{value}/); terminals compile to finite automata, which cannot "
            f"look around. Rewrite the pattern without it, or move the context into the rules"
            f"{hint}",
            text,
            _terminal_offset(term, text),
        )
    bits = 0
    for flag in flags:
        bits |= _FLAG_BITS[flag]
    try:
        return parse_regex(value, flags=bits)
    except RegexError as err:
        raise error_at_offset(
            f"terminal {term.name} has an unsupported pattern: {err}",
            text,
            _terminal_offset(term, text),
        ) from err


def _escaped_string(value: str, flags: Iterable[str]) -> Regex | None:
    r"""Return the lookaround-free IR of a terminal built from ``_STRING_ESC_INNER``, or None.

    ``q.*?(?<!\\)(\\\\)*?q`` (``ESCAPED_STRING`` with ``q = "``) is matched by Lark's Earley
    ``dynamic`` lexer with ``re.match``, which returns the *shortest* match: the token ends at the
    first ``q`` preceded by an even number of backslashes. Its language is therefore
    ``q ( [^q\\\n] | \\[^\n] )* q``: escapes pair a backslash with the next character, and an
    unescaped ``q`` can only close the string. With the ``s`` flag, ``.`` also matches newlines.
    An alternation of such strings with distinct delimiters is handled the same way.
    """
    body = value
    if body.startswith("(?:") and body.endswith(")"):
        body = body[3:-1]
    parts = body.split("|") if "|" in body else [body]
    dotall = "s" in flags
    out: list[Regex] = []
    delimiters: set[str] = set()
    for part in parts:
        m = _DELIMITED_ESC.fullmatch(part)
        if m is None or m[1] != m[2]:
            return None
        quote = m[1][-1]
        if quote in "\\\n" or quote in delimiters or (m[1].startswith("\\") and quote.isalnum()):
            return None
        delimiters.add(quote)
        excluded = quote + "\\" + ("" if dotall else "\n")
        q = CharSet.chars(quote)
        escape = Concat((CharSet.chars("\\"), CharSet.chars("" if dotall else "\n").negate()))
        inner = Repeat(Alt((CharSet.chars(excluded).negate(), escape)), 0, None)
        out.append(Concat((q, inner, q)))
    return out[0] if len(out) == 1 else Alt(tuple(out))


def _find_lookaround(value: str) -> int | None:
    """Return the offset of the first lookaround group in a Python regex (outside classes)."""
    i, in_class = 0, False
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if value.startswith("]", i + 1) or value.startswith("^]", i + 1):
                i += 2 if value[i + 1] == "]" else 3
                continue
        elif _LOOKAROUND.match(value, i):
            return i
        i += 1
    return None


def _terminal_offset(term: TerminalDef, text: str) -> int | None:
    where = find(text, definition_pattern(term.name), re.MULTILINE)
    if where is None and term.pattern.raw:
        where = text.find(term.pattern.raw)
        where = None if where < 0 else where
    return where
