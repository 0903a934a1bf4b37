"""Decoding loops (stage 7): autoregressive (speculative and diffusion to come)."""

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

__all__ = [
    "DecodeResult",
    "DecodingSession",
    "DingoResult",
    "Gap",
    "InfillChecker",
    "InfillResult",
    "LaveResult",
    "NotRegularError",
    "TokenDfa",
    "decode",
    "dingo",
    "lave_step",
]
