"""generate(canonical=True) on the default model: the output's tokens are the tokenizer's own.

For every output, the token ids generated (EOS aside) equal ``tokenizer.encode(text)``: greedy
and sampled, choices, a regex, a schema, speculative decoding (drafts verified token by token
against the canonical matcher).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

import constrain
from constrain.integrations.transformers import Model

pytestmark = pytest.mark.slow

SKY = "Is the sky green? Answer yes or no."
ANSWERS = ["Yes.", "No.", "Yes, it is green.", "No, it is blue.", "No, it is not."]


class City(BaseModel):
    name: str = Field(max_length=20)
    country: str = Field(max_length=20)
    population: int


def _check(model: Model, result: constrain.GenerationResult) -> None:
    eos = set(model.eos_ids)
    ids = [t for t in result.token_ids if t not in eos]
    assert ids == model.tokenizer.encode(result.text, add_special_tokens=False), result.text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"choices": ANSWERS},
        {"regex": r"[0-9]{4}-[0-9]{2}-[0-9]{2}"},
        {"schema": City},
    ],
    ids=["choices", "regex", "schema"],
)
def test_greedy_output_is_the_tokenizers_encoding(model: Model, kwargs: dict[str, Any]) -> None:
    prompt = SKY if "choices" in kwargs else "Describe Paris as a city record, or today's date."
    result = constrain.generate(
        prompt, model=model, max_tokens=60, canonical=True, return_info=True, **kwargs
    )
    _check(model, result)


def test_sampled_outputs_are_the_tokenizers_encoding(model: Model) -> None:
    results = constrain.generate(
        ["Describe Paris as a city record.", "Describe Tokyo as a city record."] * 3,
        schema=City,
        model=model,
        max_tokens=60,
        temperature=1.0,
        seed=5,
        canonical=True,
        return_info=True,
    )
    for result in results:
        _check(model, result)


def test_speculative_output_is_the_tokenizers_encoding(model: Model) -> None:
    result = constrain.generate(
        "Describe Paris as a city record.",
        schema=City,
        model=model,
        max_tokens=60,
        canonical=True,
        speculative=True,
        return_info=True,
    )
    _check(model, result)


@pytest.mark.parametrize("sampler", ["awrs", "smc", "asap"])
def test_other_samplers_keep_the_tokenizers_encoding(model: Model, sampler: str) -> None:
    # SMC: 4 particles (each keeps its own canonical state; 32, the default, only takes longer)
    options = {"n_particles": 4} if sampler == "smc" else {}
    result = constrain.generate(
        "Describe Paris as a city record.",
        schema=City,
        model=model,
        max_tokens=60,
        temperature=1.0,
        seed=1,
        sampler=sampler,
        canonical=True,
        return_info=True,
        **options,
    )
    _check(model, result)
