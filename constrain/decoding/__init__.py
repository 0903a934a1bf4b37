"""Decoding loops (stage 7b): every loop that turns a model and a grammar into a sequence.

- autoregressive: :func:`decode` (``autoregressive.py``), one token-level sampler per step;
- speculative, exact in distribution: :func:`speculative_decode` with the drafters of
  ``drafters.py`` (``speculative.py``);
- sequence-level samplers: :class:`SMC` (sequential Monte Carlo over particles, ``smc.py``),
  :class:`ASAp` (grammar-aligned sampling, ``asap.py``) and :class:`DCCD` (draft-conditioned
  constrained decoding, ``dccd.py``);
- the method protocol of ``generate(sampler=...)`` (:class:`DecodingMethod`, ``method.py``)
  and the methods known by name (:func:`register_method`, ``registry.py``).

Diffusion decoding has its own package, :mod:`constrain.diffusion`.
"""

from constrain.decoding.asap import ASAp, ASApSample
from constrain.decoding.autoregressive import DecodeResult, DecodingSession, decode
from constrain.decoding.dccd import DCCD, DCCDResult, DraftInfo
from constrain.decoding.method import (
    DecodeJob,
    DecodingMethod,
    MethodOutcome,
    SamplingOptions,
    StreamingMethod,
)
from constrain.decoding.registry import method_names, register_method
from constrain.decoding.smc import SMC, SMCResult
from constrain.decoding.speculative import (
    SpeculativeResult,
    SpeculativeStats,
    iter_speculative_decode,
    speculative_decode,
)

__all__ = [
    "DCCD",
    "SMC",
    "ASAp",
    "ASApSample",
    "DCCDResult",
    "DecodeJob",
    "DecodeResult",
    "DecodingMethod",
    "DecodingSession",
    "DraftInfo",
    "MethodOutcome",
    "SMCResult",
    "SamplingOptions",
    "SpeculativeResult",
    "SpeculativeStats",
    "StreamingMethod",
    "decode",
    "iter_speculative_decode",
    "method_names",
    "register_method",
    "speculative_decode",
]
