"""Matcher: acceptance, masks, EOS, rollback, fork, forced bytes, errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import constrain
from constrain import Compiler, Grammar, Matcher, MatcherStateError, Vocabulary
from constrain.errors import SavedFileError
from constrain.testing import byte_vocabulary, tiny_vocabulary


def _compile(vocab, grammar):  # type: ignore[no-untyped-def]
    return Compiler(vocab).compile(grammar)


def _mask(m: Matcher) -> set[int]:
    return set(m.allowed_token_ids().tolist())


def _accepts_text(compiled, text: str) -> bool:  # type: ignore[no-untyped-def]
    m = Matcher(compiled)
    for b in text.encode():
        if not m.accept_token(b):
            return False
    return m.is_accepting()


REGEXES = [
    r"\d{3}-\d{4}",
    r"[a-c]+x?",
    r"(ab|cd)*e",
    r"a{2,4}b{0,2}",
    r"(foo|foobar|fo)baz",
    r"[^a]*a",
    r"é+€?",
    r"(\w+\s)*\w+",
]


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_byte_acceptance_equals_fullmatch(pattern: str) -> None:
    compiled = _compile(byte_vocabulary(), Grammar.from_regex(pattern))
    samples = [
        "123-4567",
        "12-4567",
        "abcx",
        "ababe",
        "e",
        "aaab",
        "aaaaab",
        "foobarbaz",
        "fobaz",
        "foobaz",
        "bbba",
        "a",
        "ééé€",
        "é€€",
        "hello world",
        "hello  world",
        "",
    ]
    for s in samples:
        assert _accepts_text(compiled, s) == (re.fullmatch(pattern, s) is not None), (pattern, s)


def test_mask_equals_accept_token_set() -> None:
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.from_lark(LISTED))
    m = Matcher(compiled)
    for b in b"listed":
        mask = _mask(m)
        brute = {t for t in range(vocab.size) if m.validate_tokens([t]) == 1}
        assert mask == brute
        assert m.accept_token(b)
    assert m.is_accepting()


LISTED = """
start: STEM "ed"
STEM: "list" | "listen"
"""


def test_no_greedy_lexer_rejection() -> None:
    compiled = _compile(byte_vocabulary(), Grammar.from_lark(LISTED))
    assert _accepts_text(compiled, "listed")
    assert _accepts_text(compiled, "listened")
    assert not _accepts_text(compiled, "listen")


def test_left_recursive_and_ambiguous_grammar() -> None:
    text = """
    start: e
    e: e "+" e | e "*" e | "(" e ")" | NUM
    NUM: /[0-9]+/
    """
    compiled = _compile(byte_vocabulary(), Grammar.from_lark(text))
    for s, ok in [
        ("1+2*3", True),
        ("(1+2)*3", True),
        ("1++2", False),
        ("12", True),
        ("(1", False),
        ("", False),
        ("((7))*(8+9)", True),
    ]:
        assert _accepts_text(compiled, s) == ok, s


def test_nullable_rules_and_ignore() -> None:
    text = """
    start: "[" items "]"
    items: (item ("," item)*)?
    item: WORD | start
    WORD: /[a-z]+/
    %ignore " "
    """
    compiled = _compile(byte_vocabulary(), Grammar.from_lark(text))
    for s, ok in [
        ("[]", True),
        ("[ a , b ]", True),
        ("[[a],[]]", True),
        ("[a,]", False),
        ("[ ]", True),
        ("[a b]", False),
    ]:
        assert _accepts_text(compiled, s) == ok, s


def test_eos_only_when_accepting() -> None:
    vocab = byte_vocabulary()
    compiled = _compile(vocab, Grammar.from_regex(r"ab?"))
    eos = int(vocab.eos_ids[0])
    m = Matcher(compiled)
    assert eos not in _mask(m)
    assert not m.accept_token(eos)
    assert m.accept_token(ord("a"))
    assert eos in _mask(m)
    assert m.accept_token(ord("b"))
    assert _mask(m) == {eos}
    assert m.accept_token(eos)
    assert m.is_terminated()
    assert not m.accept_token(ord("b"))
    assert _mask(m) == {eos}
    m.rollback(1)
    assert not m.is_terminated()


def test_rollback_restores_state_and_masks() -> None:
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    m = Matcher(compiled)
    text = b'{"a": [1, 2.5, "x\\u00e9"], "b": null}'
    masks = [_mask(m)]
    for b in text:
        assert m.accept_token(b), chr(b)
        masks.append(_mask(m))
    assert m.is_accepting()
    for k in range(len(text), 0, -1):
        m.rollback(1)
        assert _mask(m) == masks[k - 1]
    with pytest.raises(MatcherStateError):
        m.rollback(1)


def test_rejected_token_leaves_state_unchanged() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"abc")))
    assert m.accept_token(ord("a"))
    before = _mask(m)
    assert not m.accept_token(ord("x"))
    assert _mask(m) == before
    assert m.num_accepted_tokens == 1


def test_multibyte_characters_split_across_tokens() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"[é€]+")))
    data = "é€é".encode()
    for k, b in enumerate(data):
        assert b in _mask(m)
        assert m.accept_token(b)
        assert m.is_accepting() == (k + 1 in (2, 5, 7))
    assert not m.accept_token(0xC3) or not m.is_accepting()


def test_fork_is_independent() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"(ab)+")))
    assert m.accept_token(ord("a"))
    f = m.fork()
    assert f.accept_token(ord("b"))
    assert f.is_accepting()
    assert not m.is_accepting()
    assert m.accept_token(ord("b"))
    assert m.accept_token(ord("a"))
    assert not f.accept_token(ord("b"))


def test_forced_bytes() -> None:
    vocab = byte_vocabulary()
    m = Matcher(
        _compile(vocab, Grammar.from_lark('start: "{\\"name\\": " WORD "}"\nWORD: /[a-z]+/'))
    )
    assert m.forced_bytes() == b'{"name": '
    assert m.accept_bytes(b'{"name": ab')
    assert m.forced_bytes() == b""
    assert m.num_accepted_tokens == 1


def test_validate_tokens_does_not_change_state() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"abcd")))
    assert m.validate_tokens([ord(c) for c in "abx"]) == 2
    assert m.num_accepted_tokens == 0
    assert m.accept_tokens([ord(c) for c in "abc"]) == 3


def test_token_id_errors() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"a")))
    with pytest.raises(ValueError):
        m.accept_token(-1)
    with pytest.raises(ValueError):
        m.accept_token(vocab.model_vocab_size + 5)
    padded = constrain.Vocabulary.from_bytes(
        [bytes([b]) for b in range(256)] + [None], eos_ids=[256], model_vocab_size=300
    )
    mp = Matcher(_compile(padded, Grammar.from_regex(r"a")))
    assert not mp.accept_token(290)


def test_padded_bitmask_clears_extra_bits() -> None:
    vocab = byte_vocabulary()
    m = Matcher(_compile(vocab, Grammar.from_regex(r"[ab]")))
    bitmask = np.full((2, (vocab.size + 31) // 32 + 3), -1, dtype=np.int32)
    m.fill_next_token_bitmask(bitmask, 1)
    bits = np.unpackbits(bitmask[1].view(np.uint8), bitorder="little")
    assert set(np.flatnonzero(bits).tolist()) == {ord("a"), ord("b")}
    assert (bitmask[0] == -1).all()


def test_batch_fill_matches_single() -> None:
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    matchers = []
    for prefix in [b"", b"{", b'{"a', b"[1,", b"tr"]:
        m = Matcher(compiled)
        assert m.accept_bytes(prefix)
        matchers.append(m)
    words = (vocab.size + 31) // 32
    batch = np.zeros((len(matchers), words), dtype=np.int32)
    constrain.fill_next_token_bitmasks(matchers, batch, num_threads=2)
    for i, m in enumerate(matchers):
        single = np.zeros((1, words), dtype=np.int32)
        m.fill_next_token_bitmask(single, 0)
        assert (single[0] == batch[i]).all()


def test_save_load_roundtrip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    path = tmp_path / "json.npz"
    compiled.save(path)
    loaded = constrain.CompiledGrammar.load(path, vocab)
    a, b = Matcher(compiled), Matcher(loaded)
    for chunk in [b"[", b"1", b",", b'"x"', b"]"]:
        assert _mask(a) == _mask(b)
        assert a.accept_bytes(chunk) and b.accept_bytes(chunk)
    with pytest.raises(SavedFileError, match="compiled for another vocabulary"):
        constrain.CompiledGrammar.load(path, byte_vocabulary())


def test_load_rejects_foreign_and_other_format_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    vocab = tiny_vocabulary()
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.zeros(1))
    with pytest.raises(SavedFileError, match="not a constrain compiled grammar") as info:
        constrain.CompiledGrammar.load(foreign, vocab)
    assert info.value.path == str(foreign)
    path = tmp_path / "json.npz"
    _compile(vocab, Grammar.builtin("json")).save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    header["format_version"] = -1
    arrays["header"] = np.array(json.dumps(header))
    np.savez(path, **arrays)
    with pytest.raises(SavedFileError, match="compiled-grammar format -1"):
        constrain.CompiledGrammar.load(path, vocab)


def test_compiler_cache_is_bounded() -> None:
    vocab = byte_vocabulary()
    compiler = Compiler(vocab, cache_bytes=1)
    compiler.compile(Grammar.from_regex("abc"))
    assert compiler.cache_info()["entries"] == 0
    compiler = Compiler(vocab)
    g = Grammar.from_regex("abc")
    assert compiler.compile(g) is compiler.compile(Grammar.from_regex("abc"))
    assert compiler.cache_info()["entries"] == 1


def test_compiler_cache_counts_what_grammars_grow(llama_vocab: Vocabulary) -> None:
    """Token tables and walk buffers filled after a grammar was cached count toward the budget."""
    schemas = [
        {"type": "object", "properties": {f"k{i}": {"type": "string"}, "n": {"type": "integer"}}}
        for i in range(12)
    ]
    probe = Compiler(llama_vocab, cache_bytes=0).compile(Grammar.from_json_schema(schemas[0]))
    static = probe.nbytes()
    matcher = Matcher(probe)
    assert matcher.accept_bytes('{"k0":"a')
    matcher.allowed_token_ids()
    used = probe.nbytes()
    assert used > 2 * static  # tables and walk buffers filled since the compile count
    budget = 3 * used
    compiler = Compiler(llama_vocab, cache_bytes=budget)
    for schema in schemas:
        compiled = compiler.compile(Grammar.from_json_schema(schema))
        matcher = Matcher(compiled)
        assert matcher.accept_bytes('{"k')
        matcher.allowed_token_ids()
    info = compiler.cache_info()
    assert 1 <= info["entries"] <= 4
    assert info["bytes"] <= budget


def test_empty_language_is_a_compile_error() -> None:
    with pytest.raises(constrain.GrammarError):
        Compiler(byte_vocabulary()).compile(Grammar.from_lark('start: a\na: a "x"'))


def test_forks_diverging_keep_exact_masks() -> None:
    """Both sides of a fork number new Earley sets alike: no memo may leak between them."""
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    base = Matcher(compiled)
    assert base.accept_bytes(b'{"a": [')
    left, right = base.fork(), base.fork()
    for side, text in ((left, b'1, {"b": "x"}'), (right, b'"s", [true, null')):
        for k in range(1, len(text) + 1):
            assert side.accept_bytes(text[k - 1 : k])
            fresh = Matcher(compiled)
            assert fresh.accept_bytes(b'{"a": [' + text[:k])
            assert _mask(side) == _mask(fresh), (text[:k], side is left)


def test_repeated_masks_are_memoised_exactly() -> None:
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    m = Matcher(compiled)
    assert m.accept_bytes(b'{"key": "some long string value')
    first = _mask(m)
    for b in b" with more words":
        assert m.accept_token(b)
        fresh = Matcher(compiled)
        assert fresh.accept_bytes(b'{"key": "some long string value')
        assert _mask(m) == first == _mask(fresh)


@pytest.mark.parametrize("name", ["json", "sql", "arithmetic", "csv"])
def test_root_kernel_matches_the_matchers_start_set(name: str) -> None:
    compiled = _compile(tiny_vocabulary(), Grammar.builtin(name))
    assert compiled.root_kernel().tolist() == Matcher(compiled)._kernel(0).tolist()


def test_regular_grammars_precompute_tables_within_budget() -> None:
    vocab = tiny_vocabulary()
    limits = constrain.CompileLimits(precompute_ms=10_000)
    compiled = Compiler(vocab, limits=limits).compile(Grammar.from_regex(r"[0-9]{2}-[a-c]+"))
    assert len(compiled.tables) == compiled.lexer.trans.shape[0]  # every state, start included
    none = Compiler(vocab, limits=constrain.CompileLimits(precompute_ms=0))
    assert len(none.compile(Grammar.from_regex(r"[0-9]{2}-[a-c]+")).tables) == 0


def test_kernel_free_accept_path_agrees_with_the_kernel() -> None:
    """Tokens inside a lexeme take a Python fast path; its states must equal the kernel's."""
    vocab = tiny_vocabulary()
    compiled = _compile(vocab, Grammar.builtin("json"))
    text = b'{"name": "hello world", "age": 1234, "tags": ["ab", "abc"]}'
    fast, slow = Matcher(compiled), Matcher(compiled)
    slow._fast_accept = lambda tok: False  # type: ignore[method-assign]
    for b in text:
        assert fast.accept_token(b) and slow.accept_token(b)
        assert _mask(fast) == _mask(slow)
    assert fast.is_accepting() and slow.is_accepting()


def test_scan_memo_stays_bounded_and_exact() -> None:
    """The kernels empty the scan/union memo once it is half full (it is a cache): with a tiny
    memo, a long input is accepted exactly as with the normal one, masks included."""
    grammar = Grammar.builtin("json")
    compiled = Compiler(byte_vocabulary()).compile(grammar)
    text = b'{"a": [1, 2, {"b": "xyz", "c": [true, false, null]}], "d": -1.5e3}'
    small, normal = Matcher(compiled), Matcher(compiled)
    small._memo = np.full((3, 8), -1, dtype=np.int64)
    small._rebuild_structures()
    for i, byte in enumerate(text):
        assert small.allowed_token_ids().tolist() == normal.allowed_token_ids().tolist(), i
        assert small.accept_token(byte) and normal.accept_token(byte)
        assert 0 <= int(small._counts[3]) < 8  # emptied at half full, never full
    assert small.is_accepting() and normal.is_accepting()


@pytest.mark.slow  # Llama 3's table walks: minutes without the JIT (the NUMBA_DISABLE_JIT pass)
@pytest.mark.parametrize("pattern", [r"\w{40}!", r"(\w|-){5,60}\.", r"[^\n]{1,50}x"])
def test_short_token_reuse_by_classes_matches_pair_searches(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables reused through the lexer's classes alike within 16 bytes equal those reused through
    pair searches, step by step along a text (Llama 3: tokens much longer than 16 bytes)."""
    from constrain.tables import mask_tables
    from constrain.testing import llama3_vocabulary

    try:
        vocab = llama3_vocabulary()
    except constrain.VocabularyError as err:
        pytest.skip(str(err))
    text = {
        "!": "a" * 20 + "émile_" + "b" * 14 + "!",
        ".": "ab-cd-" * 6 + ".",
        "x": "y " * 20 + "x",
    }
    data = text[pattern[-1]].encode()
    by_classes, by_pairs = (
        Matcher(Compiler(vocab).compile(Grammar.from_regex(pattern))) for _ in "ab"
    )
    one, two = (constrain.allocate_token_bitmask(1, vocab.size) for _ in "ab")
    for pos in range(len(data)):
        monkeypatch.setattr(mask_tables, "_PAIR_MISSES", 0)
        by_classes.fill_next_token_bitmask(one, 0)
        monkeypatch.setattr(mask_tables, "_PAIR_MISSES", 10**9)
        by_pairs.fill_next_token_bitmask(two, 0)
        assert np.array_equal(np.asarray(one), np.asarray(two)), (pattern, pos)
        assert by_classes.accept_bytes(data[pos : pos + 1]) and by_pairs.accept_bytes(
            data[pos : pos + 1]
        )
