"""SMC: grammar-constrained sequential Monte Carlo recovers the model-given-grammar target.

The target is enumerable on the toy bigram model (``statistical.toy``). The main tests use
20,480 particles per proposal (640 runs of 32), and compare the *expected output distribution*
of SMC with the exact target: ``P(chosen = x) = E[sum_i w_i 1(x_i = x)]`` (``chosen`` is drawn
from the normalised weights), estimated by averaging the runs' weighted particle
distributions, which has far less noise than the 640 chosen outputs themselves.

The LM is the toy's biased bigram model with a milder first step (``'a'`` first with logit 1.0
instead of 4.0): locally constrained masking is still far from the target (TV 0.71) but SMC with
32 particles is not starved of particles that start away from ``'a'``. On the default setting
(masking puts 0.94 on ``abbbbb``) 32 particles often all start with ``'a'`` and no resampling can
recover (TV about 0.3); hundreds of particles per run are needed there.
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np
import pytest
import torch
from statistical.toy import (
    BIASED_REGEX,
    BOS_ROW,
    CHARS,
    EOS,
    MAX_LEN,
    BigramLM,
    ToySession,
    exact_masked,
    exact_target,
    language,
    toy_matcher,
)

from constrain import Matcher
from constrain.decoding import SMC, SMCResult, decode
from constrain.decoding.smc import effective_sample_size, resample_indices
from constrain.sampling import AWRS, MaskedSampler, Sampler
from constrain.testing import empirical, kl_divergence, total_variation

pytestmark = pytest.mark.statistical

RUNS_PER_BATCH = 32  # runs side by side in one session (32 x 32 = 1024 rows)


def _mild_lm() -> BigramLM:
    lm = BigramLM(0)
    lm.logits[BOS_ROW, 0] = 1.0
    lm.logprobs = torch.log_softmax(lm.logits.double(), dim=-1)
    return lm


@functools.lru_cache(maxsize=1)
def _language() -> list[str]:
    return language()  # the 22 strings of BIASED_REGEX (enumerating them takes a second)


def _matcher(regex: str = BIASED_REGEX) -> Matcher:
    return toy_matcher(regex)


def _run_many(
    lm: BigramLM,
    smc: SMC,
    runs: int,
    seed: int,
    *,
    max_tokens: int = MAX_LEN,
) -> list[SMCResult]:
    g = torch.Generator().manual_seed(seed)
    out: list[SMCResult] = []
    while len(out) < runs:
        k = min(RUNS_PER_BATCH, runs - len(out))
        session = lm.session(k * smc.n_particles)
        out += smc.run_batch(
            session, [_matcher()] * k, eos_ids=[EOS], max_tokens=max_tokens, generator=g
        )
    return out


def _expected_output(results: list[SMCResult]) -> dict[str, float]:
    agg: dict[str, float] = {}
    for r in results:
        for text, w in r.distribution().items():
            agg[text] = agg.get(text, 0.0) + w / len(results)
    return agg


def _log_mass(lm: BigramLM, strings: list[str]) -> float:
    return math.log(sum(math.exp(lm.string_logprob(s)) for s in strings))


# --------------------------------------------------------------------------------------------
# the target


@pytest.mark.parametrize("proposal", ["masked", "awrs"])
def test_smc_matches_the_exact_target(proposal: str) -> None:
    lm = _mild_lm()
    strings = _language()
    target = exact_target(lm, strings)
    masked_tv = total_variation(target, exact_masked(lm, strings))
    assert masked_tv >= 0.15  # the bias SMC must remove

    sampler: Sampler = MaskedSampler(1.0) if proposal == "masked" else AWRS()
    smc = SMC(sampler, n_particles=32, ess_threshold=0.5, resample="systematic")
    results = _run_many(lm, smc, runs=640, seed=1)

    expected = _expected_output(results)
    tv = total_variation(target, expected)
    assert tv <= 0.05, (tv, masked_tv)
    assert kl_divergence(expected, target) < 0.02
    # the 640 chosen outputs: valid, and (with their larger noise) near the target
    chosen = [r.text for r in results]
    assert set(chosen) <= set(strings)
    assert total_variation(target, empirical(c for c in chosen if c is not None)) < 0.1
    assert sum(r.resamples for r in results) > 0
    assert all(len(r.ess) == r.steps for r in results)
    # the normalising constant: exp(log_marginal_likelihood) is unbiased for sum_{x in L} p(x)
    z = np.exp([r.log_marginal_likelihood for r in results])
    exact_z = math.exp(_log_mass(lm, strings))
    assert abs(z.mean() - exact_z) <= 3 * z.std(ddof=1) / math.sqrt(len(z))
    if proposal == "awrs":
        assert isinstance(sampler, AWRS) and 1.0 < np.mean(sampler.stats) < 6.0


def test_masking_alone_is_biased_empirically() -> None:
    lm = _mild_lm()
    n = 4000
    result = decode(
        lm.session(n),
        [_matcher() for _ in range(n)],
        MaskedSampler(1.0),
        eos_ids=[EOS],
        max_tokens=MAX_LEN,
        generator=torch.Generator().manual_seed(0),
    )
    texts = ["".join(CHARS[t] for t in ids) for ids in result.token_ids]
    target = exact_target(lm, _language())
    assert total_variation(empirical(texts), exact_masked(lm, _language())) < 0.05
    assert total_variation(empirical(texts), target) >= 0.15


def test_potential_rules_out_strings_with_g() -> None:
    lm = _mild_lm()
    calls = 0

    def no_g(text: str, complete: bool) -> float:
        nonlocal calls
        calls += 1
        return -math.inf if "g" in text else 0.0

    strings = [s for s in _language() if "g" not in s]
    target = exact_target(lm, strings)
    smc = SMC(AWRS(), n_particles=32, potential=no_g, resample="systematic")
    results = _run_many(lm, smc, runs=640, seed=2)
    assert calls > 0
    for r in results:
        for text, w, reason in zip(r.texts, r.weights, r.finish_reasons, strict=True):
            if "g" in text:
                assert w == 0.0 and reason == "rejected"
        assert r.text is not None and "g" not in r.text
    assert total_variation(target, _expected_output(results)) <= 0.05
    z = np.exp([r.log_marginal_likelihood for r in results])
    exact_z = math.exp(_log_mass(lm, strings))
    assert abs(z.mean() - exact_z) <= 3 * z.std(ddof=1) / math.sqrt(len(z))


def test_max_tokens_truncates_the_target() -> None:
    # outputs of at most 2 tokens: 'c', 'cf', ... ; 'ab...' particles are incomplete at the
    # limit and get weight 0; complete ones are ended with EOS and weighted by p(EOS).
    lm = _mild_lm()
    short = [s for s in _language() if len(s) <= 2]
    target = exact_target(lm, short)
    smc = SMC(MaskedSampler(1.0), n_particles=32)
    results = _run_many(lm, smc, runs=96, seed=3, max_tokens=2)
    for r in results:
        assert r.steps <= 2
        for text, lw, reason in zip(r.texts, r.log_weights, r.finish_reasons, strict=True):
            assert len(text) <= 2
            if text.startswith("a"):
                assert lw == -math.inf and reason == "length"
    assert total_variation(target, _expected_output(results)) <= 0.05
    z = np.exp([r.log_marginal_likelihood for r in results])
    assert abs(z.mean() - math.exp(_log_mass(lm, short))) <= 3 * z.std(ddof=1) / math.sqrt(96)


# --------------------------------------------------------------------------------------------
# mechanics


def test_run_single_prompt_and_result_fields() -> None:
    lm = BigramLM(0)
    m = _matcher()
    smc = SMC(AWRS(), n_particles=8)
    r = smc.run(lm.session(8), m, eos_ids=[EOS], max_tokens=MAX_LEN + 1, generator=None)
    assert m.allowed_token_ids().tolist() == [0, 2, 3, 4]  # the caller's matcher is untouched
    assert len(r.token_ids) == len(r.texts) == len(r.log_weights) == 8
    assert r.chosen is not None and 0 <= r.chosen < 8
    assert r.text == r.texts[r.chosen]
    assert all(t in _language() for t in r.texts)
    assert all(reason == "stop" for reason in r.finish_reasons)
    assert ["".join(CHARS[i] for i in ids) for ids in r.token_ids] == r.texts
    assert math.isclose(sum(r.weights), 1.0)
    assert math.isclose(sum(r.distribution().values()), 1.0)
    assert r.seconds > 0 and r.steps >= 2
    assert "SMC(" in repr(smc)


def test_everything_ruled_out() -> None:
    lm = BigramLM(0)
    smc = SMC(MaskedSampler(1.0), n_particles=4, potential=lambda text, complete: -math.inf)
    r = smc.run(lm.session(4), _matcher(), eos_ids=[EOS], max_tokens=MAX_LEN)
    assert r.chosen is None and r.text is None
    assert r.log_marginal_likelihood == -math.inf
    assert r.weights == [0.0] * 4 and r.distribution() == {}
    assert r.finish_reasons == ["rejected"] * 4


def test_resampling_keeps_session_rows_and_particles_together() -> None:
    # a session that records what each row was fed, and permutes those records on reorder
    lm = BigramLM(0)

    class Recording(ToySession):
        def __init__(self, lm: BigramLM, batch: int) -> None:
            super().__init__(lm, batch)
            self.history: list[list[int]] = [[] for _ in range(batch)]
            self.reorders = 0

        def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
            if token_ids is not None:
                for row, tok in enumerate(token_ids.tolist()):
                    self.history[row].append(tok)
            return super().forward(token_ids)

        def reorder(self, indices: torch.Tensor) -> None:  # type: ignore[override]
            super().reorder(indices)
            self.history = [list(self.history[i]) for i in indices.tolist()]
            self.reorders += 1

    session = Recording(lm, 48)
    smc = SMC(MaskedSampler(1.0), n_particles=16, ess_threshold=1.0)
    results = smc.run_batch(
        session,
        [_matcher()] * 3,
        eos_ids=[EOS],
        max_tokens=MAX_LEN,
        generator=torch.Generator().manual_seed(0),
    )
    assert session.reorders > 0
    assert sum(r.resamples for r in results) > 0
    for k, r in enumerate(results):
        for p, ids in enumerate(r.token_ids):
            fed = session.history[k * 16 + p]
            assert fed[: len(ids)] == ids
            assert all(t == EOS for t in fed[len(ids) :])  # then pads
            assert r.texts[p] in _language()


def test_effective_sample_size() -> None:
    assert effective_sample_size([0.0] * 8) == pytest.approx(8.0)
    assert effective_sample_size([0.0, -math.inf, -math.inf]) == pytest.approx(1.0)
    assert effective_sample_size([-math.inf, -math.inf]) == 0.0
    w = np.array([0.5, 0.25, 0.125, 0.125])
    assert effective_sample_size(np.log(w) + 100.0) == pytest.approx(1.0 / (w**2).sum())


@pytest.mark.parametrize("method", ["multinomial", "systematic"])
def test_resample_indices(method: str) -> None:
    rng = np.random.default_rng(0)
    w = np.array([0.5, 0.0, 0.3, 0.2, 0.0])
    counts = np.zeros(5)
    for _ in range(2000):
        with np.errstate(divide="ignore"):
            lw = np.log(w)
        idx = resample_indices(lw, rng.random(5), method)  # type: ignore[arg-type]
        assert idx.shape == (5,) and idx.dtype == np.int64
        counts += np.bincount(idx, minlength=5)
        if method == "systematic":  # each particle gets floor or ceil of N w copies
            per = np.bincount(idx, minlength=5)
            assert (per >= np.floor(5 * w)).all() and (per <= np.ceil(5 * w)).all()
    assert counts[1] == counts[4] == 0
    np.testing.assert_allclose(counts / counts.sum(), w, atol=0.02)
    with pytest.raises(ValueError, match="every weight is zero"):
        resample_indices([-math.inf, -math.inf], rng.random(2), method)  # type: ignore[arg-type]


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="temperature 1"):
        SMC(MaskedSampler(0.7))
    with pytest.raises(ValueError, match="temperature 1"):
        SMC(MaskedSampler(0.0))
    with pytest.raises(ValueError, match="truncate"):
        SMC(MaskedSampler(1.0, top_k=5))
    with pytest.raises(ValueError, match="n_particles"):
        SMC(n_particles=0)
    with pytest.raises(ValueError, match="ess_threshold"):
        SMC(ess_threshold=1.5)
    with pytest.raises(ValueError, match="resample"):
        SMC(resample="stratified")  # type: ignore[arg-type]
    smc = SMC(n_particles=4)
    with pytest.raises(ValueError, match="session has 3 rows"):
        smc.run(BigramLM(0).session(3), _matcher(), eos_ids=[EOS], max_tokens=4)
    with pytest.raises(ValueError, match="max_tokens"):
        smc.run(BigramLM(0).session(4), _matcher(), eos_ids=[EOS], max_tokens=-1)
    with pytest.raises(ValueError, match="eos_ids"):
        smc.run(BigramLM(0).session(4), _matcher(), eos_ids=[], max_tokens=4)


# --------------------------------------------------------------------------------------------
# HFSession.reorder, on a tiny randomly initialised Llama (no download)


def _tiny_hf_owner(vocab_size: int = 10) -> types.SimpleNamespace:
    import inspect

    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).eval()
    params = inspect.signature(model.forward).parameters
    return types.SimpleNamespace(
        model=model,
        device=torch.device("cpu"),
        pad_id=EOS,
        cache_keyword="cache" if "cache" in params else "past_key_values",
    )


def test_hf_session_reorder_matches_a_session_built_in_that_order() -> None:
    from constrain.integrations.transformers import HFSession

    owner = _tiny_hf_owner()
    prompts = [[1, 2, 3], [4], [5, 6]]
    a = HFSession(owner, prompts)  # type: ignore[arg-type]
    first = a.forward(None)
    a.forward(torch.tensor([7, 8, 0]))
    order = [2, 0, 0]
    a.reorder(order)
    got = a.forward(torch.tensor([1, 2, 3]))
    assert a.prompt_tokens == [2, 3, 3]

    b = HFSession(owner, [prompts[i] for i in order])  # type: ignore[arg-type]
    torch.testing.assert_close(b.forward(None), first[order], atol=1e-5, rtol=1e-5)
    b.forward(torch.tensor([[7, 8, 0][i] for i in order]))
    torch.testing.assert_close(got, b.forward(torch.tensor([1, 2, 3])), atol=1e-5, rtol=1e-5)

    with pytest.raises(IndexError):
        a.reorder([0, 3, 1])
    with pytest.raises(ValueError):
        a.reorder([])


def test_smc_runs_on_an_hf_session() -> None:
    from constrain.integrations.transformers import HFSession

    owner = _tiny_hf_owner()
    smc = SMC(AWRS(), n_particles=8, ess_threshold=1.0)
    session = HFSession(owner, [[1, 2]] * 8)  # type: ignore[arg-type]
    r = smc.run(
        session,
        _matcher(),
        eos_ids=[EOS],
        max_tokens=MAX_LEN,
        generator=torch.Generator().manual_seed(0),
    )
    assert all(t in _language() or w == 0.0 for t, w in zip(r.texts, r.weights, strict=True))
    assert r.text in _language()
