r"""Stage 1: the EBNF front end, XGrammar's (and llama.cpp's GBNF) grammar syntax -> Grammar IR.

XGrammar's default grammar syntax, also the ``grammar`` format of its structural tags::

    root ::= "{" ws pair ("," ws pair)* "}"     # a rule begins its line: name ::= body
    pair ::= key ":" ws [0-9]+
    key  ::= "\"" [a-z_-]{1,16} "\""
    ws   ::= [ \t\n]*

Elements: strings (``"..."`` with the escapes ``\n \t \r \b \f \v \0 \\ \" \'``, ``\xHH``,
``\uHHHH``, ``\UHHHHHHHH``), character classes (``[a-z]``, ``[^"\\]``, the escapes above and
``\]``, ``\-``, ``\^`` and the other regex characters, ASCII ``\d \w \s`` and their negations),
rule references, groups ``( ... )`` (``()`` is the empty string), alternatives ``|`` and the
quantifiers ``* + ?``, ``{m}``, ``{m,}``, ``{m,n}``; comments start with ``#``. The macro
``Regex("...")`` is an ECMAScript regex (as a structural tag's ``regex`` format), and
``ExcludeToken(...)`` / ``Token(...)`` are one token but the given special tokens / one of them
(ids or strings, as the structural-tag formats ``exclude_token`` and ``token``). Refused with the
line and column: XGrammar's lookahead assertions ``(= ...)`` (they restrict where a rule may end
by what follows it, which a rule of a context-free grammar cannot say), its other macros
(``TagDispatch``, ``TokenTagDispatch``) and rule attributes (``name[max_tokens=N] ::=``).

The syntax is read by a Lark LALR parser (:data:`_SYNTAX`); its lexer callbacks decode strings
and character classes, and :class:`_Builder` turns the tree into IR. Regular parts (no rule
reference inside) become one terminal each; the rest becomes rules, so the language is the same
whatever the split (the lexer tries every split: ``docs/grammars.md``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from constrain.errors import GrammarError, RegexError
from constrain.frontends.special_sets import one_token
from constrain.ir import (
    ANY_CHAR,
    Alt,
    CharSet,
    Concat,
    Grammar,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
    special_placeholder,
    special_token,
)

__all__ = ["is_ebnf", "parse_ebnf"]

_SIMPLE = {"n": 10, "t": 9, "r": 13, "b": 8, "f": 12, "v": 11, "0": 0, "a": 7, "e": 27}
_HEX = {"x": 2, "u": 4, "U": 8}
_CLASS_ESCAPES = {
    "d": CharSet(((48, 57),)),
    "w": CharSet(((48, 57), (65, 90), (95, 95), (97, 122))),
    "s": CharSet(((9, 13), (32, 32))),
}
_MAX_EXPANSION = 10_000  # copies of a non-regular element a bounded repetition writes out
_EBNF_HEAD = re.compile(r"^[ \t]*[A-Za-z_.\-][\w.\-]*(?:\[[^\]\n]*\])?[ \t]*::=", re.M)

_WS = r"(?:[ \t\r\n]|#[^\n]*)*"  # what may separate two tokens
_NAME = r"[A-Za-z_.\-][A-Za-z0-9_.\-]*"
_CLASS = r"\[(?:[^\]\\\r\n]|\\[\s\S]?)*"  # up to its "]"; an unclosed one is its callback's error
_SYNTAX = rf"""
start: rule*
rule: RULE_NAME CLASS? "::=" choices
choices: sequence ("|" sequence)*
sequence: quantified*
?quantified: element
    | element OP -> repeat
    | element LBRACE INT [COMMA [INT]] RBRACE -> bounded
?element: STRING -> literal
    | CLASS -> char_class
    | "(" choices ")"
    | MACRO "(" (_arg ","?)* ")" -> macro
    | NAME -> ref
    | UNSUPPORTED  // its lexer callback raises
_arg: STRING | INT

RULE_NAME.3: /{_NAME}(?={_WS}(?:{_CLASS}\]{_WS})?::=)/
MACRO.2: /(?:Regex|Token|ExcludeToken)(?={_WS}\()/
UNSUPPORTED.1: /\(=|(?:Token)?TagDispatch(?![A-Za-z0-9_.\-])/
NAME: /{_NAME}/
STRING: /"(?:[^"\\\r\n]|\\[\s\S]?)*"?/
CLASS: /{_CLASS}\]?/
INT: /\d+/
OP: /[*+?]/
ASSIGN: "::="
LBRACE: "{{"
RBRACE: "}}"
COMMA: ","
%ignore /[ \t\r\n]+|#[^\n]*/
"""

Part = Regex | tuple[str, ...]
"""A parsed element: a regex while it is regular, else a sequence of grammar symbols."""


def _error(message: str, line: int, column: int) -> GrammarError:
    return GrammarError(f"invalid EBNF grammar: {message}", f"line {line}, column {column}")


def _at(message: str, tok: Token, offset: int = 0) -> GrammarError:
    return _error(message, tok.line or 0, (tok.column or 0) + offset)


def _escape(tok: Token, i: int, extra: str = "") -> tuple[int, int]:
    """Read the escape at ``tok[i]`` (a backslash); return its code point and the index after."""
    c = tok[i + 1 : i + 2]
    if not c:
        raise _at("the text ends inside an escape", tok, i)
    if c in _SIMPLE:
        return _SIMPLE[c], i + 2
    if c in "\\\"'" + extra:
        return ord(c), i + 2
    if c in _HEX:
        digits = tok[i + 2 : i + 2 + _HEX[c]]
        if len(digits) != _HEX[c] or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise _at(f"\\{c} takes {_HEX[c]} hex digits", tok, i)
        return int(digits, 16), i + 2 + _HEX[c]
    raise _at(f"unknown escape \\{c}", tok, i)


def _string(tok: Token) -> Token:
    """Lexer callback: a string token's value becomes its text, escapes decoded."""
    out: list[str] = []
    i = 1
    while i < len(tok) and tok[i] != '"':
        code, i = _escape(tok, i) if tok[i] == "\\" else (ord(tok[i]), i + 1)
        out.append(chr(code))
    if i == len(tok):
        raise _at('a string ends at its line: close it with "', tok, i)
    return tok.update(value="".join(out))


def _class_item(tok: Token, i: int) -> tuple[int | CharSet, int]:
    """Read one item of a character class at ``tok[i]``: a code point or a class escape."""
    if tok[i] == "\\" and tok[i + 1 : i + 2].lower() in _CLASS_ESCAPES:
        cs = _CLASS_ESCAPES[tok[i + 1].lower()]
        return cs.negate() if tok[i + 1].isupper() else cs, i + 2
    if tok[i] == "\\":
        return _escape(tok, i, "^$.*+?()[]{}|/-")
    return ord(tok[i]), i + 1


def _char_class(tok: Token) -> Token:
    """Lexer callback: a class token's value becomes its CharSet (``-`` off a range is itself)."""
    negate = tok[1:2] == "^"
    i = 2 if negate else 1
    out, ranges, reversed_range = CharSet(()), [], False
    while i < len(tok) and tok[i] != "]":
        lo, i = _class_item(tok, i)
        if isinstance(lo, int) and tok[i : i + 1] == "-" and tok[i + 1 : i + 2] not in ("]", ""):
            hi, i = _class_item(tok, i + 1)
            if isinstance(hi, CharSet) or hi < lo:
                reversed_range = True  # said after the escapes and the end are checked
            else:
                ranges.append((lo, hi))
        elif isinstance(lo, CharSet):
            out = out.union(lo)
        else:
            ranges.append((lo, lo))
    if i == len(tok):
        raise _at("a character class ends at its line: close it with ]", tok)
    if reversed_range:
        raise _at("a range's bounds are out of order", tok)
    out = out.union(CharSet.of(ranges)) if ranges else out
    return tok.update(value=(out.negate() if negate else out).intersect(ANY_CHAR))


def _unsupported(tok: Token) -> Token:
    if tok == "(=":
        raise _at(
            "lookahead assertions (= ...) are not supported: they restrict where a rule "
            "may end by the text after it; write the rule so that it needs none",
            tok,
        )
    raise _at(f"the macro {tok}(...) is not supported", tok)


@cache
def _parser() -> Lark:
    callbacks = {"STRING": _string, "CLASS": _char_class, "UNSUPPORTED": _unsupported}
    return Lark(_SYNTAX, parser="lalr", lexer="basic", lexer_callbacks=callbacks)


def _syntax_error(err: UnexpectedInput, text: str) -> GrammarError:
    """Return the GrammarError of a Lark parse error, in the words of the EBNF syntax."""
    if isinstance(err, UnexpectedCharacters):
        return _error(f"unexpected character {err.char!r}", err.line, err.column)
    tok = err.token if isinstance(err, UnexpectedToken) else Token("$END", "")
    expected = err.expected if isinstance(err, UnexpectedToken) else set()
    if tok.type == "$END":  # at the end of the text
        line, column = text.count("\n") + 1, len(text) - text.rfind("\n")
    else:
        line, column = tok.line or 0, tok.column or 0
    if tok.type == "ASSIGN":
        message = "::= must follow a rule name"
    elif {"INT", "STRING"} <= expected:
        message = "a macro argument is a string or a token id"
    elif "INT" in expected:
        message = "expected a number"
    elif "RBRACE" in expected:
        message = "expected } after the repetition bounds"
    elif "RPAR" in expected and tok.type in ("$END", "RULE_NAME"):
        message = "expected ) to close the group"
    elif "STRING" in expected and tok.type != "RPAR":
        message = f"expected an element, got {int(tok) if tok.type == 'INT' else str(tok)!r}"
    else:
        message = "expected a rule, name ::= body"
    return _error(message, line, column)


class _Builder(Transformer[Token, Part]):
    """Builds the IR of a parse tree, rule body by rule body (:meth:`grammar`)."""

    def __init__(self, text: str, root: str) -> None:
        super().__init__()
        self.text, self.root = text, root
        self.terminals: dict[Regex, str] = {}
        self.extra: list[Terminal] = []
        self.rules: dict[str, list[tuple[str, ...]]] = {}
        self.names: dict[str, str] = {}  # EBNF rule name -> IR rule name
        self.special_names: list[str] = []
        self.aligned: list[tuple[str, str]] = []
        self.fresh_count = 0

    def grammar(self, tree: Tree[Token]) -> Grammar:
        """Return the grammar of the parse tree of a whole text."""
        rules: list[Tree[Token]] = tree.children  # type: ignore[assignment]
        for rule in rules:
            head, *attributes, _ = rule.children
            assert isinstance(head, Token)
            if attributes:
                assert isinstance(attributes[0], Token)
                raise _at(
                    "rule attributes (name[max_tokens=N] ::=) are not supported; give the "
                    "grammar in Lark syntax, where name[max_tokens=N]: is read",
                    attributes[0],
                )
            line_start = self.text.rfind("\n", 0, head.start_pos or 0) + 1
            if self.text[line_start : head.start_pos].strip():
                raise _at("a rule name begins its line", head)
            if head in self.names:
                raise _at(f"rule {str(head)!r} is defined twice", head)
            self.rule_name(str(head))
        if self.root not in self.names:
            raise GrammarError(f"invalid EBNF grammar: the root rule {self.root!r} is not defined")
        for rule in rules:
            try:
                body = self.transform(rule.children[-1])  # type: ignore[arg-type]
            except VisitError as err:  # a GrammarError of a callback below
                raise err.orig_exc from None
            self.rules[self.names[str(rule.children[0])]] = [self.symbols(body)]
        terminals = tuple(Terminal(n, r) for r, n in self.terminals.items())
        return Grammar(
            rules=tuple(Rule(name, tuple(alts)) for name, alts in self.rules.items()),
            terminals=terminals + tuple(self.extra),
            start=self.names[self.root],
            special_names=tuple(self.special_names),
            token_aligned=tuple(self.aligned),
        )

    # -- names -------------------------------------------------------------------------------

    def rule_name(self, name: str) -> str:
        if name not in self.names:
            base = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "rule"
            base = base if base[0].isalpha() and not base.startswith("ebnf_") else f"r_{base}"
            taken = set(self.names.values())
            ir, k = base, 2
            while ir in taken:  # "ebnf_N" are the fresh rules
                ir, k = f"{base}_{k}", k + 1
            self.names[name] = ir
        return self.names[name]

    def fresh(self) -> str:
        self.fresh_count += 1
        return f"ebnf_{self.fresh_count}"

    def term(self, regex: Regex) -> str:
        name = self.terminals.get(regex)
        if name is None:
            name = self.terminals[regex] = f"T{len(self.terminals)}"
        return name

    def symbols(self, part: Part) -> tuple[str, ...]:
        return part if isinstance(part, tuple) else (self.term(part),)

    # -- the tree's rules (Transformer callbacks) --------------------------------------------

    def choices(self, alts: list[Part]) -> Part:
        if len(alts) == 1:
            return alts[0]
        if all(not isinstance(a, tuple) for a in alts):
            return Alt(tuple(alts))  # type: ignore[arg-type]
        name = self.fresh()
        self.rules[name] = [self.symbols(a) for a in alts]
        return (name,)

    def sequence(self, parts: list[Part]) -> Part:
        if not parts:
            return Literal("")
        if all(not isinstance(p, tuple) for p in parts):
            return parts[0] if len(parts) == 1 else Concat(tuple(parts))  # type: ignore[arg-type]
        out: list[str] = []
        run: list[Regex] = []
        for p in [*parts, ()]:
            if isinstance(p, tuple):
                if run:
                    out.append(self.term(run[0] if len(run) == 1 else Concat(tuple(run))))
                    run = []
                out.extend(p)
            else:
                run.append(p)
        return tuple(out)

    def repeat(self, children: list[Any]) -> Part:
        part, op = children
        low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[str(op)]
        return self.repeated(part, low, high, op)

    def bounded(self, children: list[Any]) -> Part:
        part, brace, low, comma, high, close = children
        low = int(low)
        high = low if comma is None else None if high is None else int(high)
        if high is not None and high < low:
            raise _at(f"{{{low},{high}}}: the upper bound is below the lower", close)
        return self.repeated(part, low, high, brace)

    def repeated(self, part: Part, low: int, high: int | None, tok: Token) -> Part:
        if not isinstance(part, tuple):
            return Repeat(part, low, high)
        if max(low, high or 0) > _MAX_EXPANSION:
            raise _at(
                f"a repetition of a part with rule references is written out; at most "
                f"{_MAX_EXPANSION} copies",
                tok,
            )
        tail: tuple[str, ...]
        if high is None:
            star = self.fresh()
            self.rules[star] = [(), (*part, star)]
            tail = (star,)
        else:
            tail = ()
            for _ in range(high - low):
                name = self.fresh()
                self.rules[name] = [(), (*part, *tail)]
                tail = (name,)
        return (*(part * low), *tail)

    def literal(self, children: list[Token]) -> Part:
        return Literal(children[0].value)

    def char_class(self, children: list[Token]) -> Part:
        value: CharSet = children[0].value
        return value

    def ref(self, children: list[Token]) -> Part:
        (tok,) = children
        if tok not in self.names:
            raise _at(f"rule {str(tok)!r} is not defined", tok)
        return (self.names[tok],)

    # -- macros ------------------------------------------------------------------------------

    def macro(self, children: list[Token]) -> Part:
        tok, *args = children
        if tok == "Regex":
            from constrain.frontends.regex import parse_regex

            if len(args) != 1 or args[0].type != "STRING":
                raise _at('Regex takes one string: Regex("[a-z]+")', tok)
            try:
                return parse_regex(args[0].value, flavor="ecmascript")
            except RegexError as err:
                raise _at(f"invalid regex: {err}", args[0]) from err
        ids, names = [], []
        for arg in args:
            if arg.type == "INT":
                ids.append(int(arg))
            else:
                if arg.value not in self.special_names:
                    self.special_names.append(arg.value)
                names.append(self.special_names.index(arg.value))
        if tok == "Token":
            if not ids and not names:
                raise _at("Token takes one or more special tokens, by id or by string", tok)
            try:
                sets = [special_token(t) for t in ids] + [special_placeholder(k) for k in names]
            except ValueError as err:  # an id out of range
                raise _at(str(err), tok) from err
            out = sets[0]
            for cs in sets[1:]:
                out = out.union(cs)
            return (self.term(out),)
        if any(not 0 <= t < 2**18 for t in ids):  # ExcludeToken
            raise _at("a token id is in [0, 2**18)", tok)
        name = f"X{len(self.aligned)}"
        self.extra.append(Terminal(name, one_token(ids, names)))
        self.aligned.append((name, "token"))
        return (name,)


def is_ebnf(text: str) -> bool:
    """Return whether grammar text is EBNF rather than Lark: a line begins with ``name ::=``."""
    return _EBNF_HEAD.search(text) is not None


def parse_ebnf(text: str, root: str = "root") -> Grammar:
    """Return the grammar of an EBNF text (XGrammar's syntax), not normalised.

    Parameters
    ----------
    text : str
        The grammar.
    root : str, optional
        The rule the language starts from (XGrammar's default, ``"root"``).

    Returns
    -------
    Grammar
        Its rules, terminals and special-token names; the start rule is ``root``'s.

    Raises
    ------
    GrammarError
        With ``location`` ``"line L, column C"``: a syntax error, an undefined or twice-defined
        rule, or an unsupported construct (see the module docstring).
    """
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text) from None
    return _Builder(text, root).grammar(tree)
