"""Locally constrained sampling: mask the logits with the grammar, then sample (stage 7).

This is what every structured-generation engine does by default (XGrammar, llguidance and
Outlines through their logits processors): at each step the disallowed tokens get ``-inf`` and
the next token is drawn from the renormalised distribution, or taken greedily. It is exact
*per step*, but the sequence distribution is the model's conditioned greedily on each prefix,
not the model conditioned on the whole output being valid; :attr:`Sample.log_weights` carries
the log of the mass the grammar allowed at each step, the importance weight that corrects for
this (see :mod:`constrain.sampling.base`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch

from constrain.bitmask import BITMASK_BACKENDS, BitmaskApplier, allocate_token_bitmask
from constrain.errors import InternalError
from constrain.matcher import Matcher, fill_next_token_bitmasks
from constrain.sampling.base import Sample
from constrain.sampling.streams import Randomness, RandomStreams, draw_uniform

__all__ = ["MaskedSampler", "gumbel_argmax", "tempered_scores"]

# Smallest allowed mass (relative to the row's largest term) that the one-exp log-weight
# trusts; float32 exp loses terms below 1e-38, at most V * 1e-38 < 1e-31 of it in all.
_MIN_FAST_MASS = 1e-20
# tokens chosen again at most per step where canonical masks lead into dead ends
_MAX_DEAD_ENDS = 64
_TINY64 = sys.float_info.min  # the smallest normal float64, 2.2e-308


class MaskedSampler:
    """Mask the logits with each row's grammar and sample (or take the argmax).

    Parameters
    ----------
    temperature : float, optional
        ``0`` (the default) takes the most likely allowed token; ``> 0`` samples from
        ``softmax(logits / temperature)`` restricted to the allowed tokens.
    top_k : int, optional
        Keep only the ``top_k`` most likely allowed tokens (``0``: all). Applied after the mask,
        so it never empties the candidate set.
    top_p : float, optional
        Nucleus sampling: keep the smallest set of most likely allowed tokens whose probability
        reaches ``top_p`` (``1.0``: all).
    backend : {"auto", "torch", "numba", "triton"}, optional
        The kernel that applies the bitmask (:func:`constrain.apply_token_bitmask_inplace`).

    Notes
    -----
    ``log_weights[i]`` is ``logsumexp(allowed logits) - logsumexp(all logits)`` at temperature 1,
    the log of the probability the model gave to the allowed tokens (0 for rows without a
    matcher). It takes one ``exp`` over the row: with ``m`` the row's maximum and
    ``e = exp(logits - m)`` before masking, it is ``log(sum(e[allowed]) / sum(e))``, the allowed
    sum reusing ``e`` with its disallowed entries zeroed by the bitmask kernel. Two
    ``logsumexp`` cost three times as much on the CPU, the masked one mostly because
    ``exp(-inf)`` is slow there. Rows whose allowed mass is below 1e-20 of the largest term
    (log-weight < -46), where float32 ``exp`` underflows, get an exact ``logsumexp`` instead;
    rows without a matcher cost nothing.

    Sampling (``temperature > 0``) is the Gumbel-max trick, ``argmax(scores + G)`` with ``G``
    i.i.d. standard Gumbel drawn from the generator (``gumbel_argmax``): an exact draw
    from ``softmax(scores)``, reproducible for a seeded generator, and about 2.5 times faster
    on the CPU than ``torch.multinomial``, whose exponential variates cost more than the rest.
    """

    method_name: ClassVar[str] = "masked"
    """Its name as a decoding method (``GenerationResult.sampler``)."""

    def __init__(
        self,
        temperature: float = 0.0,
        *,
        top_k: int = 0,
        top_p: float = 1.0,
        backend: str = "auto",
    ) -> None:
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 keeps every token), got {top_k!r}")
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
        if backend not in BITMASK_BACKENDS:
            raise ValueError(f"backend must be one of {BITMASK_BACKENDS}, got {backend!r}")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.backend = backend
        # the bitmask buffer, reused while it has enough rows for the same vocabulary
        self._applier: BitmaskApplier | None = None
        # the matchers and live rows the bitmask was last prepared for
        self._prepared: tuple[list[Matcher | None], list[int]] | None = None

    def __repr__(self) -> str:
        return (
            f"MaskedSampler(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p})"
        )

    def _buffer(self, rows: int, vocab_size: int) -> BitmaskApplier:
        applier = self._applier
        if applier is None or applier.bitmask.shape[0] < rows or applier.vocab_size != vocab_size:
            buf = allocate_token_bitmask(rows, vocab_size, pin_memory=torch.cuda.is_available())
            applier = self._applier = BitmaskApplier(buf, vocab_size, self.backend)
        return applier

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        """Fill the bitmask rows of the constrained rows in ``rows`` (CPU work)."""
        live = [i for i in rows if matchers[i] is not None]
        self._prepared = (list(matchers), live)
        if not live:
            return
        first = matchers[live[0]]
        assert first is not None
        buf = self._buffer(len(matchers), first.vocab.size).bitmask
        fill_next_token_bitmasks([matchers[i] for i in live], buf, indices=live)  # type: ignore[misc]

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: Randomness = None,
    ) -> Sample:
        """Mask ``logits`` (in place) with the prepared bitmask and choose one token per row.

        Parameters
        ----------
        logits : (B, C) float torch.Tensor
            The model's next-token logits; modified in place.
        matchers : sequence of Matcher or None
            One per row; ``None`` leaves the row unconstrained.
        generator : torch.Generator or RandomStreams, optional
            Source of randomness when ``temperature > 0`` (streams: one per row).

        Returns
        -------
        Sample

        Raises
        ------
        ValueError
            If ``logits`` is not ``(len(matchers), C)``.
        InternalError
            If a constrained row allows no token at all (a bug in constrain: a matcher never
            reaches a state without continuation or EOS).
        """
        batch = len(matchers)
        if logits.ndim != 2 or logits.shape[0] != batch:
            raise ValueError(
                f"logits must be (batch, vocab) with one row per matcher; got shape "
                f"{tuple(logits.shape)} for {batch} matchers"
            )
        prepared = self._prepared
        if prepared is None or not _same_matchers(prepared[0], matchers):
            # not prepared, or prepared for other matchers (e.g. a decode closed early)
            self.prepare(matchers, range(batch))
            prepared = self._prepared
            assert prepared is not None
        live = prepared[1]
        self._prepared = None
        if not live:  # nothing to mask: every weight is 0
            token_ids = self._choose(logits, generator)
            return Sample(token_ids, torch.zeros(batch, dtype=torch.float64))
        applier = self._applier
        assert applier is not None
        # The live rows: all of them (no copy), or a gathered copy of the few.
        every = len(live) == batch and live == list(range(batch))
        index = None if every else torch.tensor(live, dtype=torch.long, device=logits.device)
        rows = logits if index is None else logits.index_select(0, index)
        # Log-weight, in one exp over the row: with m = max(row) and e = exp(row - m),
        # logsumexp(allowed) - logsumexp(all) = log(sum(e[allowed]) / sum(e)).
        peak = rows.amax(dim=-1, keepdim=True).float()
        e = torch.sub(rows.float(), peak).exp_()
        total = e.sum(dim=-1)
        applier.apply(logits, None if index is None else live)
        if not applier.zero_disallowed(e, None if index is None else live):
            # not numba on the CPU: exp of the masked rows (exp(-inf) = 0)
            masked = logits if index is None else logits.index_select(0, index)
            e = torch.sub(masked.float(), peak).exp_()
        allowed = e.sum(dim=-1)
        sums = torch.stack([total, allowed]).cpu().numpy().astype(np.float64)
        if (sums[1] >= _MIN_FAST_MASS).all():
            lw = np.log(sums[1] / sums[0])
        else:
            lw = self._exact_log_weights(logits, live, peak, sums)
        token_ids = self._choose(logits, generator)
        redrawn = self._past_dead_ends(logits, matchers, live, token_ids, generator)
        for k, i in enumerate(live):
            if i in redrawn:  # the weight of the mask without the dead ends
                lse_all = float(peak[k, 0]) + math.log(float(sums[0, k]))
                lw[k] = float(torch.logsumexp(logits[i].float(), dim=-1)) - lse_all
        if index is None:
            log_weights = torch.from_numpy(lw)
        else:
            log_weights = torch.zeros(batch, dtype=torch.float64)
            log_weights[index.cpu()] = torch.from_numpy(lw)
        return Sample(token_ids, log_weights)

    @staticmethod
    def _exact_log_weights(
        logits: torch.Tensor, live: list[int], peak: torch.Tensor, sums: np.ndarray
    ) -> np.ndarray:
        """Log-weights of the live rows, with an exact ``logsumexp`` where the mass is tiny.

        Below ``_MIN_FAST_MASS`` of the largest term (log-weight < -46), float32 ``exp`` has
        lost allowed tokens that underflowed; a row with nothing allowed lands here too (NaN
        or 0 mass), and raises.
        """
        lw = np.empty(len(live), dtype=np.float64)
        dead = []
        for k, i in enumerate(live):
            total, allowed = float(sums[0, k]), float(sums[1, k])
            if allowed >= _MIN_FAST_MASS:
                lw[k] = math.log(allowed / total)
                continue
            lse_allowed = float(torch.logsumexp(logits[i].float(), dim=-1))
            if lse_allowed == -math.inf:
                dead.append(i)
            lw[k] = lse_allowed - (float(peak[k, 0]) + math.log(total))
        if dead:
            raise InternalError(
                f"no token is allowed in rows {dead}: the grammar has no continuation and no "
                "end here. This is a bug in constrain; please report it with the grammar."
            )
        return lw

    def _past_dead_ends(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        live: Sequence[int],
        token_ids: torch.Tensor,
        generator: Randomness,
    ) -> set[int]:
        """Choose again, in rows with a canonical matcher, where nothing could follow the token.

        A canonical mask is pairwise: it may allow a token that the grammar then forces to be
        followed by bytes the tokenizer would merge into it, so that no canonical token can
        come next (a dead end). Such a token is masked out (``-inf``) and the row chooses
        again, which is the draw the mask without it would have made: sampling stays exact
        for dead ends one token deep. ``token_ids`` is updated in place; returns the rows that
        chose again (their log-weight is the mass left after the dead ends).

        Raises
        ------
        InternalError
            If a row still draws a dead end after ``_MAX_DEAD_ENDS`` draws.
        """
        redrawn: set[int] = set()
        for draw in range(_MAX_DEAD_ENDS + 1):
            dead = [
                i
                for i in live
                if (m := matchers[i]) is not None
                and m.canonical is not None
                and m.is_dead_end(int(token_ids[i]))
            ]
            if not dead:
                return redrawn
            redrawn.update(dead)
            index = torch.tensor(dead, dtype=torch.long, device=logits.device)
            with torch.inference_mode():  # the model's logits are inference tensors
                logits[index, token_ids[index].to(logits.device)] = float("-inf")
            if draw == _MAX_DEAD_ENDS or bool(
                (logits.index_select(0, index).amax(dim=-1) == float("-inf")).any()
            ):
                break
            if isinstance(generator, RandomStreams):
                again = self._choose(logits.index_select(0, index), generator.rows(dead))
            else:
                again = self._choose(logits.index_select(0, index), generator)
            token_ids[index.to(token_ids.device)] = again.to(token_ids.device)
        raise InternalError(
            f"rows {dead}: every allowed token, or {_MAX_DEAD_ENDS} draws in a row, were "
            "canonical dead ends (tokens the grammar must follow with bytes the tokenizer merges "
            "into them); please report it with the grammar, or sample without canonical=True"
        )

    def _choose(self, logits: torch.Tensor, generator: Randomness) -> torch.Tensor:
        if self.temperature == 0.0:
            return _argmax(logits)
        scores = tempered_scores(logits, self.temperature, self.top_k, self.top_p)
        return gumbel_argmax(scores, generator)


def tempered_scores(
    logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Return the scores :class:`MaskedSampler` samples from: ``logits / temperature``, cut.

    ``top_k`` keeps the ``top_k`` highest scores of each row (``0``: all), ``top_p`` the
    smallest set of highest scores whose probability reaches ``top_p``; the rest become
    ``-inf``. Speculative verification draws from the same scores.

    Parameters
    ----------
    logits : (..., C) float torch.Tensor
        Masked logits (``-inf`` on disallowed tokens); not modified, but returned as is at
        temperature 1 in float32 with no cut.
    temperature : float
        Positive.
    top_k : int, optional
        Tokens kept per row (``0``: all).
    top_p : float, optional
        Nucleus mass kept per row (``1.0``: all).

    Returns
    -------
    (..., C) float torch.Tensor
    """
    if temperature == 1.0 and logits.dtype == torch.float32:
        scores = logits  # read only below
    else:
        scores = logits.float() / temperature
    if top_k and top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        probs = sorted_scores.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # always keeps the first
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
    return scores


def gumbel_argmax(scores: torch.Tensor, generator: Randomness = None) -> torch.Tensor:
    """Draw one index per row from ``softmax(scores)`` with the Gumbel-max trick.

    The draw is ``argmax(scores + G)`` along the last axis, with ``G = -log(E)``,
    ``E = -log(U)`` (an exponential variate) and ``U`` uniform in ``[0, 1)``, one per entry,
    from ``generator`` (in float64, so that ``E`` keeps float32 relative precision down to
    ``1e-16``, as ``torch.multinomial``'s exponential race does). It is exact, consumes the
    generator the same way for the same shape, and ``-inf`` scores are never chosen unless the
    whole row is ``-inf``. :class:`MaskedSampler` and :class:`~constrain.sampling.ASAp` both
    draw with it, so they choose alike from the same generator state.

    Parameters
    ----------
    scores : (..., C) float torch.Tensor
        Unnormalised log-probabilities (``-inf``: never chosen); not modified.
    generator : torch.Generator or RandomStreams, optional
        A generator on the device of ``scores`` (the default one when ``None``), or streams:
        one per row of ``scores`` (each draws its row), or one for all of it
        (:func:`~constrain.sampling.streams.draw_uniform`).

    Returns
    -------
    (...) int64 torch.Tensor
        The chosen indices, on the device of ``scores``.

    Raises
    ------
    ValueError
        If the streams do not match the rows of ``scores``.
    """
    u = draw_uniform(scores.shape, generator, device=scores.device)
    # U = 0 (probability 2^-53) would give E = inf and lose the entry even when it is the only
    # finite one: clamp it to the smallest normal float64 instead (E = 708). The largest U,
    # 1 - 2^-53, gives E = 1.1e-16 and G = 36.7: G is always finite, so -inf stays -inf.
    log_e = u.clamp_(min=_TINY64).log_().neg_().to(torch.float32).log_()
    return _argmax(torch.sub(scores.float(), log_e, out=log_e))


def _argmax(x: torch.Tensor) -> torch.Tensor:
    """Return ``x.argmax(dim=-1)``, computed by numpy on the CPU.

    numpy's argmax is vectorised, about ten times faster than torch's on the CPU, and follows
    the same rules: the first index among ties, the first NaN if there is one.
    """
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(np.asarray(x.detach().numpy().argmax(axis=-1), dtype=np.int64))
    return x.argmax(dim=-1)


def _same_matchers(a: Sequence[Matcher | None], b: Sequence[Matcher | None]) -> bool:
    """Whether two matcher sequences hold the same objects in the same rows."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
