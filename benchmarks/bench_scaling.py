"""Compile cost against the numbers in a schema: time to first mask as a bound N grows.

Each row is a family of grammars with one number N in it (a string's ``maxLength``, an array's
``maxItems``, a counted repetition in a pattern or a regex, the size of an ``enum``); N runs over
powers of 4 from 16 to 1,048,576. For every engine (constrain, llguidance, XGrammar, through the
``engines.py`` adapters, one thread, the Llama 3.2 tokenizer) and every N:

- **TTFM**: compile + a fresh matcher + the first ``fill_next_token_bitmask``, median of
  ``--repeats`` compiles, each of a *fresh* schema (a property name or the enum's strings change
  with the repeat, so no engine answers from a cache);
- **per token**: mean time of fill + accept over the first ``--tokens`` tokens of one valid
  instance of that grammar (the whole instance when shorter).

Each (engine, row) runs in its own worker process, N ascending; a compile that does not finish
within ``--limit-s`` is recorded as ``timeout`` and ends that row for the engine (the worker is
killed), as does a refusal (constrain's ``CompileLimitError``, a peer's error), recorded with its
message. The table prints TTFM per N with constrain's ratio to llguidance; the results file
(``results/scaling.json``, overwritten) keeps every figure.

    python benchmarks/bench_scaling.py                     # every row, N = 16 ... 1,048,576
    python benchmarks/bench_scaling.py --rows enum --max-n 65536 --engines constrain,llguidance
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import args_record, log, machine, missing_peers, result_path, write_result

ENGINE_NAMES = ("constrain", "llguidance", "xgrammar")
SIZES = tuple(4**k for k in range(2, 11))  # 16 ... 1,048,576

# -- rows: (description, grammar for N and a salt, one valid instance for N) ----------------------

_WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "


def _text(n: int) -> str:
    return (_WORDS * (n // len(_WORDS) + 1))[:n]


def _alnum(n: int) -> str:
    return ("a0b1c2d3e4f5g6h7i8j9" * (n // 20 + 1))[:n]


def _enum_strings(n: int, salt: int) -> list[str]:
    # distinct, varied, 6-12 characters; the salt changes every string (a fresh schema)
    out = []
    for i in range(n):
        h = (i * 2654435761 + salt * 40503) & 0xFFFFFFFF
        out.append(f"{_alnum(3 + h % 7)}-{i:x}-{salt}")
    return out


def _row_max_length(n: int, salt: int) -> tuple[str, Any, str]:
    key = f"s{salt}"
    schema = {"type": "object", "properties": {key: {"type": "string", "maxLength": n}},
              "required": [key], "additionalProperties": False}  # fmt: skip
    return "json_schema", schema, json.dumps({key: _text(min(n, 2000))})


def _row_min_length(n: int, salt: int) -> tuple[str, Any, str]:
    return (
        "json_schema",
        {"type": "string", "minLength": n, "title": f"t{salt}"},
        json.dumps(_text(n + 3)),
    )


def _row_max_items(n: int, salt: int) -> tuple[str, Any, str]:
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": n, "title": f"t{salt}"}
    return "json_schema", schema, json.dumps(list(range(min(n, 400))))


def _row_max_properties(n: int, salt: int) -> tuple[str, Any, str]:
    schema = {"type": "object", "maxProperties": n, "title": f"t{salt}",
              "additionalProperties": {"type": "integer"}}  # fmt: skip
    return "json_schema", schema, json.dumps({f"k{i}": i for i in range(min(n, 200))})


def _row_pattern(n: int, salt: int) -> tuple[str, Any, str]:
    schema = {"type": "string", "pattern": f"^[a-z0-9]{{1,{n}}}$", "title": f"t{salt}"}
    return "json_schema", schema, json.dumps(_alnum(min(n, 2000)))


def _row_nullable_strings(n: int, salt: int) -> tuple[str, Any, str]:
    props = {f"f{i}{salt}": {"anyOf": [{"type": "string", "maxLength": max(1, n * (i + 1) // 4)},
                                      {"type": "null"}]}
             for i in range(4)}  # fmt: skip
    schema = {"type": "object", "properties": props, "required": list(props),
              "additionalProperties": False}  # fmt: skip
    names = list(props)
    value = {names[0]: _text(min(n // 4, 500)), names[1]: None, names[2]: "x", names[3]: None}
    return "json_schema", schema, json.dumps(value)


def _row_enum(n: int, salt: int) -> tuple[str, Any, str]:
    values = _enum_strings(n, salt)
    return "json_schema", {"enum": values}, json.dumps(values[n // 2])


def _row_regex(n: int, salt: int) -> tuple[str, Any, str]:
    # \w{N}, then a salt literal so that each repeat is a new regex
    return "regex", rf"\w{{{n}}}-{salt}", _alnum(n) + f"-{salt}"


ROWS: dict[str, tuple[str, Callable[[int, int], tuple[str, Any, str]]]] = {
    "max_length": ("object with one string, maxLength: N", _row_max_length),
    "min_length": ("string minLength: N", _row_min_length),
    "max_items": ("array of integers, maxItems: N", _row_max_items),
    "max_properties": ("object, maxProperties: N", _row_max_properties),
    "pattern": ("pattern ^[a-z0-9]{1,N}$", _row_pattern),
    "nullable_strings": ("4 strings maxLength N/4..N, each anyOf null", _row_nullable_strings),
    "enum": ("enum of N strings", _row_enum),
    "regex": (r"regex \w{N} (Grammar.from_regex)", _row_regex),
}
BOUND_ROWS = tuple(r for r in ROWS if r != "enum")

# -- the worker: one engine, one row, N ascending, one JSON line per N ----------------------------


def worker(engine_name: str, row: str, sizes: Sequence[int], repeats: int, tokens: int) -> None:
    """Measure one (engine, row) for each N; print one JSON line per N (flushed)."""
    import torch
    from engines import ENGINES, GrammarSpec
    from workloads import load_tokenizer

    torch.set_num_threads(1)
    tokenizer = load_tokenizer()
    engine = ENGINES[engine_name]()
    engine.prepare(tokenizer)
    build = ROWS[row][1]
    bitmask = engine.allocate_bitmask()
    # warm-up on a small and a large grammar of the row (JIT, imports: constrain loads the lazy
    # lexer's kernels for large counts only), not timed
    kind, source, _ = build(4, 999_999)
    _first_mask(engine, GrammarSpec(kind, "warm", source), bitmask)  # type: ignore[arg-type]
    kind, source, _ = build(8192, 999_998)
    try:
        _first_mask(engine, GrammarSpec(kind, "warm", source), bitmask)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - an engine that refuses it is timed (and refused) below
        pass
    for n in sizes:
        out: dict[str, Any] = {"n": n}
        try:
            times = []
            compiled = None
            for k in range(repeats):
                kind, source, _ = build(n, k)
                spec = GrammarSpec(kind, f"{row}-{n}-{k}", source)  # type: ignore[arg-type]
                ms, compiled = _first_mask(engine, spec, bitmask)
                times.append(ms)
            out["ttfm_ms"] = round(statistics.median(times), 3)
            out["ttfm_all_ms"] = [round(t, 3) for t in times]
            _, _, instance = build(n, repeats - 1)
            ids = tokenizer.encode(instance, add_special_tokens=False)[:tokens]
            out.update(_per_token(engine, compiled, bitmask, ids))
            out["status"] = "ok"
        except Exception as exc:  # a refusal ends the row: recorded, not raised
            out["status"] = "error"
            out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(json.dumps(out), flush=True)
        if out["status"] != "ok":
            return


def _first_mask(engine: Any, spec: Any, bitmask: Any) -> tuple[float, Any]:
    compiler = engine.new_compiler()
    t0 = time.perf_counter()
    compiled = engine.compile(compiler, spec)
    handle = engine.new_matcher(compiled, bitmask)
    handle.fill()
    return (time.perf_counter() - t0) * 1e3, compiled


def _per_token(engine: Any, compiled: Any, bitmask: Any, ids: Sequence[int]) -> dict[str, Any]:
    handle = engine.new_matcher(compiled, bitmask)
    spent = 0
    fed = 0
    for token in ids:
        t0 = time.perf_counter_ns()
        handle.fill()
        ok = handle.accept(token)
        spent += time.perf_counter_ns() - t0
        if not ok:
            return {"per_token_us": None, "tokens": fed, "rejected_at": fed}
        fed += 1
    return {"per_token_us": round(spent / max(fed, 1) / 1e3, 2), "tokens": fed}


# -- the parent: workers with a time limit, the table, the results file ---------------------------


def run_row(engine: str, row: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run one worker; kill it when one N takes longer than the limit (recorded as timeout)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, row,
           "--sizes", ",".join(map(str, args.sizes)), "--repeats", str(args.repeats),
           "--tokens", str(args.tokens)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", RAYON_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)  # fmt: skip
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    stream = proc.stdout

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    out: list[dict[str, Any]] = []
    pending = list(args.sizes)
    # the first N also pays the worker's start-up (tokenizer, engine, warm-up)
    wait_s = args.limit_s * args.repeats + 120
    while pending:
        try:
            line = lines.get(timeout=wait_s)
        except queue.Empty:
            proc.kill()
            out.append({"n": pending[0], "status": "timeout", "error": f">{args.limit_s} s"})
            log(f"  {engine:10s} {row:16s} N={pending[0]:>9,}  timeout")
            break
        if line is None:
            out.append({"n": pending[0], "status": "error", "error": "worker exited"})
            break
        rec = json.loads(line)
        out.append(rec)
        pending.remove(rec["n"])
        log(f"  {engine:10s} {row:16s} N={rec['n']:>9,}  {_cell(rec)}")
        wait_s = args.limit_s * args.repeats
        if rec["status"] != "ok":
            break
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return out


def _cell(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "-"
    if rec["status"] == "timeout":
        return "timeout"
    if rec["status"] != "ok":
        return rec.get("error", "error").split(":", 1)[0]
    return f"{rec['ttfm_ms']:,.1f}"


def print_table(results: dict[str, dict[str, list[dict[str, Any]]]], sizes: Sequence[int]) -> None:
    """TTFM (ms) per row and N for each engine, and constrain / llguidance."""
    for row, (title, _) in ROWS.items():
        if row not in results:
            continue
        print(f"\n== {row}: {title} (time to first mask, ms; per-token µs in brackets) ==")
        print(f"{'engine':12s}" + "".join(f"{n:>14,}" for n in sizes))
        by_engine = results[row]
        for engine, recs in by_engine.items():
            at = {r["n"]: r for r in recs}
            cells = []
            for n in sizes:
                rec = at.get(n)
                cell = _cell(rec)
                if rec is not None and rec.get("per_token_us") is not None:
                    cell += f" [{rec['per_token_us']:.0f}]"
                cells.append(f"{cell:>14s}")
            print(f"{engine:12s}" + "".join(cells))
        if "constrain" in by_engine and "llguidance" in by_engine:
            mine = {r["n"]: r.get("ttfm_ms") for r in by_engine["constrain"]}
            peer = {r["n"]: r.get("ttfm_ms") for r in by_engine["llguidance"]}
            ratios = []
            for n in sizes:
                a, b = mine.get(n), peer.get(n)
                ratios.append(f"{a / b:>13.2f}x" if a and b else f"{'-':>14s}")
            print(f"{'c / llg':12s}" + "".join(ratios))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default=",".join(ENGINE_NAMES), help="comma list (default: all)")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma list of {', '.join(ROWS)}")
    p.add_argument("--max-n", type=int, default=SIZES[-1], help="largest N (default 1,048,576)")
    p.add_argument("--repeats", type=int, default=3, help="fresh schemas per N (median; def. 3)")
    p.add_argument("--tokens", type=int, default=300, help="tokens of the instance to time")
    p.add_argument("--limit-s", type=float, default=60.0, help="per compile (default 60 s)")
    p.add_argument("--out", type=Path, default=result_path("scaling"), help="results JSON")
    p.add_argument("--worker", nargs=2, metavar=("ENGINE", "ROW"), help=argparse.SUPPRESS)
    p.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    args.rows = [r for r in args.rows.split(",") if r]
    bad = [e for e in args.engines if e not in ENGINE_NAMES] + [
        r for r in args.rows if r not in ROWS
    ]
    if bad:
        p.error(f"unknown engines or rows: {bad}")
    args.sizes = (
        [int(s) for s in args.sizes.split(",")] if args.sizes else
        [n for n in SIZES if n <= args.max_n]
    )  # fmt: skip
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker[0], args.worker[1], args.sizes, args.repeats, args.tokens)
        return 0
    missing = missing_peers(args.engines)
    if missing:
        log(f"error: {', '.join(missing)} not installed; install the peers with `make bench`")
        return 2
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in args.rows:
        log(f"[{row}] {ROWS[row][0]}")
        results[row] = {engine: run_row(engine, row, args) for engine in args.engines}
    print_table(results, args.sizes)
    payload = {"meta": machine(), "args": args_record(args),
               "rows": {r: ROWS[r][0] for r in args.rows}, "results": results}  # fmt: skip
    log(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
