"""Stage 4: canonical tokenization, the token sequences a BPE tokenizer itself writes.

A model is trained only on its tokenizer's encodings, yet a constrained decoder lets it spell a
text with any tokens. :class:`CanonicalBpe` is the relation "token ``b`` may follow the text so
far in the tokenizer's own encoding of some text", for byte-level BPE (Hugging Face
``tokenizers``, tiktoken rank files) and SentencePiece BPE (metaspace ``tokenizer.json``, model
files); what it reads from a tokenizer, and which tokenizers it refuses, is
:mod:`constrain.vocab.bpe_source`. A sequence is canonical when every adjacent pair is, each
judged in the context of the text's last pre-token. Three things decide a pair:

* **whole tokens**: BPE of a token's own bytes must give the token itself (``standalone``);
  other tokens never occur in an encoding (SentencePiece-style BPE starts from characters, a
  character's byte-fallback tokens only where it has no token of its own).
* **pre-tokens**: the tokenizer first splits the text with a regex (words, number groups,
  whitespace runs); a token never spans a split. The splits near the junction are read by
  running the tokenizer's regex (with the ``regex`` module) on a stand-in string made of one
  representative character per class the regexes tell apart (letters, numbers, punctuation;
  whitespace, apostrophes and the letters of English contractions as themselves): the pair is
  refused when a split falls inside either token, and accepted when one falls exactly between
  them; where a regex looks one character ahead, the pair is judged per class of that
  character and the next token must start with one that keeps it.
* **merges**: inside one pre-token, the pair is refused when a merge across the junction fires
  before both tokens are complete (``constrain.kernels.numba_canonical``).

Rows are computed per (previous token, pre-token context), lazily, and cached as packed int32
rows within a byte budget. Added tokens (special or not) split the text as the tokenizer does:
they may come wherever the text may end, and any whole token may follow them; a text that
spells an added token's content with ordinary tokens is not refused.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from constrain.automata.nfa_parts import fifo_room
from constrain.errors import VocabularyError
from constrain.kernels.numba_canonical import (
    conflict_row_kernel,
    derive_kernel,
    spines_kernel,
)
from constrain.vocab.bpe_source import (
    BpeSource,
    huggingface_source,
    sentencepiece_source,
    tiktoken_source,
)
from constrain.vocab.huggingface import tokenizer_of
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["NEXT_CLASSES", "START", "CanonicalBpe", "CanonicalState"]

JOINED, BOUNDARY, INSIDE = 0, 1, 2
# what a pre-tokenizer regex may look at after a token: the end of the text, then one
# representative character per class (Unicode letters are "a", numbers "0", punctuation ".")
NEXT_CLASSES = ("", " ", "\n", "\r", "\t", "a", "0", ".", "'")
_ALL = (1 << len(NEXT_CLASSES)) - 1
_PARTIAL = len(NEXT_CLASSES)  # first-character class of a token that starts a split character
_MULTIBYTE_CLASSES = tuple(k for k, c in enumerate(NEXT_CLASSES) if c in ("\t", "a", "0", "."))
_MULTIBYTE = sum(1 << k for k in _MULTIBYTE_CLASSES)
_WHOLE, _LONG, _SPLIT_END = 0, 1, 2  # a head key's end: the token's last character, more, split
_PROBES = (0, 1, 5)  # the end of the text, a space, a letter
_PERMISSIVE = (1, 0, 2)  # BOUNDARY, JOINED, INSIDE
# Unicode White_Space: what \s matches in the tokenizers' regexes
_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_TAIL = 8  # characters of text before a junction given to the pre-tokenizer
_HEAD = 4  # and of the next token
_KEEP_LETTERS = frozenset("stremvldSTREMVLD")
_DEFAULT_BUDGET = 64 << 20
_KEY_ROWS = 256  # pre-token contexts whose packed rows are kept (32 KB each on Llama 3)
_CROSSED = 512  # previous tokens whose crossing merges are kept (a packed row each)
_ANY_SPLIT = 65536  # (context, allowed bytes) answers of splits_before_any kept
_CONTEXTS = 512  # pre-token contexts whose junctions (~20 KB), head classes, splits are kept
_CLASS_WEIGHTS = (1 << np.arange(len(NEXT_CLASSES))).astype(np.uint16)  # a class set's bits


def _rep(c: str) -> str:
    """Return the representative of ``c`` for a pre-tokenizer regex (itself where in doubt)."""
    if c in _KEEP_LETTERS or c in _SPACE or c == "'":
        return c
    cat = unicodedata.category(c)
    if cat[0] == "L":
        return "a"
    if cat[0] == "N":
        return "0"
    if cat[0] in "PS":
        return "."
    return c


def _first_class(c: str) -> int:
    """Return the index in :data:`NEXT_CLASSES` of a token's first character."""
    if c in " \n\r'":
        return NEXT_CLASSES.index(c)
    if c in _SPACE:
        return NEXT_CLASSES.index("\t")
    cat = unicodedata.category(c)
    if cat[0] == "L":
        return NEXT_CLASSES.index("a")
    if cat[0] == "N":
        return NEXT_CLASSES.index("0")
    return NEXT_CLASSES.index(".")


def _split_utf8(data: bytes) -> tuple[bytes, str, bytes] | None:
    """Split ``data`` into leading continuation bytes, whole characters, a trailing partial one.

    None when ``data`` holds bytes no UTF-8 text can (invalid in the middle, or 0xF8-0xFF).
    """
    lead = 0
    while lead < len(data) and lead < 3 and 0x80 <= data[lead] < 0xC0:
        lead += 1
    end = len(data)
    for back in range(1, min(4, end - lead) + 1):
        byte = data[end - back]
        if byte < 0x80:
            break
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if need > back:
                end -= back
            break
    try:
        text = data[lead:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    trail = data[end:]
    if trail and trail[0] >= 0xF8:
        return None
    return data[:lead], text, trail


def _compact(reps: str, keep: int = 0) -> str:
    """Cut runs of letters (``a``) to two; contraction letters are ``a`` but after ``'``.

    What the pre-tokenizer regexes tell apart, and no more. The first ``keep`` characters stay
    as they are (a token's first letters may follow an apostrophe that ends the text before).
    """
    out: list[str] = []
    for i, c in enumerate(reps):
        if i >= keep:
            if c in _KEEP_LETTERS and "'" not in reps[max(0, i - 2) : i]:
                c = "a"
            if c == "a" and len(out) >= 2 and out[-1] == "a" and out[-2] == "a":
                continue
        out.append(c)
    return "".join(out)


class CanonicalState(NamedTuple):
    """Where a token sequence stands for canonicality: what the next token must agree with.

    ``prev`` is the last token (-1 at the start of the text or after a special token);
    ``condition`` the classes of character (:data:`NEXT_CLASSES`, bit ``k``) that may come next
    for the last pair to stay canonical; ``reps``/``trail`` the last characters of the text
    (their class representatives) and its unfinished multi-byte character; ``a_len`` how many
    of those characters belong to ``prev``; ``at_start`` whether ``reps`` reaches back to the
    start of the text.
    """

    prev: int
    condition: int
    reps: str
    trail: bytes
    a_len: int
    at_start: bool


START = CanonicalState(-1, _ALL, "", b"", 0, True)


class CanonicalBpe:
    """Which token may follow a text in a BPE tokenizer's own encodings.

    Parameters
    ----------
    vocab : Vocabulary
        The vocabulary the rows are over (token ids and bytes).
    merges : iterable of (int, int, int, int)
        ``(x, y, result, rank)`` for every merge of two token ids.
    pattern : str
        The pre-tokenizer's regex (the ``regex`` module's syntax); each match is a pre-token.
    boundary_ids : iterable of int, optional
        Tokens that split the text on their own (added and special tokens).
    byte_fallback_ids : iterable of int, optional
        SentencePiece-style BPE: its byte-fallback tokens (``<0x41>``). BPE then starts from
        characters, a character's bytes being its fallback tokens only when it has no token.
    max_bytes : int, optional
        Budget of the cached rows (least recently used evicted first).

    Use :meth:`from_huggingface` or :meth:`from_tiktoken`. A walk starts at :data:`START`:
    :meth:`row` gives the packed allowed tokens, :meth:`advance` the state after one token.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        merges: Iterable[tuple[int, int, int, int]],
        pattern: str,
        *,
        boundary_ids: Iterable[int] = (),
        byte_fallback_ids: Iterable[int] | None = None,
        max_bytes: int = _DEFAULT_BUDGET,
    ) -> None:
        import regex

        self.vocab = vocab
        self.pattern = pattern
        self._regex = regex.compile(pattern)
        self.max_bytes = int(max_bytes)
        n = vocab.size
        m = np.array(list(merges), dtype=np.int64).reshape(-1, 4)
        if m.shape[0] and (m[:, :3].min() < 0 or m[:, :3].max() >= n):
            raise VocabularyError("a merge names a token id outside the vocabulary")
        self._merges = m
        keys = m[:, 0] * n + m[:, 1]
        order = np.argsort(keys, kind="stable")
        keys, m = keys[order], m[order]
        byte_token = np.full(256, -1, dtype=np.int64)
        lengths = vocab.token_lengths
        data, indptr = vocab.token_bytes, vocab.token_indptr
        special = set(vocab.special_ids.tolist()) | {int(t) for t in boundary_ids}
        fallback = set() if byte_fallback_ids is None else {int(t) for t in byte_fallback_ids}
        # first pieces: bytes; from characters where there is a fallback (SentencePiece-style:
        # a character's own token, its bytes' fallback tokens only when it has none)
        for t in sorted(np.flatnonzero(lengths == 1).tolist(), key=lambda t: t in fallback):
            if t not in special and byte_token[data[indptr[t]]] < 0:
                byte_token[data[indptr[t]]] = t
        chars: dict[int, int] = {}
        if byte_fallback_ids is not None:
            for t in np.flatnonzero((lengths > 1) & (lengths <= 4)).tolist():
                raw = vocab.token_bytes_of(t)
                if t in special or len(raw.decode("utf-8", "ignore")) != 1 or raw[0] < 0xC0:
                    continue
                chars.setdefault(int.from_bytes(raw, "big"), t)
        # characters SentencePiece-style BPE never splits into fallback bytes
        self._whole_chars = frozenset(k.to_bytes((k.bit_length() + 7) // 8, "big") for k in chars)
        char_keys = np.array(sorted(chars), dtype=np.int64)
        char_ids = np.array([chars[k] for k in sorted(chars)], dtype=np.int64)
        self.byte_token = byte_token
        left = np.full(n, -1, dtype=np.int64)
        right = np.full(n, -1, dtype=np.int64)
        rank = np.full(n, -1, dtype=np.int64)
        standalone = np.zeros(n, dtype=np.uint8)
        derive_kernel(
            indptr, data, byte_token, char_keys, char_ids, keys, m[:, 3], m[:, 2], n, left,
            right, rank, standalone,
        )  # fmt: skip
        self.boundary = np.zeros(n, dtype=bool)
        self.boundary[sorted(special)] = True
        standalone[self.boundary] = 0
        heads: dict[tuple[bytes, str, int], int] = {}
        self._parts: list[tuple[bytes, str, bytes] | None] = [None] * n
        head_of = np.zeros(n, dtype=np.int64)
        # the class of each token's first character; special tokens end the text's pieces
        first_class = np.full(n, _PARTIAL + 1, dtype=np.int64)
        first_class[self.boundary] = 0
        for t in np.flatnonzero(standalone).tolist():
            parts = _split_utf8(vocab.token_bytes_of(t))
            if parts is None:
                standalone[t] = 0
                continue
            lead, text, trail = parts
            reps = "".join(_rep(c) for c in text)
            self._parts[t] = (lead, reps, trail)
            if not lead:
                first_class[t] = _first_class(text[0]) if text else _PARTIAL
            head = _compact(reps, keep=2)
            cut = _LONG if len(head) > _HEAD else _SPLIT_END if trail else _WHOLE
            head_of[t] = heads.setdefault((lead, head[:_HEAD], cut), len(heads))
        self.standalone = standalone.astype(bool)
        self._heads = list(heads)
        self._head_of = head_of
        self._first_class = first_class
        self._class_rows: dict[int, np.ndarray[Any, Any]] = {}
        # spines: right (for the previous token) and left (indexed by piece, for the next one)
        self._rs = self._spines(right, rank, standalone, lengths)
        lp, ln, lpar = self._spines(left, rank, standalone, lengths)
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(lp))
        order = np.lexsort((-lpar, ln))
        self._occ_tok, self._occ_parent = owner[order], lpar[order]
        self._occ_ptr = np.searchsorted(ln[order], np.arange(n + 1)).astype(np.int64)
        by_left = np.lexsort((m[:, 3], m[:, 0]))
        self._m_right, self._m_rank = m[by_left, 1], m[by_left, 3]
        self._m_ptr = np.searchsorted(m[by_left, 0], np.arange(n + 1)).astype(np.int64)
        self._rank = rank
        self._junctions: dict[tuple[str, bytes, int, bool], np.ndarray[Any, Any]] = {}
        self._splits: dict[tuple[tuple[str, bytes, int, bool], int], bool] = {}
        self._rows: OrderedDict[Any, np.ndarray[Any, Any]] = OrderedDict()
        self._classes: dict[Any, dict[int, tuple[int, int]]] = {}  # head keys' (split, joined)
        self._crossed_cache: dict[int, np.ndarray[Any, Any]] = {}
        self._any_split: dict[Any, bool] = {}  # splits_before_any
        self._key_rows_cache: OrderedDict[Any, tuple[np.ndarray[Any, Any], ...]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def merge(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Every merge as ``{(x, y): (rank, result)}`` (what the naive BPE of the tests takes)."""
        return {(int(x), int(y)): (int(k), int(r)) for x, y, r, k in self._merges.tolist()}

    @staticmethod
    def _spines(
        child: np.ndarray[Any, Any],
        rank: np.ndarray[Any, Any],
        standalone: np.ndarray[Any, Any],
        lengths: np.ndarray[Any, Any],
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        n = child.shape[0]
        depth = np.zeros(n, dtype=np.int64)
        # a token's spine is one longer than its child's, a token of fewer bytes
        for t in np.argsort(lengths, kind="stable").tolist():
            depth[t] = 1 + (depth[child[t]] if child[t] >= 0 else 0)
        depth[~standalone.astype(bool)] = 0
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(depth, out=ptr[1:])
        node = np.empty(int(ptr[-1]), dtype=np.int64)
        parent = np.empty(int(ptr[-1]), dtype=np.int64)
        spines_kernel(child, rank, standalone, ptr, node, parent)
        return ptr, node, parent

    # -- pre-token splits around a junction ----------------------------------------------------

    def _junction(self, key: tuple[str, bytes, int, bool]) -> np.ndarray[Any, Any]:
        """Return JOINED / BOUNDARY / INSIDE per head key and class of the next character."""
        with self._lock:
            found = self._junctions.get(key)
        if found is not None:
            return found
        out = np.empty((len(self._heads), len(NEXT_CLASSES)), dtype=np.int8)
        for h in range(len(self._heads)):
            out[h] = self._judge_head(key, h)
        with self._lock:
            fifo_room(self._junctions, _CONTEXTS)[key] = out
        return out

    def _judge_head(self, key: tuple[str, bytes, int, bool], h: int) -> np.ndarray[Any, Any]:
        """Return JOINED / BOUNDARY / INSIDE per class of the next character, for head key h."""
        lead, head, cut = self._heads[h]
        out = np.full(len(NEXT_CLASSES), JOINED, dtype=np.int8)
        if cut == _LONG:  # the character after a long ``b`` is too far to matter
            out[:] = self._judge(key, lead, head, True, "")
        elif cut == _SPLIT_END:
            # ``b`` ends inside a multi-byte character, of a class not known yet: the most
            # permissive outcome of those classes (never refuses an encoding)
            nexts = [NEXT_CLASSES[k] for k in _MULTIBYTE_CLASSES]
            seen = {self._judge(key, lead, head, False, nxt) for nxt in nexts}
            out[:] = min(seen, key=_PERMISSIVE.index)
        else:
            # the next character matters where a regex looks ahead (whitespace runs): three
            # probes, and every class when they disagree
            probe = [self._judge(key, lead, head, False, NEXT_CLASSES[k]) for k in _PROBES]
            if probe.count(probe[0]) == len(probe):
                out[:] = probe[0]
            else:
                for k, nxt in enumerate(NEXT_CLASSES):
                    out[k] = self._judge(key, lead, head, False, nxt)
        return out

    def _head_classes(self, key: tuple[str, bytes, int, bool], h: int) -> tuple[int, int]:
        """Return head key h's classes of the next character after a split and after a join.

        From the whole junction where it is built, else judged for this head alone: a
        structural position asks about a few tokens, not every head key (memoised).
        """
        with self._lock:
            memo = self._classes.get(key)
            if memo is None:
                memo = fifo_room(self._classes, _CONTEXTS)[key] = {}
            junction = self._junctions.get(key)
        found = memo.get(h)
        if found is None:
            row = junction[h] if junction is not None else self._judge_head(key, h)
            found = (
                int(_CLASS_WEIGHTS[row == BOUNDARY].sum()),
                int(_CLASS_WEIGHTS[row == JOINED].sum()),
            )
            memo[h] = found
        return found

    def _judge(
        self, key: tuple[str, bytes, int, bool], lead: bytes, head: str, cut_right: bool, nxt: str
    ) -> int:
        reps, trail, a_len, at_start = key
        mid = trail + lead
        middle = ""
        if mid:
            parts = _split_utf8(mid)
            if parts is None or parts[0] or (parts[2] and head):
                return INSIDE  # bytes no text has
            if parts[2]:
                return JOINED  # still inside one character: nothing splits there
            if len(parts[1]) != 1 or mid in self._whole_chars:
                # a character split between tokens is bytes no token holds whole
                return INSIDE
            middle = _rep(parts[1])
        text = reps + middle + head
        at = len(reps)
        a_start = at - a_len
        lo = 0 if at_start else 2
        hi = len(text) - (2 if cut_right else 1)
        splits = [
            p
            for p in (m.start() for m in self._regex.finditer(text + nxt))
            if max(lo, a_start + 1) <= p <= hi
        ]
        if mid:
            return INSIDE if splits else JOINED
        if any(p != at for p in splits):
            return INSIDE
        return BOUNDARY if at in splits else JOINED

    # -- rows ----------------------------------------------------------------------------------

    def _crossing(self, prev: int) -> np.ndarray[Any, Any]:
        """Return the tokens ``b`` whose pair ``(prev, b)`` a merge crosses, packed (memoised)."""
        with self._lock:
            found = self._crossed_cache.get(prev)
        if found is not None:
            return found
        n = self.vocab.size
        conflict = np.zeros((n + 31) // 32 * 32, dtype=np.uint8)
        if prev >= 0:
            conflict_row_kernel(
                prev,
                *self._rs,
                self._m_ptr,
                self._m_right,
                self._m_rank,
                self._rank,
                self._occ_ptr,
                self._occ_tok,
                self._occ_parent,
                conflict,
            )
        found = _pack(conflict)
        with self._lock:
            fifo_room(self._crossed_cache, _CROSSED)[prev] = found
        return found

    def _entry(self, state: CanonicalState) -> np.ndarray[Any, Any]:
        """Return the packed row after ``state``, before its class condition (cached)."""
        key = (state.reps, state.trail, state.a_len, state.at_start)
        cache_key = (state.prev, key)
        with self._lock:
            found = self._rows.get(cache_key)
            if found is not None:
                self._rows.move_to_end(cache_key)
                return found
        base, split_only = self._key_rows(key)
        # a pair that a merge crosses is canonical only where it is split
        entry: np.ndarray[Any, Any] = base & ~(self._crossing(state.prev) & ~split_only)
        entry.flags.writeable = False
        with self._lock:
            self._rows[cache_key] = entry
            while len(self._rows) * entry.nbytes > self.max_bytes and len(self._rows) > 1:
                self._rows.popitem(last=False)
        return entry

    def has_row(self, state: CanonicalState) -> bool:
        """Whether the row after ``state`` is built (:meth:`row` then costs a lookup).

        Else a few tokens cost less judged one by one (:meth:`status`): a row needs its
        pre-token context's junction, every head key judged.
        """
        key = (state.reps, state.trail, state.a_len, state.at_start)
        with self._lock:
            return (state.prev, key) in self._rows

    def status(self, state: CanonicalState, token: int) -> int:
        """Return the classes of character that may follow ``token`` after ``state``.

        0 when ``token`` may not come next canonically (:meth:`row` has its bit 0). One token
        without building the row: the look-ahead asks about a few at structural positions.
        """
        token = int(token)
        condition = state.condition
        if condition & _ALL != _ALL:
            class_row = self._class_row(condition)
            if not (int(class_row[token >> 5]) >> (token & 31)) & 1:
                return 0
        if self.boundary[token]:
            return _ALL
        if not self.standalone[token]:
            return 0
        key = (state.reps, state.trail, state.a_len, state.at_start)
        split, joined = self._head_classes(key, int(self._head_of[token]))
        crossing = self._crossing(state.prev) if joined & ~split else None
        if crossing is not None and (int(crossing[token >> 5]) >> (token & 31)) & 1:
            return split  # a merge crosses the pair: only a split keeps it canonical
        return split | joined

    def _key_rows(self, key: tuple[str, bytes, int, bool]) -> tuple[np.ndarray[Any, Any], ...]:
        """Return a context's packed next tokens: when no merge crosses, and when one does."""
        with self._lock:
            found = self._key_rows_cache.get(key)
            if found is not None:
                self._key_rows_cache.move_to_end(key)
                return found
        junction = self._junction(key)
        split = ((junction == BOUNDARY) * _CLASS_WEIGHTS).sum(axis=1, dtype=np.uint16)
        joined = ((junction == JOINED) * _CLASS_WEIGHTS).sum(axis=1, dtype=np.uint16)
        n = self.vocab.size
        rows = []
        for classes in (split | joined, split):
            bits = np.zeros((n + 31) // 32 * 32, dtype=bool)
            bits[:n] = self.boundary | (self.standalone & (classes != 0)[self._head_of])
            rows.append(_pack(bits))
        found = (rows[0], rows[1])
        with self._lock:
            self._key_rows_cache[key] = found
            while len(self._key_rows_cache) > _KEY_ROWS:
                self._key_rows_cache.popitem(last=False)
        return found

    def row(self, state: CanonicalState) -> np.ndarray[Any, Any]:
        """Return the packed row of the tokens that may canonically come next.

        Returns
        -------
        (ceil(V / 32),) int32
            Bit ``j`` of word ``w`` is token ``32 * w + j`` (1 = may come next); read-only.
            Special and added tokens may whenever the text may end here.
        """
        row = self._entry(state)
        if state.condition & _ALL == _ALL:
            return row
        out: np.ndarray[Any, Any] = row & self._class_row(state.condition)
        out.flags.writeable = False
        return out

    def _class_row(self, condition: int) -> np.ndarray[Any, Any]:
        found = self._class_rows.get(condition)
        if found is None:
            ok = (condition >> np.minimum(self._first_class, 62)) & 1
            # a token that starts a split character: the classes a multi-byte one may have
            ok |= (self._first_class == _PARTIAL) & ((condition & _MULTIBYTE) != 0)
            ok &= self._first_class <= _PARTIAL
            bits = np.zeros((self.vocab.size + 31) // 32 * 32, dtype=bool)
            bits[: self.vocab.size] = ok.astype(bool)
            found = self._class_rows.setdefault(condition, _pack(bits))
        return found

    def splits_before(self, state: CanonicalState, byte: int) -> bool:
        """Whether the pre-tokenizer splits right after ``state``'s text before ASCII ``byte``.

        Whatever follows that byte, the split is there: the next token may be any whole token
        that begins the rest of the text, with no merge across (a continuation exists).
        """
        if byte >= 0x80 or state.trail:
            return False
        char = chr(byte)
        if not (state.condition >> _first_class(char)) & 1:
            return False
        if state.prev < 0:
            return True
        key = (state.reps, state.trail, state.a_len, state.at_start)
        found = self._splits.get((key, byte))
        if found is None:
            found = all(
                self._judge(key, b"", _rep(char), False, nxt) == BOUNDARY for nxt in NEXT_CLASSES
            )
            with self._lock:
                fifo_room(self._splits, _CONTEXTS * 256)[(key, byte)] = found
        return found

    def splits_before_any(self, state: CanonicalState, allowed: np.ndarray[Any, Any]) -> bool:
        """Whether :meth:`splits_before` holds for one of the ``allowed`` ASCII bytes (bool[128]).

        Memoised by the state's context and the allowed bytes (the look-ahead asks it for every
        candidate token).
        """
        if state.trail:
            return False
        key = (
            state.reps, state.a_len, state.at_start, state.condition, state.prev < 0,
            np.packbits(allowed).tobytes(),
        )  # fmt: skip
        found = self._any_split.get(key)
        if found is None:
            found = any(self.splits_before(state, int(b)) for b in np.flatnonzero(allowed))
            with self._lock:
                fifo_room(self._any_split, _ANY_SPLIT)[key] = found
        return found

    def may_end(self, state: CanonicalState) -> bool:
        """Whether the text may end after ``state`` (the last pair allows the end)."""
        return bool(state.condition & 1)

    def advance(self, state: CanonicalState, token: int) -> CanonicalState | None:
        """Return the state after ``token``, or None when it may not come next canonically."""
        token = int(token)
        condition = self.status(state, token)
        if not condition:
            return None
        if self.boundary[token]:
            return START
        parts = self._parts[token]
        assert parts is not None  # a whole token
        lead, reps, trail = parts
        if state.trail or lead:
            done = _split_utf8(state.trail + lead)
            middle = _rep(done[1]) if done is not None and len(done[1]) == 1 else ""
            if done is not None and done[2]:  # still one unfinished character
                return CanonicalState(token, condition, state.reps, done[2], 0, state.at_start)
            reps = middle + reps
        return self._after(token, condition, state, reps, trail)

    def _after(
        self, token: int, condition: int, state: CanonicalState, reps: str, trail: bytes
    ) -> CanonicalState:
        """Return the state whose text ends with ``reps`` (the token's characters), ``trail``.

        The text kept is what the pre-tokenizer's next decisions depend on: from the start of
        its last pre-token (the matches before it are final: the regexes look one character
        ahead at most), at most :data:`_TAIL` characters, runs of letters cut to two.
        """
        before = state.reps
        text = before + reps
        starts = [m.start() for m in self._regex.finditer(text)] or [0]
        cut = starts[-1]
        at_start = state.at_start or cut > 0
        if cut < len(before):
            before = before[cut:]
        else:
            reps, before = reps[cut - len(before) :], ""
        before, reps = _compact(before), _compact(reps)
        keep = (before + reps)[-_TAIL:]
        if len(keep) < len(before) + len(reps):
            at_start = False
        return CanonicalState(token, condition, keep, trail, min(len(reps), len(keep)), at_start)

    def is_canonical(self, token_ids: Sequence[int]) -> bool:
        """Whether ``token_ids``, a whole text, is the tokenizer's encoding of that text."""
        state = START
        for t in token_ids:
            nxt = self.advance(state, int(t))
            if nxt is None:
                return False
            state = nxt
        return self.may_end(state)

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def for_vocabulary(cls, vocab: Vocabulary) -> CanonicalBpe:
        """Return the relation of the tokenizer ``vocab`` was read from (built once, kept).

        Raises
        ------
        VocabularyError
            If ``vocab`` was not read from a Hugging Face tokenizer in this process
            (:meth:`Vocabulary.from_huggingface`); for tiktoken use :meth:`from_tiktoken`.
        """
        backend = tokenizer_of(vocab.fingerprint)
        if backend is None:
            raise VocabularyError(
                "canonical=True needs the tokenizer this vocabulary was read from: build the "
                "vocabulary with Vocabulary.from_huggingface(tokenizer), or pass "
                "canonical=CanonicalBpe.from_tiktoken(path, pattern, vocab)"
            )
        # the tokenizer too: two with the same tokens may merge or split differently
        key = (vocab.fingerprint, id(backend))
        with _BUILT_LOCK:
            found = _BUILT.get(key)
        if found is not None:
            return found[1]
        built = cls.from_huggingface(backend, vocab)
        with _BUILT_LOCK:
            # the entry holds the tokenizer, so its id is not reused while the entry lives
            kept = _BUILT.setdefault(key, (backend, built))
            while len(_BUILT) > _KEEP_BUILT:
                _BUILT.pop(next(iter(_BUILT)))
            return kept[1]

    @classmethod
    def from_huggingface(
        cls, tokenizer: Any, vocab: Vocabulary, *, max_bytes: int = _DEFAULT_BUDGET
    ) -> CanonicalBpe:
        """Build the relation of a Hugging Face byte-level BPE tokenizer.

        Parameters
        ----------
        tokenizer : transformers tokenizer or tokenizers.Tokenizer
            A fast tokenizer.
        vocab : Vocabulary
            Its vocabulary (``Vocabulary.from_huggingface(tokenizer)``).
        max_bytes : int, optional
            Budget of the cached rows.

        Raises
        ------
        VocabularyError
            For a tokenizer whose canonical encodings this cannot decide exactly: not BPE, not
            byte-level, with a normaliser, BPE dropout, ``ignore_merges`` or a pre-tokenizer
            other than one regex split and the byte-level mapping.
        """
        return cls.from_source(huggingface_source(tokenizer), vocab, max_bytes=max_bytes)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike[str],
        pattern: str,
        vocab: Vocabulary,
        *,
        max_bytes: int = _DEFAULT_BUDGET,
    ) -> CanonicalBpe:
        """Build the relation of a tiktoken tokenizer (rank file and pre-tokenizer regex).

        tiktoken merges two adjacent pieces whenever their concatenation is a token, the one
        of lowest rank first; token ids are ranks.

        Parameters
        ----------
        path : str or PathLike
            The ``.tiktoken`` rank file the vocabulary was read from.
        pattern : str
            The encoding's pre-tokenizer regex (``tiktoken.Encoding(pat_str=...)``).
        vocab : Vocabulary
            ``Vocabulary.from_tiktoken(path, ...)``.
        max_bytes : int, optional
            Budget of the cached rows.
        """
        return cls.from_source(tiktoken_source(path, pattern), vocab, max_bytes=max_bytes)

    @classmethod
    def from_sentencepiece(
        cls,
        path: str | os.PathLike[str],
        vocab: Vocabulary,
        *,
        max_bytes: int = _DEFAULT_BUDGET,
    ) -> CanonicalBpe:
        """Build the relation of a SentencePiece BPE model file (``sentencepiece`` installed).

        SentencePiece's BPE starts from the text's characters (a character without a piece is
        its byte pieces, with byte fallback) and merges the adjacent pair whose concatenation
        is the piece of highest score, the leftmost first; it splits nothing beforehand. Token
        ids are the model's piece ids; ``vocab`` holds their bytes (the metaspace character as
        a space, ``<0x41>`` as its byte). The encoding is that of a continuation: without the
        dummy prefix a model may add at the start of a text.

        Raises
        ------
        VocabularyError
            If the model is not BPE, normalises text (its rule is not ``identity``, or it
            removes extra whitespace) or has user-defined pieces.
        """
        return cls.from_source(sentencepiece_source(path), vocab, max_bytes=max_bytes)

    @classmethod
    def from_source(
        cls, source: BpeSource, vocab: Vocabulary, *, max_bytes: int = _DEFAULT_BUDGET
    ) -> CanonicalBpe:
        """Build the relation of a tokenizer read by :mod:`constrain.vocab.bpe_source`.

        Parameters
        ----------
        source : BpeSource
            Its merges, pre-tokenizer regex, boundary and byte-fallback tokens.
        vocab : Vocabulary
            Its vocabulary.
        max_bytes : int, optional
            Budget of the cached rows.
        """
        return cls(
            vocab,
            source.merges,
            source.pattern,
            boundary_ids=source.boundary_ids,
            byte_fallback_ids=source.byte_fallback_ids,
            max_bytes=max_bytes,
        )


# relations built by for_vocabulary, the last few (a server serving many models keeps a few)
_BUILT: dict[tuple[str, int], tuple[Any, CanonicalBpe]] = {}
_BUILT_LOCK = threading.Lock()
_KEEP_BUILT = 8


def _pack(bits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Pack a bool array (a multiple of 32 long) into read-only little-endian int32 words."""
    out = np.packbits(bits, bitorder="little").view(np.int32).copy()
    out.flags.writeable = False
    return out
