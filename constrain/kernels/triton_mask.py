"""Triton kernel of stage 6 (apply): token bitmask applied to a ``(R, C)`` logits tensor.

Triton is optional (the ``gpu`` extra): only :mod:`constrain.bitmask` imports this module, and
only when the Triton backend is chosen. The launcher queries no device properties: the grid is
``(rows, ceil(C / BLOCK_SIZE))``, so it runs unchanged on CUDA tensors and, with
``TRITON_INTERPRET=1`` set before this module is imported, on CPU tensors in Triton's interpreter.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

__all__ = ["DEFAULT_BLOCK_SIZE", "apply_token_bitmask_inplace_triton", "is_interpreting"]

#: Logits per program for 16-bit logits (float32: a quarter); a power of two, at least 32.
#: Measured on an H200 at V = 128,256 (``kernels/README.md``): with 8 bytes per thread (4,096
#: bf16 logits and 32 warps, 1,024 fp32 logits and 16 warps) 256 rows take 54 / 76 µs, against
#: 144 / 136 µs with 16-byte accesses; up to 64 rows every choice is launch-bound (~20 µs).
DEFAULT_BLOCK_SIZE = 4096


def is_interpreting() -> bool:
    """Return True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# Sizes are only compared against, so specialising on them (divisibility by 16, == 1) would only
# multiply compiled variants; the row strides keep their specialisation (aligned vector access).
@triton.jit(do_not_specialize=["num_words", "vocab_size", "num_cols"])  # type: ignore[misc]
def _apply_token_bitmask_kernel(  # type: ignore[no-untyped-def]
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    logits_row_stride,
    bitmask_row_stride,
    num_words,
    vocab_size,
    num_cols,
    HAS_INDICES: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # Program (p, b) masks columns [b * BLOCK_SIZE, (b + 1) * BLOCK_SIZE) of row p (or of row
    # indices[p]). The kernel only writes: allowed logits are never read or touched.
    if HAS_INDICES:
        row = tl.load(indices_ptr + tl.program_id(0)).to(tl.int64)
    else:
        row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    cols = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    word_ids = block * (BLOCK_SIZE // 32) + tl.arange(0, BLOCK_SIZE // 32)
    # Words past the bitmask read as 0 (disallowed): logits wider than the bitmask are masked.
    words = tl.load(
        bitmask_ptr + row * bitmask_row_stride + word_ids, mask=word_ids < num_words, other=0
    )
    bits = (words[:, None] >> tl.arange(0, 32)[None, :]) & 1
    disallowed = tl.reshape(bits == 0, (BLOCK_SIZE,)) | (cols >= vocab_size)
    tl.store(
        logits_ptr + row * logits_row_stride + cols,
        -float("inf"),
        mask=disallowed & (cols < num_cols),
    )


def _num_warps(block_size: int, element_size: int) -> int:
    # 8 bytes per thread (measured: 16-byte accesses were 1.8-2.7x slower at 256 rows), capped
    # at 32 warps per program
    warp_size = 64 if torch.version.hip is not None else 32
    return max(1, min(32, block_size // warp_size // max(1, 8 // element_size)))


def apply_token_bitmask_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: int,
    indices: torch.Tensor | None = None,
    *,
    block_size: int | None = None,
    num_warps: int | None = None,
) -> None:
    """Set ``logits[r, t] = -inf`` for every token ``t`` that row ``r`` of the bitmask disallows.

    Parameters
    ----------
    logits : (R, C) float32, float16 or bfloat16
        Modified in place; unit stride along the last axis. A CUDA tensor, or a CPU tensor when
        :func:`is_interpreting`.
    bitmask : (B, W) int32
        Same device as ``logits``, unit stride along the last axis.
    vocab_size : int
        Tokens ``>= vocab_size`` are disallowed; ``vocab_size <= 32 * W``.
    indices : (K,) int32 or int64, optional
        Rows to mask (row ``r`` of logits uses row ``r`` of the bitmask), on the device of
        ``logits``; None masks every row.
    block_size : int, optional
        Logits per program (power of two, at least 32); default :data:`DEFAULT_BLOCK_SIZE`
        for 16-bit logits, a quarter of it for float32.
    num_warps : int, optional
        Warps per program; derived from ``block_size`` and the dtype when None.

    Raises
    ------
    ValueError
        If the tensors are on a device Triton cannot launch on, or strides/block size are invalid.
    """
    if logits.device.type != "cuda" and not is_interpreting():
        raise ValueError(
            f"the Triton backend needs CUDA tensors, got logits.device={logits.device}; "
            "use backend='torch' or 'numba', or set TRITON_INTERPRET=1 before importing triton"
        )
    if logits.stride(-1) != 1 or bitmask.stride(-1) != 1:
        raise ValueError(
            "the Triton backend needs unit stride along the vocabulary axis, got "
            f"logits.stride()={tuple(logits.stride())}, bitmask.stride()={tuple(bitmask.stride())}"
        )
    if block_size is None:
        block_size = DEFAULT_BLOCK_SIZE if logits.element_size() <= 2 else DEFAULT_BLOCK_SIZE // 4
    if block_size < 32 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 32, got {block_size}")
    num_rows = logits.shape[0] if indices is None else indices.shape[0]
    num_cols = logits.shape[1]
    if num_rows == 0 or num_cols == 0:
        return
    if num_warps is None:
        num_warps = _num_warps(block_size, logits.element_size())
    grid = (num_rows, triton.cdiv(num_cols, block_size))
    args = (
        logits,
        bitmask,
        indices,
        logits.stride(0),
        bitmask.stride(0),
        bitmask.shape[1],
        vocab_size,
        num_cols,
    )
    if logits.device.type == "cuda":
        # Launch on the tensor's device, not on whatever device is current.
        with torch.cuda.device(logits.device):
            _apply_token_bitmask_kernel[grid](
                *args, HAS_INDICES=indices is not None, BLOCK_SIZE=block_size, num_warps=num_warps
            )
    else:
        _apply_token_bitmask_kernel[grid](
            *args, HAS_INDICES=indices is not None, BLOCK_SIZE=block_size, num_warps=num_warps
        )
