"""generate(..., sampler=...) end to end on the real default model: every method by name."""

from __future__ import annotations

import pytest

import constrain
from constrain import GenerationResult, Model
from constrain.decoding import SMC, ASApSample, DraftInfo, SMCResult
from constrain.sampling import AWRS, MaskedSampler

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PROMPT = "Extract as JSON: Maria is 34 years old."


def _valid(value: object) -> None:
    import jsonschema

    jsonschema.validate(value, SCHEMA)


@pytest.mark.parametrize(
    ("name", "options", "details"),
    [
        ("greedy", {}, type(None)),
        ("masked", {}, type(None)),
        ("awrs", {}, type(None)),
        ("smc", {"n_particles": 3}, SMCResult),
        ("asap", {}, ASApSample),
        ("dccd", {"max_draft_tokens": 24}, DraftInfo),
    ],
)
def test_every_sampler_by_name_gives_a_valid_output(
    model: Model, name: str, options: dict[str, object], details: type
) -> None:
    result = constrain.generate(
        PROMPT,
        schema=SCHEMA,
        model=model,
        sampler=name,
        seed=0,
        max_tokens=40,
        return_info=True,
        **options,
    )
    assert isinstance(result, GenerationResult)
    _valid(result.value)
    assert result.sampler == ("masked" if name == "greedy" else name)
    assert isinstance(result.details, details)
    assert result.log_weight <= 1e-9


def test_smc_batch_and_particles(model: Model) -> None:
    results = constrain.generate(
        [PROMPT, "Extract as JSON: Tom is 7."],
        schema=SCHEMA,
        model=model,
        sampler="smc",
        n_particles=2,
        seed=1,
        max_tokens=40,
        return_info=True,
    )
    assert len(results) == 2
    for r in results:
        _valid(r.value)
        run = r.details
        assert isinstance(run, SMCResult) and len(run.texts) == 2
        assert run.chosen is not None and run.texts[run.chosen] == r.text


def test_asap_by_name_keeps_its_trie_across_calls(model: Model) -> None:
    from constrain.decoding import asap as asap_module

    asap_module._TRIES.clear()
    for seed in (0, 1):
        constrain.generate(PROMPT, schema=SCHEMA, model=model, sampler="asap", seed=seed)
    (asap,) = asap_module._TRIES.values()
    assert asap.num_samples == 2


def test_sampler_objects_are_accepted(model: Model) -> None:
    for sampler in (MaskedSampler(0.0), AWRS(), SMC(MaskedSampler(1.0), n_particles=2)):
        _valid(constrain.generate(PROMPT, schema=SCHEMA, model=model, sampler=sampler, seed=0))


def test_sampler_argument_errors(model: Model) -> None:
    with pytest.raises(ValueError, match="unknown sampler"):
        constrain.generate(PROMPT, schema=SCHEMA, model=model, sampler="beam")
    with pytest.raises(TypeError, match="unexpected keyword"):
        constrain.generate(PROMPT, schema=SCHEMA, model=model, n_particles=3)
    with pytest.raises(TypeError, match="sampler='smc'"):
        constrain.generate(PROMPT, schema=SCHEMA, model=model, sampler="smc", particles=3)
    with pytest.raises(TypeError, match="token-level"):
        list(constrain.stream(PROMPT, schema=SCHEMA, model=model, sampler="smc"))


def test_stream_with_awrs(model: Model) -> None:
    text = "".join(
        constrain.stream(PROMPT, schema=SCHEMA, model=model, sampler="awrs", seed=3, max_tokens=40)
    )
    _valid(__import__("json").loads(text))
