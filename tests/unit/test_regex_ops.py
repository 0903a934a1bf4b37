"""Intersect, Complement and Automaton regex nodes: DFAs, lexer, printing, full engine."""

from __future__ import annotations

import itertools
import re
import time
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import constrain.automata.product as product_module
from constrain import Compiler, Grammar, Matcher
from constrain.automata.byte_dfa import dfa_fragment
from constrain.automata.dfa import Dfa, compile_regex
from constrain.automata.lexer import build_lexer
from constrain.automata.product import boolean_dfa
from constrain.errors import CompileLimitError, GrammarError
from constrain.ir import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
    matches_empty,
    non_empty,
    regex_to_pattern,
)
from constrain.kernels.numba_dfa import product_kernel
from constrain.testing import brute_force_mask, byte_vocabulary

# -- a naive oracle on code points --------------------------------------------------------------


def lang(node: Regex, s: str) -> bool:
    """Return whether ``s`` is in the language of ``node``, by definition (exponential)."""
    if isinstance(node, CharSet):
        return len(s) == 1 and ord(s) in node and not 0xD800 <= ord(s) <= 0xDFFF
    if isinstance(node, Literal):
        return s == node.text
    if isinstance(node, Concat):
        if not node.items:
            return s == ""
        head, tail = node.items[0], Concat(node.items[1:])
        return any(lang(head, s[:i]) and lang(tail, s[i:]) for i in range(len(s) + 1))
    if isinstance(node, Alt):
        return any(lang(item, s) for item in node.items)
    if isinstance(node, Repeat):
        return _repeat(node.item, node.min, node.max, s)
    if isinstance(node, Intersect):
        return all(lang(item, s) for item in node.items)
    if isinstance(node, Complement):
        return not lang(node.item, s)
    states = {node.start}
    for ch in s:
        states = {d for src, cs, d in node.edges if src in states and lang(cs, ch)}
    return bool(states & node.accept)


def _repeat(item: Regex, lo: int, hi: int | None, s: str) -> bool:
    if hi is not None and hi < lo:
        return False
    if not s:
        return lo == 0 or lang(item, "")
    if hi == 0:
        return False
    rest_hi = None if hi is None else hi - 1
    return any(
        lang(item, s[:i]) and _repeat(item, max(lo - 1, 0), rest_hi, s[i:])
        for i in range(1, len(s) + 1)
    )


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


@cache
def dfa_of(node: Regex) -> Dfa:
    return compile_regex(node)


def check(node: Regex, samples: list[str]) -> None:
    dfa = dfa_of(node)
    for s in samples:
        assert dfa.matches(s.encode()) == lang(node, s), (node, s)


# -- the nodes under test -----------------------------------------------------------------------

DIGIT = CharSet.chars("0123456789")
AB = Repeat(CharSet.chars("ab"))
ANYTHING = Repeat(ANY_CHAR)


def contains(text: str) -> Regex:
    return Concat((ANYTHING, Literal(text), ANYTHING))


def mod_automaton(divisor: int, base: int = 10) -> Automaton:
    """Decimal (or other base) numerals, possibly empty, whose value is divisible by divisor."""
    digits = [CharSet.chars(str(d)) for d in range(base)]
    edges = tuple(
        (r, digits[d], (r * base + d) % divisor) for r in range(divisor) for d in range(base)
    )
    return Automaton(divisor, edges, 0, frozenset({0}))


def counter(char: str, modulus: int) -> Automaton:
    """Strings whose number of ``char`` is a multiple of ``modulus``."""
    other = CharSet.chars(char).negate()
    edges = tuple(
        edge
        for r in range(modulus)
        for edge in ((r, CharSet.chars(char), (r + 1) % modulus), (r, other, r))
    )
    return Automaton(modulus, edges, 0, frozenset({0}))


DIV7 = mod_automaton(7)
NO_LEADING_ZERO = Complement(Concat((Literal("0"), Repeat(ANY_CHAR, 1, None))))
NUM7 = Intersect((DIV7, Repeat(DIGIT, 1, None), NO_LEADING_ZERO))
ACCENTED = CharSet.chars("aéü€😀")
WORD = Intersect((Repeat(ACCENTED, 1, None), Complement(contains("éé"))))

CASES: dict[str, tuple[Regex, str, int]] = {
    "intersect": (Intersect((AB, Complement(contains("aa")))), "abc", 5),
    "intersect-empty-items": (Intersect(()), "ab", 3),
    # complements folded in as differences: first, only, several, next to positives
    "intersect-complement-first": (Intersect((Complement(contains("b")), AB)), "abc", 5),
    "intersect-only-complements": (
        Intersect((Complement(contains("a")), Complement(Literal("bb")))),
        "abé",
        4,
    ),
    "intersect-mixed": (
        Intersect((Complement(Literal("ab")), contains("a"), Complement(contains("bb")), AB)),
        "abc",
        5,
    ),
    "intersect-one-item": (Intersect((AB,)), "abc", 4),
    "intersect-length": (Intersect((contains("ab"), Repeat(ANY_CHAR, 2, 5))), "abc", 6),
    "disjoint": (Intersect((Literal("ab"), Literal("ba"))), "ab", 3),
    "complement-literal": (Complement(Literal("ab")), "abc", 4),
    "complement-literals": (Complement(Alt((Literal("a"), Literal("bc"), EMPTY))), "abc", 4),
    "complement-nothing": (Complement(NOTHING), "ab", 3),
    "complement-everything": (Complement(ANYTHING), "ab", 3),
    "double-complement": (Complement(Complement(contains("ba"))), "abc", 4),
    "nested": (
        Concat(
            (
                Literal("<"),
                Repeat(Complement(Intersect((contains("b"), Repeat(ANY_CHAR, 1, 2)))), 1, 2),
                Literal(">"),
            )
        ),
        "ab<>",
        5,
    ),
    "repeat-of-intersect": (Repeat(Intersect((AB, Repeat(ANY_CHAR, 2, 2))), 0, None), "abc", 5),
    "complement-in-alt": (Alt((Literal("c"), Complement(AB))), "abc", 4),
    "div7": (DIV7, "0123456789", 3),
    "num7": (NUM7, "0147", 4),
    "automaton-nfa": (
        Automaton(
            3,
            ((0, CharSet.chars("ab"), 0), (0, CharSet.chars("a"), 1), (1, CharSet.chars("b"), 2)),
            0,
            frozenset({2}),
        ),
        "abc",
        5,
    ),
    "automaton-in-concat": (Concat((Literal("x"), counter("a", 2), Literal("y"))), "axy", 5),
    "automaton-empty-language": (Automaton(2, (), 0, frozenset({1})), "ab", 2),
    "multibyte-word": (WORD, "aé€😀", 4),
    "multibyte-complement": (Complement(Repeat(CharSet.chars("é€"), 1, 2)), "aé€😀", 3),
    "complement-of-charset": (Complement(CharSet.chars("é")), "aé\x00\U0010ffff", 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exhaustive_against_oracle(name: str) -> None:
    node, alphabet, max_len = CASES[name]
    check(node, strings(alphabet, max_len))


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_strings_against_oracle(name: str, data: st.DataObject) -> None:
    node, alphabet, _ = CASES[name]
    pool = st.sampled_from(alphabet + "zé\x00€😀\U0010ffff\ud7ff\ue000")
    s = data.draw(st.text(alphabet=pool, max_size=8) | st.text(max_size=6))
    check(node, [s])


def test_div7_on_numbers() -> None:
    dfa = dfa_of(NUM7)
    for i in range(3000):
        assert dfa.matches(str(i).encode()) == (i % 7 == 0)
    assert not dfa.matches(b"07") and not dfa.matches(b"") and dfa.matches(b"700")


INTERESTING_BYTES = b"a\x00\x7f\x80\xbf\xc2\xc3\xa9\xe2\x82\xac\xed\xa0\xf0\x9f\x98\x80\xf4\xf5\xff"


@pytest.mark.parametrize(
    "node", [Complement(Literal("a")), Complement(NOTHING), Complement(Complement(ANYTHING))]
)
def test_complement_never_accepts_invalid_utf8(node: Regex) -> None:
    dfa = dfa_of(node)
    for n in range(4):
        for raw in itertools.product(INTERESTING_BYTES, repeat=n):
            data = bytes(raw)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                assert not dfa.matches(data), data
                continue
            assert dfa.matches(data) == lang(node, text), data


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=8))
def test_complement_random_bytes(data: bytes) -> None:
    dfa = dfa_of(Complement(contains("é")))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        assert not dfa.matches(data)
    else:
        assert dfa.matches(data) == ("é" not in text)


def test_results_are_minimal_dfas() -> None:
    assert dfa_of(Intersect((Literal("ab"), Literal("ba")))).is_empty_language()
    assert dfa_of(Complement(ANYTHING)).is_empty_language()
    assert dfa_of(Complement(NOTHING)).num_states == compile_regex(ANYTHING).num_states
    # Double complement gives back the (minimal) automaton of the operand.
    operand = contains("ab")
    assert dfa_of(Complement(Complement(operand))).num_states == dfa_of(operand).num_states
    assert dfa_of(DIV7).num_states == 7


def _naive_product(ta: np.ndarray, tb: np.ndarray, b_sink: bool) -> dict[tuple[int, int], dict]:
    """Reachable pairs by breadth-first search over a shared alphabet (columns)."""
    out: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
    queue = [(0, 0)]
    while queue:
        a, b = queue.pop(0)
        if (a, b) in out:
            continue
        out[(a, b)] = {}
        for c in range(ta.shape[1]):
            na, nb = int(ta[a, c]), int(tb[b, c]) if b >= 0 else -1
            if na >= 0 and (nb >= 0 or b_sink):
                out[(a, b)][c] = (na, nb)
                queue.append((na, nb))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_product_kernel_against_naive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_classes = int(rng.integers(1, 4))
    size_a, size_b = (5, 4) if seed < 10 else (40, 30)  # larger: hash growth, then the table
    ta = rng.integers(-1, size_a, size=(size_a, num_classes)).astype(np.int32)
    tb = rng.integers(-1, size_b, size=(size_b, num_classes)).astype(np.int32)
    cols = np.arange(num_classes, dtype=np.int32)
    for b_sink in (False, True):
        expected = _naive_product(ta, tb, b_sink)
        results = []
        for dense_pairs in (0, 1 << 21):  # hash table only; hash table, then all pairs
            status, count, trans, pa, pb = product_kernel(
                ta, tb, cols, cols, b_sink, 10_000, dense_pairs
            )
            pairs = list(zip(pa.tolist(), pb.tolist(), strict=True))
            assert status == 0 and count == len(expected) and set(pairs) == set(expected)
            assert pairs[0] == (0, 0)
            for i, pair in enumerate(pairs):
                got = {c: pairs[d] for c, d in enumerate(trans[i].tolist()) if d >= 0}
                assert got == expected[pair]
            results.append((pairs, trans.tolist()))
            if count > 1:
                status, count, *_ = product_kernel(ta, tb, cols, cols, b_sink, 1, dense_pairs)
                assert status == 1 and count == 2
        assert results[0] == results[1]  # the same numbering either way


# -- IR helpers ---------------------------------------------------------------------------------

NULLABLE = [
    Intersect((AB, Repeat(Literal("ab")))),
    Intersect(()),
    Complement(Literal("x")),
    Complement(Repeat(CharSet.chars("ab"), 1, None)),
    DIV7,
    counter("a", 3),
    Automaton(1, (), 0, frozenset({0})),
    Concat((Complement(Literal("a")), Repeat(Intersect((AB,))))),
]


@pytest.mark.parametrize("node", NULLABLE + [NUM7, WORD, Complement(EMPTY)])
def test_matches_empty_and_non_empty_are_exact(node: Regex) -> None:
    assert matches_empty(node) == lang(node, "") == dfa_of(node).matches_empty()
    rest = non_empty(node)
    samples = strings("ab0x7", 3)
    if rest is None:
        assert all(not lang(node, s) for s in samples if s)
        return
    assert not matches_empty(rest)
    for s in samples:
        assert lang(rest, s) == (bool(s) and lang(node, s)), (node, s)


def test_non_empty_of_automaton_that_only_matches_empty() -> None:
    assert non_empty(Automaton(2, ((1, CharSet.chars("a"), 0),), 0, frozenset({0}))) is None


def test_invalid_automaton_is_a_grammar_error() -> None:
    with pytest.raises(GrammarError, match="out of range"):
        compile_regex(Automaton(2, ((0, CharSet.chars("a"), 2),), 0, frozenset({1})))
    with pytest.raises(GrammarError, match="out of range"):
        compile_regex(Automaton(1, (), 0, frozenset({3})))


# -- printing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "node",
    [DIV7, mod_automaton(3, 2), counter("a", 2), CASES["automaton-nfa"][0], Concat((DIV7,))],
)
def test_automaton_prints_as_an_equivalent_pattern(node: Regex) -> None:
    pattern = re.compile(regex_to_pattern(node))
    for s in strings("01a79b", 3) + [str(i) for i in range(200)]:
        assert (pattern.fullmatch(s) is not None) == lang(node, s), s
    assert regex_to_pattern(Repeat(counter("a", 2), 1, None)).startswith("(?:")
    assert regex_to_pattern(Automaton(2, (), 0, frozenset({1}))) == "[^\\s\\S]"


@pytest.mark.parametrize("node", [NUM7, Concat((Literal("a"), Complement(Literal("b"))))])
def test_intersection_and_complement_cannot_be_printed(node: Regex) -> None:
    with pytest.raises(GrammarError, match="cannot be printed"):
        regex_to_pattern(node)
    with pytest.raises(GrammarError, match="Lark"):
        Grammar.from_terminal_regex(node).to_lark()


def test_automaton_grammar_round_trips_through_lark() -> None:
    grammar = Grammar.from_terminal_regex(mod_automaton(3, 2), "BIN3")
    again = Grammar.from_lark(grammar.to_lark())
    dfa = compile_regex(again.terminal_map()["BIN3"].regex)
    for s in strings("01", 6):
        assert dfa.matches(s.encode()) == (s != "" and int(s, 2) % 3 == 0)


# -- limits and caching -------------------------------------------------------------------------


def test_product_blow_up_raises_compile_limit_error() -> None:
    node = Intersect((counter("a", 50), counter("b", 50)))
    start = time.perf_counter()
    with pytest.raises(CompileLimitError) as info:
        compile_regex(node, max_states=1000)
    assert info.value.limit_name == "max_dfa_states" and info.value.limit == 1000
    assert "intersection" in str(info.value)
    with pytest.raises(CompileLimitError) as info:
        build_lexer([("T", Concat((Literal("x"), node)))], max_states=1000)
    assert info.value.limit_name == "max_lexer_states"
    assert time.perf_counter() - start < 30
    # Minimal: 20 * 20 remainder pairs, each with its own mid-character (UTF-8) states.
    per_pair = compile_regex(counter("a", 20)).num_states // 20
    assert compile_regex(Intersect((counter("a", 20), counter("b", 20)))).num_states == (
        400 * per_pair
    )


def test_complement_blow_up_raises_compile_limit_error() -> None:
    with pytest.raises(CompileLimitError, match="max_dfa_states"):
        compile_regex(Complement(Intersect((counter("a", 40), counter("b", 40)))), max_states=500)


def test_repeated_sub_expression_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = product_module.product_dfa

    def counting(*args: object, **kwargs: object) -> Dfa:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(product_module, "product_dfa", counting)

    def key() -> Regex:  # equal but distinct objects each time
        return Intersect((Repeat(CharSet.chars("xyz")), Complement(contains("zzq"))))

    node = Alt(tuple(Concat((Literal(f"{i}:"), key())) for i in range(300)))
    dfa = compile_regex(node)
    assert len(calls) == 1  # the intersection with a complement: one difference
    assert dfa.matches(b"17:xyzz") and not dfa.matches(b"17:zzq")
    assert boolean_dfa(key(), max_states=10, limit_name="max_dfa_states").num_states <= 10
    assert len(calls) == 1


# -- lexer and full engine ----------------------------------------------------------------------


def test_lexer_with_boolean_terminals() -> None:
    terms = [("NUM", NUM7), ("WORD", WORD), ("OTHER", Complement(Alt((ANYTHING,))))]
    with pytest.raises(GrammarError, match="OTHER"):
        build_lexer(terms)
    even_binary = non_empty(mod_automaton(2, 2))
    assert even_binary is not None
    lexer = build_lexer(terms[:2] + [("SEVEN", Literal("7")), ("BIN", even_binary)])
    for text, accepted in [
        ("7", {"NUM", "SEVEN"}),
        ("14", {"NUM"}),
        ("10", {"BIN"}),
        ("0", {"BIN", "NUM"}),
        ("aé€", {"WORD"}),
        ("aéé", set()),
        ("015", set()),
    ]:
        state = lexer.walk(0, text.encode())
        assert {lexer.names[t] for t in lexer.terminals_accepting(state)} == accepted, text


def _grammar() -> tuple[Grammar, Regex]:
    """``start: item ("," item)*`` with ``item: NUM | WORD | OPT``; also the same as one regex."""
    opt = Complement(
        Alt(
            (
                Literal("x"),
                contains(","),
                contains("a"),
                contains("7"),
                Concat((ANYTHING, DIGIT, ANYTHING)),
            )
        )
    )
    rules = (
        Rule("start", (("item",), ("item", "COMMA", "start"))),
        Rule("item", (("NUM",), ("WORD",), ("OPT",))),
    )
    terminals = (
        Terminal("NUM", NUM7),
        Terminal("WORD", WORD),
        Terminal("OPT", Intersect((opt, Repeat(ANY_CHAR, 0, 2)))),
        Terminal("COMMA", Literal(",")),
    )
    item = Alt((NUM7, WORD, Intersect((opt, Repeat(ANY_CHAR, 0, 2)))))
    whole = Concat((item, Repeat(Concat((Literal(","), item)))))
    return Grammar(rules, terminals, "start"), whole


@cache
def _compiled():  # type: ignore[no-untyped-def]
    grammar, _ = _grammar()
    return Compiler(byte_vocabulary()).compile(grammar)


def _accepts(text: bytes) -> tuple[bool, bool]:
    m = Matcher(_compiled())
    ok = all(m.accept_token(b) for b in text)
    return ok, ok and m.is_accepting()


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("7", True),
        ("14,aé,700", True),
        ("", True),  # OPT matches the empty string
        (",,", True),
        ("bb,y", True),
        ("😀€", True),
        ("015", False),
        ("x", False),
        ("8", False),
        ("aéé", False),
        ("bbb", False),
    ],
)
def test_full_engine_accepts_exactly(text: str, complete: bool) -> None:
    _, whole = _grammar()
    assert lang(whole, text) == complete
    assert _accepts(text.encode())[1] == complete


def test_full_engine_masks_equal_brute_force() -> None:
    _, whole = _grammar()
    dfa = compile_regex(whole)
    vocab = byte_vocabulary()

    def viable(data: bytes) -> bool:
        state = dfa.walk(0, data)
        return state >= 0 and bool(dfa.live[state])

    rng = np.random.default_rng(7)
    for _ in range(12):
        m = Matcher(_compiled())
        prefix = b""
        for _ in range(10):
            expected = brute_force_mask(vocab, viable, prefix, dfa.matches)
            allowed = np.zeros(vocab.model_vocab_size, dtype=np.bool_)
            allowed[m.allowed_token_ids()] = True
            assert (allowed == expected).all(), prefix
            choices = np.flatnonzero(expected[:256])
            if not len(choices):
                break
            byte = int(rng.choice(choices))
            assert m.accept_token(byte)
            prefix += bytes([byte])


def test_nullable_boolean_terminals_are_rewritten() -> None:
    for regex, yes, no in [
        (Complement(Literal("x")), ["", "y", "xx"], ["x"]),
        (Intersect((AB, Repeat(Literal("ab")))), ["", "abab"], ["a", "ba"]),
        (DIV7, ["", "7", "014"], ["8"]),
    ]:
        grammar = Grammar(
            (Rule("start", (("A", "T", "B"),)),),
            (Terminal("T", regex), Terminal("A", Literal("<")), Terminal("B", Literal(">"))),
            "start",
        )
        compiled = Compiler(byte_vocabulary()).compile(grammar)
        for text, want in [(t, True) for t in yes] + [(t, False) for t in no]:
            m = Matcher(compiled)
            ok = all(m.accept_token(b) for b in f"<{text}>".encode()) and m.is_accepting()
            assert ok == want, (regex, text)


# -- operands of products --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet='abé\x00"\\€', max_size=6), max_size=6),
    st.lists(st.text(alphabet='abé\x00"\\€', max_size=7), max_size=30),
)
def test_literal_operands_as_tries(words: list[str], probes: list[str]) -> None:
    """A key set excluded from a string language (the operand is compiled as its trie, not
    through the NFA) gives the same language as the sets written as general regexes."""
    body = Repeat(CharSet.of([(0, 0x10FFFF)]).intersect(CharSet.chars('"').negate()))
    alt = Alt(tuple(Literal(w) for w in words))
    general = Alt(tuple(Concat((Literal(w), EMPTY)) for w in words))  # not plain literals
    trie = compile_regex(Intersect((body, Complement(alt))))
    ref = compile_regex(Intersect((body, Complement(general))))
    as_trie = product_module.trie_dfa([w.encode() for w in words])
    for probe in [*probes, *words, ""]:
        data = probe.encode()
        expected = '"' not in probe and probe not in words
        assert trie.matches(data) == ref.matches(data) == expected, (words, probe)
        state = 0
        for byte in data:
            state = -1 if state < 0 else int(as_trie.trans[state, as_trie.byte_class[byte]])
        assert (state >= 0 and bool(as_trie.accept[state])) == (probe in words)


def test_operand_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(product_module, "_operands", {})
    monkeypatch.setattr(product_module, "_OPERAND_ENTRIES", 2)
    monkeypatch.setattr(product_module, "_cache", product_module.OrderedDict())
    body = Repeat(CharSet.chars("abc"), 1, None)
    for k in range(5):
        dfa = compile_regex(Intersect((body, Complement(Concat((Literal("a" * k), EMPTY))))))
        assert not dfa.matches(b"a" * k) and dfa.matches(b"b")
    assert 0 < len(product_module._operands) <= 2


@pytest.mark.parametrize(
    "pattern", [r"[a-c]x|é+", r"(?:[^\"\\]|\\u[0-9a-f]{4})*", r"[\x00-\xff]{0,3}z", r"(?:ab)*"]
)
def test_fragment_edges_are_the_dfa_byte_by_byte(pattern: str) -> None:
    """dfa_fragment (kernel range_edges_kernel): every byte of every state leads where the DFA
    says, through exactly one edge, and no other edge exists."""
    from constrain.frontends.regex import parse_regex

    dfa = compile_regex(parse_regex(pattern))
    frag = dfa_fragment(dfa)
    assert frag.num_states == dfa.num_states
    assert frag.accept_states.tolist() == np.flatnonzero(dfa.accept).tolist()
    got: dict[tuple[int, int], int] = {}
    for src, lo, hi, dst in frag.table.T.tolist():
        for byte in range(lo, hi + 1):
            assert (src, byte) not in got
            got[(src, byte)] = dst
    expected = {
        (s, b): int(dfa.trans[s, dfa.byte_class[b]])
        for s in range(dfa.num_states)
        for b in range(256)
        if dfa.trans[s, dfa.byte_class[b]] >= 0
    }
    assert got == expected
