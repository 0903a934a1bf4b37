"""Speculative-decoding benchmark: tokens/s and target forward passes per output token.

The task: the structured-extraction set shipped in the repository
(``benchmarks/data/extraction.jsonl``, 54 short texts describing one person each, written for
this project) extracted into JSON following ``benchmarks/data/extraction.schema.json``: the
answers copy names, cities, emails and skills from the prompt, and the keys and punctuation are
forced by the schema. Model: the embedded default (SmolLM2-135M-Instruct, 49,152 tokens),
greedy decoding, the prompt of ``bench_sampling.py``.

Configurations, every one through ``constrain.generate(..., speculative=...)`` on the same
examples, run back to back per example in a rotating order (so drift of the machine hits them
alike):

- ``plain``          no speculation (``constrain.generate``'s autoregressive loop);
- ``jump_forward``   ``speculative="grammar"``: the grammar's forced text;
- ``lookup``         ``speculative="lookup"``: prompt lookup (text matching);
- ``early_exit``     ``speculative="early_exit"``: the first third of the model's layers and its
                     LM head draft (self-speculative, untrained exit);
- ``all``            ``speculative=True``: the three chained.

Per configuration: tokens/s (all output tokens / all wall time, prefill included), its ratio to
``plain`` (the median of per-example ratios, and the ratio of totals), target forward passes per
output token (``plain``: decode steps after the prefill per token), drafted and accepted tokens
per drafter, and whether the outputs equal ``plain``'s token for token (greedy speculation is
exact, so they must; a mismatch is reported, not hidden). The forced-token share is measured on
``plain``'s outputs by replaying them through a matcher: the share of output tokens at positions
where the grammar allows exactly one token (the public MaskBench data puts it at 13-15% of JSON
tokens), next to the share jump-forward supplied (accepted grammar drafts / output tokens).

Results go to ``benchmarks/results/speculative.json`` (overwritten; ``--out`` elsewhere).

    python benchmarks/bench_speculative.py                 # 30 examples, all configurations
    python benchmarks/bench_speculative.py --limit 54 --threads 1 --max-draft 8
    python benchmarks/bench_speculative.py --quick         # 3 examples
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_sampling import DATA, INSTRUCTION, ROLES, SCHEMA  # noqa: E402
from common import machine, result_path, shown, write_result  # noqa: E402

CONFIGS: dict[str, Any] = {
    "plain": None,
    "jump_forward": "grammar",
    "lookup": "lookup",
    "early_exit": "early_exit",
    "all": True,
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def forced_share(model: Any, compiled: Any, outputs: list[list[int]]) -> tuple[int, int]:
    """Return (forced positions, positions) over the outputs: one allowed token = forced."""
    from constrain import Matcher

    forced = total = 0
    for toks in outputs:
        m = Matcher(compiled)
        for t in toks:
            if len(m.allowed_token_ids()) == 1:
                forced += 1
            total += 1
            if not m.accept_token(t):
                raise AssertionError("a plain output the matcher rejects")
    return forced, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=30, help="first N examples (default 30)")
    ap.add_argument("--quick", action="store_true", help="3 examples")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--max-draft", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument(
        "--whitespace",
        choices=("compact", "spaced", "flexible", "indent"),
        default=None,
        help="JSON layout (json_options); default: generate()'s default",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    import constrain
    from constrain.errors import IncompleteOutputError
    from constrain.output import output_type

    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}; choose from {', '.join(CONFIGS)}")
    if "plain" not in configs:
        configs.insert(0, "plain")
    examples = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    examples = examples[: 3 if args.quick else args.limit]
    t0 = time.perf_counter()
    model = constrain.load_model()
    load_seconds = time.perf_counter() - t0
    schema = json.loads(SCHEMA.read_text())
    json_options = {"whitespace": args.whitespace} if args.whitespace else {}
    compiled = model.compile(output_type(schema=schema, json_options=json_options).grammar)

    def run(config: str, text: str) -> dict[str, Any]:
        prompt = INSTRUCTION.format(roles=ROLES, text=text)
        t = time.perf_counter()
        try:
            res = constrain.generate(
                prompt,
                model=model,
                schema=schema,
                json_options=json_options,
                max_tokens=args.max_tokens,
                speculative=CONFIGS[config],
                max_draft=args.max_draft,
                return_info=True,
            )
        except IncompleteOutputError as err:
            log(f"  {config}: incomplete output ({err.partial_text[:60]!r}...)")
            return {"seconds": time.perf_counter() - t, "tokens": 0, "ids": None, "stats": None}
        seconds = time.perf_counter() - t
        ids = model.tokenizer(res.text, add_special_tokens=False)["input_ids"]
        return {
            "seconds": seconds,
            "tokens": res.output_tokens,
            "text": res.text,
            "ids": ids,
            "stats": res.details,
        }

    # warm-up: numba kernels, the compiled grammar's lazy tables, the early-exit view
    for c in configs:
        run(c, examples[0]["text"])
    rows: list[dict[str, Any]] = []
    for k, ex in enumerate(examples):
        order = configs[k % len(configs) :] + configs[: k % len(configs)]
        row: dict[str, Any] = {"id": ex["id"]}
        for c in order:
            row[c] = run(c, ex["text"])
        rows.append(row)
        log(
            f"{ex['id']}: "
            + "  ".join(f"{c} {row[c]['tokens'] / row[c]['seconds']:.1f} tok/s" for c in configs)
        )

    summary: dict[str, Any] = {}
    plain_texts = [r["plain"].get("text") for r in rows]
    for c in configs:
        secs = sum(r[c]["seconds"] for r in rows)
        toks = sum(r[c]["tokens"] for r in rows)
        ratios = [
            (r[c]["tokens"] / r[c]["seconds"]) / (r["plain"]["tokens"] / r["plain"]["seconds"])
            for r in rows
            if r[c]["tokens"] and r["plain"]["tokens"]
        ]
        entry: dict[str, Any] = {
            "tokens": toks,
            "seconds": secs,
            "tokens_per_second": toks / secs if secs else 0.0,
            "speedup_median": statistics.median(ratios) if ratios else None,
            "same_output_as_plain": sum(
                r[c].get("text") == p for r, p in zip(rows, plain_texts, strict=True)
            ),
        }
        if c != "plain":
            stats = [r[c]["stats"] for r in rows if r[c]["stats"]]
            fwd = sum(s["forwards"] for s in stats)
            out = sum(s["output_tokens"] for s in stats)
            drafted: dict[str, int] = {}
            accepted: dict[str, int] = {}
            for s in stats:
                for name, n in s["drafted"].items():
                    drafted[name] = drafted.get(name, 0) + n
                for name, n in s["accepted"].items():
                    accepted[name] = accepted.get(name, 0) + n
            entry.update(
                forwards_per_token=fwd / out if out else None,
                drafted=drafted,
                accepted=accepted,
                acceptance={n: accepted[n] / drafted[n] for n in drafted if drafted[n]},
                jump_forward_share=accepted.get("grammar", 0) / out if out else None,
            )
        else:
            # the autoregressive loop: one forward pass per token after the first
            n_ex = sum(1 for r in rows if r["plain"]["tokens"])
            entry["forwards_per_token"] = (toks - n_ex) / toks if toks else None
        summary[c] = entry
    plain_tps = summary["plain"]["tokens_per_second"]
    for c in configs:
        # 0 when no plain output completed (e.g. a --max-tokens too small for the schema)
        summary[c]["speedup_total"] = (
            summary[c]["tokens_per_second"] / plain_tps if plain_tps else 0.0
        )
    forced, total = forced_share(
        model, compiled, [r["plain"]["ids"] for r in rows if r["plain"]["ids"] is not None]
    )

    layout = json_options.get("whitespace", "default")
    print(
        f"\nspeculative decoding, {len(rows)} extraction examples, greedy, SmolLM2-135M, "
        f"whitespace {layout}"
    )
    print(f"{'config':<14}{'tok/s':>8}{'speedup':>9}{'(median)':>10}{'fwd/tok':>9}"
          f"{'same':>7}  acceptance")  # fmt: skip
    for c in configs:
        e = summary[c]
        acc = ", ".join(f"{n} {e['accepted'][n]}/{e['drafted'][n]}" for n in e.get("drafted", {}))
        print(
            f"{c:<14}{e['tokens_per_second']:>8.1f}{e['speedup_total']:>8.2f}x"
            f"{(e['speedup_median'] or 0):>9.2f}x{(e['forwards_per_token'] or 0):>9.3f}"
            f"{e['same_output_as_plain']:>4}/{len(rows):<3} {acc}"
        )
    print(
        f"forced-token share of plain outputs: {forced}/{total} = {forced / max(total, 1):.1%}"
        " (positions where the grammar allows one token)"
    )
    if "all" in summary and summary["all"].get("jump_forward_share") is not None:
        print(f"jump-forward share (all): {summary['all']['jump_forward_share']:.1%}")

    out_path = args.out or result_path("speculative")
    record = {
        "machine": machine(),
        "threads": args.threads,
        "model": model.name,
        "load_seconds": load_seconds,
        "examples": len(rows),
        "max_tokens": args.max_tokens,
        "max_draft": args.max_draft,
        "json_options": json_options,
        "summary": summary,
        "forced_tokens": forced,
        "forced_positions": total,
        "rows": [
            {"id": r["id"], **{c: {k: r[c][k] for k in ("seconds", "tokens")} for c in configs}}
            for r in rows
        ],
    }
    write_result(out_path, record)
    print(f"results: {shown(out_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
