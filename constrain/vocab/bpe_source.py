"""Stage 4: what canonical tokenization reads from a tokenizer: its merges and its pre-split.

:class:`~constrain.vocab.canonical.CanonicalBpe` needs every merge of two token ids with its
rank, the regex the tokenizer splits text by before merging, its added tokens and, for
SentencePiece-style BPE, its byte-fallback tokens. This module reads them from a Hugging Face
``tokenizers`` tokenizer, a tiktoken rank file or a SentencePiece model file, and refuses, with
a :class:`~constrain.errors.VocabularyError` naming the reason, every tokenizer whose
encodings the relation cannot decide exactly: normalisers (other than the metaspace
replacement), BPE dropout, ``ignore_merges``, SentencePiece user-defined pieces, and
pre-tokenizer regexes that tell apart characters the relation's stand-in text does not (upper
and lower case, scripts, marks).
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
from typing import Any, NamedTuple

from constrain.errors import VocabularyError
from constrain.vocab.huggingface import backend_of, scheme_of

__all__ = [
    "GPT2_PATTERN",
    "METASPACE_PATTERN",
    "ONE_PIECE_PATTERN",
    "BpeSource",
    "huggingface_source",
    "sentencepiece_source",
    "tiktoken_source",
    "unmodelled",
]

# GPT-2's pre-tokenizer regex: what a ByteLevel pre-tokenizer with use_regex splits by
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# a metaspace split keeps the metaspace character (a space in token bytes) with what follows it
METASPACE_PATTERN = r" [^ ]*|[^ ]+"
ONE_PIECE_PATTERN = r"(?s:.+)"
BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# Unicode classes finer than the stand-in's letters, numbers, punctuation and spaces
_FINER = re.compile(r"\\[pP]\{(?!L\}|N\}|S\}|P\})[^}]*\}")


class BpeSource(NamedTuple):
    """A BPE tokenizer as canonical tokenization reads it."""

    merges: list[tuple[int, int, int, int]]
    """``(x, y, result, rank)`` for every merge of two token ids."""
    pattern: str
    """The pre-tokenizer's regex (one match per pre-token)."""
    boundary_ids: tuple[int, ...] = ()
    """Added and special tokens: they split the text on their own."""
    byte_fallback_ids: list[int] | None = None
    """SentencePiece-style BPE: the byte-fallback tokens (``<0x41>``); None: byte-level BPE."""


def unmodelled(pattern: str) -> list[str]:
    """Return why the stand-in text cannot model ``pattern`` (empty: it can)."""
    found = sorted(set(_FINER.findall(pattern)))
    if not found:
        return []
    return [
        f"its pre-tokenizer regex tells apart Unicode classes {', '.join(found)} (case, script "
        "or marks), which the relation's stand-in characters do not"
    ]


def huggingface_source(tokenizer: Any) -> BpeSource:
    """Read a Hugging Face BPE tokenizer (byte-level, or SentencePiece-style with metaspace).

    Raises
    ------
    VocabularyError
        For a tokenizer whose canonical encodings cannot be decided exactly (the message says
        why).
    """
    backend = backend_of(tokenizer)
    spec = json.loads(backend.to_str())
    model = spec.get("model") or {}
    scheme = scheme_of(backend)
    why = []
    if model.get("type") != "BPE":
        why.append(f"the model is {model.get('type')!r}, not BPE")
    if model.get("dropout"):
        why.append("it uses BPE dropout (no single encoding)")
    if model.get("ignore_merges"):
        why.append("it sets ignore_merges (a whole pre-token in the vocabulary skips merges)")
    pattern: str | None = None
    if scheme.kind == "byte_level":
        if spec.get("normalizer"):
            why.append("it has a normaliser (the text the merges see is not the output text)")
        pattern = hf_pattern(spec.get("pre_tokenizer"))
        if pattern is None:
            why.append("its pre-tokenizer is not one regex split plus the byte-level mapping")
    elif scheme.kind == "metaspace":
        if not metaspace_normaliser(spec.get("normalizer"), scheme.replacement):
            why.append(
                "its normaliser does more than write spaces as the metaspace character "
                "(the text the merges see is not the output text)"
            )
        pattern = metaspace_pattern(spec.get("pre_tokenizer"))
        if pattern is None:
            why.append("its pre-tokenizer is not a metaspace split")
    else:
        why.append(f"its tokens are {scheme.kind!r} strings, not byte-level or metaspace")
    if pattern is not None:
        why += unmodelled(pattern)
    if why or pattern is None:
        raise VocabularyError(
            "canonical tokenization needs a BPE tokenizer it can decide exactly "
            f"(byte-level or SentencePiece-style); this one cannot be: {'; '.join(why)}. "
            "Leave canonical off for it"
        )
    ids = backend.get_vocab(with_added_tokens=False)
    merges = []
    for k, pair in enumerate(model.get("merges", [])):
        a, b = pair.split(" ", 1) if isinstance(pair, str) else pair
        x, y, r = ids.get(a), ids.get(b), ids.get(a + b)
        if x is not None and y is not None and r is not None:
            merges.append((x, y, r, k))
    added = backend.get_added_tokens_decoder()
    fallback = None
    if scheme.kind == "metaspace":
        fallback = [i for name, i in ids.items() if BYTE_TOKEN.fullmatch(name)]
    return BpeSource(merges, pattern, tuple(int(i) for i in added), fallback)


def tiktoken_source(path: str | os.PathLike[str], pattern: str) -> BpeSource:
    """Read a tiktoken rank file: a merge wherever two tokens concatenate to a third.

    Raises
    ------
    VocabularyError
        If ``pattern`` tells apart classes the relation does not model.
    """
    why = unmodelled(pattern)
    if why:
        raise VocabularyError(
            f"canonical tokenization cannot decide this tokenizer exactly: {why[0]}. Leave "
            "canonical off for it"
        )
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                ranks[base64.b64decode(parts[0])] = int(parts[1])
    merges = []
    for tok, r in ranks.items():
        for cut in range(1, len(tok)):
            x, y = ranks.get(tok[:cut]), ranks.get(tok[cut:])
            if x is not None and y is not None:
                merges.append((x, y, r, r))
    return BpeSource(merges, pattern)


def sentencepiece_source(path: str | os.PathLike[str]) -> BpeSource:
    """Read a SentencePiece BPE model file (merges by piece score, no pre-split).

    Raises
    ------
    VocabularyError
        If the model is not BPE, normalises text or has user-defined pieces.
    """
    spm: Any = importlib.import_module("sentencepiece")
    sentencepiece_model_pb2: Any = importlib.import_module("sentencepiece.sentencepiece_model_pb2")
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as fh:
        proto.ParseFromString(fh.read())
    why = []
    if proto.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE:
        why.append("it is not a BPE model")
    norm = proto.normalizer_spec
    if norm.name not in ("identity", "") or norm.remove_extra_whitespaces:
        why.append(f"it normalises text (rule {norm.name!r})")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    if any(p.type == kinds.USER_DEFINED for p in proto.pieces):
        why.append("it has user-defined pieces (matched before BPE)")
    if why:
        raise VocabularyError(
            "canonical tokenization needs a SentencePiece BPE model it can decide exactly; "
            f"this one cannot be: {'; '.join(why)}. Leave canonical off for it"
        )
    normal = [i for i in range(sp.get_piece_size()) if proto.pieces[i].type == kinds.NORMAL]
    order = sorted(normal, key=lambda i: (-sp.get_score(i), i))
    rank = {i: k for k, i in enumerate(order)}
    ids = {sp.id_to_piece(i): i for i in normal}
    merges = []
    for piece, r in ids.items():
        for cut in range(1, len(piece)):
            x, y = ids.get(piece[:cut]), ids.get(piece[cut:])
            if x is not None and y is not None:
                merges.append((x, y, r, rank[r]))
    fallback = [i for i in range(sp.get_piece_size()) if sp.is_byte(i)]
    special = [i for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)]
    return BpeSource(merges, ONE_PIECE_PATTERN, tuple(special), fallback)


def hf_pattern(pre: Any) -> str | None:
    """Return the one regex a Hugging Face byte-level pre-tokenizer splits by, or None."""
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre]
    pattern = None
    for step in steps:
        kind = (step or {}).get("type")
        if kind == "ByteLevel":
            if step.get("add_prefix_space"):
                return None
            if step.get("use_regex", True):
                if pattern is not None:
                    return None
                pattern = GPT2_PATTERN
        elif kind == "Split":
            regex_pattern = (step.get("pattern") or {}).get("Regex")
            if regex_pattern is None or pattern is not None or step.get("invert"):
                return None
            if step.get("behavior") != "Isolated":
                return None
            pattern = regex_pattern
        else:
            return None
    return pattern


def metaspace_normaliser(norm: Any, replacement: str) -> bool:
    """Whether a normaliser only writes spaces as ``replacement`` (and prepends one)."""
    steps = norm.get("normalizers", []) if norm and norm.get("type") == "Sequence" else [norm]
    for step in steps:
        if step is None:
            continue
        kind = step.get("type")
        if kind == "Prepend" and step.get("prepend") == replacement:
            continue  # the text's first word: not part of a continuation's encoding
        if kind == "Replace" and step.get("content") == replacement:
            if (step.get("pattern") or {}).get("String") == " ":
                continue
        return False
    return True


def metaspace_pattern(pre: Any) -> str | None:
    """Return the split of a metaspace pre-tokenizer (none: one piece), or None."""
    if pre is None:
        return ONE_PIECE_PATTERN
    if pre.get("type") != "Metaspace":
        return None
    return METASPACE_PATTERN if pre.get("split", True) else ONE_PIECE_PATTERN
