"""Constrained decoding of the shipped diffusion model: validity, likelihood and cost per step.

The model is the shipped :class:`constrain.diffusion.tiny_model.TinyDiffusionLM` (or
``--weights``); the tasks those of its corpus
(:data:`constrain.diffusion.tiny_corpus.TASKS`: two JSON
schemas, arithmetic and SQL as Lark grammars). Per task and method (``none`` = unconstrained,
``dingo``, ``infill``, ``lave``), ``--samples`` samples with seeds 0..n-1 through
``diffusion_decode`` (temperature ``--temperature``, ``--block-size`` / ``--steps`` /
``--unmasking``; by default one block, one position per step, confidence unmasking):

- ``valid``: the fraction that ``jsonschema`` / ``lark`` accept (independent of constrain);
- ``elbo``: the mean of LLaDA's Monte-Carlo lower bound on ``log p(output | prompt)`` in nats
  (the output's ``length`` positions, EOS padding included; ``--elbo-draws`` draws of a masked
  count ``l ~ U{1..L}`` and ``l`` masked positions, weight ``L / l``; the same draws for every
  method). Higher is more likely under the model;
- ``forward_ms`` and ``constraint_ms``: per denoising step, the model's forward pass and the
  grammar work, and the grammar work as a fraction of one forward pass of the default
  SmolLM2-135M model (the reference cost, about 60 ms on this machine), **measured in this
  run** before each task, with the same thread count: the median of ``--reference-steps``
  single-token decoding steps (KV cache, a 64-token context), unless ``--reference-ms`` gives a
  value; and of the diffusion model's own forward pass.

DINGO needs a regular constraint: on the arithmetic grammar (nested parentheses) it is skipped.

    python benchmarks/bench_diffusion.py                     # 20 samples per task and method
    python benchmarks/bench_diffusion.py --samples 5 --methods none,lave [--threads 1]

Writes ``benchmarks/results/diffusion.json`` (``diffusion-block<B>.json`` with ``--block-size B``),
overwritten, and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from common import machine, result_path, shown, write_result

from constrain import Compiler
from constrain.diffusion import NotRegularError, diffusion_decode
from constrain.diffusion.tiny_corpus import TASKS, is_valid
from constrain.diffusion.tiny_model import TinyDiffusionLM, load_tiny_diffusion
from constrain.output import output_type


class ReferenceForward:
    """One decoding step of the default model (SmolLM2-135M, KV cache), timed on demand.

    Measured before each task, so that the ratio compares with a forward pass taken under the
    same machine load as the task's grammar work.
    """

    def __init__(self, context: int = 64) -> None:
        from constrain.integrations.transformers import load_model

        self.lm = load_model(device="cpu").model.eval()
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 1000, (1, context), generator=gen)

    @torch.inference_mode()
    def measure(self, steps: int) -> float:
        """Median ms of ``steps`` decoding steps (after two warm-up steps)."""
        out = self.lm(input_ids=self.ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        times = []
        for _ in range(steps + 2):
            t0 = time.perf_counter()
            out = self.lm(input_ids=nxt, past_key_values=past, use_cache=True)
            times.append(time.perf_counter() - t0)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        return 1e3 * statistics.median(times[2:])


def elbo(model: TinyDiffusionLM, prompt: list[int], output: list[int], draws: int) -> float:
    """LLaDA's lower bound on ``log p(output | prompt)`` (nats), ``draws`` Monte-Carlo draws."""
    gen = torch.Generator().manual_seed(1234)
    seq = torch.tensor(prompt + output)
    n, length = len(prompt), len(output)
    total = 0.0
    for _ in range(draws):
        count = int(torch.randint(1, length + 1, (1,), generator=gen))
        picked = torch.randperm(length, generator=gen)[:count] + n
        mask = torch.zeros(len(seq), dtype=torch.bool)
        mask[picked] = True
        logp = torch.log_softmax(model.predict(seq, mask).double(), dim=-1)
        total += float(logp[picked, seq[picked]].sum()) * length / count
    return total / draws


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--methods", default="none,dingo,infill,lave")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--block-size", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--unmasking", default="confidence")
    ap.add_argument("--elbo-draws", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--weights", type=Path, default=None)
    ap.add_argument("--reference-steps", type=int, default=20)
    ap.add_argument("--reference-ms", type=float, default=None, help="skip the measurement")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    reference = None if args.reference_ms else ReferenceForward()
    ref_all: list[float] = []
    model = load_tiny_diffusion(args.weights)
    compiler = Compiler(model.vocabulary)
    rows: list[dict[str, Any]] = []
    for name in args.tasks.split(","):
        task = TASKS[name]
        t0 = time.perf_counter()
        compiled = compiler.compile(output_type(**task.constraint).grammar)
        compile_s = time.perf_counter() - t0
        prompt = model.encode_prompt(task.prompt)
        ref_ms = args.reference_ms or reference.measure(args.reference_steps)  # type: ignore[union-attr]
        ref_all.append(ref_ms)
        print(f"{name}: default model forward {ref_ms:.1f} ms per decoding step", flush=True)
        length = model.max_length - len(prompt)
        for method in args.methods.split(","):
            valid, elbos, fwd, cons, setup, texts = 0, [], [], [], [], []
            try:
                for seed in range(args.samples):
                    res = diffusion_decode(
                        model, compiled, length=length, block_size=args.block_size,
                        steps=args.steps, unmasking=args.unmasking, method=method,  # type: ignore[arg-type]
                        temperature=args.temperature, seed=seed, prompt=prompt,
                    )  # fmt: skip
                    valid += is_valid(name, res.text)
                    elbos.append(elbo(model, prompt, res.token_ids, args.elbo_draws))
                    fwd.extend(res.forward_seconds)
                    cons.extend(res.constraint_seconds)
                    setup.append(res.setup_seconds)
                    if len(texts) < 3:
                        texts.append(res.text)
            except NotRegularError:
                rows.append({"task": name, "method": method, "skipped": "not regular"})
                continue
            row = {
                "task": name,
                "method": method,
                "samples": args.samples,
                "valid": valid / args.samples,
                "elbo": statistics.fmean(elbos),
                "forward_ms": 1e3 * statistics.fmean(fwd),
                "constraint_ms": 1e3 * statistics.fmean(cons),
                "constraint_ms_p99": 1e3 * sorted(cons)[int(0.99 * (len(cons) - 1))],
                "steps_per_sample": len(fwd) / args.samples,
                "setup_ms": 1e3 * statistics.fmean(setup),
                "compile_ms": 1e3 * compile_s,
                "reference_forward_ms": ref_ms,
                "examples": texts,
            }
            row["constraint_vs_reference"] = row["constraint_ms"] / ref_ms
            row["constraint_vs_forward"] = row["constraint_ms"] / row["forward_ms"]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "examples"}), flush=True)
    name = "diffusion" if args.block_size is None else f"diffusion-block{args.block_size}"
    out = args.out or result_path(name)
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "weights")}
    record = {"machine": machine(), "settings": settings, "model": model.info}
    write_result(out, {**record, "reference_forward_ms": ref_all, "rows": rows})
    refs = ", ".join(f"{r:.1f}" for r in ref_all)
    print(f"\nreference forward (SmolLM2-135M, one decoding step, per task): {refs} ms")
    print(
        "\n| task | method | valid | ELBO (nats) | constraint ms/step | vs reference | vs forward |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['task']} | {r['method']} | — ({r['skipped']}) | | | | |")
            continue
        print(
            f"| {r['task']} | {r['method']} | {r['valid']:.0%} | {r['elbo']:.1f} | "
            f"{r['constraint_ms']:.2f} | {r['constraint_vs_reference']:.1%} | "
            f"{r['constraint_vs_forward']:.1f}x |"
        )
    print(f"\nwritten to {shown(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
