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

Regular parts (no rule reference inside) become one terminal each; the rest becomes rules, so the
language is the same whatever the split (the lexer tries every split: ``docs/grammars.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from constrain.errors import GrammarError, RegexError
from constrain.frontends.special_sets import open_special_set
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

_NAME = re.compile(r"[A-Za-z_.\-][A-Za-z0-9_.\-]*")
_SIMPLE = {"n": 10, "t": 9, "r": 13, "b": 8, "f": 12, "v": 11, "0": 0, "a": 7, "e": 27}
_HEX = {"x": 2, "u": 4, "U": 8}
_CLASS_ESCAPES = {
    "d": CharSet(((48, 57),)),
    "w": CharSet(((48, 57), (65, 90), (95, 95), (97, 122))),
    "s": CharSet(((9, 13), (32, 32))),
}
_MAX_EXPANSION = 10_000  # copies of a non-regular element a bounded repetition writes out
_RULE_MACROS = ("TagDispatch", "TokenTagDispatch")
_EBNF_HEAD = re.compile(r"^[ \t]*[A-Za-z_.\-][\w.\-]*(?:\[[^\]\n]*\])?[ \t]*::=", re.M)

Part = Regex | tuple[str, ...]
"""A parsed element: a regex while it is regular, else a sequence of grammar symbols."""


@dataclass
class _Tok:
    kind: str  # name, assign, string, class, int, punct, eof
    value: Any
    line: int
    col: int
    first: bool  # the first token of its line


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line, self.col = text, 0, 1, 1
        self.last_line = 0

    def fail(self, message: str, line: int | None = None, col: int | None = None) -> GrammarError:
        where = f"line {line or self.line}, column {col or self.col}"
        return GrammarError(f"invalid EBNF grammar: {message}", where)

    def advance(self, n: int = 1) -> None:
        for c in self.text[self.pos : self.pos + n]:
            self.line, self.col = (self.line + 1, 1) if c == "\n" else (self.line, self.col + 1)
        self.pos += n

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        text = self.text
        while True:
            while self.pos < len(text) and text[self.pos] in " \t\r\n#":
                if text[self.pos] == "#":
                    while self.pos < len(text) and text[self.pos] != "\n":
                        self.advance()
                else:
                    self.advance()
            line, col = self.line, self.col
            first = line != self.last_line
            self.last_line = line
            if self.pos >= len(text):
                out.append(_Tok("eof", None, line, col, first))
                return out
            c = text[self.pos]
            if text.startswith("::=", self.pos):
                self.advance(3)
                out.append(_Tok("assign", "::=", line, col, first))
            elif c == '"':
                out.append(_Tok("string", self._string(), line, col, first))
            elif c == "[":
                out.append(_Tok("class", self._char_class(), line, col, first))
            elif c.isdigit():
                m = re.compile(r"\d+").match(text, self.pos)
                assert m is not None
                self.advance(len(m[0]))
                out.append(_Tok("int", int(m[0]), line, col, first))
            elif (m := _NAME.match(text, self.pos)) is not None:
                self.advance(len(m[0]))
                out.append(_Tok("name", m[0], line, col, first))
            elif text.startswith("(=", self.pos):
                raise self.fail(
                    "lookahead assertions (= ...) are not supported: they restrict where a rule "
                    "may end by the text after it; write the rule so that it needs none"
                )
            elif c in "()|*+?{},":
                self.advance()
                out.append(_Tok("punct", c, line, col, first))
            else:
                raise self.fail(f"unexpected character {c!r}")

    def _escape(self, extra: str = "") -> int:
        """Read one escape after a backslash; return its code point."""
        text = self.text
        if self.pos + 1 >= len(text):
            raise self.fail("the text ends inside an escape")
        c = text[self.pos + 1]
        if c in _SIMPLE:
            self.advance(2)
            return _SIMPLE[c]
        if c in "\\\"'" + extra:
            self.advance(2)
            return ord(c)
        if c in _HEX:
            digits = text[self.pos + 2 : self.pos + 2 + _HEX[c]]
            if len(digits) != _HEX[c] or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"\\{c} takes {_HEX[c]} hex digits")
            self.advance(2 + _HEX[c])
            return int(digits, 16)
        raise self.fail(f"unknown escape \\{c}")

    def _string(self) -> str:
        self.advance()  # the opening quote
        out: list[str] = []
        text = self.text
        while True:
            if self.pos >= len(text) or text[self.pos] in "\r\n":
                raise self.fail('a string ends at its line: close it with "')
            c = text[self.pos]
            if c == '"':
                self.advance()
                return "".join(out)
            if c == "\\":
                out.append(chr(self._escape()))
            else:
                out.append(c)
                self.advance()

    def _char_class(self) -> CharSet:
        line, col = self.line, self.col
        self.advance()  # [
        text = self.text
        negate = self.pos < len(text) and text[self.pos] == "^"
        if negate:
            self.advance()
        items: list[int | CharSet] = []  # code points, "-" as -1, and class escapes
        while True:
            if self.pos >= len(text) or text[self.pos] in "\r\n":
                raise self.fail("a character class ends at its line: close it with ]", line, col)
            c = text[self.pos]
            if c == "]":
                self.advance()
                break
            if c == "-":
                items.append(-1)
                self.advance()
            elif c == "\\" and text[self.pos + 1 : self.pos + 2].lower() in _CLASS_ESCAPES:
                cs = _CLASS_ESCAPES[text[self.pos + 1].lower()]
                items.append(cs.negate() if text[self.pos + 1].isupper() else cs)
                self.advance(2)
            elif c == "\\":
                items.append(self._escape("^$.*+?()[]{}|/-"))
            else:
                items.append(ord(c))
                self.advance()
        ranges: list[tuple[int, int]] = []
        out = CharSet(())
        i = 0
        while i < len(items):
            item = items[i]
            lo = ord("-") if item == -1 else item
            hi_item = items[i + 2] if i + 2 < len(items) else None
            if (
                isinstance(lo, int)
                and i + 1 < len(items)
                and items[i + 1] == -1
                and hi_item is not None
            ):
                hi = ord("-") if hi_item == -1 else hi_item
                if not isinstance(hi, int) or hi < lo:
                    raise self.fail("a range's bounds are out of order", line, col)
                ranges.append((lo, hi))
                i += 3
            elif isinstance(lo, CharSet):
                out = out.union(lo)
                i += 1
            else:
                ranges.append((lo, lo))
                i += 1
        out = out.union(CharSet.of(ranges)) if ranges else out
        return out.negate() if negate else out


class _Parser:
    def __init__(self, text: str, root: str) -> None:
        self.lexer = _Lexer(text)
        self.toks = self.lexer.tokens()
        self.i = 0
        self.root = root
        self.terminals: dict[Regex, str] = {}
        self.extra: list[Terminal] = []
        self.rules: dict[str, list[tuple[str, ...]]] = {}
        self.names: dict[str, str] = {}  # EBNF rule name -> IR rule name
        self.special_names: list[str] = []
        self.aligned: list[tuple[str, str]] = []
        self.fresh_count = 0
        self.defined: dict[str, _Tok] = {}

    # -- tokens ------------------------------------------------------------------------------

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def fail(self, message: str, tok: _Tok | None = None) -> GrammarError:
        tok = tok or self.peek()
        return self.lexer.fail(message, tok.line, tok.col)

    def expect(self, kind: str, value: object, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != kind or tok.value != value:
            raise self.fail(f"expected {what}")
        self.i += 1
        return tok

    def at_rule_start(self) -> bool:
        tok, nxt = self.peek(), self.peek(1)
        attributes = nxt.kind == "class" and self.peek(2).kind == "assign"
        return tok.first and tok.kind == "name" and (nxt.kind == "assign" or attributes)

    # -- names -------------------------------------------------------------------------------

    def rule_name(self, name: str) -> str:
        if name not in self.names:
            base = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "rule"
            base = base if base[0].isalpha() else f"r_{base}"
            taken = set(self.names.values())
            ir, k = base, 2
            while ir in taken or ir.startswith("ebnf_"):
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

    # -- grammar -----------------------------------------------------------------------------

    def parse(self) -> Grammar:
        defined = self.defined
        for k, tok in enumerate(self.toks):
            if tok.kind == "assign":
                head = self.toks[k - 1] if k else None
                if head is not None and head.kind == "class" and self.toks[k - 2].kind == "name":
                    raise self.fail(
                        "rule attributes (name[max_tokens=N] ::=) are not supported; give the "
                        "grammar in Lark syntax, where name[max_tokens=N]: is read",
                        head,
                    )
                if head is None or head.kind != "name":
                    raise self.fail("::= must follow a rule name", tok)
                if not head.first:
                    raise self.fail("a rule name begins its line", head)
                if head.value in defined:
                    raise self.fail(f"rule {head.value!r} is defined twice", head)
                defined[str(head.value)] = head
                self.rule_name(str(head.value))
        if self.root not in defined:
            raise GrammarError(f"invalid EBNF grammar: the root rule {self.root!r} is not defined")
        while self.peek().kind != "eof":
            tok = self.peek()
            if tok.kind != "name" or self.peek(1).kind != "assign":
                raise self.fail("expected a rule, name ::= body")
            self.i += 2
            self.rules[self.names[str(tok.value)]] = [self.symbols(self.choices())]
        terminals = tuple(Terminal(n, r) for r, n in self.terminals.items())
        return Grammar(
            rules=tuple(Rule(name, tuple(alts)) for name, alts in self.rules.items()),
            terminals=terminals + tuple(self.extra),
            start=self.names[self.root],
            special_names=tuple(self.special_names),
            token_aligned=tuple(self.aligned),
        )

    def choices(self) -> Part:
        alts = [self.sequence()]
        while self.peek().kind == "punct" and self.peek().value == "|":
            self.i += 1
            alts.append(self.sequence())
        if len(alts) == 1:
            return alts[0]
        if all(not isinstance(a, tuple) for a in alts):
            return Alt(tuple(alts))  # type: ignore[arg-type]
        name = self.fresh()
        self.rules[name] = [self.symbols(a) for a in alts]
        return (name,)

    def sequence(self) -> Part:
        parts: list[Part] = []
        while True:
            tok = self.peek()
            if tok.kind == "eof" or (tok.kind == "punct" and tok.value in "|)"):
                break
            if self.at_rule_start():
                break
            parts.append(self.quantified())
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

    def quantified(self) -> Part:
        part = self.element()
        tok = self.peek()
        if tok.kind != "punct" or tok.value not in "*+?{":
            return part
        self.i += 1
        if tok.value == "{":
            low = self.integer()
            high: int | None = low
            if self.peek().kind == "punct" and self.peek().value == ",":
                self.i += 1
                high = None if self.peek().value == "}" else self.integer()
                if high is not None and high < low:
                    raise self.fail(f"{{{low},{high}}}: the upper bound is below the lower")
            self.expect("punct", "}", "} after the repetition bounds")
        else:
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[str(tok.value)]
        if not isinstance(part, tuple):
            return Repeat(part, low, high)
        return self.repeat_rules(part, low, high, tok)

    def repeat_rules(self, body: tuple[str, ...], low: int, high: int | None, tok: _Tok) -> Part:
        if max(low, high or 0) > _MAX_EXPANSION:
            raise self.fail(
                f"a repetition of a part with rule references is written out; at most "
                f"{_MAX_EXPANSION} copies",
                tok,
            )
        tail: tuple[str, ...]
        if high is None:
            star = self.fresh()
            self.rules[star] = [(), (*body, star)]
            tail = (star,)
        else:
            tail = ()
            for _ in range(high - low):
                name = self.fresh()
                self.rules[name] = [(), (*body, *tail)]
                tail = (name,)
        return (*(body * low), *tail)

    def integer(self) -> int:
        tok = self.peek()
        if tok.kind != "int":
            raise self.fail("expected a number")
        self.i += 1
        return int(tok.value)

    def element(self) -> Part:
        tok = self.peek()
        self.i += 1
        if tok.kind == "string":
            return Literal(str(tok.value))
        if tok.kind == "class":
            assert isinstance(tok.value, CharSet)
            return tok.value.intersect(ANY_CHAR)
        if tok.kind == "punct" and tok.value == "(":
            if self.peek().kind == "punct" and self.peek().value == ")":
                self.i += 1
                return Literal("")
            inner = self.choices()
            self.expect("punct", ")", ") to close the group")
            return inner
        if tok.kind == "name":
            name = str(tok.value)
            macro = _MACROS.get(name)
            if macro is not None and self.peek().value == "(":
                return macro(self, tok)
            if name in _RULE_MACROS:
                raise self.fail(f"the macro {name}(...) is not supported", tok)
            if name not in self.defined:
                raise self.fail(f"rule {name!r} is not defined", tok)
            return (self.names[name],)
        raise self.fail(f"expected an element, got {tok.value!r}", tok)

    # -- macros ------------------------------------------------------------------------------

    def arguments(self) -> list[_Tok]:
        self.expect("punct", "(", "( after the macro's name")
        args: list[_Tok] = []
        while not (self.peek().kind == "punct" and self.peek().value == ")"):
            tok = self.peek()
            if tok.kind not in ("string", "int"):
                raise self.fail("a macro argument is a string or a token id", tok)
            args.append(tok)
            self.i += 1
            if self.peek().kind == "punct" and self.peek().value == ",":
                self.i += 1
        self.i += 1
        return args

    def regex_macro(self, tok: _Tok) -> Part:
        from constrain.frontends.regex import parse_regex

        args = self.arguments()
        if len(args) != 1 or args[0].kind != "string":
            raise self.fail('Regex takes one string: Regex("[a-z]+")', tok)
        try:
            return parse_regex(str(args[0].value), flavor="ecmascript")
        except RegexError as err:
            raise self.fail(f"invalid regex: {err}", args[0]) from err

    def token_refs(self, args: list[_Tok]) -> tuple[list[int], list[int]]:
        ids, names = [], []
        for arg in args:
            if arg.kind == "int":
                ids.append(int(arg.value))
            else:
                if arg.value not in self.special_names:
                    self.special_names.append(str(arg.value))
                names.append(self.special_names.index(str(arg.value)))
        return ids, names

    def token_macro(self, tok: _Tok) -> Part:
        ids, names = self.token_refs(self.arguments())
        if not ids and not names:
            raise self.fail("Token takes one or more special tokens, by id or by string", tok)
        try:
            sets = [special_token(t) for t in ids] + [special_placeholder(k) for k in names]
        except ValueError as err:  # an id out of range
            raise self.fail(str(err), tok) from err
        out = sets[0]
        for cs in sets[1:]:
            out = out.union(cs)
        return (self.term(out),)

    def exclude_token_macro(self, tok: _Tok) -> Part:
        ids, names = self.token_refs(self.arguments())
        if any(not 0 <= t < 2**18 for t in ids):
            raise self.fail("a token id is in [0, 2**18)", tok)
        name = f"X{len(self.aligned)}"
        self.extra.append(Terminal(name, Repeat(ANY_CHAR.union(open_special_set(ids, names)), 1)))
        self.aligned.append((name, "token"))
        return (name,)


_MACROS: dict[str, Callable[[_Parser, _Tok], Part]] = {
    "Regex": _Parser.regex_macro,
    "Token": _Parser.token_macro,
    "ExcludeToken": _Parser.exclude_token_macro,
}


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
    return _Parser(text, root).parse()
