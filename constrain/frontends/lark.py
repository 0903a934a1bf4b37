"""Stage 1: the Lark front end, Lark grammar text -> :class:`~constrain.ir.Grammar`.

Lark's own loader does the parsing (``lark.load_grammar.load_grammar(...).compile(...)``), so
``%import`` (``common.*`` and relative files), ``%ignore``, ``%override``/``%extend``, templates,
``?rule``, aliases and the EBNF operators (``?``, ``*``, ``+``, ``[...]``, ``~ n..m``) mean exactly
what they mean in Lark. What comes back is plain BNF: this module only maps it to the IR.

- Rules keep the names Lark gives them, including generated ones (``__start_star_0``,
  ``_sep{item,COMMA}``); ``Grammar.to_lark`` renames those when printing.
- Terminals (:mod:`constrain.frontends.lark_terminals`): a string becomes a
  :class:`~constrain.ir.Literal`; ``"select"i`` becomes one
  :class:`~constrain.ir.CharSet` per character (:func:`~constrain.ir.ignorecase_literal`,
  the case variants Python's ``re.IGNORECASE`` accepts).
- A regex terminal goes through :func:`constrain.frontends.regex.parse_regex` with its flags
  (``i m s x u``; ``l`` is refused). Lookaround is refused, naming the terminal, with one
  exception: the lookbehind of ``common.ESCAPED_STRING`` (built from ``_STRING_ESC_INNER``) is
  replaced by the lookaround-free regex of the same language, found from the compiled pattern
  text, so it works under any name and for any one-character delimiter.

Token budgets (llguidance's ``name[max_tokens=N]:``) are read by
:mod:`constrain.frontends.lark_budgets`. Composition (``docs/grammars.md``): before lark's
loader sees the text, ``%json`` (an inline or file JSON Schema) and ``%grammar`` (a ``.lark``
file) are replaced by placeholder terminals and their grammars spliced in afterwards
(:func:`constrain.frontends.compose.splice`, which keeps the outer ``%ignore`` out of them);
``%regex "pattern"`` becomes the pattern's Lark literal.

Ignored on purpose, because they change which parse Lark picks, never the language: terminal
and rule priorities (``A.2``, ``rule.2``), ``!rule``, ``?rule``, aliases and ``_``-prefixes.

Refused with :class:`~constrain.errors.LarkGrammarError` (with line, column and a caret excerpt
whenever the position can be found): Lark's own grammar errors (wrapped, message kept),
``%declare``-d terminals (they come from a custom lexer and cannot be generated), terminals that
match the empty string (Lark's Earley parser refuses them too), a missing start rule and an empty
grammar.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from lark.exceptions import LarkError, UnexpectedInput

from constrain.errors import (
    GrammarError,
    JsonSchemaError,
    LarkGrammarError,
    caret_context,
)
from constrain.frontends.compose import splice
from constrain.frontends.lark_budgets import apply_budgets, strip_budgets
from constrain.frontends.lark_terminals import (
    SPECIAL_TOKEN,
    definition_pattern,
    error_at_offset,
    find,
    lark_terminal,
    special_terminal,
)
from constrain.frontends.regex import parse_regex
from constrain.ir import (
    Grammar,
    Regex,
    Rule,
    Terminal,
    is_terminal_name,
    matches_empty,
)
from constrain.ir.printer import terminal_to_lark

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["builtin_grammar", "builtin_names", "parse_lark", "parse_lark_file"]

ImportPath = Union[str, Callable[..., Any]]  # noqa: UP007  (runtime alias on 3.10)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def parse_lark(
    text: str,
    *,
    start: str = "start",
    source: str = "<string>",
    import_paths: Sequence[ImportPath] = (),
    lexer: str | None = None,
) -> Grammar:
    r"""Return the normalised IR of a Lark grammar.

    Besides Lark's own syntax, a rule may embed other languages (``docs/grammars.md``,
    "Composition"): ``%json {...}`` (an inline JSON Schema) or ``%json "file.json"``, each
    optionally followed by a JSON object of :meth:`Grammar.from_json_schema` options;
    ``%grammar "file.lark"`` (optionally followed by ``{"start": "rule"}``); and ``%regex
    "pattern"`` (a Python ``re`` pattern given as a JSON string, usable wherever ``/.../`` is).
    An embedded part keeps its own layout: the enclosing grammar's ``%ignore`` may come before
    and after it, never inside it.

    Parameters
    ----------
    text : str
        The grammar, in Lark syntax.
    start : str, optional
        The start rule.
    source : str, optional
        Where the text comes from, for messages. Lark resolves relative ``%import`` statements
        from this file's folder (``"<string>"``: the running script's folder); when it is an
        absolute path, relative ``%json`` and ``%grammar`` files are read from its folder too
        (otherwise they must be absolute).
    import_paths : sequence of str or callable, optional
        Extra folders (or Lark import loaders) searched first by ``%import``.
    lexer : {"dynamic_complete", "basic"}, optional
        How lexemes split, in Lark's words: ``"dynamic_complete"`` (the default) follows every
        split the terminals allow; ``"basic"`` lexes greedily, a lexeme ending only before a
        byte no terminal could take next (:attr:`Grammar.greedy`). A ``%lexer basic`` line in
        the text sets the same; this argument, when given, overrides it.

    Returns
    -------
    Grammar
        The grammar, normalised (:meth:`~constrain.ir.Grammar.normalise`).

    Raises
    ------
    LarkGrammarError
        If the grammar is invalid or uses something that cannot be generated, including an
        embedded schema, file or pattern that cannot be read or compiled; the error carries
        ``line`` and ``column`` when the position is known.
    CompileLimitError
        If an embedded JSON Schema hits a compile limit.

    Examples
    --------
    >>> g = parse_lark('start: "a"i NUMBER\n%import common.NUMBER')
    >>> [t.name for t in g.terminals]
    ['NUMBER', 'A']
    """
    path = Path(source)
    stack = (path.resolve(),) if path.is_absolute() else ()
    return _with_lexer(_parse(text, start, source, list(import_paths), stack), lexer)


def _with_lexer(grammar: Grammar, lexer: str | None) -> Grammar:
    """Return ``grammar`` with the lexing mode ``lexer`` (None: as its text says)."""
    if lexer is None:
        return grammar
    greedy = _LEXER_MODES.get(lexer)
    if greedy is None:
        raise LarkGrammarError(
            f"lexer={lexer!r}: choose 'dynamic_complete' (every split) or 'basic' (greedy)"
        )
    return dataclasses.replace(grammar, greedy=greedy)


def _parse(
    text: str, start: str, source: str, import_paths: list[ImportPath], stack: tuple[Path, ...]
) -> Grammar:
    """Return :func:`parse_lark` of ``text``; ``stack`` holds the files being embedded."""
    stripped, budgets = strip_budgets(text)  # name[max_tokens=N]: (same offsets)
    lark_text, parts, options, specials = _embed_directives(stripped, stack)
    lark_grammar = _load(lark_text, text, source, import_paths)
    _check_definitions(lark_grammar, text, start)
    term_defs, lark_rules, ignore = _call_lark(text, lambda: lark_grammar.compile([start], set()))

    terminals = [lark_terminal(t, text) for t in term_defs]
    terminals += [Terminal(name, regex) for name, regex in specials.terminals.items()]
    names = {t.name for t in terminals} | set(parts)
    alternatives: dict[str, list[tuple[str, ...]]] = {}
    for lark_rule in lark_rules:
        alt = tuple(str(sym.name) for sym in lark_rule.expansion)  # plain str, not lark Tokens
        for sym in lark_rule.expansion:
            if sym.is_term and sym.name not in names:
                raise _declared_error(sym.name, text)
        alternatives.setdefault(str(lark_rule.origin.name), []).append(alt)
    for name in ignore:
        if name not in names or name in parts:
            raise _declared_error(name, text)
    grammar = Grammar(
        rules=tuple(Rule(name, tuple(alts)) for name, alts in alternatives.items()),
        terminals=tuple(terminals),
        start=start,
        ignore=tuple(dict.fromkeys(map(str, ignore))),
        greedy=options.get("greedy", False),
        ignore_at_end=options.get("ignore_at_end", True),
        special_names=tuple(specials.names),
    )
    grammar = apply_budgets(grammar, budgets, text)
    if parts:
        grammar = splice(grammar, parts)
    try:
        return grammar.normalise()
    except GrammarError as err:
        where = "" if source == "<string>" else f" ({source})"
        raise LarkGrammarError(f"{err}{where}") from err


def parse_lark_file(path: Path, *, start: str = "start", lexer: str | None = None) -> Grammar:
    """Return the normalised IR of a ``.lark`` file.

    Relative ``%import`` statements (``%import .common.NAME``) and relative ``%json`` and
    ``%grammar`` files are resolved from the file's folder.

    Parameters
    ----------
    path : Path
        The grammar file (UTF-8).
    start : str, optional
        The start rule.
    lexer : {"dynamic_complete", "basic"}, optional
        As for :func:`parse_lark`.

    Returns
    -------
    Grammar
        The grammar, normalised.

    Raises
    ------
    LarkGrammarError
        If the grammar is invalid (see :func:`parse_lark`).
    CompileLimitError
        If an embedded JSON Schema hits a compile limit.
    OSError
        If the file cannot be read.
    """
    path = Path(path).resolve()
    return _with_lexer(
        _parse(path.read_text(encoding="utf-8"), start, str(path), [], (path,)), lexer
    )


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


def _load(lark_text: str, text: str, source: str, import_paths: list[ImportPath]) -> Any:
    """Load ``lark_text`` (``text`` with its directives replaced) with lark's loader.

    Errors are located in ``text``: the replacements keep every line and column of the rest.
    """
    from lark import load_grammar as lark_loader

    load: Any = lark_loader.load_grammar
    grammar, _used_files = _call_lark(text, lambda: load(lark_text, source, import_paths, False))
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
        raise error_at_offset(
            f"%import cannot find the grammar {missing!r}; check the dotted path, or pass "
            "import_paths=[folder] (parse_lark) or use parse_lark_file for relative imports",
            text,
            find(text, rf"%import\s+\.?{re.escape(dotted)}"),
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
    return error_at_offset(f"invalid Lark grammar: {head}{hint}", text, _locate(head, text))


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
        defs = [m.start() for m in re.finditer(definition_pattern(name), text, re.MULTILINE)]
        return defs[1] if len(defs) > 1 else (defs[0] if defs else None)
    after = 0
    if context:
        where = find(text, definition_pattern(context[1]), re.MULTILINE)
        after = where + len(context[1]) if where is not None else 0
    word = re.compile(rf"(?<![\w\"/]){re.escape(name)}(?!\w)")
    m = word.search(text, after) or word.search(text)
    if m is None:
        return find(text, definition_pattern(name), re.MULTILINE)
    return m.start()


def _error_at(message: str, text: str, line: int, column: int) -> LarkGrammarError:
    lines = text.split("\n")
    offset = sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + max(column - 1, 0)
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
            raise error_at_offset(
                f"rule {name!r} is declared with %declare but never defined; constrain needs "
                "every rule's definition to generate text",
                text,
                find(text, rf"%declare\b[^\n]*\b({re.escape(name)})\b"),
            )
    if start not in rules or rules[start][0]:
        defined = ", ".join(sorted(n for n, (params, _t) in rules.items() if not params))
        what = "is a template" if start in rules else "is not defined"
        raise LarkGrammarError(
            f"start rule {start!r} {what}; pass start= one of the grammar's rules ({defined}) "
            f"or add a rule named {start!r}"
        )


def _declared_error(name: str, text: str) -> LarkGrammarError:
    return error_at_offset(
        f"terminal {name!r} has no pattern (it is %declare-d, for a custom lexer or postlexer "
        "to produce); constrain generates text from patterns, so define it, e.g. "
        f"{name}: /.../",
        text,
        find(text, rf"%declare\b[^\n]*\b({re.escape(name)})\b"),
    )


# --------------------------------------------------------------------------------------------
# Composition: %json, %grammar and %regex directives
# --------------------------------------------------------------------------------------------

# What the scan skips (strings, regexes, comments) and the directives it looks for.
_LEXEME_OR_DIRECTIVE = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|/(?!/)(?:\\.|[^/\\\n])*/|//[^\n]*|#[^\n]*|%(json|regex|grammar|lexer|ignore_at_end)\b'
    + "|"
    + SPECIAL_TOKEN
)
# %lexer MODE: Lark's lexer names, and whether the mode is greedy
_LEXER_MODES = {"basic": True, "dynamic_complete": False}
_OPTION_LINE = re.compile(r"^[ \t]*%(?:lexer|ignore_at_end)[ \t]+\w+[ \t]*$", re.MULTILINE)


def without_option_lines(text: str) -> str:
    """Return a grammar text without constrain's ``%lexer`` and ``%ignore_at_end`` lines.

    Parameters
    ----------
    text : str
        A Lark grammar text, possibly with constrain's option lines.

    Returns
    -------
    str
        What Lark itself reads: for a greedy grammar or one with ``%ignore_at_end false``, a
        text whose language contains the grammar's (Lark's default lexer splits every way and
        allows ignored lexemes at the end).
    """
    return _OPTION_LINE.sub("", text)


# constrain's one-line directives: their values, the Grammar field each sets, the help text
_OPTION_VALUES = {
    "lexer": (_LEXER_MODES, "greedy", "basic (greedy), dynamic_complete"),
    "ignore_at_end": ({"true": True, "false": False}, "ignore_at_end", "true, false"),
}
# The start of a statement: a %-statement (group 1) or a rule or terminal definition (group 2).
_STATEMENT = re.compile(
    r"^[ \t]*(?:%override[ \t]+|%extend[ \t]+)?"
    r"(?:(%\w+)|[?!]?(\w+)[ \t]*(?:\{[^}\n]*\})?(?:\.-?\d+)?[ \t]*:)",
    re.MULTILINE,
)
_JSON = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"
_ARGUMENT = {
    "json": "a JSON Schema (an object) or a schema file name (a string)",
    "grammar": "a .lark file name (a string)",
    "regex": "a pattern (a string)",
}


@dataclass(frozen=True, slots=True)
class _Directive:
    """One ``%json``, ``%grammar`` or ``%regex`` of a grammar text, with its offsets."""

    kind: str
    start: int
    end: int
    value: Any
    value_at: int
    options: dict[str, Any] = field(default_factory=dict)
    options_at: int = 0


@dataclass(slots=True)
class _Specials:
    """The special tokens of a grammar text: their terminals and the names they use."""

    terminals: dict[str, Regex] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)


def _embed_directives(
    text: str, stack: tuple[Path, ...]
) -> tuple[str, dict[str, Grammar], dict[str, bool], _Specials]:
    """Return the text for lark's loader, the embedded grammars, lexing options and specials.

    A ``%lexer basic`` line asks for greedy lexing, ``%ignore_at_end false`` for no ignored
    lexeme after the last terminal (:class:`~constrain.ir.Grammar`'s ``greedy`` and
    ``ignore_at_end``, returned as keywords; each line becomes blanks). A ``%json`` or
    ``%grammar`` becomes a fresh terminal name, ``%declare``-d on a line added at the end,
    standing for the embedded grammar returned with it; a ``%regex`` becomes the Lark literal
    of its pattern. A replacement is padded to the directive's width and keeps
    its line breaks (ending each line but the last with a backslash, Lark's line
    continuation), so lark's lines and columns still point into ``text``. A special token
    (``<[id]>``, ``<|name|>``) in a rule becomes a fresh ``%declare``-d terminal name; a
    terminal defined as one special token (``END: <|im_end|>``) is ``%declare``-d in place.
    """
    base = stack[-1].parent if stack else None
    used = set(re.findall(r"\w+", text))
    pieces: list[str] = []
    parts: dict[str, Grammar] = {}
    options: dict[str, bool] = {}
    specials = _Specials()
    tokens: dict[str, str] = {}  # "<...>" -> its terminal
    copied = scan = 0
    while (m := _LEXEME_OR_DIRECTIVE.search(text, scan)) is not None:
        scan = m.end()
        if m[2] is not None:
            regex = special_terminal(m[2], specials.names, text, m.start())
            before = "".join(pieces) + text[copied : m.start()]
            defined = _special_definition(before, m, text)
            if defined is not None:  # NAME: <...>, the whole definition
                at, name = defined
                specials.terminals[name] = regex
                width = len(before) - at + len(m[0])
                pieces = [before[:at], f"%declare {name}".ljust(width)]
            else:
                name = tokens.get(m[0], "")
                if not name:
                    name = next(f"_S{k}" for k in itertools.count() if f"_S{k}" not in used)
                    used.add(name)
                    tokens[m[0]] = name
                    specials.terminals[name] = regex
                pieces = [before, name.ljust(len(m[0]))]
            copied = scan
            continue
        if m[1] is None:
            continue
        if m[1] in _OPTION_VALUES:
            mode = re.compile(r"[ \t]+(\w+)[ \t]*(?=\n|$)").match(text, m.end())
            values, field_name, expected = _OPTION_VALUES[m[1]]
            if mode is None or mode[1] not in values:
                raise error_at_offset(f"%{m[1]} takes one of: {expected}", text, m.start())
            options[field_name] = values[mode[1]]
            pieces += [text[copied : m.start()], " " * (mode.end() - m.start())]
            copied = scan = mode.end()
            continue
        directive = _read_directive(text, m)
        span = text[directive.start : directive.end]
        if directive.kind == "regex":
            replacement = _regex_literal(directive, text).ljust(len(span))
        else:
            _check_in_rule("".join(pieces) + text[copied : directive.start], directive, text)
            name = next(f"_E{k}" for k in itertools.count(len(parts)) if f"_E{k}" not in used)
            used.add(name)
            parts[name] = (
                _json_part(directive, text, base)
                if directive.kind == "json"
                else _grammar_part(directive, text, stack)
            )
            replacement = _lay_out(name, span)
        pieces += [text[copied : directive.start], replacement]
        copied = scan = directive.end
    pieces.append(text[copied:])
    declared = [*parts, *(t for t in specials.terminals if t in tokens.values())]
    if declared:
        pieces.append(f"\n%declare {' '.join(declared)}\n")
    return "".join(pieces), parts, options, specials


def _special_definition(before: str, m: re.Match[str], text: str) -> tuple[int, str] | None:
    """Return where ``NAME: <...>`` starts in ``before`` and NAME, if ``m`` is its whole body.

    Return None for a special token in a rule's body; refuse one anywhere else.
    """
    statement = next(reversed(list(_STATEMENT.finditer(before))), None)
    if statement is not None and statement[2] is not None:
        if not is_terminal_name(statement[2]):
            return None
        rest = re.match(r"[ \t]*(?://[^\n]*|#[^\n]*)?(?:\n|$)", text[m.end() :])
        following = re.match(r"\s*\|", text[m.end() :])
        if before[statement.end() :].strip() == "" and rest and not following:
            return statement.start(), statement[2]
        problem = (
            f"terminal {statement[2]} uses special token {m[0]} inside a longer definition; a "
            f"terminal can only be one special token ({statement[2]}: {m[0]}): use the token "
            "in a rule instead"
        )
    else:
        problem = f"special token {m[0]} can only be used in a rule's body or as a terminal"
    raise error_at_offset(problem, text, m.start())


def _lay_out(name: str, span: str) -> str:
    """Return ``name`` over the lines of ``span``: same widths, backslash-continued lines."""
    lines = span.split("\n")
    if len(lines) == 1:
        return name.ljust(len(span))
    first = f"{name} \\".ljust(len(lines[0]))
    middle = ["\\".ljust(len(line)) for line in lines[1:-1]]
    return "\n".join([first, *middle, " " * len(lines[-1])])


def _read_directive(text: str, m: re.Match[str]) -> _Directive:
    """Return the directive whose keyword ``m`` matched: its argument and options read."""
    kind = m[1]
    at = _skip(text, m.end())
    needs = f"%{kind} needs {_ARGUMENT[kind]} after it"
    value, end = _json_at(text, at, needs)
    if kind == "regex" and isinstance(value, dict):
        raise error_at_offset(
            "structured %regex {...} (llguidance's substring_*) is not supported; give a "
            'pattern string, %regex "..."',
            text,
            at,
        )
    if not isinstance(value, str) and not (kind == "json" and isinstance(value, (dict, bool))):
        raise error_at_offset(f"{needs}, got {json.dumps(value)[:40]}", text, at)
    after = _skip(text, end)
    if kind == "regex" or not text.startswith("{", after):
        return _Directive(kind, m.start(), end, value, at)
    options, end = _json_at(text, after, f"the options of %{kind} must be a JSON object")
    return _Directive(kind, m.start(), end, value, at, options, after)


def _skip(text: str, at: int, chars: str = " \t") -> int:
    """Return the offset of the first character from ``at`` on that is not in ``chars``."""
    while at < len(text) and text[at] in chars:
        at += 1
    return at


def _json_at(text: str, at: int, message: str) -> tuple[Any, int]:
    """Return the JSON value starting at ``at`` and where it ends."""
    try:
        value, end = _JSON.raw_decode(text, at)
    except json.JSONDecodeError as err:
        raise error_at_offset(f"{message}: {err.msg}", text, err.pos) from err
    return value, end


def _check_in_rule(before: str, directive: _Directive, text: str) -> None:
    """Refuse a ``%json`` or ``%grammar`` outside a rule (``before``: the text up to it)."""
    statement = next(reversed(list(_STATEMENT.finditer(before))), None)
    if statement is None or statement[1] is not None:
        where = "outside any rule" if statement is None else f"in a {statement[1]} statement"
        problem = f"%{directive.kind} can only be used in a rule's body, not {where}"
    elif is_terminal_name(statement[2]):
        problem = (
            f"%{directive.kind} embeds a context-free grammar, so it cannot be part of terminal "
            f"{statement[2]}; use it in a rule (a lowercase name)"
        )
    else:
        return
    raise error_at_offset(problem, text, directive.start)


def _file(directive: _Directive, text: str, base: Path | None) -> tuple[Path, str]:
    """Return the resolved path of a directive's file argument and the file's text."""
    path = Path(directive.value)
    if not path.is_absolute():
        if base is None:
            raise error_at_offset(
                f"%{directive.kind} {directive.value!r} is a relative path and this grammar "
                "text has no folder to resolve it from; load the grammar with "
                "Grammar.from_lark_file, or give an absolute path",
                text,
                directive.value_at,
            )
        path = base / path
    path = path.resolve()
    try:
        return path, path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise error_at_offset(
            f"%{directive.kind} cannot read {str(path)!r}: {err}", text, directive.value_at
        ) from err


def _json_part(directive: _Directive, text: str, base: Path | None) -> Grammar:
    """Return the grammar of a ``%json`` directive (Grammar.from_json_schema's)."""
    schema = directive.value
    if isinstance(schema, str):
        path, schema_text = _file(directive, text, base)
        try:
            schema = json.loads(schema_text)
        except json.JSONDecodeError as err:
            raise error_at_offset(
                f"%json file {str(path)!r} is not valid JSON: {err}", text, directive.value_at
            ) from err
    try:
        return Grammar.from_json_schema(schema, **directive.options)
    except GrammarError as err:
        at = directive.value_at
        if isinstance(err, JsonSchemaError) and isinstance(directive.value, dict):
            at = _pointer_offset(text, at, err.pointer)
        raise error_at_offset(f"%json schema: {err}", text, at) from err
    except (TypeError, ValueError) as err:
        raise error_at_offset(
            f"%json options: {err} (the options are Grammar.from_json_schema's keywords)",
            text,
            directive.options_at,
        ) from err


def _pointer_offset(text: str, at: int, pointer: str) -> int:
    """Return where the value at ``pointer`` starts in the JSON text at ``at`` (or its parent)."""
    for token in pointer.removeprefix("#").split("/")[1:]:
        found = _member_at(text, at, token.replace("~1", "/").replace("~0", "~"))
        if found is None:
            break
        at = found
    return at


def _member_at(text: str, at: int, key: str) -> int | None:
    """Return where member ``key`` (name or index) of the JSON container at ``at`` starts."""
    if text[at] not in "{[":
        return None
    is_object, i, index = text[at] == "{", at + 1, 0
    while True:
        i = _skip(text, i, _JSON_SPACE)
        if text[i] in "}]":
            return None
        name = str(index)
        if is_object:
            name, i = _JSON.raw_decode(text, i)
            i = _skip(text, text.index(":", i) + 1, _JSON_SPACE)
        if name == key:
            return i
        _value, i = _JSON.raw_decode(text, i)
        i = _skip(text, i, _JSON_SPACE + ",")
        index += 1


def _grammar_part(directive: _Directive, text: str, stack: tuple[Path, ...]) -> Grammar:
    """Return the grammar of a ``%grammar`` directive (the file's, parsed like this one)."""
    start = directive.options.get("start", "start")
    if set(directive.options) - {"start"} or not isinstance(start, str):
        raise error_at_offset(
            'the only option of %grammar is the start rule, {"start": "name"}',
            text,
            directive.options_at,
        )
    path, sub_text = _file(directive, text, stack[-1].parent if stack else None)
    if path in stack:
        chain = " -> ".join(p.name for p in (*stack, path))
        raise error_at_offset(
            f"%grammar {directive.value!r} embeds itself ({chain})", text, directive.value_at
        )
    try:
        return _parse(sub_text, start, str(path), [], (*stack, path))
    except LarkGrammarError as err:
        raise error_at_offset(
            f"%grammar {directive.value!r}: {err}", text, directive.value_at
        ) from err


def _regex_literal(directive: _Directive, text: str) -> str:
    """Return the Lark literal (``/.../`` or a string) of a ``%regex`` pattern."""
    try:
        regex = parse_regex(directive.value)
        literal = terminal_to_lark(regex)
    except GrammarError as err:
        raise error_at_offset(f"%regex: {err}", text, directive.value_at) from err
    if matches_empty(regex):
        raise error_at_offset(
            "%regex: the pattern matches the empty string; a token must have at least one "
            "character (make its use optional instead)",
            text,
            directive.value_at,
        )
    return literal
