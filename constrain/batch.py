"""Stage 5: masks of many matchers at once, one bitmask row each, in threads.

:func:`fill_next_token_bitmasks` fills a batch's rows in a process-wide thread pool (the mask
kernels release the GIL); :mod:`constrain.matcher` re-exports it next to the Matcher.
:func:`bitmask_rows` checks a caller's bitmask and gives the kernels its rows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from constrain.matcher import Matcher

__all__ = ["bitmask_row", "bitmask_rows", "fill_next_token_bitmasks", "row_token_ids"]

_CPUS = os.cpu_count() or 1
_MIN_PARALLEL_ROWS = 4
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _fill_pool(workers: int) -> ThreadPoolExecutor:
    """Return the process-wide pool of ``workers`` threads (created once, daemon threads)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="constrain-fill"
            )
        return pool


def fill_next_token_bitmasks(
    matchers: Sequence[Matcher],
    bitmask: Any,
    *,
    indices: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> None:
    """Fill one bitmask row per matcher, in parallel threads (the kernels release the GIL).

    Parameters
    ----------
    matchers : sequence of Matcher
        One matcher per batch row.
    bitmask : (batch, ceil(V/32)) int32
        CPU bitmask, e.g. from :func:`constrain.allocate_token_bitmask`.
    indices : sequence of int, optional
        Row of ``bitmask`` for each matcher (default: ``range(len(matchers))``).
    num_threads : int, optional
        Worker threads (default: the number of CPUs, at most ``len(matchers)``). Fewer than 4
        matchers are filled in the calling thread; more use a process-wide pool kept alive
        between calls.
    """
    rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise ValueError(f"got {len(matchers)} matchers but {len(rows)} indices")
    workers = min(num_threads or _CPUS, len(matchers))
    # A fill from warm tables takes ~40 µs: threads pay off for several rows, with a pool that
    # outlives the call (creating one costs more than 4 fills)
    if workers <= 1 or len(matchers) < _MIN_PARALLEL_ROWS:
        for m, i in zip(matchers, rows, strict=True):
            m.fill_next_token_bitmask(bitmask, i)
        return
    pairs = list(zip(matchers, rows, strict=True))

    def fill(lo: int) -> None:  # one contiguous slice per worker: few tasks for many matchers
        for m, i in pairs[lo : lo + chunk]:
            m.fill_next_token_bitmask(bitmask, i)

    chunk = -(-len(pairs) // workers)
    list(_fill_pool(workers).map(fill, range(0, len(pairs), chunk)))


def row_token_ids(row: np.ndarray) -> np.ndarray:
    """Return the sorted ids of the set bits of one packed row (uint32 or int32 words), int32.

    Only the non-zero words are unpacked: a structural position's few tokens cost a few words,
    not a vocabulary's worth of bits.
    """
    words = np.flatnonzero(row)
    bits = np.unpackbits(row[words].view(np.uint8), bitorder="little").reshape(-1, 32)
    word, bit = np.nonzero(bits)
    return (words[word] * 32 + bit).astype(np.int32)


def bitmask_row(rows: np.ndarray, index: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return row ``index`` of :func:`bitmask_rows`' view: its vocabulary's words, the rest."""
    if not 0 <= index < rows.shape[0]:
        raise IndexError(f"index {index} out of range for a bitmask of {rows.shape[0]} rows")
    words = (vocab_size + 31) // 32
    if rows.shape[1] < words:
        raise ValueError(
            f"bitmask has {rows.shape[1]} words per row, the vocabulary needs {words} "
            f"(vocab.size={vocab_size})"
        )
    return rows[index, :words], rows[index, words:]


def bitmask_rows(bitmask: Any) -> np.ndarray:
    """Return a writable uint32 numpy view of a CPU int32 bitmask (torch or numpy).

    Only a C-contiguous, writable int32 array reaches the fill kernel, which is compiled for that
    one type (a read-only or strided array would compile another specialisation, or fail).
    """
    if isinstance(bitmask, np.ndarray):
        arr = bitmask
    else:
        device = getattr(bitmask, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            raise ValueError(
                f"the bitmask must live on the CPU (got device {device}); fill a CPU bitmask "
                "(allocate_token_bitmask) and copy it with .to(device, non_blocking=True)"
            )
        arr = bitmask.numpy()
    if arr.dtype != np.int32:
        raise TypeError(f"bitmask must be int32, got {arr.dtype}; use allocate_token_bitmask()")
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or not arr.flags.c_contiguous:
        raise ValueError(f"bitmask must be a contiguous (batch, words) array, got {arr.shape}")
    if not arr.flags.writeable:
        raise ValueError("bitmask is read-only; pass a writable array (allocate_token_bitmask)")
    return arr.view(np.uint32)
