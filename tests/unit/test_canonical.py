"""Canonical tokenization: the relation against the tokenizers' own encoders, and masks.

Soundness: the tokenizer's encoding of random texts is accepted (``is_canonical``), so a
canonical matcher never refuses what the tokenizer writes. Completeness: other tokenizations of
the same texts are refused. The merge part is checked pair by pair against BPE run on the
pair's bytes (the naive definition), and the matcher's masks against the brute-force definition
on a small trained tokenizer: a token is allowed iff the sequence so far extended by it is a
prefix of the canonical encoding of some string of the (finite) language.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import re
import tempfile
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from constrain import Compiler, Grammar, Matcher
from constrain.errors import VocabularyError
from constrain.vocab import Vocabulary
from constrain.vocab.canonical import START, CanonicalBpe

ALPHABET = "ab cd\n\t'0123456789.,{}\"éλ中🎉 sSlLtT-_:"
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CORPUS = [
    "the cat sat on the mat, and the dog's bone is 12345 grams.",
    '{"name": "Paris", "population": 2161000, "tags": ["a", "b"]}',
    "  indented   text\n\nwith\tnewlines and   spaces  ",
    "yes no maybe yes, no, maybe. Yes! No? it's they're we'll",
] * 20


@cache
def _tiny() -> tuple[Tokenizer, Vocabulary, CanonicalBpe]:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<eos>"],
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    vocab = Vocabulary.from_huggingface(tok, eos_ids=[tok.token_to_id("<eos>")], cache=False)
    return tok, vocab, CanonicalBpe.from_huggingface(tok, vocab)


@cache
def _sentencepiece() -> tuple[Any, Vocabulary, CanonicalBpe]:
    """A SentencePiece BPE model trained by ``sentencepiece`` itself (byte fallback)."""
    import io

    import sentencepiece as spm

    folder = Path(tempfile.mkdtemp(prefix="constrain-sp-"))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=model,
        model_type="bpe",
        vocab_size=400,
        byte_fallback=True,
        add_dummy_prefix=False,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        minloglevel=2,
    )
    path = folder / "sp.model"
    path.write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(path))
    table: list[bytes | None] = []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if sp.is_control(i) or sp.is_unknown(i):
            table.append(None)
        elif sp.is_byte(i):
            table.append(bytes([int(piece[3:5], 16)]))
        else:
            table.append(piece.replace("\u2581", " ").encode())
    specials = [i for i, b in enumerate(table) if b is None]
    vocab = Vocabulary.from_bytes(table, eos_ids=[sp.eos_id()], special_ids=specials)
    return sp.encode, vocab, CanonicalBpe.from_sentencepiece(path, vocab)


@cache
def _metaspace() -> tuple[Any, Vocabulary, CanonicalBpe]:
    """A SentencePiece-style Hugging Face tokenizer (metaspace, byte fallback), as Llama 2's."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    trainer = trainers.BpeTrainer(
        vocab_size=160, special_tokens=["<s>", "</s>"], show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    spec = json.loads(tok.to_str())["model"]
    table = dict(spec["vocab"])
    for i in range(256):
        table[f"<0x{i:02X}>"] = len(table)
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = Tokenizer(models.BPE(table, merges, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens(["<s>", "</s>"])
    # the encoding of a continuation: no metaspace prepended to the text
    reference = Tokenizer.from_str(tok.to_str())
    reference.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    vocab = Vocabulary.from_huggingface(tok, eos_ids=[tok.token_to_id("</s>")], cache=False)

    def encode(text: str) -> list[int]:
        return list(reference.encode(text).ids)

    return encode, vocab, CanonicalBpe.from_huggingface(tok, vocab)


@cache
def _real(name: str) -> tuple[Any, Vocabulary, CanonicalBpe]:
    """(encode function, vocabulary, relation) of a shipped tokenizer."""
    if name == "qwen":
        tiktoken = pytest.importorskip("tiktoken")
        from constrain.testing import qwen_tiktoken_path, qwen_vocabulary

        path = qwen_tiktoken_path()
        ranks = {}
        with open(path, "rb") as fh:
            for line in fh:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        enc = tiktoken.Encoding(
            "qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={}
        )
        vocab = qwen_vocabulary()
        return enc.encode_ordinary, vocab, CanonicalBpe.from_tiktoken(path, QWEN_PATTERN, vocab)
    if name == "llama":
        from constrain.testing import llama3_tokenizer_path

        tok = Tokenizer.from_file(str(llama3_tokenizer_path()))
        eos = tok.token_to_id("<|eot_id|>")
    else:
        from constrain.integrations.default_model import convert_default_model

        tok = Tokenizer.from_file(str(convert_default_model() / "tokenizer.json"))
        eos = tok.token_to_id("<|im_end|>")
    vocab = Vocabulary.from_huggingface(tok, eos_ids=[eos])

    def encode(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False).ids)

    return encode, vocab, CanonicalBpe.from_huggingface(tok, vocab)


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    fixed = [
        "Hello world, it's 12345 degrees!\n\n  x",
        '{"name": "Paris", "population": 2161000}',
        "   leading spaces and\ttabs\n",
        "héllo wörld 中文字符 🎉 ok",
        "can't won't they're I'LL",
        "a  b   c    d\n \n  ",
        "1234567 89 1000000",
    ]
    return fixed + [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(n)
    ]


def _splits(data: bytes, table: dict[bytes, int], rng: random.Random) -> list[int] | None:
    out, i = [], 0
    while i < len(data):
        ends = [j for j in range(i + 1, min(len(data), i + 12) + 1) if data[i:j] in table]
        if not ends:
            return None
        j = rng.choice(ends)
        out.append(table[data[i:j]])
        i = j
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2", "llama", "qwen", "sentencepiece", "metaspace"])
def test_encodings_are_canonical_and_other_splits_are_not(name: str) -> None:
    if name == "sentencepiece":
        encode, vocab, canon = _sentencepiece()
    elif name == "metaspace":
        encode, vocab, canon = _metaspace()
    else:
        encode, vocab, canon = _real(name)
    texts = _texts(zlib.crc32(name.encode()), 120)
    for text in texts:
        assert vocab.decode(encode(text)) == text.encode()
    refused = [t for t in texts if not canon.is_canonical(encode(t))]
    assert refused == []
    rng = random.Random(7)
    table = {vocab.token_bytes_of(i): i for i in np.flatnonzero(canon.standalone).tolist()}
    accepted, tried = [], 0
    for text in texts[:60]:
        reference = encode(text)
        for _ in range(8):
            split = _splits(text.encode(), table, rng)
            if split is None or split == reference:
                continue
            tried += 1
            if canon.is_canonical(split):
                accepted.append((text, split))
    assert tried > 50
    assert accepted == []


def test_conflicts_match_bpe_on_the_pair() -> None:
    """The merge kernel against BPE run on the two tokens' bytes (no pre-tokenizer)."""
    _, vocab, canon = _tiny()
    rng = random.Random(3)
    whole = np.flatnonzero(canon.standalone).tolist()
    byte_of = canon.byte_token
    merge = canon.merge
    for a in rng.sample(whole, 40):
        packed = canon._crossing(a)  # noqa: SLF001 - the kernel's row, checked directly
        crossed = set(np.flatnonzero(np.unpackbits(packed.view(np.uint8), bitorder="little")))
        for b in whole:
            pieces = [int(byte_of[x]) for x in vocab.token_bytes_of(a) + vocab.token_bytes_of(b)]
            assert (b in crossed) == (reference.bpe_encode(pieces, merge) != [a, b]), (a, b)


def test_one_tokens_status_agrees_with_the_row() -> None:
    """``status`` (one token, judged alone) and ``row`` (every token) say the same, either first.

    Two relations of one tokenizer: one asked token by token before any row is built (each
    head key judged alone), the other row first (the whole junction).
    """
    tok, vocab, canon = _tiny()
    fresh = CanonicalBpe.from_huggingface(tok, vocab)
    tokens = np.arange(vocab.size)
    checked = 0
    for text in _texts(11, 12):
        state = START
        for token in tok.encode(text).ids:
            alone = np.array([bool(fresh.status(state, t)) for t in tokens.tolist()])
            bits = (canon.row(state).view(np.uint32)[tokens >> 5] >> (tokens & 31)) & 1
            assert alone.tolist() == bits.astype(bool).tolist(), (text, token)
            assert [canon.status(state, t) for t in range(vocab.size)] == [
                fresh.status(state, t) for t in range(vocab.size)
            ]
            checked += 1
            state = canon.advance(state, token)
            assert state is not None
    assert checked > 50


def test_bounded_memos_keep_the_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for two pre-token contexts only, the memos evict and the rows stay the same."""
    from constrain.vocab import canonical

    tok, vocab, canon = _tiny()
    monkeypatch.setattr(canonical, "_CONTEXTS", 2)
    small = CanonicalBpe.from_huggingface(tok, vocab)
    tokens = np.arange(vocab.size)
    contexts = set()
    for text in _texts(5, 12):
        state = START
        for token in tok.encode(text).ids:
            contexts.add((state.reps, state.trail, state.a_len, state.at_start))
            assert [small.status(state, t) for t in tokens.tolist()] == [
                canon.status(state, t) for t in tokens.tolist()
            ]
            assert small.row(state).tolist() == canon.row(state).tolist()
            assert max(len(small._junctions), len(small._classes)) <= 2
            state = canon.advance(state, token)
            assert state is not None
    assert len(contexts) > 4  # more contexts than the memos hold


def _language() -> list[str]:
    words = ["yes", "no", "maybe", "the cat", "the", "cats", "it's", "12", "123", "1234"]
    return sorted(
        {a + sep + b for a, b in itertools.product(words, repeat=2) for sep in ("", " ", ", ")}
    )


# "words" is slow without JIT (65 s of the NUMBA_DISABLE_JIT pass): "json" covers the same
# kernels there; both run with JIT
@pytest.mark.parametrize("language", [pytest.param("words", marks=pytest.mark.slow), "json"])
def test_masks_equal_the_brute_force_definition(language: str) -> None:
    """Along every canonical encoding of a finite language, the mask is the exact next tokens.

    A token is allowed iff the sequence so far extended by it is a prefix of the canonical
    encoding of a string of the language (EOS after a whole string), whatever the pairwise
    relation alone would allow (dead ends such as ``{`` where only ``{"`` may follow are
    dropped by the matcher's look-ahead).
    """
    tok, vocab, canon = _tiny()
    strings = _language() if language == "words" else _json_language()
    grammar = Grammar.from_regex("|".join(re.escape(s) for s in strings))
    compiled = Compiler(vocab).compile(grammar)
    eos = int(vocab.eos_ids[0])
    encodings = [list(tok.encode(s).ids) + [eos] for s in strings]
    expected: dict[tuple[int, ...], set[int]] = {}
    for ids in encodings:
        for k in range(len(ids)):
            expected.setdefault(tuple(ids[:k]), set()).add(ids[k])
    for prefix, allowed in expected.items():
        m = Matcher(compiled, canonical=canon)
        assert m.accept_tokens(prefix) == len(prefix)
        got = set(m.allowed_token_ids().tolist())
        assert got == allowed, (vocab.decode(prefix), sorted(got ^ allowed))
        # accept_token agrees with the mask, dead ends included, on a fresh matcher too
        plain = Matcher(compiled)
        plain.accept_tokens(prefix)
        fresh = Matcher(compiled, canonical=canon)
        fresh.accept_tokens(prefix)
        for t in set(plain.allowed_token_ids().tolist()):
            assert (fresh.validate_tokens([t]) == 1) == (t in got), (vocab.decode(prefix), t)


def _json_language() -> list[str]:
    values = ['"Paris"', '"the cat"', "12", "123", "-1", "true", "null", '["a", "b"]', '{"a": 1}']
    keys = ['"name"', '"a"', '"tags"']
    return sorted({"{" + k + sep + v + "}" for k in keys for v in values for sep in (":", ": ")})


def test_matcher_rolls_back_and_forks_the_canonical_state() -> None:
    tok, vocab, canon = _tiny()
    compiled = Compiler(vocab).compile(Grammar.from_regex("[a-z ]{1,20}"))
    ids = list(tok.encode("the cat sat").ids)
    m = Matcher(compiled, canonical=canon)
    assert m.accept_tokens(ids) == len(ids)
    before = m.allowed_token_ids()
    other = m.fork()
    m.rollback(len(ids))
    assert m.accept_tokens(ids) == len(ids)
    assert np.array_equal(m.allowed_token_ids(), before)
    assert np.array_equal(other.allowed_token_ids(), before)
    # a split the tokenizer never writes is refused, the state unchanged
    m.reset()
    t, h = tok.token_to_id("t"), tok.token_to_id("he")
    if t is not None and h is not None and [t, h] != list(tok.encode("the").ids):
        assert m.accept_token(t)
        assert not m.accept_token(h)
        assert m.num_accepted_tokens == 1


def test_refuses_tokenizers_it_cannot_decide() -> None:
    _, vocab, _ = _tiny()
    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")]))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.normalizer = normalizers.NFKC()
    with pytest.raises(VocabularyError, match="normaliser"):
        CanonicalBpe.from_huggingface(tok, vocab)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    with pytest.raises(VocabularyError, match="normaliser"):
        CanonicalBpe.from_huggingface(tok, vocab)
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    with pytest.raises(VocabularyError, match="not one regex split"):
        CanonicalBpe.from_huggingface(tok, vocab)


def test_the_first_token_is_one_the_tokenizer_writes_alone() -> None:
    tok, vocab, canon = _tiny()
    row = np.unpackbits(canon.row(START).view(np.uint8), bitorder="little")[: vocab.size]
    allowed = set(np.flatnonzero(row).tolist())
    assert allowed <= set(np.flatnonzero(canon.standalone | canon.boundary).tolist())
    for t in range(vocab.size):
        try:
            text = vocab.token_bytes_of(t).decode()
        except UnicodeDecodeError:
            continue
        if text and not canon.boundary[t] and list(tok.encode(text).ids) == [t]:
            assert t in allowed, text


def test_canonical_true_finds_the_vocabularys_tokenizer(byte_vocab: Vocabulary) -> None:
    tok, vocab, canon = _tiny()
    compiled = Compiler(vocab).compile(Grammar.from_regex("[a-z ]{1,20}"))
    m = Matcher(compiled, canonical=True)
    assert m.canonical is CanonicalBpe.for_vocabulary(vocab)
    ids = list(tok.encode("the cat sat").ids)
    assert m.accept_tokens(ids) == len(ids)
    with pytest.raises(VocabularyError, match="from_huggingface"):
        Matcher(Compiler(byte_vocab).compile(Grammar.from_regex("a+")), canonical=True)


def test_empty_text_keeps_the_canonical_state() -> None:
    tok, vocab, canon = _tiny()
    compiled = Compiler(vocab).compile(Grammar.from_regex("[a-z ]{1,20}"))
    t, h = tok.token_to_id("t"), tok.token_to_id("h")
    m = Matcher(compiled, canonical=canon)
    if t is None or h is None or list(tok.encode("th").ids) == [t, h]:
        pytest.skip("the tiny tokenizer writes 'th' as two tokens")
    assert m.accept_token(t)
    assert m.accept_bytes(b"")
    assert not m.accept_token(h)  # still after 't': 'th' is one token


def test_refuses_regexes_finer_than_its_classes(tmp_path: Path) -> None:
    _, vocab, _ = _tiny()
    ranks = tmp_path / "r.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i}\n" for i in range(256)))
    o200k_like = r"[\p{Lu}\p{Lt}]*[\p{Ll}\p{Lm}]+|\p{N}{1,3}|\s+"
    with pytest.raises(VocabularyError, match="case, script"):
        CanonicalBpe.from_tiktoken(ranks, o200k_like, vocab)
