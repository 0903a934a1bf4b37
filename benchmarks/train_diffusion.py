"""Train the shipped tiny masked-diffusion model.

The weights go to ``constrain/diffusion/tiny_diffusion.safetensors``.

The corpus is synthetic and seeded
(:func:`constrain.diffusion.tiny_corpus.make_corpus`: JSON records
of two schemas, arithmetic with its result, tiny SQL), the model a byte-level bidirectional
transformer (:class:`constrain.diffusion.tiny_model.TinyDiffusionLM`), the objective LLaDA's
(random masking ratio ``t ~ U(0, 1)``, cross-entropy on masked positions weighted ``1 / t``).
It runs on the CPU with one torch thread by default; the run is reproducible for a seed and a
thread count.

The model is undertrained on purpose (``--steps``): its unconstrained samples should be valid
often but well below 90% of the time, so that constrained decoding has something to show. After
training the script reloads the saved file and measures it: per task, ``--samples`` unconstrained
samples (``diffusion_decode(method="none")``, temperature ``--temperature``, confidence
unmasking, one position per step, seeds 0..samples-1), judged by ``jsonschema``, ``lark`` or
``re`` (:func:`constrain.diffusion.tiny_corpus.is_valid`). ``--eval-every N`` also measures every N
steps (on fewer samples) to see the curve; it does not change the training.

    python benchmarks/train_diffusion.py                      # the shipped model
    python benchmarks/train_diffusion.py --steps 300 --out /tmp/m.safetensors --eval-every 100

Prints one JSON object (training time, final loss, file size, valid fraction per task).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from constrain.diffusion import diffusion_decode
from constrain.diffusion.tiny_corpus import TASKS, is_valid, make_corpus
from constrain.diffusion.tiny_model import (
    TinyDiffusionConfig,
    TinyDiffusionLM,
    load_tiny_diffusion,
    save_tiny_diffusion,
    train,
)

DEFAULT_OUT = (
    Path(__file__).resolve().parents[1] / "constrain" / "models" / "tiny_diffusion.safetensors"
)


def unconstrained_validity(
    model: TinyDiffusionLM, samples: int, temperature: float, seed: int = 0
) -> dict[str, Any]:
    """Sample every task ``samples`` times without a constraint; return the valid fractions."""
    out: dict[str, Any] = {}
    examples: dict[str, list[str]] = {}
    total = 0
    for name, task in TASKS.items():
        prompt = model.encode_prompt(task.prompt)
        valid = 0
        examples[name] = []
        for i in range(samples):
            res = diffusion_decode(
                model, None, length=model.max_length - len(prompt), method="none",
                vocab=model.vocabulary, temperature=temperature, seed=seed + i, prompt=prompt,
            )  # fmt: skip
            ok = is_valid(name, res.text)
            valid += ok
            if len(examples[name]) < 3:
                examples[name].append(("ok  " if ok else "BAD ") + res.text)
        out[name] = valid / samples
        total += valid
    out["all"] = total / (samples * len(TASKS))
    out["examples"] = examples
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--corpus-size", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--samples", type=int, default=50, help="unconstrained samples per task")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config = TinyDiffusionConfig()
    model = TinyDiffusionLM(config)
    records = make_corpus(args.corpus_size, args.seed)
    curve: list[dict[str, Any]] = []
    eval_seconds = 0.0

    def log(step: int, loss: float) -> None:
        nonlocal eval_seconds
        row: dict[str, Any] = {"step": step, "loss": round(loss, 4)}
        if args.eval_every and step % args.eval_every == 0:
            t0 = time.perf_counter()
            model.eval()
            valid = unconstrained_validity(model, max(4, args.samples // 4), args.temperature)
            model.train()
            row["valid"] = {k: v for k, v in valid.items() if k != "examples"}
            eval_seconds += time.perf_counter() - t0
        curve.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    losses = train(
        model, records, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        seed=args.seed, log=log, log_every=50,
    )  # fmt: skip
    seconds = time.perf_counter() - t0 - eval_seconds
    info = {
        "script": "benchmarks/train_diffusion.py",
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "corpus_size": args.corpus_size,
        "seed": args.seed,
        "threads": args.threads,
        "train_seconds": round(seconds, 1),
        "final_loss": round(sum(losses[-50:]) / min(50, len(losses)), 4),
        "torch": torch.__version__,
    }
    save_tiny_diffusion(model, args.out, info)
    loaded = load_tiny_diffusion(args.out)
    t1 = time.perf_counter()
    valid = unconstrained_validity(loaded, args.samples, args.temperature)
    report = {
        **info,
        "params": sum(p.numel() for p in loaded.parameters()),
        "file_bytes": args.out.stat().st_size,
        "out": str(args.out),
        "unconstrained_valid": valid,
        "eval_samples_per_task": args.samples,
        "eval_temperature": args.temperature,
        "eval_seconds": round(time.perf_counter() - t1, 1),
        "curve": curve,
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
