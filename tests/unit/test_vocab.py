"""constrain.vocab: token bytes (CSR), the flat token trie, persistence, tokenizer loaders.

Every tokenizer here is built in memory (no network); the real Llama 3 / Qwen / Gemma vocabularies
are tested in test_testing.py through the constrain.testing helpers.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import reference
import vocab_files
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from constrain.errors import VocabularyError
from constrain.testing import byte_vocabulary, tiny_vocabulary
from constrain.vocab.trie import Trie, check_trie
from constrain.vocab.vocabulary import VOCAB_FORMAT_VERSION, Vocabulary, vocab_cache_dir

TRIE_FIELDS = ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup")


def table_of(vocab: Vocabulary) -> list[bytes | None]:
    return [vocab.token_bytes_of(i) or None for i in range(vocab.size)]


def assert_trie_matches_reference(vocab: Vocabulary) -> None:
    ref = reference.naive_token_trie(table_of(vocab))
    for name in TRIE_FIELDS:
        got = getattr(vocab, name)
        assert got.dtype == (np.uint8 if name == "node_byte" else np.int32), name
        assert got.tolist() == ref[name], name


def assert_trie_invariants(vocab: Vocabulary) -> None:
    """Check the documented layout directly (independent of the reference builder)."""
    nb, nt, ne, nd = (getattr(vocab, f).tolist() for f in TRIE_FIELDS[:4])
    m = len(nb)
    assert ne[0] == m and nd[0] == 0 and nt[0] == -1
    for i in range(1, m):
        assert i < ne[i] <= m
        if i + 1 < ne[i]:  # has a first child
            assert nd[i + 1] == nd[i] + 1
    paths = reference.naive_trie_walk(nb, ne)
    assert len(paths) == m  # every node reached exactly once
    for n in range(m):  # children sorted by byte
        kids, c = [], n + 1
        while c < ne[n]:
            kids.append(nb[c])
            c = ne[c]
        assert kids == sorted(set(kids))
    seen: list[int] = []
    for path, n in paths.items():
        assert nd[n] == len(path)
        tok = nt[n]
        while tok >= 0:
            assert vocab.token_bytes_of(tok) == path
            seen.append(tok)
            tok = int(vocab.token_next_dup[tok])
    regular = np.flatnonzero(vocab.token_lengths > 0).tolist()
    assert sorted(seen) == regular  # every non-special token reachable exactly once
    assert not set(seen) & set(vocab.special_ids.tolist())


# ----------------------------------------------------------------------------- from_bytes, basics
def test_from_bytes_csr_specials_and_eos() -> None:
    vocab = Vocabulary.from_bytes(
        [b"a", b"bc", None, b"", b"<eos>", b"d"], eos_ids=[4], special_ids=[5]
    )
    assert vocab.size == len(vocab) == 6 and vocab.model_vocab_size == 6
    assert vocab.token_indptr.tolist() == [0, 1, 3, 3, 3, 3, 3]
    assert vocab.token_bytes.tobytes() == b"abc"
    assert vocab.special_ids.tolist() == [2, 3, 4, 5]  # None, b"", EOS and listed ids
    assert vocab.eos_ids.tolist() == [4]
    assert vocab.token_lengths.tolist() == [1, 2, 0, 0, 0, 0]
    assert [vocab.token_bytes_of(i) for i in range(6)] == [b"a", b"bc", b"", b"", b"", b""]


def test_arrays_are_read_only() -> None:
    vocab = tiny_vocabulary()
    names = ("token_indptr", "token_bytes", "special_ids", "eos_ids", "token_lengths")
    for name in names + TRIE_FIELDS:
        arr = getattr(vocab, name)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError):
            arr[0] = 0
    with pytest.raises(AttributeError):
        vocab.size = 3  # type: ignore[misc]


def test_from_bytes_input_errors() -> None:
    with pytest.raises(TypeError, match="encode"):
        Vocabulary.from_bytes(["a"])  # type: ignore[list-item]
    with pytest.raises(VocabularyError, match="out of range"):
        Vocabulary.from_bytes([b"a"], eos_ids=[1])
    with pytest.raises(VocabularyError, match="smaller"):
        Vocabulary.from_bytes([b"a", b"b"], model_vocab_size=1)
    assert isinstance(VocabularyError("x"), ValueError)


def test_constructor_validation() -> None:
    with pytest.raises(VocabularyError, match="token_indptr"):
        Vocabulary(np.array([0, 2, 1]), np.zeros(1, np.uint8))
    with pytest.raises(VocabularyError, match="token_indptr"):
        Vocabulary(np.array([0, 1]), np.zeros(3, np.uint8))
    with pytest.raises(VocabularyError, match="at least 2"):
        Vocabulary(np.array([0]), np.zeros(0, np.uint8))
    with pytest.raises(VocabularyError, match="must be special"):
        Vocabulary(np.array([0, 1, 1]), np.array([97], np.uint8), eos_ids=[0])


def test_decode_and_padding() -> None:
    vocab = Vocabulary.from_bytes([b"he", b"llo", None, b" w"], eos_ids=[2], model_vocab_size=8)
    assert vocab.decode([0, 1, 3, 2, 6]) == b"hello w"
    assert vocab.decode(np.array([[1, 1]], dtype=np.int32)) == b"llollo"
    assert vocab.decode([]) == b""
    assert vocab.token_bytes_of(7) == b""  # padding id
    with pytest.raises(ValueError, match="out of range"):
        vocab.decode([8])
    with pytest.raises(ValueError, match="out of range"):
        vocab.token_bytes_of(-1)


def test_fingerprint_equality_and_pickle() -> None:
    a = Vocabulary.from_bytes([b"a", b"b", None], eos_ids=[2])
    b = Vocabulary.from_bytes([b"a", b"b", None], eos_ids=[2])
    assert a.fingerprint == b.fingerprint and a == b and hash(a) == hash(b)
    assert len(a.fingerprint) == 64
    variants = [
        Vocabulary.from_bytes([b"a", b"c", None], eos_ids=[2]),
        Vocabulary.from_bytes([b"a", b"b", None]),
        Vocabulary.from_bytes([b"a", b"b", None], eos_ids=[2], model_vocab_size=4),
        Vocabulary.from_bytes([b"ab", None, None], eos_ids=[2]),
    ]
    assert len({v.fingerprint for v in variants} | {a.fingerprint}) == 5
    c = pickle.loads(pickle.dumps(a))
    assert c == a and not c.token_bytes.flags.writeable
    assert "size=3" in repr(a)


# ----------------------------------------------------------------------------- trie
def random_tokens(seed: int) -> list[bytes | None]:
    rng = np.random.default_rng(seed)
    alphabet = np.array([0, 1, 97, 98, 99, 255], dtype=np.uint8)
    out: list[bytes | None] = []
    for _ in range(int(rng.integers(1, 120))):
        kind = rng.random()
        if kind < 0.1:
            out.append(None)
        elif kind < 0.25 and out:  # a duplicate or an extension of an earlier token
            prev = out[int(rng.integers(len(out)))] or b"a"
            out.append(prev if rng.random() < 0.5 else prev + bytes([int(rng.choice(alphabet))]))
        elif kind < 0.35:  # long tokens sharing a stem past the 32-byte fast path
            stem = b"ab" * int(rng.integers(14, 22))
            tail = rng.choice(alphabet, size=int(rng.integers(0, 4))).tolist()
            out.append(stem + bytes(tail))
        else:
            n = int(rng.integers(1, 12 if rng.random() < 0.9 else 70))
            out.append(bytes(rng.choice(alphabet, size=n).tolist()))
    return out


@pytest.mark.parametrize("seed", range(25))
def test_trie_matches_reference_random(seed: int) -> None:
    vocab = Vocabulary.from_bytes(random_tokens(seed))
    assert_trie_matches_reference(vocab)
    assert_trie_invariants(vocab)


@pytest.mark.parametrize("make", [byte_vocabulary, tiny_vocabulary])
def test_trie_of_test_vocabularies(make) -> None:  # type: ignore[no-untyped-def]
    vocab = make()
    assert_trie_matches_reference(vocab)
    assert_trie_invariants(vocab)
    assert vocab.num_nodes == len(vocab.node_byte)


def test_trie_long_shared_prefixes_and_zero_bytes() -> None:
    # > 32 shared bytes (the LCP fix-up path), trailing NULs, prefixes of each other.
    base = b"x" * 40
    tokens = [base + b"a", base, base + b"\x00", base + b"a\x00b", b"\x00", b"\x00\x00", b"x"]
    tokens += [base + b"a", b"-" * 100, b"-" * 99 + b"+", b"-" * 64]
    vocab = Vocabulary.from_bytes(tokens)
    assert_trie_matches_reference(vocab)
    assert_trie_invariants(vocab)
    assert vocab.token_next_dup[0] == 7 and vocab.token_next_dup[7] == -1


def test_trie_without_regular_tokens() -> None:
    vocab = Vocabulary.from_bytes([None, None], eos_ids=[0])
    assert vocab.node_byte.tolist() == [0] and vocab.node_end.tolist() == [1]
    assert vocab.node_token.tolist() == [-1] and vocab.token_next_dup.tolist() == [-1, -1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=40))
def test_trie_property(tokens: list[bytes | None]) -> None:
    vocab = Vocabulary.from_bytes(tokens)
    assert_trie_matches_reference(vocab)


# ----------------------------------------------------------------------------- save / load
def test_save_load_round_trip(tmp_path: Path) -> None:
    tokens = [*random_tokens(3), None]
    vocab = Vocabulary.from_bytes(
        tokens, eos_ids=[len(tokens) - 1], model_vocab_size=len(tokens) + 5
    )
    path = tmp_path / "v.npz"
    vocab.save(path)
    back = Vocabulary.load(path)
    assert back == vocab and back.model_vocab_size == vocab.size + 5
    assert back.eos_ids.tolist() == vocab.eos_ids.tolist()
    for name in TRIE_FIELDS:
        assert np.array_equal(getattr(back, name), getattr(vocab, name))
        assert not getattr(back, name).flags.writeable
    assert back._trie is not None  # the trie came from the file, not rebuilt


def _rewrite(path: Path, *, rechecksum: bool = False, **changes: object) -> None:
    """Replace members of a saved file; ``rechecksum`` recomputes the checksum, as a crafter can."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update({k: np.asarray(v) for k, v in changes.items()})
    path.write_bytes(vocab_files.npz(arrays, rechecksum=rechecksum))


def test_load_rejects_other_versions_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / "v.npz"
    tiny_vocabulary().save(path)
    _rewrite(path, version=VOCAB_FORMAT_VERSION + 1, rechecksum=True)
    with pytest.raises(VocabularyError, match="format version"):
        Vocabulary.load(path)
    tiny_vocabulary().save(path)
    _rewrite(path, token_bytes=np.zeros(tiny_vocabulary().token_bytes.shape, np.uint8))
    with pytest.raises(VocabularyError, match="checksum mismatch"):
        Vocabulary.load(path)
    tiny_vocabulary().save(path)
    _rewrite(path, node_end=np.zeros(tiny_vocabulary().num_nodes, np.int32), rechecksum=True)
    with pytest.raises(VocabularyError, match="token trie"):
        Vocabulary.load(path)
    tiny_vocabulary().save(path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(VocabularyError, match="unreadable archive"):
        Vocabulary.load(path)
    np.savez(path, x=np.zeros(3))
    with pytest.raises(VocabularyError, match="not a constrain vocabulary"):
        Vocabulary.load(path)
    with pytest.raises(VocabularyError, match="cannot read"):
        Vocabulary.load(tmp_path / "missing.npz")
    with pytest.raises(VocabularyError, match="cannot read"):
        Vocabulary.load(tmp_path)


def test_load_refuses_consistently_swapped_trie_entries(tmp_path: Path) -> None:
    """The issue's case: two trie entries swapped and the checksum recomputed (wrong masks
    before the trie was validated against the tokens)."""
    vocab = tiny_vocabulary()
    path = tmp_path / "v.npz"
    a, b = (int(vocab.node_byte.tolist().index(ord(c))) for c in "ab")
    for name in ("node_token", "node_byte"):
        swapped = getattr(vocab, name).copy()
        swapped[[a, b]] = swapped[[b, a]]
        vocab.save(path)
        _rewrite(path, rechecksum=True, **{name: swapped})
        with pytest.raises(VocabularyError, match="token trie"):
            Vocabulary.load(path)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.binary(min_size=0, max_size=4), min_size=1, max_size=24),
    field=st.sampled_from(TRIE_FIELDS),
    data=st.data(),
)
def test_check_trie_accepts_exactly_the_built_trie(
    tokens: list[bytes], field: str, data: st.DataObject
) -> None:
    """One entry of one trie array changed: check_trie refuses it (the built trie is unique)."""
    vocab = Vocabulary.from_bytes(tokens)
    trie = Trie(*(getattr(vocab, name) for name in TRIE_FIELDS))
    check_trie(trie, vocab.token_indptr, vocab.token_bytes)
    array = getattr(trie, field).copy()
    assume(array.size > 0)
    pos = data.draw(st.integers(0, array.size - 1))
    low, high = (0, 255) if array.dtype == np.uint8 else (-2, len(tokens) + vocab.num_nodes)
    value = data.draw(st.integers(low, high).filter(lambda x: x != array[pos]))
    array[pos] = value
    with pytest.raises(VocabularyError, match="token trie"):
        check_trie(trie._replace(**{field: array}), vocab.token_indptr, vocab.token_bytes)


# ----------------------------------------------------------------------------- tiktoken
def write_ranks(path: Path, tokens: list[bytes]) -> None:
    import base64

    lines = [f"{base64.b64encode(t).decode()} {r}" for r, t in enumerate(tokens)]
    path.write_text("\n".join(lines) + "\n")


def test_from_tiktoken(tmp_path: Path) -> None:
    path = tmp_path / "r.tiktoken"
    write_ranks(path, [b"a", b"b", b"ab", b" ab", b"\xe2\x82"])
    specials = {"<|end|>": 5, "<|pad|>": 7}
    vocab = Vocabulary.from_tiktoken(path, special_tokens=specials, eos_tokens=["<|end|>"])
    assert vocab.size == 8 and vocab.eos_ids.tolist() == [5]
    assert vocab.special_ids.tolist() == [5, 6, 7]  # 6 is an unused id
    assert table_of(vocab)[:5] == [b"a", b"b", b"ab", b" ab", b"\xe2\x82"]
    with pytest.raises(VocabularyError, match="not in special_tokens"):
        Vocabulary.from_tiktoken(path, special_tokens=specials, eos_tokens=["<|x|>"])
    with pytest.raises(VocabularyError, match="collides"):
        Vocabulary.from_tiktoken(path, special_tokens={"<|end|>": 2})
    path.write_text("YQ== 0\nYg== 0\n")
    with pytest.raises(VocabularyError, match="repeated"):
        Vocabulary.from_tiktoken(path)
    path.write_text("YQ== 0\n!!notbase64 1\n")
    with pytest.raises(VocabularyError, match=":2:"):
        Vocabulary.from_tiktoken(path)


# ----------------------------------------------------------------------------- Hugging Face
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    '{"name": "Alice", "age": 30, "tags": ["a", "b"]}',
    "def main():\n    return 42\n\n",
    "Hello world! Hello there, world of tokens.",
] * 20
TEXTS = [
    "Hello world",
    "  leading spaces and\ttabs\n\nnewlines",
    '{"name": "Bob", "age": 7}',
    "Grüße aus Köln — ça va? ß",
    "世界 🌍😀 emoji and CJK",
    "\x00 control \x7f bytes",
    "",
]


@pytest.fixture(scope="module")
def bytelevel_tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def sentencepiece_tokenizer(style: str):  # type: ignore[no-untyped-def]
    """A Llama-2-like (normaliser + Replace decoder) or Metaspace BPE with byte fallback."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.Metaspace()
    trained.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, show_progress=False))
    state = json.loads(trained.model.__getstate__())
    names = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    names += [t for t, _ in sorted(state["vocab"].items(), key=lambda kv: kv[1])]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(names))}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    model = models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    tok = Tokenizer(model)
    if style == "llama2":
        tok.normalizer = normalizers.Sequence(
            [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
        )
        tok.decoder = decoders.Sequence(
            [
                decoders.Replace("\u2581", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Sequence(
            [decoders.ByteFallback(), decoders.Metaspace(prepend_scheme="first")]
        )
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<unk>", "<s>", "</s>")])
    return tok


def test_bytelevel_round_trip(bytelevel_tokenizer) -> None:  # type: ignore[no-untyped-def]
    vocab = Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0], cache=False)
    assert vocab.size == bytelevel_tokenizer.get_vocab_size()
    assert vocab.special_ids.tolist() == [0, 1] and vocab.eos_ids.tolist() == [0]
    for text in TEXTS:
        ids = bytelevel_tokenizer.encode(text).ids
        assert vocab.decode(ids) == text.encode(), text
        assert vocab.decode(ids).decode() == bytelevel_tokenizer.decode(ids)
    assert sorted(table_of(vocab)[2:258]) == [bytes([b]) for b in range(256)]
    assert_trie_invariants(vocab)


@pytest.mark.parametrize("style", ["llama2", "metaspace"])
def test_sentencepiece_round_trip(style: str) -> None:
    tok = sentencepiece_tokenizer(style)
    vocab = Vocabulary.from_huggingface(tok, eos_ids=[2], cache=False)
    assert vocab.special_ids.tolist() == [0, 1, 2]
    assert table_of(vocab)[3:259] == [bytes([b]) for b in range(256)]  # <0xNN> tokens
    assert vocab.token_bytes_of(tok.token_to_id("\u2581the")) == b" the"
    for text in TEXTS[:-1]:
        ids = tok.encode(text).ids
        # the SentencePiece convention: the normaliser prepends one space, the decoder strips it
        # (Metaspace's prepend_scheme skips it when the text already starts with a space)
        lead = "" if style == "metaspace" and text.startswith(" ") else " "
        assert vocab.decode(ids) == (lead + text).encode(), text
        assert vocab.decode(ids).decode()[1:] == tok.decode(ids)  # the decoder strips one space
    fallback = [i for i in tok.encode("😀 ü").ids if 3 <= i < 259]
    assert vocab.decode(fallback) == "😀ü".encode()


def test_added_tokens_and_transformers_wrapper(bytelevel_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer.from_str(bytelevel_tokenizer.to_str())
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken("naïve café", special=False)])
    tok.add_special_tokens([AddedToken("<|im_end|>", special=True)])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    vocab = Vocabulary.from_huggingface(hf, cache=False)
    think, cafe, im_end = (tok.token_to_id(t) for t in ("<think>", "naïve café", "<|im_end|>"))
    assert vocab.token_bytes_of(think) == b"<think>"
    assert vocab.token_bytes_of(cafe) == "naïve café".encode()
    assert im_end in vocab.special_ids and vocab.eos_ids.tolist() == [0]
    text = "x <think> naïve café"
    assert vocab.decode(hf(text)["input_ids"]) == text.encode()
    both = Vocabulary.from_huggingface(hf, eos_ids=[im_end], cache=False)
    assert both.eos_ids.tolist() == [0, im_end]


def test_eos_required(bytelevel_tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(VocabularyError, match="eos_ids="):
        Vocabulary.from_huggingface(bytelevel_tokenizer, cache=False)


def test_vocab_size_padding_and_cut(bytelevel_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from tokenizers import AddedToken, Tokenizer

    n = bytelevel_tokenizer.get_vocab_size()
    padded = Vocabulary.from_huggingface(
        bytelevel_tokenizer, eos_ids=[0], vocab_size=n + 60, cache=False
    )
    assert padded.size == n and padded.model_vocab_size == n + 60
    with pytest.raises(VocabularyError, match="would cut"):
        Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0], vocab_size=n - 1)
    tok = Tokenizer.from_str(bytelevel_tokenizer.to_str())
    tok.add_special_tokens([AddedToken("<|image|>", special=True)])  # id n, like Llama 3.2 Vision
    cut = Vocabulary.from_huggingface(tok, eos_ids=[0], vocab_size=n, cache=False)
    assert cut.size == n and cut.model_vocab_size == n and cut.token_next_dup.shape == (n,)
    with pytest.raises(VocabularyError, match="would cut"):
        Vocabulary.from_huggingface(tok, eos_ids=[n], vocab_size=n, cache=False)


def test_unsupported_tokenizers() -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    wp = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    wp.decoder = decoders.WordPiece()
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocabulary.from_huggingface(wp, eos_ids=[0], cache=False)
    clip = Tokenizer(models.BPE({"a</w>": 0, "b": 1}, [], end_of_word_suffix="</w>"))
    with pytest.raises(VocabularyError, match="end-of-word"):
        Vocabulary.from_huggingface(clip, eos_ids=[0], cache=False)
    plain = Tokenizer(models.BPE({"a": 0, "b": 1}, []))
    plain.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(VocabularyError, match="unsupported tokenizer"):
        Vocabulary.from_huggingface(plain, eos_ids=[0], cache=False)
    with pytest.raises(VocabularyError, match="fast tokenizers"):
        Vocabulary.from_huggingface(object(), eos_ids=[0])


def test_disk_cache(bytelevel_tokenizer, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from constrain.vocab import huggingface as _vocab_hf

    monkeypatch.setenv("CONSTRAIN_CACHE_DIR", str(tmp_path))
    assert vocab_cache_dir() == tmp_path / "vocab"
    first = Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0])
    (path,) = (tmp_path / "vocab").glob("*.npz")

    def boom(*args: object) -> None:
        raise AssertionError("cache miss")

    with monkeypatch.context() as m:
        m.setattr(_vocab_hf, "token_csr", boom)
        again = Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0], vocab_size=500)
    assert again.size == first.size and again.model_vocab_size == 500
    assert again.decode(range(first.size)) == first.decode(range(first.size))
    assert again._trie is not None
    path.write_bytes(b"garbage")  # corrupt: rebuilt and rewritten
    assert Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0]) == first
    assert Vocabulary.load(path).size == first.size
    _rewrite(path, version=VOCAB_FORMAT_VERSION + 7)  # other version: rebuilt too
    assert Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0]) == first
    assert int(np.load(path)["version"]) == VOCAB_FORMAT_VERSION
    path.unlink()
    Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0], cache=False)
    assert not path.exists()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("CONSTRAIN_CACHE_DIR", str(blocker))  # unwritable: warn, still build
    with pytest.warns(RuntimeWarning, match="CONSTRAIN_CACHE_DIR"):
        assert Vocabulary.from_huggingface(bytelevel_tokenizer, eos_ids=[0]) == first
