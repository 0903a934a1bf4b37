"""Samplers (stage 7): logits plus matchers -> next tokens plus log-weights.

Token-level samplers follow :class:`constrain.sampling.base.Sampler`:
``sample(logits[B, C], matchers, generator) -> Sample(token_ids[B], log_weights[B])``;
:class:`MaskedSampler` (mask and renormalise) and :class:`AWRS` (adaptive weighted rejection
sampling). Sequence-level methods run the decoding loop themselves: :class:`SMC` (sequential
Monte Carlo over particles), :class:`ASAp` (grammar-aligned sampling with a persistent trie of
expected futures) and :class:`DCCD` (draft-conditioned constrained decoding). See
``docs/sampling.md``.
"""

from constrain.sampling.asap import ASAp, ASApSample
from constrain.sampling.awrs import AWRS
from constrain.sampling.base import Sample, Sampler
from constrain.sampling.dccd import DCCD, DCCDResult, DraftInfo
from constrain.sampling.masked import MaskedSampler
from constrain.sampling.smc import SMC, SMCResult

__all__ = [
    "AWRS",
    "DCCD",
    "SMC",
    "ASAp",
    "ASApSample",
    "DCCDResult",
    "DraftInfo",
    "MaskedSampler",
    "SMCResult",
    "Sample",
    "Sampler",
]
