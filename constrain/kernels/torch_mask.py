"""Pure-torch kernels of stage 6 (apply): bitmask unpacking and masking on any device.

The functions here take already-validated 2-D tensors (see :mod:`constrain.bitmask`). They run
on every device torch supports, and are the fallback when neither numba (CPU) nor Triton (CUDA)
applies. ``compile=True`` routes through a ``torch.compile(dynamic=True)`` version of the same
code, built on first use (never at import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "apply_token_bitmask_inplace_torch",
    "bitmask_to_bool_torch",
    "bool_to_bitmask_torch",
]

_compiled_impl: Callable[..., Any] | None = None


def bitmask_to_bool_torch(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Unpack bitmask words into booleans (``True`` = allowed).

    Parameters
    ----------
    bitmask : (..., W) int32
        The bitmask words; any device.
    vocab_size : int
        Number of tokens to unpack, ``0 <= vocab_size <= 32 * W``.

    Returns
    -------
    (..., vocab_size) bool
        On the device of ``bitmask``.
    """
    num_words = (vocab_size + 31) // 32
    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    # An arithmetic right shift of a negative int32 keeps bit j at position 0, so `& 1` reads
    # bit j for every word, sign bit included.
    bits = (bitmask[..., :num_words].unsqueeze(-1) >> shifts) & 1
    return bits.flatten(-2)[..., :vocab_size].bool()


def bool_to_bitmask_torch(mask: torch.Tensor) -> torch.Tensor:
    """Pack booleans into int32 bitmask words.

    Parameters
    ----------
    mask : (..., V) bool
        ``True`` = allowed; any device.

    Returns
    -------
    (..., ceil(V/32)) int32
        Bit ``j`` of word ``w`` is ``mask[..., 32w + j]``; bits past ``V`` are 0.
    """
    num_tokens = mask.shape[-1]
    num_words = (num_tokens + 31) // 32
    pad = num_words * 32 - num_tokens
    if pad:
        mask = torch.nn.functional.pad(mask, (0, pad), value=False)
    bits = mask.reshape(*mask.shape[:-1], num_words, 32).to(torch.int64)
    weights = torch.ones(32, dtype=torch.int64, device=mask.device) << torch.arange(
        32, dtype=torch.int64, device=mask.device
    )
    words = (bits * weights).sum(-1)
    # Map [2**31, 2**32) onto the negative int32 range explicitly instead of relying on the
    # wrap-around of an int64 -> int32 cast.
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def _apply_impl(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: int,
    indices: torch.Tensor | None,
) -> None:
    num_cols = logits.shape[-1]
    limit = min(vocab_size, num_cols)
    if indices is None:
        target = logits
        words = bitmask
    else:
        # Advanced indexing copies; the rows are gathered, masked and scattered back.
        target = logits.index_select(0, indices)
        words = bitmask.index_select(0, indices)
    disallowed = ~bitmask_to_bool_torch(words, limit)
    target[:, :limit].masked_fill_(disallowed, float("-inf"))
    if limit < num_cols:
        target[:, limit:] = float("-inf")
    if indices is not None:
        logits.index_copy_(0, indices, target)


def apply_token_bitmask_inplace_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: int,
    indices: torch.Tensor | None = None,
    *,
    compile: bool = False,
) -> None:
    """Set ``logits[r, t] = -inf`` for every token ``t`` that row ``r`` of the bitmask disallows.

    Parameters
    ----------
    logits : (R, C) float32, float16 or bfloat16
        Modified in place.
    bitmask : (B, W) int32
        On the device of ``logits``; ``B == R`` when ``indices`` is None.
    vocab_size : int
        Tokens ``>= vocab_size`` are disallowed; ``vocab_size <= 32 * W``.
    indices : (K,) int64 or None
        Rows to mask (row ``r`` of logits uses row ``r`` of the bitmask), on the device of
        ``logits``; None masks every row.
    compile : bool, optional
        Run the ``torch.compile(dynamic=True)`` version (compiled on first use; needs a working
        inductor toolchain on the device).
    """
    if not compile:
        _apply_impl(logits, bitmask, vocab_size, indices)
        return
    global _compiled_impl
    if _compiled_impl is None:
        _compiled_impl = torch.compile(_apply_impl, dynamic=True)
    _compiled_impl(logits, bitmask, vocab_size, indices)
