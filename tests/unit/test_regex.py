"""Unit tests of constrain.frontends.regex: every construct, every error, both flavours."""

from __future__ import annotations

import itertools
import re
import unicodedata

import pytest
import reference

from constrain.automata.dfa import compile_regex
from constrain.errors import GrammarError, RegexError
from constrain.frontends.regex import literal_regex, parse_regex
from constrain.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Alt,
    CharSet,
    Concat,
    Literal,
    Repeat,
    regex_to_pattern,
)

# Strings that exercise Unicode classes, case folding and multi-byte encodings.
PROBES = [
    "", "a", "A", "z", "Z", "_", "0", "9", "٣", "߀", "𝟘", " ", "\t", "\n", "\r", "\x0b", "\x1c",
    "\x85", "\xa0", "\u2028", "\u3000", "\ufeff", "é", "É", "ß", "ẞ", "k", "K", "\u212a", "s",
    "S", "ſ", "i", "I", "İ", "ı", "σ", "ς", "Σ", "µ", "μ", "Ω", "Ω", "ǅ", "😀", "\U00010400",
    "\U00010428", "-", ".", "\\", "ab", "abc", "aab", "abab", "ba", "a\n", "1-2", "x" * 5,
]  # fmt: skip


def check(pattern: str, strings: list[str] | None = None, flags: int = 0, **kw: object) -> None:
    dfa = compile_regex(parse_regex(pattern, flags=flags, **kw))  # type: ignore[arg-type]
    for s in PROBES if strings is None else strings:
        expected = reference.python_fullmatch(pattern, s, flags)
        assert dfa.matches(s.encode()) == expected, (pattern, flags, s)


# --------------------------------------------------------------------------------------------
# IR shapes


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("", EMPTY),
        ("abc", Literal("abc")),
        ("a(?:bc)d", Literal("abcd")),
        ("[a-c]", CharSet(((97, 99),))),
        ("[^a]", CharSet(((0, 96), (98, 0x10FFFF)))),
        ("a|b", CharSet(((97, 98),))),
        ("ab|cd", Alt((Literal("ab"), Literal("cd")))),
        ("a*", Repeat(Literal("a"), 0, None)),
        ("a+?", Repeat(Literal("a"), 1, None)),
        ("a{2,5}", Repeat(Literal("a"), 2, 5)),
        ("(?:ab){3}", Repeat(Literal("ab"), 3, 3)),
        ("a{0}", EMPTY),
        ("^ab$", Literal("ab")),
        (r"\Aab\Z", Literal("ab")),
        ("(?!)", NOTHING),
        ("a(?=)b", Literal("ab")),
        ("(?i)k", CharSet(((75, 75), (107, 107), (0x212A, 0x212A)))),
        ("(?ai)k", CharSet(((75, 75), (107, 107)))),
        ("(?i)1", Literal("1")),
    ],
)
def test_ir_shape(pattern: str, expected: object) -> None:
    assert parse_regex(pattern) == expected


def test_concat_shape() -> None:
    node = parse_regex(r"x\dy")
    assert isinstance(node, Concat) and node.items[0] == Literal("x")
    assert isinstance(node.items[1], CharSet) and node.items[2] == Literal("y")


# --------------------------------------------------------------------------------------------
# Semantics equal re.fullmatch


@pytest.mark.parametrize(
    "pattern",
    [
        "abc", "a.c", ".", ".*", "[abc]", "[a-z]+", "[^a-z]", "[-a]", "[a-]", r"[\]]", r"[\\^]",
        r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"[\d\s]", r"[^\d\s]", r"[^\W\d]", r"[\w-]+",
        r"\x41\u00e9\U0001F600", r"\t\n\r\f\v", r"\.\*\+", r"\0", r"\101", "é+", "😀?",
        "a*", "a+", "a?", "a{3}", "a{2,}", "a{,2}", "a{1,3}", "a{2,3}?", "a*?b", "(?:ab)+",
        "ab|cd|", "(a|b)*abb", "(a)(b)?", "(?P<x>a|b)c", "x{", "a{,}", r"\d{1,3}(?:,\d{3})*",
        "(?>ab)", "a++", "(?:a|ab)(?:c|bcd)", "^a", "a$", "^$", r"\A\d+\Z", "^(?:a|b)$",
        "(?:^a|^b)", "(?:a$|b$)", "^^a$$", "[\u00e0-\u00ff]", "[^\x00-\x7f]",
        "[\U00010000-\U0010ffff]",
    ],
)  # fmt: skip
def test_semantics_match_python(pattern: str) -> None:
    check(pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        "k", "s", "i", "abc", "ß", "σ", "µ", "\U00010400", "[a-z]", "[k-s]", "[^k]", "[^a-z]",
        r"\w", r"[\W]", r"[^\W]", r"[\d_a]", "[ſ]", "[K-Q]", "[\u2100-\u2200]", "[\U00010400x]",
        "[\x00-\U0010ffff]", "[^ka]+", "(?-i:k)K",
    ],
)  # fmt: skip
@pytest.mark.parametrize("extra", [0, re.ASCII])
def test_ignorecase_matches_python(pattern: str, extra: int) -> None:
    check(pattern, flags=re.IGNORECASE | extra)


@pytest.mark.parametrize("flags", [0, re.DOTALL, re.MULTILINE, re.DOTALL | re.MULTILINE])
@pytest.mark.parametrize("pattern", [".", ".+", "[^a].", "a.$", "^.*$"])
def test_dot_and_line_flags(pattern: str, flags: int) -> None:
    check(pattern, flags=flags)


@pytest.mark.parametrize(
    "pattern",
    [
        "(?i)abc", "(?s).", "(?i:a)b", "a(?i:b)", "(?i)a(?-i:b)c", "(?s:.).", "(?a)\\w",
        "(?a:\\w)\\w", "(?u)\\w", "(?x) a b # comment\n c", "(?x)[ ]a", "(?ix) K \\w",
    ],
)  # fmt: skip
def test_inline_and_scoped_flags(pattern: str) -> None:
    check(pattern, PROBES + ["abc", "ABC", "aBc", "Abc", "ab", "aB", "AB", "a b", " a"])


def test_verbose_and_ascii_flags_argument() -> None:
    check(" a  b # c", ["ab", "a b", " a  b # c"], flags=re.VERBOSE)
    check(r"\w+", PROBES, flags=re.ASCII)
    check(r"\d", PROBES, flags=re.ASCII | re.IGNORECASE)


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        (r"\d", 0), (r"\w", 0), (r"\s", 0), (r"\W", re.ASCII), (".", 0), (".", re.DOTALL),
        ("[^\\W\\d_]", 0), ("[a-z]", re.IGNORECASE), ("[^k]", re.IGNORECASE),
        (r"\w", re.IGNORECASE), ("[\u0100-\u0200]", re.IGNORECASE), ("[k-s]", re.I | re.A),
    ],
)  # fmt: skip
def test_class_sets_exhaustive(pattern: str, flags: int) -> None:
    node = parse_regex(pattern, flags=flags)
    assert isinstance(node, CharSet)
    without_surrogates = node.intersect(CharSet(((0xD800, 0xDFFF),)).negate())
    assert list(without_surrogates.ranges) == reference.python_char_ranges(pattern, flags)


def test_literal_regex() -> None:
    assert literal_regex("a.b") == Literal("a.b")
    assert literal_regex("") == Literal("")
    node = literal_regex("Straße k1", ignore_case=True)
    dfa = compile_regex(node)
    for s in ["straße k1", "STRAßE K1", "Straẞe \u212a1", "strasse k1", "ſtraße k1", "Straße k2"]:
        expected = re.fullmatch(re.escape("Straße k1"), s, re.IGNORECASE) is not None
        assert dfa.matches(s.encode()) == expected, s


def test_regex_to_pattern_round_trip() -> None:
    for pattern in [r"[a-f\d]{2,4}(?:x|yz)*", r"\s+|\w?", "(?i)ka", r"[^\n]*\.", "é|😀+"]:
        node = parse_regex(pattern)
        again = parse_regex(regex_to_pattern(node))
        a, b = compile_regex(node), compile_regex(again)
        assert reference.naive_dfa_equivalent(
            (a.byte_class.tolist(), a.trans.tolist(), a.accept.tolist()),
            (b.byte_class.tolist(), b.trans.tolist(), b.accept.tolist()),
        )


# --------------------------------------------------------------------------------------------
# Errors: the construct is named, the offset points at it, and the message has a caret


@pytest.mark.parametrize(
    ("pattern", "needle", "offset"),
    [
        ("ab(?=c)", "lookahead (?=...)", 2),
        ("ab(?!c)d", "negative lookahead (?!...)", 2),
        ("x(?<=a)b", "lookbehind (?<=...)", 1),
        ("[(?<!]x(?<!a)b", "lookbehind (?<!...)", 7),
        (r"(a)\1", "backreference", 3),
        ("(?P<n>a)(?P=n)", "backreference", 8),
        ("(a)?(?(1)b|c)", "conditional", 4),
        (r"a\bc", "word boundary \\b", 1),
        (r"[\b]a\B", "\\B", 5),
        ("a^b", "anchor ^", 1),
        ("^a|b^c", "anchor ^", 4),
        ("a$b", "anchor $", 1),
        (r"a\Zb", "anchor \\Z", 1),
        (r"a\Ab", "anchor \\A", 1),
        ("(?:^a)*", "anchor ^", 3),
        ("(?x) a # (?=\n (?=b)", "lookahead", 14),
        ("(?#(?=)a(?=b)", "lookahead", 8),
    ],
)
def test_unsupported_constructs(pattern: str, needle: str, offset: int) -> None:
    with pytest.raises(RegexError) as info:
        parse_regex(pattern)
    err = info.value
    assert needle in str(err)
    assert err.offset == offset, (pattern, err.offset)
    assert err.pattern == pattern
    column = offset - (pattern.rfind("\n", 0, offset) + 1)
    assert "\n" + " " * column + "^" in str(err)
    assert isinstance(err, GrammarError) and isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("pattern", "offset"), [("a(", 1), ("[a", 0), ("a{3,2}", 2), ("*a", 0), ("a)", 1), (r"\q", 0)]
)
def test_invalid_patterns_keep_re_message_and_position(pattern: str, offset: int) -> None:
    with pytest.raises(RegexError) as info:
        parse_regex(pattern)
    cause = info.value.__cause__
    assert isinstance(cause, re.error)
    assert cause.msg in str(info.value)
    assert info.value.offset == offset == cause.pos


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        parse_regex(b"a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="flavor"):
        parse_regex("a", flavor="perl")  # type: ignore[arg-type]
    with pytest.raises(RegexError, match="LOCALE"):
        parse_regex("a", flags=re.LOCALE)


# --------------------------------------------------------------------------------------------
# ECMAScript flavour

_ECMA_SPACE = "\t\n\x0b\x0c\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_ECMA_SPACE += "\u2028\u2029\u202f\u205f\u3000\ufeff"


def _ecma(pattern: str) -> CharSet:
    node = parse_regex(pattern, flavor="ecmascript")
    assert isinstance(node, CharSet)
    return node


def test_ecmascript_classes() -> None:
    assert _ecma(r"\d") == CharSet(((48, 57),))
    assert _ecma(r"\w") == CharSet.of([(48, 57), (65, 90), (95, 95), (97, 122)])
    assert _ecma(r"\s") == CharSet.chars(_ECMA_SPACE)
    assert _ecma(r"\S") == CharSet.chars(_ECMA_SPACE).negate()
    assert _ecma(r"[^\d]") == CharSet(((48, 57),)).negate()
    assert _ecma(".") == CharSet.chars("\n\r\u2028\u2029").negate().intersect(
        CharSet(((0xD800, 0xDFFF),)).negate()
    )
    assert _ecma(r"[\w-]") == CharSet.of([(45, 45), (48, 57), (65, 90), (95, 95), (97, 122)])
    assert "\x1c" not in {chr(c) for lo, hi in _ecma(r"\s").ranges for c in range(lo, hi + 1)}


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (r"\d+", ["123"], ["١٢٣", "12a"]),
        (r"\w+", ["a_Z9"], ["é", "ß"]),
        ("a.c", ["abc", "a\tc"], ["a\nc", "a\rc", "a\u2028c"]),
        ("(?<year>\\d{4})-(?<m>\\d\\d)", ["2024-01"], ["2024-1"]),
        (r"\cJ", ["\n"], ["J", "cJ"]),
        (r"\u{1F600}", ["😀"], ["u"]),
        ("[^]", ["\n", "x"], ["", "ab"]),
        ("a[]", [], ["a", "a]"]),
        (r"\a\e", ["ae"], ["\x07\x1b"]),
        (r"a{,2}", ["a{,2}"], ["", "aa"]),
        (r"[a[]+", ["a[a"], ["]"]),
        (r"a[\--a]", ["a0", "a-", "a/"], ["a,", "ab"]),
        (r"[a&&b]+", ["&a", "b"], ["c"]),
        (r"[\B]", ["B"], ["b"]),
        (r"\/\-", ["/-"], ["\\/"]),
        ("^a|b$", ["a", "b"], ["ab"]),
    ],
)
def test_ecmascript_syntax(pattern: str, yes: list[str], no: list[str]) -> None:
    dfa = compile_regex(parse_regex(pattern, flavor="ecmascript"))
    for s in yes:
        assert dfa.matches(s.encode()), (pattern, s)
    for s in no:
        assert not dfa.matches(s.encode()), (pattern, s)


@pytest.mark.parametrize(
    ("pattern", "needle", "offset"),
    [
        ("(?<a>x)\\k<a>", "backreference \\k<...>", 7),
        ("(?<a>x)(?<=y)", "lookbehind", 7),
        ("\\cA\\cB(?=y)", "lookahead", 6),
        ("\\u{41}(", "missing )", 6),
    ],
)
def test_ecmascript_errors_point_into_original_pattern(
    pattern: str, needle: str, offset: int
) -> None:
    with pytest.raises(RegexError) as info:
        parse_regex(pattern, flavor="ecmascript")
    assert needle in str(info.value)
    assert info.value.offset == offset
    assert info.value.pattern == pattern


@pytest.mark.parametrize("name", ["Lu", "L", "Nd", "Zs", "Cn", "LC", "Punctuation", "gc=So"])
def test_ecmascript_property_escapes(name: str) -> None:
    short = {"Punctuation": "P", "gc=So": "So"}.get(name, name)
    wanted = ("Lu", "Ll", "Lt") if short == "LC" else (short,)
    members = [
        c
        for c in range(0x110000)
        if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)).startswith(wanted)
    ]
    expected = CharSet.of((c, c) for c in members)
    no_surrogates = CharSet(((0xD800, 0xDFFF),)).negate()
    assert _ecma(f"\\p{{{name}}}").intersect(no_surrogates) == expected
    assert _ecma(f"\\P{{{name}}}").intersect(no_surrogates) == expected.negate().intersect(
        no_surrogates
    )
    assert _ecma(f"[\\P{{{name}}}]").intersect(no_surrogates) == expected.negate().intersect(
        no_surrogates
    )


def test_ecmascript_property_escape_errors() -> None:
    for pattern in [r"a\p{Script=Greek}", r"a\p{Foo}", r"a\P{L"]:
        with pytest.raises(RegexError, match=r"\\p\{L\}") as info:
            parse_regex(pattern, flavor="ecmascript")
        assert info.value.offset == 1
    dfa = compile_regex(parse_regex(r"^[\p{L}\d_]+$", flavor="ecmascript"))
    assert dfa.matches("Ωé_1".encode()) and not dfa.matches("٣".encode())


SEARCH_COUNTS = [
    "a{2,4}", "a{0,3}b", "ba{1,}", "a{1,3}b{2,3}", "^a{1,3}", "a{2,3}$", "(?:ab){1,3}",
    "a{1,3}|b{2}", "(a{1,3}b){1,2}", "a*b{1,2}c?", "x(a{1,3})", "(?:a?){2,3}b", "a{3,2}",
]  # fmt: skip
SEARCH_TEXTS = ["".join(p) for n in range(7) for p in itertools.product("abx", repeat=n)]


@pytest.mark.parametrize("pattern", SEARCH_COUNTS)
def test_search_counts_at_open_ends(pattern: str) -> None:
    """Search mode shortens a count at an unanchored end (``.*a{2,4}`` is ``.*aa``): the
    strings matched are still exactly ``re.search``'s."""
    if pattern == "a{3,2}":
        with pytest.raises(RegexError):
            parse_regex(pattern, flavor="ecmascript", search=True)
        return
    dfa = compile_regex(parse_regex(pattern, flavor="ecmascript", search=True))
    for text in SEARCH_TEXTS:
        expected = re.search(pattern, text) is not None
        assert dfa.matches(text.encode()) == expected, (pattern, text)


def test_search_counts_shape() -> None:
    any_run = Repeat(ANY_CHAR)
    node = parse_regex("[a-z]{1,255}", flavor="ecmascript", search=True)
    assert node == Concat((any_run, CharSet(((97, 122),)), any_run))
    assert parse_regex("^[a-z]{1,255}", flavor="ecmascript", search=True) == Concat(node.items[1:])
    assert parse_regex("^[a-z]{1,255}x", flavor="ecmascript", search=True) == Concat(
        (Repeat(CharSet(((97, 122),)), 1, 255), Literal("x"), any_run)
    )


def test_ir_survives_pickling() -> None:
    """Unpickled IR nodes hash, compare and compile like the originals (the hash slot is not
    pickled: it must start empty, not missing)."""
    import pickle

    import constrain
    from constrain.testing import byte_vocabulary

    grammar = constrain.Grammar.from_json_schema(
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}}
    )
    copy = pickle.loads(pickle.dumps(grammar))
    assert copy == grammar and hash(copy) == hash(grammar)
    node = Repeat(Literal("ab"), 2, 4)
    again = pickle.loads(pickle.dumps(node))
    assert again == node and hash(again) == hash(node)
    compiled = constrain.Compiler(byte_vocabulary()).compile(copy)
    text = b'{"a":"xyz"}'
    assert constrain.Matcher(compiled).accept_tokens(list(text)) == len(text)


def test_case_tables_hold_every_cased_code_point() -> None:
    """The IGNORECASE tables scan planes 0-1 only: no code point beyond them is cased in this
    Python's Unicode data (a newer Unicode version that encodes one elsewhere fails here)."""
    import _sre  # type: ignore[import-not-found]

    from constrain.ir import casefold

    ordered, _, _ = casefold._case_tables()
    relevant = set(ordered)
    assert casefold._CASED_PLANES_END == 0x20000
    cased = [c for c in range(0x110000) if _sre.unicode_iscased(c)]
    assert cased and max(cased) < casefold._CASED_PLANES_END
    assert set(cased) <= relevant
