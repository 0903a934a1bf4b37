"""Drafters for speculative decoding (stage 7): proposals the target model then verifies.

A drafter extends a :class:`DraftRequest`'s per-row drafts through :meth:`DraftRequest.offer`,
which checks every token against the row's matcher as it is offered, so whatever a drafter
proposes (even garbage), no drafted token is invalid. Drafters run in a chain, each extending
what the previous ones proposed; :func:`constrain.decoding.speculative.speculative_decode`
verifies the drafts exactly.

- :class:`GrammarDrafter`: jump-forward, the tokens of the text the grammar forces;
- :class:`PromptLookupDrafter`: what followed the latest earlier occurrence of the output's end
  in the prompt or output (text or token matching);
- :class:`EarlyExitDrafter`: the target's first layers and its LM head (self-speculative);
- :class:`DraftModelDrafter`: a smaller model sharing the tokenizer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from constrain.matcher import Matcher
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "DraftModelDrafter",
    "DraftRequest",
    "Drafter",
    "EarlyExitDrafter",
    "GrammarDrafter",
    "PromptLookupDrafter",
    "TokenText",
]


class Drafter(Protocol):
    """Proposes tokens; :meth:`DraftRequest.offer` checks them against the grammar."""

    name: str

    def begin(self, session: Any, prompts: Sequence[Sequence[int]]) -> None:
        """Set up for one decode (called after the prefill)."""
        ...

    def propose(self, request: DraftRequest) -> None:
        """Extend ``request``'s drafts with :meth:`DraftRequest.offer`."""
        ...


def ragged_block(
    rows: Mapping[int, Sequence[int]], batch: int, pad: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack rows of different lengths into ``(ids[batch, T], valid[batch, T])``, left-aligned.

    ``T`` is the longest row's length; positions past a row's end (and rows not given) hold
    ``pad`` with ``valid`` false, the form :meth:`SpeculativeSession.extend` takes.
    """
    width = max((len(v) for v in rows.values()), default=0)
    ids = torch.full((batch, width), pad, dtype=torch.long)
    valid = torch.zeros((batch, width), dtype=torch.bool)
    for r, v in rows.items():
        if len(v):
            ids[r, : len(v)] = torch.tensor(list(v), dtype=torch.long)
            valid[r, : len(v)] = True
    return ids, valid


class DraftRequest:
    """The drafts of one iteration, built by a chain of drafters.

    Attributes
    ----------
    rows : list of int
        The live rows.
    histories : list of list of int
        Per row: prompt, output so far, and the pending token (the last item).
    drafts : list of list of int
        Per row: the tokens drafted so far (after the pending token).
    sources : list of list of str
        Per row: the drafter of each draft token.
    matchers : list of Matcher or None
        Per row, positioned after the pending token and the drafts so far (``None``:
        unconstrained row).
    budget : list of int
        Per row: the most draft tokens it may take.
    """

    def __init__(
        self,
        rows: list[int],
        histories: list[list[int]],
        matchers: Sequence[Matcher | None],
        budget: list[int],
        eos: set[int],
    ) -> None:
        self.rows = rows
        self.histories = histories
        self.matchers = matchers
        self.budget = budget
        self.eos = eos
        self.drafts: list[list[int]] = [[] for _ in histories]
        self.sources: list[list[str]] = [[] for _ in histories]
        self.closed = [False] * len(histories)
        self.quota: Callable[[int, str, int], int] | None = None
        """``quota(row, source, drafted)``: most tokens drafter ``source`` may add to row ``row``
        whose draft has ``drafted`` tokens so far (None: no limit but the budget)."""

    def room(self, row: int) -> int:
        """How many more tokens row ``row`` may take (0 after a drafted EOS)."""
        if self.closed[row]:
            return 0
        return max(0, self.budget[row] - len(self.drafts[row]))

    def context(self, row: int) -> list[int]:
        """Row ``row``'s tokens so far: history, then the drafts."""
        return self.histories[row] + self.drafts[row]

    def room_for(self, row: int, source: str) -> int:
        """How many more tokens drafter ``source`` may add to row ``row``."""
        room = self.room(row)
        if self.quota is not None and room:
            mine = self.sources[row].count(source)
            before = len(self.drafts[row]) - mine
            room = min(room, max(0, self.quota(row, source, before) - mine))
        return room

    def offer(self, row: int, tokens: Sequence[int], source: str) -> int:
        """Append the leading tokens the grammar allows; return how many.

        Within the row's budget and the drafter's quota. Stops at the first token the row's
        matcher rejects, and after an EOS.
        """
        taken = 0
        m = self.matchers[row]
        for tok in tokens:
            if self.room_for(row, source) == 0:
                break
            t = int(tok)
            if m is not None:
                try:
                    ok = m.accept_token(t)
                except ValueError:  # an id past the model's vocabulary
                    ok = False
                if not ok:
                    break
            self.drafts[row].append(t)
            self.sources[row].append(source)
            taken += 1
            if t in self.eos or (m is not None and m.is_terminated()):
                self.closed[row] = True
                break
        return taken

    def pick(
        self,
        row: int,
        logits: torch.Tensor,
        source: str,
        *,
        checks: int = 8,
        min_prob: float = 0.0,
    ) -> bool:
        """Offer the most likely allowed token of ``logits`` ``(C,)``; return whether one was taken.

        Tries the ``checks`` top tokens in order, while their probability is at least
        ``min_prob``.
        """
        if self.room_for(row, source) == 0:
            return False
        k = min(checks, int(logits.shape[-1]))
        top = torch.topk(logits.float(), k)
        probs = (top.values - torch.logsumexp(logits.float(), dim=-1)).exp().tolist()
        for tok, p in zip(top.indices.tolist(), probs, strict=True):
            if p < min_prob:
                return False
            if self.offer(row, [tok], source):
                return True
        return False


# -- drafters ---------------------------------------------------------------------------------


class TokenText:
    """Text to tokens for drafters, in the model's own style.

    Forced or copied text can be tokenized many ways, and a model trained on the canonical
    tokenization does not always write it that way under a grammar (SmolLM2 writes compact
    JSON's ``":"`` as ``":`` then ``"``). This tokenizer learns the tokens the model actually
    emits (:meth:`observe`) and tokenizes text by dynamic programming over the vocabulary with
    tokens the model has emitted costing 1 and others ``1 + unseen_penalty``; before it has
    seen any output it uses ``encode`` (the canonical tokenizer) when given.

    Parameters
    ----------
    vocabulary : Vocabulary
        The model's vocabulary.
    encode : callable, optional
        ``text -> token ids`` without special tokens (the model's tokenizer).
    unseen_penalty : float
        Extra cost of a token the model has not emitted.
    """

    def __init__(
        self,
        vocabulary: Vocabulary,
        encode: Callable[[str], Sequence[int]] | None = None,
        *,
        unseen_penalty: float = 2.0,
    ) -> None:
        self.vocabulary = vocabulary
        self.encode = encode
        self.unseen_penalty = unseen_penalty
        self.seen: set[int] = set()
        self._extendable: np.ndarray | None = None
        self._by_bytes: dict[bytes, int] = {}
        self._max_len = 0

    def _tables(self) -> tuple[np.ndarray, dict[bytes, int]]:
        if self._extendable is None:
            vocab = self.vocabulary
            special = set(vocab.special_ids.tolist())
            by_bytes: dict[bytes, int] = {}
            for tok in range(vocab.size):
                if tok in special:
                    continue
                b = vocab.token_bytes_of(tok)
                if b and b not in by_bytes:
                    by_bytes[b] = tok
            self._max_len = max((len(b) for b in by_bytes), default=0)
            # a token is extendable when another token has it as a proper prefix: in sorted
            # order such a token comes right after it (or after tokens that also extend it)
            ordered = sorted(by_bytes)
            ext = np.zeros(vocab.size, dtype=bool)
            for a, b in zip(ordered, ordered[1:], strict=False):
                if b.startswith(a):
                    ext[by_bytes[a]] = True
            self._extendable, self._by_bytes = ext, by_bytes
        return self._extendable, self._by_bytes

    def observe(self, tokens: Sequence[int]) -> None:
        """Record tokens the model emitted."""
        self.seen.update(int(t) for t in tokens)

    def extendable(self, token: int) -> bool:
        """Whether a longer vocabulary token starts with this one's bytes."""
        ext, _ = self._tables()
        return bool(ext[token])

    def tokenize(self, data: bytes) -> list[int]:
        """Tokens for ``data`` (possibly covering only a prefix of it)."""
        if not data:
            return []
        _, by_bytes = self._tables()
        if not self.seen and self.encode is not None:
            text = data.decode("utf-8", errors="ignore")
            return [int(t) for t in self.encode(text)] if text else []
        n = len(data)
        inf = math.inf
        cost = [0.0] + [inf] * n
        back: list[tuple[int, int]] = [(0, -1)] * (n + 1)
        for i in range(n):
            if cost[i] == inf:
                continue
            for k in range(1, min(self._max_len, n - i) + 1):
                tok = by_bytes.get(data[i : i + k])
                if tok is None:
                    continue
                c = cost[i] + (1.0 if tok in self.seen else 1.0 + self.unseen_penalty)
                if c < cost[i + k]:
                    cost[i + k] = c
                    back[i + k] = (i, tok)
        end = n
        while end > 0 and cost[end] == inf:
            end -= 1
        out: list[int] = []
        while end > 0:
            i, tok = back[end]
            out.append(tok)
            end = i
        out.reverse()
        return out


class GrammarDrafter:
    """Jump-forward: draft the tokens of the text the grammar forces next.

    The forced text (:meth:`Matcher.forced_bytes`) is tokenized by :class:`TokenText`
    (canonically at first, then in the style of the tokens the model has emitted), and the last
    token is dropped when a longer vocabulary token starts with it (the text that follows could
    merge with it, as ``"order"`` + ``Id`` into ``"orderId"``) unless the model has emitted that
    token itself.

    Parameters
    ----------
    vocabulary : Vocabulary
        The model's vocabulary.
    encode : callable, optional
        ``text -> token ids`` without special tokens (the model's tokenizer). Default: the
        minimum-token tokenization over the vocabulary.
    text : TokenText, optional
        Share one learned tokenizer between drafters (default: a new one).
    """

    name = "grammar"
    prior = 0.9
    """Expected acceptance rate before any is measured: forced text, in the model's style."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        encode: Callable[[str], Sequence[int]] | None = None,
        *,
        text: TokenText | None = None,
    ) -> None:
        self.text = text if text is not None else TokenText(vocabulary, encode)
        self._seen_upto: list[int] = []

    def begin(self, session: Any, prompts: Sequence[Sequence[int]]) -> None:
        """Set up for one decode (called after the prefill)."""
        self._seen_upto = [len(p) for p in prompts]

    def tokens_for(self, forced: bytes) -> list[int]:
        """Return the tokens of ``forced`` that are safe to draft."""
        toks = self.text.tokenize(forced)
        if toks and self.text.extendable(toks[-1]) and toks[-1] not in self.text.seen:
            toks.pop()  # unless the model itself writes that token
        return toks

    def propose(self, request: DraftRequest) -> None:
        """Extend the drafts of ``request``."""
        for row in request.rows:
            if row < len(self._seen_upto):  # learn the model's style from its output
                self.text.observe(request.histories[row][self._seen_upto[row] :])
                self._seen_upto[row] = len(request.histories[row])
            m = request.matchers[row]
            if m is None or request.room_for(row, self.name) == 0:
                continue
            toks = self.tokens_for(m.forced_bytes())
            if toks:
                request.offer(row, toks, self.name)


class PromptLookupDrafter:
    """Prompt lookup: draft what followed the latest earlier occurrence of the output's end.

    With a ``vocabulary`` the match is on text (the last ``max_chars`` down to ``min_chars``
    bytes of the output, searched in the prompt's and output's bytes), and the continuation is
    tokenized afresh: a value copied from the prompt is found even when the output tokenizes it
    differently (``"Ana`` in JSON, `` Ana`` in the prompt). Without one, the match is on token
    ids (the last ``max_ngram`` down to ``min_ngram`` tokens), as vLLM's n-gram drafter.

    Parameters
    ----------
    vocabulary : Vocabulary, optional
        Enables text matching.
    encode : callable, optional
        The model's tokenizer (see :class:`TokenText`).
    max_ngram, min_ngram : int
        Token matching: longest and shortest suffix looked up.
    max_chars, min_chars : int
        Text matching: longest and shortest suffix looked up, in bytes.
    min_chars_output : int
        Text matching: shortest suffix matched in the output itself (a short match there, such
        as ``":"``, mostly repeats structure the grammar already drafts).
    max_tokens : int
        Most tokens drafted per call.
    text : TokenText, optional
        Share one learned tokenizer with the grammar drafter.
    """

    name = "lookup"

    def __init__(
        self,
        vocabulary: Vocabulary | None = None,
        encode: Callable[[str], Sequence[int]] | None = None,
        *,
        max_ngram: int = 3,
        min_ngram: int = 1,
        max_chars: int = 32,
        min_chars: int = 3,
        min_chars_output: int = 8,
        max_tokens: int = 6,
        text: TokenText | None = None,
    ) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        if not 1 <= min_chars <= max_chars:
            raise ValueError(f"need 1 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.max_chars, self.min_chars = max_chars, min_chars
        self.min_chars_output = min_chars_output
        self.max_tokens = max_tokens
        if text is None and vocabulary is not None:
            text = TokenText(vocabulary, encode)
        self.text = text
        self._prompts: list[int] = []
        self._prompt_bytes: list[bytes] = []
        self._cursor: list[int] = []
        # per row: the output decoded so far and how many tokens it covers (outputs only grow
        # during a decode, so each propose decodes only the new tokens)
        self._out_bytes: list[bytearray] = []
        self._out_tokens: list[int] = []

    def begin(self, session: Any, prompts: Sequence[Sequence[int]]) -> None:
        """Set up for one decode (called after the prefill)."""
        self._prompts = [len(p) for p in prompts]
        self._cursor = [0] * len(prompts)
        self._out_bytes = [bytearray() for _ in prompts]
        self._out_tokens = [0] * len(prompts)
        if self.text is not None:
            vocab = self.text.vocabulary
            self._prompt_bytes = [vocab.decode(p) for p in prompts]

    def _output_bytes(self, row: int, out: Sequence[int]) -> bytes:
        """Return the bytes of ``out`` (row ``row``'s output tokens), decoding only new ones."""
        assert self.text is not None
        done = self._out_tokens[row]
        if len(out) < done:  # not expected within a decode; start over rather than be wrong
            self._out_bytes[row] = bytearray()
            done = 0
        if len(out) > done:
            self._out_bytes[row] += self.text.vocabulary.decode(out[done:])
            self._out_tokens[row] = len(out)
        return bytes(self._out_bytes[row])

    def lookup(self, context: Sequence[int], limit: int) -> list[int]:
        """Token matching: up to ``limit`` tokens that followed the latest match of the end."""
        h = np.asarray(context, dtype=np.int64)
        n_ctx = h.shape[0]
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            pattern = h[n_ctx - n :]
            windows = np.lib.stride_tricks.sliding_window_view(h[: n_ctx - 1], n)
            hits = np.flatnonzero((windows == pattern).all(axis=1))
            if hits.shape[0]:
                start = int(hits[-1]) + n
                return [int(t) for t in h[start : start + limit]]
        return []

    def lookup_text(
        self, prompt: bytes, output: bytes, limit: int, cursor: int = 0
    ) -> tuple[list[int], int]:
        """Text matching: the tokens of the bytes that followed a match of the output's end.

        The longest suffix (``max_chars`` down to ``min_chars`` bytes) found in the prompt
        (first occurrence at or after ``cursor``, else the latest) or, from
        ``min_chars_output`` bytes, in the output. Failing that, the output's trailing word
        fragment (letters and digits, shorter than ``min_chars``: a value just begun, such as
        ``1`` of ``18``) is matched at a word start in the prompt. Returns the tokens and the
        prompt position after the match (the next ``cursor``; extraction copies values in about
        the prompt's order), or ``cursor`` unchanged.
        """
        assert self.text is not None
        corpus = prompt + output
        end = len(corpus)
        for n in range(min(self.max_chars, len(output)), self.min_chars - 1, -1):
            pattern = output[-n:]
            pos = _find(prompt, pattern, cursor)
            if pos < 0 and n >= self.min_chars_output:
                pos = corpus.rfind(pattern, 0, end - 1)
            if pos < 0:
                continue
            toks = self._follow(corpus, pos + n, limit)
            if toks:
                return toks, pos + n if pos + n <= len(prompt) else cursor
        frag = _trailing_word(output)
        if frag and len(frag) < self.min_chars:
            pos = _find(prompt, frag, cursor, word_start=True)
            if pos >= 0:
                toks = self._follow(prompt, pos + len(frag), limit)
                if toks:
                    return toks, pos + len(frag)
        return [], cursor

    def _follow(self, corpus: bytes, start: int, limit: int) -> list[int]:
        assert self.text is not None
        follow = corpus[start : start + 8 * limit]
        if not follow:
            return []
        toks = self.text.tokenize(follow)
        if toks and len(toks) <= limit and self.text.extendable(toks[-1]):
            toks.pop()  # may continue past the copied text
        return toks[:limit]

    def propose(self, request: DraftRequest) -> None:
        """Extend the drafts of ``request``."""
        for row in request.rows:
            room = min(request.room_for(row, self.name), self.max_tokens)
            if room == 0:
                continue
            if self.text is not None and row < len(self._prompt_bytes):
                out = request.context(row)[self._prompts[row] :]
                toks, self._cursor[row] = self.lookup_text(
                    self._prompt_bytes[row], self._output_bytes(row, out), room,
                    self._cursor[row],
                )  # fmt: skip
            else:
                toks = self.lookup(request.context(row), room)
            if toks:
                request.offer(row, toks, self.name)


class EarlyExitDrafter:
    """Self-speculative drafting: the target's first layers, then its final norm and LM head.

    Early exit after ``layers`` layers, on the target's own key-value cache (no second model).

    The draft positions are appended to the cache of the first ``layers`` layers and cropped
    away afterwards; the committed positions of those layers are exactly the target's, so the
    drafter never recomputes the context. Drafts greedily among the grammar's allowed tokens.

    Parameters
    ----------
    model : constrain.integrations.transformers.Model
        The target model (a decoder whose base model has a ``layers`` list, as Llama, Mistral,
        Qwen and SmolLM2 do).
    layers : int, optional
        Layers used (default: a third of the model's).
    min_prob : float
        Stop drafting when the draft's most likely allowed token is less likely than this.
    """

    name = "early_exit"
    prior = 0.2
    """Expected acceptance rate before any is measured (an untrained exit drafts poorly)."""

    def __init__(self, model: Any, layers: int | None = None, *, min_prob: float = 0.5) -> None:
        self.min_prob = min_prob
        self.model = model
        hf = model.model
        base = getattr(hf, "model", None)
        if base is None or not hasattr(base, "layers"):
            raise TypeError(
                f"{type(hf).__name__} has no `.model.layers`: early-exit drafting needs a "
                "Llama-style decoder; use prompt lookup or a draft model instead"
            )
        total = len(base.layers)
        n = max(1, total // 3) if layers is None else int(layers)
        if not 1 <= n < total:
            raise ValueError(f"layers must be in [1, {total}), got {n}")
        self.layers = n
        self.cost = n / total
        """Share of a target forward pass one draft token costs (the adaptive quota uses it)."""
        self.view = _truncated_view(hf, n)
        self.session: Any = None

    def begin(self, session: Any, prompts: Sequence[Sequence[int]]) -> None:
        """Set up for one decode (called after the prefill)."""
        if not hasattr(session, "extend_with"):
            raise TypeError("EarlyExitDrafter needs the target's HFSession")
        self.session = session

    def propose(self, request: DraftRequest) -> None:
        """Extend the drafts of ``request``."""
        rows = [r for r in request.rows if request.room_for(r, self.name) > 0]
        if not rows:
            return
        sess = self.session
        batch = len(request.histories)
        # feed the pending token and the drafts so far through the first layers
        blocks = {r: [request.histories[r][-1], *request.drafts[r]] for r in rows}
        ids, valid = ragged_block(blocks, batch)
        start = sess.length
        try:
            logits = sess.extend_with(self.view, ids, valid)
            last = {r: logits[r, len(b) - 1] for r, b in blocks.items()}
            _draft_greedily(
                request,
                self.name,
                last,
                lambda feed, on: sess.extend_with(self.view, feed, on),
                self.min_prob,
            )
        finally:
            sess.truncate(start)


class DraftModelDrafter:
    """A smaller causal LM sharing the target's tokenizer drafts greedily (grammar-checked).

    It keeps its own key-value cache of the committed tokens, catching up on each call.

    Parameters
    ----------
    model : constrain.integrations.transformers.Model
        The draft model (same vocabulary as the target).
    cost : float
        Its forward pass as a share of the target's (for the adaptive quota).
    """

    name = "draft_model"

    def __init__(self, model: Any, *, cost: float = 0.25) -> None:
        self.model = model
        self.cost = cost
        """Share of a target forward pass one draft token costs (the adaptive quota uses it)."""
        self.session: Any = None
        self._fed: list[int] = []

    def begin(self, session: Any, prompts: Sequence[Sequence[int]]) -> None:
        """Set up for one decode (called after the prefill)."""
        self.session = self.model.start(prompts)
        self.session.forward(None)
        self._fed = [len(p) for p in prompts]

    def propose(self, request: DraftRequest) -> None:
        """Extend the drafts of ``request``."""
        rows = [r for r in request.rows if request.room_for(r, self.name) > 0]
        if not rows:
            return
        sess = self.session
        batch = len(request.histories)
        # catch up on committed tokens (kept), then the drafts so far (dropped afterwards)
        news = {r: request.histories[r][self._fed[r] :] for r in rows}
        if max(len(v) for v in news.values()):
            ids, valid = ragged_block(news, batch)
            for r, v in news.items():
                self._fed[r] += len(v)
            logits = sess.extend(ids, valid)
            last = {r: logits[r, len(v) - 1] for r, v in news.items() if v}
        else:
            last = {}
        start = sess.length
        try:
            drafted = {r: list(request.drafts[r]) for r in rows}
            if max(len(v) for v in drafted.values()):
                ids, valid = ragged_block(drafted, batch)
                logits = sess.extend(ids, valid)
                for r, v in drafted.items():
                    if v:
                        last[r] = logits[r, len(v) - 1]
            _draft_greedily(request, self.name, last, sess.extend, 0.0)
        finally:
            sess.truncate(start)


def _draft_greedily(
    request: DraftRequest,
    name: str,
    last: dict[int, torch.Tensor],
    step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    min_prob: float,
) -> None:
    """Draft token by token from a model, greedily among the allowed tokens.

    ``last[row]`` holds each row's next-token logits; ``step(ids[B, 1], valid[B, 1])`` feeds one
    token per row and returns the next logits.
    """
    batch = len(request.histories)
    active = list(last)
    while active:
        feed = torch.zeros((batch, 1), dtype=torch.long)
        on = torch.zeros((batch, 1), dtype=torch.bool)
        going = []
        for r in active:
            taken = request.pick(r, last[r], name, min_prob=min_prob)
            if taken and request.room_for(r, name) > 0:
                feed[r, 0] = request.drafts[r][-1]
                on[r, 0] = True
                going.append(r)
        active = going
        if not active:
            return
        logits = step(feed, on)
        last = {r: logits[r, 0] for r in active}


def _truncated_view(hf_model: Any, layers: int) -> Any:
    """Return a shallow copy of a Llama-style causal LM that runs its first ``layers`` layers.

    Parameters are shared (nothing is copied but module containers and the config).
    """
    base = hf_model.model
    view_base = copy.copy(base)
    view_base._modules = dict(base._modules)
    view_base._modules["layers"] = torch.nn.ModuleList(list(base.layers)[:layers])
    view_base.config = copy.copy(base.config)
    view_base.config.num_hidden_layers = layers
    view = copy.copy(hf_model)
    view._modules = dict(hf_model._modules)
    view._modules["model"] = view_base
    return view


def _is_word_byte(b: int) -> bool:
    return chr(b).isalnum() if b < 0x80 else True  # bytes of multi-byte characters: letters


def _trailing_word(data: bytes) -> bytes:
    """Return the trailing run of letters and digits of ``data``."""
    i = len(data)
    while i > 0 and _is_word_byte(data[i - 1]):
        i -= 1
    return data[i:]


def _find(haystack: bytes, needle: bytes, cursor: int, *, word_start: bool = False) -> int:
    """Return the first occurrence of ``needle`` at or after ``cursor``, else the latest one.

    With ``word_start``, only occurrences not preceded by a letter or digit count. -1 if none.
    """
    hits = []
    pos = haystack.find(needle)
    while pos >= 0:
        if not word_start or pos == 0 or not _is_word_byte(haystack[pos - 1]):
            if pos >= cursor:
                return pos
            hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits[-1] if hits else -1
