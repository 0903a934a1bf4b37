"""generate(sampler=...) dispatch: the method registry and the shared option handling (no model)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from constrain.decoding import registry
from constrain.decoding.asap import ASAp, NamedASAp
from constrain.decoding.autoregressive import TokenMethod
from constrain.decoding.dccd import DCCD
from constrain.decoding.method import (
    DecodeJob,
    DecodingMethod,
    MethodOutcome,
    SamplingOptions,
    StreamingMethod,
)
from constrain.decoding.registry import build_method, method_names, register_method, resolve_method
from constrain.decoding.smc import SMC
from constrain.decoding.speculative import speculative_target
from constrain.generation import GenerationOptions
from constrain.sampling import AWRS, MaskedSampler

SAMPLING = SamplingOptions(temperature=0.0, top_k=5, top_p=0.9)


def test_every_method_is_registered_by_name() -> None:
    assert method_names() == ("greedy", "masked", "awrs", "smc", "asap", "dccd")


@pytest.mark.parametrize(
    ("name", "kind", "reported"),
    [
        ("greedy", TokenMethod, "masked"),
        ("masked", TokenMethod, "masked"),
        ("AWRS", TokenMethod, "awrs"),
        ("smc", SMC, "smc"),
        ("asap", NamedASAp, "asap"),
        ("dccd", DCCD, "dccd"),
    ],
)
def test_build_method_by_name(name: str, kind: type, reported: str) -> None:
    method = build_method(name, SAMPLING, {})
    assert isinstance(method, kind) and isinstance(method, DecodingMethod)
    assert method.name == reported
    assert isinstance(method, StreamingMethod) == (kind is TokenMethod)


def test_named_methods_take_generates_sampling_options() -> None:
    greedy = build_method("greedy", SAMPLING, {})
    masked = build_method("masked", SAMPLING, {})
    assert isinstance(greedy, TokenMethod) and isinstance(masked, TokenMethod)
    assert isinstance(greedy.sampler, MaskedSampler) and greedy.sampler.temperature == 0.0
    assert isinstance(masked.sampler, MaskedSampler)
    # a sampling method samples: temperature 0 becomes 1; top_k and top_p carry over
    assert (masked.sampler.temperature, masked.sampler.top_k, masked.sampler.top_p) == (
        1.0,
        5,
        0.9,
    )
    asap = build_method("asap", SamplingOptions(0.5), {})
    assert isinstance(asap, NamedASAp) and asap.fresh.temperature == 0.5
    smc = build_method("smc", SAMPLING, {"n_particles": 3})
    assert isinstance(smc, SMC) and smc.n_particles == 3


def test_unknown_names_and_options_are_reported() -> None:
    with pytest.raises(ValueError, match="unknown sampler 'beam'; choose one of greedy, masked"):
        build_method("beam", SAMPLING, {})
    with pytest.raises(TypeError, match="sampler='smc': .*particles"):
        build_method("smc", SAMPLING, {"particles": 3})
    with pytest.raises(ValueError, match="n_particles"):
        build_method("smc", SAMPLING, {"n_particles": 0})


def test_resolve_method_takes_objects_and_none() -> None:
    default = resolve_method(None, SAMPLING, {})
    assert isinstance(default, TokenMethod) and isinstance(default.sampler, MaskedSampler)
    assert default.sampler.temperature == 0.0 and default.sampler.top_k == 5
    awrs = resolve_method(AWRS(), SAMPLING, {})
    assert isinstance(awrs, TokenMethod) and awrs.name == "awrs"
    smc = SMC(n_particles=2)
    assert resolve_method(smc, SAMPLING, {}) is smc
    asap = ASAp()
    assert resolve_method(asap, SAMPLING, {}) is asap
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['n_particles'\\]"):
        resolve_method(smc, SAMPLING, {"n_particles": 3})
    with pytest.raises(TypeError, match="sampler= must be a method name"):
        resolve_method(42, SAMPLING, {})


class _Echo:
    """A method that decodes nothing (for the registry)."""

    name = "echo"

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        raise NotImplementedError


def _echo_factory(sampling: SamplingOptions, options: Mapping[str, Any]) -> DecodingMethod:
    if options:
        raise TypeError(f"unexpected options {sorted(options)}")
    return _Echo()


def test_register_method_adds_one_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    register_method("Echo", _echo_factory)
    assert method_names()[-1] == "echo"
    assert isinstance(build_method("ECHO", SAMPLING, {}), _Echo)
    with pytest.raises(TypeError, match="sampler='echo': unexpected options"):
        build_method("echo", SAMPLING, {"x": 1})
    with pytest.raises(ValueError, match="already registered"):
        register_method("smc", _echo_factory)


def test_speculation_needs_the_masked_sampler() -> None:
    greedy = build_method("greedy", SAMPLING, {})
    assert isinstance(greedy, TokenMethod)
    assert speculative_target(greedy) is greedy.sampler
    for name in ("awrs", "smc", "asap", "dccd"):
        with pytest.raises(TypeError, match=f"masked sampler .*not '{name}'"):
            speculative_target(build_method(name, SAMPLING, {}))


def test_generation_options_are_validated_once() -> None:
    with pytest.raises(TypeError, match="give one of schema="):
        GenerationOptions()
    options = GenerationOptions(regex="a+", temperature=0.3, top_k=2, sampler="masked")
    assert options.sampling == SamplingOptions(0.3, 2, 1.0)
    assert options.constraint == {"schema": None, "regex": "a+", "grammar": None, "choices": None}
    assert not options.is_diffusion
    method = options.method()
    assert isinstance(method, TokenMethod) and method.name == "masked"
    with pytest.raises(TypeError, match="masked sampler"):
        GenerationOptions(regex="a", sampler="smc", speculative=True).method()
    with pytest.raises(TypeError, match="sampler='awrs'"):
        GenerationOptions(regex="a", sampler="awrs", sampler_options={"k": 3}).method()


def test_repetition_penalties_are_options_of_the_token_level_loop() -> None:
    options = GenerationOptions(regex="a+", frequency_penalty=0.5, presence_penalty=0.25)
    assert options.sampling == SamplingOptions(0.0, 0, 1.0, 0.5, 0.25)
    assert options.sampling.penalized and not SamplingOptions().penalized
    assert isinstance(options.method(), TokenMethod)
    for name in ("smc", "asap", "dccd"):
        with pytest.raises(TypeError, match=f"frequency_penalty .*'{name}' would not apply"):
            GenerationOptions(regex="a", sampler=name, frequency_penalty=0.3).method()
    with pytest.raises(TypeError, match="without speculative="):
        GenerationOptions(regex="a", speculative=True, presence_penalty=0.3).method()
    with pytest.raises(ValueError, match="frequency_penalty must be a finite number"):
        GenerationOptions(regex="a", frequency_penalty=float("nan"))
    with pytest.raises(TypeError, match="presence_penalty= must be a number"):
        GenerationOptions(regex="a", presence_penalty="high")
