"""The shipped tiny diffusion model, its corpus and training loop, and ``generate()`` with it.

- The shipped weights load; ``predict`` has the protocol's shapes and reads masked positions
  as the mask token.
- ``generate(prompt, model=<diffusion model>, regex=/schema=/grammar=)`` returns valid values
  with every constrained method (checked by ``re``, ``jsonschema`` and ``lark``), and passes
  block size, steps and unmasking policy through to the loop.
- The corpus is deterministic and every text is a sentence of constrain's grammar of its task;
  a few training steps run, are reproducible and round-trip through the weights file.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

import constrain
from constrain import Compiler, Matcher
from constrain.diffusion import DiffusionModel, DiffusionResult
from constrain.diffusion.tiny_corpus import ARITH_REGEX, TASKS, is_valid, make_corpus
from constrain.diffusion.tiny_model import (
    EOS_ID,
    MASK_ID,
    TinyDiffusionConfig,
    TinyDiffusionLM,
    encode_records,
    load_tiny_diffusion,
    save_tiny_diffusion,
    train,
)
from constrain.output import output_type

WEIGHTS = Path(constrain.__file__).parent / "diffusion" / "tiny_diffusion.safetensors"


@cache
def shipped() -> TinyDiffusionLM:
    torch.set_num_threads(1)
    return load_tiny_diffusion()


def test_shipped_model_loads_and_predicts() -> None:
    model = shipped()
    assert isinstance(model, DiffusionModel)
    assert (model.vocab_size, model.mask_token_id, model.max_length) == (258, MASK_ID, 64)
    assert WEIGHTS.stat().st_size < 2 * 2**20  # shipped as package data: kept under 2 MB
    assert model.info["script"] == "benchmarks/train_diffusion.py" and model.info["steps"] > 0
    vocab = model.vocabulary
    assert vocab.eos_ids.tolist() == [EOS_ID] and vocab.token_lengths[MASK_ID] == 0
    tokens = torch.tensor(model.encode_prompt("sql:") + [EOS_ID] * 20)
    mask = torch.zeros(len(tokens), dtype=torch.bool)
    mask[4:] = True
    logits = model.predict(tokens, mask)
    assert logits.shape == (24, 258) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    other = tokens.clone()
    other[4:] = 7  # masked positions are read as the mask token, whatever they hold
    assert torch.equal(model.predict(other, mask), logits)
    assert chr(int(logits[4].argmax())) == "S"  # it learned something: SQL starts with SELECT
    with pytest.raises(ValueError, match="holds 64"):
        model.predict(torch.zeros(65, dtype=torch.long), torch.zeros(65, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        model.predict(tokens, mask.long())
    with pytest.raises(ValueError, match="chat"):
        model.encode_prompt("x", chat=True)


SCHEMA = TASKS["person"].constraint["schema"]
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("arith", "arith:", {"regex": ARITH_REGEX}, "dingo"),
    ("arith", "arith:", {"regex": ARITH_REGEX}, "infill"),
    ("arith", "arith:", {"regex": ARITH_REGEX}, "lave"),
    ("person", "person:", {"schema": SCHEMA}, "dingo"),
    ("person", "person:", {"schema": SCHEMA}, "infill"),
    ("person", "person:", {"schema": SCHEMA}, "lave"),
    ("sql", "sql:", TASKS["sql"].constraint, "infill"),
    ("sql", "sql:", TASKS["sql"].constraint, "lave"),
    ("arith", "arith:", TASKS["arith"].constraint, "lave"),
]


@pytest.mark.parametrize(("task", "prompt", "constraint", "method"), CASES)
def test_generate_returns_valid_values(
    task: str, prompt: str, constraint: dict[str, Any], method: str
) -> None:
    model = shipped()
    got = constrain.generate(
        prompt, model=model, sampler=method, temperature=1.0, seed=3, block_size=16, steps=8,
        return_info=True, **constraint,
    )  # fmt: skip
    assert isinstance(got.details, DiffusionResult)
    assert got.sampler == method and got.details.is_valid
    assert is_valid(task, got.text, constraint), got.text
    if "schema" in constraint:
        assert got.value == json.loads(got.text)
    else:
        assert got.value == got.text
    assert got.prompt_tokens == len(prompt) and got.details.num_steps <= 4 * 8


def test_generate_options_reach_the_loop() -> None:
    model = shipped()
    regex = {"regex": ARITH_REGEX}
    info = constrain.generate("arith:", model=model, return_info=True, **regex)
    assert info.sampler == "dingo"  # auto: the regex is regular
    assert len(info.details.token_ids) == 58  # one block of 64 - 6 positions
    # one position per step, until the positions after the first EOS become EOS padding
    assert len(info.details.output_ids) < info.details.num_steps <= 58
    info = constrain.generate(
        "arith:", model=model, return_info=True, max_tokens=20, block_size=5, steps=1,
        unmasking="left_to_right", **regex,
    )  # fmt: skip
    assert len(info.details.token_ids) == 20 and info.details.num_steps <= 4
    assert is_valid("arith", info.text, regex)
    grammar = TASKS["sql"].constraint["grammar"]
    out = constrain.generate(["sql:", "sql:"], model=model, grammar=grammar, length=48, steps=12)
    assert len(out) == 2 and all(is_valid("sql", t) for t in out)
    a = constrain.generate("sql:", model=model, grammar=grammar, temperature=1.0, seed=5)
    assert a == constrain.generate("sql:", model=model, grammar=grammar, temperature=1.0, seed=5)


def test_generate_rejects_what_does_not_apply() -> None:
    model = shipped()
    with pytest.raises(TypeError, match="block_size"):
        constrain.generate("sql:", model=model, regex="a", n_particles=4)
    with pytest.raises(ValueError, match="sampler="):
        constrain.generate("sql:", model=model, regex="a", sampler="smc")
    with pytest.raises(TypeError, match="top_k"):
        constrain.generate("sql:", model=model, regex="a", top_k=5)
    with pytest.raises(TypeError, match="penalties"):
        constrain.generate("sql:", model=model, regex="a", frequency_penalty=0.3)
    with pytest.raises(TypeError, match="reasoning= needs an autoregressive model"):
        constrain.generate("sql:", model=model, regex="a", reasoning=True)
    with pytest.raises(ValueError, match="64 positions"):
        constrain.generate("sql:", model=model, regex="a", length=61)
    with pytest.raises(TypeError, match="stream"):
        next(constrain.stream("sql:", model=model, regex="a"))


# -- corpus and training ----------------------------------------------------------------------


def test_corpus_is_deterministic_and_in_the_grammars() -> None:
    records = make_corpus(48, seed=1)
    assert records == make_corpus(48, seed=1) and records != make_corpus(48, seed=2)
    assert {r.task for r in records} == set(TASKS)
    vocab = shipped().vocabulary
    compiler = Compiler(vocab)
    compiled = {n: compiler.compile(output_type(**t.constraint).grammar) for n, t in TASKS.items()}
    for r in records:
        assert is_valid(r.task, r.text), r
        m = Matcher(compiled[r.task])
        data = list(r.text.encode())
        assert m.accept_tokens(data) == len(data) and m.is_accepting(), r


def test_training_steps_run_and_reproduce(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    records = make_corpus(32, seed=0)
    ids, lengths = encode_records(records[:2], 64)
    assert ids.shape == (2, 64) and ids[0, -1] == EOS_ID
    assert lengths.tolist() == [len(records[0].prompt), len(records[1].prompt)]
    config = TinyDiffusionConfig(dim=16, num_layers=1, num_heads=2, ffn_dim=32)
    runs = []
    logged: list[tuple[int, float]] = []
    for _ in range(2):
        torch.manual_seed(0)
        model = TinyDiffusionLM(config)
        losses = train(
            model, records, steps=12, batch_size=4, warmup=2,
            log=lambda s, loss: logged.append((s, loss)), log_every=4,
        )  # fmt: skip
        runs.append(losses)
    assert runs[0] == runs[1] and len(runs[0]) == 12
    assert all(torch.isfinite(torch.tensor(runs[0])))
    assert [s for s, _ in logged] == [4, 8, 12] * 2
    assert sum(runs[0][-4:]) < sum(runs[0][:4])  # it learns (byte frequencies first)
    path = tmp_path / "m.safetensors"
    save_tiny_diffusion(model, path, {"steps": 12})
    loaded = load_tiny_diffusion(path)
    assert loaded.config == config and loaded.info == {"steps": 12}
    tokens = ids[0]
    mask = torch.arange(64) >= 10
    expected = model.predict(tokens, mask)
    assert torch.allclose(loaded.predict(tokens, mask), expected, atol=2e-2)
    with pytest.raises(ValueError, match="bytes"):
        encode_records([records[0].__class__("sql", "sql:", "x" * 70)], 64)
