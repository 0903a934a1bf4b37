"""Canonical tokenization (issue 29): how far masked decoding is from the model's own distribution.

On the default model (SmolLM2-135M-Instruct, ``constrain.load_model()``), three small constraints
whose token trees can be enumerated completely (``CONSTRAINTS``: five short answers to "Is the sky
green?", a weekday regex, a one-field JSON schema with an enum):

- **Tree.** Every token path that spells a string of the language, canonical or not, is scored
  by the model (``sampling_exactness.enumerate_tree``: breadth-first, one batched forward pass
  per depth, full softmax at temperature 1).
- **Targets.** ``target``: ``P(s | s in L)``, a string's probability summed over all its token
  paths. ``canonical target``: ``P(enc(s)) / sum_s' P(enc(s'))`` with ``enc`` the tokenizer's
  own encoding (``tokenizer.encode(s)``), what ``canonical=True`` aims at.
- **Masked decoding, exactly.** Sampling at temperature 1 from the renormalised allowed tokens,
  without and with ``canonical=True`` (``Matcher(compiled, canonical=model.canonical())``): the
  probability of every string, computed by walking the tree with the matcher's masks. The
  canonical masks are pairwise (docs/sampling.md): a path can reach a node with no allowed
  token (the grammar forces bytes that BPE would merge into the previous token); that mass is
  the outcome ``<dead end>``, which has no target mass.
- **Greedy.** The argmax path through the masks, without and with the canonical constraint,
  read from the tree and checked against ``constrain.generate`` (``return_info=True``):
  its string, its token path's log-probability, its string's canonical encoding's and the
  string's total.
- **Samplers with canonical=True** (``--methods``; the functions of ``sampling_exactness.py``
  with the canonical matcher), compared with the canonical target: ``masked``
  (``MaskedSampler(1.0)``, a check of the exact walk), ``asap`` (``ASAp``) and ``smc-awrs``
  / ``smc-masked`` (``SMC``, one chosen output per run), each with the noise floor of its
  sample size.
- **Extraction.** The 54 texts of ``bench_sampling.py`` (``benchmarks/data/extraction.jsonl``),
  greedy masked decoding of the schema (the library's default JSON whitespace, ``spaced``)
  without and with ``canonical=True``: field, leaf and strict accuracy, validity, and how many
  outputs are the tokenizer's own encoding of their text.

Results go to ``benchmarks/results/canonical-fidelity.json``, overwritten.

    python benchmarks/canonical_fidelity.py             # all of it (~40 min on 2 shared cores)
    python benchmarks/canonical_fidelity.py --quick     # smoke run: few samples, 3 examples
    python benchmarks/canonical_fidelity.py [--constraints sky,weekday,json]
        [--methods masked,asap,smc-masked,smc-awrs] [--samples 2000] [--smc-runs 200]
        [--particles 16] [--limit N] [--skip-extraction] [--max-tokens 160] [--seed 0]
        [--whitespace spaced|compact|flexible|indent] [--threads 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_sampling import DATA, INSTRUCTION, LEAVES, ROLES, SCHEMA, score
from bench_sampling import summarise as summarise_extraction
from common import args_record, log, machine, result_path, shown, write_result
from sampling_exactness import (
    PromptCache,
    enumerate_tree,
    run_asap,
    run_smc,
    run_token_sampler,
    summarise,
    text_of,
)

from constrain.testing import total_variation

DEAD_END = "<dead end>"
SKY = ["Yes.", "No.", "Yes, it is green.", "No, it is blue.", "No, it is not."]
CONSTRAINTS: dict[str, dict[str, Any]] = {
    "sky": {"prompt": "Is the sky green? Answer yes or no.", "spec": {"choices": SKY}},
    "weekday": {
        "prompt": "Which day of the week comes after Thursday? Answer with the day only.",
        "spec": {"regex": "(Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"},
    },
    "json": {
        "prompt": 'What colour is the sky? Answer in JSON with the key "sky".',
        "spec": {
            "schema": {
                "type": "object",
                "properties": {"sky": {"enum": ["blue", "green", "grey"]}},
                "required": ["sky"],
                "additionalProperties": False,
            }
        },
    },
}
ALL_METHODS = ("masked", "asap", "smc-awrs", "smc-masked")
MAX_TOKENS = 24  # generate_check: the longest path (one byte per token) has 17 tokens


# -- exact distributions ------------------------------------------------------------------------


def logsumexp(values: Sequence[float]) -> float:
    return float(np.logaddexp.reduce(np.asarray(values, dtype=np.float64)))


def node_logp(table: dict[tuple[int, ...], Any], prefix: tuple[int, ...]) -> dict[int, float]:
    """The model's log-probability of each token the grammar allows after ``prefix``."""
    ids, lps = table[prefix]
    return dict(zip(ids.tolist(), lps.tolist(), strict=True))


def masked_walk(model: Any, compiled: Any, canon: Any, table: dict[Any, Any]) -> dict[str, Any]:
    """Return the exact distribution of masked sampling (temperature 1) over strings.

    Walks the tree from the root with ``Matcher(compiled, canonical=canon)``: at every node the
    allowed tokens' probabilities are renormalised; the mass of paths that reach a node with no
    allowed token goes to :data:`DEAD_END`.
    """
    from constrain.matcher import Matcher

    eos = set(model.eos_ids)
    dist: dict[str, float] = {}
    dead: list[dict[str, Any]] = []
    nodes = 0
    stack: list[tuple[Any, tuple[int, ...], float]] = [
        (Matcher(compiled, canonical=canon), (), 0.0)
    ]
    while stack:
        m, prefix, lq = stack.pop()
        nodes += 1
        allowed = m.allowed_token_ids().tolist()
        if not allowed:
            dist[DEAD_END] = dist.get(DEAD_END, 0.0) + math.exp(lq)
            dead.append({"tokens": list(prefix), "text": text_of(model.vocabulary, prefix)})
            continue
        logp = node_logp(table, prefix)
        extra = [t for t in allowed if t not in logp]
        if extra:  # the canonical mask is the grammar's mask ANDed with the relation
            raise RuntimeError(f"after {list(prefix)} the mask allows {extra} the grammar refuses")
        norm = logsumexp([logp[t] for t in allowed])
        ends = [logp[t] for t in allowed if t in eos]
        if ends:
            text = text_of(model.vocabulary, prefix)
            dist[text] = dist.get(text, 0.0) + math.exp(lq + logsumexp(ends) - norm)
        for t in allowed:
            if t in eos:
                continue
            child = m.fork()
            if not child.accept_token(t):
                raise RuntimeError(f"the matcher rejects token {t} it allowed after {list(prefix)}")
            stack.append((child, (*prefix, t), lq + logp[t] - norm))
    return {"dist": dist, "nodes": nodes, "dead_ends": dead}


def greedy_walk(model: Any, compiled: Any, canon: Any, table: dict[Any, Any]) -> dict[str, Any]:
    """Return the argmax path through the masks, with each step's renormalised probabilities."""
    from constrain.matcher import Matcher

    eos = set(model.eos_ids)
    vocab = model.vocabulary
    m = Matcher(compiled, canonical=canon)
    prefix: tuple[int, ...] = ()
    steps: list[dict[str, Any]] = []
    while True:
        allowed = m.allowed_token_ids().tolist()
        if not allowed:
            return {"tokens": list(prefix), "finish": "dead end", "steps": steps}
        logp = node_logp(table, prefix)
        norm = logsumexp([logp[t] for t in allowed])
        ranked = sorted(allowed, key=lambda t: -logp[t])
        best = ranked[0]
        step = {"token": best, "p_masked": math.exp(logp[best] - norm)}
        if len(ranked) > 1:
            step["runner_up"] = ranked[1]
            step["runner_up_p_masked"] = math.exp(logp[ranked[1]] - norm)
        step["shown"] = (
            "EOS" if best in eos else vocab.token_bytes_of(best).decode("utf-8", "replace")
        )
        steps.append(step)
        if best in eos:
            return {"tokens": list(prefix), "finish": "stop", "steps": steps}
        m.accept_token(best)
        prefix = (*prefix, best)


def path_logp(model: Any, paths: dict[tuple[int, ...], float], tokens: Sequence[int]) -> float:
    """log P(tokens, EOS) from the enumerated paths (-inf when the tree has no such path)."""
    return paths.get(tuple(int(t) for t in tokens), -math.inf)


def exact_part(model: Any, canon: Any, name: str, case: dict[str, Any]) -> dict[str, Any]:
    """Enumerate one constraint's tree; return targets, masked distributions and greedy paths."""
    from constrain.output import output_type

    compiled = model.compile(output_type(**case["spec"]).grammar)
    prompt_ids = model.encode_prompt(case["prompt"])
    log(f"{name}: enumerating the tree of allowed token paths")
    tree = enumerate_tree(model, compiled, prompt_ids)
    table = tree["table"]
    paths = {tuple(p["tokens"]): p["logp"] for p in tree["paths"]}
    strings: dict[str, Any] = {}
    for p in tree["paths"]:
        strings.setdefault(p["text"], []).append(p["logp"])
    log_z = logsumexp([p["logp"] for p in tree["paths"]])
    per_string: dict[str, Any] = {}
    for text, lps in strings.items():
        enc = [int(t) for t in model.tokenizer(text, add_special_tokens=False)["input_ids"]]
        per_string[text] = {
            "paths": len(lps),
            "log_p": logsumexp(lps),
            "canonical_tokens": enc,
            "log_p_canonical": path_logp(model, paths, enc),
            "is_canonical_by_relation": canon.is_canonical(enc),
        }
    log_zc = logsumexp([v["log_p_canonical"] for v in per_string.values()])
    target = {s: math.exp(v["log_p"] - log_z) for s, v in per_string.items()}
    target_c = {s: math.exp(v["log_p_canonical"] - log_zc) for s, v in per_string.items()}
    walks = {
        "plain": masked_walk(model, compiled, None, table),
        "canonical": masked_walk(model, compiled, canon, table),
    }
    greedy = {
        "plain": greedy_walk(model, compiled, None, table),
        "canonical": greedy_walk(model, compiled, canon, table),
    }
    for mode, g in greedy.items():
        text = text_of(model.vocabulary, g["tokens"])
        g["text"] = text
        g["log_p_path"] = path_logp(model, paths, g["tokens"])
        info = per_string.get(text)
        g["log_p_canonical_path"] = info["log_p_canonical"] if info else None
        g["log_p_string"] = info["log_p"] if info else None
        g["is_canonical"] = bool(info and info["canonical_tokens"] == g["tokens"])
        g["generate"] = generate_check(model, case, mode == "canonical")
    for text, v in per_string.items():
        v["target"] = target[text]
        v["target_canonical"] = target_c[text]
        v["masked"] = walks["plain"]["dist"].get(text, 0.0)
        v["masked_canonical"] = walks["canonical"]["dist"].get(text, 0.0)
    tv = {}
    for mode, w in walks.items():
        tv[f"{mode}_vs_target"] = total_variation(w["dist"], target)
        tv[f"{mode}_vs_canonical_target"] = total_variation(w["dist"], target_c)
    tv["target_vs_canonical_target"] = total_variation(target, target_c)
    return {
        "prompt": case["prompt"],
        "spec": case["spec"],
        "prompt_ids": prompt_ids,
        "compiled": compiled,
        "tree": {
            "nodes": tree["nodes"],
            "complete_paths": len(tree["paths"]),
            "nodes_per_depth": tree["nodes_per_depth"],
            "seconds": tree["seconds"],
        },
        "log_p_language": log_z,
        "log_p_language_canonical": log_zc,
        "canonical_share_of_language": math.exp(log_zc - log_z),
        "tv": tv,
        "dead_end_mass_canonical": walks["canonical"]["dist"].get(DEAD_END, 0.0),
        "dead_end_nodes_canonical": walks["canonical"]["dead_ends"],
        "canonical_nodes": walks["canonical"]["nodes"],
        "strings": dict(sorted(per_string.items(), key=lambda kv: -kv[1]["target"])),
        "greedy": greedy,
        "targets": {"target": target, "canonical": target_c},
        "masked_canonical": walks["canonical"]["dist"],
    }


def generate_check(model: Any, case: dict[str, Any], canonical: bool) -> dict[str, Any]:
    """Greedy ``constrain.generate`` on the case: its text and token ids."""
    import constrain
    from constrain.errors import ConstrainError

    try:
        res = constrain.generate(
            case["prompt"],
            model=model,
            max_tokens=MAX_TOKENS,
            canonical=canonical,
            return_info=True,
            **case["spec"],
        )
    except ConstrainError as err:
        return {"error": f"{type(err).__name__}: {err}"}
    eos = set(model.eos_ids)
    ids = [int(t) for t in res.token_ids if int(t) not in eos]
    return {"text": res.text, "token_ids": ids, "finish_reason": res.finish_reason}


# -- samplers with canonical=True -------------------------------------------------------------


def sampler_part(
    model: Any, canon: Any, part: dict[str, Any], args: argparse.Namespace, base_seed: int
) -> dict[str, Any]:
    """Sample with each method under ``canonical=True``; compare with the canonical target."""
    from constrain.errors import ConstrainError

    ctx = {
        "model": model,
        "compiled": part["compiled"],
        "prompt_ids": part["prompt_ids"],
        "prompt": PromptCache(model, part["prompt_ids"]),
        "canonical": canon,
    }
    target_c = part["targets"]["canonical"]
    masked_c = part["masked_canonical"]
    out: dict[str, Any] = {}
    for k, m in enumerate(args.methods):
        seed = base_seed + 1000 * k
        log(f"  {m} (canonical=True):")
        try:
            if m == "masked":
                from constrain.sampling import MaskedSampler

                res = run_token_sampler(ctx, lambda: MaskedSampler(1.0), args.samples, 250, seed)
            elif m == "asap":
                res = run_asap(ctx, args.samples, seed)
            else:
                proposal = m.split("-", 1)[1]
                res = run_smc(ctx, proposal, args.smc_runs, args.particles, 8, seed)
        except ConstrainError as err:  # a failure of the method is a result, reported
            out[m] = {"error": f"{type(err).__name__}: {err}"}
            log(f"    failed: {out[m]['error']}")
            continue
        summary = summarise(m, res, target_c, masked_c, seed + 7)
        out[m] = {
            "summary": summary["summary"],
            "empirical": summary["empirical"],
            "weighted": summary["weighted"],
        }
        s = summary["summary"]
        log(f"    TV to the canonical target {s['tv_target']:.4f}, {s['seconds']:.0f} s")
    return out


# -- extraction ---------------------------------------------------------------------------------


def extraction_part(model: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Greedy masked decoding of the extraction set without and with ``canonical=True``."""
    import constrain
    from constrain.errors import ConstrainError, IncompleteOutputError

    examples = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    if args.limit is not None:
        examples = examples[: args.limit]
    schema = json.loads(SCHEMA.read_text())
    eos = set(model.eos_ids)
    out: dict[str, Any] = {}
    for mode in ("plain", "canonical"):
        rows = []
        for ex in examples:
            prompt = INSTRUCTION.format(roles=ROLES, text=ex["text"])
            t0 = time.perf_counter()
            row: dict[str, Any] = {"id": ex["id"], "difficulty": ex["difficulty"]}
            try:
                res = constrain.generate(
                    prompt,
                    model=model,
                    schema=schema,
                    json_options={"whitespace": args.whitespace},
                    max_tokens=args.max_tokens,
                    canonical=mode == "canonical",
                    return_info=True,
                )
                ids = [int(t) for t in res.token_ids if int(t) not in eos]
                enc = model.tokenizer(res.text, add_special_tokens=False)["input_ids"]
                row.update(
                    value=res.value,
                    text=res.text,
                    output_tokens=res.output_tokens,
                    finish_reason=res.finish_reason,
                    is_canonical=ids == [int(t) for t in enc],
                    canonical_tokens=len(enc),
                )
            except IncompleteOutputError as err:
                row.update(value=None, text=err.partial_text, output_tokens=args.max_tokens)
                row.update(finish_reason="length", is_canonical=None)
            except ConstrainError as err:  # reported, scored as wrong
                row.update(value=None, text="", output_tokens=0, finish_reason="error")
                row.update(error=f"{type(err).__name__}: {err}", is_canonical=None)
            row["seconds"] = time.perf_counter() - t0
            row["tokens"] = row["output_tokens"]
            row["score"] = score(row["value"], ex["gold"])
            rows.append(row)
            log(
                f"  {mode:9s} {ex['id']:10s} {row['score']['fields']}/6 fields "
                f"{row['seconds']:5.1f} s canonical={row['is_canonical']} {row['text'][:70]!r}"
            )
        summary = summarise_extraction(rows)
        summary["canonical_outputs"] = sum(r["is_canonical"] is True for r in rows)
        summary["errors"] = sum("error" in r for r in rows)
        out[mode] = {"summary": summary, "examples": rows}
    both = zip(out["plain"]["examples"], out["canonical"]["examples"], strict=True)
    out["different_outputs"] = sum(a["text"] != b["text"] for a, b in both)
    return out


# -- report -------------------------------------------------------------------------------------


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_report(parts: dict[str, Any], samplers: dict[str, Any], extraction: Any) -> None:
    print("\nExact distributions over the strings (TV distances):")
    head = (
        f"{'constraint':10s} {'strings':>7s} {'paths':>6s} {'canon share':>11s} "
        f"{'tgt~ctgt':>8s} {'masked~tgt':>10s} {'masked~ctgt':>11s} "
        f"{'canon~tgt':>9s} {'canon~ctgt':>10s} {'dead end':>8s}"
    )
    print(head)
    print("-" * len(head))
    for name, p in parts.items():
        tv = p["tv"]
        print(
            f"{name:10s} {len(p['strings']):7d} {p['tree']['complete_paths']:6d} "
            f"{p['canonical_share_of_language']:11.4f} {tv['target_vs_canonical_target']:8.4f} "
            f"{tv['plain_vs_target']:10.4f} {tv['plain_vs_canonical_target']:11.4f} "
            f"{tv['canonical_vs_target']:9.4f} {tv['canonical_vs_canonical_target']:10.4f} "
            f"{p['dead_end_mass_canonical']:8.4f}"
        )
    print(
        "(canon share: the language's probability on canonical paths; tgt / ctgt: the target "
        "over all tokenizations / over canonical encodings; masked / canon: masked decoding "
        "without / with canonical=True, exact; dead end: canon's mass on paths that stop)"
    )
    for name, p in parts.items():
        print(f"\n{name}: {p['prompt']!r}")
        print(
            f"{'string':22s} {'paths':>6s} {'target':>7s} {'ctarget':>7s} {'masked':>7s} "
            f"{'canon':>7s} {'log P(enc)':>10s} {'log P(s)':>9s}"
        )
        for s, v in p["strings"].items():
            print(
                f"{s:22s} {v['paths']:6d} {v['target']:7.4f} {v['target_canonical']:7.4f} "
                f"{v['masked']:7.4f} {v['masked_canonical']:7.4f} "
                f"{v['log_p_canonical']:10.2f} {v['log_p']:9.2f}"
            )
        for mode, g in p["greedy"].items():
            shown_steps = " + ".join(repr(s["shown"]) for s in g["steps"])
            gen = g["generate"]
            same = gen.get("token_ids") == g["tokens"]
            print(
                f"greedy {mode:9s}: {g['text']!r} ({g['finish']}) {shown_steps}; "
                f"log P(path) {g['log_p_path']:.2f}, log P(enc) {fmt(g['log_p_canonical_path'])}, "
                f"log P(s) {fmt(g['log_p_string'])}; canonical {g['is_canonical']}; "
                f"generate() {'agrees' if same else gen}"
            )
    for name, per in samplers.items():
        print(f"\n{name}, samplers with canonical=True against the canonical target:")
        for m, r in per.items():
            if "error" in r:
                print(f"  {m:11s} failed: {r['error']}")
                continue
            s = r["summary"]
            f = s["noise_target"]
            w = s["weighted_tv_target"]
            print(
                f"  {m:11s} n={s['samples']:5d}  TV {s['tv_target']:.4f}  floor "
                f"{f['tv_mean']:.4f}/{f['tv_p95']:.4f}  weighted TV "
                f"{'-' if w is None else f'{w:.4f}'}  outside L {s['outside_language']}  "
                f"{s['seconds']:.0f} s"
            )
    if extraction:
        print(f"\nExtraction ({extraction['plain']['summary']['n']} texts), greedy masked:")
        for mode in ("plain", "canonical"):
            s = extraction[mode]["summary"]
            print(
                f"  {mode:9s} fields {s['field_accuracy']:.3f}  leaves {s['leaf_accuracy']:.3f}  "
                f"strict {s['strict_accuracy']:.3f}  valid {s['validity']:.3f}  "
                f"canonical outputs {s['canonical_outputs']}/{s['n']}  errors {s['errors']}  "
                f"{s['seconds_per_example']:.1f} s/example"
            )
        print(f"  outputs that differ: {extraction['different_outputs']}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--constraints", default=",".join(CONSTRAINTS))
    ap.add_argument("--methods", default="masked,asap,smc-masked,smc-awrs")
    ap.add_argument("--samples", type=int, default=2000, help="samples for masked and asap")
    ap.add_argument("--smc-runs", type=int, default=200, help="SMC runs (one output each)")
    ap.add_argument("--particles", type=int, default=16)
    ap.add_argument("--limit", type=int, default=None, help="first N extraction texts")
    ap.add_argument("--skip-extraction", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=160, help="extraction's max_tokens")
    ap.add_argument(
        "--whitespace",
        choices=("compact", "spaced", "flexible", "indent"),
        default="spaced",
        help="extraction's JSON whitespace (default: the library's default, spaced)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 60 samples, 4 SMC runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.samples, args.smc_runs, args.limit = 60, 4, args.limit or 3
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in args.methods:
        if m not in ALL_METHODS:
            ap.error(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    names = [c.strip() for c in args.constraints.split(",") if c.strip()]
    for c in names:
        if c not in CONSTRAINTS:
            ap.error(f"unknown constraint {c!r}; choose from {', '.join(CONSTRAINTS)}")
    if args.threads:
        torch.set_num_threads(args.threads)

    import constrain

    started = machine()  # the commit the code was loaded from (others may commit meanwhile)
    t_all = time.perf_counter()
    model = constrain.load_model()
    model.model.eval()
    t0 = time.perf_counter()
    canon = model.canonical()
    canon_s = time.perf_counter() - t0
    log(f"model {model.name}; canonical relation built in {canon_s:.1f} s")
    parts: dict[str, Any] = {}
    samplers: dict[str, Any] = {}
    for k, name in enumerate(names):
        parts[name] = exact_part(model, canon, name, CONSTRAINTS[name])
        if args.methods:
            samplers[name] = sampler_part(model, canon, parts[name], args, args.seed + 10_000 * k)
    extraction = None if args.skip_extraction else extraction_part(model, args)
    wall = time.perf_counter() - t_all
    print_report(parts, samplers, extraction)
    print(f"\nwall time {wall:.0f} s")

    for p in parts.values():
        del p["compiled"], p["masked_canonical"]
    out = args.out or result_path("canonical-fidelity")
    meta = {
        **started,
        "git_commit_at_end": machine()["git_commit"],
        "model": model.name,
        "device": str(model.device),
        "torch_threads": torch.get_num_threads(),
        "args": args_record(args),
        "canonical_build_seconds": canon_s,
        "wall_seconds": wall,
        "leaves": list(LEAVES),
    }
    write_result(
        out, {"meta": meta, "constraints": parts, "samplers": samplers, "extraction": extraction}
    )
    print(f"results: {shown(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
