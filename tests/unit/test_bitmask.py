"""constrain.bitmask: shapes, allocation, conversions and argument validation."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import reference
import torch

from constrain import bitmask as bm
from constrain.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_to_bool_mask,
    bool_mask_to_bitmask,
    get_bitmask_shape,
    reset_token_bitmask,
)

# --------------------------------------------------------------------------------------------
# Shape, allocation, reset


@pytest.mark.parametrize(
    ("batch", "vocab", "expected"),
    [(1, 1, (1, 1)), (2, 32, (2, 1)), (3, 33, (3, 2)), (4, 32000, (4, 1000)), (1, 32001, (1, 1001)),
     (1, 128256, (1, 4008)), (0, 0, (0, 0))],
)  # fmt: skip
def test_get_bitmask_shape(batch: int, vocab: int, expected: tuple[int, int]) -> None:
    assert get_bitmask_shape(batch, vocab) == expected


def test_bitmask_dtype() -> None:
    assert bm.bitmask_dtype == torch.int32


def test_allocate_is_all_allowed() -> None:
    mask = allocate_token_bitmask(3, 100)
    assert mask.shape == (3, 4)
    assert mask.dtype == torch.int32
    assert mask.device.type == "cpu"
    assert bool((mask == -1).all())
    assert bool(bitmask_to_bool_mask(mask, 100).all())


def test_allocate_pin_memory_is_safe_without_cuda() -> None:
    mask = allocate_token_bitmask(2, 64, pin_memory=True)
    assert mask.is_pinned() == torch.cuda.is_available()


def test_allocate_on_device() -> None:
    mask = allocate_token_bitmask(2, 64, device="meta")
    assert mask.device.type == "meta"
    assert mask.shape == (2, 2)


def test_reset() -> None:
    mask = torch.zeros(2, 3, dtype=torch.int32)
    reset_token_bitmask(mask)
    assert bool((mask == -1).all())


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((-1, 10), ValueError, "batch_size must be >= 0, got -1"),
        ((1, -5), ValueError, "vocab_size must be >= 0, got -5"),
        ((1.5, 10), TypeError, "batch_size must be an int, got float"),
        ((1, True), TypeError, "vocab_size must be an int, got bool"),
    ],
)
def test_shape_validation(args: tuple[object, object], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        get_bitmask_shape(*args)  # type: ignore[arg-type]
    with pytest.raises(exc, match=match):
        allocate_token_bitmask(*args)  # type: ignore[arg-type]


def test_allocate_pin_memory_needs_cpu() -> None:
    with pytest.raises(ValueError, match="pin_memory=True needs a CPU bitmask, got device=meta"):
        allocate_token_bitmask(1, 32, device="meta", pin_memory=True)


def test_reset_validation() -> None:
    with pytest.raises(TypeError, match="bitmask must be int32, got dtype=torch.int64"):
        reset_token_bitmask(torch.zeros(1, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match="bitmask must be a torch.Tensor, got ndarray"):
        reset_token_bitmask(np.zeros((1, 2), np.int32))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Conversions


def _random_bool(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape) < 0.5


@pytest.mark.parametrize("vocab", [1, 7, 31, 32, 33, 64, 1000, 32001])
@pytest.mark.parametrize("ndim", [1, 2])
def test_bool_to_bitmask_matches_reference(rng: np.random.Generator, vocab: int, ndim: int) -> None:
    shape = (vocab,) if ndim == 1 else (3, vocab)
    mask = _random_bool(rng, shape)
    words = bool_mask_to_bitmask(mask)
    assert isinstance(words, np.ndarray)
    assert words.dtype == np.int32
    assert words.shape == (*shape[:-1], (vocab + 31) // 32)
    rows = mask.reshape(-1, vocab)
    expected = np.array(
        [reference.reference_bool_to_bitmask(r.tolist()) for r in rows], dtype=np.int32
    )
    np.testing.assert_array_equal(words.reshape(-1, words.shape[-1]), expected)
    words_t = bool_mask_to_bitmask(torch.from_numpy(mask))
    assert isinstance(words_t, torch.Tensor)
    assert words_t.dtype == torch.int32
    np.testing.assert_array_equal(words_t.numpy(), words)


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 1000, 32000, 32001, 128256])
@pytest.mark.parametrize("ndim", [1, 2])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_round_trip(rng: np.random.Generator, vocab: int, ndim: int, kind: str) -> None:
    shape = (vocab,) if ndim == 1 else (2, vocab)
    mask_np = _random_bool(rng, shape)
    mask = mask_np if kind == "numpy" else torch.from_numpy(mask_np)
    back = bitmask_to_bool_mask(bool_mask_to_bitmask(mask), vocab)
    assert type(back) is type(mask)
    assert tuple(back.shape) == shape
    np.testing.assert_array_equal(np.asarray(back), mask_np)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_bitmask_to_bool_reads_every_bit(kind: str) -> None:
    words_np = np.array([[-1, 0], [np.int32(-(2**31)), 1]], dtype=np.int32)
    words = words_np if kind == "numpy" else torch.from_numpy(words_np)
    mask = np.asarray(bitmask_to_bool_mask(words, 64))
    assert mask[0, :32].all() and not mask[0, 32:].any()
    assert mask[1].nonzero()[0].tolist() == [31, 32]  # sign bit of word 0, bit 0 of word 1


def test_bitmask_to_bool_partial_vocab() -> None:
    words = np.array([-1, -1], dtype=np.int32)
    assert bitmask_to_bool_mask(words, 40).shape == (40,)
    assert bitmask_to_bool_mask(words, 0).shape == (0,)


@pytest.mark.parametrize("vocab", [1024, 1001])
def test_conversions_match_xgrammar(rng: np.random.Generator, vocab: int) -> None:
    # Same ABI as xgrammar. Only the padding bits past `vocab` differ: xgrammar sets them, we
    # clear them (those tokens do not exist).
    xgr_testing = pytest.importorskip("xgrammar.testing")
    mask = torch.from_numpy(_random_bool(rng, (3, vocab)))
    ours = bool_mask_to_bitmask(mask)
    theirs = xgr_testing.bool_mask_to_bitmask(mask).to(torch.int32).reshape(ours.shape)
    assert torch.equal(bitmask_to_bool_mask(theirs, vocab), mask)
    assert torch.equal(xgr_testing.bitmask_to_bool_mask(ours, vocab).reshape(mask.shape), mask)
    if vocab % 32 == 0:
        assert torch.equal(ours, theirs)


I32, I64 = np.int32, np.int64
T32 = torch.int32


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: bool_mask_to_bitmask(np.zeros(5, np.int8)), TypeError, "must be a bool array"),
        (lambda: bool_mask_to_bitmask(torch.zeros(5)), TypeError, "must be a bool tensor"),
        (lambda: bool_mask_to_bitmask([True]), TypeError, "numpy array or torch tensor, got list"),
        (lambda: bool_mask_to_bitmask(np.zeros((1, 1, 5), bool)), ValueError, "got 3-D"),
        (lambda: bitmask_to_bool_mask(np.zeros(2, I64), 10), TypeError, "must be int32"),
        (lambda: bitmask_to_bool_mask(np.zeros(2, I32), 65), ValueError, "=65 exceeds the 64"),
        (lambda: bitmask_to_bool_mask(torch.zeros(2, dtype=T32), 65), ValueError, "exceeds"),
        (lambda: bitmask_to_bool_mask(np.zeros(2, I32), -1), ValueError, "must be >= 0"),
        (lambda: bitmask_to_bool_mask(np.zeros(2, I32), 3.0), TypeError, "must be an int"),
    ],
)  # fmt: skip
def test_conversion_validation(call: object, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------------------------
# apply_token_bitmask_inplace: argument validation (numerics are in tests/kernels)


def _ok() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(2, 64), torch.full((2, 2), -1, dtype=torch.int32)


VOCAB_RANGE = r"vocab_size must be in \[1, 32 \* bitmask.shape\[-1\]\] = \[1, 64\], got 0"
DEVICE_HINT = r"same device, got logits.device=cpu, bitmask.device=meta; .*bitmask.to\(logits.dev"


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"logits": np.zeros((2, 64), np.float32)}, TypeError, "torch.Tensor, got ndarray"),
        ({"logits": torch.zeros(2, 64, dtype=torch.float64)}, TypeError, "dtype=torch.float64"),
        ({"logits": torch.zeros(2, 64, dtype=T32)}, TypeError, "float32, float16 or bfloat16"),
        ({"logits": torch.zeros(1, 2, 64)}, ValueError, "logits must be 1-D or 2-D, got 3-D"),
        ({"bitmask": torch.zeros(2, 2, dtype=torch.int64)}, TypeError, "bitmask must be int32"),
        ({"bitmask": torch.zeros(1, 2, 2, dtype=T32)}, ValueError, "bitmask must be 1-D or 2-D"),
        ({"bitmask": torch.zeros(3, 2, dtype=T32)}, ValueError, "2 rows but bitmask has 3"),
        ({"bitmask": torch.zeros(2, 2, dtype=T32, device="meta")}, ValueError, DEVICE_HINT),
        ({"vocab_size": 0}, ValueError, VOCAB_RANGE),
        ({"vocab_size": 65}, ValueError, "got 65"),
        ({"vocab_size": 10.0}, TypeError, "vocab_size must be an int, got float"),
        ({"indices": [0, 2]}, ValueError, r"indices must be in \[0, 2\) .*got 2"),
        ({"indices": [-1]}, ValueError, "got -1"),
        ({"indices": [[0]]}, ValueError, "indices must be a flat sequence of ints"),
        ({"indices": [0.5]}, TypeError, "indices must be integers, got float64"),
        ({"indices": torch.tensor([True])}, TypeError, "integers, got dtype=torch.bool"),
        ({"indices": torch.zeros(1, 1, dtype=torch.int64)}, ValueError, r"got shape \(1, 1\)"),
        ({"backend": "cuda"}, ValueError, "backend must be one of"),
    ],
)  # fmt: skip
def test_apply_validation(kwargs: dict[str, object], exc: type[Exception], match: str) -> None:
    logits, bitmask = _ok()
    args: dict[str, object] = {"logits": logits, "bitmask": bitmask, **kwargs}
    with pytest.raises(exc, match=match):
        apply_token_bitmask_inplace(
            args.pop("logits"),  # type: ignore[arg-type]
            args.pop("bitmask"),  # type: ignore[arg-type]
            **args,  # type: ignore[arg-type]
        )


def test_apply_numba_needs_cpu() -> None:
    logits = torch.zeros(1, 64, device="meta")
    bitmask = torch.zeros(1, 2, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match="numba backend needs CPU tensors, got logits.device=meta"):
        apply_token_bitmask_inplace(logits, bitmask, backend="numba")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="interpreter accepts CPU")
def test_apply_triton_needs_cuda_or_interpreter() -> None:
    logits, bitmask = _ok()
    with pytest.raises(
        ValueError, match="Triton backend needs CUDA tensors, got logits.device=cpu"
    ):
        apply_token_bitmask_inplace(logits, bitmask, backend="triton")


def test_empty_indices_is_a_no_op() -> None:
    logits, bitmask = _ok()
    bitmask.zero_()
    apply_token_bitmask_inplace(logits, bitmask, indices=[])
    assert bool((logits == 0).all())


def test_auto_backend_choice() -> None:
    assert bm._auto_backend(torch.zeros(2, 64)) == "numba"
    assert bm._auto_backend(torch.zeros(64, 2).t()) == "numba"
    assert bm._auto_backend(torch.zeros(2, 64, device="meta")) == "torch"


def test_import_is_lazy() -> None:
    code = (
        "import sys, constrain.bitmask as b, torch\n"
        "b.bool_mask_to_bitmask(torch.ones(3, dtype=torch.bool))\n"
        "print('triton' in sys.modules, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# --------------------------------------------------------------------------------------------
# BitmaskApplier: the checked-once fast path of MaskedSampler and LogitsProcessor


def _buffer(rng: np.random.Generator, rows: int, vocab: int) -> torch.Tensor:
    out = bool_mask_to_bitmask(torch.from_numpy(rng.random((rows, vocab)) < 0.3))
    out[:, 0] = 0  # a whole word disallowed, and one allowed, in every row
    out[:, 1] = -1
    return out


def _expected(
    logits: torch.Tensor, bitmask: torch.Tensor, vocab: int, rows: list[int] | None
) -> torch.Tensor:
    out = logits.clone()
    count = out.shape[0]
    mask = bitmask if rows is not None or count == bitmask.shape[0] else bitmask[:count]
    apply_token_bitmask_inplace(out, mask, vocab_size=vocab, indices=rows, backend="torch")
    return out


@pytest.mark.parametrize("backend", ["auto", "numba", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("count", "rows"), [(4, None), (2, None), (4, [2, 0]), (3, [1, 1]), (4, [])]
)
def test_applier_matches_the_public_apply(
    rng: np.random.Generator, backend: str, dtype: torch.dtype, count: int, rows: list[int] | None
) -> None:
    vocab = 100
    bitmask = _buffer(rng, 4, vocab)  # 4 words: ids 100..127 and columns >= 128 are padding
    applier = bm.BitmaskApplier(bitmask, vocab, backend)
    for _ in range(2):  # the cached views serve call after call
        bitmask.copy_(_buffer(rng, 4, vocab))  # refilled in place, as the matchers do
        logits = torch.from_numpy(rng.normal(size=(count, 140)).astype(np.float32)).to(dtype)
        want = _expected(logits, bitmask, vocab, rows)
        applier.apply(logits, rows)
        assert torch.equal(logits, want)


def test_applier_handles_strided_logits(rng: np.random.Generator) -> None:
    bitmask = _buffer(rng, 3, 64)
    wide = torch.from_numpy(rng.normal(size=(3, 128)).astype(np.float32))
    logits = wide[:, ::2]  # stride 2 along the vocabulary
    want = _expected(logits, bitmask, 64, None)
    bm.BitmaskApplier(bitmask, 64, "auto").apply(logits)
    assert torch.equal(logits, want)
    assert torch.equal(wide[:, 1::2], wide[:, 1::2].clone())  # the other columns untouched


@pytest.mark.parametrize(
    ("count", "rows", "match"),
    [(2, [0, 2], r"indices must be in \[0, 2\)"), (2, [-1], "got -1"),
     (5, None, "logits has 5 rows but bitmask has 4")],
)  # fmt: skip
def test_applier_rejects_rows_out_of_range(
    rng: np.random.Generator, count: int, rows: list[int] | None, match: str
) -> None:
    applier = bm.BitmaskApplier(_buffer(rng, 4, 64), 64, "auto")
    logits = torch.zeros(count, 64)
    with pytest.raises(ValueError, match=match):
        applier.apply(logits, rows)
    assert bool((logits == 0).all())


@pytest.mark.parametrize(
    ("bitmask", "vocab", "backend", "exc", "match"),
    [(torch.full((2, 2), -1, dtype=torch.int64), 64, "auto", TypeError, "must be int32"),
     (torch.full((2,), -1, dtype=torch.int32), 64, "auto", ValueError, "contiguous 2-D CPU"),
     (torch.full((2, 4), -1, dtype=torch.int32)[:, ::2], 64, "auto", ValueError, "contiguous"),
     (torch.full((2, 2), -1, dtype=torch.int32), 65, "auto", ValueError, r"\[1, 64\]"),
     (torch.full((2, 2), -1, dtype=torch.int32), 0, "auto", ValueError, r"\[1, 64\]"),
     (torch.full((2, 2), -1, dtype=torch.int32), 64, "cuda", ValueError, "backend must be")],
)  # fmt: skip
def test_applier_checks_its_buffer_once(
    bitmask: torch.Tensor, vocab: int, backend: str, exc: type[Exception], match: str
) -> None:
    with pytest.raises(exc, match=match):
        bm.BitmaskApplier(bitmask, vocab, backend)


@pytest.mark.parametrize("rows", [None, [2, 0]])
def test_zero_disallowed(rng: np.random.Generator, rows: list[int] | None) -> None:
    vocab = 100
    bitmask = _buffer(rng, 3, vocab)
    applier = bm.BitmaskApplier(bitmask, vocab, "auto")
    count = 3 if rows is None else len(rows)
    values = torch.from_numpy(rng.random((count, 140)).astype(np.float32) + 0.5)
    raw = values.clone()
    assert applier.zero_disallowed(values, rows)
    allowed = bitmask_to_bool_mask(bitmask, vocab)
    for k in range(count):
        keep = torch.zeros(140, dtype=torch.bool)
        keep[:vocab] = allowed[k if rows is None else rows[k]]
        assert torch.equal(values[k], torch.where(keep, raw[k], torch.zeros(())))


def test_zero_disallowed_declines_what_it_cannot_do(rng: np.random.Generator) -> None:
    bitmask = _buffer(rng, 2, 64)
    values = torch.ones(2, 64)
    assert not bm.BitmaskApplier(bitmask, 64, "torch").zero_disallowed(values)
    applier = bm.BitmaskApplier(bitmask, 64, "auto")
    assert not applier.zero_disallowed(torch.ones(2, 64, dtype=torch.float16))
    assert not applier.zero_disallowed(values, [0])  # one row given for two rows of values
    assert not applier.zero_disallowed(values, [0, 2])  # out of range
    assert not applier.zero_disallowed(torch.ones(3, 64))  # more rows than the buffer
    assert bool((values == 1).all())


def test_a_read_only_bitmask_is_refused_at_once() -> None:
    # a read-only array used to surface as a numba typing error after seconds of compiling
    from constrain import Compiler, Grammar, Matcher
    from constrain.matcher import fill_next_token_bitmasks
    from constrain.testing import byte_vocabulary

    vocab = byte_vocabulary()
    m = Matcher(Compiler(vocab).compile(Grammar.from_regex("ab+")))
    frozen = allocate_token_bitmask(2, vocab.size).numpy().copy()
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(frozen, 0)
    with pytest.raises(ValueError, match="read-only"):
        fill_next_token_bitmasks([m], frozen)
