"""Token-level samplers (stage 7a): logits plus matchers -> next tokens plus log-weights.

Every sampler follows :class:`constrain.sampling.base.Sampler`:
``sample(logits[B, C], matchers, generator) -> Sample(token_ids[B], log_weights[B])``.
:class:`MaskedSampler` masks and renormalises; :class:`AWRS` is adaptive weighted rejection
sampling. Sequence-level methods (SMC, ASAp, DCCD) run a decoding loop and live in
:mod:`constrain.decoding`. See ``docs/sampling.md``.
"""

from constrain.sampling.awrs import AWRS
from constrain.sampling.base import Sample, Sampler
from constrain.sampling.masked import MaskedSampler
from constrain.sampling.streams import RandomStreams

__all__ = ["AWRS", "MaskedSampler", "RandomStreams", "Sample", "Sampler"]
