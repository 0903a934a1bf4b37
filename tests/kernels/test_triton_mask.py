"""The Triton kernel against the naive oracle: CPU tensors under the interpreter, CUDA on a GPU.

Run on CPU in its own invocation, because ``TRITON_INTERPRET`` must be set before Triton (and
the kernel module) is imported::

    TRITON_INTERPRET=1 .venv/bin/pytest tests/kernels -m triton

Without the interpreter and without CUDA these tests skip. With ``CI=true`` a missing Triton is a
failure, never a skip. The interpreter is slow, so the sizes here are few and small; large
vocabularies on CUDA are ``gpu`` tests in test_apply_bitmask.py (``backend="triton"``).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import reference
import torch

from constrain.bitmask import apply_token_bitmask_inplace

pytestmark = pytest.mark.triton

INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") == "1"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
NEG_INF = float("-inf")


@pytest.fixture(scope="module")
def device() -> str:
    """Where the Triton kernel can run here: "cpu" (interpreter) or "cuda"; else skip or fail."""
    if importlib.util.find_spec("triton") is None:
        msg = "triton is not installed (pip install -e '.[gpu]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    if INTERPRETING:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("no CUDA device: run TRITON_INTERPRET=1 pytest tests/kernels -m triton")


def random_bitmask(rows: int, num_words: int, seed: int) -> np.ndarray:
    """Words drawn from {0, -1, random}, as in test_apply_bitmask.py."""
    rng = np.random.default_rng(seed)
    words = rng.integers(-(2**31), 2**31, size=(rows, num_words), dtype=np.int64)
    kind = rng.integers(0, 3, size=(rows, num_words))
    words[kind == 0] = 0
    words[kind == 1] = -1
    return words.astype(np.int32)


def check(
    device: str,
    dtype: torch.dtype,
    bitmask: np.ndarray,
    num_cols: int,
    vocab_size: int | None = None,
    indices: list[int] | None = None,
    **kernel_options: int,
) -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(bitmask.shape[0], num_cols, generator=gen).to(dtype)
    out = logits.to(device)
    words = torch.from_numpy(bitmask).to(device)
    if kernel_options:
        from constrain.kernels.triton_mask import apply_token_bitmask_inplace_triton

        rows = None if indices is None else torch.tensor(indices, device=device)
        vocab = 32 * bitmask.shape[1] if vocab_size is None else vocab_size
        apply_token_bitmask_inplace_triton(out, words, vocab, rows, **kernel_options)
    else:
        apply_token_bitmask_inplace(
            out, words, vocab_size=vocab_size, indices=indices, backend="triton"
        )
    allowed = reference.reference_allowed(bitmask.tolist(), num_cols, vocab_size, indices)
    expected = torch.where(
        torch.tensor(allowed, dtype=torch.bool), logits, torch.tensor(NEG_INF, dtype=dtype)
    )
    assert torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", [33, 1000, 32001, 128256])
def test_plain(device: str, dtype: torch.dtype, vocab: int) -> None:
    check(device, dtype, random_bitmask(2, (vocab + 31) // 32, seed=vocab), vocab)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_padded_and_vocab_size(device: str, dtype: torch.dtype) -> None:
    bitmask = random_bitmask(2, 32, seed=1)  # 1024 bits
    check(device, dtype, bitmask, 1000 + 77, vocab_size=1000)  # padded model vocabulary
    check(device, dtype, bitmask, 1024 + 200)  # logits wider than the bitmask
    check(device, dtype, bitmask, 900, vocab_size=1000)  # logits narrower than the vocabulary


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_indices(device: str, dtype: torch.dtype) -> None:
    check(device, dtype, random_bitmask(4, 32, seed=2), 1001, vocab_size=1001, indices=[3, 1, 3])


def test_one_dimensional(device: str) -> None:
    bitmask = random_bitmask(1, 4, seed=3)
    logits = torch.randn(120)
    out = logits.to(device)
    apply_token_bitmask_inplace(
        out, torch.from_numpy(bitmask[0]).to(device), vocab_size=100, backend="triton"
    )
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), 120, 100)[0])
    assert torch.equal(out.cpu(), torch.where(allowed, logits, torch.tensor(NEG_INF)))


def test_row_strided_logits(device: str) -> None:
    bitmask = random_bitmask(2, 2, seed=4)
    base = torch.randn(2, 100)
    storage = base.to(device)
    apply_token_bitmask_inplace(
        storage[:, 20:70], torch.from_numpy(bitmask).to(device), vocab_size=50, backend="triton"
    )
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), 50, 50))
    expected = base.clone()
    expected[:, 20:70] = torch.where(allowed, base[:, 20:70], torch.tensor(NEG_INF))
    assert torch.equal(storage.cpu(), expected)


@pytest.mark.parametrize("block_size", [32, 256])
def test_small_blocks(device: str, block_size: int) -> None:
    check(device, torch.float32, random_bitmask(3, 9, seed=5), 300, vocab_size=280,
          indices=[0, 2], block_size=block_size)  # fmt: skip


def test_unit_stride_required(device: str) -> None:
    logits = torch.zeros(64, 2, device=device).t()
    bitmask = torch.full((2, 2), -1, dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="unit stride along the vocabulary axis"):
        apply_token_bitmask_inplace(logits, bitmask, backend="triton")


def test_launcher_validates_block_size(device: str) -> None:
    from constrain.kernels.triton_mask import apply_token_bitmask_inplace_triton

    logits = torch.zeros(1, 64, device=device)
    bitmask = torch.full((1, 2), -1, dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="block_size must be a power of two >= 32, got 48"):
        apply_token_bitmask_inplace_triton(logits, bitmask, 64, block_size=48)
