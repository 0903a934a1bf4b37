"""Hugging Face tokenizers → token bytes (the private half of :meth:`Vocabulary.from_huggingface`).

The tokenizer kind is read from the configuration of its components (the ``decoder``,
``pre_tokenizer`` and ``normalizer`` entries of ``backend_tokenizer.to_str()``, read one component
at a time through ``__getstate__``), never from a model name:

* ``byte_level``: a ``ByteLevel`` decoder or pre-tokenizer; every character of a token string is
  one byte through the GPT-2 bytes-to-unicode table.
* ``metaspace``: a ``Metaspace`` decoder/pre-tokenizer, or a ``Replace`` of the metaspace character
  by a space in the decoder (Llama 2, Mistral, Gemma); that character is a space and, with byte
  fallback, ``<0xNN>`` is one byte.
* ``raw``: a decoder made only of ``ByteFallback``/``Fuse``/``Strip``/``Replace``: token strings
  are their UTF-8 text.

Everything else (WordPiece, BPE with a continuing-subword prefix or end-of-word suffix, no
decoder) is refused: such tokens have no fixed bytes, the decoder inserts text between them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, NamedTuple

import numpy as np

from constrain.errors import VocabularyError

_KEY_TAG = b"constrain.vocab.hf/1\x00"
_RAW_DECODERS = {"ByteFallback", "Fuse", "Strip", "Replace", "Sequence"}


class Scheme(NamedTuple):
    """How the token strings of a tokenizer map to bytes."""

    kind: str  # "byte_level" | "metaspace" | "raw"
    replacement: str  # the metaspace character ("" unless kind == "metaspace")
    byte_fallback: bool  # "<0xNN>" tokens are single bytes


class Added(NamedTuple):
    """One added token: its content, flags and the model's own string for that id (if any)."""

    content: str
    special: bool
    normalized: bool
    model_string: str | None


def backend_of(tokenizer: Any) -> Any:
    """Return the ``tokenizers.Tokenizer`` behind a transformers tokenizer (or itself)."""
    try:
        import tokenizers
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise VocabularyError("Vocabulary.from_huggingface needs the `tokenizers` package") from err
    if isinstance(tokenizer, tokenizers.Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, tokenizers.Tokenizer):
        return backend
    raise VocabularyError(
        f"{type(tokenizer).__name__} has no Rust `backend_tokenizer`: only fast tokenizers are "
        "supported. Load it with AutoTokenizer.from_pretrained(..., use_fast=True) or pass a "
        "tokenizers.Tokenizer"
    )


# the tokenizers of the last vocabularies read (a server that loads many keeps a few)
_TOKENIZERS: dict[str, Any] = {}
_KEEP_TOKENIZERS = 8


def remember_tokenizer(fingerprint: str, backend: Any) -> None:
    """Keep the tokenizer a vocabulary was read from (by its fingerprint; the last one wins).

    Only the last ``_KEEP_TOKENIZERS`` are kept, so a long-running process does not hold
    every tokenizer it ever read.
    """
    _TOKENIZERS.pop(fingerprint, None)
    _TOKENIZERS[fingerprint] = backend
    while len(_TOKENIZERS) > _KEEP_TOKENIZERS:
        _TOKENIZERS.pop(next(iter(_TOKENIZERS)))


def tokenizer_of(fingerprint: str) -> Any:
    """Return the tokenizer a vocabulary of this fingerprint was read from, or None."""
    return _TOKENIZERS.get(fingerprint)


def token_strings(backend: Any) -> tuple[list[str | None], dict[int, Added]]:
    """Return the string of every id (``None`` for holes) and the added tokens by id."""
    decoder = backend.get_added_tokens_decoder()
    n = int(backend.get_vocab_size(with_added_tokens=True))
    if decoder:
        n = max(n, max(decoder) + 1)
    while backend.id_to_token(n) is not None:
        n += 1
    strings: list[str | None] = [backend.id_to_token(i) for i in range(n)]
    model = backend.model
    added = {
        int(i): Added(str(t.content), bool(t.special), bool(t.normalized), model.id_to_token(i))
        for i, t in decoder.items()
    }
    return strings, added


def _component(backend: Any, name: str) -> Any:
    obj = getattr(backend, name, None)
    if obj is None:
        return None
    return json.loads(obj.__getstate__())


def _walk(node: Any) -> list[dict[str, Any]]:
    """Every JSON object with a ``type`` inside ``node`` (sequences flattened)."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "type" in node:
            out.append(node)
        for value in node.values():
            out.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_walk(value))
    return out


def scheme_of(backend: Any) -> Scheme:
    """Detect how token strings map to bytes; raise VocabularyError when they do not."""
    model = backend.model
    model_type = type(model).__name__
    decoder = _walk(_component(backend, "decoder"))
    pre = _walk(_component(backend, "pre_tokenizer"))
    norm = _walk(_component(backend, "normalizer"))
    dec_types = {d["type"] for d in decoder}
    pre_types = {d["type"] for d in pre}
    byte_fallback = bool(getattr(model, "byte_fallback", False)) or "ByteFallback" in dec_types
    found = (
        f"model={model_type}, decoder={sorted(dec_types) or None}, "
        f"pre_tokenizer={sorted(pre_types) or None}"
    )
    if model_type == "WordPiece" or "WordPiece" in dec_types:
        raise VocabularyError(
            f"unsupported tokenizer ({found}): WordPiece tokens have no fixed bytes (the decoder "
            "joins words with spaces and strips the '##' continuation prefix). constrain supports "
            "byte-level BPE (GPT-2, Llama 3, Qwen) and SentencePiece-style tokenizers"
        )
    if getattr(model, "continuing_subword_prefix", None) or getattr(
        model, "end_of_word_suffix", None
    ):
        raise VocabularyError(
            f"unsupported tokenizer ({found}): BPE with a continuing-subword prefix or an "
            "end-of-word suffix (e.g. '</w>') decodes to context-dependent text"
        )
    if "ByteLevel" in dec_types or "ByteLevel" in pre_types:
        return Scheme("byte_level", "", False)
    for node in decoder + pre:
        if node["type"] == "Metaspace":
            return Scheme("metaspace", str(node.get("replacement", "\u2581")), byte_fallback)
    for node in decoder:
        pattern = node.get("pattern", {})
        if node["type"] == "Replace" and node.get("content") == " " and "String" in pattern:
            return Scheme("metaspace", str(pattern["String"]), byte_fallback)
    for node in norm:
        pattern = node.get("pattern", {})
        if node["type"] == "Replace" and pattern.get("String") == " " and node.get("content"):
            return Scheme("metaspace", str(node["content"]), byte_fallback)
    if dec_types and dec_types <= _RAW_DECODERS:
        return Scheme("raw", "", byte_fallback)
    raise VocabularyError(
        f"unsupported tokenizer ({found}): cannot tell which bytes each token stands for. "
        "constrain supports byte-level BPE (a ByteLevel decoder) and SentencePiece-style "
        "tokenizers (Metaspace or a '\u2581' -> ' ' Replace decoder, optional byte fallback)"
    )


def cache_key(scheme: Scheme, strings: list[str | None], added: dict[int, Added]) -> str:
    """SHA-256 of everything the token bytes depend on: scheme, every string, added tokens."""
    h = hashlib.sha256(_KEY_TAG)
    h.update(repr(tuple(scheme)).encode())
    lengths = np.fromiter((-1 if s is None else len(s) for s in strings), dtype=np.int64)
    h.update(lengths.astype("<i8").tobytes())
    h.update("".join(s for s in strings if s is not None).encode("utf-8", "surrogatepass"))
    h.update(repr(sorted(added.items())).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def _gpt2_chars() -> tuple[dict[int, str], frozenset[str]]:
    """GPT-2 bytes-to-unicode, inverted: a ``str.translate`` table char -> chr(byte), and keys."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    table = {c: chr(b) for b, c in chars.items()}
    return table, frozenset(chr(c) for c in chars.values())


@functools.lru_cache(maxsize=1)
def _gpt2_lut() -> np.ndarray[Any, np.dtype[np.int16]]:
    """UTF-16 code unit -> byte of the GPT-2 table, -1 for characters outside it."""
    lut = np.full(65536, -1, dtype=np.int16)
    for char, byte in _gpt2_chars()[0].items():
        lut[char] = ord(byte)
    return lut


def _byte_level(strings: list[str]) -> list[bytes]:
    table, alphabet = _gpt2_chars()
    # Like the ByteLevel decoder: a string with a character outside the table is raw UTF-8.
    return [
        s.translate(table).encode("latin-1") if set(s) <= alphabet else s.encode("utf-8")
        for s in strings
    ]


def _fallback_bytes() -> dict[str, bytes]:
    out = {f"<0x{b:02X}>": bytes([b]) for b in range(256)}
    out.update({f"<0x{b:02x}>": bytes([b]) for b in range(256)})
    return out


def token_csr(
    scheme: Scheme, strings: list[str | None], added: dict[int, Added]
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.uint8]]]:
    """Convert every id to its bytes, as CSR ``(indptr, data)``; specials and holes are empty."""
    model_strings: list[str | None] = list(strings)
    content: dict[int, str] = {}
    for i, tok in added.items():
        if tok.special:
            model_strings[i] = None
        elif tok.model_string is not None:
            model_strings[i] = tok.model_string
        else:
            model_strings[i] = None
            text = tok.content
            if scheme.kind == "metaspace" and tok.normalized:
                text = text.replace(scheme.replacement, " ")
            content[i] = text
    n = len(model_strings)
    ids = [i for i, s in enumerate(model_strings) if s]
    regular = [model_strings[i] or "" for i in ids]
    if scheme.kind == "byte_level" and not content:
        # Fast path: every character in the table (so in the BMP: one UTF-16 unit each).
        codes = np.frombuffer("".join(regular).encode("utf-16-le"), dtype="<u2")
        mapped = _gpt2_lut()[codes]
        if (mapped >= 0).all():
            lengths = np.zeros(n + 1, dtype=np.int64)
            lengths[np.array(ids, dtype=np.int64) + 1] = np.fromiter(map(len, regular), np.int64)
            return np.cumsum(lengths), mapped.astype(np.uint8)
    if scheme.kind == "byte_level":
        converted = _byte_level(regular)
    else:
        fallback = _fallback_bytes() if scheme.byte_fallback else {}
        repl = scheme.replacement
        if repl:
            converted = [fallback.get(s) or s.replace(repl, " ").encode() for s in regular]
        else:
            converted = [fallback.get(s) or s.encode() for s in regular]
    pieces: list[bytes | None] = [None] * n
    for i, b in zip(ids, converted, strict=True):
        pieces[i] = b
    for i, text in content.items():
        pieces[i] = text.encode("utf-8")
    lengths = np.zeros(n + 1, dtype=np.int64)
    lengths[1:] = [0 if p is None else len(p) for p in pieces]
    data = np.frombuffer(b"".join(p for p in pieces if p), dtype=np.uint8)
    return np.cumsum(lengths), data


def as_token_ids(value: Any) -> set[int]:
    """Return a tokenizer attribute holding token ids (None, an int or a list) as a set."""
    if value is None:
        return set()
    if isinstance(value, (list, tuple, set, frozenset)):
        return {int(v) for v in value if v is not None}
    return {int(value)}


def hf_special_ids(tokenizer: Any) -> set[int]:
    """Return the special ids a transformers tokenizer declares on top of its backend."""
    out = as_token_ids(getattr(tokenizer, "all_special_ids", None))
    decoder = getattr(tokenizer, "added_tokens_decoder", None)
    if isinstance(decoder, dict):
        out |= {int(i) for i, t in decoder.items() if getattr(t, "special", False)}
    return out


def hf_eos_ids(tokenizer: Any) -> set[int]:
    """Return the tokenizer's ``eos_token_id`` (an int or a list) as a set."""
    return as_token_ids(getattr(tokenizer, "eos_token_id", None))


def hf_special_names(tokenizer: Any, added: dict[int, Added]) -> dict[str, int]:
    """Return ``{name: id}`` of the special tokens a tokenizer names.

    Parameters
    ----------
    tokenizer : Any
        A transformers tokenizer or a ``tokenizers.Tokenizer``.
    added : dict of int to Added
        Its backend's added tokens (:func:`token_strings`).

    Returns
    -------
    dict of str to int
        The special added tokens' contents, then the pairs of ``all_special_tokens`` and
        ``all_special_ids`` and the special entries of ``added_tokens_decoder`` (transformers
        tokenizers only); the first id given to a name wins.
    """
    names: dict[str, int] = {}
    for i, tok in sorted(added.items()):
        if tok.special and tok.content:
            names.setdefault(tok.content, i)
    strings = getattr(tokenizer, "all_special_tokens", None)
    ids = getattr(tokenizer, "all_special_ids", None)
    if isinstance(strings, (list, tuple)) and isinstance(ids, (list, tuple)):
        for name, tid in zip(strings, ids, strict=False):
            if isinstance(name, str) and name and isinstance(tid, int):
                names.setdefault(name, tid)
    decoder = getattr(tokenizer, "added_tokens_decoder", None)
    if isinstance(decoder, dict):
        for tid, tok in sorted(decoder.items()):
            content = getattr(tok, "content", None)
            if getattr(tok, "special", False) and isinstance(content, str) and content:
                names.setdefault(content, int(tid))
    return names
