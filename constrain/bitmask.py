"""Token bitmasks (stage 6, apply): allocation, conversion and in-place masking of logits.

The layout is the de-facto ABI shared with xgrammar, llguidance and vLLM: a bitmask is an int32
array of shape ``(batch, ceil(V / 32))``; bit ``j`` of word ``w`` (``(word >> j) & 1``) stands for
token ``32 * w + j``; 1 means allowed, 0 disallowed. A freshly allocated bitmask is all ones
(``-1``), i.e. every token allowed.

:func:`apply_token_bitmask_inplace` dispatches to one of three kernels, imported lazily:
``"torch"`` (any device), ``"numba"`` (CPU) and ``"triton"`` (CUDA, or CPU under
``TRITON_INTERPRET=1``). Importing this module imports neither numba nor Triton.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np
import torch

from constrain._types import AnyArray, BoolArray, Int32Array

__all__ = [
    "Backend",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "bitmask_to_bool_mask",
    "bool_mask_to_bitmask",
    "get_bitmask_shape",
    "reset_token_bitmask",
]

Backend = Literal["auto", "torch", "numba", "triton"]
BITMASK_BACKENDS = ("auto", "torch", "numba", "triton")

bitmask_dtype = torch.int32
"""The dtype of a bitmask: int32 (torch had no usable uint32 when the ABI was fixed)."""

_LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_NUMBA_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}


def get_bitmask_shape(batch_size: int, vocab_size: int) -> tuple[int, int]:
    """Return the shape of a bitmask: ``(batch_size, ceil(vocab_size / 32))``.

    Parameters
    ----------
    batch_size : int
        Number of rows, ``>= 0``.
    vocab_size : int
        Number of tokens, ``>= 0``.

    Returns
    -------
    tuple of int
        ``(batch_size, ceil(vocab_size / 32))``.

    Raises
    ------
    TypeError
        If an argument is not an int.
    ValueError
        If an argument is negative.
    """
    _check_count("batch_size", batch_size)
    _check_count("vocab_size", vocab_size)
    return (batch_size, (vocab_size + 31) // 32)


def allocate_token_bitmask(
    batch_size: int,
    vocab_size: int,
    *,
    device: torch.device | str | None = None,
    pin_memory: bool = False,
) -> torch.Tensor:
    """Allocate a bitmask with every token allowed (every word ``-1``).

    Parameters
    ----------
    batch_size : int
        Number of rows (sequences).
    vocab_size : int
        Number of tokens of the vocabulary the bitmask covers.
    device : torch.device or str, optional
        Where to allocate; CPU when None. Matchers fill bitmasks on the CPU.
    pin_memory : bool, optional
        Allocate page-locked CPU memory, so that ``bitmask.to("cuda", non_blocking=True)`` is a
        true asynchronous copy. Ignored when CUDA is unavailable (pinning needs the driver).

    Returns
    -------
    (batch_size, ceil(vocab_size / 32)) int32 torch.Tensor
        Filled with ``-1``.

    Raises
    ------
    TypeError
        If ``batch_size`` or ``vocab_size`` is not an int.
    ValueError
        If a size is negative, or ``pin_memory`` is requested for a non-CPU device.
    """
    shape = get_bitmask_shape(batch_size, vocab_size)
    dev = torch.device("cpu") if device is None else torch.device(device)
    if pin_memory and dev.type != "cpu":
        raise ValueError(f"pin_memory=True needs a CPU bitmask, got device={dev}")
    pin = pin_memory and torch.cuda.is_available()
    return torch.full(shape, -1, dtype=bitmask_dtype, device=dev, pin_memory=pin)


def reset_token_bitmask(bitmask: torch.Tensor) -> None:
    """Set every bit of ``bitmask`` to 1 (every token allowed), in place.

    Parameters
    ----------
    bitmask : (batch, W) or (W,) int32 torch.Tensor
        The bitmask to reset.

    Raises
    ------
    TypeError
        If ``bitmask`` is not an int32 tensor.
    """
    _check_bitmask_tensor(bitmask)
    bitmask.fill_(-1)


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    *,
    vocab_size: int | None = None,
    indices: Sequence[int] | torch.Tensor | None = None,
    backend: Backend = "auto",
) -> None:
    """Set the logits of disallowed tokens to ``-inf``, in place.

    With ``C = logits.shape[-1]``, ``W = bitmask.shape[-1]`` and ``V = vocab_size`` (default
    ``32 * W``), the operation is exactly::

        rows = range(logits.shape[0]) if indices is None else indices
        for i in rows:
            for t in range(C):
                allowed = t < V and ((int(bitmask[i, t // 32]) >> (t % 32)) & 1) == 1
                if not allowed:
                    logits[i, t] = -inf

    1-D ``logits`` / ``bitmask`` are treated as a single row. Each entry ``i`` of ``indices`` names
    a row of *both* tensors (xgrammar's semantics: ``logits[i]`` is masked with ``bitmask[i]``);
    rows not listed are left untouched.

    Parameters
    ----------
    logits : (batch, C) or (C,) float32, float16 or bfloat16 torch.Tensor
        Modified in place. ``C`` may exceed ``V``: a model's padded vocabulary.
    bitmask : (batch, W) or (W,) int32 torch.Tensor
        On the same device as ``logits``. Usually filled on the CPU by a matcher, then copied
        with ``bitmask.to(logits.device, non_blocking=True)`` (from pinned memory, see
        :func:`allocate_token_bitmask`).
    vocab_size : int, optional
        The tokenizer's vocabulary size, ``1 <= vocab_size <= 32 * W``. Logits at ids
        ``>= vocab_size`` are set to ``-inf``.
    indices : sequence of int or 1-D integer torch.Tensor, optional
        Rows to mask, each in ``[0, min(logits rows, bitmask rows))``; duplicates are harmless.
        A CUDA tensor is range-checked on the device, which synchronises; pass a list or a CPU
        tensor to avoid that.
    backend : {"auto", "torch", "numba", "triton"}, optional
        ``"auto"``: on CUDA, Triton when it is importable (and the logits have unit stride
        along the vocabulary axis), else torch; on CPU, numba (5-30x faster than torch there,
        see ``kernels/README.md``; the first call per dtype width compiles, about a second,
        then the machine code is cached on disk); on other devices, torch.
        ``"numba"`` needs CPU tensors; ``"triton"`` needs CUDA tensors (or CPU tensors with
        ``TRITON_INTERPRET=1``).

    Raises
    ------
    TypeError
        If an argument has the wrong type or dtype.
    ValueError
        If shapes, devices, ``vocab_size``, ``indices`` or ``backend`` are inconsistent.
    ImportError
        If ``backend="triton"`` and Triton is not installed.

    Notes
    -----
    Unlike xgrammar, which leaves ``logits[..., vocab_size:]`` untouched (and only warns), ids at
    or beyond ``vocab_size`` and columns beyond ``32 * W`` are always set to ``-inf``: padded
    model-vocabulary ids are never valid tokens (llguidance and outlines-core do the same).

    A bitmask on another device than the logits is an error rather than silently moved: the
    copy is the caller's to schedule (pinned, non-blocking, overlapped with the forward pass).
    """
    logits2d, bitmask2d = _check_apply_args(logits, bitmask)
    num_words = bitmask2d.shape[1]
    if vocab_size is None:
        vocab_size = 32 * num_words
    else:
        _check_count("vocab_size", vocab_size)
        vocab_size = int(vocab_size)
        if not 1 <= vocab_size <= 32 * num_words:
            raise ValueError(
                f"vocab_size must be in [1, 32 * bitmask.shape[-1]] = [1, {32 * num_words}], "
                f"got {vocab_size}"
            )
    rows = None if indices is None else _check_indices(indices, logits2d, bitmask2d)
    if indices is None and logits2d.shape[0] != bitmask2d.shape[0]:
        raise ValueError(
            f"logits has {logits2d.shape[0]} rows but bitmask has {bitmask2d.shape[0]}; "
            "pass indices=... to mask a subset of rows"
        )
    if backend not in BITMASK_BACKENDS:
        raise ValueError(f"backend must be one of {BITMASK_BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = _auto_backend(logits2d)
    if rows is not None and rows.numel() == 0:
        return
    if backend == "numba":
        _apply_numba(logits2d, bitmask2d, vocab_size, rows)
    elif backend == "triton":
        try:
            from constrain.kernels.triton_mask import apply_token_bitmask_inplace_triton
        except ImportError as err:
            raise ImportError(
                f"backend='triton' needs Triton ({err}); install the extra: "
                "pip install 'constrain-llm[gpu]', or use backend='auto' or 'torch'"
            ) from err
        apply_token_bitmask_inplace_triton(logits2d, bitmask2d, vocab_size, rows)
    else:
        from constrain.kernels.torch_mask import apply_token_bitmask_inplace_torch

        apply_token_bitmask_inplace_torch(logits2d, bitmask2d, vocab_size, rows)


@overload
def bool_mask_to_bitmask(mask: torch.Tensor) -> torch.Tensor: ...
@overload
def bool_mask_to_bitmask(mask: BoolArray) -> Int32Array: ...
def bool_mask_to_bitmask(mask: torch.Tensor | BoolArray) -> torch.Tensor | Int32Array:
    """Pack a boolean mask (``True`` = allowed) into an int32 bitmask.

    Parameters
    ----------
    mask : (batch, V) or (V,) bool numpy.ndarray or torch.Tensor
        ``mask[..., t]`` is whether token ``t`` is allowed.

    Returns
    -------
    (batch, ceil(V / 32)) or (ceil(V / 32),) int32, same kind (and device) as ``mask``
        Bit ``t % 32`` of word ``t // 32`` is ``mask[..., t]``; padding bits are 0.

    Raises
    ------
    TypeError
        If ``mask`` is not a bool numpy array or torch tensor.
    ValueError
        If ``mask`` is not 1-D or 2-D.
    """
    if isinstance(mask, torch.Tensor):
        _check_ndim("mask", mask.dim())
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor, got dtype={mask.dtype}; use mask != 0")
        from constrain.kernels.torch_mask import bool_to_bitmask_torch

        return bool_to_bitmask_torch(mask)
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"mask must be a numpy array or torch tensor, got {type(mask).__name__}")
    _check_ndim("mask", mask.ndim)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be a bool array, got dtype={mask.dtype}; use mask.astype(bool)")
    num_words = (mask.shape[-1] + 31) // 32
    packed = np.packbits(mask, axis=-1, bitorder="little")
    pad = 4 * num_words - packed.shape[-1]
    if pad:
        packed = np.concatenate([packed, np.zeros((*packed.shape[:-1], pad), np.uint8)], axis=-1)
    # Four little-endian bytes per word, whatever the host byte order.
    words: Int32Array = np.ascontiguousarray(packed).view("<i4").astype(np.int32)
    return words


@overload
def bitmask_to_bool_mask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor: ...
@overload
def bitmask_to_bool_mask(bitmask: Int32Array, vocab_size: int) -> BoolArray: ...
def bitmask_to_bool_mask(
    bitmask: torch.Tensor | Int32Array, vocab_size: int
) -> torch.Tensor | BoolArray:
    """Unpack an int32 bitmask into a boolean mask (``True`` = allowed).

    Parameters
    ----------
    bitmask : (batch, W) or (W,) int32 numpy.ndarray or torch.Tensor
        The bitmask.
    vocab_size : int
        Number of tokens to unpack, ``0 <= vocab_size <= 32 * W``.

    Returns
    -------
    (batch, vocab_size) or (vocab_size,) bool, same kind (and device) as ``bitmask``
        ``mask[..., t] = (bitmask[..., t // 32] >> (t % 32)) & 1 == 1``.

    Raises
    ------
    TypeError
        If ``bitmask`` is not an int32 numpy array or torch tensor, or ``vocab_size`` not an int.
    ValueError
        If ``bitmask`` is not 1-D or 2-D, or ``vocab_size`` is out of range.
    """
    _check_count("vocab_size", vocab_size)
    if isinstance(bitmask, torch.Tensor):
        _check_bitmask_tensor(bitmask)
        _check_vocab_fits(vocab_size, bitmask.shape[-1])
        from constrain.kernels.torch_mask import bitmask_to_bool_torch

        return bitmask_to_bool_torch(bitmask, vocab_size)
    if not isinstance(bitmask, np.ndarray):
        raise TypeError(
            f"bitmask must be a numpy array or torch tensor, got {type(bitmask).__name__}"
        )
    _check_ndim("bitmask", bitmask.ndim)
    if bitmask.dtype != np.int32:
        raise TypeError(
            f"bitmask must be int32, got dtype={bitmask.dtype}; use bitmask.astype(np.int32)"
        )
    _check_vocab_fits(vocab_size, bitmask.shape[-1])
    as_bytes = np.ascontiguousarray(bitmask, dtype="<i4").view(np.uint8)
    bits = np.unpackbits(as_bytes, axis=-1, count=vocab_size, bitorder="little")
    out: BoolArray = bits.astype(np.bool_)
    return out


# --------------------------------------------------------------------------------------------
# Dispatch and validation helpers.


@functools.cache
def _triton_available() -> bool:
    try:
        import constrain.kernels.triton_mask  # noqa: F401
    except ImportError:
        return False
    return True


def _auto_backend(logits: torch.Tensor) -> Backend:
    if logits.device.type == "cuda":
        return "triton" if logits.stride(-1) == 1 and _triton_available() else "torch"
    if logits.device.type == "cpu":
        return "numba"
    return "torch"


def _apply_numba(
    logits: torch.Tensor, bitmask: torch.Tensor, vocab_size: int, rows: torch.Tensor | None
) -> None:
    if logits.device.type != "cpu":
        raise ValueError(
            f"the numba backend needs CPU tensors, got logits.device={logits.device}; "
            "use backend='auto', 'torch' or 'triton'"
        )
    from constrain.kernels.numba_mask import NEG_INF_BITS, apply_bitmask_kernel

    # Same storage, reinterpreted: the kernel writes -inf bit patterns and never reads a float.
    int_view = torch.int32 if logits.dtype == torch.float32 else torch.int16
    logits_bits: AnyArray = logits.detach().view(int_view).numpy()
    words: AnyArray = bitmask.detach().numpy()
    if rows is None:
        row_ids: AnyArray = np.arange(logits.shape[0], dtype=np.int64)
    else:
        row_ids = rows.numpy()
    neg_inf_bits = NEG_INF_BITS[_NUMBA_DTYPE_NAMES[logits.dtype]]
    apply_bitmask_kernel(logits_bits, words, row_ids, vocab_size, neg_inf_bits)


class BitmaskApplier:
    """Apply rows of one CPU bitmask buffer to logits, step after step (a decoding hot path).

    :func:`apply_token_bitmask_inplace` checks its arguments and resolves the backend on every
    call, which at batch 1 costs about as much as the numba kernel itself. A logits processor or
    a sampler applies the same buffer with the same vocabulary size and backend at every step,
    so this checks those once, here, and per call only what can change (the logits' device,
    dtype and shape, and the rows). CPU logits under the ``"auto"`` or ``"numba"`` backend go
    straight to the numba kernel with cached numpy views; anything else goes through
    :func:`apply_token_bitmask_inplace` (after ``bitmask.to(logits.device, non_blocking=True)``),
    which also raises the usual errors.

    Parameters
    ----------
    bitmask : (B, W) int32 torch.Tensor
        The contiguous CPU buffer the matchers fill; kept, not copied.
    vocab_size : int
        As for :func:`apply_token_bitmask_inplace`, ``1 <= vocab_size <= 32 * W``.
    backend : {"auto", "torch", "numba", "triton"}
        As for :func:`apply_token_bitmask_inplace`.

    Raises
    ------
    TypeError, ValueError
        If the buffer, ``vocab_size`` or ``backend`` is not valid.
    """

    def __init__(self, bitmask: torch.Tensor, vocab_size: int, backend: str) -> None:
        _check_bitmask_tensor(bitmask)
        if bitmask.dim() != 2 or bitmask.device.type != "cpu" or not bitmask.is_contiguous():
            raise ValueError(
                f"the bitmask buffer must be a contiguous 2-D CPU tensor, got shape "
                f"{tuple(bitmask.shape)} on {bitmask.device}"
            )
        _check_count("vocab_size", vocab_size)
        if not 1 <= vocab_size <= 32 * bitmask.shape[1]:
            raise ValueError(
                f"vocab_size must be in [1, {32 * bitmask.shape[1]}] for this bitmask, got "
                f"{vocab_size}"
            )
        if backend not in BITMASK_BACKENDS:
            raise ValueError(f"backend must be one of {BITMASK_BACKENDS}, got {backend!r}")
        self.bitmask = bitmask
        self.vocab_size = int(vocab_size)
        self.backend: Backend = backend  # type: ignore[assignment]
        self._words: AnyArray = bitmask.numpy()
        self._all_rows: AnyArray = np.arange(bitmask.shape[0], dtype=np.int64)
        self._numba_direct = backend in ("auto", "numba")
        self._kernel: Any = None  # numba_mask.apply_bitmask_kernel, imported on first use

    def apply(self, logits: torch.Tensor, rows: Sequence[int] | None = None) -> None:
        """Mask ``logits`` in place: row ``i`` with ``bitmask[i]``, for ``i`` in ``rows``.

        The same as ``apply_token_bitmask_inplace(logits, bitmask.to(logits.device),
        vocab_size=vocab_size, indices=rows, backend=backend)``, except that ``rows=None``
        means every row of ``logits``, which may have fewer rows than the buffer.

        Parameters
        ----------
        logits : (R, C) float torch.Tensor
            Modified in place.
        rows : sequence of int, optional
            Rows to mask (default: all ``R``), each in ``[0, min(R, B))``.
        """
        num_rows = logits.shape[0] if logits.dim() == 2 else 0
        if (
            self._numba_direct
            and num_rows
            and logits.device.type == "cpu"
            and logits.dtype in _NUMBA_DTYPE_NAMES
        ):
            limit = min(num_rows, self._words.shape[0])
            if rows is None:
                row_ids = self._all_rows[:num_rows] if num_rows <= limit else None
            elif not rows:
                return
            else:
                row_ids = np.asarray(rows, dtype=np.int64)
                if row_ids.ndim != 1 or not 0 <= min(rows) <= max(rows) < limit:
                    row_ids = None  # the checked path raises the usual error
            if row_ids is not None:
                if self._kernel is None:
                    from constrain.kernels.numba_mask import apply_bitmask_kernel

                    self._kernel = apply_bitmask_kernel
                int_view = torch.int32 if logits.dtype == torch.float32 else torch.int16
                self._kernel(
                    logits.detach().view(int_view).numpy(),
                    self._words,
                    row_ids,
                    self.vocab_size,
                    _neg_inf_bits(logits.dtype),
                )
                return
        indices = rows
        if rows is None and 0 < num_rows < self.bitmask.shape[0]:
            indices = range(num_rows)
        apply_token_bitmask_inplace(
            logits,
            self.bitmask.to(logits.device, non_blocking=True),
            vocab_size=self.vocab_size,
            indices=indices,
            backend=self.backend,
        )

    def zero_disallowed(self, values: torch.Tensor, rows: Sequence[int] | None = None) -> bool:
        """Set ``values[k, t] = 0`` for every token ``t`` that bitmask row ``rows[k]`` disallows.

        The numba kernel with ``+0.0`` as the fill pattern, for float32 CPU ``values`` when the
        backend is ``"auto"`` or ``"numba"``; otherwise nothing is done and ``False`` returned
        (the caller then computes what it needs another way).

        Parameters
        ----------
        values : (K, C) float32 torch.Tensor
            Modified in place; row ``k`` goes with bitmask row ``rows[k]``.
        rows : sequence of int, optional
            ``K`` bitmask rows, each in ``[0, B)``; default ``range(K)`` (then ``K <= B``).

        Returns
        -------
        bool
            Whether ``values`` was masked.
        """
        count = values.shape[0] if values.dim() == 2 else 0
        if not (
            self._numba_direct
            and count
            and values.device.type == "cpu"
            and values.dtype == torch.float32
        ):
            return False
        if rows is None:
            if count > self._words.shape[0]:
                return False
            words, row_ids = self._words, self._all_rows[:count]
        else:  # gather the rows' words, so that row k of values meets row k of words
            if len(rows) != count or not 0 <= min(rows) <= max(rows) < self._words.shape[0]:
                return False
            words = self._words[np.asarray(rows, dtype=np.int64)]
            row_ids = np.arange(count, dtype=np.int64)
        if self._kernel is None:
            from constrain.kernels.numba_mask import apply_bitmask_kernel

            self._kernel = apply_bitmask_kernel
        self._kernel(
            values.detach().view(torch.int32).numpy(),
            words,
            row_ids,
            self.vocab_size,
            np.int32(0),
        )
        return True


@functools.cache
def _neg_inf_bits(dtype: torch.dtype) -> np.signedinteger[Any]:
    from constrain.kernels.numba_mask import NEG_INF_BITS

    return NEG_INF_BITS[_NUMBA_DTYPE_NAMES[dtype]]


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _check_ndim(name: str, ndim: int) -> None:
    if ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D, got {ndim}-D")


def _check_vocab_fits(vocab_size: int, num_words: int) -> None:
    if vocab_size > 32 * num_words:
        raise ValueError(
            f"vocab_size={vocab_size} exceeds the {32 * num_words} tokens of a bitmask with "
            f"{num_words} words per row"
        )


def _check_bitmask_tensor(bitmask: object) -> torch.Tensor:
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
    if bitmask.dtype != bitmask_dtype:
        raise TypeError(
            f"bitmask must be int32, got dtype={bitmask.dtype}; use bitmask.to(torch.int32)"
        )
    _check_ndim("bitmask", bitmask.dim())
    return bitmask


def _check_apply_args(logits: object, bitmask: object) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(
            f"logits must be a torch.Tensor, got {type(logits).__name__}; "
            "wrap numpy arrays with torch.from_numpy (shares memory)"
        )
    if logits.dtype not in _LOGITS_DTYPES:
        raise TypeError(f"logits must be float32, float16 or bfloat16, got dtype={logits.dtype}")
    _check_ndim("logits", logits.dim())
    bitmask = _check_bitmask_tensor(bitmask)
    if bitmask.device != logits.device:
        raise ValueError(
            f"logits and bitmask must be on the same device, got logits.device={logits.device}, "
            f"bitmask.device={bitmask.device}; copy the bitmask first: "
            "bitmask.to(logits.device, non_blocking=True)"
        )
    logits2d = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2d = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    return logits2d, bitmask2d


def _check_indices(
    indices: Sequence[int] | torch.Tensor, logits: torch.Tensor, bitmask: torch.Tensor
) -> torch.Tensor:
    num_rows = min(logits.shape[0], bitmask.shape[0])
    if isinstance(indices, torch.Tensor):
        if indices.dim() != 1:
            raise ValueError(f"indices must be 1-D, got shape {tuple(indices.shape)}")
        if indices.dtype == torch.bool or indices.dtype.is_floating_point or indices.is_complex():
            raise TypeError(f"indices must be integers, got dtype={indices.dtype}")
        rows = indices.to(device=logits.device, dtype=torch.int64)
    else:
        arr = np.asarray(indices)
        if arr.ndim != 1:
            raise ValueError(f"indices must be a flat sequence of ints, got shape {arr.shape}")
        if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"indices must be integers, got {arr.dtype} values: {indices!r}")
        rows = torch.from_numpy(arr.astype(np.int64)).to(logits.device)
    if rows.numel():
        lo, hi = int(rows.min()), int(rows.max())
        if lo < 0 or hi >= num_rows:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"indices must be in [0, {num_rows}) (rows of logits {logits.shape[0]}, of "
                f"bitmask {bitmask.shape[0]}), got {bad}"
            )
    return rows
