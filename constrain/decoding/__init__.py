"""Decoding loops (stage 7).

- autoregressive: :func:`decode` (``autoregressive.py``);
- speculative, exact in distribution: :func:`speculative_decode` with the drafters of
  ``drafters.py`` (``speculative.py``);
- diffusion: DINGO, the CFG infilling check and LAVE (``diffusion.py``, ``infilling.py``,
  ``token_dfa.py``), and the denoising loop :func:`diffusion_decode` over a
  :class:`DiffusionModel` (``denoising.py``; the Hugging Face adapter is
  :class:`constrain.integrations.diffusion.HFMaskedLM`).
"""

from constrain.decoding.autoregressive import DecodeResult, DecodingSession, decode
from constrain.decoding.denoising import DiffusionModel, DiffusionResult, diffusion_decode
from constrain.decoding.diffusion import (
    DingoResult,
    Gap,
    InfillChecker,
    InfillResult,
    LaveResult,
    NotRegularError,
    TokenDfa,
    dingo,
    lave_step,
)
from constrain.decoding.speculative import (
    SpeculativeResult,
    SpeculativeStats,
    iter_speculative_decode,
    speculative_decode,
)

__all__ = [
    "DecodeResult",
    "DecodingSession",
    "DiffusionModel",
    "DiffusionResult",
    "DingoResult",
    "Gap",
    "InfillChecker",
    "InfillResult",
    "LaveResult",
    "NotRegularError",
    "SpeculativeResult",
    "SpeculativeStats",
    "TokenDfa",
    "decode",
    "diffusion_decode",
    "dingo",
    "iter_speculative_decode",
    "lave_step",
    "speculative_decode",
]
