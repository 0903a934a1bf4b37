"""The skinny LM-head kernel against its naive oracle (``hidden @ W.T`` in numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from constrain.kernels.numba_head import skinny_head_kernel


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 16])
@pytest.mark.parametrize(("vocab", "width"), [(1, 1), (37, 24), (130, 64)])
def test_skinny_head_matches_the_matrix_product(rows: int, vocab: int, width: int) -> None:
    rng = np.random.default_rng(rows * 1000 + vocab)
    weight = rng.standard_normal((vocab, width)).astype(np.float32)
    hidden = rng.standard_normal((rows, width)).astype(np.float32)
    out = np.full((rows, vocab), np.nan, dtype=np.float32)
    skinny_head_kernel(weight, hidden, out)
    expected = hidden.astype(np.float64) @ weight.astype(np.float64).T
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_a_rows_logits_do_not_depend_on_the_other_rows() -> None:
    """Speculative passes (several rows) and decoding steps (one) give the same logits."""
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((97, 48)).astype(np.float32)
    hidden = rng.standard_normal((5, 48)).astype(np.float32)
    together = np.empty((5, 97), dtype=np.float32)
    skinny_head_kernel(weight, hidden, together)
    for t in range(5):
        alone = np.empty((1, 97), dtype=np.float32)
        skinny_head_kernel(weight, np.ascontiguousarray(hidden[t : t + 1]), alone)
        assert np.array_equal(alone[0], together[t])
