"""Stage 1: the Lark front end, Lark grammar text -> :class:`~constrain.ir.Grammar`.

Lark's own loader does the parsing (``lark.load_grammar.load_grammar(...).compile(...)``), so
``%import`` (``common.*`` and relative files), ``%ignore``, ``%override``/``%extend``, templates,
``?rule``, aliases and the EBNF operators (``?``, ``*``, ``+``, ``[...]``, ``~ n..m``) mean exactly
what they mean in Lark. What comes back is plain BNF: this module only maps it to the IR.

- Rules keep the names Lark gives them, including generated ones (``__start_star_0``,
  ``_sep{item,COMMA}``); ``Grammar.to_lark`` renames those when printing.
- A string terminal becomes a :class:`~constrain.ir.Literal`; ``"select"i`` becomes one
  :class:`~constrain.ir.CharSet` per character (:func:`~constrain.ir.ignorecase_literal`,
  the case variants Python's ``re.IGNORECASE`` accepts).
- A regex terminal goes through :func:`constrain.frontends.regex.parse_regex` with its flags
  (``i m s x u``; ``l`` is refused). Lookaround is refused, naming the terminal, with one
  exception: the lookbehind of ``common.ESCAPED_STRING`` (built from ``_STRING_ESC_INNER``) is
  replaced by the lookaround-free regex of the same language, found from the compiled pattern
  text, so it works under any name and for any one-character delimiter.

Ignored on purpose, because they change which parse Lark picks, never the language: terminal
and rule priorities (``A.2``, ``rule.2``), ``!rule``, ``?rule``, aliases and ``_``-prefixes.

Refused with :class:`~constrain.errors.LarkGrammarError` (with line, column and a caret excerpt
whenever the position can be found): Lark's own grammar errors (wrapped, message kept),
``%declare``-d terminals (they come from a custom lexer and cannot be generated), terminals that
match the empty string (Lark's Earley parser refuses them too), a missing start rule and an empty
grammar.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from lark.exceptions import LarkError, UnexpectedInput
from lark.lexer import PatternRE, PatternStr, TerminalDef

from constrain.errors import GrammarError, LarkGrammarError, RegexError, caret_context, line_col
from constrain.ir import (
    Alt,
    CharSet,
    Concat,
    Grammar,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
    ignorecase_literal,
    matches_empty,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["builtin_grammar", "builtin_names", "parse_lark", "parse_lark_file"]

ImportPath = Union[str, Callable[..., Any]]  # noqa: UP007  (runtime alias on 3.10)

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


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def parse_lark(
    text: str,
    *,
    start: str = "start",
    source: str = "<string>",
    import_paths: Sequence[ImportPath] = (),
) -> Grammar:
    r"""Return the normalised IR of a Lark grammar.

    Parameters
    ----------
    text : str
        The grammar, in Lark syntax.
    start : str, optional
        The start rule.
    source : str, optional
        Where the text comes from, for messages. Lark resolves relative ``%import`` statements
        from this file's folder (``"<string>"``: the running script's folder).
    import_paths : sequence of str or callable, optional
        Extra folders (or Lark import loaders) searched first by ``%import``.

    Returns
    -------
    Grammar
        The grammar, normalised (:meth:`~constrain.ir.Grammar.normalise`).

    Raises
    ------
    LarkGrammarError
        If the grammar is invalid or uses something that cannot be generated; the error
        carries ``line`` and ``column`` when the position is known.

    Examples
    --------
    >>> g = parse_lark('start: "a"i NUMBER\n%import common.NUMBER')
    >>> [t.name for t in g.terminals]
    ['NUMBER', 'A']
    """
    lark_grammar = _load(text, source, list(import_paths))
    _check_definitions(lark_grammar, text, start)
    term_defs, lark_rules, ignore = _call_lark(text, lambda: lark_grammar.compile([start], set()))

    terminals = [_terminal(t, text) for t in term_defs]
    names = {t.name for t in terminals}
    alternatives: dict[str, list[tuple[str, ...]]] = {}
    for lark_rule in lark_rules:
        alt = tuple(str(sym.name) for sym in lark_rule.expansion)  # plain str, not lark Tokens
        for sym in lark_rule.expansion:
            if sym.is_term and sym.name not in names:
                raise _declared_error(sym.name, text)
        alternatives.setdefault(str(lark_rule.origin.name), []).append(alt)
    for name in ignore:
        if name not in names:
            raise _declared_error(name, text)
    grammar = Grammar(
        rules=tuple(Rule(name, tuple(alts)) for name, alts in alternatives.items()),
        terminals=tuple(terminals),
        start=start,
        ignore=tuple(dict.fromkeys(map(str, ignore))),
    )
    try:
        return grammar.normalise()
    except GrammarError as err:
        where = "" if source == "<string>" else f" ({source})"
        raise LarkGrammarError(f"{err}{where}") from err


def parse_lark_file(path: Path, *, start: str = "start") -> Grammar:
    """Return the normalised IR of a ``.lark`` file.

    Relative ``%import`` statements (``%import .common.NAME``) are resolved from the file's
    folder.

    Parameters
    ----------
    path : Path
        The grammar file (UTF-8).
    start : str, optional
        The start rule.

    Returns
    -------
    Grammar
        The grammar, normalised.

    Raises
    ------
    LarkGrammarError
        If the grammar is invalid (see :func:`parse_lark`).
    OSError
        If the file cannot be read.
    """
    path = Path(path).resolve()
    return parse_lark(path.read_text(encoding="utf-8"), start=start, source=str(path))


def builtin_names() -> list[str]:
    """Return the names of the grammars shipped in ``constrain.grammars``, sorted."""
    return sorted(_builtin_files())


@functools.cache
def builtin_grammar(name: str) -> Grammar:
    """Return a grammar shipped with constrain (``grammars/<name>.lark``), parsed once.

    Parameters
    ----------
    name : str
        One of :func:`builtin_names`: ``"arithmetic"``, ``"csv"``, ``"json"``, ``"sql"``.

    Returns
    -------
    Grammar
        The normalised grammar; it is immutable, so the cached object is shared.

    Raises
    ------
    ValueError
        If no grammar of that name ships; the message lists the available names.
    """
    files = _builtin_files()
    if name not in files:
        raise ValueError(
            f"no built-in grammar named {name!r}; available: {', '.join(sorted(files))} "
            "(or load your own with Grammar.from_lark_file)"
        )
    with importlib.resources.as_file(files[name]) as path:
        return parse_lark_file(path)


# --------------------------------------------------------------------------------------------
# Loading through lark, with errors mapped to LarkGrammarError
# --------------------------------------------------------------------------------------------


def _builtin_files() -> dict[str, Traversable]:
    try:
        root: Traversable = importlib.resources.files("constrain.grammars")
    except ModuleNotFoundError:
        # An editable install made before grammars/ was mapped to constrain.grammars: use the
        # source checkout, where grammars/ sits next to constrain/.
        root = Path(__file__).resolve().parents[2] / "grammars"
    return {
        entry.name[: -len(".lark")]: entry
        for entry in root.iterdir()
        if entry.name.endswith(".lark") and entry.is_file()
    }


def _load(text: str, source: str, import_paths: list[ImportPath]) -> Any:
    from lark import load_grammar as lark_loader

    load: Any = lark_loader.load_grammar
    grammar, _used_files = _call_lark(text, lambda: load(text, source, import_paths, False))
    return grammar


def _call_lark(text: str, thunk: Callable[[], Any]) -> Any:
    """Run a lark call; turn whatever lark raises about the grammar into LarkGrammarError."""
    try:
        return thunk()
    except UnexpectedInput as err:
        message = str(err).split("\n\n")[0].strip()
        raise _error_at(f"invalid Lark grammar: {message}", text, err.line, err.column) from err
    except LarkError as err:
        raise _wrap_message(str(err), text) from err
    except OSError as err:
        missing = getattr(err, "filename", None) or str(err)
        dotted = str(missing).removesuffix(".lark").replace("/", ".").replace("\\", ".")
        raise _error_at_offset(
            f"%import cannot find the grammar {missing!r}; check the dotted path, or pass "
            "import_paths=[folder] (parse_lark) or use parse_lark_file for relative imports",
            text,
            _find(text, rf"%import\s+\.?{re.escape(dotted)}"),
        ) from err
    except AssertionError as err:  # lark checks some grammar invariants with assert
        raise LarkGrammarError(f"lark rejected the grammar: {err}") from err


def _wrap_message(message: str, text: str) -> LarkGrammarError:
    """Build the error for a lark GrammarError message, locating it in ``text`` if possible."""
    head = message.split("\n\n")[0].strip()
    pos = re.search(r"at line (\d+) col(?:umn)? (\d+)", head)
    if pos:
        return _error_at(f"invalid Lark grammar: {head}", text, int(pos[1]), int(pos[2]))
    hint = ""
    if "used but not defined" in head:
        hint = "; define it or fix the spelling"
    elif "defined more than once" in head:
        hint = "; rename one of the definitions, or use %override to replace an imported one"
    return _error_at_offset(f"invalid Lark grammar: {head}{hint}", text, _locate(head, text))


def _locate(message: str, text: str) -> int | None:
    """Guess where in ``text`` a position-less lark message points (None when unsure)."""
    names = re.findall(r"'([A-Za-z_][\w{},]*)'", message)
    if not names:
        names = re.findall(r"\(([A-Z_][A-Z0-9_]*)\)", message)  # "Terminals cannot be empty (A)"
    if not names:
        return None
    name = names[0]
    context = re.search(r"\(in (?:rule|terminal) (\S+)\)", message)
    if "defined more than once" in message:
        defs = [m.start() for m in re.finditer(_definition_pattern(name), text, re.MULTILINE)]
        return defs[1] if len(defs) > 1 else (defs[0] if defs else None)
    after = 0
    if context:
        where = _find(text, _definition_pattern(context[1]), re.MULTILINE)
        after = where + len(context[1]) if where is not None else 0
    word = re.compile(rf"(?<![\w\"/]){re.escape(name)}(?!\w)")
    m = word.search(text, after) or word.search(text)
    if m is None:
        return _find(text, _definition_pattern(name), re.MULTILINE)
    return m.start()


def _definition_pattern(name: str) -> str:
    return rf"^[ \t]*(?:%override[ \t]+|%extend[ \t]+)?[?!]?{re.escape(name)}(?=\s*[.:{{])"


def _find(text: str, pattern: str, flags: int = 0) -> int | None:
    """Return where ``pattern`` first matches (its last group's start, if it has groups)."""
    m = re.search(pattern, text, flags)
    return None if m is None else m.start(m.re.groups)


def _error_at(message: str, text: str, line: int, column: int) -> LarkGrammarError:
    lines = text.split("\n")
    offset = sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + max(column - 1, 0)
    return LarkGrammarError(message, line, column, caret_context(text, offset))


def _error_at_offset(message: str, text: str, offset: int | None) -> LarkGrammarError:
    if offset is None:
        return LarkGrammarError(message)
    line, column = line_col(text, offset)
    return LarkGrammarError(message, line, column, caret_context(text, offset))


def _check_definitions(lark_grammar: Any, text: str, start: str) -> None:
    """Refuse an empty grammar, a missing or templated start rule and %declare-d rules."""
    rules = {name: (params, tree) for name, params, tree, _opts in lark_grammar.rule_defs}
    if not rules:
        raise LarkGrammarError(
            "the grammar is empty: it defines no rule; add a start rule such as "
            f"'{start}: ...' (and the terminals it uses)"
        )
    for name, (_params, tree) in rules.items():
        if tree is None:
            raise _error_at_offset(
                f"rule {name!r} is declared with %declare but never defined; constrain needs "
                "every rule's definition to generate text",
                text,
                _find(text, rf"%declare\b[^\n]*\b({re.escape(name)})\b"),
            )
    if start not in rules or rules[start][0]:
        defined = ", ".join(sorted(n for n, (params, _t) in rules.items() if not params))
        what = "is a template" if start in rules else "is not defined"
        raise LarkGrammarError(
            f"start rule {start!r} {what}; pass start= one of the grammar's rules ({defined}) "
            f"or add a rule named {start!r}"
        )


def _declared_error(name: str, text: str) -> LarkGrammarError:
    return _error_at_offset(
        f"terminal {name!r} has no pattern (it is %declare-d, for a custom lexer or postlexer "
        "to produce); constrain generates text from patterns, so define it, e.g. "
        f"{name}: /.../",
        text,
        _find(text, rf"%declare\b[^\n]*\b({re.escape(name)})\b"),
    )


# --------------------------------------------------------------------------------------------
# Terminals
# --------------------------------------------------------------------------------------------


def _terminal(term: TerminalDef, text: str) -> Terminal:
    pattern = term.pattern
    flags = set(pattern.flags)
    if isinstance(pattern, PatternStr):
        regex: Regex = ignorecase_literal(pattern.value) if "i" in flags else Literal(pattern.value)
    else:
        assert isinstance(pattern, PatternRE)
        regex = _regex_terminal(term, text)
    if matches_empty(regex):
        raise _error_at_offset(
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
        raise _error_at_offset(
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
        raise _error_at_offset(
            f"terminal {term.name} uses a {_LOOKAROUND_NAMES[construct]} '{construct}' (at "
            f"offset {look} of /{value}/); terminals compile to finite automata, which cannot "
            f"look around. Rewrite the pattern without it, or move the context into the rules"
            f"{hint}",
            text,
            _terminal_offset(term, text),
        )
    from constrain.frontends.regex import parse_regex

    bits = 0
    for flag in flags:
        bits |= _FLAG_BITS[flag]
    try:
        return parse_regex(value, flags=bits)
    except RegexError as err:
        raise _error_at_offset(
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
    where = _find(text, _definition_pattern(term.name), re.MULTILINE)
    if where is None and term.pattern.raw:
        where = text.find(term.pattern.raw)
        where = None if where < 0 else where
    return where
