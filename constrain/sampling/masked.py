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

from collections.abc import Sequence

import torch

from constrain.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from constrain.errors import ConstrainError
from constrain.matcher import Matcher, fill_next_token_bitmasks
from constrain.sampling.base import Sample

__all__ = ["MaskedSampler"]


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
    matcher).
    """

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
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.backend = backend
        self._bitmask: torch.Tensor | None = None
        # the matchers and live rows the bitmask was last prepared for
        self._prepared: tuple[list[Matcher | None], list[int]] | None = None

    def __repr__(self) -> str:
        return (
            f"MaskedSampler(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p})"
        )

    def _buffer(self, rows: int, vocab_size: int) -> torch.Tensor:
        buf = self._bitmask
        if buf is None or buf.shape[0] < rows or buf.shape[1] != (vocab_size + 31) // 32:
            buf = allocate_token_bitmask(rows, vocab_size, pin_memory=torch.cuda.is_available())
            self._bitmask = buf
        return buf

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        """Fill the bitmask rows of the constrained rows in ``rows`` (CPU work)."""
        live = [i for i in rows if matchers[i] is not None]
        self._prepared = (list(matchers), live)
        if not live:
            return
        first = matchers[live[0]]
        assert first is not None
        buf = self._buffer(len(matchers), first.vocab.size)
        fill_next_token_bitmasks([matchers[i] for i in live], buf, indices=live)  # type: ignore[misc]

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: torch.Generator | None = None,
    ) -> Sample:
        """Mask ``logits`` (in place) with the prepared bitmask and choose one token per row.

        Parameters
        ----------
        logits : (B, C) float torch.Tensor
            The model's next-token logits; modified in place.
        matchers : sequence of Matcher or None
            One per row; ``None`` leaves the row unconstrained.
        generator : torch.Generator, optional
            Source of randomness when ``temperature > 0``.

        Returns
        -------
        Sample

        Raises
        ------
        ConstrainError
            If a constrained row allows no token at all (a bug: a matcher never reaches a
            state without continuation or EOS).
        """
        if logits.ndim != 2 or logits.shape[0] != len(matchers):
            raise ValueError(
                f"logits must be (batch, vocab) with one row per matcher; got shape "
                f"{tuple(logits.shape)} for {len(matchers)} matchers"
            )
        prepared = self._prepared
        if prepared is None or not _same_matchers(prepared[0], matchers):
            # not prepared, or prepared for other matchers (e.g. a decode closed early)
            self.prepare(matchers, range(len(matchers)))
            prepared = self._prepared
            assert prepared is not None
        live = prepared[1]
        self._prepared = None
        lse_all = torch.logsumexp(logits.float(), dim=-1)
        if live:
            assert self._bitmask is not None
            vocab_size = matchers[live[0]].vocab.size  # type: ignore[union-attr]
            mask = self._bitmask.to(logits.device, non_blocking=True)
            apply_token_bitmask_inplace(
                logits,
                mask,
                vocab_size=vocab_size,
                indices=live,
                backend=self.backend,  # type: ignore[arg-type]
            )
        lse_allowed = torch.logsumexp(logits.float(), dim=-1)
        if live and bool(torch.isneginf(lse_allowed[live]).any()):
            bad = [i for i in live if bool(torch.isneginf(lse_allowed[i]))]
            raise ConstrainError(
                f"no token is allowed in rows {bad}: the grammar has no continuation and no "
                "end here. This is a bug in constrain; please report it with the grammar."
            )
        token_ids = self._choose(logits, generator)
        log_weights = (lse_allowed - lse_all).double().cpu()
        return Sample(token_ids, log_weights)

    def _choose(self, logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        if self.temperature == 0.0:
            return logits.argmax(dim=-1)
        scores = logits.float() / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
            cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            drop = cum - sorted_scores.softmax(dim=-1) >= self.top_p  # always keeps the first
            sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
            scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
        probs = scores.softmax(dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _same_matchers(a: Sequence[Matcher | None], b: Sequence[Matcher | None]) -> bool:
    """Whether two matcher sequences hold the same objects in the same rows."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
