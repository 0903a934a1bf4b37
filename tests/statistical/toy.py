"""A language model whose grammar-constrained distribution can be enumerated exactly.

``BigramLM`` is a fixed random bigram model over single-character tokens ``a``..``i`` plus EOS
(id 9). Its probability of a string ``x`` is ``prod P(x_k | x_{k-1}) * P(EOS | x_last)`` (with a
begin-of-sequence row). With single-character tokens every string has exactly one tokenisation,
so ``P(x | x in L)`` is computed by enumerating the strings of ``L`` (:func:`exact_target`).

The default setting is built so that locally constrained decoding (mask, renormalise) is
biased: the model puts most first-step mass on ``a``, but after ``a`` the language forces
``bbbbb``, which the model finds unlikely; the exact target puts little mass on ``abbbbb``, the
masked sampler a lot. ``BIASED_REGEX``'s language is small (22 strings), so 20,000 samples give
a total-variation estimate with little noise.

``ToySession`` implements ``constrain.decoding.DecodingSession`` (plus ``reorder`` for particle
methods): row ``i``'s logits depend only on the last token fed to row ``i``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from constrain import Compiler, Grammar, Matcher, Vocabulary

CHARS = "abcdefghi"
EOS = len(CHARS)  # id 9
BOS_ROW = EOS + 1  # row of the logits table used before the first token
BIASED_REGEX = r"ab{5}|[c-e][fg]{0,2}"
MAX_LEN = 6


def toy_vocabulary() -> Vocabulary:
    """Return the 10-token vocabulary: ``a``..``i`` (ids 0-8) and EOS (id 9)."""
    tokens: list[bytes | None] = [c.encode() for c in CHARS]
    tokens.append(None)
    return Vocabulary.from_bytes(tokens, eos_ids=[EOS])


class BigramLM:
    """A fixed random bigram model; ``logits[row, next]`` with rows 0-9 = previous token, 10 = BOS.

    Parameters
    ----------
    seed : int
        Seed of the random logits (standard normal times ``scale``).
    biased : bool
        Apply the overrides that make local masking biased for :data:`BIASED_REGEX`: BOS
        strongly prefers ``a``, whose only valid continuation ``bbbbb`` + EOS is unlikely. With
        ``seed=0``: the exact target gives ``abbbbb`` 0.107, masking 0.938 (TV 0.86).
    """

    def __init__(self, seed: int = 0, *, biased: bool = True, scale: float = 1.0) -> None:
        rng = np.random.default_rng(seed)
        table = rng.standard_normal((BOS_ROW + 1, EOS + 1)) * scale
        table[BOS_ROW, EOS] = -30.0  # no empty output
        if biased:
            table[BOS_ROW, 0] = 4.0  # 'a' first, locally attractive ...
            table[0, 1] = 1.5  # ... but five b's in a row and then EOS are not
            table[1, 1] = 1.5
        self.logits = torch.tensor(table, dtype=torch.float32)
        self.logprobs = torch.log_softmax(self.logits.double(), dim=-1)

    def string_logprob(self, text: str) -> float:
        """Return ``log P(text, then EOS)``."""
        prev = BOS_ROW
        total = 0.0
        for ch in text:
            tok = CHARS.index(ch)
            total += float(self.logprobs[prev, tok])
            prev = tok
        return total + float(self.logprobs[prev, EOS])

    def session(self, batch: int) -> ToySession:
        """Return a decoding session of ``batch`` rows, all at the start."""
        return ToySession(self, batch)


class ToySession:
    """``forward(None)`` gives the BOS logits; ``forward(tokens)`` the rows' next logits."""

    def __init__(self, lm: BigramLM, batch: int) -> None:
        self.lm = lm
        self.last = torch.full((batch,), BOS_ROW, dtype=torch.long)
        self.calls = 0

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        self.calls += 1
        if token_ids is not None:
            self.last = token_ids.to(torch.long).clone()
        return self.lm.logits[self.last].clone()

    def reorder(self, indices: Sequence[int] | torch.Tensor) -> None:
        """Make row ``i`` a copy of row ``indices[i]`` (particle resampling)."""
        idx = torch.as_tensor(list(indices) if not torch.is_tensor(indices) else indices)
        self.last = self.last[idx.to(torch.long)].clone()


def language(regex: str = BIASED_REGEX, max_len: int = MAX_LEN) -> list[str]:
    """Return every string over ``a``..``i`` of length ``1..max_len`` that fully matches."""
    pat = re.compile(regex)
    out = []
    for n in range(1, max_len + 1):
        for chars in itertools.product(CHARS, repeat=n):
            s = "".join(chars)
            if pat.fullmatch(s):
                out.append(s)
    return out


def exact_target(lm: BigramLM, strings: Iterable[str]) -> dict[str, float]:
    """Return ``P(x | x in L)`` for the strings of ``L``."""
    logp = {s: lm.string_logprob(s) for s in strings}
    top = max(logp.values())
    z = sum(math.exp(v - top) for v in logp.values())
    return {s: math.exp(v - top) / z for s, v in logp.items()}


def exact_masked(lm: BigramLM, strings: Iterable[str]) -> dict[str, float]:
    """Return the distribution of locally constrained (masked, renormalised) sampling.

    At each prefix, the next-token distribution is the model's restricted to tokens that keep
    some string of ``L`` reachable (EOS when the prefix itself is in ``L``).
    """
    strings = list(strings)
    lang = set(strings)
    prefixes = {s[:k] for s in strings for k in range(len(s) + 1)}
    out = {}
    for s in strings:
        total = 0.0
        prev = BOS_ROW
        for k in range(len(s) + 1):
            prefix = s[:k]
            allowed = [i for i, c in enumerate(CHARS) if prefix + c in prefixes]
            if prefix in lang:
                allowed.append(EOS)
            lp = lm.logprobs[prev]
            norm = torch.logsumexp(lp[allowed], dim=0)
            tok = CHARS.index(s[k]) if k < len(s) else EOS
            total += float(lp[tok] - norm)
            prev = tok
        out[s] = math.exp(total)
    return out


_COMPILED: dict[tuple[str, str, str], object] = {}


def toy_matcher(source: str, kind: str = "regex", vocab: Vocabulary | None = None) -> Matcher:
    """A fresh matcher for a regex (or Lark grammar) over ``vocab`` (default the toy one);
    the compiled grammar is cached per (kind, source, vocabulary)."""
    vocab = toy_vocabulary() if vocab is None else vocab
    key = (kind, source, vocab.fingerprint)
    if key not in _COMPILED:
        grammar = Grammar.from_regex(source) if kind == "regex" else Grammar.from_lark(source)
        _COMPILED[key] = Compiler(vocab).compile(grammar)
    return Matcher(_COMPILED[key])  # type: ignore[arg-type]


class ToySpecSession(ToySession):
    """A :class:`ToySession` that also implements ``SpeculativeSession`` (``extend``/``keep``)
    and ``truncate``/``length``: row ``i``'s logits after a position depend only on its token.
    """

    def __init__(self, lm: BigramLM, batch: int, prompt_len: int = 1) -> None:
        super().__init__(lm, batch)
        self.rows: list[list[int]] = [[] for _ in range(batch)]  # valid tokens fed per row
        # per extend: (positions appended, the rows before it), for truncate
        self.stack: list[tuple[int, list[list[int]]]] = []
        self.prompt_len = prompt_len

    @property
    def length(self) -> int:
        return self.prompt_len + sum(w for w, _ in self.stack)

    def extend(self, token_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        batch, width = token_ids.shape
        out = torch.empty((batch, width, EOS + 1))
        self.stack.append((width, [list(r) for r in self.rows]))
        for i in range(batch):
            for t in range(width):
                if bool(valid[i, t]):
                    self.rows[i].append(int(token_ids[i, t]))
                row = self.rows[i]
                out[i, t] = self.lm.logits[row[-1] if row else BOS_ROW]
        return out

    def keep(self, counts: Sequence[int]) -> None:
        width, before = self.stack.pop()
        for i, c in enumerate(counts):
            added = self.rows[i][len(before[i]) :]
            self.rows[i] = before[i] + added[: min(c, len(added))]
        self.stack.append((max(counts) if counts else 0, before))

    def truncate(self, length: int) -> None:
        while self.length > length:
            width, before = self.stack.pop()
            if self.length < length:
                raise ValueError("truncate inside an extend is not supported by the toy")
            self.rows = before


class ToyModel:
    """What ``DraftModelDrafter`` needs of a model: ``start(prompts)``."""

    def __init__(self, lm: BigramLM) -> None:
        self.lm = lm

    def start(self, prompts: Sequence[Sequence[int]]) -> ToySpecSession:
        return ToySpecSession(self.lm, len(prompts))
