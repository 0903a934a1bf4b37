"""Decoding loops (stage 7).

- autoregressive: :func:`decode` (``autoregressive.py``);
- speculative, exact in distribution: :func:`speculative_decode` with the drafters of
  ``drafters.py`` (``speculative.py``);
- diffusion: DINGO, the CFG infilling check and LAVE (``diffusion.py``, ``infilling.py``,
  ``token_dfa.py``); the denoising loop over a diffusion model is still to come.
"""

from constrain.decoding.autoregressive import DecodeResult, DecodingSession, decode
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
    "dingo",
    "iter_speculative_decode",
    "lave_step",
    "speculative_decode",
]
