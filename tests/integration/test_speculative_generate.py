"""Speculative decoding on the real default model (SmolLM2-135M): exact greedy, valid always.

- Greedy speculation returns the non-speculative greedy output token for token, with each
  drafter and with all of them (the verification takes the masked argmax at every position).
- The session's multi-position passes with padding holes give the logits one-token passes give.
- The early-exit drafter leaves the key-value cache as it found it.
- A drafter proposing garbage only lowers acceptance.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from pydantic import BaseModel, Field

import constrain
from constrain import Matcher
from constrain.decoding import decode
from constrain.decoding.drafters import DraftRequest, EarlyExitDrafter
from constrain.decoding.speculative import speculative_decode
from constrain.integrations.transformers import Model
from constrain.output import output_type
from constrain.sampling import MaskedSampler

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    json.loads(line)
    for line in (ROOT / "benchmarks" / "data" / "extraction.jsonl").read_text().splitlines()[:2]
]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    city: str = Field(max_length=24)


def _prompt(text: str) -> str:
    return f"Extract the person as JSON with fields name, age and city.\n\nText: {text}"


@pytest.fixture(scope="module")
def plain(model: Model) -> list[Person]:
    prompts = [_prompt(e["text"]) for e in EXAMPLES]
    out: list[Person] = constrain.generate(prompts, schema=Person, model=model, max_tokens=48)
    return out


@pytest.mark.parametrize("spec", ["grammar", "lookup", "early_exit", True])
def test_greedy_speculation_returns_the_greedy_output(
    model: Model, plain: list[Person], spec: object
) -> None:
    prompts = [_prompt(e["text"]) for e in EXAMPLES]
    fast = constrain.generate(
        prompts, schema=Person, model=model, max_tokens=48, speculative=spec, return_info=True
    )
    assert [r.value for r in fast] == plain
    stats = fast[0].details
    assert stats["output_tokens"] == sum(r.output_tokens for r in fast)
    assert stats["forwards"] <= stats["output_tokens"]
    assert fast[0].sampler == "masked+speculative"


def test_speculation_cuts_forward_passes_on_extraction(model: Model) -> None:
    """Not vacuous: with the grammar and prompt lookup, far fewer passes than tokens."""
    res = constrain.generate(
        _prompt(EXAMPLES[0]["text"]),
        schema=Person,
        model=model,
        max_tokens=48,
        speculative=["grammar", "lookup"],
        return_info=True,
    )
    stats = res.details
    assert stats["accepted"]["grammar"] >= 5
    assert stats["forwards"] < 0.8 * stats["output_tokens"]


def test_sampling_with_speculation_gives_valid_outputs(model: Model) -> None:
    prompts = [_prompt(e["text"]) for e in EXAMPLES] * 2
    out = constrain.generate(
        prompts,
        schema=Person,
        model=model,
        max_tokens=48,
        temperature=1.0,
        top_p=0.9,
        seed=3,
        speculative=True,
    )
    assert all(isinstance(p, Person) for p in out)


def test_stream_with_speculation_yields_the_same_text(model: Model) -> None:
    prompt = _prompt(EXAMPLES[1]["text"])
    pieces = list(
        constrain.stream(prompt, schema=Person, model=model, max_tokens=48, speculative=True)
    )
    plain = constrain.generate(prompt, schema=Person, model=model, max_tokens=48)
    assert Person.model_validate_json("".join(pieces)) == plain


def test_speculation_needs_the_masked_sampler(model: Model) -> None:
    with pytest.raises(TypeError, match="masked sampler"):
        constrain.generate("x", regex="a+", model=model, sampler="smc", speculative=True)
    with pytest.raises(ValueError, match="unknown drafter"):
        constrain.generate("x", regex="a+", model=model, speculative="telepathy")


def test_extend_with_holes_matches_one_token_passes(model: Model) -> None:
    prompt = model.encode_prompt("Say something.")
    toks = model.tokenizer(" one two three", add_special_tokens=False)["input_ids"]
    ref = model.start([prompt])
    ref.forward(None)
    expected = [ref.forward(torch.tensor([t])) for t in toks]
    sess = model.start([prompt])
    sess.forward(None)
    # the first token, then a block whose second position is padding the keep() drops
    first = sess.extend(torch.tensor([[toks[0], 7]]), torch.tensor([[True, True]]))
    sess.keep([1])
    rest = sess.extend(torch.tensor([toks[1:]]), torch.ones((1, len(toks) - 1), dtype=torch.bool))
    got = [first[0, 0], *[rest[0, j] for j in range(len(toks) - 1)]]
    for a, b in zip(got, expected, strict=True):
        assert torch.allclose(a, b.view(-1), atol=2e-3, rtol=1e-3)
        assert int(a.argmax()) == int(b.argmax())


def test_early_exit_drafter_leaves_the_cache_as_it_was(model: Model) -> None:
    prompt = model.encode_prompt("Count: one, two,")
    sess = model.start([prompt])
    sess.forward(None)
    length = sess.length
    drafter = EarlyExitDrafter(model, layers=6, min_prob=0.0)
    drafter.begin(sess, [prompt])
    req = DraftRequest([0], [[*prompt, 1]], [None], [4], set(model.eos_ids))
    drafter.propose(req)
    assert len(req.drafts[0]) == 4
    assert sess.length == length
    for layer in sess.cache.layers:
        assert int(layer.keys.shape[-2]) == length


class _Garbage:
    name = "garbage"

    def __init__(self, vocab_size: int) -> None:
        self.rng = random.Random(0)
        self.n = vocab_size

    def begin(self, session: object, prompts: Sequence[Sequence[int]]) -> None:
        return None

    def propose(self, request: DraftRequest) -> None:
        for row in request.rows:
            request.offer(row, [self.rng.randrange(self.n + 100) for _ in range(6)], self.name)


@pytest.mark.parametrize("drafter", ["garbage", "early_exit"])
def test_drafts_verified_without_the_policy_give_the_greedy_output(
    model: Model, drafter: str
) -> None:
    """Every iteration drafts (``adaptive=False``): garbage only lowers acceptance, and the
    early-exit drafter's proposals are verified like any other."""
    out = output_type(schema=Person)
    compiled = model.compile(out.grammar)
    prompt = model.encode_prompt(_prompt(EXAMPLES[0]["text"]))
    base = decode(
        model.start([prompt]),
        [Matcher(compiled)],
        MaskedSampler(0.0),
        eos_ids=model.eos_ids,
        max_tokens=48,
    )
    res = speculative_decode(
        model.start([prompt]),
        [Matcher(compiled)],
        [
            _Garbage(model.vocabulary.model_vocab_size)
            if drafter == "garbage"
            else EarlyExitDrafter(model, layers=10, min_prob=0.0)
        ],
        prompts=[prompt],
        eos_ids=model.eos_ids,
        max_tokens=48,
        adaptive=False,
    )
    assert res.token_ids == base.token_ids
    text = model.vocabulary.decode(res.token_ids[0]).decode()
    assert isinstance(out.parse(text), Person)


def test_cpu_head_matches_the_models_logits(model: Model) -> None:
    from constrain.integrations.cpu_layers import CpuHead

    prompt = model.encode_prompt("Name a colour.")
    sess = model.start([prompt])
    sess.forward(None)  # the first prefill checks the head against the model's logits
    assert model.head.ok and not model.head.unchecked
    # 1 row: x @ W.T; 2-16 rows: the skinny linear kernel; more: the model's own lm_head
    for batch, width in ((1, 1), (1, 2), (1, 3), (2, 3), (1, 5), (1, 17)):
        hidden = torch.randn(batch, width, model.model.config.hidden_size)
        expected = model.model.lm_head(hidden)
        assert torch.allclose(model.head.logits(hidden), expected, rtol=1e-4, atol=1e-3)
    # a head that disagrees with the model's logits is switched off at the check
    other = CpuHead(model.model)
    other.check(torch.randn(1, 1, model.model.config.hidden_size), torch.zeros(1, 1, 5))
    assert not other.ok
