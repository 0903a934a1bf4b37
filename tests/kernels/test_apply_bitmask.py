"""apply_token_bitmask_inplace: every CPU backend against the naive oracle in tests/reference.py.

The parity matrix covers odd and real vocabulary sizes, padded logits, ``indices``, 1-D logits,
strided logits and the three float dtypes. Triton has its own file (run under the interpreter);
GPU cases are marked ``gpu`` and skip without CUDA.
"""

from __future__ import annotations

import functools
import shutil
import zlib

import numpy as np
import pytest
import reference
import torch

from constrain.bitmask import apply_token_bitmask_inplace, bool_mask_to_bitmask

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
VOCABS = [1, 31, 33, 1000, 32000, 32001, 128256]
CPU_BACKENDS = ["torch", "numba", "auto"]
NEG_INF = float("-inf")


def random_bitmask(rows: int, num_words: int, seed: int) -> np.ndarray:
    """Words drawn from {0, -1, random}: every kernel path (skip, fill, per-bit) is exercised."""
    rng = np.random.default_rng(seed)
    words = rng.integers(-(2**31), 2**31, size=(rows, num_words), dtype=np.int64)
    kind = rng.integers(0, 3, size=(rows, num_words))
    words[kind == 0] = 0
    words[kind == 1] = -1
    return words.astype(np.int32)


@functools.cache
def case(layout: str, vocab: int) -> tuple[np.ndarray, int, int | None, tuple[int, ...] | None]:
    """Return (bitmask, logits columns, vocab_size argument, indices) for a layout."""
    num_words = (vocab + 31) // 32
    seed = zlib.crc32(f"{layout}/{vocab}".encode())  # stable across runs, unlike hash()
    if layout == "plain":
        return random_bitmask(3, num_words, seed), vocab, None, None
    if layout == "vocab_size":  # bits past vocab_size in the last word must be ignored
        return random_bitmask(2, num_words, seed), vocab, vocab, None
    if layout == "padded":  # model vocabulary padded past the tokenizer's
        return random_bitmask(2, num_words, seed), vocab + 67, vocab, None
    if layout == "wider_than_bitmask":  # logits past 32 * W, vocab_size defaulted
        return random_bitmask(2, num_words, seed), 32 * num_words + 40, None, None
    if layout == "narrow_logits":  # fewer logits than bitmask bits
        return random_bitmask(2, num_words + 1, seed), vocab, vocab + 32, None
    if layout == "indices":
        return random_bitmask(4, num_words, seed), vocab, vocab, (2, 0)
    raise ValueError(layout)


@functools.cache
def expected_allowed(layout: str, vocab: int) -> torch.Tensor:
    bitmask, num_cols, vocab_size, indices = case(layout, vocab)
    allowed = reference.reference_allowed(bitmask.tolist(), num_cols, vocab_size, indices)
    return torch.tensor(allowed, dtype=torch.bool)


def random_logits(rows: int, cols: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=gen).to(dtype)


def expected_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    return torch.where(allowed, logits, torch.tensor(NEG_INF, dtype=logits.dtype))


LAYOUTS = ["plain", "vocab_size", "padded", "wider_than_bitmask", "narrow_logits", "indices"]


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_parity(backend: str, dtype: torch.dtype, vocab: int, layout: str) -> None:
    bitmask, num_cols, vocab_size, indices = case(layout, vocab)
    logits = random_logits(bitmask.shape[0], num_cols, dtype)
    out = logits.clone()
    apply_token_bitmask_inplace(
        out,
        torch.from_numpy(bitmask),
        vocab_size=vocab_size,
        indices=None if indices is None else list(indices),
        backend=backend,  # type: ignore[arg-type]
    )
    assert torch.equal(out, expected_logits(logits, expected_allowed(layout, vocab)))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", [33, 32001])
@pytest.mark.parametrize("bitmask_ndim", [1, 2])
def test_one_dimensional_logits(
    backend: str, dtype: torch.dtype, vocab: int, bitmask_ndim: int
) -> None:
    bitmask = random_bitmask(1, (vocab + 31) // 32, seed=vocab)
    logits = random_logits(1, vocab + 5, dtype)[0]
    out = logits.clone()
    words = torch.from_numpy(bitmask if bitmask_ndim == 2 else bitmask[0])
    apply_token_bitmask_inplace(out, words, vocab_size=vocab, backend=backend)  # type: ignore[arg-type]
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), vocab + 5, vocab)[0])
    assert torch.equal(out, expected_logits(logits, allowed))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize(
    "indices",
    [[1, 1, 3], (3,), np.array([0, 2]), torch.tensor([2, 1], dtype=torch.int32)],
    ids=["duplicates", "tuple", "numpy", "tensor"],
)
def test_indices_kinds(backend: str, indices: object) -> None:
    bitmask = random_bitmask(5, 4, seed=7)  # more bitmask rows than logits rows is fine
    logits = random_logits(4, 128, torch.float32)
    out = logits.clone()
    apply_token_bitmask_inplace(
        out,
        torch.from_numpy(bitmask),
        indices=indices,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
    )
    rows = [int(i) for i in indices]  # type: ignore[attr-defined]
    allowed = torch.tensor(reference.reference_allowed(bitmask[:4].tolist(), 128, None, rows))
    assert torch.equal(out, expected_logits(logits, allowed))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_logits(backend: str, dtype: torch.dtype) -> None:
    # A column slice (row stride > width) and a transposed view (non-unit last stride).
    bitmask = random_bitmask(3, 2, seed=3)
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), 50, 50))
    base = random_logits(3, 80, dtype)
    for view_of in (lambda t: t[:, 10:60], lambda t: t[:, 10:60].t().contiguous().t()):
        storage = base.clone()
        view = view_of(storage)
        before = view.clone()
        apply_token_bitmask_inplace(
            view,
            torch.from_numpy(bitmask),
            vocab_size=50,
            backend=backend,  # type: ignore[arg-type]
        )
        assert torch.equal(view, expected_logits(before, allowed))
    outside = base.clone()
    apply_token_bitmask_inplace(
        outside[:, 10:60],
        torch.from_numpy(bitmask),
        vocab_size=50,
        backend=backend,  # type: ignore[arg-type]
    )
    assert torch.equal(outside[:, :10], base[:, :10])
    assert torch.equal(outside[:, 60:], base[:, 60:])


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_all_allowed_is_identity_and_idempotent(backend: str) -> None:
    logits = random_logits(2, 100, torch.bfloat16)
    out = logits.clone()
    full = torch.full((2, 4), -1, dtype=torch.int32)
    apply_token_bitmask_inplace(out, full, vocab_size=100, backend=backend)  # type: ignore[arg-type]
    assert torch.equal(out, logits)
    mask = torch.from_numpy(random_bitmask(2, 4, seed=1))
    apply_token_bitmask_inplace(out, mask, backend=backend)  # type: ignore[arg-type]
    once = out.clone()
    apply_token_bitmask_inplace(out, mask, backend=backend)  # type: ignore[arg-type]
    assert torch.equal(out, once)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None, reason="torch.compile on CPU needs a C++ compiler")
@pytest.mark.parametrize("indices", [None, (2, 0)])
def test_torch_compile_variant(indices: tuple[int, ...] | None) -> None:
    from constrain.kernels.torch_mask import apply_token_bitmask_inplace_torch

    bitmask = random_bitmask(3, 40, seed=9)
    logits = random_logits(3, 1300, torch.float32)
    out = logits.clone()
    rows = None if indices is None else torch.tensor(indices)
    apply_token_bitmask_inplace_torch(out, torch.from_numpy(bitmask), 1250, rows, compile=True)
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), 1300, 1250, indices))
    assert torch.equal(out, expected_logits(logits, allowed))


def test_conversion_feeds_apply() -> None:
    allowed = torch.zeros(2, 70, dtype=torch.bool)
    allowed[0, [0, 31, 32, 69]] = True
    allowed[1, 5] = True
    logits = torch.zeros(2, 70)
    apply_token_bitmask_inplace(logits, bool_mask_to_bitmask(allowed))
    assert torch.equal(torch.isfinite(logits), allowed)


# --------------------------------------------------------------------------------------------
# Numba kernels called directly (also under NUMBA_DISABLE_JIT=1)


def test_numba_apply_kernel_on_numpy() -> None:
    from constrain.kernels.numba_mask import NEG_INF_BITS, apply_bitmask_kernel

    bitmask = random_bitmask(2, 3, seed=11)
    logits = np.random.default_rng(0).standard_normal((2, 90)).astype(np.float32)
    out = logits.copy()
    rows = np.array([1], dtype=np.int64)
    apply_bitmask_kernel(out.view(np.int32), bitmask, rows, 80, NEG_INF_BITS["float32"])
    allowed = np.array(reference.reference_allowed(bitmask.tolist(), 90, 80, [1]))
    np.testing.assert_array_equal(out, np.where(allowed, logits, np.float32(NEG_INF)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_neg_inf_bit_patterns(dtype: torch.dtype) -> None:
    from constrain.kernels.numba_mask import NEG_INF_BITS

    bits = NEG_INF_BITS[str(dtype).removeprefix("torch.")]
    int_dtype = torch.int32 if dtype == torch.float32 else torch.int16
    value = torch.tensor([int(bits)], dtype=int_dtype).view(dtype)
    assert value.item() == NEG_INF


def test_matches_xgrammar_below_vocab_size() -> None:
    # Same ABI as xgrammar: identical results on ids < vocab_size (xgrammar leaves the padding).
    xgr = pytest.importorskip("xgrammar")
    bitmask = torch.from_numpy(random_bitmask(3, 1001, seed=5))
    logits = random_logits(3, 32001 + 63, torch.float32)
    ours, theirs = logits.clone(), logits.clone()
    apply_token_bitmask_inplace(ours, bitmask, vocab_size=32001)
    xgr.apply_token_bitmask_inplace(theirs, bitmask, vocab_size=32001)
    assert torch.equal(ours[:, :32001], theirs[:, :32001])
    assert bool(torch.isneginf(ours[:, 32001:]).all())


# --------------------------------------------------------------------------------------------
# CUDA: torch, auto and Triton at full size (small Triton cases are in test_triton_mask.py)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("backend", ["torch", "auto", "triton"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", [33, 32001, 128256])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_parity_cuda(backend: str, dtype: torch.dtype, vocab: int, layout: str) -> None:
    bitmask, num_cols, vocab_size, indices = case(layout, vocab)
    logits = random_logits(bitmask.shape[0], num_cols, dtype)
    out = logits.cuda()
    apply_token_bitmask_inplace(
        out,
        torch.from_numpy(bitmask).cuda(),
        vocab_size=vocab_size,
        indices=None if indices is None else list(indices),
        backend=backend,  # type: ignore[arg-type]
    )
    assert torch.equal(out.cpu(), expected_logits(logits, expected_allowed(layout, vocab)))


@pytest.mark.gpu
@requires_cuda
def test_auto_picks_triton_on_cuda() -> None:
    from constrain import bitmask as bm

    pytest.importorskip("triton")
    assert bm._auto_backend(torch.zeros(1, 64, device="cuda")) == "triton"
    assert bm._auto_backend(torch.zeros(64, 2, device="cuda").t()) == "torch"


@pytest.mark.gpu
@requires_cuda
def test_cpu_bitmask_with_cuda_logits_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"bitmask.to\(logits.device, non_blocking=True\)"):
        apply_token_bitmask_inplace(
            torch.zeros(1, 64, device="cuda"), torch.full((1, 2), -1, dtype=torch.int32)
        )


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_cuda_tensor_indices(backend: str) -> None:
    bitmask = torch.from_numpy(random_bitmask(3, 4, seed=2))
    logits = random_logits(3, 128, torch.float32)
    out = logits.cuda()
    apply_token_bitmask_inplace(
        out,
        bitmask.cuda(),
        indices=torch.tensor([2, 0], device="cuda"),
        backend=backend,  # type: ignore[arg-type]
    )
    allowed = torch.tensor(reference.reference_allowed(bitmask.tolist(), 128, None, [2, 0]))
    assert torch.equal(out.cpu(), expected_logits(logits, allowed))
