"""Numba kernels of stage 6 (apply): the token bitmask applied to CPU logits.

Every kernel works on flat numpy arrays and scalars only. Wrappers in :mod:`constrain.bitmask`
validate the inputs and hand over:

- the logits as an *integer view* of the same storage (``int32`` for float32, ``int16`` for
  float16 and bfloat16) together with the bit pattern of ``-inf`` in that dtype, so that one
  kernel serves all three float dtypes and never does float arithmetic;
- the bitmask as its int32 words. Bits are read with an arithmetic right shift and ``& 1``, so
  no step depends on integer wrap-around (which would behave differently under
  ``NUMBA_DISABLE_JIT=1``).

Nothing here is compiled at import: numba compiles each kernel lazily on its first call, once per
dtype combination, and caches the machine code on disk (``cache=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from constrain._types import AnyArray

__all__ = [
    "NEG_INF_BITS",
    "apply_bitmask_kernel",
]

#: Bit pattern of ``-inf`` for each float dtype name, as a signed integer of the same width.
NEG_INF_BITS: dict[str, np.signedinteger[Any]] = {
    "float32": np.int32(-8388608),  # 0xFF800000
    "float16": np.int16(-1024),  # 0xFC00
    "bfloat16": np.int16(-128),  # 0xFF80
}


@njit(cache=True, nogil=True)
def apply_bitmask_kernel(
    logits_bits: AnyArray,
    bitmask: AnyArray,
    rows: AnyArray,
    vocab_size: int,
    neg_inf_bits: np.signedinteger[Any],
) -> None:
    """Write ``-inf`` into every logit whose token is not allowed, in place.

    Parameters
    ----------
    logits_bits : (R, C) int32 or int16
        The logits reinterpreted as integers (same storage; any strides).
    bitmask : (B, W) int32
        Bit ``j`` of word ``w`` is token ``32w + j``; 1 = allowed.
    rows : (K,) int64
        The rows to mask; row ``r`` of the logits uses row ``r`` of the bitmask.
    vocab_size : int
        Tokens ``>= vocab_size`` are disallowed whatever their bit; ``vocab_size <= 32 * W``.
    neg_inf_bits : int32 or int16
        The bit pattern of ``-inf`` in the logits dtype (see :data:`NEG_INF_BITS`).
    """
    num_cols = logits_bits.shape[1]
    limit = min(vocab_size, num_cols)
    num_full_words = limit // 32
    for k in range(rows.shape[0]):
        row = rows[k]
        out = logits_bits[row]
        words = bitmask[row]
        for w in range(num_full_words):
            word = words[w]
            if word == -1:  # all 32 allowed
                continue
            base = w * 32
            if word == 0:  # the common case under a grammar: nothing allowed
                out[base : base + 32] = neg_inf_bits
                continue
            # Branch-free select, which LLVM vectorises: keep = 0 or -1 (all bits set), then
            # out = keep ? out : -inf. An arithmetic right shift of a negative int32 still
            # brings bit j to position 0, so `& 1` reads it without any wrap-around.
            for bit in range(32):
                keep = -((word >> np.int32(bit)) & np.int32(1))
                out[base + bit] = (out[base + bit] & keep) | (neg_inf_bits & ~keep)
        base = num_full_words * 32
        if base < limit:
            word = words[num_full_words]
            for bit in range(limit - base):
                if ((word >> np.int32(bit)) & np.int32(1)) == 0:
                    out[base + bit] = neg_inf_bits
        if limit < num_cols:
            out[limit:] = neg_inf_bits
