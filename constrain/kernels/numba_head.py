"""Numba kernel of a linear map for a few rows: the CPU LM head and the layers' projections.

A linear map is ``out = hidden @ W.T`` with ``W`` of shape ``(N, H)`` (SmolLM2's head: 49,152 x
576, 113 MB in float32; its layers: 576 x 576, 192 x 576, 1536 x 576, 576 x 1536). For a decoding
step (one row) or a speculative pass (a few rows) the product is bound by reading ``W``, and
MKL's single-precision GEMM handles a few rows badly: measured on this machine for the 30 layers'
seven projections (cold caches, one thread), ``F.linear`` takes 29 / 46 / 49 / 58 ms for
1 / 2 / 4 / 8 rows, although ``W`` needs reading only once whatever the number of rows. This
kernel reads each row of ``W`` once, while it is in the L1 cache, and multiplies it with four
hidden rows at a time (four independent accumulations, so the multiply-adds of the four rows
overlap): 23 / 25 / 28 / 46 ms.

Rows go in blocks of four; a last block of three is padded by repeating the last row (its
results are not written), a last block of two or one has its own loop. A row's sum is
vectorised by LLVM (``fastmath``), so its rounding may depend on the block it falls in: logits
agree with ``hidden @ W.T`` to float32 rounding, not bit for bit across row counts.

The wrappers are :class:`constrain.integrations.transformers._CpuHead` (the head) and
``_SkinnyLinear`` (the layers of a model loaded by ``load_model`` on a CPU). The naive oracle is
``hidden @ W.T`` in numpy (``tests/kernels/test_head_kernel.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, fastmath=True)
def _rows4(weight, hidden, out, t):  # type: ignore[no-untyped-def]
    """Rows ``t .. t+3`` (indices past the end repeat the last row and are not written)."""
    num_out, width = weight.shape
    last = hidden.shape[0] - 1
    r0 = t
    r1 = min(t + 1, last)
    r2 = min(t + 2, last)
    r3 = min(t + 3, last)
    for v in range(num_out):
        a0 = np.float32(0.0)
        a1 = np.float32(0.0)
        a2 = np.float32(0.0)
        a3 = np.float32(0.0)
        for k in range(width):
            w = weight[v, k]
            a0 += w * hidden[r0, k]
            a1 += w * hidden[r1, k]
            a2 += w * hidden[r2, k]
            a3 += w * hidden[r3, k]
        out[r0, v] = a0
        if t + 1 <= last:
            out[r1, v] = a1
        if t + 2 <= last:
            out[r2, v] = a2
        if t + 3 <= last:
            out[r3, v] = a3


@njit(cache=True, nogil=True, fastmath=True)
def _rows2(weight, hidden, out, t):  # type: ignore[no-untyped-def]
    """Rows ``t`` and ``t + 1``."""
    num_out, width = weight.shape
    for v in range(num_out):
        a0 = np.float32(0.0)
        a1 = np.float32(0.0)
        for k in range(width):
            w = weight[v, k]
            a0 += w * hidden[t, k]
            a1 += w * hidden[t + 1, k]
        out[t, v] = a0
        out[t + 1, v] = a1


@njit(cache=True, nogil=True, fastmath=True)
def _rows1(weight, hidden, out, t):  # type: ignore[no-untyped-def]
    """Row ``t``."""
    num_out, width = weight.shape
    for v in range(num_out):
        acc = np.float32(0.0)
        for k in range(width):
            acc += weight[v, k] * hidden[t, k]
        out[t, v] = acc


@njit(cache=True, nogil=True, fastmath=True)
def skinny_linear_kernel(weight, hidden, out):  # type: ignore[no-untyped-def]
    """``out[t, v] = dot(weight[v], hidden[t])`` for every output row ``v`` and hidden row ``t``.

    Semantics as a loop::

        for v in range(N):
            for t in range(T):
                out[t, v] = sum(weight[v, k] * hidden[t, k] for k in range(H))

    Parameters
    ----------
    weight : (N, H) float32, C-contiguous
        The linear map's weight (``torch.nn.Linear.weight``).
    hidden : (T, H) float32, C-contiguous
        The input rows.
    out : (T, N) float32, C-contiguous
        Written: the products.
    """
    num_rows = hidden.shape[0]
    t = 0
    while num_rows - t >= 3:
        _rows4(weight, hidden, out, t)
        t += 4
    if num_rows - t == 2:
        _rows2(weight, hidden, out, t)
    elif num_rows - t == 1:
        _rows1(weight, hidden, out, t)
