"""The skinny linear kernel (CPU LM head, layer projections) against its naive oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from constrain.kernels.numba_head import skinny_linear_kernel


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8, 9, 16])
@pytest.mark.parametrize(("num_out", "width"), [(1, 1), (37, 24), (130, 64)])
def test_skinny_linear_matches_the_matrix_product(rows: int, num_out: int, width: int) -> None:
    """Every row count (blocks of four, a padded block of three, tails of two and one)."""
    rng = np.random.default_rng(rows * 1000 + num_out)
    weight = rng.standard_normal((num_out, width)).astype(np.float32)
    hidden = rng.standard_normal((rows, width)).astype(np.float32)
    out = np.full((rows, num_out), np.nan, dtype=np.float32)
    skinny_linear_kernel(weight, hidden, out)
    expected = hidden.astype(np.float64) @ weight.astype(np.float64).T
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_a_padded_block_writes_only_its_rows() -> None:
    """Three rows run as a block of four: the repeated row is computed, never written."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((11, 8)).astype(np.float32)
    hidden = rng.standard_normal((3, 8)).astype(np.float32)
    big = np.full((4, 11), -7.0, dtype=np.float32)
    skinny_linear_kernel(weight, hidden, big[:3])
    assert np.all(big[3] == -7.0)
    np.testing.assert_allclose(big[:3], hidden @ weight.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 16, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_skinny_linear_layer_equals_torch_linear(rows: int, bias: bool) -> None:
    """The layer wrapper: any leading shape, bias, more rows than the kernel takes."""
    from constrain.integrations.cpu_layers import SkinnyLinear

    torch.manual_seed(rows)
    layer = torch.nn.Linear(24, 40, bias=bias)
    expected_layer = torch.nn.Linear(24, 40, bias=bias)
    expected_layer.load_state_dict(layer.state_dict())
    layer.__class__ = SkinnyLinear
    x = torch.randn(1, rows, 24)
    with torch.inference_mode():
        got = layer(x)
        want = expected_layer(x)
    assert got.shape == want.shape == (1, rows, 40)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_skinny_linear_layer_leaves_autograd_to_torch() -> None:
    """With gradients on, the layer is torch's (so training through it still works)."""
    from constrain.integrations.cpu_layers import SkinnyLinear

    layer = torch.nn.Linear(8, 3)
    layer.__class__ = SkinnyLinear
    x = torch.randn(2, 8, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad is not None and layer.weight.grad is not None


def testroute_linears_switches_the_body_and_keeps_the_head() -> None:
    from constrain.integrations.cpu_layers import SkinnyLinear, route_linears

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4).to(torch.float64)

    class Causal(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Body()
            self.lm_head = torch.nn.Linear(4, 9, bias=False)

    m = Causal()
    assert route_linears(m) == 1
    assert type(m.model.a) is SkinnyLinear
    assert type(m.model.b) is torch.nn.Linear  # float64: left alone
    assert type(m.lm_head) is torch.nn.Linear
