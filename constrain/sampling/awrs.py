"""Adaptive weighted rejection sampling (AWRS): exact constrained samples without a full mask.

Token masking checks every token of the vocabulary at every step. AWRS (Lipkin et al., 2025)
checks tokens one at a time, in the order of a Gumbel race, and stops at the first one the
grammar allows: that token is an exact sample of the model restricted to the grammar at this
step, and it usually costs a handful of checks (the more the model already agrees with the
grammar, the fewer). One more check gives an unbiased, properly weighted estimate of the
probability mass the grammar allows, the importance weight that sequential Monte Carlo needs
(:class:`constrain.sampling.SMC`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch

from constrain.errors import InternalError, SamplerError
from constrain.matcher import Matcher
from constrain.sampling.base import Sample
from constrain.sampling.streams import Randomness, draw_uniform
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["AWRS"]

# Below this remaining (not yet rejected) probability mass, 1 - R loses too many digits to the
# rejected mass it is computed from: the row falls back to the exact mask.
_MIN_REMAINING = 1e-9
# Candidates fetched at once when max_checks is None (more are sorted on demand).
_CHUNK = 32


class AWRS:
    r"""Sample the next token by adaptive rejection, with an unbiased estimate of the allowed mass.

    Parameters
    ----------
    temperature : float, optional
        Sample from ``softmax(logits / temperature)`` restricted to the allowed tokens; the
        log-weights then estimate the allowed mass of that tempered distribution. Must be
        ``> 0`` (``1.0``, the default, is the model itself).
    max_checks : int or None, optional
        After this many rejections in a row, the row falls back to the full mask (as
        :class:`~constrain.sampling.MaskedSampler` does) and its log-weight becomes the exact
        allowed mass, so the cost of a step is bounded by ``max_checks + 2`` checks plus one
        mask. ``None``: never fall back (the worst case then checks the whole vocabulary).
    record_stats : bool, optional
        Append the number of constraint checks of every constrained row at every step to
        :attr:`stats`.

    Attributes
    ----------
    stats : list of int
        Constraint checks per constrained row per :meth:`sample` call (terminated rows and
        rows without a matcher are not recorded); a row that fell back to the mask records the
        checks made before it. Clear it with :meth:`reset_stats`.
    fell_back : list of bool
        Aligned with :attr:`stats`: whether the row fell back to the mask.
    fallbacks : int
        Rows that fell back to the full mask.

    Notes
    -----
    **Sampling.** Let ``p`` be the model's next-token distribution and ``c(x)`` be 1 when the
    grammar allows ``x`` (EOS: when the output so far is complete). Tokens that can never be
    allowed (ids past the tokenizer's vocabulary, special tokens other than EOS) are pruned
    first: with ``P`` their complement, ``p`` is renormalised over ``P`` and
    ``log p(P)`` is added to the weight. Every token gets the key ``log p(x) + G_x`` with
    ``G_x`` standard Gumbel; sorting by key samples tokens from ``p`` without replacement.
    Tokens are checked in that order (:meth:`Matcher.validate_tokens`, or
    :meth:`Matcher.is_accepting` for EOS) and the first allowed one is returned: the first
    allowed token of a Gumbel race is distributed as ``p(x) c(x) / Z`` with
    ``Z = sum_x p(x) c(x)`` exactly.

    **Weight.** Let ``R`` be the mass of the tokens rejected before the accepted token ``x``,
    ``q = p(x) / (1 - R)`` the probability that a draw from the tokens not yet rejected gives
    ``x``, and ``y`` the token after ``x`` in the order (one more check). The log-weight is::

        log p(P) + log(1 - R) + log(1 if c(y) else q)

    (the factor is 1 when no token of positive probability follows ``x``). It is unbiased
    for ``Z`` and properly weighted: ``E[w f(x)] = sum_x p(x) c(x) f(x)`` for every ``f``.
    Proof sketch: with ``S`` the set not yet rejected and ``A(S) = Z / p(S)`` the chance that a
    draw from ``S`` is allowed, a rejected draw gives ``A(S) = (1 - q) A(S \ {x})`` (this
    is the running product ``1 - R``), and an accepted draw gives
    ``A(S) = q + (1 - q) A(S \ {x})``, where ``A(S \ {x})`` is estimated without bias by
    ``c(y)``. Induction on ``S`` then gives ``E[w 1{returns x}] = p(x) c(x)``. This is the
    paper's recursive (Rao-Blackwellised) estimator; it costs one check more than the sample,
    and ``w`` lies between ``q (1 - R)`` and ``1 - R``, so its variance is small when the
    model's mass is concentrated. When the allowed mass ``Z`` is tiny, a row that accepts
    early usually gets ``w = p(x)`` and, with probability about ``Z``, ``w = 1 - R`` (its
    next token is allowed too): still unbiased, but the variance then sits in rare draws.

    **Fallback.** When ``max_checks`` rejections have happened (or the remaining mass is below
    ``1e-9``), the row's allowed tokens are computed with the mask; the token is the allowed one
    with the largest key (the same Gumbel race, so the sample stays exact) and the weight is
    the exact ``log Z``. Stopping on the history like this keeps the estimator properly
    weighted.

    Rows whose matcher is ``None`` are sampled from ``p`` (weight 0); rows whose matcher has
    terminated get EOS (weight 0). Rows may share one matcher object (particles in the same
    state): each token is then checked once per call, and :attr:`stats` still counts the
    checks each row asked for.

    References
    ----------
    .. [1] B. Lipkin, B. LeBrun, J. Hoover Vigly, J. Loula, D. R. MacIver, L. Du, J. Eisner,
       R. Cotterell, V. Mansinghka, T. J. O'Donnell, A. K. Lew, T. Vieira, "Fast Controlled
       Generation from Language Models with Adaptive Weighted Rejection Sampling", COLM 2025,
       arXiv:2504.05410.

    Examples
    --------
    >>> sampler = AWRS()
    >>> sample = sampler.sample(logits, matchers, generator)  # doctest: +SKIP
    >>> float(np.mean(sampler.stats))  # mean constraint checks per row and step  # doctest: +SKIP
    2.7
    """

    method_name: ClassVar[str] = "awrs"
    """Its name as a decoding method (``GenerationResult.sampler``)."""

    def __init__(
        self,
        temperature: float = 1.0,
        *,
        max_checks: int | None = 64,
        record_stats: bool = True,
    ) -> None:
        if not temperature > 0.0 or not math.isfinite(temperature):
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        if max_checks is not None and max_checks < 0:
            raise ValueError(f"max_checks must be >= 0 or None, got {max_checks!r}")
        self.temperature = float(temperature)
        self.max_checks = max_checks
        self.record_stats = record_stats
        self.stats: list[int] = []
        self.fell_back: list[bool] = []
        self.fallbacks = 0
        self._prune_cache: dict[tuple[int, int, str], tuple[Vocabulary, torch.Tensor]] = {}
        self._eos: dict[int, frozenset[int]] = {}

    def __repr__(self) -> str:
        return f"AWRS(temperature={self.temperature}, max_checks={self.max_checks})"

    def reset_stats(self) -> None:
        """Forget the recorded check counts and fallbacks."""
        self.stats = []
        self.fell_back = []
        self.fallbacks = 0

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        """Do nothing: AWRS checks tokens lazily, after the logits are known."""

    def _pruned(self, vocab: Vocabulary, width: int, device: torch.device) -> torch.Tensor:
        """``(width,)`` bool: the ids that are never allowed (padding, non-EOS specials)."""
        key = (id(vocab), width, str(device))
        hit = self._prune_cache.get(key)
        if hit is not None and hit[0] is vocab:
            return hit[1]
        never = np.zeros(width, dtype=bool)
        never[vocab.size :] = True
        special = vocab.special_ids[vocab.special_ids < width]
        never[special] = True
        never[vocab.eos_ids[vocab.eos_ids < width]] = False
        mask = torch.from_numpy(never).to(device)
        if len(self._prune_cache) > 8:
            self._prune_cache.clear()
        self._prune_cache[key] = (vocab, mask)
        return mask

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: Randomness = None,
    ) -> Sample:
        """Choose one token per row by adaptive rejection; estimate the allowed mass.

        Parameters
        ----------
        logits : (B, C) float torch.Tensor
            The model's next-token logits (not modified).
        matchers : sequence of Matcher or None
            One per row (not advanced); ``None`` leaves the row unconstrained.
        generator : torch.Generator or RandomStreams, optional
            Source of randomness, on the device of ``logits`` (streams: one per row).

        Returns
        -------
        Sample
            ``log_weights[i]`` is the estimate of ``log Z_i`` (see the class notes).

        Raises
        ------
        InternalError
            If a constrained row allows no token at all (a bug in constrain).
        SamplerError
            If every token a row's grammar allows has probability 0 under ``logits``.
        """
        if logits.ndim != 2 or logits.shape[0] != len(matchers):
            raise ValueError(
                f"logits must be (batch, vocab) with one row per matcher; got shape "
                f"{tuple(logits.shape)} for {len(matchers)} matchers"
            )
        batch, width = int(logits.shape[0]), int(logits.shape[1])
        device = logits.device
        scores = logits.float() / self.temperature
        lse_all = torch.logsumexp(scores, dim=-1)
        groups: dict[int, tuple[Vocabulary, list[int]]] = {}
        for i, m in enumerate(matchers):
            if m is not None and not m.is_terminated():
                groups.setdefault(id(m.vocab), (m.vocab, []))[1].append(i)
        if groups:
            for vocab, rows in groups.values():
                never = self._pruned(vocab, width, device)
                idx = torch.tensor(rows, dtype=torch.long, device=device)
                scores[idx] = scores[idx].masked_fill(never, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        uniform = draw_uniform(scores.shape, generator, device=device, dtype=torch.float32)
        uniform.clamp_(min=torch.finfo(uniform.dtype).tiny)  # u = 0 would drop a token
        keys = scores - torch.log(-torch.log(uniform))
        chosen = keys.argmax(dim=-1)
        if not groups:
            for i, m in enumerate(matchers):
                if m is not None:  # terminated
                    chosen[i] = int(m.vocab.eos_ids[0])
            return Sample(chosen, torch.zeros(batch, dtype=torch.float64))
        k = min(width, _CHUNK if self.max_checks is None else self.max_checks + 2)
        top_keys, top_ids = torch.topk(keys, k, dim=-1)
        top_logp = scores.gather(1, top_ids).double() - lse.double().unsqueeze(1)
        ids_rows = top_ids.cpu().tolist()
        prob_rows = top_logp.exp().cpu().tolist()
        finite_rows = torch.isfinite(top_keys).cpu().tolist()
        log_pruned = (lse.double() - lse_all.double()).cpu().tolist()
        out = chosen.cpu().tolist()
        weights = [0.0] * batch
        # Rows may share a matcher (particles in the same state): check each token once per call.
        memo: dict[tuple[int, int], bool] = {}
        for i, m in enumerate(matchers):
            if m is None:
                continue
            if m.is_terminated():
                out[i] = int(m.vocab.eos_ids[0])
                continue
            cands = _Candidates(ids_rows[i], prob_rows[i], finite_rows[i], i, keys, scores, lse)
            tok, logw, checks, fell_back = self._row(m, cands, memo)
            out[i] = tok
            if fell_back:
                # the exact log mass of the allowed scores, relative to all of them
                weights[i] = logw - float(lse_all[i])
                self.fallbacks += 1
            else:
                weights[i] = logw + log_pruned[i]
            if self.record_stats:
                self.stats.append(checks)
                self.fell_back.append(fell_back)
        token_ids = torch.tensor(out, dtype=torch.long, device=device)
        log_weights = torch.tensor(weights, dtype=torch.float64)
        return Sample(token_ids, log_weights)

    def _row(
        self, m: Matcher, cands: _Candidates, memo: dict[tuple[int, int], bool]
    ) -> tuple[int, float, int, bool]:
        """Run the rejection loop of one row: ``(token, log-weight, checks, fell back)``.

        The log-weight excludes the pruning term, except after a fallback, where it is the
        log of the allowed mass of the tempered scores (``logsumexp`` of allowed scores).
        """
        vocab = m.vocab
        eos = self._eos.get(id(vocab))
        if eos is None:
            eos = frozenset(int(e) for e in vocab.eos_ids)
            self._eos = {id(vocab): eos}
        size = vocab.size
        rejected = 0.0
        checks = 0
        pos = 0
        accepted = -1
        q = 1.0
        limit = self.max_checks
        while True:
            item = cands.get(pos)
            if item is None:
                # no token of positive probability is left
                if accepted >= 0:
                    return accepted, math.log(1.0 - rejected), checks, False
                return self._fallback(m, cands.keys, cands.scores, checks)
            tok, p = item
            if accepted < 0 and (
                (limit is not None and checks >= limit) or 1.0 - rejected < _MIN_REMAINING
            ):
                return self._fallback(m, cands.keys, cands.scores, checks)
            checks += 1
            key = (id(m), tok)
            known = memo.get(key)
            if known is not None:
                ok = known
            elif tok >= size:
                ok = False
            elif tok in eos:
                ok = memo[key] = m.is_accepting()
            else:
                # a canonical matcher may allow a token with nothing after it (a dead end)
                ok = memo[key] = m.validate_tokens([tok]) == 1 and not (
                    m.canonical is not None and m.is_dead_end(tok)
                )
            if accepted >= 0:
                factor = 1.0 if ok else q
                return accepted, math.log(1.0 - rejected) + math.log(factor), checks, False
            if ok:
                accepted = tok
                q = min(1.0, p / (1.0 - rejected))
            else:
                rejected += p
            pos += 1

    def _fallback(
        self, m: Matcher, keys: torch.Tensor, scores: torch.Tensor, checks: int
    ) -> tuple[int, float, int, bool]:
        ids = m.allowed_token_ids()
        if m.canonical is not None:
            ids = ids[[not m.is_dead_end(int(t)) for t in ids]]
        allowed = torch.from_numpy(ids.astype(np.int64)).to(keys.device)
        if allowed.numel() == 0:
            raise InternalError(
                "no token is allowed: the grammar has no continuation and no end here. This is "
                "a bug in constrain; please report it with the grammar."
            )
        lse_allowed = float(torch.logsumexp(scores[allowed].double(), dim=0))
        if lse_allowed == float("-inf"):
            raise SamplerError(
                "every token the grammar allows has probability 0 under the logits (were they "
                "masked by another processor?)"
            )
        tok = int(allowed[keys[allowed].argmax()])
        return tok, lse_allowed, checks, True


class _Candidates:
    """The tokens of one row in descending key order, with their (pruned) probabilities."""

    def __init__(
        self,
        ids: list[int],
        probs: list[float],
        finite: list[bool],
        row: int,
        keys: torch.Tensor,
        scores: torch.Tensor,
        lse: torch.Tensor,
    ) -> None:
        self.ids = ids
        self.probs = probs
        self.finite = finite
        self._row = row
        self._keys = keys
        self._scores = scores
        self._lse = lse
        self._sorted = len(ids) >= keys.shape[1]

    @property
    def keys(self) -> torch.Tensor:
        """``(C,)`` Gumbel keys of the row."""
        return self._keys[self._row]

    @property
    def scores(self) -> torch.Tensor:
        """``(C,)`` tempered, pruned logits of the row."""
        return self._scores[self._row]

    def get(self, pos: int) -> tuple[int, float] | None:
        """Return ``(token, probability)`` of the ``pos``-th candidate, or None past the last."""
        if pos >= len(self.ids) and not self._sorted:
            self._sort()
        if pos >= len(self.ids) or not self.finite[pos] or self.probs[pos] == 0.0:
            return None  # the rest has probability 0 (masked, or underflowed)
        return self.ids[pos], self.probs[pos]

    def _sort(self) -> None:
        top_keys, order = torch.sort(self.keys, descending=True)
        logp = self.scores[order].double() - self._lse[self._row].double()
        self.ids = order.cpu().tolist()
        self.probs = logp.exp().cpu().tolist()
        self.finite = torch.isfinite(top_keys).cpu().tolist()
        self._sorted = True
