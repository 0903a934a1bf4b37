"""Decoding loops (stage 7): autoregressive (speculative and diffusion to come)."""

from constrain.decoding.autoregressive import DecodeResult, DecodingSession, decode

__all__ = ["DecodeResult", "DecodingSession", "decode"]
