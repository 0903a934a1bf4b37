"""Sampling-method benchmark: extraction accuracy of the default model under each method.

The task: 54 short texts written for this project (``benchmarks/data/extraction.jsonl``; easy,
medium and hard), each describing one person, to be extracted into JSON following
``benchmarks/data/extraction.schema.json`` (nested ``contact`` object, ``role`` enum, integer
``age``, decimal ``height_m``, nullable ``email``, ``skills`` array). The model is the embedded
default (SmolLM2-135M-Instruct, ``constrain.load_model()``); the prompt lists the fields.

Methods (``--methods``, comma separated):

- ``masked``         ``constrain.generate(..., schema=...)``: masking, greedy (the default);
- ``dccd``           :class:`constrain.decoding.dccd.DCCD`: an unconstrained greedy draft,
                     then a greedy constrained decode of a prompt that contains the draft;
- ``smc``            :class:`constrain.decoding.smc.SMC` with ``--particles`` (4) particles and
                     its default proposal (AWRS); the output is the particle it draws;
- ``awrs``           ``generate(..., sampler=AWRS())``: one sample at temperature 1 by
                     adaptive weighted rejection (no full mask);
- ``masked-sample``  ``generate(..., temperature=1)``: one sample at temperature 1 from the full
                     mask, the same distribution as ``awrs``: the reference for AWRS's cost.

Per method: strict accuracy (the parsed JSON equals the gold record) with a 95% Wilson
interval, field accuracy (of the 6 top-level fields, ``contact`` compared whole; and of the 7
leaves), validity (the output parsed and validated), tokens per example (DCCD: draft +
output; SMC: all particles), seconds per example, and ms per output token (seconds per
example / tokens of the returned output: it includes DCCD's draft and all of SMC's particles,
so it is the cost of one delivered token). For ``awrs``: constraint checks per
token (mean, p50, p99, max) against the vocabulary size (49152 for the default model), and
its time per token against ``masked-sample``'s.

Sampled methods use the seed ``--seed`` + the example index. Results go to
``benchmarks/results/sampling.json`` (``sampling-<whitespace>.json`` with a ``--whitespace``
other than ``compact``), overwritten.

    python benchmarks/bench_sampling.py                   # all methods, all 54 examples
    python benchmarks/bench_sampling.py --quick           # 3 examples, smoke run
    python benchmarks/bench_sampling.py --limit 20 --methods masked,dccd [--max-tokens 160]
        [--particles 4] [--draft-tokens 128] [--seed 0] [--whitespace compact|flexible|indent]
        [--threads N] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import ROOT, args_record, machine, result_path, shown, write_result

DATA = ROOT / "benchmarks" / "data" / "extraction.jsonl"
SCHEMA = ROOT / "benchmarks" / "data" / "extraction.schema.json"
ALL_METHODS = ("masked", "dccd", "smc", "awrs", "masked-sample")
ROLES = "engineer, teacher, doctor, nurse, student, chef, driver, artist, farmer, manager"
INSTRUCTION = (
    "Extract the person described in the text as JSON with these fields: name (string), "
    "age (integer, in years), role (one of: {roles}), height_m (number, in metres), "
    "contact (object with city (string) and email (string, or null if there is none)), "
    "skills (list of at most 3 short strings; empty if none).\n\nText: {text}"
)
LEAVES = ("name", "age", "role", "height_m", "contact.city", "contact.email", "skills")
FIELDS = ("name", "age", "role", "height_m", "contact", "skills")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Return the 95% Wilson score interval of a proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


def _leaf(record: Any, path: str) -> Any:
    cur = record
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return "<missing>"
        cur = cur[part]
    return cur


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and abs(float(a) - float(b)) < 1e-9
        )
    return bool(a == b)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality, with 1.8 == 1.80 and ints never equal to booleans."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


def score(value: Any, gold: dict[str, Any]) -> dict[str, Any]:
    """Return strict, per-field and per-leaf correctness of one parsed output."""
    if value is None:
        return {"strict": False, "fields": 0, "leaves": 0, "wrong": list(LEAVES)}
    wrong = [leaf for leaf in LEAVES if not _equal(_leaf(value, leaf), _leaf(gold, leaf))]
    fields = sum(_equal(_leaf(value, f), _leaf(gold, f)) for f in FIELDS)
    return {
        "strict": _equal(value, gold),
        "fields": fields,
        "leaves": len(LEAVES) - len(wrong),
        "wrong": wrong,
    }


# -- methods ---------------------------------------------------------------------------------


class Bench:
    """The model, the compiled schema and one runner per method."""

    def __init__(self, args: argparse.Namespace) -> None:
        import constrain
        from constrain.output import output_type

        self.args = args
        t0 = time.perf_counter()
        self.model = constrain.load_model()
        self.load_seconds = time.perf_counter() - t0
        self.schema = json.loads(SCHEMA.read_text())
        self.json_options = {"whitespace": args.whitespace}
        self.output = output_type(schema=self.schema, json_options=self.json_options)
        t0 = time.perf_counter()
        self.compiled = self.model.compile(self.output.grammar)
        self.compile_seconds = time.perf_counter() - t0
        self.awrs_stats: list[int] = []
        self.notes: dict[str, str] = {}

    def prompt(self, text: str) -> str:
        return INSTRUCTION.format(roles=ROLES, text=text)

    def _gen(self, index: int) -> torch.Generator:
        g = torch.Generator(device=self.model.device)
        g.manual_seed(self.args.seed + index)
        return g

    def _parse(self, text: str) -> Any:
        try:
            return self.output.parse(text)
        except Exception:  # an incomplete or invalid output scores as wrong
            return None

    def runner(self, method: str) -> Callable[[int, str], dict[str, Any]] | None:
        """Return the function that runs ``method`` on one example, or None if unavailable."""
        if method == "masked":
            return self._masked
        if method == "masked-sample":
            return self._masked_sample
        if method == "dccd":
            return self._dccd
        if method == "awrs":
            try:
                from constrain.sampling.awrs import AWRS  # noqa: F401
            except ImportError as err:
                self.notes[method] = f"skipped: constrain.sampling.awrs unavailable ({err})"
                return None
            return self._awrs
        if method == "smc":
            try:
                from constrain.decoding.smc import SMC  # noqa: F401
            except ImportError as err:
                self.notes[method] = f"skipped: constrain.decoding.smc unavailable ({err})"
                return None
            return self._smc
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(ALL_METHODS)}")

    def _generate(self, index: int, text: str, **kwargs: Any) -> dict[str, Any]:
        import constrain
        from constrain.errors import IncompleteOutputError

        t0 = time.perf_counter()
        try:
            res = constrain.generate(
                self.prompt(text),
                model=self.model,
                schema=self.schema,
                json_options=self.json_options,
                max_tokens=self.args.max_tokens,
                return_info=True,
                **kwargs,
            )
        except IncompleteOutputError as err:
            return {
                "value": None,
                "text": err.partial_text,
                "output_tokens": self.args.max_tokens,
                "tokens": self.args.max_tokens,
                "seconds": time.perf_counter() - t0,
                "finish_reason": "length",
            }
        return {
            "value": res.value,
            "text": res.text,
            "output_tokens": res.output_tokens,
            "tokens": res.output_tokens,
            "seconds": res.seconds,
            "finish_reason": res.finish_reason,
        }

    def _masked(self, index: int, text: str) -> dict[str, Any]:
        return self._generate(index, text)

    def _masked_sample(self, index: int, text: str) -> dict[str, Any]:
        return self._generate(index, text, temperature=1.0, seed=self.args.seed + index)

    def _awrs(self, index: int, text: str) -> dict[str, Any]:
        from constrain.sampling.awrs import AWRS

        sampler = AWRS()
        out = self._generate(index, text, sampler=sampler, seed=self.args.seed + index)
        stats = list(getattr(sampler, "stats", []))
        self.awrs_stats.extend(stats)
        out["checks_mean"] = float(np.mean(stats)) if stats else None
        out["fallbacks"] = int(getattr(sampler, "fallbacks", 0))
        return out

    def _dccd(self, index: int, text: str) -> dict[str, Any]:
        from constrain import Matcher
        from constrain.decoding.dccd import DCCD

        dccd = DCCD(max_draft_tokens=self.args.draft_tokens)
        t0 = time.perf_counter()
        res = dccd.run(
            self.model,
            self.prompt(text),
            Matcher(self.compiled),
            max_tokens=self.args.max_tokens,
            generator=self._gen(index),
        )
        seconds = time.perf_counter() - t0
        tokens = res.token_ids
        out_text = self.model.vocabulary.decode(tokens).decode("utf-8", errors="replace")
        return {
            "value": self._parse(out_text),
            "text": out_text,
            "draft": res.draft.text,
            "draft_tokens": res.draft.draft_tokens,
            "output_tokens": len(tokens),
            "tokens": len(tokens) + res.draft.draft_tokens,
            "seconds": seconds,
            "finish_reason": res.decode.finish_reasons[0],
            "draft_seconds": res.timings["draft"],
        }

    def _smc(self, index: int, text: str) -> dict[str, Any]:
        from constrain import Matcher
        from constrain.decoding.smc import SMC

        n = self.args.particles
        ids = self.model.encode_prompt(self.prompt(text))
        session: Any = self.model.start([ids] * n)
        if not hasattr(session, "reorder"):
            session = _Reorderable(session)
            self.notes["smc"] = "HFSession has no reorder(): the benchmark's adapter was used"
        smc = SMC(n_particles=n)
        t0 = time.perf_counter()
        res = smc.run(
            session,
            Matcher(self.compiled),
            eos_ids=self.model.eos_ids,
            max_tokens=self.args.max_tokens,
            pad_id=self.model.pad_id,
            generator=self._gen(index),
        )
        seconds = time.perf_counter() - t0
        chosen = res.chosen
        out_text = res.texts[chosen] if chosen is not None else ""
        tokens = sum(len(t) for t in res.token_ids)
        return {
            "value": self._parse(out_text) if chosen is not None else None,
            "text": out_text,
            "output_tokens": len(res.token_ids[chosen]) if chosen is not None else 0,
            "tokens": tokens,
            "seconds": seconds,
            "finish_reason": res.finish_reasons[chosen] if chosen is not None else "rejected",
            "resamples": res.resamples,
            "distinct_particles": len(set(res.texts)),
        }


class _Reorderable:
    """Give a transformers session ``reorder`` (row permutation of the key-value cache)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        out: torch.Tensor = self.session.forward(token_ids)
        return out

    def reorder(self, indices: torch.Tensor) -> None:
        s = self.session
        idx = indices.to(s.attention_mask.device)
        s.attention_mask = s.attention_mask[idx]
        if s.cache is not None:
            s.cache.reorder_cache(idx)


# -- driver ----------------------------------------------------------------------------------


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    strict = sum(r["score"]["strict"] for r in rows)
    valid = sum(r["value"] is not None for r in rows)
    out_tokens = sum(r["output_tokens"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    by_diff: dict[str, list[int]] = {}
    for r in rows:
        by_diff.setdefault(r["difficulty"], [0, 0])
        by_diff[r["difficulty"]][0] += int(r["score"]["strict"])
        by_diff[r["difficulty"]][1] += 1
    leaf_errors: dict[str, int] = {}
    for r in rows:
        for leaf in r["score"]["wrong"]:
            leaf_errors[leaf] = leaf_errors.get(leaf, 0) + 1
    return {
        "n": n,
        "strict_accuracy": strict / n if n else 0.0,
        "strict_ci95": wilson(strict, n),
        "field_accuracy": sum(r["score"]["fields"] for r in rows) / (len(FIELDS) * n) if n else 0,
        "leaf_accuracy": sum(r["score"]["leaves"] for r in rows) / (len(LEAVES) * n) if n else 0,
        "validity": valid / n if n else 0.0,
        "validity_ci95": wilson(valid, n),
        "strict_by_difficulty": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_diff.items())},
        "errors_by_leaf": leaf_errors,
        "tokens_per_example": sum(r["tokens"] for r in rows) / n if n else 0.0,
        "output_tokens_per_example": out_tokens / n if n else 0.0,
        "seconds_per_example": seconds / n if n else 0.0,
        "ms_per_output_token": 1000 * seconds / out_tokens if out_tokens else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default=",".join(ALL_METHODS))
    ap.add_argument("--limit", type=int, default=None, help="first N examples")
    ap.add_argument("--quick", action="store_true", help="3 examples (one per difficulty)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--draft-tokens", type=int, default=128)
    ap.add_argument("--particles", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--whitespace",
        choices=("compact", "spaced", "flexible", "indent"),
        default="compact",
        help="JSON whitespace of the grammar (json_options; the library default is compact)",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in ALL_METHODS:
            ap.error(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    examples = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    if args.quick:
        picked: dict[str, dict[str, Any]] = {}
        for ex in examples:
            picked.setdefault(ex["difficulty"], ex)
        examples = list(picked.values())
    if args.limit is not None:
        examples = examples[: args.limit]
    log(f"loading the default model; {len(examples)} examples, methods {', '.join(methods)}")
    bench = Bench(args)
    log(
        f"{bench.model!r} loaded in {bench.load_seconds:.1f} s; schema compiled in "
        f"{bench.compile_seconds:.2f} s"
    )
    per_method: dict[str, Any] = {}
    for method in methods:
        run = bench.runner(method)
        if run is None:
            log(f"{method}: {bench.notes[method]}")
            per_method[method] = {"skipped": bench.notes[method]}
            continue
        rows = []
        for i, ex in enumerate(examples):
            out = run(i, ex["text"])
            out["score"] = score(out["value"], ex["gold"])
            out["id"] = ex["id"]
            out["difficulty"] = ex["difficulty"]
            rows.append(out)
            mark = "ok " if out["score"]["strict"] else "bad"
            log(
                f"  {method:13s} {ex['id']:10s} {mark} {out['seconds']:6.1f} s "
                f"{out['tokens']:4d} tok  {out['text'][:90]!r}"
            )
        summary = summarise(rows)
        if method == "awrs" and bench.awrs_stats:
            checks = np.asarray(bench.awrs_stats)
            summary["checks_per_token"] = {
                "mean": float(checks.mean()),
                "p50": float(np.percentile(checks, 50)),
                "p99": float(np.percentile(checks, 99)),
                "max": int(checks.max()),
                "vocab_size": int(bench.model.vocabulary.size),
                "fallbacks": sum(r.get("fallbacks", 0) for r in rows),
            }
        if method in bench.notes:
            summary["note"] = bench.notes[method]
        per_method[method] = {"summary": summary, "examples": rows}
    if "awrs" in per_method and "masked-sample" in per_method:
        a = per_method["awrs"].get("summary", {}).get("ms_per_output_token")
        b = per_method["masked-sample"].get("summary", {}).get("ms_per_output_token")
        if a and b:
            per_method["awrs"]["summary"]["time_per_token_vs_masked_sample"] = a / b
    # report
    print(
        f"\n{'method':14s} {'strict':>7s} {'95% CI':>13s} {'fields':>7s} {'leaves':>7s} "
        f"{'valid':>6s} {'tok/ex':>7s} {'s/ex':>6s} {'ms/tok':>7s}"
    )
    for method, res in per_method.items():
        if "skipped" in res:
            print(f"{method:14s} {res['skipped']}")
            continue
        s = res["summary"]
        lo, hi = s["strict_ci95"]
        ms = s["ms_per_output_token"]
        print(
            f"{method:14s} {s['strict_accuracy']:7.2f} [{lo:4.2f}, {hi:4.2f}] "
            f"{s['field_accuracy']:7.2f} {s['leaf_accuracy']:7.2f} {s['validity']:6.2f} "
            f"{s['tokens_per_example']:7.1f} {s['seconds_per_example']:6.1f} "
            f"{ms if ms is None else round(ms, 1)!s:>7s}"
        )
    if "awrs" in per_method and "checks_per_token" in per_method["awrs"].get("summary", {}):
        c = per_method["awrs"]["summary"]["checks_per_token"]
        ratio = per_method["awrs"]["summary"].get("time_per_token_vs_masked_sample")
        print(
            f"AWRS constraint checks per token: mean {c['mean']:.2f}, p50 {c['p50']:.0f}, "
            f"p99 {c['p99']:.0f}, max {c['max']} (vocabulary {c['vocab_size']}); "
            f"fallbacks {c['fallbacks']}"
            + (f"; time per token {ratio:.2f}x masked-sample's" if ratio else "")
        )
    name = "sampling" if args.whitespace == "compact" else f"sampling-{args.whitespace}"
    out = args.out or result_path(name)
    meta = {
        **machine(),
        "model": bench.model.name,
        "device": str(bench.model.device),
        "torch_threads": torch.get_num_threads(),
        "examples": len(examples),
        "args": args_record(args),
        "model_load_seconds": bench.load_seconds,
        "schema_compile_seconds": bench.compile_seconds,
        "instruction": INSTRUCTION,
    }
    write_result(out, {"meta": meta, "methods": per_method})
    print(f"results: {shown(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
