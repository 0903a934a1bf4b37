"""Samplers (stage 7): logits plus matchers -> next tokens plus log-weights.

Every sampler follows :class:`constrain.sampling.base.Sampler`:
``sample(logits[B, C], matchers, generator) -> Sample(token_ids[B], log_weights[B])``.
"""

from constrain.sampling.base import Sample, Sampler
from constrain.sampling.masked import MaskedSampler

__all__ = ["MaskedSampler", "Sample", "Sampler"]
