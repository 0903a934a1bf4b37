"""Per-token cost of a tool-call structural tag: free text and tool arguments, vs XGrammar.

An agent's turn is mostly free text with a tool call at the end. Both engines compile the same
structural tag (``constrain.tools.tool_structural_tag``: three tools in the Hermes format,
``tool_choice="auto"``) over Llama 3.2's vocabulary, and follow the same assistant turns token by
token (prose of a few hundred tokens, then ``<tool_call>`` with JSON arguments). Each step is
timed from the matcher's state to a filled bitmask and the token accepted, and put in the
phase its token belongs to: *free text* (before the trigger), *tag* (the trigger and the call's
fixed text) or *arguments* (inside the arguments' JSON).

The baseline is what an unconstrained engine pays per step anyway: sampling from the logits
(softmax and a multinomial draw over the 128k logits) plus one copy of a ready bitmask into the
buffer the sampler reads. The figure that matters for free text is

    (fill + accept + apply the mask + sample) / (sample + mask copy)     target: at most 1.2

Every time is the median over the turns' steps of one phase, several rounds, one thread, both
engines in the same process and run.

    python benchmarks/structural_tag_cost.py                # results/structural-tag-cost.json
    python benchmarks/structural_tag_cost.py --rounds 1 --out /tmp/cost.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from common import args_record, log, machine, result_path, write_result
from engines import ENGINES, Engine, GrammarSpec
from workloads import load_tokenizer

from constrain.tools import tool_structural_tag

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Flights between two airports on a date.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "date": {"type": "string", "format": "date"},
                    "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
                },
                "required": ["origin", "destination", "date"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                    "subject": {"type": "string", "maxLength": 120},
                    "body": {"type": "string"},
                },
                "required": ["to", "subject", "body"],
            },
        },
    },
]

PROSE = (
    "Let me think about what you asked. You want to travel from Lisbon to Oslo next month, "
    "and you would like to know what the weather will be like when you arrive, so that you can "
    "pack the right clothes. Oslo in early spring is usually cold, with temperatures that can "
    "drop below freezing at night, while the days are getting longer and brighter. It is a good "
    "idea to bring layers: a warm coat, a sweater, waterproof shoes and a hat. Before I look up "
    "the flights, I will check the current weather so that the advice is up to date. After that "
    "I can compare the direct flights with the ones that stop in Copenhagen or Amsterdam, "
    "which are often cheaper but take longer. I will also keep in mind that you prefer a window "
    "seat and that you want to arrive before the evening. "
)
CALLS = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}'
    "\n</tool_call>",
    '<tool_call>\n{"name": "search_flights", "arguments": {"origin": "LIS", "destination": '
    '"OSL", "date": "2027-03-14", "passengers": 2}}\n</tool_call>',
    '<tool_call>\n{"name": "send_email", "arguments": {"to": ["ana@example.com", '
    '"rui@example.com"], "subject": "Trip to Oslo", "body": "The flights are booked; pack a '
    'warm coat, it will be cold."}}\n</tool_call>',
]


def turns() -> list[str]:
    """The assistant turns followed: prose of growing length, then one call each."""
    return [PROSE * (1 + i) + call for i, call in enumerate(CALLS)]


def phases(text: str, offsets: Sequence[int]) -> list[str]:
    """The phase of the token starting at each character offset of ``text``."""
    trigger = text.index("<tool_call>")
    args_start = text.index('"arguments": ', trigger) + len('"arguments": ')
    args_end = text.rindex("}}") + 1
    out = []
    for at in offsets:
        if at < trigger:
            out.append("free text")
        elif args_start <= at < args_end:
            out.append("arguments")
        else:
            out.append("tag")
    return out


def engines(spec: dict[str, Any], tokenizer: Any) -> list[tuple[str, Engine, Any, torch.Tensor]]:
    """constrain and XGrammar (``engines.py``), each with the spec compiled and a bitmask."""
    out = []
    for name in ("constrain", "xgrammar"):
        engine = ENGINES[name]()
        engine.prepare(tokenizer)
        compiled = engine.compile(engine.new_compiler(), GrammarSpec("structural_tag", "", spec))
        out.append((f"{name} {engine.version}", engine, compiled, engine.allocate_bitmask()))
    return out


def sample(logits: torch.Tensor, generator: torch.Generator) -> int:
    """What an unconstrained step pays: softmax and one multinomial draw."""
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator)[0, 0])


def follow(
    side: tuple[str, Engine, Any, torch.Tensor],
    tokens: list[int],
    logits: torch.Tensor,
    generator: torch.Generator,
) -> list[tuple[float, float]]:
    """Per step: (fill + accept, fill + apply + sample + accept) seconds, the turn followed."""
    name, engine, compiled, bitmask = side
    matcher = engine.new_matcher(compiled, bitmask)
    out = []
    scratch = logits.clone()
    for token in tokens:
        t0 = time.perf_counter()
        matcher.fill()
        t1 = time.perf_counter()
        scratch.copy_(logits)  # fresh logits, as a model gives each step (not timed)
        t2 = time.perf_counter()
        engine.apply_bitmask(scratch, bitmask)
        sample(scratch, generator)
        t3 = time.perf_counter()
        if not matcher.accept(token):
            raise RuntimeError(f"{name} rejected token {token} of the turn")
        t4 = time.perf_counter()
        step = (t1 - t0) + (t4 - t3)
        out.append((step, step + (t3 - t2)))
    return out


def baseline(
    logits: torch.Tensor, bitmask: torch.Tensor, steps: int, generator: torch.Generator
) -> tuple[float, float]:
    """Median seconds of an unconstrained sample, and of one bitmask copy."""
    ready = torch.full_like(bitmask, -1)
    samples, copies = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        sample(logits, generator)
        t1 = time.perf_counter()
        bitmask.copy_(ready)
        t2 = time.perf_counter()
        samples.append(t1 - t0)
        copies.append(t2 - t1)
    return statistics.median(samples), statistics.median(copies)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="times each turn is followed")
    p.add_argument("--out", type=Path, default=result_path("structural-tag-cost"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    tokenizer = load_tokenizer()  # Llama 3.2, as every engine benchmark
    spec = tool_structural_tag(TOOLS, tool_choice="auto", format="hermes")
    sides = engines(spec, tokenizer)
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn((1, sides[0][1].vocab_size), generator=generator)
    sample_s, copy_s = baseline(logits, sides[0][3].clone(), 400, generator)
    log(f"baseline: sample {sample_s * 1e6:.1f} us, mask copy {copy_s * 1e6:.1f} us")
    per: dict[str, dict[str, list[tuple[float, float]]]] = {side[0]: {} for side in sides}
    for _ in range(args.rounds):
        for text in turns():
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            tokens = list(enc["input_ids"])
            labels = phases(text, [start for start, _ in enc["offset_mapping"]])
            for side in sides:  # the same turn on each engine, back to back
                steps = follow(side, tokens, logits, generator)
                for label, step in zip(labels, steps, strict=True):
                    per[side[0]].setdefault(label, []).append(step)
    rows = []
    for name, *_ in sides:
        for label in ("free text", "tag", "arguments"):
            steps = per[name].get(label, [])
            mask = statistics.median(s[0] for s in steps)
            full = statistics.median(s[1] for s in steps)
            rows.append(
                {
                    "engine": name,
                    "phase": label,
                    "steps": len(steps),
                    "mask_us": mask * 1e6,
                    "constrained_step_us": full * 1e6,
                    "ratio_to_baseline": full / (sample_s + copy_s),
                }
            )
    print(f"unconstrained step: sample {sample_s * 1e6:.1f} us + mask copy {copy_s * 1e6:.2f} us")
    print(f"{'engine':22s}{'phase':>11s}{'steps':>7s}{'mask us':>10s}{'step us':>10s}{'ratio':>7s}")
    for r in rows:
        print(
            f"{r['engine']:22s}{r['phase']:>11s}{r['steps']:>7d}{r['mask_us']:>10.1f}"
            f"{r['constrained_step_us']:>10.1f}{r['ratio_to_baseline']:>7.2f}"
        )
    payload = {
        "meta": machine(),
        "args": args_record(args),
        "baseline_us": {"sample": sample_s * 1e6, "mask_copy": copy_s * 1e6},
        "rows": rows,
    }
    log(f"wrote {write_result(args.out, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
