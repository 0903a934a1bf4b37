"""Stage 4a: the exact bytes of every token id, and the flat token trie over them.

A :class:`Vocabulary` stores, for each token id ``0 <= i < size``, the bytes the token appends to
the output text, as CSR arrays::

    token_bytes[token_indptr[i]:token_indptr[i + 1]]      # the bytes of token i

Special (control) tokens, EOS included, and ids the tokenizer leaves unused have *empty* bytes:
grammar text never produces them, and ``special_ids`` lists exactly those ids. ``eos_ids`` are the
end-of-sequence tokens a matcher allows exactly when the grammar accepts.

The token trie (llguidance ``docs/toktrie.md``) covers the non-special tokens, laid out flat in
DFS pre-order: node 0 is the root (the empty string), the first child of node ``n`` is ``n + 1``
(when ``n + 1 < node_end[n]``), the next sibling of a child ``c`` is ``node_end[c]``, and children
are sorted by byte. ``node_token[n]`` is the smallest token id whose bytes spell the path to ``n``
(-1 when none); the other ids with the same bytes follow through ``token_next_dup``. The trie is
built on first access with vectorised numpy (sort the byte strings, one pass) and cached.

Tokenizer conventions (:meth:`Vocabulary.from_huggingface`):

* byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM): each character of a token string stands for one
  byte through the GPT-2 bytes-to-unicode table (``"Ġ"`` is a space);
* SentencePiece style (Llama 2, Mistral, Gemma): ``"▁"`` is a space and, with byte fallback,
  ``"<0xNN>"`` is the single byte ``0xNN``. The tokenizer's normaliser or pre-tokenizer usually
  *prepends* ``"▁"`` to the input (a ``Metaspace`` with ``prepend_scheme="first"`` does not when
  the text already starts with a space) and its decoder strips one leading space, so the
  concatenated token bytes of ``encode(text)`` are ``b" " + text.encode()``, not
  ``text.encode()``: a token's bytes are what it adds in the middle of a text, which is where
  constrained generation happens.
"""

from __future__ import annotations

import hashlib
import os
import types
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from constrain._types import (
    BYTE_DTYPE,
    INDPTR_DTYPE,
    TOKEN_DTYPE,
    ByteArray,
    Int32Array,
    Int64Array,
)
from constrain.automata.utf8 import special_bytes
from constrain.errors import VocabularyError
from constrain.vocab import huggingface
from constrain.vocab.special import check_special_names, decode_text, special_byte_arrays
from constrain.vocab.tiktoken_file import read_tiktoken
from constrain.vocab.trie import Trie, build_trie, frozen
from constrain.vocab.vocab_file import (
    FORMAT_TAG,
    TRIE_FIELDS,
    VOCAB_FORMAT_VERSION,
    read_vocab_file,
    special_name_arrays,
    special_names_of,
    vocab_cache_dir,
    write_vocab_file,
)

__all__ = ["VOCAB_FORMAT_VERSION", "Vocabulary", "vocab_cache_dir"]

# The character bound of the short string slice that mask tables take inside strings with a
# maxLength (constrain.tables): 699 of the 121,825 slice tokens of Llama 3 are longer.
SHORT_SLICE_CHARS = 16


class Vocabulary:
    """The exact bytes of every token id of a tokenizer, plus a flat token trie.

    Immutable: every array is read-only and the object is safe to share between threads and
    matchers. Build one with :meth:`from_huggingface`, :meth:`from_tiktoken`, :meth:`from_bytes` or
    :meth:`load`; the constructor is the low-level path over ready CSR arrays.

    Parameters
    ----------
    token_indptr : (V + 1,) int64
        CSR offsets: token ``i`` is ``token_bytes[token_indptr[i]:token_indptr[i + 1]]``.
    token_bytes : (N,) uint8
        Concatenated token bytes.
    eos_ids : iterable of int, optional
        End-of-sequence ids; each must have empty bytes (be special).
    model_vocab_size : int, optional
        Width of the model's logits (``>= V``); ids ``V..model_vocab_size-1`` are padding that is
        never allowed. Defaults to ``V``.
    special_names : mapping of str to int, optional
        Names of special tokens (``{"<|im_end|>": 151645}``), by which grammars require them
        (Lark ``<|im_end|>``) and :meth:`decode_text` prints them.

    Raises
    ------
    VocabularyError
        If the arrays are inconsistent or an EOS id is out of range or has bytes.

    Notes
    -----
    Token ids with empty bytes are exactly the special ids. The trie arrays (``node_*``,
    ``token_next_dup``) are built on first access, in about 0.1 s for a 128k vocabulary; the
    private ``_trie`` argument passes a trie already known to be these tokens' (read from a
    validated file, or derived from another vocabulary), which is not checked again.
    """

    __slots__ = (
        "_eos", "_fingerprint", "_indptr", "_lengths", "_max_length", "_model_vocab_size",
        "_names", "_special", "_trie", "_slice", "_body_chars", "_slice_bits", "_bytes",
        "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        token_indptr: ArrayLike,
        token_bytes: ArrayLike,
        *,
        eos_ids: Iterable[int] = (),
        model_vocab_size: int | None = None,
        special_names: Mapping[str, int] | None = None,
        _trie: Trie | None = None,
    ) -> None:
        indptr = np.array(token_indptr, dtype=INDPTR_DTYPE)
        data = np.array(token_bytes, dtype=BYTE_DTYPE)
        if indptr.ndim != 1 or data.ndim != 1 or indptr.shape[0] < 2:
            raise VocabularyError(
                f"token_indptr must be 1-D with at least 2 entries and token_bytes 1-D; got "
                f"shapes {indptr.shape} and {data.shape}"
            )
        lengths = np.diff(indptr)
        if indptr[0] != 0 or indptr[-1] != data.shape[0] or (lengths < 0).any():
            raise VocabularyError(
                "token_indptr must start at 0, be non-decreasing and end at len(token_bytes)"
            )
        size = indptr.shape[0] - 1
        mvs = size if model_vocab_size is None else int(model_vocab_size)
        if mvs < size:
            raise VocabularyError(
                f"model_vocab_size={mvs} is smaller than the {size} token ids of the vocabulary"
            )
        eos = np.unique(np.array(list(eos_ids), dtype=np.int64))
        if eos.size and (eos[0] < 0 or eos[-1] >= size):
            raise VocabularyError(f"eos_ids {eos.tolist()} out of range [0, {size})")
        if (lengths[eos] != 0).any():
            raise VocabularyError(
                f"eos ids {eos[lengths[eos] != 0].tolist()} have bytes; EOS tokens must be special"
            )
        self._indptr: Int64Array = frozen(indptr)
        self._bytes: ByteArray = frozen(data)
        self._lengths: Int32Array = frozen(lengths.astype(np.int32))
        self._max_length = int(lengths.max(initial=0))
        self._special: Int32Array = frozen(np.flatnonzero(lengths == 0).astype(TOKEN_DTYPE))
        self._eos: Int32Array = frozen(eos.astype(TOKEN_DTYPE))
        self._model_vocab_size = mvs
        self._names = types.MappingProxyType(check_special_names(special_names or {}, size))
        self._fingerprint: str | None = None
        self._trie: Trie | None = _trie
        self._slice: dict[int, tuple[np.ndarray, Trie]] = {}
        self._body_chars: Int64Array | None = None
        self._slice_bits: dict[int, np.ndarray] = {}

    # ---------------------------------------------------------------- plain attributes
    @property
    def size(self) -> int:
        """Number of token ids the tokenizer defines (V); ids ``>= size`` are padding."""
        return int(self._indptr.shape[0] - 1)

    @property
    def model_vocab_size(self) -> int:
        """Width of the model's logits (``>= size``); use it to allocate bitmasks."""
        return self._model_vocab_size

    @property
    def token_indptr(self) -> Int64Array:
        """``(V + 1,) int64`` CSR offsets into :attr:`token_bytes`."""
        return self._indptr

    @property
    def token_bytes(self) -> ByteArray:
        """``(N,) uint8`` concatenated bytes of all tokens (specials contribute nothing)."""
        return self._bytes

    @property
    def token_lengths(self) -> Int32Array:
        """``(V,) int32`` byte length of each token (0 exactly for special ids)."""
        return self._lengths

    @property
    def max_token_length(self) -> int:
        """Byte length of the longest token."""
        return self._max_length

    @property
    def special_ids(self) -> Int32Array:
        """``(k,) int32`` sorted ids of special, control and unused tokens (empty bytes)."""
        return self._special

    @property
    def eos_ids(self) -> Int32Array:
        """``(k,) int32`` sorted end-of-sequence ids, allowed exactly when the grammar accepts."""
        return self._eos

    @property
    def special_names(self) -> Mapping[str, int]:
        """Read-only ``{name: id}`` of the named special tokens (may be empty)."""
        return self._names

    @property
    def fingerprint(self) -> str:
        """SHA-256 hex digest of the content (bytes, specials, EOS, sizes, names): a cache key."""
        if self._fingerprint is None:
            h = hashlib.sha256(b"constrain.Vocabulary/1\x00")
            h.update(np.array([self.size, self._model_vocab_size], dtype="<i8").tobytes())
            h.update(self._indptr.astype("<i8").tobytes())
            h.update(self._bytes.tobytes())
            h.update(b"\x00special")
            h.update(self._special.astype("<i4").tobytes())
            h.update(b"\x00eos")
            h.update(self._eos.astype("<i4").tobytes())
            # special_names are not hashed: they only resolve names when a grammar is
            # compiled, and a compiled grammar holds ids (whose bytes are hashed above)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    # ---------------------------------------------------------------- trie
    def prepare(self) -> Vocabulary:
        """Build now what mask tables derive from the vocabulary once; return ``self``.

        The token trie and the JSON string-body slices (:meth:`string_slice`, with the bound
        mask tables use) are otherwise built the first time a mask needs them, inside that
        mask's time (~0.1-0.3 s for 128k tokens). A server can call this at start-up; the
        benchmarks call it in their per-tokenizer preparation, as the peers do theirs.
        """
        self._get_trie()
        self.string_slice()
        self.string_slice(SHORT_SLICE_CHARS)
        return self

    def _get_trie(self) -> Trie:
        trie = self._trie
        if trie is None:
            trie = build_trie(self._indptr, self._bytes)
            self._trie = trie
        return trie

    @property
    def node_byte(self) -> ByteArray:
        """``(M,) uint8`` byte on the edge into each trie node (0 for the root)."""
        return self._get_trie().node_byte

    @property
    def node_token(self) -> Int32Array:
        """``(M,) int32`` smallest token id whose bytes end at the node, or -1."""
        return self._get_trie().node_token

    @property
    def node_end(self) -> Int32Array:
        """``(M,) int32`` index one past the node's subtree (the next sibling, if any)."""
        return self._get_trie().node_end

    @property
    def node_depth(self) -> Int32Array:
        """``(M,) int32`` byte depth of each node (root 0)."""
        return self._get_trie().node_depth

    @property
    def token_next_dup(self) -> Int32Array:
        """``(V,) int32`` next larger id with the same bytes as this token, or -1."""
        return self._get_trie().token_next_dup

    def string_slice(self, max_chars: int = 0) -> tuple[np.ndarray, Trie]:
        """Return the JSON string-body token slice: its bitset and the trie of the other tokens.

        ``bits`` (``(ceil(V/32),) uint32``) holds the tokens of complete raw JSON string text
        (:meth:`body_chars`), the trie every other token; mask tables take the slice wholesale
        at lexer states that loop on string-body characters. With ``max_chars > 0`` only its
        tokens of at most that many characters (the trie holds the rest): a ``maxLength``.
        Computed once per vocabulary and ``max_chars`` (about 0.1 s for 128k tokens).
        """
        cached = self._slice.get(max_chars)
        if cached is None:
            from constrain.vocab.trie import subset_trie

            trie = subset_trie(self._indptr, self._bytes, ~self._slice_mask(max_chars))
            trie = trie._replace(token_next_dup=trie.token_next_dup[: self.size])
            cached = self._slice[max_chars] = (self.string_slice_bits(max_chars), trie)
        return cached

    def string_slice_bits(self, max_chars: int = 0) -> np.ndarray:
        """Return :meth:`string_slice`'s bitset alone (no trie: ~0.1 ms; cached, read-only)."""
        bits = self._slice_bits.get(max_chars)
        if bits is None:
            from constrain.vocab.trie import token_bits

            bits = frozen(token_bits(self._slice_mask(max_chars), self.size))
            self._slice_bits[max_chars] = bits
        return bits

    def _slice_mask(self, max_chars: int) -> np.ndarray:
        chars = self.body_chars
        return (chars >= 0) if max_chars <= 0 else (chars >= 0) & (chars <= max_chars)

    @property
    def body_chars(self) -> Int64Array:
        """``(V',) int64`` characters of each complete raw JSON string-body token, else -1."""
        if self._body_chars is None:
            from constrain.vocab.trie import body_token_chars

            self._body_chars = frozen(body_token_chars(self._indptr, self._bytes, self._special))
        return self._body_chars

    @property
    def num_nodes(self) -> int:
        """Number of trie nodes ``M``, root included."""
        return int(self._get_trie().node_byte.shape[0])

    # ---------------------------------------------------------------- lookups
    def token_bytes_of(self, token_id: int) -> bytes:
        """Return the bytes of one token (``b""`` for special and padding ids).

        Parameters
        ----------
        token_id : int
            Id in ``[0, model_vocab_size)``.

        Returns
        -------
        bytes
            The token's bytes.

        Raises
        ------
        ValueError
            If the id is outside ``[0, model_vocab_size)``.
        """
        tid = int(token_id)
        if not 0 <= tid < self._model_vocab_size:
            raise ValueError(f"token id {tid} out of range [0, {self._model_vocab_size})")
        if tid >= self.size:
            return b""
        return self._bytes[self._indptr[tid] : self._indptr[tid + 1]].tobytes()

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of a sequence of tokens.

        Parameters
        ----------
        token_ids : iterable of int
            Ids in ``[0, model_vocab_size)`` (a list, a numpy array, a tensor); special and
            padding ids add nothing.

        Returns
        -------
        bytes
            The decoded bytes (not necessarily valid UTF-8).

        Raises
        ------
        ValueError
            If an id is outside ``[0, model_vocab_size)``.
        """
        if isinstance(token_ids, np.ndarray):
            ids = token_ids.astype(np.int64, copy=False).ravel()
        else:
            ids = np.array([int(t) for t in token_ids], dtype=np.int64)
        if ids.size == 0:
            return b""
        bad = (ids < 0) | (ids >= self._model_vocab_size)
        if bad.any():
            raise ValueError(
                f"token id {int(ids[bad][0])} out of range [0, {self._model_vocab_size})"
            )
        ids = ids[ids < self.size]
        starts = self._indptr[ids]
        lens = self._indptr[ids + 1] - starts
        total = int(lens.sum())
        offs = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total)
        return self._bytes[offs].tobytes()

    def decode_text(self, token_ids: Iterable[int]) -> str:
        """Return the text of a sequence of tokens, special tokens written by name.

        Parameters
        ----------
        token_ids : iterable of int
            Ids in ``[0, model_vocab_size)``.

        Returns
        -------
        str
            Ordinary tokens' bytes decoded as UTF-8 (``errors="replace"``), a special token with
            a name (:attr:`special_names`) as that name; other special ids add nothing.

        Raises
        ------
        ValueError
            If an id is outside ``[0, model_vocab_size)``.
        """
        return decode_text(((int(t), self.token_bytes_of(t)) for t in token_ids), self._names)

    def with_special_bytes(self, token_ids: Iterable[int]) -> Vocabulary:
        """Return the vocabulary in which the given special tokens can be matched by id.

        Each id gets the 4 bytes of its pseudo character (0xFF and 3 continuation bytes), which
        :func:`constrain.ir.special_token` matches; every ordinary token containing byte 0xFF
        becomes special (empty), so no text spells those bytes (:mod:`constrain.vocab.special`).

        Parameters
        ----------
        token_ids : iterable of int
            Special ids (empty bytes), not EOS ids, below ``2**18``.

        Returns
        -------
        Vocabulary
            ``self`` when ``token_ids`` is empty; else a new vocabulary with the same EOS ids,
            ``model_vocab_size`` and :attr:`special_names`.

        Raises
        ------
        VocabularyError
            If an id is out of range, an ordinary token or an EOS token (the message says why).
        """
        ids = {int(i) for i in token_ids}  # ids that already have their bytes stay as they are
        ids -= {i for i in ids if 0 <= i < self.size and self.token_bytes_of(i) == special_bytes(i)}
        if not ids:
            return self
        eos = self._eos.tolist()
        indptr, data = special_byte_arrays(self._indptr, self._bytes, self._lengths, eos, ids)
        mvs = self._model_vocab_size
        return Vocabulary(
            indptr, data, eos_ids=eos, model_vocab_size=mvs, special_names=self._names
        )

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"Vocabulary(size={self.size}, model_vocab_size={self._model_vocab_size}, "
            f"special={self._special.shape[0]}, eos_ids={self._eos.tolist()}, "
            f"fingerprint={self.fingerprint[:12]})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __reduce__(self) -> tuple[Any, ...]:
        names = dict(self._names)
        return (_rebuild, (self._indptr, self._bytes, self._eos, self._model_vocab_size, names))

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes | bytearray | memoryview | None],
        *,
        eos_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        model_vocab_size: int | None = None,
        special_names: Mapping[str, int] | None = None,
    ) -> Vocabulary:
        """Build a vocabulary from the bytes of each token id.

        Parameters
        ----------
        tokens : sequence of bytes or None
            ``tokens[i]`` is the byte string of id ``i``; ``None`` (or ``b""``) marks a special or
            unused id.
        eos_ids : iterable of int, optional
            End-of-sequence ids; they become special (their bytes, if any, are dropped).
        special_ids : iterable of int, optional
            Further ids to treat as special (bytes dropped).
        model_vocab_size : int, optional
            Logits width, ``>= len(tokens)``.
        special_names : mapping of str to int, optional
            Names of special tokens (:attr:`special_names`); the named ids become special.

        Returns
        -------
        Vocabulary

        Raises
        ------
        TypeError
            If a token is not bytes-like or None (e.g. a ``str``: encode it first).
        VocabularyError
            If an id is out of range.
        """
        n = len(tokens)
        eos = [int(i) for i in eos_ids]
        names = dict(special_names or {})
        drop = {int(i) for i in special_ids} | set(eos) | {int(i) for i in names.values()}
        bad = [i for i in drop if not 0 <= i < n]
        if bad:
            raise VocabularyError(f"special/eos ids {sorted(bad)} out of range [0, {n})")
        table = list(tokens)
        for i in drop:
            table[i] = None
        for i, tok in enumerate(table):
            if tok is not None and not isinstance(tok, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"token {i} is {type(tok).__name__}, expected bytes or None "
                    f"(use .encode('utf-8') for text)"
                )
        indptr, data = _csr(table)
        return cls(
            indptr, data, eos_ids=eos, model_vocab_size=model_vocab_size, special_names=names
        )

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike[str],
        *,
        special_tokens: Mapping[str, int] | None = None,
        eos_tokens: Sequence[str] = (),
        model_vocab_size: int | None = None,
    ) -> Vocabulary:
        """Build a vocabulary from a tiktoken rank file (lines ``base64(token_bytes) rank``).

        Parameters
        ----------
        path : str or PathLike
            The ``.tiktoken`` file.
        special_tokens : mapping of str to int, optional
            Special tokens and their ids (e.g. ``{"<|endoftext|>": 100257}``); they get empty bytes
            and are the vocabulary's :attr:`special_names`.
        eos_tokens : sequence of str, optional
            Names in ``special_tokens`` that end a sequence.
        model_vocab_size : int, optional
            Logits width, ``>=`` the number of ids.

        Returns
        -------
        Vocabulary

        Raises
        ------
        VocabularyError
            If the file is malformed, a rank repeats, a special id collides with a rank, or an
            EOS name is not a special token.
        """
        specials = dict(special_tokens or {})
        table = read_tiktoken(path, specials, eos_tokens)
        return cls.from_bytes(
            table,
            eos_ids=[specials[t] for t in eos_tokens],
            special_ids=specials.values(),
            model_vocab_size=model_vocab_size,
            special_names=specials,
        )

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        *,
        vocab_size: int | None = None,
        eos_ids: Iterable[int] | None = None,
        cache: bool = True,
    ) -> Vocabulary:
        """Build a vocabulary from a Hugging Face tokenizer.

        Parameters
        ----------
        tokenizer : transformers tokenizer or tokenizers.Tokenizer
            A fast ``transformers`` tokenizer (anything with ``backend_tokenizer``) or a raw
            ``tokenizers.Tokenizer``. Byte-level BPE and SentencePiece-style (metaspace, byte
            fallback) tokenizers are supported; WordPiece and other tokenizers whose tokens have no
            fixed bytes are refused.
        vocab_size : int, optional
            The model's logits width. It may exceed the tokenizer's id count (padding). It may
            be smaller only when every cut id is a special token (e.g. Llama 3.2 Vision's
            ``<|image|>``), never an EOS.
        eos_ids : iterable of int, optional
            EOS ids, added to ``tokenizer.eos_token_id`` when the tokenizer has one.
        cache : bool, optional
            Reuse/write the on-disk cache in :func:`vocab_cache_dir` (default True).

        Returns
        -------
        Vocabulary

        Raises
        ------
        VocabularyError
            If the tokenizer kind is unsupported, no EOS id can be found (pass ``eos_ids=``) or
            ``vocab_size`` would cut a non-special token.

        Notes
        -----
        Special added tokens get empty bytes and their names (the tokenizer's special added
        tokens and ``all_special_tokens``) are :attr:`special_names`; non-special added tokens
        get their content as
        UTF-8 (with the metaspace character read as a space for normalised SentencePiece-style
        tokens). The cache key is the SHA-256 of everything the bytes depend on: the tokenizer
        kind, every token string and the added tokens; a corrupt or other-version cache file is
        rebuilt.
        """
        backend = huggingface.backend_of(tokenizer)
        scheme = huggingface.scheme_of(backend)
        strings, added = huggingface.token_strings(backend)
        key = huggingface.cache_key(scheme, strings, added)
        base = _cache_read(key) if cache else None
        if base is None:
            indptr, data = huggingface.token_csr(scheme, strings, added)
            base = cls(indptr, data)
            if cache:
                _cache_write(base, key)  # with the trie, so a cache hit skips it too
        hf_special = huggingface.hf_special_ids(tokenizer)
        eos = set() if eos_ids is None else {int(i) for i in eos_ids}
        eos |= huggingface.hf_eos_ids(tokenizer)
        if not eos:
            raise VocabularyError(
                "cannot find the tokenizer's end-of-sequence token (it has no eos_token_id); "
                "pass Vocabulary.from_huggingface(tokenizer, eos_ids=[...])"
            )
        names = huggingface.hf_special_names(tokenizer, added)
        out = base._derive(special=hf_special | eos, eos=eos, vocab_size=vocab_size, names=names)
        huggingface.remember_tokenizer(out.fingerprint, backend)  # for canonical tokenization
        return out

    def _derive(
        self,
        *,
        special: set[int],
        eos: set[int],
        vocab_size: int | None,
        names: Mapping[str, int] | None = None,
    ) -> Vocabulary:
        """Return a copy with more special ids, EOS ids, a width and names (of its specials)."""
        n = self.size
        bad = sorted(i for i in special | eos if not 0 <= i < n)
        if bad:
            raise VocabularyError(f"special/eos ids {bad} out of range [0, {n})")
        lengths = self._lengths.astype(np.int64)
        new_special = [i for i in special if lengths[i] > 0]
        indptr, data, trie = self._indptr, self._bytes, self._trie
        if new_special:
            keep = np.ones(n, dtype=bool)
            keep[new_special] = False
            lengths = np.where(keep, lengths, 0)
            data = data[np.repeat(keep, self._lengths)]
            indptr = np.zeros(n + 1, dtype=INDPTR_DTYPE)
            np.cumsum(lengths, out=indptr[1:])
            trie = None
        mvs = n if vocab_size is None else int(vocab_size)
        size = n
        if mvs < n:
            cut = np.flatnonzero(lengths[mvs:]) + mvs
            cut_eos = sorted(i for i in eos if i >= mvs)
            if cut.size or cut_eos:
                raise VocabularyError(
                    f"vocab_size={mvs} is smaller than the tokenizer's {n} ids and would cut "
                    f"token ids {(cut.tolist() + cut_eos)[:8]}; pass the model's logits width"
                )
            size = mvs
            indptr = indptr[: size + 1]
            data = data[: int(indptr[-1])]
            if trie is not None:
                trie = trie._replace(token_next_dup=trie.token_next_dup[:size])
        empty = indptr[1:] == indptr[:-1]
        kept = {k: v for k, v in (names or {}).items() if 0 <= v < size and empty[v]}
        return Vocabulary(
            indptr, data, eos_ids=eos, model_vocab_size=mvs, special_names=kept, _trie=trie
        )

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary and its trie to an ``.npz`` file (:data:`VOCAB_FORMAT_VERSION`).

        The file holds a SHA-256 checksum over every array and header field, verified by
        :meth:`load` (``docs/robustness.md``).

        Parameters
        ----------
        path : str or PathLike
            Destination; written atomically (temporary file, then rename).

        Raises
        ------
        OSError
            If the file cannot be written.
        """
        write_vocab_file(Path(path), self._arrays())

    def _arrays(self) -> dict[str, np.ndarray[Any, Any]]:
        trie = self._get_trie()
        out: dict[str, np.ndarray[Any, Any]] = {
            "format": np.array(FORMAT_TAG),
            "version": np.array(VOCAB_FORMAT_VERSION, dtype=np.int64),
            "model_vocab_size": np.array(self._model_vocab_size, dtype=np.int64),
            "token_indptr": self._indptr,
            "token_bytes": self._bytes,
            "eos_ids": self._eos,
        }
        out.update(zip(TRIE_FIELDS, trie, strict=True))
        out.update(special_name_arrays(self._names))
        return out

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """Read a vocabulary written by :meth:`save`, validating everything in the file.

        The file is untrusted: its layout, checksum, every array's dtype, shape and index
        ranges, and the trie (exactly the trie of the stored tokens) are checked before any
        kernel can see them, in a fraction of the time a rebuild of the trie takes.

        Parameters
        ----------
        path : str or PathLike
            The ``.npz`` file.

        Returns
        -------
        Vocabulary

        Raises
        ------
        VocabularyError
            If the file is missing or unreadable, is not a constrain vocabulary file, has another
            format version, or is damaged or inconsistent; the message names the file and the
            problem.
        """
        return _read_npz(Path(path))[0]


def _rebuild(
    indptr: Int64Array,
    data: ByteArray,
    eos: Int32Array,
    mvs: int,
    names: Mapping[str, int] | None = None,
) -> Vocabulary:
    return Vocabulary(indptr, data, eos_ids=eos.tolist(), model_vocab_size=mvs, special_names=names)


def _csr(table: Sequence[bytes | bytearray | memoryview | None]) -> tuple[Int64Array, ByteArray]:
    lengths = np.array([0 if t is None else len(t) for t in table], dtype=np.int64)
    indptr = np.zeros(len(table) + 1, dtype=INDPTR_DTYPE)
    np.cumsum(lengths, out=indptr[1:])
    data = np.frombuffer(b"".join(t for t in table if t), dtype=BYTE_DTYPE)
    return indptr, data


# -------------------------------------------------------------------- files and cache
def _read_npz(path: Path) -> tuple[Vocabulary, str]:
    """Read a vocabulary file; return it and its ``cache_key`` entry (``""`` when absent)."""
    arrays = read_vocab_file(path)  # validated: the trie is the tokens' trie
    trie = Trie(
        frozen(arrays["node_byte"].astype(BYTE_DTYPE)),
        *(frozen(arrays[name].astype(TOKEN_DTYPE)) for name in TRIE_FIELDS[1:]),
    )
    vocab = Vocabulary(
        arrays["token_indptr"],
        arrays["token_bytes"],
        eos_ids=arrays["eos_ids"].tolist(),
        model_vocab_size=int(arrays["model_vocab_size"]),
        special_names=special_names_of(arrays),
        _trie=trie,
    )
    return vocab, str(arrays.get("cache_key", ""))


def _cache_read(key: str) -> Vocabulary | None:
    """Return the cached base vocabulary for ``key``, or None (missing, corrupt, other version)."""
    path = vocab_cache_dir() / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        vocab, stored = _read_npz(path)
    except VocabularyError:
        return None  # corrupt or other version: rebuilt and overwritten by the caller
    return vocab if stored == key else None


def _cache_write(vocab: Vocabulary, key: str) -> None:
    """Store ``vocab`` under ``key``; warn (do not fail) when the folder is not writable."""
    arrays = vocab._arrays()
    arrays["cache_key"] = np.array(key)
    try:
        write_vocab_file(vocab_cache_dir() / f"{key}.npz", arrays)
    except OSError as err:
        warnings.warn(
            f"cannot write the vocabulary cache in {vocab_cache_dir()} ({err}); set "
            "CONSTRAIN_CACHE_DIR to a writable folder",
            RuntimeWarning,
            stacklevel=3,
        )
