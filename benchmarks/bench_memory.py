"""Memory of compiling many schemas in one process: peak and final RSS, constrain and llguidance.

One process per configuration compiles the MaskBench sample (the same stratified, seeded sample
as ``maskbench.py``) one schema after another, as a server does with its requests' schemas: the
schema is compiled with flexible whitespace, its first mask filled, and its first valid instance
fed token by token (fill + accept), which fills the lazily built token tables and lexer states.
Configurations:

- ``constrain``: one ``Compiler`` with its defaults (a cache of compiled grammars of up to
  512 MB; each grammar's token tables up to ``CompileLimits.mask_cache_bytes``, 256 MB);
- ``constrain-64mb``: the same with both budgets set to 64 MB
  (``Compiler(vocab, cache_bytes=64 MB, limits=CompileLimits(mask_cache_bytes=64 MB))``);
- ``constrain-nocache``: ``cache_bytes=0``, so nothing outlives its request;
- ``llguidance``: ``LLMatcher`` per schema, dropped after its instance (llguidance keeps no
  cache of compiled grammars).

RSS is read from ``/proc/self/status``: ``VmRSS`` after the warm-up (the baseline: tokenizer,
libraries, kernels) and at the end, ``VmHWM`` (the peak) at the end. Compile errors are counted
and skipped. Usage::

    .venv/bin/python benchmarks/bench_memory.py              # results/memory.json
    .venv/bin/python benchmarks/bench_memory.py --sample 200 --configs constrain,llguidance
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import args_record, log, machine, result_path, shown, write_result

CONFIGS = ("constrain", "constrain-64mb", "constrain-nocache", "llguidance")
MAX_TOKENS = 4000  # an instance is fed up to this many tokens


def rss_mb() -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of this process in MB (Linux)."""
    out: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def _engine(config: str) -> Any:
    """The MaskBench adapter of the configuration's engine, its compiler set as configured."""
    import maskbench

    engine = maskbench._make_engine("llguidance" if config == "llguidance" else "constrain")
    if config.startswith("constrain"):
        import constrain

        budget = 64 * 2**20
        cache = {"constrain": 512 * 2**20, "constrain-64mb": budget, "constrain-nocache": 0}
        limits = constrain.CompileLimits(
            mask_cache_bytes=budget if config == "constrain-64mb" else 256 * 2**20
        )
        shared: list[Any] = []

        def new_compiler() -> Any:  # one compiler for the whole run, as a server keeps
            if not shared:
                shared.append(
                    constrain.Compiler(engine._vocab, cache_bytes=cache[config], limits=limits)
                )
            return shared[0]

        engine.new_compiler = new_compiler
    return engine


def run_config(config: str, tasks: list[dict[str, Any]], conn: Any) -> None:
    """Worker: prepare and warm up, then compile and run every task; send the figures."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import maskbench
    import torch
    from engines import GrammarSpec
    from workloads import load_tokenizer

    torch.set_num_threads(1)
    engine = _engine(config)
    tokenizer = load_tokenizer()
    engine.prepare(tokenizer)
    bitmask = engine.allocate_bitmask()
    warm = maskbench.WARMUP_SCHEMA
    compiled = engine.compile(engine.new_compiler(), GrammarSpec("json_schema", "warm", warm))
    engine.new_matcher(compiled, bitmask).fill()
    del compiled
    gc.collect()
    base = rss_mb()
    t0 = time.perf_counter()
    compiled_n = errors = tokens = 0
    for task in tasks:
        spec = GrammarSpec("json_schema", task["id"], task["schema"])
        try:
            compiled = engine.compile(engine.new_compiler(), spec)
            engine.new_matcher(compiled, bitmask).fill()
        except Exception:
            errors += 1
            continue
        compiled_n += 1
        valid = [ids for ok, ids in task["tests"] if ok]
        if valid:
            samples: list[int] = []
            deadline = time.perf_counter_ns() + 10**10
            try:
                maskbench.run_instance(
                    engine, compiled, bitmask, valid[0][:MAX_TOKENS], samples, deadline
                )
            except Exception:
                pass
            tokens += len(samples)
        del compiled
    gc.collect()
    end = rss_mb()
    conn.send(
        {
            "config": config,
            "version": engine.version,
            "schemas": len(tasks),
            "compiled": compiled_n,
            "compile_errors": errors,
            "tokens_fed": tokens,
            "seconds": round(time.perf_counter() - t0, 1),
            "baseline_rss_mb": round(base["VmRSS"], 1),
            "peak_rss_mb": round(end["VmHWM"], 1),
            "final_rss_mb": round(end["VmRSS"], 1),
            "peak_growth_mb": round(end["VmHWM"] - base["VmRSS"], 1),
            "final_growth_mb": round(end["VmRSS"] - base["VmRSS"], 1),
        }
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, default=2000, help="MaskBench sample size (seed 1)")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {CONFIGS}")
    p.add_argument("--out", type=Path, default=None, help="default results/memory.json")
    args = p.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    if any(c not in CONFIGS for c in configs):
        p.error(f"configs must be among {CONFIGS}")
    import maskbench

    rows = maskbench.stratified_sample(maskbench.load_rows(), args.sample, 1)
    tasks = maskbench.tokenize_rows(rows)
    results = []
    ctx = multiprocessing.get_context("spawn")
    for config in configs:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=run_config, args=(config, tasks, send))
        proc.start()
        row = recv.recv()
        proc.join()
        log(json.dumps(row))
        results.append(row)
    print(f"{'config':<18} {'schemas':>7} {'errors':>6} {'base MB':>8} {'peak MB':>8} "
          f"{'final MB':>8} {'peak-base':>9} {'final-base':>10} {'s':>6}")  # fmt: skip
    for r in results:
        print(
            f"{r['config']:<18} {r['compiled']:>7} {r['compile_errors']:>6} "
            f"{r['baseline_rss_mb']:>8.0f} {r['peak_rss_mb']:>8.0f} {r['final_rss_mb']:>8.0f} "
            f"{r['peak_growth_mb']:>9.0f} {r['final_growth_mb']:>10.0f} {r['seconds']:>6.0f}"
        )
    out = args.out or result_path("memory")
    write_result(out, {"machine": machine(), "args": args_record(args), "results": results})
    print(f"wrote {shown(out)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
