"""Where constrain's time goes on MaskBench: time to first mask by stage, per-token time by kind.

``maskbench.py`` gives the totals side by side with the peers; this script splits constrain's
own, on the same stratified sample, so that work on speed goes where the time is:

- **time to first mask** per schema, split into the JSON Schema front end
  (``Grammar.from_json_schema``), the lexer (``grammar_lexer``: NFA and subset construction,
  or the lazy lexer's start), the parser tables (``build_parser_tables``), the rest of the
  compile (special tokens, normalisation, the token tables' set-up) and the first mask;
- **per-token time** (fill + accept, as ``maskbench.py`` times it), each token classed by what
  it cost: a *hit* (its token-table entries were there), a *miss* (an entry was built) and,
  for lazily built lexers, *grow* (lexer rows were built for it);
- the **tail**: the schemas with the most token time, and the kinds of the slowest 1% tokens.

One process, single-threaded, the schemas one after another (a fresh ``Compiler`` each, as in
``maskbench.py``: no compile is a cache hit), the garbage collector run before each compile
and paused over its instances. The lexer and parser stages are timed by wrapping the two
functions ``constrain.compiler`` calls (a measurement hook, nothing else changes). Usage::

    .venv/bin/python benchmarks/cost_breakdown.py                 # results/cost-breakdown.json
    .venv/bin/python benchmarks/cost_breakdown.py --stride 10     # every 10th schema, ~1 min
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import args_record, log, machine, result_path, shown, write_result

STAGES = ("front_end", "lexer", "parser", "compile_rest", "first_mask")
KINDS = ("eager hit", "eager miss", "lazy hit", "lazy miss", "lazy grow")


def _timed(fn: Callable[..., Any], spent: dict[str, float], stage: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] += time.perf_counter() - start

    return wrapper


def _kind(compiled: Any, builds: int, rows: int) -> str:
    lazy = compiled.lazy
    if lazy is None:
        return "eager miss" if compiled.tables.num_builds > builds else "eager hit"
    if lazy.rows_built > rows:
        return "lazy grow"
    return "lazy miss" if compiled.tables.num_builds > builds else "lazy hit"


def measure(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Compile each schema and feed its instances; per-schema stages and per-token samples."""
    from workloads import load_tokenizer

    import constrain
    import constrain.compiler as compiler_module
    from constrain.warmup import warm_up

    vocab = constrain.Vocabulary.from_huggingface(load_tokenizer()).prepare()
    warm_up(vocab)
    spent: dict[str, float] = defaultdict(float)
    compiler_module.grammar_lexer = _timed(compiler_module.grammar_lexer, spent, "lexer")  # type: ignore[attr-defined]
    compiler_module.build_parser_tables = _timed(  # type: ignore[attr-defined]
        compiler_module.build_parser_tables, spent, "parser"
    )
    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    words = bitmask.numpy()[0]
    clock = time.perf_counter_ns
    schemas: list[dict[str, Any]] = []
    tokens: list[tuple[int, str, int]] = []  # (ns, kind, schema index)
    for task in tasks:
        spent.clear()
        gc.collect()
        t0 = time.perf_counter()
        try:
            grammar = constrain.Grammar.from_json_schema(task["schema"], whitespace="flexible")
            t1 = time.perf_counter()
            compiled = constrain.Compiler(vocab).compile(grammar)
            t2 = time.perf_counter()
            constrain.Matcher(compiled).fill_next_token_bitmask(bitmask, index=0)
            t3 = time.perf_counter()
        except Exception:  # compile errors are maskbench.py's to count
            continue
        stages = {
            "front_end": t1 - t0,
            "lexer": spent["lexer"],
            "parser": spent["parser"],
            "compile_rest": t2 - t1 - spent["lexer"] - spent["parser"],
            "first_mask": t3 - t2,
        }
        index = len(schemas)
        schemas.append(
            {
                "id": task["id"],
                "lazy": compiled.lazy is not None,
                "ms": {k: 1e3 * v for k, v in stages.items()},
            }
        )
        gc.disable()
        try:
            for _, token_ids in task["tests"]:
                matcher = constrain.Matcher(compiled)
                for token_id in token_ids:
                    builds = compiled.tables.num_builds
                    rows = 0 if compiled.lazy is None else compiled.lazy.rows_built
                    words.fill(0)
                    a = clock()
                    matcher.fill_next_token_bitmask(bitmask, index=0)
                    b = clock()
                    allowed = (int(words[token_id >> 5]) >> (token_id & 31)) & 1
                    c = clock()
                    ok = bool(allowed) and matcher.accept_token(token_id)
                    d = clock()
                    tokens.append((b - a + d - c, _kind(compiled, builds, rows), index))
                    if not ok:
                        break
        finally:
            gc.enable()
    return {"schemas": schemas, "tokens": tokens}


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """Stage percentiles and shares, token kinds' shares, and the tail."""
    schemas, tokens = run["schemas"], run["tokens"]
    ttfm = np.array([sum(s["ms"].values()) for s in schemas])
    total_ttfm = float(ttfm.sum())
    order = np.argsort(ttfm)
    stages: dict[str, Any] = {}
    for stage in STAGES:
        v = np.array([s["ms"][stage] for s in schemas])
        stages[stage] = {
            "share": float(v.sum() / total_ttfm),
            "mean_ms": float(v.mean()),
            # the stage's part of the schemas around the median and in the slowest 1%
            "median_band_ms": float(v[order[int(0.45 * len(v)) : int(0.55 * len(v)) + 1]].mean()),
            "slowest_1pct_ms": float(v[order[-max(1, len(v) // 100) :]].mean()),
        }
    ns = np.array([t[0] for t in tokens], dtype=np.float64)
    kinds = np.array([t[1] for t in tokens])
    total = float(ns.sum())
    p99 = float(np.percentile(ns, 99))
    top = ns >= p99
    by_kind = {}
    for kind in KINDS:
        sel = kinds == kind
        if sel.any():
            by_kind[kind] = {
                "tokens": int(sel.sum()),
                "token_share": float(sel.mean()),
                "time_share": float(ns[sel].sum() / total),
                "mean_us": float(ns[sel].mean() / 1e3),
                "share_of_slowest_1pct": float((sel & top).sum() / top.sum()),
            }
    per_schema = Counter()
    for t, _, index in tokens:
        per_schema[index] += t
    heavy = [
        {"id": schemas[i]["id"], "lazy": schemas[i]["lazy"], "time_share": v / total}
        for i, v in per_schema.most_common(10)
    ]
    return {
        "n_schemas": len(schemas),
        "ttfm_ms": {
            "p50": float(np.percentile(ttfm, 50)),
            "p90": float(np.percentile(ttfm, 90)),
            "p99": float(np.percentile(ttfm, 99)),
        },
        "stages": stages,
        "n_tokens": len(tokens),
        "tbm_us": {
            "mean": total / len(tokens) / 1e3,
            "p50": float(np.median(ns) / 1e3),
            "p99": p99 / 1e3,
        },
        "kinds": by_kind,
        "heaviest_schemas": heavy,
    }


def print_report(summary: dict[str, Any]) -> None:
    t = summary["ttfm_ms"]
    print(
        f"time to first mask over {summary['n_schemas']} schemas: p50 {t['p50']:.2f} ms, "
        f"p90 {t['p90']:.1f} ms, p99 {t['p99']:.0f} ms"
    )
    print(f"{'stage':<14} {'share':>7} {'mean ms':>9} {'median band':>12} {'slowest 1%':>11}")
    for stage, s in summary["stages"].items():
        print(
            f"{stage:<14} {s['share']:>7.1%} {s['mean_ms']:>9.2f} {s['median_band_ms']:>12.2f} "
            f"{s['slowest_1pct_ms']:>11.1f}"
        )
    b = summary["tbm_us"]
    print(
        f"\nper token over {summary['n_tokens']:,} tokens: mean {b['mean']:.1f} us, "
        f"p50 {b['p50']:.1f} us, p99 {b['p99']:.0f} us"
    )
    print(f"{'kind':<12} {'tokens':>8} {'time':>7} {'mean us':>9} {'of slowest 1%':>14}")
    for kind, k in summary["kinds"].items():
        print(
            f"{kind:<12} {k['token_share']:>8.1%} {k['time_share']:>7.1%} {k['mean_us']:>9.1f} "
            f"{k['share_of_slowest_1pct']:>14.1%}"
        )
    print("\nschemas with the most token time:")
    for h in summary["heaviest_schemas"]:
        print(f"  {h['time_share']:6.1%}  {h['id']}{'  (lazy lexer)' if h['lazy'] else ''}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sample", type=int, default=2000, help="stratified sample size (maskbench.py's)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stride", type=int, default=1, help="every STRIDE-th schema of the sample")
    p.add_argument("--out", type=Path, default=result_path("cost-breakdown"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import maskbench

    rows = maskbench.stratified_sample(maskbench.load_rows(), args.sample, args.seed)
    tasks = maskbench.tokenize_rows(rows[:: args.stride])
    log(f"{len(tasks)} schemas")
    summary = summarize(measure(tasks))
    print_report(summary)
    write_result(
        args.out,
        {"benchmark": "cost_breakdown", "machine": machine(), "args": args_record(args), **summary},
    )
    log(f"wrote {shown(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
