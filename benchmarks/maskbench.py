"""MaskBench: JSON-schema correctness and mask speed of constrain, llguidance and XGrammar.

The method of MaskBench (guidance-ai/jsonschemabench) over ``maskbench-dev.jsonl.gz`` (8,532
real-world schemas, each with valid and invalid instances), every engine in its own worker
process (restarted when it dies or passes a limit), the engines taking turns schema by schema so
that a drift of the machine's speed during the run falls on all of them alike:

1. Compile the schema with flexible whitespace (constrain ``whitespace="flexible"``; llguidance
   ``grammar_from_json_schema(..., defaults={"whitespace_flexible": True})``; XGrammar
   ``compile_json_schema(..., any_whitespace=True, strict_mode=False)``) and fill the first
   mask: that is the TTFM (time to first mask).
2. For each instance, a fresh matcher is fed the Llama 3.2 tokens of
   ``json.dumps(data, ensure_ascii=False)``: per token the mask is filled (timed), the token's bit
   checked (untimed) and the token accepted (timed); fill + accept is one TBM sample (time
   between masks). A valid instance must be allowed and accepted to its end and the matcher then
   accepting; an invalid one must be refused somewhere (mask bit clear or accept false) or not
   be accepting at its end.
3. Per schema: ``passing``, ``compile_error``, ``validation_error`` (a valid instance refused),
   ``invalidation_error`` (an invalid instance accepted), or ``timeout`` (compile + first mask
   past ``--limit-compile-s``, instances past ``--limit-instances-s``, the memory cap of
   ``--limit-memory-gb`` hit, or the worker died; the reason is kept).

Usage::

    .venv/bin/python benchmarks/maskbench.py                          # results/maskbench-2000.json
    .venv/bin/python benchmarks/maskbench.py --engines constrain --all  # results/maskbench-all.json
    .venv/bin/python benchmarks/maskbench.py --engines xgrammar --sample 50 --out /tmp/x.json
    .venv/bin/python benchmarks/maskbench.py --resume                   # continue the default run
    .venv/bin/python benchmarks/maskbench.py --engines constrain,constrain-canonical --sample 300 \
        --out benchmarks/results/maskbench-canonical.json   # canonical tokenization on and off

Results go to ``--out`` (default ``benchmarks/results/maskbench-<N>.json`` for ``--sample N``,
``maskbench-all.json`` for ``--all``, overwritten): per engine the status counts, TBM and TTFM
percentiles, the counts and TBM per collection, and the schemas that do not pass with their
reason; ``--per-schema`` adds every schema's row. Every finished schema is appended to
``<out>.partial.jsonl`` first, which ``--resume`` reads back.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    INSTALL_HINT,
    args_record,
    data_file,
    log,
    machine,
    missing_peers,
    result_path,
    shown,
    write_result,
)

MASKBENCH_FILE = "maskbench-dev.jsonl.gz"
ENGINE_NAMES = ("constrain", "llguidance", "xgrammar")  # the default run
# also constrain-canonical: canonical tokenization on (the instances' tokens are the tokenizer's
# own encoding, so it must accept every valid one that constrain accepts)
ENGINE_CHOICES = ("constrain", "constrain-canonical", "llguidance", "xgrammar")
REASON_CHARS = 240  # a non-passing schema's reason is cut here in the result file
STATUSES = ("passing", "compile_error", "validation_error", "invalidation_error", "timeout")
TBM_PCTS = (25, 50, 75, 90, 99, 99.9)
GRACE_S = 5.0  # parent-side slack past a limit before the worker is killed
# One schema through the paths the instances take (strings free and bounded, escapes, numbers,
# enums, arrays of objects), so that no engine loads or compiles code while it is measured.
WARMUP_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "s": {"type": "string"},
        "t": {"type": "string", "maxLength": 40},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "e": {"enum": ["x", "y"]},
        "l": {
            "type": "array",
            "items": {"type": "object", "properties": {"k": {"type": "string"}}},
        },
        # a long counted string: its count states are classified (MaskTables._classify), so
        # those kernels load here rather than inside a measured token
        "u": {"type": "string", "maxLength": 400},
    },
    "required": ["a"],
}
WARMUP_TEXT = (
    '{"a": 12, "s": "hello \\"world\\" \u00e9t\u00e9", "t": "short text", "n": -1.5e3, '
    '"b": true, "e": "x", "l": [{"k": "v"}, {}], "u": "'
    + "A long text value, inside a string whose length is counted by the grammar. " * 3
    + '"}'
)


# --------------------------------------------------------------------------------------------
# Data: rows, stratified sample, tokens
# --------------------------------------------------------------------------------------------


def load_rows() -> list[dict[str, Any]]:
    """Every MaskBench row: ``{"id", "schema", "tests": [{"valid", "data", ...}], "meta"}``."""
    with gzip.open(data_file(MASKBENCH_FILE), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def source_of(schema_id: str) -> str:
    """The collection a row comes from: ``Github_hard---o1234.json`` -> ``Github_hard``."""
    if "---" in schema_id:
        return schema_id.split("---", 1)[0]
    match = re.match(r"[A-Za-z]+", schema_id)  # BFCL_simple_3.json, JME_12.json
    return match.group(0) if match else schema_id


def stratified_sample(rows: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """A fixed sample of ``n`` rows, each source represented in proportion (largest remainder).

    The rows keep their file order; the same ``(n, seed)`` always gives the same sample.
    """
    if n >= len(rows):
        return list(rows)
    by_source: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_source.setdefault(source_of(row["id"]), []).append(i)
    quotas = {s: n * len(ix) / len(rows) for s, ix in by_source.items()}
    counts = {s: int(q) for s, q in quotas.items()}
    by_remainder = sorted(quotas, key=lambda s: (-(quotas[s] - counts[s]), s))
    for s in by_remainder[: n - sum(counts.values())]:
        counts[s] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for s in sorted(by_source):
        chosen += rng.sample(by_source[s], counts[s])
    return [rows[i] for i in sorted(chosen)]


def instance_text(data: Any) -> str:
    """``json.dumps(data, ensure_ascii=False)``; ASCII escapes if it holds a lone surrogate."""
    text = json.dumps(data, indent=None, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, indent=None)
    return text


def tokenize_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tasks for the workers: ``{"id", "schema", "tests": [(valid, token_ids), ...]}``."""
    import tokenizers
    from workloads import tokenizer_path

    tok = tokenizers.Tokenizer.from_file(str(tokenizer_path()))
    tasks = []
    for row in rows:
        texts = [instance_text(t["data"]) for t in row["tests"]]
        encoded = tok.encode_batch(texts, add_special_tokens=False) if texts else []
        tests = [(bool(t["valid"]), e.ids) for t, e in zip(row["tests"], encoded, strict=True)]
        tasks.append({"id": row["id"], "schema": row["schema"], "tests": tests})
    return tasks


# --------------------------------------------------------------------------------------------
# Worker process
# --------------------------------------------------------------------------------------------


def _make_engine(name: str) -> Any:
    """The ``engines.py`` adapter of ``name``, with this benchmark's JSON-schema options."""
    import engines

    class Constrain(engines.ConstrainEngine):
        def grammar(self, spec: engines.GrammarSpec) -> Any:
            if spec.kind != "json_schema":
                return super().grammar(spec)
            return self._cst.Grammar.from_json_schema(spec.source, whitespace="flexible")

    class LLGuidance(engines.LLGuidanceEngine):
        def grammar_string(self, spec: engines.GrammarSpec) -> str:
            if spec.kind != "json_schema":
                return super().grammar_string(spec)
            text = json.dumps(spec.source)
            options = {"whitespace_flexible": True}
            return str(self._llg.LLMatcher.grammar_from_json_schema(text, defaults=options))

    class XGrammar(engines.XGrammarEngine):
        def compile(self, compiler: Any, spec: engines.GrammarSpec) -> Any:
            if spec.kind != "json_schema":
                return super().compile(compiler, spec)
            text = json.dumps(spec.source)
            return compiler.compile_json_schema(text, any_whitespace=True, strict_mode=False)

    class ConstrainCanonical(Constrain, engines.ConstrainCanonicalEngine):
        """constrain with canonical tokenization: the grammar of ``Constrain``, the matcher
        and ``prepare`` (the relation, once per worker) of ``ConstrainCanonicalEngine``."""

    classes = {
        "constrain": Constrain,
        "constrain-canonical": ConstrainCanonical,
        "llguidance": LLGuidance,
        "xgrammar": XGrammar,
    }
    return classes[name]()


def _vm_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _allowed(words: Any, token_id: int) -> bool:
    return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)


def run_instance(
    engine: Any,
    compiled: Any,
    bitmask: Any,
    token_ids: Sequence[int],
    samples: list[int],
    deadline_ns: int,
) -> tuple[bool, int] | None:
    """Feed one instance to a fresh matcher; ``(accepted, tokens fed)``, None past the deadline.

    ``accepted``: every token allowed by the mask and accepted, and the matcher then accepting.
    Each fed token appends one fill + accept sample (ns) to ``samples``.
    """
    clock = time.perf_counter_ns
    words = bitmask.numpy()[0]
    handle = engine.new_matcher(compiled, bitmask)
    fill, accept = handle.fill, handle.accept
    fed = 0
    for token_id in token_ids:
        words.fill(0)
        a = clock()
        fill()
        b = clock()
        allowed = _allowed(words, token_id)
        c = clock()
        ok = allowed and accept(token_id)
        d = clock()
        samples.append(b - a + d - c)
        fed += 1
        if not ok:
            return False, fed
        if d > deadline_ns:
            return None
    return bool(handle.is_accepting()), fed


def run_schema(
    engine: Any, task: dict[str, Any], bitmask: Any, conn: Any, limits: dict[str, float]
) -> dict[str, Any]:
    """Compile one schema (sending ``("compiled", ...)`` as soon as it is), then its instances."""
    from engines import GrammarSpec

    clock = time.perf_counter_ns
    spec = GrammarSpec("json_schema", task["id"], task["schema"])
    compiler = engine.new_compiler()
    gc.collect()
    t0 = clock()
    try:
        compiled = engine.compile(compiler, spec)
        t1 = clock()
        engine.new_matcher(compiled, bitmask).fill()
        t2 = clock()
    except MemoryError:
        conn.send(("compiled", None))
        return {"status": "timeout", "reason": "memory limit (compile)"}
    except Exception as exc:
        conn.send(("compiled", None))
        return {"status": "compile_error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    conn.send(("compiled", (t2 - t0) / 1e6))
    out: dict[str, Any] = {"compile_ms": (t1 - t0) / 1e6, "ttfm_ms": (t2 - t0) / 1e6}
    if (t2 - t0) / 1e9 > limits["compile_s"]:
        return {**out, "status": "timeout", "reason": "compile + first mask past the limit"}
    samples: list[int] = []
    deadline = clock() + int(limits["instances_s"] * 1e9)
    failures: list[str] = []
    n_tokens = 0
    gc.disable()
    try:
        for index, (valid, token_ids) in enumerate(task["tests"]):
            try:
                res = run_instance(engine, compiled, bitmask, token_ids, samples, deadline)
            except MemoryError:
                return {**out, "status": "timeout", "reason": "memory limit (instances)"}
            except Exception as exc:  # an engine error on an instance counts as a refusal
                res, error = (False, 0), f" ({type(exc).__name__}: {exc})"[:300]
            else:
                error = ""
            if res is None:
                return {**out, "status": "timeout", "reason": "instances past the limit"}
            accepted, fed = res
            n_tokens += fed
            if accepted != valid:
                kind = "valid rejected" if valid else "invalid accepted"
                at = f" (token {token_ids[fed - 1]})" if 0 < fed <= len(token_ids) else ""
                failures.append(
                    f"{kind}: instance {index}, {fed}/{len(token_ids)} tokens{at}{error}"
                )
    finally:
        gc.enable()
    status = "passing"
    if any(f.startswith("valid") for f in failures):
        status = "validation_error"
    elif failures:
        status = "invalidation_error"
    out.update(status=status, n_tokens=n_tokens, tbm_ns=samples)
    if failures:
        out["reason"] = "; ".join(failures[:5])
    return out


def worker_main(name: str, conn: Any, limits: dict[str, float]) -> None:
    """Worker loop: prepare the engine, warm up, cap memory, then run the tasks it is sent."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        import torch

        torch.set_num_threads(1)
        from workloads import load_tokenizer

        t0 = time.perf_counter()
        engine = _make_engine(name)
        tokenizer = load_tokenizer()
        engine.prepare(tokenizer)
        bitmask = engine.allocate_bitmask()
        warm = {
            "id": "warmup",
            "schema": WARMUP_SCHEMA,
            "tests": [(True, tokenizer.encode(WARMUP_TEXT, add_special_tokens=False))],
        }
        warm_out = run_schema(
            engine, warm, bitmask, _NullConn(), {"compile_s": 1e9, "instances_s": 1e9}
        )
        cap = int(limits["memory_gb"] * 2**30)
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + cap, hard))
        conn.send(
            (
                "ready",
                {
                    "version": engine.version,
                    "prepare_s": time.perf_counter() - t0,
                    "warmup": warm_out["status"],
                    "warmup_reason": warm_out.get("reason"),
                },
            )
        )
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(("done", run_schema(engine, task, bitmask, conn, limits)))


class _NullConn:
    def send(self, msg: Any) -> None:
        pass


# --------------------------------------------------------------------------------------------
# Parent: worker supervision, resume, progress
# --------------------------------------------------------------------------------------------


class Worker:
    """A worker process for one engine, restarted after a kill or a death."""

    def __init__(self, name: str, limits: dict[str, float]) -> None:
        self.name = name
        self.limits = limits
        self.ctx = multiprocessing.get_context("spawn")
        self.proc: Any = None
        self.conn: Any = None
        self.info: dict[str, Any] = {}
        self.restarts = 0

    def start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(
            target=worker_main,
            args=(self.name, child, self.limits),
            name=f"maskbench-{self.name}",
            daemon=True,
        )
        self.proc.start()
        child.close()
        self.conn = parent
        msg = self._recv(600.0)
        if msg is None or msg[0] != "ready":
            detail = msg[1] if msg else f"no answer (exit code {self.proc.exitcode})"
            self.stop()
            raise RuntimeError(f"{self.name} worker failed to start: {detail}")
        self.info = msg[1]

    def _recv(self, timeout_s: float) -> Any:
        try:
            if self.conn.poll(timeout_s):
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.join(10)
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self.stop()

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """Run one schema; a worker past a limit is killed and restarted (status ``timeout``)."""
        if self.proc is None:
            self.start()
        self.conn.send(task)
        msg = self._recv(self.limits["compile_s"] + GRACE_S)
        reason = "compile + first mask past the limit (killed)"
        if msg is not None and msg[0] == "compiled":
            msg = self._recv(self.limits["instances_s"] + GRACE_S)
            reason = "instances past the limit (killed)"
        if msg is not None and msg[0] == "done":
            result: dict[str, Any] = msg[1]
            return result
        alive = self.proc.is_alive()
        if not alive:
            reason = f"worker died (exit code {self.proc.exitcode}; memory cap or crash)"
        self.stop()
        self.restarts += 1
        return {"status": "timeout", "reason": reason}


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def load_partial(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Finished ``(engine, schema id) -> result`` from a partial file (torn lines ignored)."""
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[(rec["engine"], rec["id"])] = rec
    return done


def run_engines(
    names: Sequence[str],
    tasks: list[dict[str, Any]],
    limits: dict[str, float],
    done: dict[tuple[str, str], dict[str, Any]],
    partial: Any,
) -> dict[str, dict[str, Any]]:
    """Run every task on every engine; ``{name: {"info", "restarts", "results": [...]}}``.

    The engines take turns schema by schema (each in its own worker, all started up front; the
    order rotates from one schema to the next), so a change of the machine's speed during the
    run falls on every engine alike instead of on whichever ran during the slow minutes.
    """
    workers = {name: Worker(name, limits) for name in names}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    counts = {name: Counter[str]() for name in names}
    todo: list[tuple[int, dict[str, Any]]] = []
    for i, task in enumerate(tasks):
        for name in names:
            rec = done.get((name, task["id"]))
            if rec is not None:
                results[name].append(rec)
                counts[name][rec["status"]] += 1
        if any((name, task["id"]) not in done for name in names):
            todo.append((i, task))
    for name in names:
        log(f"[{name}] {len(results[name])} schemas from the partial file")
    log(f"{len(todo)} schemas to run, engines taking turns")
    t_start = last = time.perf_counter()
    try:
        for name, worker in workers.items():
            if any((name, task["id"]) not in done for _, task in todo):
                worker.start()
                log(f"[{name}] worker ready: {worker.info}")
        for j, (i, task) in enumerate(todo, 1):
            order = [names[(i + k) % len(names)] for k in range(len(names))]
            for name in order:
                if (name, task["id"]) in done:
                    continue
                res = workers[name].run(task)
                rec = {
                    "engine": name,
                    "id": task["id"],
                    "source": source_of(task["id"]),
                    "n_tests": len(task["tests"]),
                    **res,
                }
                partial.write(json.dumps(rec) + "\n")
                partial.flush()
                results[name].append(rec)
                counts[name][rec["status"]] += 1
            now = time.perf_counter()
            if now - last > 10 or j == len(todo):
                last = now
                eta = (now - t_start) / j * (len(todo) - j)
                for name in names:
                    c = counts[name]
                    summary = " ".join(f"{k}={c[k]}" for k in STATUSES if c[k])
                    log(f"[{name}] {len(results[name])}/{len(tasks)} {summary}")
                log(f"({now - t_start:.0f} s, eta {eta:.0f} s)")
    finally:
        for worker in workers.values():
            worker.close()
    return {
        name: {"info": w.info, "restarts": w.restarts, "results": results[name]}
        for name, w in workers.items()
    }


# --------------------------------------------------------------------------------------------
# Statistics and report
# --------------------------------------------------------------------------------------------


def _pcts(values: np.ndarray, scale: float) -> dict[str, float] | None:
    if values.size == 0:
        return None
    v = values.astype(np.float64) / scale
    out = {"mean": float(v.mean())}
    for p in TBM_PCTS:
        out[f"p{p:g}"] = float(np.percentile(v, p))
    out["max"] = float(v.max())
    return out


def summarize(name: str, run: dict[str, Any]) -> dict[str, Any]:
    """Counts per status, TBM (µs) and TTFM (ms) percentiles, and one row per schema.

    The rows lose the raw ``tbm_ns`` samples (their mean and max are kept); :func:`slim`
    replaces them with per-collection aggregates in the result file.
    """
    results = run["results"]
    tbm = np.fromiter((x for r in results for x in r.get("tbm_ns", ())), dtype=np.int64)
    ttfm = np.array([r["ttfm_ms"] for r in results if "ttfm_ms" in r], dtype=np.float64)
    per_schema = []
    for r in results:
        row = {k: v for k, v in r.items() if k not in ("tbm_ns", "engine")}
        samples = r.get("tbm_ns")
        if samples:
            row["tbm_mean_us"] = sum(samples) / len(samples) / 1e3
            row["tbm_max_us"] = max(samples) / 1e3
        per_schema.append(row)
    counts = Counter(r["status"] for r in results)
    return {
        "engine": name,
        "info": run["info"],
        "restarts": run["restarts"],
        "n_schemas": len(results),
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "n_tokens": int(tbm.size),
        "n_compiled": int(ttfm.size),
        "tbm_us": _pcts(tbm, 1e3),
        "ttfm_ms": _pcts(ttfm, 1.0),
        "schemas": per_schema,
    }


def slim(summary: dict[str, Any], per_schema: bool = False) -> dict[str, Any]:
    """An engine's summary as the result file keeps it.

    The per-schema rows (about 220 bytes each: 1.9 MB for the whole file) become ``by_source``
    (status counts, tokens and the token-weighted TBM mean per collection) and ``not_passing``
    (id, status and reason of each schema that does not pass); ``per_schema`` keeps the rows too.
    """
    rows = summary["schemas"]
    out = {k: v for k, v in summary.items() if k != "schemas"}
    if "n_compiled" not in out:
        out["n_compiled"] = sum(1 for r in rows if "ttfm_ms" in r)
    by_source: dict[str, dict[str, Any]] = {}
    for r in rows:
        src = by_source.setdefault(
            r["source"], {"n": 0, **dict.fromkeys(STATUSES, 0), "n_tokens": 0, "tbm_us_sum": 0.0}
        )
        src["n"] += 1
        src[r["status"]] += 1
        if r.get("n_tokens") and r.get("tbm_mean_us") is not None:
            src["n_tokens"] += r["n_tokens"]
            src["tbm_us_sum"] += r["tbm_mean_us"] * r["n_tokens"]
    for src in by_source.values():
        total = src.pop("tbm_us_sum")
        src["tbm_mean_us"] = round(total / src["n_tokens"], 2) if src["n_tokens"] else None
    out["by_source"] = dict(sorted(by_source.items()))
    out["not_passing"] = [
        {"id": r["id"], "status": r["status"], "reason": str(r.get("reason", ""))[:REASON_CHARS]}
        for r in rows
        if r["status"] != "passing"
    ]
    if per_schema:
        out["schemas"] = rows
    return out


def _cell(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def print_table(summaries: list[dict[str, Any]]) -> None:
    """Status counts per engine, then TBM (µs) and TTFM (ms) percentiles."""
    print(f"\n{'engine':<20}" + "".join(f"{s:>19}" for s in STATUSES) + f"{'schemas':>9}")
    for s in summaries:
        n = max(s["n_schemas"], 1)
        cells = "".join(
            f"{s['counts'][k]:>10} ({100 * s['counts'][k] / n:5.1f}%)" for k in STATUSES
        )
        print(f"{s['engine']:<20}{cells}{s['n_schemas']:>9}")
    keys = ["mean", *(f"p{p:g}" for p in TBM_PCTS), "max"]
    for field, unit in (("tbm_us", "TBM (µs)"), ("ttfm_ms", "TTFM (ms)")):
        print(f"\n{unit:<20}" + "".join(f"{k:>9}" for k in keys) + f"{'n':>10}")
        for s in summaries:
            stats = s[field] or {}
            n = s["n_tokens"] if field == "tbm_us" else s["n_compiled"]
            print(
                f"{s['engine']:<20}"
                + "".join(f"{_cell(stats.get(k)):>9}" for k in keys)
                + f"{n:>10}"
            )


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="MaskBench: correctness and mask speed per engine.")
    p.add_argument(
        "--engines",
        default=",".join(ENGINE_NAMES),
        help=f"comma list of {','.join(ENGINE_CHOICES)} (default: {','.join(ENGINE_NAMES)})",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=2000,
        help="stratified, seeded sample of N schemas (default 2000)",
    )
    p.add_argument("--all", action="store_true", help="every schema (overrides --sample)")
    p.add_argument("--seed", type=int, default=1, help="sample seed (default 1)")
    p.add_argument("--limit-compile-s", type=float, default=30.0, help="compile + first mask")
    p.add_argument("--limit-instances-s", type=float, default=120.0, help="all instances")
    p.add_argument(
        "--limit-memory-gb",
        type=float,
        default=8.0,
        help="address-space growth cap of a worker after warm-up (GiB)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results JSON (default benchmarks/results/maskbench-<N|all>.json, overwritten)",
    )
    p.add_argument("--resume", action="store_true", help="continue from <out>.partial.jsonl")
    p.add_argument(
        "--per-schema", action="store_true", help="keep every schema's row in the results file"
    )
    args = p.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    bad = [e for e in args.engines if e not in ENGINE_CHOICES]
    if bad or not args.engines:
        p.error(f"unknown engines {bad}; choose from {','.join(ENGINE_CHOICES)}")
    if args.out is None:
        args.out = result_path(f"maskbench-{'all' if args.all else args.sample}")
    return args


def check_engines(names: Sequence[str]) -> str | None:
    """An error message when a requested engine is not installed (never a silent skip)."""
    missing = missing_peers(names)
    if missing:
        return f"error: {', '.join(missing)} not installed; {INSTALL_HINT}"
    if "constrain" in names:
        import constrain

        if not hasattr(constrain.Grammar, "from_json_schema"):
            return "error: constrain.Grammar.from_json_schema is not available in this checkout"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # engines, workloads (and workers)
    error = check_engines(args.engines)
    if error:
        print(error, file=sys.stderr)
        return 2
    rows = load_rows()
    rows = rows if args.all else stratified_sample(rows, args.sample, args.seed)
    log(f"{len(rows)} schemas, {sum(len(r['tests']) for r in rows)} instances; tokenizing")
    tasks = tokenize_rows(rows)
    limits = {
        "compile_s": args.limit_compile_s,
        "instances_s": args.limit_instances_s,
        "memory_gb": args.limit_memory_gb,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ppath = partial_path(args.out)
    done = load_partial(ppath) if args.resume else {}
    if not args.resume and ppath.exists():
        ppath.unlink()
    with open(ppath, "a", encoding="utf-8") as partial:
        try:
            runs = run_engines(args.engines, tasks, limits, done, partial)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    summaries = [summarize(name, runs[name]) for name in args.engines]
    report = {
        "benchmark": "maskbench",
        "machine": machine(),
        "data": MASKBENCH_FILE,
        "args": args_record(args),
        "n_schemas": len(tasks),
        "engines": [slim(s, args.per_schema) for s in summaries],
    }
    write_result(args.out, report)
    print_table(summaries)
    print(f"\nwrote {shown(args.out)} (partial file {ppath.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
