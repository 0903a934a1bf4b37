"""Special tokens as grammar terminals: matched by token id, never by the text of their name."""

from __future__ import annotations

import base64
import itertools
import random

import numpy as np
import pytest

from constrain import Compiler, Grammar, Matcher, Vocabulary
from constrain.automata.utf8 import special_bytes, utf8_sequences
from constrain.compiler import CompiledGrammar
from constrain.errors import GrammarError, LarkGrammarError, SavedFileError, VocabularyError
from constrain.ir import (
    ANY_CHAR,
    SPECIAL_BASE,
    CharSet,
    Concat,
    Literal,
    regex_to_pattern,
    special_placeholder,
    special_token,
)
from constrain.ir.serial import grammar_from_data, grammar_to_data

# A small vocabulary: ASCII bytes, a few words, text that spells the special token's name, raw
# 0xFF bytes, and four specials: <|end|>, <|tool|> (named), EOS <|eos|> and an unnamed one.
_WORDS = [b"ab", b"<|end|>", b"<|", b"end", b"|>", b"a<|", b"\xff", b"a\xff", b"\xff\x80\x80"]
TOKENS: list[bytes | None] = [bytes([b]) for b in range(128)] + list(_WORDS) + [None] * 4
END, TOOL, EOS, UNNAMED = range(len(TOKENS) - 4, len(TOKENS))
NAMES = {"<|end|>": END, "<|tool|>": TOOL, "<|eos|>": EOS}


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_names=NAMES)


# -- the definition: token sequences as symbols, a special token one symbol by its id ----------


def _symbols(vocab: Vocabulary, tid: int) -> list[object] | None:
    """A token's symbols: its bytes, or ("S", id) for a special one (None: never allowed)."""
    if tid in (END, TOOL, UNNAMED):
        return [("S", tid)]
    data = vocab.token_bytes_of(tid)
    return list(data) if data else None


def _brute_mask(vocab: Vocabulary, prefix: list[object], is_prefix, is_complete) -> list[int]:  # type: ignore[no-untyped-def]
    allowed = []
    for tid in range(vocab.size):
        sym = _symbols(vocab, tid)
        if sym is not None and is_prefix(prefix + sym):
            allowed.append(tid)
    if is_complete(prefix):
        allowed.append(EOS)
    return sorted(allowed)


def _walks(vocab, compiled, is_prefix, is_complete, seed=0, walks=30, steps=12):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    checked = 0
    for _ in range(walks):
        m = Matcher(compiled)
        prefix: list[object] = []
        for _ in range(steps):
            got = m.allowed_token_ids().tolist()
            want = _brute_mask(vocab, prefix, is_prefix, is_complete)
            assert got == want, (prefix, got, want)
            checked += 1
            ordinary = [t for t in got if t != EOS]
            if not ordinary:
                break
            tid = rng.choice(ordinary)
            assert m.accept_token(tid)
            prefix += _symbols(vocab, tid) or []
    return checked


def _seq_lang(sentence: list[object]):  # type: ignore[no-untyped-def]
    return (
        lambda s: s == sentence[: len(s)],
        lambda s: s == sentence,
    )


@pytest.mark.parametrize("token", ["<|end|>", f"<[{END}]>"])
def test_masks_match_definition_along_walks(vocab: Vocabulary, token: str) -> None:
    compiled = Compiler(vocab).compile(Grammar.from_lark(f'start: "a" {token} "b"'))
    is_prefix, is_complete = _seq_lang([ord("a"), ("S", END), ord("b")])
    assert _walks(vocab, compiled, is_prefix, is_complete) > 30


def test_free_text_around_special_token(vocab: Vocabulary) -> None:
    # TEXT is a complement-style class: it can never contain a special token
    grammar = Grammar.from_lark("start: TEXT? <|end|> TEXT?\nTEXT: /[^x]+/\n")
    compiled = Compiler(vocab).compile(grammar)

    def parts(s: list[object]) -> list[list[object]] | None:
        out: list[list[object]] = [[]]
        for x in s:
            if x == ("S", END):
                out.append([])
            elif isinstance(x, int) and x < 0x80 and x != ord("x"):
                out[-1].append(x)
            else:
                return None
        return out if len(out) <= 2 else None

    def is_prefix(s: list[object]) -> bool:
        return parts(s) is not None

    def is_complete(s: list[object]) -> bool:
        p = parts(s)
        return p is not None and len(p) == 2

    assert _walks(vocab, compiled, is_prefix, is_complete, seed=1, steps=16) > 30


def test_text_spelling_the_name_is_rejected(vocab: Vocabulary) -> None:
    compiled = Compiler(vocab).compile(Grammar.from_lark('start: "a" <|end|> "b"'))
    m = Matcher(compiled)
    assert m.accept_token(ord("a"))
    spelled = TOKENS.index(b"<|end|>")
    assert not m.accept_token(spelled)
    assert m.allowed_token_ids().tolist() == [END]
    assert not Matcher(compiled).accept_bytes(b"a<|end|>")
    assert not Matcher(compiled).accept_bytes(b"a" + special_bytes(END))  # bytes are not the token
    forced = Matcher(compiled)
    assert forced.forced_bytes() == b"a"
    assert forced.accept_bytes(b"a") and forced.forced_bytes() == b""  # the token is not text
    assert Matcher(compiled).accept_tokens([ord("a"), END, ord("b")]) == 3


def test_tokens_with_byte_ff_are_never_allowed(vocab: Vocabulary) -> None:
    compiled = Compiler(vocab).compile(
        Grammar.from_lark(f"start: /[\\s\\S]+/ <[{END}]> /[\\s\\S]+/")
    )
    ff = [i for i, t in enumerate(TOKENS) if t is not None and 0xFF in t]
    assert ff
    m = Matcher(compiled)
    for tid in [ord("a"), END, ord("b")]:
        allowed = set(m.allowed_token_ids().tolist())
        assert not allowed & set(ff)
        assert m.accept_token(tid)
    derived = compiled.vocab
    assert all(derived.token_lengths[i] == 0 for i in ff)


def test_name_errors(vocab: Vocabulary) -> None:
    compiler = Compiler(vocab)
    with pytest.raises(GrammarError, match=r"<\|nope\|>.*include <\|end\|>"):
        compiler.compile(Grammar.from_lark('start: "a" <|nope|>'))
    with pytest.raises(GrammarError, match="end-of-sequence"):
        compiler.compile(Grammar.from_lark('start: "a" <|eos|>'))
    with pytest.raises(GrammarError, match="end-of-sequence"):
        compiler.compile(Grammar.from_lark(f'start: "a" <[{EOS}]>'))
    with pytest.raises(GrammarError, match="not a special token"):
        compiler.compile(Grammar.from_lark('start: "a" <[97]>'))
    with pytest.raises(LarkGrammarError, match="outside"):
        Grammar.from_lark("start: <[262144]>")
    with pytest.raises(LarkGrammarError, match="rule's body"):
        Grammar.from_lark('start: "a"\n%ignore <|end|>')
    with pytest.raises(LarkGrammarError, match="one special token"):
        Grammar.from_lark('start: A\nA: "x" <|end|>')


def test_unnamed_special_by_id_and_decode_text(vocab: Vocabulary) -> None:
    compiled = Compiler(vocab).compile(Grammar.from_lark(f'start: <[{UNNAMED}]> "a" <|tool|>'))
    m = Matcher(compiled)
    assert m.allowed_token_ids().tolist() == [UNNAMED]
    assert m.accept_tokens([UNNAMED, ord("a"), TOOL]) == 3
    assert m.allowed_token_ids().tolist() == [EOS]
    assert vocab.decode_text([ord("a"), END, ord("b"), EOS]) == "a<|end|>b<|eos|>"
    assert vocab.decode_text([UNNAMED, ord("C")]) == "C"  # an unnamed special adds nothing
    assert compiled.vocab.decode_text([UNNAMED, ord("a"), TOOL]) == f"<[{UNNAMED}]>a<|tool|>"
    assert vocab.decode_text([TOKENS.index(b"\xff")]) == "\ufffd"


def test_grammar_without_specials_uses_the_same_vocabulary(vocab: Vocabulary) -> None:
    compiler = Compiler(vocab)
    grammar = Grammar.from_lark('start: "a" /[0-9]+/')
    compiled = compiler.compile(grammar)
    assert compiled.vocab is vocab
    assert compiler.compile(grammar) is compiled
    with_special = compiler.compile(Grammar.from_lark('start: "a" <|end|>'))
    assert with_special.vocab is not vocab and with_special.vocab.size == vocab.size
    again = compiler.compile(Grammar.from_lark('start: "b" <|end|>'))
    assert again.vocab is with_special.vocab  # one derived vocabulary per set of ids


def test_names_are_part_of_grammar_identity(vocab: Vocabulary) -> None:
    a, b = Grammar.from_lark("start: <|end|>"), Grammar.from_lark("start: <|tool|>")
    assert a != b  # same placeholder, other name
    compiler = Compiler(vocab)
    assert Matcher(compiler.compile(a)).allowed_token_ids().tolist() == [END]
    assert Matcher(compiler.compile(b)).allowed_token_ids().tolist() == [TOOL]


# -- bytes, IR, printing ---------------------------------------------------------------------


def _expand(seqs: list[tuple[tuple[int, int], ...]]) -> set[bytes]:
    out = set()
    for seq in seqs:
        for t in itertools.product(*[range(lo, hi + 1) for lo, hi in seq]):
            out.add(bytes(t))
    return out


def test_special_bytes_layout() -> None:
    assert special_bytes(0) == b"\xff\x80\x80\x80"
    i = 128010
    assert special_bytes(i) == bytes(
        [0xFF, 0x80 | (i >> 12), 0x80 | ((i >> 6) & 63), 0x80 | (i & 63)]
    )
    assert special_bytes(2**18 - 1) == b"\xff\xbf\xbf\xbf"


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, 0), (7, 7), (0, 63), (63, 64), (1, 130), (4095, 4097), (60, 9000), (2**18 - 3, 2**18 - 1)],
)
def test_utf8_sequences_of_pseudo_ranges(lo: int, hi: int) -> None:
    seqs = utf8_sequences(SPECIAL_BASE + lo, SPECIAL_BASE + hi)
    assert _expand(seqs) == {special_bytes(i) for i in range(lo, hi + 1)}
    assert utf8_sequences(SPECIAL_BASE, SPECIAL_BASE + 2**18 - 1) == [
        ((0xFF, 0xFF), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF))
    ]


def test_utf8_sequences_split_mixed_ranges() -> None:
    seqs = utf8_sequences(0x10FFF0, SPECIAL_BASE + 3)
    real = {chr(c).encode() for c in range(0x10FFF0, 0x110000)}
    assert _expand(seqs) == real | {special_bytes(i) for i in range(4)}
    assert seqs[-1][0] == (0xFF, 0xFF)  # increasing code-point order: Unicode first
    assert utf8_sequences(0x41, 0x41) == [((0x41, 0x41),)]


def test_charset_operations_keep_specials_out_of_free_text() -> None:
    s = special_token(5)
    assert s.ranges == ((SPECIAL_BASE + 5, SPECIAL_BASE + 5),)
    assert s.negate() == ANY_CHAR.union(CharSet(((0xD800, 0xDFFF),)))
    assert s.union(CharSet.chars("a")).negate().ranges[-1][1] == 0x10FFFF
    assert s.intersect(s) == s
    assert s.intersect(ANY_CHAR).is_empty()
    with pytest.raises(ValueError, match="18-bit"):
        special_token(2**18)


def test_serial_and_printer_round_trip() -> None:
    g = Grammar.from_lark('start: "a" <|end|> B <[7]>\nB: <[tool]>\n')
    assert g.special_names == ("<|end|>", "<[tool]>")
    assert grammar_from_data(grammar_to_data(g)) == g
    assert Grammar.from_lark(g.to_lark()) == g
    plain = Grammar.from_lark('start: "a"')
    assert "special_names" not in grammar_to_data(plain)
    with pytest.raises(GrammarError, match="special token"):
        regex_to_pattern(Concat((Literal("a"), special_token(3))))
    with pytest.raises(GrammarError, match="special token"):
        regex_to_pattern(special_placeholder(0).union(CharSet.chars("a")))


def test_lark_syntax_outside_strings_regexes_and_comments() -> None:
    g = Grammar.from_lark('start: "<|a|>" /<b>/ C  // <c>\nC: "<[1]>"  # <d>\n')
    assert g.special_names == ()
    assert {t.regex for t in g.terminals} == {Literal("<|a|>"), Literal("<b>"), Literal("<[1]>")}


def test_splice_merges_special_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    inner = tmp_path / "inner.lark"
    inner.write_text('start: <|tool|> "x" <|end|>\n')
    outer = tmp_path / "outer.lark"
    outer.write_text('start: <|end|> %grammar "inner.lark"\n')
    g = Grammar.from_lark_file(outer)
    assert sorted(g.special_names) == ["<|end|>", "<|tool|>"]
    vocab = Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_names=NAMES)
    m = Matcher(Compiler(vocab).compile(g))
    assert m.accept_tokens([END, TOOL, ord("x"), END]) == 4
    assert m.is_accepting()


# -- the vocabulary ---------------------------------------------------------------------------


def test_with_special_bytes(vocab: Vocabulary) -> None:
    derived = vocab.with_special_bytes([END, UNNAMED])
    assert derived.token_bytes_of(END) == special_bytes(END)
    assert derived.token_bytes_of(UNNAMED) == special_bytes(UNNAMED)
    assert derived.token_bytes_of(TOOL) == b""
    assert derived.token_bytes_of(TOKENS.index(b"a\xff")) == b""
    assert derived.token_bytes_of(TOKENS.index(b"ab")) == b"ab"
    assert derived.eos_ids.tolist() == [EOS]
    assert derived.model_vocab_size == vocab.model_vocab_size
    assert dict(derived.special_names) == NAMES
    assert vocab.with_special_bytes([]) is vocab
    with pytest.raises(VocabularyError, match="end-of-sequence"):
        vocab.with_special_bytes([EOS])
    with pytest.raises(VocabularyError, match="ordinary token"):
        vocab.with_special_bytes([ord("a")])
    with pytest.raises(VocabularyError, match="cannot be required"):
        vocab.with_special_bytes([vocab.size])


def test_vocabulary_names_save_load_and_fingerprint(vocab: Vocabulary, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "v.npz"
    vocab.save(path)
    loaded = Vocabulary.load(path)
    assert dict(loaded.special_names) == NAMES
    assert loaded.fingerprint == vocab.fingerprint
    plain = Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_ids=[END, TOOL, UNNAMED])
    # names only resolve grammars at compile time (compiled grammars hold ids): not hashed, so
    # a grammar saved for a vocabulary loads with the same tokens read with or without names
    assert plain.fingerprint == vocab.fingerprint
    assert (
        plain.fingerprint
        == Vocabulary(plain.token_indptr, plain.token_bytes, eos_ids=[EOS]).fingerprint
    )
    plain.save(tmp_path / "p.npz")
    assert dict(Vocabulary.load(tmp_path / "p.npz").special_names) == {}
    with pytest.raises(VocabularyError, match="out of range"):
        Vocabulary.from_bytes([b"a"], special_names={"<x>": 5})


def test_from_tiktoken_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
    specials = {"<|endoftext|>": 256, "<|im_end|>": 257}
    vocab = Vocabulary.from_tiktoken(path, special_tokens=specials, eos_tokens=["<|endoftext|>"])
    assert dict(vocab.special_names) == specials
    m = Matcher(Compiler(vocab).compile(Grammar.from_lark('start: "hi" <|im_end|>')))
    assert m.accept_tokens([ord("h"), ord("i")]) == 2
    assert m.allowed_token_ids().tolist() == [257]


def test_compiled_grammar_save_load_round_trip(vocab: Vocabulary, tmp_path) -> None:  # type: ignore[no-untyped-def]
    compiled = Compiler(vocab).compile(Grammar.from_lark(f'start: ("a" <|end|>)+ <[{UNNAMED}]>'))
    path = tmp_path / "g.npz"
    compiled.save(path)
    loaded = CompiledGrammar.load(path, vocab)
    assert loaded.vocab == compiled.vocab
    for seq in ([], [ord("a")], [ord("a"), END], [ord("a"), END, ord("a"), END, UNNAMED]):
        m1, m2 = Matcher(compiled), Matcher(loaded)
        assert m1.accept_tokens(seq) == m2.accept_tokens(seq) == len(seq)
        assert np.array_equal(m1.allowed_token_ids(), m2.allowed_token_ids())
    # the same tokens read without names: the saved grammar holds ids, so it loads
    unnamed = Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_ids=[END, TOOL, UNNAMED])
    assert CompiledGrammar.load(path, unnamed).vocab == compiled.vocab
    other = Vocabulary.from_bytes([*TOKENS[:-4], b"z", None, None, None], eos_ids=[EOS])
    with pytest.raises(SavedFileError, match="another vocabulary"):
        CompiledGrammar.load(path, other)


def test_a_compiled_grammar_loads_and_recompiles_with_its_own_vocabulary(
    vocab: Vocabulary, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    grammar = Grammar.from_lark('start: "a" <|end|> "b"')
    compiled = Compiler(vocab).compile(grammar)
    path = tmp_path / "g.npz"
    compiled.save(path)
    for source in (vocab, compiled.vocab):  # the tokenizer's vocabulary, or the derived one
        loaded = CompiledGrammar.load(path, source)
        again = Compiler(source).compile(grammar)
        for m in (Matcher(loaded), Matcher(again)):
            assert m.accept_token(ord("a"))
            assert m.allowed_token_ids().tolist() == [END]
    assert compiled.vocab.with_special_bytes([END]) is compiled.vocab
