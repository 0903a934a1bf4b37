"""The sampler protocol (stage 7).

A sampler turns one decoding step's logits and the rows' matchers into next tokens::

    sample = sampler.sample(logits, matchers, generator)   # logits: (B, C) tensor
    sample.token_ids     # (B,) int64 tensor, each allowed by its row's matcher
    sample.log_weights   # (B,) float64 tensor: incremental importance log-weights

Exact samplers (whose tokens are distributed as the model restricted to the grammar at this step)
return weight 0; locally constrained samplers return the log of the probability mass the grammar
allowed, which is the weight that makes them *properly weighted* for the model-times-grammar
target, so sequential Monte Carlo can wrap any sampler (Lew et al., 2023; Loula et al., 2025).

Samplers never advance the matchers: the decoding loop accepts the chosen tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import torch

from constrain.matcher import Matcher
from constrain.sampling.streams import Randomness

__all__ = ["Sample", "Sampler"]


class Sample(NamedTuple):
    """The tokens chosen at one step and their incremental log-weights."""

    token_ids: torch.Tensor
    """(B,) int64, on the logits' device."""
    log_weights: torch.Tensor
    """(B,) float64, on the CPU."""


@runtime_checkable
class Sampler(Protocol):
    """Choose the next token of every row."""

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        """Compute, on the CPU, what :meth:`sample` needs from the matchers (e.g. the bitmask).

        The decoding loop calls it while the model's forward pass runs (on a GPU, or in a
        worker thread on the CPU), so it overlaps with the forward pass. ``rows`` lists the
        rows still generating; ``None`` matchers are unconstrained rows.
        """
        ...

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: Randomness = None,
    ) -> Sample:
        """Return the next token and the incremental log-weight of every row of ``logits``.

        ``generator`` is a ``torch.Generator``, ``None`` (torch's default one) or
        :class:`~constrain.sampling.RandomStreams` with one stream per row, which
        ``generate(seed=...)`` passes; :func:`~constrain.sampling.streams.draw_uniform` draws
        from any of them, and a row should draw once per call, so that its draws do not depend
        on the other rows of the batch.
        """
        ...
