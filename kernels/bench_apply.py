"""Microbenchmark of apply_token_bitmask_inplace: one JSON line per (backend, batch, vocab, dtype).

Run as a script (``kernels/`` is a workbench, not a package)::

    .venv/bin/python kernels/bench_apply.py                      # CPU defaults
    .venv/bin/python kernels/bench_apply.py --device cuda --backends torch triton torch-compile

Backends: ``torch``, ``numba``, ``triton`` and ``auto`` go through the public
``constrain.bitmask.apply_token_bitmask_inplace`` (argument checks included); ``torch-compile``
calls the torch kernel with ``compile=True`` directly (no argument checks); ``xgrammar`` is
xgrammar's own ``apply_token_bitmask_inplace`` when installed, for comparison.

Masks: ``random`` (each bit a coin flip: every word mixed, the kernels' worst case) and
``sparse`` (1024 allowed tokens, the common case under a grammar: most words are zero).
Timing: after warm-up, the median over ``--repeats`` rounds of the mean of back-to-back calls
filling ``--min-time`` seconds. Applying a mask twice is idempotent, so rounds reuse the logits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from constrain.bitmask import apply_token_bitmask_inplace, bool_mask_to_bitmask

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
ALL_BACKENDS = ("auto", "torch", "numba", "triton", "torch-compile", "xgrammar")


def make_bitmask(
    batch: int, vocab: int, kind: str, device: torch.device, seed: int = 0
) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if kind == "random":
        mask = torch.rand(batch, vocab, generator=gen) < 0.5
    elif kind == "sparse":
        mask = torch.zeros(batch, vocab, dtype=torch.bool)
        for r in range(batch):
            mask[r, torch.randperm(vocab, generator=gen)[:1024]] = True
    else:
        raise ValueError(f"unknown mask kind {kind!r}")
    return bool_mask_to_bitmask(mask).to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_call(
    backend: str, logits: torch.Tensor, bitmask: torch.Tensor, vocab: int
) -> Callable[[], None]:
    if backend == "torch-compile":
        from constrain.kernels.torch_mask import apply_token_bitmask_inplace_torch

        return lambda: apply_token_bitmask_inplace_torch(logits, bitmask, vocab, compile=True)
    if backend == "xgrammar":
        import xgrammar

        return lambda: xgrammar.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab)
    return lambda: apply_token_bitmask_inplace(
        logits,
        bitmask,
        vocab_size=vocab,
        backend=backend,  # type: ignore[arg-type]
    )


def time_call(
    call: Callable[[], None], device: torch.device, min_time: float, repeats: int
) -> tuple[float, int]:
    call()  # warm-up: JIT compilation, autotuning, caches
    call()
    _sync(device)
    start = time.perf_counter()
    num_calls = 0
    while time.perf_counter() - start < min_time / 4 or num_calls < 3:
        call()
        num_calls += 1
    _sync(device)
    per_call = (time.perf_counter() - start) / num_calls
    n = max(3, int(min_time / max(per_call, 1e-9)))
    rounds = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        _sync(device)
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds) * 1e6, n


def bench_one(
    backend: str,
    batch: int,
    vocab: int,
    dtype: str,
    mask: str,
    device: torch.device,
    *,
    padded: int = 0,
    min_time: float = 0.2,
    repeats: int = 5,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "bench": "apply_token_bitmask_inplace",
        "backend": backend,
        "device": str(device),
        "batch": batch,
        "vocab": vocab,
        "logits_cols": vocab + padded,
        "dtype": dtype,
        "mask": mask,
    }
    try:
        bitmask = make_bitmask(batch, vocab, mask, device)
        gen = torch.Generator(device=device).manual_seed(1)
        logits = torch.randn(batch, vocab + padded, generator=gen, device=device).to(DTYPES[dtype])
        us, n = time_call(make_call(backend, logits, bitmask, vocab), device, min_time, repeats)
        row.update(us_per_call=round(us, 2), calls_per_round=n)
    except Exception as err:  # a benchmark reports failures, it does not stop
        row["error"] = f"{type(err).__name__}: {err}"[:500]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backends", nargs="+", default=["torch", "numba"], choices=ALL_BACKENDS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--vocab", nargs="+", type=int, default=[32000, 128256])
    parser.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], choices=DTYPES)
    parser.add_argument("--mask", nargs="+", default=["sparse", "random"])
    parser.add_argument("--padded", type=int, default=0, help="extra logits columns (padding)")
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads if > 0")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    for mask in args.mask:
        for vocab in args.vocab:
            for batch in args.batch:
                for dtype in args.dtype:
                    for backend in args.backends:
                        row = bench_one(
                            backend,
                            batch,
                            vocab,
                            dtype,
                            mask,
                            device,
                            padded=args.padded,
                            min_time=args.min_time,
                            repeats=args.repeats,
                        )
                        row["torch_threads"] = torch.get_num_threads()
                        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
