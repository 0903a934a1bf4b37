"""Numba kernel of the CPU LM head for a few rows (speculative verification, small batches).

A language model's head is ``logits = hidden @ W.T`` with ``W`` of shape ``(V, H)`` (SmolLM2:
49,152 x 576, 113 MB in float32). For one row the product is a matrix-vector product bound by
reading ``W`` once, and torch's ``x @ W.T`` is as fast as it gets. For 2-16 rows MKL's
single-precision GEMM costs about as much per row as for one (measured on this machine: 1, 2, 4
rows take 5.4, 11 and 25 ms), although ``W`` needs reading only once: a speculative pass that
verifies four drafted positions pays the head four times. This kernel reads each row of ``W``
once, while it is in the L1 cache, for every hidden row: the cost of 2-16 rows stays close to
that of one.

The wrapper is :class:`constrain.integrations.transformers._CpuHead` (float32, C-contiguous
arrays, the output preallocated). The naive oracle is ``hidden @ W.T`` in numpy
(``tests/kernels/test_head_kernel.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, fastmath=True)
def skinny_head_kernel(weight, hidden, out):  # type: ignore[no-untyped-def]
    """``out[t, v] = dot(weight[v], hidden[t])`` for every vocabulary row ``v`` and row ``t``.

    Semantics as a loop::

        for v in range(V):
            for t in range(T):
                out[t, v] = sum(weight[v, k] * hidden[t, k] for k in range(H))

    Each dot product is summed in the same order whatever ``T`` is, so a row's logits do not
    depend on how many rows share the call.

    Parameters
    ----------
    weight : (V, H) float32, C-contiguous
        The head's weight.
    hidden : (T, H) float32, C-contiguous
        The final hidden states.
    out : (T, V) float32
        Written: the logits.
    """
    num_vocab, width = weight.shape
    num_rows = hidden.shape[0]
    for v in range(num_vocab):
        for t in range(num_rows):
            acc = np.float32(0.0)
            for k in range(width):
                acc += weight[v, k] * hidden[t, k]
            out[t, v] = acc
