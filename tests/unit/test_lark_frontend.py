"""The Lark front end (constrain/frontends/lark.py) and the IR -> Lark printer round trip.

Languages are compared three ways: a naive matcher over the regex IR (``ir_match`` below),
Python's ``re`` on the pattern Lark compiled, and Lark's own Earley parser (``lexer="dynamic"``)
on the original grammar versus the text ``Grammar.to_lark()`` prints.
"""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import lark
import pytest
import reference

from constrain.errors import GrammarError, LarkGrammarError
from constrain.frontends.lark import parse_lark, parse_lark_file
from constrain.ir import (
    EMPTY,
    NOTHING,
    Alt,
    CharSet,
    Concat,
    Grammar,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
    ignorecase_charset,
    regex_to_pattern,
)

# -- helpers -----------------------------------------------------------------------------------


def _ends(node: Regex, s: str, i: int) -> set[int]:
    """Positions where a match of ``node`` starting at ``i`` can end (naive set simulation)."""
    if isinstance(node, CharSet):
        return {i + 1} if i < len(s) and ord(s[i]) in node else set()
    if isinstance(node, Literal):
        return {i + len(node.text)} if s.startswith(node.text, i) else set()
    if isinstance(node, Concat):
        pos = {i}
        for item in node.items:
            pos = {e for p in pos for e in _ends(item, s, p)}
        return pos
    if isinstance(node, Alt):
        return {e for item in node.items for e in _ends(item, s, i)}
    reached = {i} if node.min == 0 else set()
    frontier, k = {i}, 0
    while frontier and (node.max is None or k < node.max) and k <= len(s) + node.min + 1:
        k += 1
        frontier = {e for p in frontier for e in _ends(node.item, s, p)}
        if k >= node.min:
            if frontier <= reached and k > node.min:
                break
            reached |= frontier
    return reached


def ir_match(node: Regex, s: str) -> bool:
    return len(s) in _ends(node, s, 0)


def lark_accepts(grammar_text: str, s: str, start: str = "start") -> bool:
    parser = lark.Lark(grammar_text, parser="earley", lexer="dynamic", start=start)
    try:
        parser.parse(s)
    except lark.exceptions.LarkError:
        return False
    return True


def lark_terminal_regexp(grammar_text: str, name: str) -> str:
    parser = lark.Lark(grammar_text, parser="earley", lexer="dynamic")
    return next(t.pattern.to_regexp() for t in parser.terminals if t.name == name)


def assert_round_trip(text: str, positive: list[str], negative: list[str]) -> Grammar:
    """Check idempotence of parse∘print and that Lark sees the same language before/after."""
    grammar = parse_lark(text)
    printed = grammar.to_lark()
    again = parse_lark(printed)
    assert again.to_lark() == printed, printed
    assert parse_lark(again.to_lark()) == again
    for s in positive:
        assert lark_accepts(text, s) and lark_accepts(printed, s), (s, printed)
    for s in negative:
        assert not lark_accepts(text, s) and not lark_accepts(printed, s), (s, printed)
    return grammar


# -- rules, templates, EBNF --------------------------------------------------------------------


def test_rules_keep_lark_names_and_ebnf_is_lowered() -> None:
    g = parse_lark('start: item+ tail?\nitem: "x" | "y" -> why\ntail: "!"\n')
    rules = g.rule_map()
    assert rules["item"].alternatives == (("X",), ("Y",))
    generated = [name for name in rules if name.startswith("__start_plus")]
    assert len(generated) == 1
    assert set(rules["start"].alternatives) == {(generated[0], "tail"), (generated[0],)}
    assert g.terminal_map()["BANG"].regex == Literal("!")
    assert g.start == "start" and g.ignore == ()


def test_templates_are_expanded() -> None:
    text = 'start: _sep{item, ","}\n_sep{x, sep}: x (sep x)*\nitem: "a" | "b"\n'
    g = assert_round_trip(text, ["a", "a,b,a"], ["", "a,", ",a", "ab"])
    assert "_sep{item,COMMA}" in g.rule_map()


def test_inline_rules_aliases_and_priorities_do_not_change_the_language() -> None:
    text = (
        '?start: sum\n?sum: atom | sum "+" atom -> add\n!atom.2: NUMBER | "(" sum ")"\n'
        "NUMBER.3: /[0-9]+/\n"
    )
    assert_round_trip(text, ["1", "1+2", "(1+2)+3"], ["", "+", "1+", "(1"])


def test_start_rule_can_be_chosen() -> None:
    g = parse_lark('a: "x" b\nb: "y"\n', start="b")
    assert g.start == "b" and [r.name for r in g.rules] == ["b"]


# -- terminals: %import common, ESCAPED_STRING, %ignore, flags ----------------------------------

COMMON = "%import common (NUMBER, SIGNED_NUMBER, WS, CNAME, INT, ESCAPED_STRING)\n"


@pytest.mark.parametrize(
    ("name", "strings"),
    [
        ("NUMBER", ["0", "12", "1.5", "1.", ".5", "1e5", "1E+5", "1.5e-3", ".", "e5", "1e", "-1"]),
        ("SIGNED_NUMBER", ["-1", "+1.5", "--1", "+", "-.5e2"]),
        ("WS", [" ", "\t\n", "\r\n \f", "", "\v", "\u00a0"]),
        ("CNAME", ["a", "_", "a1_b", "1a", "a-b", "é"]),
        ("INT", ["0", "007", "", "1.0"]),
    ],
)
def test_common_terminals_match_lark(name: str, strings: list[str]) -> None:
    text = COMMON + f"start: {name}\n"
    term = parse_lark(text).terminal_map()[name]
    pattern = lark_terminal_regexp(text, name)
    for s in strings:
        assert ir_match(term.regex, s) == bool(re.fullmatch(pattern, s)), (name, s)


ESC_INNER_LARK = r".*?(?<!\\)(\\\\)*?"


def lark_string_token(pattern: str, s: str) -> bool:
    """Whether Lark's dynamic lexer can return ``s`` as one token (re.match, shortest match)."""
    m = re.match(pattern, s)
    return m is not None and m.end() == len(s)


def test_escaped_string_replacement_has_lark_language_exhaustively() -> None:
    term = parse_lark(COMMON + "start: ESCAPED_STRING\n").terminal_map()["ESCAPED_STRING"]
    lark_pattern = lark_terminal_regexp(COMMON + "start: ESCAPED_STRING\n", "ESCAPED_STRING")
    assert "(?<!" in lark_pattern  # what we replace
    assert not re.search(r"\(\?<?[=!]", regex_to_pattern(term.regex))
    count = 0
    for n in range(8):
        for chars in itertools.product('"\\a\n', repeat=n):
            s = "".join(chars)
            assert ir_match(term.regex, s) == lark_string_token(lark_pattern, s), repr(s)
            count += 1
    assert count > 20000


TRICKY_STRINGS = [
    ('""', True),
    ('"abc"', True),
    ('"a\\"b"', True),
    ('"\\\\"', True),
    ('"\\\\\\""', True),
    ('"\\q"', True),
    ('"é ☃ 😀"', True),
    ('"\\"', False),
    ('"\\\\"x"', False),
    ('"a\nb"', False),
    ('"a\\\nb"', False),
    ('"abc', False),
    ('"a"b"', False),
]


@pytest.mark.parametrize(("s", "ok"), TRICKY_STRINGS)
def test_escaped_string_agrees_with_lark_earley(s: str, ok: bool) -> None:
    text = COMMON + "start: ESCAPED_STRING\n"
    g = parse_lark(text)
    assert ir_match(g.terminal_map()["ESCAPED_STRING"].regex, s) is ok
    assert lark_accepts(text, s) is ok
    assert lark_accepts(g.to_lark(), s) is ok


@pytest.mark.parametrize(
    ("definition", "positive", "negative"),
    [
        ('S: "\'" _STRING_ESC_INNER "\'"', ["'a'", "'it\\'s'", "''"], ["'a'b'", "'\\'"]),
        (
            'S: "\\"" _STRING_ESC_INNER "\\"" | "\'" _STRING_ESC_INNER "\'"',
            ["'a'", '"b"'],
            ["'a\""],
        ),
        ('S: "#" _STRING_ESC_INNER "#"', ["#a#", "#\\##"], ["#a#b#"]),
    ],
)
def test_string_esc_inner_under_any_name_and_delimiter(
    definition: str, positive: list[str], negative: list[str]
) -> None:
    text = f"%import common._STRING_ESC_INNER\nstart: S\n{definition}\n"
    regex = parse_lark(text).terminal_map()["S"].regex
    for s in positive:
        assert ir_match(regex, s) and lark_accepts(text, s), s
    for s in negative:
        assert not ir_match(regex, s) and not lark_accepts(text, s), s


def test_string_esc_inner_inside_a_longer_terminal_is_refused() -> None:
    text = '%import common._STRING_ESC_INNER\nstart: S\nS: "\\"" _STRING_ESC_INNER "\\"" "x"\n'
    with pytest.raises(LarkGrammarError, match=r"terminal S uses a negative lookbehind") as info:
        parse_lark(text)
    assert info.value.line == 3


def test_ignore() -> None:
    g = parse_lark(COMMON + 'start: "a" "b"\n%ignore WS\n%ignore "#"\n')
    assert g.ignore[0] == "WS" and len(g.ignore) == 2
    assert g.terminal_map()[g.ignore[1]].regex == Literal("#")
    assert_round_trip(
        COMMON + 'start: "a" "b"\n%ignore WS\n%ignore "#"\n',
        ["ab", " a # b\n", "#a#b#"],
        ["a", "a-b"],
    )


def test_case_insensitive_literal_is_a_concat_of_char_sets() -> None:
    g = parse_lark('start: "select"i "k"i "1"i\n')
    regexes = [g.terminal_map()[sym].regex for sym in g.rules[0].alternatives[0]]
    assert regexes[0] == Concat(tuple(ignorecase_charset(c) for c in "select"))
    assert 0x17F in regexes[0].items[0]  # type: ignore[union-attr]  (long s, as re.I)
    assert regexes[1] == Concat((CharSet.of([(75, 75), (107, 107), (0x212A, 0x212A)]),))
    assert regexes[2] == Concat((CharSet.chars("1"),))
    printed = g.to_lark()
    assert '"select"i' in printed and '"k"i' in printed
    assert_round_trip('start: "select"i "k"i\n', ["SELECTk", "sElEcTK"], ["selectx", "select"])


@pytest.mark.parametrize("ch", ["a", "i", "s", "k", "\u00b5", "\u03c3", "1", "\u0130"])
def test_ignorecase_charset_is_exactly_python_re(ch: str) -> None:
    expected = re.compile(re.escape(ch), re.IGNORECASE)
    hits = [cp for cp in range(0x110000) if expected.fullmatch(chr(cp))]
    assert ignorecase_charset(ch) == CharSet.of((cp, cp) for cp in hits)


@pytest.mark.parametrize(
    ("terminal", "positive", "negative"),
    [
        ("/ab/i", ["ab", "AB", "aB"], ["a", "abc"]),
        ("/a.b/s", ["a\nb", "axb"], ["ab"]),
        ("/a.b/", ["axb"], ["a\nb"]),
        ("/a b/x", ["ab"], ["a b"]),
        ("/[a-c]+/im", ["ABC", "cab"], ["abd"]),
        ('"a"i "b"', ["Ab", "ab"], ["AB"]),
    ],
)
def test_regex_flags(terminal: str, positive: list[str], negative: list[str]) -> None:
    regex = parse_lark(f"start: T\nT: {terminal}\n").terminal_map()["T"].regex
    for s in positive:
        assert ir_match(regex, s), s
    for s in negative:
        assert not ir_match(regex, s), s
    assert_round_trip(f"start: T\nT: {terminal}\n", positive, negative)


# -- errors --------------------------------------------------------------------------------------


def _error(text: str, **kwargs: object) -> LarkGrammarError:
    with pytest.raises(LarkGrammarError) as info:
        parse_lark(text, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_undefined_rule_has_line_column_and_caret() -> None:
    err = _error('start: a b\na: "x"\n')
    assert (err.line, err.column) == (1, 10)
    assert "Rule 'b' used but not defined (in rule start)" in str(err)
    assert "define it or fix the spelling" in str(err)
    assert "start: a b\n         ^" in str(err)
    assert isinstance(err.__cause__, lark.exceptions.GrammarError)
    assert isinstance(err, GrammarError) and isinstance(err, ValueError)


def test_undefined_terminal_in_second_rule() -> None:
    err = _error('start: a\na: "x" TOKEN\n')
    assert (err.line, err.column) == (2, 8) and "'TOKEN' used but not defined" in str(err)


def test_syntax_error_has_line_column() -> None:
    err = _error('start: "a"\nfoo: : "b"\n')
    assert err.line == 2 and err.column is not None
    assert "invalid Lark grammar" in str(err) and "^" in str(err)


def test_duplicate_definition_points_at_the_second_one() -> None:
    err = _error('start: "a"\nx: "b"\nstart: "c"\n')
    assert err.line == 3 and "defined more than once" in str(err)


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("/a(?=b)/", "a lookahead '(?='"),
        ("/a(?!b)/", "a negative lookahead '(?!'"),
        ("/(?<=a)b/", "a lookbehind '(?<='"),
        ("/[(?=]x(?<!y)/", "a negative lookbehind '(?<!'"),
    ],
)
def test_lookaround_terminal_is_refused_naming_it(pattern: str, construct: str) -> None:
    err = _error(f'start: "x" LOOK\nLOOK: {pattern}\n')
    assert f"terminal LOOK uses {construct}" in str(err)
    assert (err.line, err.column) == (2, 1)


def test_anonymous_lookaround_terminal_is_located_by_its_pattern() -> None:
    err = _error('start: "x"\n    | /y(?=z)/\n')
    assert err.line == 2 and "lookahead" in str(err)


@pytest.mark.parametrize("text", ["", "// only a comment\n", "%import common.WS\n%ignore WS\n"])
def test_empty_grammar(text: str) -> None:
    assert "the grammar is empty" in str(_error(text))


def test_missing_start_rule_lists_the_rules() -> None:
    err = _error('expr: "a"\natom: "b"\n')
    assert "start rule 'start' is not defined" in str(err) and "atom, expr" in str(err)
    assert "is a template" in str(_error('start{x}: x\na: start{"y"}\n'))


def test_declared_terminal_cannot_be_generated() -> None:
    err = _error('%declare _INDENT\nstart: _INDENT "a"\n')
    assert "'_INDENT' has no pattern" in str(err) and "%declare" in str(err)
    assert err.line == 1
    assert "%declare" in str(_error('%declare rule_x\nstart: rule_x "a"\n'))


@pytest.mark.parametrize("terminal", ["/a*/", '"a"?', "/(x|)/"])
def test_empty_string_terminal_is_refused(terminal: str) -> None:
    err = _error(f'start: "b" A\nA: {terminal}\n')
    assert "terminal A matches the empty string" in str(err) and err.line == 2


def test_empty_literal_is_refused_by_lark() -> None:
    assert "Empty terminals are not allowed" in str(_error('start: "a" ""\n'))


def test_grammar_that_derives_nothing() -> None:
    err = _error('start: "a" start\n')
    assert "accepts no string" in str(err)


@pytest.mark.parametrize("seed", range(40))
def test_normalise_keeps_the_productive_reachable_rules(seed: int) -> None:
    """Random grammars (recursion, unproductive cycles, unreachable rules) against a naive
    fixpoint: the same rules, alternatives and terminals, or the same refusal."""
    rng = random.Random(seed)
    names = [f"r{i}" for i in range(rng.randint(2, 12))]
    terms = [f"T{i}" for i in range(rng.randint(1, 4))]
    rules: dict[str, list[tuple[str, ...]]] = {}
    for name in names:
        rules[name] = [
            tuple(rng.choice(names + terms) for _ in range(rng.randint(0, 3)))
            for _ in range(rng.randint(1, 3))
        ]
    grammar = Grammar(
        rules=tuple(Rule(n, tuple(alts)) for n, alts in rules.items()),
        terminals=tuple(Terminal(t, Literal(t.lower())) for t in terms),
        start=names[0],
    )
    expected = reference.naive_reduce(rules, set(terms), names[0])
    if expected is None:
        with pytest.raises(GrammarError, match="accepts no string"):
            grammar.normalise()
        return
    got = grammar.normalise()
    kept, used = expected
    assert {r.name: list(r.alternatives) for r in got.rules} == kept
    assert got.rules[0].name == names[0]
    assert {t.name for t in got.terminals} == used


def test_locale_flag_is_refused() -> None:
    assert "LOCALE" in str(_error("start: T\nT: /a/l\n"))


def test_missing_import() -> None:
    err = _error("%import nothere.TOKEN\nstart: TOKEN\n")
    assert "%import cannot find" in str(err) and err.line == 1


# -- files, import paths, Grammar facade ---------------------------------------------------------


def test_parse_lark_file_resolves_relative_imports(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tokens.lark").write_text('DIGITS: /[0-9]+/\nPLUS: "+"\n')
    main = tmp_path / "main.lark"
    main.write_text("%import .lib.tokens (DIGITS, PLUS)\nstart: DIGITS (PLUS DIGITS)*\n")
    g = parse_lark_file(main)
    assert {t.name for t in g.terminals} == {"DIGITS", "PLUS"}
    assert Grammar.from_lark_file(str(main)) == g
    with pytest.raises(OSError):
        parse_lark_file(tmp_path / "missing.lark")


def test_import_paths(tmp_path: Path) -> None:
    (tmp_path / "mylib.lark").write_text("WORD: /[a-z]+/\n")
    g = parse_lark("%import mylib.WORD\nstart: WORD\n", import_paths=[str(tmp_path)])
    assert g.terminals[0].name == "WORD"


def test_grammar_from_lark_facade() -> None:
    assert Grammar.from_lark('start: "a"\n') == parse_lark('start: "a"\n')


# -- printer round trip --------------------------------------------------------------------------

ROUND_TRIPS = [
    ('start: "a" x\nx: "b"\n    |\n', ["a", "ab"], ["b", "abb"]),
    ('start: _item+ [_tail]\n_item: "a" | "b"\n_tail: "!"\n', ["ab!", "a"], ["!", "a!!"]),
    (
        'start: Q S B\nQ: "\\"\'"\nS: "\\\\/"\nB: "t\\tb\\x01"\n',
        ["\"'\\/t\tb\x01"],
        ["\"'/t\tb\x01"],
    ),
    ("start: PATH\nPATH: /\\/(?:[a-z]+\\/)*[a-z]*/\n", ["/", "/usr/bin", "/a/"], ["a", "//"]),
    ('start: W+\nW: /[à-ÿ]/ | "中文" | "😀"\n', ["中文😀é"], ["a", "中"]),
    (
        'start: "select"i NAME\nNAME: /[a-z]+/i\n%ignore " "\n',
        ["SELECT x", "select  Ab"],
        ["sel x"],
    ),
    ('start: "a.b" "(c)" "[d]" "{e}" "^$|*+?"\n', ["a.b(c)[d]{e}^$|*+?"], ["axb(c)[d]{e}^$|*+?"]),
    (COMMON + 'start: _sep{NUMBER}\n_sep{x}: x ("," x)*\n%ignore WS\n', ["1, 2.5 ,3e4"], ["1,"]),
    (
        COMMON + 'start: "{" [ESCAPED_STRING (":" ESCAPED_STRING)*] "}"\n',
        ['{"a\\"":"b"}'],
        ['{"a}'],
    ),
]


@pytest.mark.parametrize(("text", "positive", "negative"), ROUND_TRIPS)
def test_printer_round_trip(text: str, positive: list[str], negative: list[str]) -> None:
    assert_round_trip(text, positive, negative)


def test_printer_renames_names_lark_cannot_read() -> None:
    x = Terminal("tok.x", Literal("x"))
    g = Grammar(
        rules=(
            Rule("start", (("Item-1", "tok.x"), ("__hidden",))),
            Rule("Item-1", (("tok.x",), ())),
            Rule("__hidden", (("tok.x", "tok.x", "tok.x"),)),
        ),
        terminals=(x,),
        start="start",
    )
    printed = g.to_lark()
    assert "start: item_1 TOK_X\n    | _hidden\n" in printed
    assert 'TOK_X: "x"' in printed
    again = parse_lark(printed)
    assert again.to_lark() == printed
    for s, ok in [("x", True), ("xx", True), ("xxx", True), ("", False), ("xxxx", False)]:
        assert lark_accepts(printed, s) is ok, s


def test_printer_name_collisions_get_suffixes() -> None:
    g = Grammar(
        rules=(Rule("start", (("a-b", "a_b"),)), Rule("a-b", (("X",),)), Rule("a_b", (("X",),))),
        terminals=(Terminal("X", Literal("x")),),
        start="start",
    )
    assert g.to_lark().startswith("start: a_b_2 a_b\n")


def test_printer_drops_duplicate_alternatives() -> None:
    g = Grammar((Rule("start", (("X",), ("X",), ())),), (Terminal("X", Literal("x")),), "start")
    printed = g.to_lark()
    assert printed.count("X\n") == 1 and lark_accepts(printed, "x") and lark_accepts(printed, "")


def test_printer_handles_nullable_and_empty_language_terminals() -> None:
    g = Grammar(
        rules=(
            Rule("start", (("B", "OPT", "B"), ("B", "EPS"), ("NONE",), ("dead",))),
            Rule("dead", ()),
        ),
        terminals=(
            Terminal("B", Literal("b")),
            Terminal("OPT", Repeat(Literal("a"), 0, 2)),
            Terminal("EPS", EMPTY),
            Terminal("NONE", NOTHING),
        ),
        start="start",
    )
    printed = g.to_lark()
    assert "dead: dead" in printed and "EPS" not in printed
    for s, ok in [("bb", True), ("bab", True), ("baab", True), ("b", True), ("baaab", False)]:
        assert lark_accepts(printed, s) is ok, s
    again = parse_lark(printed)
    assert again.to_lark() == parse_lark(again.to_lark()).to_lark()


@pytest.mark.parametrize(
    "text", ['"quoted" \\back\\slash', "\x00\x07\x1f\x7f\x85", "\u2028\u00a0\ufeff", "'''", "\\x41"]
)
def test_printed_literals_keep_their_text(text: str) -> None:
    g = Grammar((Rule("start", (("T",),)),), (Terminal("T", Literal(text)),), "start")
    printed = g.to_lark()
    assert "\n" not in printed.split("T: ")[1].rstrip("\n")
    assert parse_lark(printed).terminal_map()["T"].regex == Literal(text)
    assert lark_accepts(printed, text)


def test_nested_repeat_is_not_printed_as_a_lazy_quantifier() -> None:
    node = Repeat(Repeat(CharSet.chars("a"), 1, None), 0, 1)
    assert regex_to_pattern(node) == "(?:a+)?"
    assert re.fullmatch(regex_to_pattern(node), "aaa")
    assert regex_to_pattern(NOTHING) == regex_to_pattern(CharSet(())) == "[^\\s\\S]"


def test_control_and_format_characters_are_escaped_in_patterns() -> None:
    node = Concat((CharSet.chars("\x85\u2028\u00ad"), Literal("\ufeff")))
    pattern = regex_to_pattern(node)
    assert pattern.isprintable() and re.fullmatch(pattern, "\u00ad\ufeff")


@pytest.mark.parametrize("seed", range(30))
def test_grammar_sets_kernel_matches_the_textbook_fixpoints(seed: int) -> None:
    """Nullable, FIRST, FOLLOW and each item's rest, on random grammars (70 terminals: two
    bitset words), against Python-int fixpoints."""
    import random

    import numpy as np
    import reference

    from constrain.kernels.numba_earley import grammar_sets_kernel

    rng = random.Random(seed)
    num_nt, num_t = rng.randint(1, 6), rng.choice([3, 70])
    rules = [(0, [1 % num_nt])]
    for _ in range(rng.randint(1, 12)):
        rhs = [
            rng.randrange(num_nt) if rng.random() < 0.4 else -1 - rng.randrange(num_t)
            for _ in range(rng.randint(0, 4))
        ]
        rules.append((rng.randrange(num_nt), rhs))
    first_item, item_nt, item_t = [], [], []
    for _, rhs in rules:
        first_item.append(len(item_nt))
        item_nt += [s if s >= 0 else -1 for s in rhs] + [-1]
        item_t += [-1 - s if s < 0 else -1 for s in rhs] + [-1]
    words = (num_t + 63) // 64
    nullable = np.zeros(num_nt, np.bool_)
    first = np.zeros((num_nt, words), np.uint64)
    follow = np.zeros((num_t, words), np.uint64)
    rest = np.zeros((len(item_nt), words), np.uint64)
    rest_nullable = np.zeros(len(item_nt), np.bool_)
    grammar_sets_kernel(
        np.array([lhs for lhs, _ in rules], np.int32), np.array(first_item, np.int32),
        np.array(item_nt, np.int32), np.array(item_t, np.int32),
        nullable, first, follow, rest, rest_nullable,
    )  # fmt: skip

    def as_int(row: np.ndarray) -> int:
        return sum(int(w) << (64 * i) for i, w in enumerate(row))

    exp_nullable, exp_first, exp_follow, exp_items = reference.naive_grammar_sets(
        rules, num_nt, num_t
    )
    assert nullable.tolist() == exp_nullable
    assert [as_int(r) for r in first] == exp_first
    assert [as_int(r) for r in follow] == exp_follow
    for i, item in enumerate(exp_items):
        if item is not None:
            assert (as_int(rest[i]), bool(rest_nullable[i])) == item, i
