"""The one prepared script for a lent GPU: gpu/triton tests plus the apply benchmark, as one JSON.

Run from the repository root on the GPU machine (its python3 has torch, Triton and pytest;
``constrain`` is used from the working tree)::

    PYTHONPATH=. PYTHONUNBUFFERED=1 python3 kernels/device_check.py --out "$OUT/device_check.json"

Sections (each fails softly: an error is recorded and the next section runs):

1. ``env``: versions, device name, SM count.
2. ``tests``: ``pytest tests/kernels tests/unit/test_bitmask.py -m "gpu or triton"`` on CUDA
   (no ``TRITON_INTERPRET``), with a time limit.
3. ``bench``: ``apply_token_bitmask_inplace`` at vocab 128256, batch 1/16/64/256, bf16/fp32,
   for torch, triton and torch.compile (sparse masks; random masks for torch and triton at
   batch 256) and xgrammar's own kernel when it is importable, then a Triton block-size and
   warp sweep (batch 1 bf16, batch 256 bf16 and fp32).

The whole run is budgeted to finish in under 5 minutes; sections past the budget are skipped
and listed under ``skipped``. Prints one JSON document on stdout (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 270.0
START = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - START


def soft(results: dict[str, Any], section: str, fn: Any, *args: Any) -> None:
    t0 = time.monotonic()
    try:
        results[section] = fn(*args)
    except Exception as err:  # fail softly: record and go on
        results.setdefault("errors", []).append(
            {"section": section, "error": f"{type(err).__name__}: {err}"[:2000],
             "traceback": traceback.format_exc()[-3000:]}
        )  # fmt: skip
    results.setdefault("section_seconds", {})[section] = round(time.monotonic() - t0, 1)


OPTIONAL_MODULES = (
    "numba",
    "numpy",
    "pytest",
    "hypothesis",
    "transformers",
    "xgrammar",
    "llguidance",
)


def _version_of(name: str) -> str | None:
    """The installed version of a module, or None when it is not importable."""
    try:
        module = __import__(name)
    except Exception:
        return None
    return str(getattr(module, "__version__", "?"))


def env_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as err:
        info["triton"] = f"unavailable: {err}"
    info["modules"] = {name: _version_of(name) for name in OPTIONAL_MODULES}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            sm_count=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            total_memory_gib=round(props.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
        )
    return info


def run_tests(timeout_s: float) -> dict[str, Any]:
    exe = Path(sys.executable).with_name("pytest")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "pytest"]
    cmd += ["tests/kernels", "tests/unit/test_bitmask.py", "-m", "gpu or triton", "-q",
            "-p", "no:cacheprovider", "-rfEs", "--tb=short"]  # fmt: skip
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return {"cmd": " ".join(cmd), "timed_out": True, "timeout_s": timeout_s,
                "output_tail": out[-6000:]}  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return {
        "cmd": " ".join(cmd),
        "returncode": proc.returncode,
        "passed": proc.returncode == 0,
        "summary": lines[-1] if lines else "",
        "seconds": round(time.monotonic() - t0, 1),
        "output_tail": (proc.stdout[-6000:] + proc.stderr[-2000:]),
    }


def run_bench(
    deadline: float, skipped: list[str], device_name: str, quick: bool
) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_apply
    import torch

    device = torch.device(device_name)
    rows: list[dict[str, Any]] = []
    plan: list[tuple[str, int, str, str]] = []
    batches = (1,) if quick else (1, 16, 64, 256)
    backends = ("torch", "triton") if quick else ("torch", "triton", "torch-compile")
    for dtype in ("bfloat16", "float32"):
        plan += [(backend, batch, dtype, "sparse") for batch in batches for backend in backends]
        plan += [(backend, batches[-1], dtype, "random") for backend in ("torch", "triton")]
        if _version_of("xgrammar") is not None:  # the peer's own CUDA kernel, for comparison
            plan += [("xgrammar", batch, dtype, "sparse") for batch in batches]
    for backend, batch, dtype, mask in plan:
        label = f"{backend}/b{batch}/{dtype}/{mask}"
        if time.monotonic() > deadline:
            skipped.append(f"bench {label}")
            continue
        t0 = time.monotonic()
        row = bench_apply.bench_one(
            backend, batch, 128256, dtype, mask, device, min_time=0.05, repeats=5
        )
        row["wall_s"] = round(time.monotonic() - t0, 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    rows.extend(block_size_sweep(deadline, skipped, device, quick))
    return rows


def block_size_sweep(
    deadline: float, skipped: list[str], device: Any, quick: bool
) -> list[dict[str, Any]]:
    import torch
    from bench_apply import make_bitmask, time_call

    from constrain.kernels.triton_mask import apply_token_bitmask_inplace_triton

    rows: list[dict[str, Any]] = []
    for batch, dtype in [(1, torch.bfloat16)] if quick else [
        (1, torch.bfloat16), (256, torch.bfloat16), (256, torch.float32)
    ]:  # fmt: skip
        bitmask = make_bitmask(batch, 128256, "sparse", device)
        logits = torch.randn(batch, 128256, device=device, dtype=dtype)
        for block_size in (1024, 2048, 4096, 8192):
            for num_warps in (None, 8, 16, 32):
                label = f"triton-sweep/b{batch}/{dtype}/bs{block_size}/w{num_warps}"
                if time.monotonic() > deadline:
                    skipped.append(label)
                    continue
                row: dict[str, Any] = {
                    "bench": "triton_block_sweep",
                    "batch": batch,
                    "vocab": 128256,
                    "dtype": str(dtype).removeprefix("torch."),
                    "mask": "sparse",
                    "block_size": block_size,
                    "num_warps": num_warps,
                }
                try:
                    call = functools.partial(
                        apply_token_bitmask_inplace_triton,
                        logits,
                        bitmask,
                        128256,
                        None,
                        block_size=block_size,
                        num_warps=num_warps,
                    )
                    us, n = time_call(call, device, 0.05, 5)
                    row.update(us_per_call=round(us, 2), calls_per_round=n)
                except Exception as err:
                    row["error"] = f"{type(err).__name__}: {err}"[:500]
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the JSON document here")
    parser.add_argument("--test-timeout", type=float, default=150.0)
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument(
        "--device",
        default="cuda",
        help="cpu = dry run of the script itself (needs TRITON_INTERPRET=1 for the Triton rows)",
    )
    parser.add_argument("--quick", action="store_true", help="batch 1 only, no torch.compile")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    if args.device == "cuda":
        os.environ.pop("TRITON_INTERPRET", None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    results: dict[str, Any] = {"script": "kernels/device_check.py", "budget_s": BUDGET_S}
    skipped: list[str] = []
    soft(results, "env", env_info)
    if not results.get("env", {}).get("cuda_available"):
        results.setdefault("errors", []).append({"section": "env", "error": "no CUDA device"})
    if args.skip_tests:
        skipped.append("tests")
    else:
        soft(results, "tests", run_tests, min(args.test_timeout, BUDGET_S - elapsed() - 60))
    if results.get("env", {}).get("cuda_available") or args.device != "cuda":
        soft(results, "bench", run_bench, START + BUDGET_S, skipped, args.device, args.quick)
    results["skipped"] = skipped
    results["total_seconds"] = round(elapsed(), 1)
    doc = json.dumps(results, indent=1)
    if args.out:
        Path(args.out).write_text(doc)
    print(doc, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
