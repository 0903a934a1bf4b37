"""Constrained decoding for masked-diffusion language models: one home for the whole feature.

- :mod:`~constrain.diffusion.token_dfa`: the token-level DFA of a regular grammar;
- :mod:`~constrain.diffusion.infilling`: the exact CFG infilling check (can a partial output
  with holes still be completed?);
- :mod:`~constrain.diffusion.dingo_lave`: DINGO (Viterbi over the token DFA) and LAVE
  (lookahead-then-verify);
- :mod:`~constrain.diffusion.denoising`: the denoising loop :func:`diffusion_decode` over a
  :class:`DiffusionModel`;
- :mod:`~constrain.diffusion.route`: ``generate()``'s route to diffusion models;
- :mod:`~constrain.diffusion.tiny_model` and :mod:`~constrain.diffusion.tiny_corpus`: the
  0.7M-parameter byte-level model shipped for examples and tests (``load_tiny_diffusion()``,
  weights ``tiny_diffusion.safetensors``, 1.5 MB) and its synthetic corpus.

The Hugging Face masked-LM adapter is :class:`constrain.integrations.masked_lm.HFMaskedLM`; the
Viterbi kernels are in :mod:`constrain.kernels.numba_diffusion`. See ``docs/diffusion.md``.
Importing this package imports torch.
"""

from constrain.diffusion.denoising import DiffusionModel, DiffusionResult, diffusion_decode
from constrain.diffusion.dingo_lave import (
    MASK,
    DingoResult,
    LaveResult,
    block_completable,
    dingo,
    lave_step,
)
from constrain.diffusion.infilling import Gap, InfillChecker, InfillResult
from constrain.diffusion.token_dfa import NotRegularError, TokenDfa

__all__ = [
    "MASK",
    "DiffusionModel",
    "DiffusionResult",
    "DingoResult",
    "Gap",
    "InfillChecker",
    "InfillResult",
    "LaveResult",
    "NotRegularError",
    "TokenDfa",
    "block_completable",
    "diffusion_decode",
    "dingo",
    "lave_step",
]
