"""Sampling exactness on a real model: each sampler's distance to the exact ``P(x | x in L)``.

The default model (SmolLM2-135M-Instruct, ``constrain.load_model()``) answers a chat prompt
("Name an animal.") under a ``choices=`` grammar of 38 lower-case animal names. The language is
small enough to compute the target exactly:

- **Tree.** The model can produce a string through several tokenizations (``hippopotamus`` has
  902 token paths with this tokenizer), and a constrained decoder explores all of them. The
  script enumerates the whole tree of allowed token paths breadth-first: at every node the
  matcher's allowed tokens (EOS when the prefix is a complete choice) and the model's
  next-token log-probabilities (full softmax, temperature 1). The nodes of one depth are one
  batched forward pass of a key-value-cached session whose rows are reordered from their
  parents' (``HFSession.reorder``, the mechanism SMC resamples with).
- **Exact target.** ``P(path) = prod P(token | prefix) * P(EOS | path)``;
  ``P(x | x in L) = sum over the paths of x / sum over all paths``.
- **Exact masked distribution.** Plain masked sampling (renormalise over the allowed tokens at
  every node) gives ``path`` the product of renormalised probabilities; summed per string it is
  what ``MaskedSampler(1.0)`` and ``AWRS()`` (as a token sampler) sample.

Samplers (fixed seeds), each compared with the exact target and with the exact masked
distribution: ``masked`` (``MaskedSampler(1.0)`` through ``decode``, rows batched), ``awrs``
(``AWRS()`` the same way), ``asap`` (one persistent ``ASAp`` object, samples drawn one after the
other), ``smc-awrs`` and ``smc-masked`` (``SMC`` with 32 particles and the AWRS or masked
proposal; one output per run, the particle ``SMCResult.chosen`` draws from the final weights;
runs batched with ``run_batch``).

Distances: total variation ``TV = 1/2 sum |p - q|`` and ``KL(sample || target)`` (finite: every
string has positive target mass; ``KL(target || sample)`` would be infinite whenever a string is
unseen). The **noise floor** is the TV (and KL) of an empirical distribution of the same size
drawn from the exact distribution itself (numpy multinomial, 300 draws): its mean and 95th
percentile. A sampler well beyond the 95th percentile is not sampling that distribution.

Besides the plain samples, every method has an importance-weighted estimate
(``weighted TV``): masked and AWRS self-normalise their summed log-weights, ASAp its
``log P - log Q``, SMC pools the particles of all runs with their unnormalised final weights
(runs weighted by their marginal-likelihood estimate). These converge to the target as the
number of samples grows, whatever the proposal; SMC's ``chosen`` output alone has the bias of a
finite particle count.

**SMC reference.** With 32 particles, the chosen output of SMC is not distributed as the target
even when the implementation is right (self-normalisation within a run). A numpy simulation of
the same algorithm on the exact tree (masked proposal; no model, no matcher, no constrain code)
gives the expected distribution of that output for 32, 128 and 512 particles: its distance to
the target is the finite-particle bias, and the SMC rows are also compared with it (the AWRS
proposal's heavier-tailed weights put its own expected output farther from the target at a
given particle count).

Results go to ``benchmarks/results/sampling-exactness.json``, overwritten (machine, versions, seeds,
choices, exact target and masked distribution per string with their path counts, each method's
empirical and weighted distributions).

    python benchmarks/sampling_exactness.py                 # 2000 samples, 200 SMC runs (~14 min)
    python benchmarks/sampling_exactness.py --quick         # smoke run: 100 samples, 10 SMC runs
    python benchmarks/sampling_exactness.py --samples N --smc-runs R [--particles 32]
        [--methods masked,awrs,asap,smc-awrs,smc-masked] [--seed 0] [--threads 1]
        [--batch 250] [--smc-batch 16] [--ref-runs 2000] [--out PATH]

Cost notes (2 shared CPU cores): the prompt is prefilled once and its key-value cache copied
into every batch (``PrefilledSession``; a 512-row prefill costs about a minute otherwise);
``--threads 1`` is the default because, with another job on the machine, two torch threads
made a one-row decoding step 5x slower and a 512-row step 4.6x slower.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import args_record, machine, result_path, shown, write_result

from constrain.testing import empirical, kl_divergence, total_variation

ALL_METHODS = ("masked", "awrs", "asap", "smc-awrs", "smc-masked")
PROMPT = "Name an animal."
# Common and rare animals; several long names that the tokenizer splits in many ways.
CHOICES = [
    "dog", "cat", "lion", "tiger", "elephant", "giraffe", "hippopotamus", "orangutan", "zebra",
    "kangaroo", "penguin", "dolphin", "whale", "rabbit", "horse", "cow", "pig", "sheep", "goat",
    "chicken", "duck", "owl", "eagle", "snake", "frog", "turtle", "crocodile", "platypus",
    "armadillo", "chimpanzee", "rhinoceros", "wolf", "fox", "bear", "squirrel", "hedgehog",
    "octopus", "axolotl",
]  # fmt: skip
MAX_TOKENS = 16  # the longest path (hippopotamus, one byte per token) has 12 tokens
NOISE_DRAWS = 300


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- distances --------------------------------------------------------------------------------


def weighted(samples: Sequence[str], log_weights: Sequence[float]) -> dict[str, float]:
    """Return the self-normalised importance-weighted distribution (empty if all weights 0)."""
    lw = np.asarray(log_weights, dtype=np.float64)
    finite = np.isfinite(lw)
    if not finite.any():
        return {}
    w = np.zeros_like(lw)
    w[finite] = np.exp(lw[finite] - lw[finite].max())
    out: dict[str, float] = {}
    for s, wi in zip(samples, w.tolist(), strict=True):
        if wi > 0.0:
            out[s] = out.get(s, 0.0) + wi
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


def noise_floor(dist: Mapping[str, float], n: int, seed: int) -> dict[str, float]:
    """TV and KL(sample || dist) of ``n``-sample empirical distributions drawn from ``dist``."""
    keys = list(dist)
    p = np.asarray([dist[k] for k in keys], dtype=np.float64)
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, p, size=NOISE_DRAWS) / n
    tv = 0.5 * np.abs(counts - p).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(counts > 0, counts * np.log(counts / p), 0.0)
    kl = terms.sum(axis=1)
    return {
        "tv_mean": float(tv.mean()),
        "tv_p95": float(np.quantile(tv, 0.95)),
        "kl_mean": float(kl.mean()),
        "kl_p95": float(np.quantile(kl, 0.95)),
    }


# -- the exact distributions --------------------------------------------------------------------


def text_of(vocab: Any, tokens: Sequence[int]) -> str:
    return b"".join(vocab.token_bytes_of(int(t)) for t in tokens).decode("utf-8", "replace")


def enumerate_tree(model: Any, compiled: Any, prompt_ids: list[int]) -> dict[str, Any]:
    """Enumerate every allowed token path with the model's and the masked log-probabilities.

    Returns ``paths`` (text, tokens, log P(path, EOS), log Q_masked(path, EOS)), the number of
    nodes per depth and ``table``: per node (its token prefix), the allowed ids and the model's
    log-probabilities of them.
    """
    from constrain.matcher import Matcher

    eos = set(model.eos_ids)
    vocab = model.vocabulary
    t0 = time.perf_counter()
    session = model.start([prompt_ids])
    logits = session.forward(None)
    # frontier rows: (matcher, tokens, log P(prefix), log Q_masked(prefix))
    frontier: list[tuple[Any, list[int], float, float]] = [(Matcher(compiled), [], 0.0, 0.0)]
    paths: list[dict[str, Any]] = []
    per_depth: list[int] = []
    table: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    while frontier:
        per_depth.append(len(frontier))
        logp = torch.log_softmax(logits.double(), dim=-1)
        children: list[tuple[Any, list[int], float, float]] = []
        parents: list[int] = []
        feed: list[int] = []
        for row, (m, toks, lp, lq) in enumerate(frontier):
            allowed = torch.from_numpy(m.allowed_token_ids().astype(np.int64))
            vals = logp[row, allowed]
            norm = float(torch.logsumexp(vals, dim=0))
            table[tuple(toks)] = (allowed.numpy(), vals.numpy())
            eos_lp: list[float] = []
            for tok, v in zip(allowed.tolist(), vals.tolist(), strict=True):
                if tok in eos:
                    eos_lp.append(v)
                    continue
                child = m.fork()
                if not child.accept_token(tok):
                    raise RuntimeError(f"the matcher rejects token {tok} it allowed")
                children.append((child, [*toks, tok], lp + v, lq + v - norm))
                parents.append(row)
                feed.append(tok)
            if eos_lp:  # one end: the EOS ids' mass together
                v = float(torch.logsumexp(torch.tensor(eos_lp, dtype=torch.float64), dim=0))
                paths.append(
                    {
                        "text": text_of(vocab, toks),
                        "tokens": toks,
                        "logp": lp + v,
                        "logq_masked": lq + v - norm,
                    }
                )
        log(
            f"  tree depth {len(per_depth) - 1}: {len(frontier)} nodes, "
            f"{len(children)} children ({time.perf_counter() - t0:.0f} s)"
        )
        if not children:
            break
        session.reorder(torch.tensor(parents, dtype=torch.long))
        logits = session.forward(torch.tensor(feed, dtype=torch.long))
        frontier = children
    del session
    return {
        "paths": paths,
        "nodes_per_depth": per_depth,
        "nodes": sum(per_depth),
        "table": table,
        "seconds": time.perf_counter() - t0,
    }


def exact_distributions(model: Any, tree: dict[str, Any]) -> dict[str, Any]:
    """Per string: target, masked probability, number of paths, canonical path's share."""
    by_text: dict[str, list[dict[str, Any]]] = {}
    for p in tree["paths"]:
        by_text.setdefault(p["text"], []).append(p)
    all_lp = np.asarray([p["logp"] for p in tree["paths"]], dtype=np.float64)
    log_z = float(np.logaddexp.reduce(all_lp))
    out: dict[str, Any] = {}
    for text, ps in by_text.items():
        lps = np.asarray([p["logp"] for p in ps], dtype=np.float64)
        lse = float(np.logaddexp.reduce(lps))
        canon = [int(t) for t in model.tokenizer(text, add_special_tokens=False)["input_ids"]]
        canon_lp = next((p["logp"] for p in ps if p["tokens"] == canon), -math.inf)
        best = max(ps, key=lambda p: p["logp"])
        out[text] = {
            "target": math.exp(lse - log_z),
            "masked": float(sum(math.exp(p["logq_masked"]) for p in ps)),
            "paths": len(ps),
            "log_p": lse,
            "canonical_tokens": canon,
            "canonical_share": math.exp(canon_lp - lse),
            "most_likely_path": best["tokens"],
        }
    return {"log_z": log_z, "strings": out}


def reference_smc(
    model: Any, tree: dict[str, Any], n_particles: int, runs: int, seed: int
) -> dict[str, float]:
    """Simulate SMC with the masked proposal on the exact tree (numpy; no model, no matcher).

    The same algorithm as :class:`constrain.sampling.SMC` with ``MaskedSampler(1.0)``: every
    live particle draws its next token from the renormalised allowed distribution and multiplies
    its weight by the allowed mass; after every step a run whose effective sample size is below
    ``n_particles / 2`` (and that has a live particle) resamples all its particles
    (multinomial), which then carry the run's mean weight; the output is a particle drawn from
    the final weights. Returns the expected distribution of that output, averaged over ``runs``
    runs (the mean of the runs' normalised particle weights), the reference a finite particle
    count converges to instead of the target.
    """
    eos = set(model.eos_ids)
    vocab = model.vocabulary
    nodes: dict[tuple[int, ...], tuple[list[int], np.ndarray, float]] = {}
    for key, (allowed, logp) in tree["table"].items():
        z = float(np.logaddexp.reduce(logp))
        probs = np.exp(logp - z)
        nodes[key] = (allowed.tolist(), probs / probs.sum(), z)
    rng = np.random.default_rng(seed)
    n = n_particles
    out: dict[str, float] = {}
    for _ in range(runs):
        prefix: list[tuple[int, ...]] = [()] * n
        alive = [True] * n
        logw = np.zeros(n)
        while any(alive):
            for i in range(n):
                if not alive[i]:
                    continue
                allowed, probs, z = nodes[prefix[i]]
                tok = allowed[int(rng.choice(len(allowed), p=probs))]
                logw[i] += z
                if tok in eos:
                    alive[i] = False
                else:
                    prefix[i] = (*prefix[i], tok)
            w = np.exp(logw - logw.max())
            if any(alive) and w.sum() ** 2 / (w**2).sum() < 0.5 * n:
                idx = rng.choice(n, size=n, p=w / w.sum())
                mean = float(logw.max() + math.log(w.mean()))
                prefix = [prefix[k] for k in idx]
                alive = [alive[k] for k in idx]
                logw = np.full(n, mean)
        w = np.exp(logw - logw.max())
        w /= w.sum()
        for i in range(n):
            text = text_of(vocab, prefix[i])
            out[text] = out.get(text, 0.0) + float(w[i]) / runs
    return out


# -- samplers -----------------------------------------------------------------------------------


class PrefilledSession:
    """A session of ``rows`` copies of the prompt, started from a cache computed once.

    ``decode``, ``SMC`` and ``ASAp`` call ``forward(None)`` first (the prefill); it returns the
    stored logits, so the prompt's forward pass runs once per benchmark instead of once per row
    (on two CPU cores a 512-row prefill costs about a minute). Later calls and ``reorder`` go to
    an ``HFSession`` holding a copy of the prompt's key-value cache.
    """

    def __init__(self, prompt: PromptCache, rows: int) -> None:
        model = prompt.model
        self.session = model.start([prompt.ids])
        self.session.cache = copy.deepcopy(prompt.cache)
        if rows > 1:
            self.session.reorder(torch.zeros(rows, dtype=torch.long))
        self.first = prompt.logits.expand(rows, -1)

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        if token_ids is None:
            return self.first.clone()  # samplers mask the logits in place
        return self.session.forward(token_ids)

    def reorder(self, indices: Sequence[int] | torch.Tensor) -> None:
        self.session.reorder(indices)


class PromptCache:
    """The prompt's key-value cache and next-token logits, computed once."""

    def __init__(self, model: Any, ids: list[int]) -> None:
        self.model = model
        self.ids = ids
        session = model.start([ids])
        self.logits = session.forward(None)
        self.cache = session.cache

    def session(self, rows: int) -> PrefilledSession:
        return PrefilledSession(self, rows)


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def run_token_sampler(
    ctx: dict[str, Any], make_sampler: Any, n: int, batch: int, seed: int
) -> dict[str, Any]:
    """Sample ``n`` outputs with a token-level sampler through ``decode``, ``batch`` rows a time.

    The runners build their matchers with ``canonical=ctx.get("canonical")`` (a
    ``CanonicalBpe``; ``canonical_fidelity.py`` sets it).
    """
    from constrain.decoding.autoregressive import decode
    from constrain.matcher import Matcher

    model = ctx["model"]
    sampler = make_sampler()
    texts: list[str] = []
    lws: list[float] = []
    reasons: Counter[str] = Counter()
    t0 = time.perf_counter()
    done = 0
    k = 0
    while done < n:
        b = min(batch, n - done)
        session = ctx["prompt"].session(b)
        matchers = [Matcher(ctx["compiled"], canonical=ctx.get("canonical")) for _ in range(b)]
        res = decode(
            session,
            matchers,
            sampler,
            eos_ids=model.eos_ids,
            max_tokens=MAX_TOKENS,
            generator=_generator(seed + k),
        )
        texts += [text_of(model.vocabulary, t) for t in res.token_ids]
        lws += res.log_weights
        reasons.update(res.finish_reasons)
        done += b
        k += 1
        log(f"    {done}/{n} ({time.perf_counter() - t0:.0f} s)")
    out: dict[str, Any] = {
        "texts": texts,
        "log_weights": lws,
        "seconds": time.perf_counter() - t0,
        "finish_reasons": dict(reasons),
    }
    stats = getattr(sampler, "stats", None)
    if stats:
        arr = np.asarray(stats)
        out["awrs_checks_per_token"] = {
            "mean": float(arr.mean()),
            "p50": float(np.median(arr)),
            "p99": float(np.quantile(arr, 0.99)),
            "max": int(arr.max()),
            "fallbacks": int(sampler.fallbacks),
        }
    return out


def run_asap(ctx: dict[str, Any], n: int, seed: int) -> dict[str, Any]:
    from constrain.decoding import ASAp
    from constrain.matcher import Matcher

    model = ctx["model"]
    asap = ASAp(temperature=1.0)
    matcher = Matcher(ctx["compiled"], canonical=ctx.get("canonical"))
    gen = _generator(seed)
    ids = ctx["prompt_ids"]
    texts: list[str] = []
    lws: list[float] = []
    reasons: Counter[str] = Counter()
    t0 = time.perf_counter()
    chunk = max(1, n // 10)
    while len(texts) < n:
        got = asap.sample(
            lambda: ctx["prompt"].session(1),
            matcher,
            max_tokens=MAX_TOKENS,
            n=min(chunk, n - len(texts)),
            eos_ids=model.eos_ids,
            generator=gen,
            key=tuple(ids),
        )
        texts += [text_of(model.vocabulary, s.token_ids) for s in got]
        lws += [s.log_weight for s in got]
        reasons.update(s.finish_reason for s in got)
        log(
            f"    {len(texts)}/{n} ({time.perf_counter() - t0:.0f} s, trie {asap.trie_size}, "
            f"forward passes {asap.forward_passes})"
        )
    return {
        "texts": texts,
        "log_weights": lws,
        "seconds": time.perf_counter() - t0,
        "finish_reasons": dict(reasons),
        "trie_size": asap.trie_size,
        "forward_passes": asap.forward_passes,
        "expected_future_root": asap.expected_future(()),
    }


def run_smc(
    ctx: dict[str, Any], proposal: str, runs: int, particles: int, per_batch: int, seed: int
) -> dict[str, Any]:
    from constrain.decoding import SMC
    from constrain.matcher import Matcher
    from constrain.sampling import AWRS, MaskedSampler

    model = ctx["model"]
    prop = AWRS() if proposal == "awrs" else MaskedSampler(1.0)
    smc = SMC(prop, n_particles=particles)
    chosen: list[str] = []
    expected_chosen: dict[str, float] = {}  # sum over runs of the normalised particle weights
    pooled_texts: list[str] = []
    pooled_lw: list[float] = []
    run_log_z: list[float] = []
    resamples: list[int] = []
    failed = 0
    t0 = time.perf_counter()
    k = 0
    while len(run_log_z) < runs:
        b = min(per_batch, runs - len(run_log_z))
        session = ctx["prompt"].session(b * particles)
        matchers = [Matcher(ctx["compiled"], canonical=ctx.get("canonical")) for _ in range(b)]
        results = smc.run_batch(
            session,
            matchers,
            eos_ids=model.eos_ids,
            max_tokens=MAX_TOKENS,
            generator=_generator(seed + k),
        )
        for r in results:
            texts = [text_of(model.vocabulary, t) for t in r.token_ids]
            if r.chosen is None:
                failed += 1
            else:
                chosen.append(texts[r.chosen])
            for t, w in zip(texts, r.weights, strict=True):
                expected_chosen[t] = expected_chosen.get(t, 0.0) + w
            pooled_texts += texts
            pooled_lw += r.log_weights
            run_log_z.append(r.log_marginal_likelihood)
            resamples.append(r.resamples)
        k += 1
        log(f"    {len(run_log_z)}/{runs} runs ({time.perf_counter() - t0:.0f} s)")
    lz = np.asarray(run_log_z)
    fin = lz[np.isfinite(lz)]
    return {
        "texts": chosen,
        "expected_chosen": {k: v / runs for k, v in expected_chosen.items()},
        "pooled_texts": pooled_texts,
        "pooled_log_weights": pooled_lw,
        "seconds": time.perf_counter() - t0,
        "runs": runs,
        "failed_runs": failed,
        "particles": particles,
        "mean_resamples": float(np.mean(resamples)),
        "log_z_estimate": float(np.logaddexp.reduce(fin) - math.log(len(lz))) if fin.size else None,
        "log_z_per_run_median": float(np.median(fin)) if fin.size else None,
    }


# -- report -------------------------------------------------------------------------------------


def summarise(
    name: str,
    res: dict[str, Any],
    target: dict[str, float],
    masked: dict[str, float],
    seed: int,
    smc_reference: dict[str, float] | None = None,
) -> dict[str, Any]:
    texts = res["texts"]
    n = len(texts)
    emp = empirical(texts)
    outside = sum(1 for t in texts if t not in target)
    if name.startswith("smc"):
        wdist = weighted(res["pooled_texts"], res["pooled_log_weights"])
    else:
        wdist = weighted(texts, res["log_weights"])
    summary = {
        "samples": n,
        "seconds": res["seconds"],
        "outside_language": outside,
        "tv_target": total_variation(emp, target),
        "kl_sample_target": kl_divergence(emp, target),
        "noise_target": noise_floor(target, n, seed) if n else None,
        "tv_masked": total_variation(emp, masked),
        "kl_sample_masked": kl_divergence(emp, masked),
        "noise_masked": noise_floor(masked, n, seed + 1) if n else None,
        "weighted_tv_target": total_variation(wdist, target) if wdist else None,
    }
    if "expected_chosen" in res:
        summary["expected_chosen_tv_target"] = total_variation(res["expected_chosen"], target)
    if smc_reference and n:
        summary["tv_smc_reference"] = total_variation(emp, smc_reference)
        summary["noise_smc_reference"] = noise_floor(smc_reference, n, seed + 3)
    if name == "asap" and n >= 4:
        half = texts[n // 2 :]
        summary["tv_target_second_half"] = total_variation(empirical(half), target)
        summary["noise_target_second_half"] = noise_floor(target, len(half), seed + 2)
    extra = {
        k: v
        for k, v in res.items()
        if k
        not in ("texts", "log_weights", "pooled_texts", "pooled_log_weights", "expected_chosen")
    }
    return {
        "summary": summary,
        "empirical": dict(sorted(emp.items(), key=lambda kv: -kv[1])),
        "weighted": dict(sorted(wdist.items(), key=lambda kv: -kv[1])),
        **(
            {"expected_chosen": dict(sorted(res["expected_chosen"].items(), key=lambda kv: -kv[1]))}
            if "expected_chosen" in res
            else {}
        ),
        "details": extra,
    }


def print_table(exact: dict[str, Any], methods: dict[str, Any], references: dict[int, Any]) -> None:
    strings = exact["strings"]
    target = {s: v["target"] for s, v in strings.items()}
    masked = {s: v["masked"] for s, v in strings.items()}
    print()
    print(
        f"exact: masked vs target  TV {total_variation(masked, target):.4f}  "
        f"KL(target||masked) {kl_divergence(target, masked):.4f}  "
        f"KL(masked||target) {kl_divergence(masked, target):.4f}  "
        f"P_LM(L) = {math.exp(exact['log_z']):.3g}"
    )
    print()
    head = (
        f"{'method':11s} {'n':>5s} {'TV tgt':>7s} {'KL s||t':>8s} {'floor TV':>13s} "
        f"{'TV msk':>7s} {'floor TV':>13s} {'wTV tgt':>7s} {'seconds':>8s}"
    )
    print(head)
    print("-" * len(head))
    for name, r in methods.items():
        s = r["summary"]
        nt, nm = s["noise_target"], s["noise_masked"]
        wtv = s["weighted_tv_target"]
        print(
            f"{name:11s} {s['samples']:5d} {s['tv_target']:7.4f} {s['kl_sample_target']:8.4f} "
            f"{nt['tv_mean']:6.4f}/{nt['tv_p95']:6.4f} {s['tv_masked']:7.4f} "
            f"{nm['tv_mean']:6.4f}/{nm['tv_p95']:6.4f} "
            f"{'-' if wtv is None else f'{wtv:.4f}':>7s} {s['seconds']:8.1f}"
        )
    print(
        "(TV tgt / KL s||t: sample vs exact target; floor TV: mean/p95 TV of a sample of that "
        "size from the exact distribution; TV msk: vs exact masked distribution; wTV tgt: the "
        "importance-weighted estimate vs target)"
    )
    if "asap" in methods and "tv_target_second_half" in methods["asap"]["summary"]:
        s = methods["asap"]["summary"]
        f = s["noise_target_second_half"]
        print(
            f"asap, second half of the samples only: TV tgt {s['tv_target_second_half']:.4f} "
            f"(floor {f['tv_mean']:.4f}/{f['tv_p95']:.4f})"
        )
    for name, r in methods.items():
        s = r["summary"]
        if "expected_chosen_tv_target" in s:
            print(
                f"{name}: TV of the expected chosen distribution (mean over runs of the normalised "
                f"particle weights) {s['expected_chosen_tv_target']:.4f}; Z-weighted pooled "
                f"particles {s['weighted_tv_target']:.4f}"
            )
        if "tv_smc_reference" in s:
            f = s["noise_smc_reference"]
            print(
                f"{name}: TV to the reference SMC's expected output (same particle count, "
                f"masked proposal) {s['tv_smc_reference']:.4f} "
                f"(floor {f['tv_mean']:.4f}/{f['tv_p95']:.4f})"
            )
    if references:
        parts = ", ".join(
            f"{k} particles {v['tv_target']:.4f} ({v['runs']} runs)" for k, v in references.items()
        )
        print(
            f"reference SMC (numpy, exact tree), TV of its expected output to the target: {parts}"
        )
    print()
    order = sorted(strings, key=lambda s: -strings[s]["target"])
    cols = list(methods)
    print(
        f"{'string':13s} {'paths':>5s} {'target':>7s} {'masked':>7s} "
        + " ".join(f"{c:>10s}" for c in cols)
    )
    for s in order:
        v = strings[s]
        row = " ".join(f"{methods[c]['empirical'].get(s, 0.0):10.4f}" for c in cols)
        print(f"{s:13s} {v['paths']:5d} {v['target']:7.4f} {v['masked']:7.4f} {row}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2000, help="samples for masked, awrs, asap")
    ap.add_argument("--smc-runs", type=int, default=200, help="SMC runs (one output each)")
    ap.add_argument("--particles", type=int, default=32)
    ap.add_argument("--methods", default=",".join(ALL_METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=250, help="rows per decode batch")
    ap.add_argument("--smc-batch", type=int, default=16, help="SMC runs per run_batch call")
    ap.add_argument(
        "--ref-runs",
        type=int,
        default=2000,
        help="runs of the numpy reference SMC (4x and 16x the particles: 1/4 and 1/16 of them)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared 2-core machine, 2 threads ran 5-25x slower; "
        "0: torch's default)",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: 100 samples, 10 SMC runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.samples, args.smc_runs, args.ref_runs = 100, 10, 200
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in ALL_METHODS:
            ap.error(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    if args.threads:
        torch.set_num_threads(args.threads)

    import constrain
    from constrain.output import output_type

    t_all = time.perf_counter()
    t0 = time.perf_counter()
    model = constrain.load_model()
    load_s = time.perf_counter() - t0
    model.model.eval()
    compiled = model.compile(output_type(choices=CHOICES).grammar)
    prompt_ids = model.encode_prompt(PROMPT)
    ctx = {
        "model": model,
        "compiled": compiled,
        "prompt_ids": prompt_ids,
        "prompt": PromptCache(model, prompt_ids),
    }
    log(f"model {model.name} loaded in {load_s:.1f} s; {torch.get_num_threads()} torch threads")

    log("enumerating the tree of allowed token paths")
    tree = enumerate_tree(model, compiled, prompt_ids)
    exact = exact_distributions(model, tree)
    strings = exact["strings"]
    missing = sorted(set(CHOICES) - set(strings))
    if missing:
        raise RuntimeError(f"the tree has no path for {missing}")
    target = {s: v["target"] for s, v in strings.items()}
    masked = {s: v["masked"] for s, v in strings.items()}
    log(
        f"tree: {tree['nodes']} nodes, {len(tree['paths'])} complete paths, "
        f"{tree['seconds']:.0f} s; masked vs target TV {total_variation(masked, target):.4f}"
    )

    seeds = {m: args.seed + 1000 * i for i, m in enumerate(ALL_METHODS)}
    references: dict[int, Any] = {}
    if any(m.startswith("smc") for m in methods):
        # the expected output of SMC with a finite particle count (masked proposal), and how
        # it approaches the target as the particle count grows
        for k, mult in enumerate((1, 4, 16)):
            n_ref = args.particles * mult
            runs_ref = max(25, args.ref_runs // mult)
            t0 = time.perf_counter()
            dist = reference_smc(model, tree, n_ref, runs_ref, args.seed + 77 + k)
            references[n_ref] = {
                "runs": runs_ref,
                "tv_target": total_variation(dist, target),
                "seconds": time.perf_counter() - t0,
                "expected_chosen": dict(sorted(dist.items(), key=lambda kv: -kv[1])),
            }
            log(
                f"reference SMC, {n_ref} particles, {runs_ref} runs: expected output's TV to "
                f"the target {references[n_ref]['tv_target']:.4f} "
                f"({references[n_ref]['seconds']:.0f} s)"
            )
    per_method: dict[str, Any] = {}
    for m in methods:
        log(f"{m}:")
        if m == "masked":
            from constrain.sampling import MaskedSampler

            res = run_token_sampler(
                ctx, lambda: MaskedSampler(1.0), args.samples, args.batch, seeds[m]
            )
        elif m == "awrs":
            from constrain.sampling import AWRS

            res = run_token_sampler(ctx, AWRS, args.samples, args.batch, seeds[m])
        elif m == "asap":
            res = run_asap(ctx, args.samples, seeds[m])
        else:
            proposal = m.split("-", 1)[1]
            res = run_smc(ctx, proposal, args.smc_runs, args.particles, args.smc_batch, seeds[m])
        ref = references.get(args.particles) if m.startswith("smc") else None
        per_method[m] = summarise(
            m, res, target, masked, seeds[m] + 7, ref["expected_chosen"] if ref else None
        )
        s = per_method[m]["summary"]
        log(
            f"  {m}: {s['samples']} samples, TV {s['tv_target']:.4f} "
            f"(floor {s['noise_target']['tv_mean']:.4f}), {s['seconds']:.0f} s"
        )

    wall = time.perf_counter() - t_all
    print_table(exact, per_method, references)
    print(f"\nwall time {wall:.0f} s (tree {tree['seconds']:.0f} s)")

    out = args.out or result_path("sampling-exactness")
    meta = {
        **machine(),
        "model": model.name,
        "device": str(model.device),
        "torch_threads": torch.get_num_threads(),
        "args": args_record(args),
        "seeds": seeds,
        "noise_draws": NOISE_DRAWS,
        "max_tokens": MAX_TOKENS,
        "model_load_seconds": load_s,
        "wall_seconds": wall,
    }
    payload = {
        "meta": meta,
        "prompt": PROMPT,
        "prompt_ids": prompt_ids,
        "choices": CHOICES,
        "tree": {
            "nodes": tree["nodes"],
            "complete_paths": len(tree["paths"]),
            "nodes_per_depth": tree["nodes_per_depth"],
            "seconds": tree["seconds"],
        },
        "exact": {
            "log_p_language": exact["log_z"],
            "tv_masked_target": total_variation(masked, target),
            "kl_target_masked": kl_divergence(target, masked),
            "kl_masked_target": kl_divergence(masked, target),
            "strings": dict(sorted(strings.items(), key=lambda kv: -kv[1]["target"])),
        },
        "methods": per_method,
        "smc_reference": {str(k): v for k, v in references.items()},
    }
    write_result(out, payload)
    print(f"results: {shown(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
