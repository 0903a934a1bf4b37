"""Generation benchmark: tokens/s of the default model, unconstrained vs JSON-Schema constrained.

One process, one model (the embedded default, SmolLM2-135M-Instruct, loaded with
``constrain.load_model()``), the same chat prompts, greedy decoding, and the same number of new
tokens ``N`` for every configuration:

- ``hf``                 transformers ``model.generate`` unconstrained (``min_new_tokens=N``
                         suppresses EOS, so every run produces exactly N tokens);
- ``hf+constrain``       ``generate`` + ``constrain.integrations.transformers.LogitsProcessor``;
- ``hf+llguidance``      ``generate`` + a minimal llguidance processor written here (llguidance
                         ships no transformers LogitsProcessor): one ``LLMatcher`` per row
                         (``deep_copy`` of a pristine one), ``consume_token`` of the last token,
                         ``llguidance.torch.fill_next_token_bitmask`` (``_par`` with an
                         ``LLExecutor`` for batches) and ``llguidance.torch
                         .apply_token_bitmask_inplace``; it mirrors constrain's processor;
- ``hf+xgrammar``        ``generate`` + ``xgrammar.contrib.hf.LogitsProcessor``;
- ``loop``               constrain's own KV-cached loop (``constrain.decoding.decode``, what
                         ``constrain.generate`` runs) unconstrained (matchers ``None``, EOS
                         masked out);
- ``loop+constrain``     the same loop with a ``Matcher`` per row and ``MaskedSampler``, with the
                         next mask computed in a worker thread during the forward pass
                         (``overlap=True``) and without it (``loop+constrain/no-overlap``,
                         ``overlap=False``; what ``decode``'s default does on a CPU);
- ``loop+constrain+canonical`` (``--canonical``) the same with canonical tokenization on
                         (``Matcher(compiled, canonical=model.canonical())``, what
                         ``generate(..., canonical=True)`` runs), overlapped or not as above.

The schema (``SCHEMA``) is an object holding an array of exactly ``MIN_ITEMS`` (4) product
objects of six fields: no grammar can finish before N (= 128 by default) tokens (the outputs are
about 200-300 tokens long), and the validation runs end well within ``--validate-tokens``; a
timed run that ends early anyway is counted on the tokens it produced and flagged. Every engine
gets compact JSON (no whitespace, separators ``,`` and ``:``), so all of them constrain nearly
the same language (constrain also admits integral numbers such as ``10.0`` for ``integer``, as
JSON Schema does; llguidance admits only the canonical tokenization of forced text).

Timing: a warm-up run of every configuration first; then for each repeat and each prompt, all
configurations run back to back in a shuffled order (so drift of the machine hits them alike).
``tok/s`` is the end-to-end rate of a call (prefill included: N / wall time), ``decode tok/s``
excludes the prefill and the first token ((N - 1) / time after the first token was chosen). Both
are medians over repeats of (tokens of all prompts / time of all prompts); ``ratio`` is the
median over repeats of the paired ratio to the matching unconstrained baseline (``hf`` for the
``hf+*`` rows, ``loop`` for the ``loop*`` rows). ``proc ms`` is the time spent inside the
logits processor per step (HF rows). ``mask ms`` replays each configuration's constraint work
alone, without the model (random scores, the tokens of its own first timed run), which is what
the per-step overhead is when the forward pass does not disturb it (and the only way to see it
for the overlapped loop).

Also reported: compile time of the schema per engine (fresh compiler, median of 3), tokenizer
preparation per engine, validity of complete outputs (one extra run per constrained
configuration bar the no-overlap loop, all prompts as one batch, up to ``--validate-tokens``
tokens, checked with ``jsonschema``), agreement of the greedy outputs between configurations,
model load time and peak RSS (each measured in a fresh subprocess per configuration,
``VmHWM``), and with ``--conversion`` the one-time GGUF -> safetensors conversion in a temporary
cache.

    python benchmarks/bench_generate.py                  # full run
    python benchmarks/bench_generate.py --quick          # smoke run (a minute or two)
    python benchmarks/bench_generate.py --tokens 128 --repeats 2 --prompts 4 --batch 1,4
        [--engines constrain,llguidance,xgrammar] [--overlap both|on|off] [--canonical]
        [--conversion]
        [--no-probes] [--validate-tokens 0] [--out benchmarks/results/generate.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    INSTALL_HINT,
    dist_version,
    loadavg,
    log,
    machine,
    result_path,
    shown,
    write_result,
)

ALL_ENGINES = ("constrain", "llguidance", "xgrammar")
REPLAY_REPEATS = 3

MIN_ITEMS = 4
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "products": {
            "type": "array",
            "minItems": MIN_ITEMS,
            "maxItems": MIN_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string", "maxLength": 40},
                    "category": {"type": "string", "maxLength": 30},
                    "price_cents": {"type": "integer"},
                    "in_stock": {"type": "boolean"},
                    "description": {"type": "string", "maxLength": 80},
                },
                "required": ["id", "name", "category", "price_cents", "in_stock", "description"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["products"],
    "additionalProperties": False,
}

PROMPTS = [
    "List ten products sold by an online hardware store as JSON, with a short description of each.",
    "Create a JSON catalogue of twelve books from a second-hand bookshop, with prices and a "
    "one-sentence summary of each book.",
    "Generate JSON inventory data for a grocery shop: at least ten products with their "
    "category, price and a description.",
    "Give me a JSON list of ten gadgets from an electronics store, with descriptions.",
    "Produce a JSON product feed for a garden centre with ten plants and tools.",
    "Write the JSON catalogue of a toy shop: ten toys with prices and descriptions.",
    "Return a JSON list of ten kitchen utensils sold by a department store.",
    "As JSON, list ten items of sports equipment with prices and short descriptions.",
]

BASELINE = {
    "hf+constrain": "hf",
    "hf+llguidance": "hf",
    "hf+xgrammar": "hf",
    "loop+constrain": "loop",
    "loop+constrain/no-overlap": "loop",
    "loop+constrain+canonical": "loop",
    "loop+constrain+canonical/no-overlap": "loop",
}
LABELS = {
    "hf": "HF generate, unconstrained",
    "hf+constrain": "HF generate + constrain processor",
    "hf+llguidance": "HF generate + llguidance processor*",
    "hf+xgrammar": "HF generate + xgrammar processor",
    "loop": "constrain loop, unconstrained",
    "loop+constrain": "constrain loop + schema (overlap)",
    "loop+constrain/no-overlap": "constrain loop + schema (no overlap)",
    "loop+constrain+canonical": "constrain loop + schema + canonical",
    "loop+constrain+canonical/no-overlap": "... + canonical (no overlap)",
}


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB.

    ``VmHWM`` of /proc/self/status where there is one: on Linux ``ru_maxrss`` survives
    fork + exec, so a child of a big process would report its parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except (OSError, ValueError, IndexError):
        pass
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kib / (1024.0 if sys.platform != "darwin" else 1024.0 * 1024.0), 1)


def current_rss_mb() -> float | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


# --------------------------------------------------------------------------------------------
# Engines: compile the schema, build a transformers LogitsProcessor
# --------------------------------------------------------------------------------------------


def _hf_processor_base() -> type:
    from transformers import LogitsProcessor

    return LogitsProcessor


class Engine:
    """One structured-generation engine: tokenizer data, compile, a processor per call."""

    name = ""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.compiled: Any = None
        self.prepare_ms = 0.0
        self.version: str | None = None

    def prepare(self) -> None:
        raise NotImplementedError

    def compile_fresh(self) -> Any:
        """Compile SCHEMA with a fresh compiler (no cache hit possible)."""
        raise NotImplementedError

    def processor(self, batch_size: int) -> Any:
        raise NotImplementedError


class ConstrainEngine(Engine):
    name = "constrain"

    def prepare(self) -> None:
        import constrain

        self.version = str(getattr(constrain, "__version__", None))
        t0 = time.perf_counter()
        constrain.Vocabulary.from_huggingface(
            self.model.tokenizer,
            vocab_size=self.model.vocabulary.size,
            eos_ids=self.model.eos_ids,
        )
        self.prepare_ms = (time.perf_counter() - t0) * 1e3

    def compile_fresh(self) -> Any:
        import constrain

        compiler = constrain.Compiler(self.model.vocabulary)
        return compiler.compile(constrain.Grammar.from_json_schema(SCHEMA))

    def processor(self, batch_size: int) -> Any:
        from constrain.integrations.transformers import LogitsProcessor

        return LogitsProcessor(self.compiled, batch_size=batch_size)


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def prepare(self) -> None:
        import llguidance
        import llguidance.hf

        self.version = dist_version("llguidance")
        self._llg = llguidance
        t0 = time.perf_counter()
        self.tokenizer = llguidance.hf.from_tokenizer(
            self.model.tokenizer, n_vocab=self.model.vocabulary.size
        )
        self.prepare_ms = (time.perf_counter() - t0) * 1e3
        self.grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(SCHEMA),
            defaults={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"},
        )
        self.executor = llguidance.LLExecutor()

    def compile_fresh(self) -> Any:
        matcher = self._llg.LLMatcher(self.tokenizer, self.grammar, log_level=0)
        if matcher.is_error():
            raise RuntimeError(f"llguidance: {matcher.get_error()}")
        return matcher

    def processor(self, batch_size: int) -> Any:
        return make_llguidance_processor(
            self.compiled, batch_size, self.executor, self.model.vocabulary.size
        )


class XGrammarEngine(Engine):
    name = "xgrammar"

    def prepare(self) -> None:
        import xgrammar as xgr

        self.version = dist_version("xgrammar")
        self._xgr = xgr
        t0 = time.perf_counter()
        self.info = xgr.TokenizerInfo.from_huggingface(
            self.model.tokenizer, vocab_size=self.model.vocabulary.size
        )
        self.prepare_ms = (time.perf_counter() - t0) * 1e3

    def compile_fresh(self) -> Any:
        compiler = self._xgr.GrammarCompiler(self.info, cache_enabled=False)
        # Compact JSON like the other engines; strict_mode=False follows the JSON Schema spec
        # (the schema forbids extra properties itself).
        return compiler.compile_json_schema(
            json.dumps(SCHEMA), any_whitespace=False, separators=(",", ":"), strict_mode=False
        )

    def processor(self, batch_size: int) -> Any:
        import xgrammar.contrib.hf

        return xgrammar.contrib.hf.LogitsProcessor(self.compiled)


ENGINES: dict[str, type[Engine]] = {
    "constrain": ConstrainEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
}


def make_llguidance_processor(
    pristine: Any, batch_size: int, executor: Any, vocab_size: int
) -> Any:
    """A transformers LogitsProcessor for llguidance, equivalent to constrain's."""
    import llguidance.torch as llt

    base = _hf_processor_base()

    class LLGuidanceLogitsProcessor(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.matchers = [pristine.deep_copy() for _ in range(batch_size)]
            self.bitmask = llt.allocate_token_bitmask(batch_size, vocab_size)
            self.started = False

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if self.started:
                last = input_ids[:, -1].tolist()
                for i, m in enumerate(self.matchers):
                    if m.is_stopped():
                        continue
                    if not m.consume_token(int(last[i])):
                        raise RuntimeError(f"llguidance row {i}: {m.get_error()}")
            self.started = True
            if batch_size == 1:
                llt.fill_next_token_bitmask(self.matchers[0], self.bitmask, 0)
            else:
                llt.fill_next_token_bitmask_par(
                    executor, [(m, i) for i, m in enumerate(self.matchers)], self.bitmask
                )
            llt.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device))
            return scores

    return LLGuidanceLogitsProcessor()


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    config: str
    batch: int
    prompts: list[int]
    repeat: int
    tokens: list[list[int]]
    seconds: float
    decode_seconds: float
    proc_seconds: float = 0.0
    proc_calls: int = 0
    early: list[int] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


def _clock_processor(inner: Any) -> Any:
    """Wrap a logits processor (or none): time spent inside it, and when the first call ended."""
    base = _hf_processor_base()

    class Clock(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.busy = 0.0
            self.calls = 0
            self.first_end: float | None = None

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            t0 = time.perf_counter()
            if inner is not None:
                scores = inner(input_ids, scores)
            t1 = time.perf_counter()
            self.busy += t1 - t0
            self.calls += 1
            if self.first_end is None:
                self.first_end = t1
            return scores

    return Clock()


def _left_pad(ids: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any]:
    import torch

    width = max(len(p) for p in ids)
    input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, p in enumerate(ids):
        input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    return input_ids, mask


def _trim(row: list[int], eos: set[int]) -> tuple[list[int], bool]:
    for k, tok in enumerate(row):
        if tok in eos:
            return row[:k], True
    return row, False


def run_hf(
    model: Any, prompt_ids: Sequence[Sequence[int]], n: int, processor: Any | None
) -> tuple[list[list[int]], float, float, Any]:
    """One ``model.generate`` call; returns (tokens per row, seconds, decode seconds, clock)."""
    import torch

    input_ids, mask = _left_pad(prompt_ids, model.pad_id)
    clock = _clock_processor(processor)
    kwargs: dict[str, Any] = {
        "max_new_tokens": n,
        "do_sample": False,
        "pad_token_id": model.pad_id,
        "logits_processor": [clock],
    }
    if processor is None:
        kwargs["min_new_tokens"] = n  # masks EOS until n tokens: every run has n tokens
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.model.generate(input_ids=input_ids, attention_mask=mask, **kwargs)
    t1 = time.perf_counter()
    new = out[:, input_ids.shape[1] :].tolist()
    first = clock.first_end if clock.first_end is not None else t0
    return new, t1 - t0, t1 - first, clock


def _no_eos_sampler(eos_ids: Sequence[int]) -> Any:
    import torch

    from constrain.sampling.masked import MaskedSampler

    class NoEosSampler(MaskedSampler):
        """Greedy, EOS masked out (the loop's counterpart of ``min_new_tokens``)."""

        def sample(self, logits: Any, matchers: Any, generator: Any = None) -> Any:
            with torch.inference_mode():  # the session's logits are inference tensors
                logits[:, list(eos_ids)] = float("-inf")
            return super().sample(logits, matchers, generator)

    return NoEosSampler()


def run_loop(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    n: int,
    compiled: Any | None,
    overlap: bool | None,
    canonical: Any | None = None,
) -> tuple[list[list[int]], float, float]:
    """One run of constrain's decoding loop; returns (tokens per row, seconds, decode seconds)."""
    from constrain.decoding.autoregressive import decode
    from constrain.matcher import Matcher
    from constrain.sampling.masked import MaskedSampler

    first: list[float] = []

    def on_tokens(rows: list[int], ids: list[int]) -> None:
        if not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    session = model.start(prompt_ids)
    if compiled is None:
        matchers: list[Any] = [None] * len(prompt_ids)
        sampler = _no_eos_sampler(model.eos_ids)
    else:
        matchers = [Matcher(compiled, canonical=canonical) for _ in prompt_ids]
        sampler = MaskedSampler()
    res = decode(
        session,
        matchers,
        sampler,
        eos_ids=model.eos_ids,
        max_tokens=n,
        pad_id=model.pad_id,
        overlap=overlap,
        on_tokens=on_tokens,
    )
    t1 = time.perf_counter()
    return res.token_ids, t1 - t0, t1 - (first[0] if first else t0)


class Bench:
    """The loaded model, the engines and their compiled schema; runs one configuration."""

    def __init__(self, model: Any, engines: dict[str, Engine]) -> None:
        self.model = model
        self.engines = engines
        self.eos = {int(e) for e in model.eos_ids}

    def canonical(self, config: str) -> Any:
        """The tokenizer's canonical relation for a ``+canonical`` configuration, else None.

        Built at the first such run (the warm-up), kept by the model, like ``generate`` does.
        """
        return self.model.canonical() if "+canonical" in config else None

    def run(
        self,
        config: str,
        prompt_ids: Sequence[Sequence[int]],
        n: int,
        *,
        repeat: int = -1,
        prompts: Sequence[int] = (),
    ) -> RunResult:
        gc.collect()
        proc_s, calls = 0.0, 0
        if config.startswith("hf"):
            engine = config.partition("+")[2]
            processor = self.engines[engine].processor(len(prompt_ids)) if engine else None
            raw, secs, dec, clock = run_hf(self.model, prompt_ids, n, processor)
            if processor is not None:
                proc_s, calls = clock.busy, clock.calls
        else:
            compiled = self.engines["constrain"].compiled if "+" in config else None
            # Explicit: decode's default (overlap=None) overlaps only on a GPU.
            overlap = not config.endswith("no-overlap") if compiled is not None else None
            canonical = self.canonical(config)
            raw, secs, dec = run_loop(self.model, prompt_ids, n, compiled, overlap, canonical)
        tokens: list[list[int]] = []
        early: list[int] = []
        for i, row in enumerate(raw):
            kept, stopped = _trim(list(row), self.eos)
            tokens.append(kept)
            if stopped or len(kept) < n:
                early.append(i)
        return RunResult(
            config=config,
            batch=len(prompt_ids),
            prompts=list(prompts),
            repeat=repeat,
            tokens=tokens,
            seconds=secs,
            decode_seconds=dec,
            proc_seconds=proc_s,
            proc_calls=calls,
            early=early,
        )

    def replay(
        self, config: str, prompt_ids: Sequence[Sequence[int]], tokens: Sequence[Sequence[int]]
    ) -> float | None:
        """Mean seconds per step of the constraint machinery alone, replaying ``tokens``.

        No model: random scores. HF rows: the logits processor's calls, as ``generate`` makes
        them. Loop rows: ``sampler.prepare`` + ``sampler.sample`` + ``accept_token`` per step
        (the unconstrained loop: its EOS-masking sampler alone).
        """
        import torch

        steps = min(len(t) for t in tokens)
        if steps < 1 or config == "hf":
            return None
        rows = len(prompt_ids)
        width = self.model.vocabulary.size
        gen = torch.Generator().manual_seed(0)
        base = torch.randn((rows, width), generator=gen)
        total = 0.0
        with torch.inference_mode():
            if config.startswith("hf"):
                processor = self.engines[config.partition("+")[2]].processor(rows)
                full, _ = _left_pad(
                    [list(p) + list(t[:steps]) for p, t in zip(prompt_ids, tokens, strict=True)],
                    self.model.pad_id,
                )
                start = full.shape[1] - steps
                for k in range(steps):
                    scores = base.clone()
                    t0 = time.perf_counter()
                    processor(full[:, : start + k], scores)
                    total += time.perf_counter() - t0
                return total / steps
            from constrain.matcher import Matcher
            from constrain.sampling.masked import MaskedSampler

            if "+" in config:
                compiled = self.engines["constrain"].compiled
                canonical = self.canonical(config)
                matchers: list[Any] = [Matcher(compiled, canonical=canonical) for _ in range(rows)]
                sampler = MaskedSampler()
            else:
                matchers = [None] * rows
                sampler = _no_eos_sampler(self.model.eos_ids)
            live = list(range(rows))
            for k in range(steps):
                scores = base.clone()
                t0 = time.perf_counter()
                sampler.prepare(matchers, live)
                sampler.sample(scores, matchers)
                for i, m in enumerate(matchers):
                    if m is not None and not m.accept_token(int(tokens[i][k])):
                        raise RuntimeError(f"{config}: replayed token rejected at step {k}")
                total += time.perf_counter() - t0
        return total / steps


# --------------------------------------------------------------------------------------------
# Setup shared by the main run and the probes
# --------------------------------------------------------------------------------------------


def quiet_libraries() -> None:
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except (ImportError, AttributeError):
        pass


def load(threads: int | None) -> tuple[Any, float, float]:
    """Import and load the default model; return (model, import seconds, load seconds)."""
    t0 = time.perf_counter()
    import torch

    if threads:
        torch.set_num_threads(threads)
    quiet_libraries()
    from constrain.integrations.transformers import load_model

    t1 = time.perf_counter()
    model = load_model()
    t2 = time.perf_counter()
    return model, t1 - t0, t2 - t1


def setup_engines(
    model: Any, names: Sequence[str], compile_repeats: int
) -> tuple[dict[str, Engine], dict[str, Any]]:
    """Prepare each engine, time fresh compiles of SCHEMA, keep one compiled grammar each."""
    engines: dict[str, Engine] = {}
    info: dict[str, Any] = {}
    for name in names:
        engine = ENGINES[name](model)
        engine.prepare()
        times = []
        for _ in range(max(1, compile_repeats)):
            t0 = time.perf_counter()
            engine.compiled = engine.compile_fresh()
            times.append((time.perf_counter() - t0) * 1e3)
        engines[name] = engine
        info[name] = {
            "version": engine.version,
            "prepare_ms": round(engine.prepare_ms, 1),
            "compile_ms": [round(t, 2) for t in times],
            "compile_ms_median": round(statistics.median(times), 2),
        }
        log(f"[setup] {name}: {info[name]}")
    return engines, info


def configs_for(engines: Sequence[str], overlap: str, canonical: bool = False) -> list[str]:
    out = ["hf"] + [f"hf+{e}" for e in engines] + ["loop"]
    if "constrain" in engines:
        for variant in ("", "+canonical") if canonical else ("",):
            if overlap in ("on", "both"):
                out.append(f"loop+constrain{variant}")
            if overlap in ("off", "both"):
                out.append(f"loop+constrain{variant}/no-overlap")
    return out


# --------------------------------------------------------------------------------------------
# Validation of complete outputs
# --------------------------------------------------------------------------------------------


def validate(
    bench: Bench, configs: Sequence[str], prompt_ids: list[list[int]], cap: int
) -> dict[str, Any]:
    """One batched run per constrained configuration, up to ``cap`` tokens; check the JSON."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    out: dict[str, Any] = {}
    texts: dict[str, list[str]] = {}
    for config in configs:
        if config not in BASELINE:
            continue
        if config.endswith("/no-overlap") and config.removesuffix("/no-overlap") in configs:
            continue  # the same tokens as with overlap (greedy, same masks): not run twice
        t0 = time.perf_counter()
        res = bench.run(config, prompt_ids, cap)
        wall = time.perf_counter() - t0
        rows = []
        valid = 0
        texts[config] = []
        for i, toks in enumerate(res.tokens):
            text = bench.model.vocabulary.decode(toks).decode("utf-8", errors="replace")
            texts[config].append(text)
            finished = i in res.early
            error = None
            try:
                validator.validate(json.loads(text))
            except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            valid += error is None
            rows.append(
                {"tokens": len(toks), "finished": finished, "error": error, "text": text[:2000]}
            )
        out[config] = {
            "valid": valid,
            "n": len(rows),
            "wall_s": round(wall, 2),
            "mean_tokens": round(sum(len(t) for t in res.tokens) / len(res.tokens), 1),
            "rows": rows,
        }
        log(f"[validate] {config}: {valid}/{len(rows)} valid, {out[config]['mean_tokens']} tokens")
    ref = texts.get("hf+constrain")
    if ref is not None:
        for config, ts in texts.items():
            out[config]["same_text_as_hf+constrain"] = sum(
                a == b for a, b in zip(ts, ref, strict=True)
            )
    return out


# --------------------------------------------------------------------------------------------
# Probes: fresh processes for load time and peak memory
# --------------------------------------------------------------------------------------------


def probe_main(args: argparse.Namespace) -> int:
    """Run one configuration in this (fresh) process and print one JSON line."""
    what = args.probe
    record: dict[str, Any] = {"probe": what}
    t_start = time.perf_counter()
    if what == "convert":
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        quiet_libraries()
        from constrain.integrations.transformers import convert_default_model, load_model

        t0 = time.perf_counter()
        convert_default_model()
        record["conversion_s"] = round(time.perf_counter() - t0, 2)
        record["peak_rss_after_conversion_mb"] = peak_rss_mb()
        t0 = time.perf_counter()
        load_model()
        record["first_load_s"] = round(time.perf_counter() - t0, 2)
        record["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(record), flush=True)
        return 0
    model, import_s, load_s = load(args.threads)
    record.update(
        import_s=round(import_s, 2),
        load_s=round(load_s, 2),
        rss_after_load_mb=current_rss_mb(),
        peak_rss_after_load_mb=peak_rss_mb(),
    )
    if what != "load":
        engine_names = [e for e in ALL_ENGINES if e in what]
        engines, info = setup_engines(model, engine_names, 1)
        record["compile"] = info
        bench = Bench(model, engines)
        prompt_ids = [model.encode_prompt(PROMPTS[0])]
        res = bench.run(what, prompt_ids, args.tokens)
        record["tokens"] = res.n_tokens
        record["seconds"] = round(res.seconds, 2)
    record["peak_rss_mb"] = peak_rss_mb()
    record["wall_s"] = round(time.perf_counter() - t_start, 2)
    print(json.dumps(record), flush=True)
    return 0


def run_probe(
    what: str, tokens: int, threads: int | None, env: dict[str, str] | None = None
) -> Any:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe", what, "--tokens", str(tokens)]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"probe": what, "error": f"exit {proc.returncode}: {' | '.join(tail)}"[:1000]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --------------------------------------------------------------------------------------------
# Statistics and report
# --------------------------------------------------------------------------------------------


def run_record(r: RunResult) -> dict[str, Any]:
    return {
        "config": r.config,
        "batch": r.batch,
        "prompts": r.prompts,
        "repeat": r.repeat,
        "tokens": r.n_tokens,
        "seconds": round(r.seconds, 4),
        "decode_seconds": round(r.decode_seconds, 4),
        "proc_seconds": round(r.proc_seconds, 4),
        "proc_calls": r.proc_calls,
        "early": r.early,
    }


def _rate(runs: Sequence[RunResult], decode: bool) -> float:
    if decode:
        toks = sum(max(0, len(t) - 1) for r in runs for t in r.tokens)
        secs = sum(r.decode_seconds for r in runs)
    else:
        toks = sum(r.n_tokens for r in runs)
        secs = sum(r.seconds for r in runs)
    return toks / secs if secs > 0 else 0.0


def summarize(
    runs: list[RunResult],
    configs: Sequence[str],
    batch: int,
    replay: dict[tuple[str, int], float],
) -> list[dict[str, Any]]:
    repeats = sorted({r.repeat for r in runs})
    per: dict[str, dict[int, list[RunResult]]] = {c: {} for c in configs}
    for r in runs:
        if r.batch == batch and r.config in per:
            per[r.config].setdefault(r.repeat, []).append(r)
    rates = {c: {k: _rate(v, False) for k, v in per[c].items()} for c in configs}
    drates = {c: {k: _rate(v, True) for k, v in per[c].items()} for c in configs}
    rows = []
    for c in configs:
        if not per[c]:
            continue
        vals = [rates[c][k] for k in repeats if k in rates[c]]
        dvals = [drates[c][k] for k in repeats if k in drates[c]]
        base = BASELINE.get(c)
        ratio = dratio = None
        if base is not None and rates.get(base):
            pairs = [rates[c][k] / rates[base][k] for k in repeats if k in rates[base]]
            dpairs = [drates[c][k] / drates[base][k] for k in repeats if k in drates[base]]
            ratio = statistics.median(pairs) if pairs else None
            dratio = statistics.median(dpairs) if dpairs else None
        all_runs = [r for v in per[c].values() for r in v]
        calls = sum(r.proc_calls for r in all_runs)
        proc_ms = 1e3 * sum(r.proc_seconds for r in all_runs) / calls if calls else None
        early = sum(len(r.early) for r in all_runs)
        rows.append(
            {
                "config": c,
                "batch": batch,
                "baseline": base,
                "tok_s": statistics.median(vals),
                "tok_s_min": min(vals),
                "tok_s_max": max(vals),
                "tok_s_per_repeat": vals,
                "decode_tok_s": statistics.median(dvals),
                "decode_tok_s_per_repeat": dvals,
                "ratio": ratio,
                "decode_ratio": dratio,
                "ms_per_token": 1e3 / statistics.median(dvals) if dvals[0] else None,
                "proc_ms_per_step": proc_ms,
                "replay_ms_per_step": (1e3 * replay[(c, batch)] if (c, batch) in replay else None),
                "rows_ended_early": early,
                "rows": sum(len(r.tokens) for r in all_runs),
                "tokens": sum(r.n_tokens for r in all_runs),
            }
        )
    by = {r["config"]: r for r in rows}
    for r in rows:
        base = by.get(r["baseline"] or "")
        if base is not None and r["ms_per_token"] and base["ms_per_token"]:
            r["delta_ms_per_token"] = r["ms_per_token"] - base["ms_per_token"]
        if r["replay_ms_per_step"] is not None:
            base_replay = base["replay_ms_per_step"] if base is not None else None
            r["replay_overhead_ms"] = r["replay_ms_per_step"] - (base_replay or 0.0)
    return rows


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if not rows:
        return
    batch = rows[0]["batch"]
    print()
    print(
        f"batch {batch}: N={args.tokens} new tokens per row, {args.prompts} prompts, "
        f"{args.repeats} repeats, greedy"
    )
    head = (
        f"{'configuration':<38} {'tok/s':>7} {'(min-max)':>13} {'ratio':>6}"
        f" {'decode':>7} {'ratio':>6} {'ms/tok':>7} {'+ms/tok':>8} {'proc ms':>8}"
        f" {'mask ms':>8} {'early':>5}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        spread = f"({r['tok_s_min']:.1f}-{r['tok_s_max']:.1f})"
        print(
            f"{LABELS.get(r['config'], r['config']):<38} {r['tok_s']:>7.2f} {spread:>13}"
            f" {_f(r['ratio'], '.3f'):>6} {r['decode_tok_s']:>7.2f}"
            f" {_f(r['decode_ratio'], '.3f'):>6}"
            f" {_f(r['ms_per_token'], '.2f'):>7} {_f(r.get('delta_ms_per_token'), '+.2f'):>8}"
            f" {_f(r['proc_ms_per_step'], '.3f'):>8}"
            f" {_f(r.get('replay_overhead_ms'), '.3f'):>8} {r['rows_ended_early']:>5}"
        )


FOOTNOTES = """\
tok/s: N / wall time of a call (prefill included); decode: (N-1) / time after the first token;
  both medians over repeats. ratio: median paired ratio to the unconstrained baseline (HF rows vs
  'HF generate', loop rows vs 'constrain loop'). ms/tok: decode ms per token; +ms/tok: minus the
  baseline's. proc ms: time inside the logits processor per step, in the timed runs. mask ms: the
  constraint's cost per step replayed alone (no model, random scores, the run's own tokens; loop
  rows: prepare + sample + accept minus the unconstrained sampler's). early: rows that ended
  before N tokens.
* llguidance ships no transformers LogitsProcessor: the one used is written in this script
  (LLMatcher per row, consume_token, llguidance.torch.fill_next_token_bitmask[_par],
  llguidance.torch.apply_token_bitmask_inplace), mirroring constrain's. llguidance allows only
  the canonical tokenization of forced text, so its greedy outputs differ from the others'."""


def print_footer(report: dict[str, Any]) -> None:
    print()
    print(FOOTNOTES)
    print()
    print(
        f"{'engine':<12} {'version':<14} {'tokenizer prep ms':>18} {'compile ms (median)':>20}"
        f" {'valid (HF)':>11} {'valid (loop)':>13}"
    )
    val = report.get("validation") or {}
    for name, info in report["engines"].items():

        def v(config: str) -> str:
            x = val.get(config)
            return f"{x['valid']}/{x['n']}" if x else "-"

        loop = v("loop+constrain") if name == "constrain" else "-"
        print(
            f"{name:<12} {info['version'] or '?':<14} {info['prepare_ms']:>18.1f}"
            f" {info['compile_ms_median']:>20.2f} {v('hf+' + name):>11} {loop:>13}"
        )
    if val:
        print(
            "valid: complete outputs (one batched run per configuration, up to "
            f"{report['args']['validate_tokens']} tokens) that parse and validate with jsonschema;"
        )
        canon = val.get("loop+constrain+canonical")
        if canon:
            print(f"  constrain loop + canonical: {canon['valid']}/{canon['n']} valid")
        agree = {c: x.get("same_text_as_hf+constrain") for c, x in val.items()}
        print(f"  same text as HF+constrain: {agree}")
    agreement = report.get("agreement")
    if agreement:
        print(f"timed outputs (first N tokens) identical to HF+constrain's: {agreement}")
    load = report["load"]
    print()
    print(
        f"model load (load_model() from the cache, in this process): {load['load_s']:.2f} s "
        f"(imports {load['import_s']:.2f} s); peak RSS of this process: "
        f"{report['peak_rss_mb']:.0f} MiB"
    )
    probes = report.get("probes") or []
    if probes:
        print("fresh process per configuration (import + load + compile + one run):")
        for p in probes:
            if "error" in p:
                print(f"  {p['probe']:<28} error: {p['error']}")
                continue
            print(
                f"  {p['probe']:<28} load {p['load_s']:>5.2f} s  import {p['import_s']:>5.2f} s"
                f"  RSS after load {p['rss_after_load_mb'] or 0:>6.0f} MiB"
                f"  peak RSS {p['peak_rss_mb']:>6.0f} MiB"
            )
    conv = report.get("conversion")
    if conv:
        if "error" in conv:
            print(f"GGUF conversion: error: {conv['error']}")
        else:
            print(
                f"one-time GGUF -> safetensors conversion: {conv['conversion_s']:.1f} s, "
                f"first load after it {conv['first_load_s']:.2f} s, "
                f"peak RSS {conv['peak_rss_mb']:.0f} MiB"
            )


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
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tokens", type=int, default=None, help="new tokens per row (default 128)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats (default 2)")
    p.add_argument(
        "--prompts", type=int, default=None, help=f"prompts, at most {len(PROMPTS)} (default 4)"
    )
    p.add_argument(
        "--batch",
        type=lambda v: [int(x) for x in v.split(",") if x.strip()],
        default=None,
        help="comma list of batch sizes (default 1; e.g. 1,4); the prompts are split in batches",
    )
    p.add_argument(
        "--engines",
        type=lambda v: _csv(v, ALL_ENGINES),
        default=list(ALL_ENGINES),
        help="comma list of constrain,llguidance,xgrammar (default: all)",
    )
    p.add_argument(
        "--overlap",
        choices=("on", "off", "both"),
        default="both",
        help="constrain loop with the mask overlapped with the forward pass, without, or both",
    )
    p.add_argument(
        "--validate-tokens",
        type=int,
        default=None,
        help="token cap of the validation runs (default 512; 0 skips validation)",
    )
    p.add_argument(
        "--canonical",
        action="store_true",
        help="also run the constrain loop with canonical tokenization (loop+constrain+canonical)",
    )
    p.add_argument("--no-probes", action="store_true", help="skip the fresh-process probes")
    p.add_argument(
        "--conversion",
        action="store_true",
        help="also time the one-time GGUF conversion (temporary CONSTRAIN_CACHE_DIR, ~25 s)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny settings")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffled configuration order")
    p.add_argument(
        "--out",
        type=Path,
        default=result_path("generate"),
        help="results file (default benchmarks/results/generate.json, overwritten)",
    )
    p.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {
        "tokens": 16 if quick else 128,
        "repeats": 1 if quick else 2,
        "prompts": 2 if quick else 4,
        "batch": [1],
        "validate_tokens": 320 if quick else 512,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not 1 <= args.prompts <= len(PROMPTS):
        p.error(f"--prompts must be in 1..{len(PROMPTS)}")
    if args.tokens < 2 or args.repeats < 1:
        p.error("--tokens must be >= 2 and --repeats >= 1")
    return args


def environment(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    meta = machine()
    meta["loadavg_start"] = meta.pop("loadavg")
    meta["torch_threads"] = torch.get_num_threads()
    return meta


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.probe:
        return probe_main(args)
    t_begin = time.perf_counter()
    out = args.out
    meta_start_load = loadavg()
    model, import_s, load_s = load(args.threads)
    log(f"[load] imports {import_s:.2f} s, load_model() {load_s:.2f} s")
    meta = environment(args)
    meta["loadavg_start"] = meta_start_load
    try:
        engines, engine_info = setup_engines(model, args.engines, 3)
    except ImportError as exc:
        log(f"error: {exc}; {INSTALL_HINT}")
        return 2
    bench = Bench(model, engines)
    configs = configs_for(args.engines, args.overlap, args.canonical)
    prompt_ids = [model.encode_prompt(p) for p in PROMPTS[: args.prompts]]
    log(f"[prompts] {len(prompt_ids)} prompts of {[len(p) for p in prompt_ids]} tokens")

    # Warm-up: every configuration once (JIT kernels, torch.compile, thread pools, allocator).
    for config in configs:
        for b in args.batch:
            t0 = time.perf_counter()
            bench.run(config, prompt_ids[:b] if b > 1 else prompt_ids[:1], min(16, args.tokens))
            log(f"[warm-up] {config} batch {b}: {time.perf_counter() - t0:.2f} s")

    runs: list[RunResult] = []
    rng = random.Random(args.seed)
    for repeat in range(args.repeats):
        for b in args.batch:
            groups = [
                list(range(i, min(i + b, len(prompt_ids)))) for i in range(0, len(prompt_ids), b)
            ]
            for group in groups:
                order = list(configs)
                rng.shuffle(order)
                for config in order:
                    res = bench.run(
                        config,
                        [prompt_ids[i] for i in group],
                        args.tokens,
                        repeat=repeat,
                        prompts=group,
                    )
                    runs.append(res)
                    flag = f" EARLY rows {res.early}" if res.early else ""
                    log(
                        f"[run] r{repeat} b{b} prompts {group} {config}: "
                        f"{res.n_tokens} tok in {res.seconds:.2f} s "
                        f"({res.n_tokens / res.seconds:.2f} tok/s){flag}"
                    )
        # Raw runs so far, in case a later stage fails; the final report replaces this file.
        partial = {"partial": True, "meta": meta, "engines": engine_info}
        write_result(out, partial | {"runs": [run_record(r) for r in runs]})

    # Replay: the constraint machinery alone on the tokens of the first repeat (no model).
    replay: dict[tuple[str, int], float] = {}
    for b in args.batch:
        for config in configs:
            per_group = []
            for r in runs:
                if r.repeat != 0 or r.batch != b or r.config != config:
                    continue
                ids = [prompt_ids[i] for i in r.prompts]
                samples = [bench.replay(config, ids, r.tokens) for _ in range(REPLAY_REPEATS)]
                got = [x for x in samples if x is not None]
                if got:
                    per_group.append(statistics.median(got))
            if per_group:
                replay[(config, b)] = statistics.fmean(per_group)
                log(f"[replay] {config} batch {b}: {1e3 * replay[(config, b)]:.3f} ms/step")
    summaries = {b: summarize(runs, configs, b, replay) for b in args.batch}
    samples = {
        f"{r.config} prompt {r.prompts[0]}": model.vocabulary.decode(r.tokens[0]).decode(
            "utf-8", errors="replace"
        )
        for r in runs
        if r.repeat == 0 and r.batch == 1
    }
    # Agreement of the greedy outputs (batch 1, first repeat) with HF + constrain's.
    agreement: dict[str, int] = {}
    first = {(r.config, tuple(r.prompts)): r.tokens for r in runs if r.repeat == 0 and r.batch == 1}
    for config in configs:
        ref_cfg = "hf+constrain" if config in BASELINE else "hf"
        same = 0
        for k in range(len(prompt_ids)):
            a = first.get((config, (k,)))
            ref = first.get((ref_cfg, (k,)))
            same += a is not None and a == ref
        agreement[config] = same
    validation = (
        validate(bench, configs, prompt_ids, args.validate_tokens) if args.validate_tokens else {}
    )

    probes: list[dict[str, Any]] = []
    if not args.no_probes:
        for what in ["load", "hf+constrain"] if args.quick else ["load", *configs]:
            log(f"[probe] {what} ...")
            probes.append(run_probe(what, min(args.tokens, 32), args.threads))
    conversion = None
    if args.conversion:
        with tempfile.TemporaryDirectory(prefix="constrain-bench-cache-") as tmp:
            env = dict(os.environ, CONSTRAIN_CACHE_DIR=tmp)
            log(f"[conversion] GGUF -> safetensors into {tmp} ...")
            conversion = run_probe("convert", 2, args.threads, env)

    meta["loadavg_end"] = loadavg()
    meta["wall_s"] = round(time.perf_counter() - t_begin, 1)
    report: dict[str, Any] = {
        "meta": meta,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "model": {
            "name": model.name,
            "vocab_size": model.vocabulary.size,
            "dtype": str(next(model.model.parameters()).dtype),
            "device": str(model.device),
        },
        "schema": SCHEMA,
        "json_options": "compact for every engine (no whitespace, separators ',' ':')",
        "prompts": PROMPTS[: args.prompts],
        "prompt_tokens": [len(p) for p in prompt_ids],
        "load": {"import_s": round(import_s, 3), "load_s": round(load_s, 3)},
        "engines": engine_info,
        "summary": {str(b): rows for b, rows in summaries.items()},
        "agreement": agreement,
        "samples": samples,
        "validation": validation,
        "probes": probes,
        "conversion": conversion,
        "peak_rss_mb": peak_rss_mb(),
        "runs": [run_record(r) for r in runs],
    }
    for b in args.batch:
        print_table(summaries[b], args)
    print_footer(report)
    print(
        f"\nwall time {meta['wall_s']:.0f} s; load average {meta['loadavg_start']} -> "
        f"{meta['loadavg_end']} ({meta['cpu_count']} CPUs, torch threads {meta['torch_threads']})"
    )
    write_result(out, report)
    log(f"wrote {shown(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
