"""AWRS: exact constrained samples and unbiased estimates of the allowed mass (fixed seeds).

Every test that compares a Monte-Carlo average with an exact value allows 3 standard errors
(plus a float32 rounding margin): the weights are bounded, so the central limit theorem applies
with a few thousand draws. Rows of one batch may share a matcher: sampling never advances it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from statistical.toy import (
    BIASED_REGEX,
    BOS_ROW,
    CHARS,
    EOS,
    BigramLM,
    language,
    toy_matcher,
)

from constrain import Matcher
from constrain.errors import SamplerError
from constrain.sampling import AWRS, MaskedSampler, Sampler
from constrain.testing import byte_vocabulary, tiny_vocabulary

pytestmark = pytest.mark.statistical

NESTED_LARK = 'start: "a" start "b" | "c" "d"*'  # a^n c d* b^n: context-free, unbounded
EMAIL_REGEX = r"[a-z]{2,8}@[a-z]{2,6}\.(com|org|net)"


def _matcher(kind: str, source: str, vocab=None) -> Matcher:  # type: ignore[no-untyped-def]
    return toy_matcher(source, kind, vocab)


def _walk(m: Matcher, tokens: list[int]) -> Matcher:
    for t in tokens:
        assert m.accept_token(t)
    return m


def _toy_prefix(m: Matcher, prefix: str) -> tuple[Matcher, int]:
    """Advance ``m`` over ``prefix``; return it and the bigram row of the next logits."""
    _walk(m, [CHARS.index(c) for c in prefix])
    return m, (CHARS.index(prefix[-1]) if prefix else BOS_ROW)


def _exact_mass(m: Matcher, logits: torch.Tensor, temperature: float = 1.0) -> float:
    """The probability mass of the allowed tokens under ``softmax(logits / temperature)``."""
    allowed = torch.from_numpy(m.allowed_token_ids().astype(np.int64))
    scores = logits.double() / temperature
    return math.exp(float(torch.logsumexp(scores[allowed], 0) - torch.logsumexp(scores, 0)))


def _check_unbiased(weights: torch.Tensor, exact: float) -> None:
    w = weights.double().exp().numpy()
    se = w.std(ddof=1) / math.sqrt(len(w))
    err = abs(w.mean() - exact)
    assert err <= 3 * se + 1e-6 * exact, (w.mean(), exact, se)


def _draw(
    sampler: AWRS, m: Matcher, logits_row: torch.Tensor, n: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = logits_row.expand(n, -1).clone()
    out = sampler.sample(logits, [m] * n, torch.Generator().manual_seed(seed))
    return out.token_ids, out.log_weights


def test_awrs_is_a_sampler() -> None:
    assert isinstance(AWRS(), Sampler)
    assert "AWRS(" in repr(AWRS())


# --------------------------------------------------------------------------------------------
# exactness of the samples


@pytest.mark.parametrize("prefix", ["", "c", "cf"])
def test_next_token_distribution_is_the_exact_constrained_one(prefix: str) -> None:
    lm = BigramLM(0)
    m, row = _toy_prefix(_matcher("regex", BIASED_REGEX), prefix)
    n = 10_000
    tokens, _ = _draw(AWRS(), m, lm.logits[row], n, seed=11)
    allowed = m.allowed_token_ids().tolist()
    assert set(tokens.tolist()) <= set(allowed)
    logp = lm.logprobs[row, allowed]
    exact = (logp - torch.logsumexp(logp, 0)).exp().numpy()
    counts = np.array([(tokens == a).sum().item() for a in allowed]) / n
    tv = 0.5 * np.abs(counts - exact).sum()
    assert tv < 0.02, (dict(zip(allowed, counts, strict=True)), exact)


def test_tokens_are_always_allowed_on_random_logits() -> None:
    vocab = tiny_vocabulary()  # has a non-EOS special token, which must never come out
    rng = np.random.default_rng(3)
    patterns = [r"[a-h]{1,6}(-[0-9]{2})?", r"(true|false|null|[0-9]+)", r"\w+( \w+)*"]
    matchers = []
    for k in range(48):
        m = _matcher("regex", patterns[k % len(patterns)], vocab)
        for _ in range(int(rng.integers(0, 4))):
            options = [t for t in m.allowed_token_ids().tolist() if t not in vocab.eos_ids]
            if not options:
                break
            assert m.accept_token(int(rng.choice(options)))
        matchers.append(m)
    width = vocab.size + 20  # padding columns with the highest logits: pruned, never sampled
    sampler = AWRS(max_checks=8)
    for step in range(5):
        logits = torch.from_numpy(rng.normal(scale=4.0, size=(48, width)).astype(np.float32))
        logits[:, vocab.size :] = 30.0
        logits[:, vocab.special_ids.tolist()] = 30.0
        out = sampler.sample(logits, matchers, torch.Generator().manual_seed(step))
        assert out.token_ids.dtype == torch.long and out.log_weights.dtype == torch.float64
        for m, t, lw in zip(
            matchers, out.token_ids.tolist(), out.log_weights.tolist(), strict=True
        ):
            assert t in set(m.allowed_token_ids().tolist())
            assert lw <= 1e-9
    assert sampler.fallbacks > 0  # the 30.0 columns are pruned, but many rows still fall back


# --------------------------------------------------------------------------------------------
# unbiased weights


@pytest.mark.parametrize(
    ("kind", "source", "prefix"),
    [
        ("regex", BIASED_REGEX, ""),
        ("regex", BIASED_REGEX, "c"),
        ("regex", BIASED_REGEX, "cf"),
        ("regex", BIASED_REGEX, "a"),
        ("regex", BIASED_REGEX, "abbbbb"),
        ("lark", NESTED_LARK, ""),
        ("lark", NESTED_LARK, "aa"),
        ("lark", NESTED_LARK, "aacd"),
        ("lark", NESTED_LARK, "aacdb"),
    ],
)
def test_weights_average_to_the_allowed_mass_toy(kind: str, source: str, prefix: str) -> None:
    lm = BigramLM(0) if source == BIASED_REGEX else BigramLM(1, biased=False, scale=2.0)
    m, row = _toy_prefix(_matcher(kind, source), prefix)
    tokens, lw = _draw(AWRS(), m, lm.logits[row], 3000, seed=5)
    assert set(tokens.tolist()) <= set(m.allowed_token_ids().tolist())
    _check_unbiased(lw, _exact_mass(m, lm.logits[row]))


def test_weights_are_exact_when_only_one_token_is_allowed() -> None:
    lm = BigramLM(0)
    m, row = _toy_prefix(_matcher("regex", BIASED_REGEX), "ab")  # only 'b' continues
    _, lw = _draw(AWRS(), m, lm.logits[row], 200, seed=0)
    np.testing.assert_allclose(lw.exp().numpy(), _exact_mass(m, lm.logits[row]), rtol=1e-6)


@pytest.mark.parametrize("prefix", ["", "ab", "abcdefgh@", "abc@xyz"])
def test_weights_average_to_the_allowed_mass_random_logits(prefix: str) -> None:
    vocab = byte_vocabulary()
    m = _walk(_matcher("regex", EMAIL_REGEX, vocab), list(prefix.encode()))
    rng = np.random.default_rng(len(prefix))
    row = torch.from_numpy(rng.normal(scale=3.0, size=vocab.size).astype(np.float32))
    sampler = AWRS()
    tokens, lw = _draw(sampler, m, row, 3000, seed=len(prefix))
    assert set(tokens.tolist()) <= set(m.allowed_token_ids().tolist())
    _check_unbiased(lw, _exact_mass(m, row))
    assert len(sampler.stats) == 3000


def test_weights_with_temperature_estimate_the_tempered_mass() -> None:
    lm = BigramLM(0)
    m, row = _toy_prefix(_matcher("regex", BIASED_REGEX), "c")
    tokens, lw = _draw(AWRS(temperature=0.5), m, lm.logits[row], 4000, seed=2)
    _check_unbiased(lw, _exact_mass(m, lm.logits[row], temperature=0.5))
    allowed = m.allowed_token_ids().tolist()
    scores = lm.logits[row, allowed].double() / 0.5
    exact = (scores - torch.logsumexp(scores, 0)).exp().numpy()
    counts = np.array([(tokens == a).sum().item() for a in allowed]) / len(tokens)
    assert 0.5 * np.abs(counts - exact).sum() < 0.03


def test_many_rejections_beyond_the_first_candidates() -> None:
    # allowed tokens are far less likely than the rest: more than the first chunk is checked
    vocab = byte_vocabulary()
    m = _matcher("regex", r"[0-9]+", vocab)
    row = torch.full((vocab.size,), 4.0)
    row[ord("0") : ord("9") + 1] = -1.0
    sampler = AWRS(max_checks=None)
    tokens, lw = _draw(sampler, m, row, 300, seed=4)
    assert set(tokens.tolist()) <= set(range(ord("0"), ord("9") + 1))
    assert np.mean(sampler.stats) > 40 and sampler.fallbacks == 0
    _check_unbiased(lw, _exact_mass(m, row))


# --------------------------------------------------------------------------------------------
# check counts and the fallback


def test_check_counts_are_recorded_per_row_and_step() -> None:
    lm = BigramLM(0)
    sampler = AWRS()
    m, row = _toy_prefix(_matcher("regex", BIASED_REGEX), "")
    free = torch.zeros(1, lm.logits.shape[1])
    for step in range(3):
        logits = torch.cat([lm.logits[row].expand(4, -1), free])
        out = sampler.sample(logits, [m, m, m, m, None], torch.Generator().manual_seed(step))
        assert out.log_weights[4] == 0.0  # unconstrained row
    assert len(sampler.stats) == 12  # constrained rows only
    assert all(2 <= c <= 11 for c in sampler.stats)  # accept + one more check, at least
    assert sampler.fell_back == [False] * 12
    sampler.reset_stats()
    assert sampler.stats == [] and sampler.fell_back == [] and sampler.fallbacks == 0


def test_unconstrained_rows_sample_the_model() -> None:
    lm = BigramLM(0)
    n = 10_000
    logits = lm.logits[BOS_ROW].expand(n, -1).clone()
    out = AWRS().sample(logits, [None] * n, torch.Generator().manual_seed(0))
    exact = lm.logprobs[BOS_ROW].exp().numpy()
    counts = np.bincount(out.token_ids.numpy(), minlength=len(exact)) / n
    assert 0.5 * np.abs(counts - exact).sum() < 0.02
    assert bool((out.log_weights == 0).all())


def test_terminated_rows_get_eos() -> None:
    m = _walk(_matcher("regex", BIASED_REGEX), [CHARS.index("c"), EOS])
    assert m.is_terminated()
    out = AWRS().sample(torch.zeros(2, 10), [m, m], torch.Generator().manual_seed(0))
    assert out.token_ids.tolist() == [EOS, EOS]


@pytest.mark.parametrize("prefix", ["", "c", "a"])
def test_max_checks_zero_is_the_exact_mask(prefix: str) -> None:
    lm = BigramLM(0)
    m, row = _toy_prefix(_matcher("regex", BIASED_REGEX), prefix)
    n = 3000
    sampler = AWRS(max_checks=0)
    tokens, lw = _draw(sampler, m, lm.logits[row], n, seed=9)
    assert sampler.fallbacks == n and sampler.stats == [0] * n and all(sampler.fell_back)
    masked = MaskedSampler(1.0).sample(lm.logits[row].expand(1, -1).clone(), [m])
    np.testing.assert_allclose(lw.numpy(), float(masked.log_weights[0]), atol=1e-6)
    allowed = m.allowed_token_ids().tolist()
    logp = lm.logprobs[row, allowed]
    exact = (logp - torch.logsumexp(logp, 0)).exp().numpy()
    counts = np.array([(tokens == a).sum().item() for a in allowed]) / n
    assert 0.5 * np.abs(counts - exact).sum() < 0.03


def test_fallback_rows_have_exact_weights_and_the_rest_stay_unbiased() -> None:
    vocab = byte_vocabulary()
    m = _walk(_matcher("regex", EMAIL_REGEX, vocab), list(b"ab"))
    rng = np.random.default_rng(8)
    row = torch.from_numpy(rng.normal(scale=3.0, size=vocab.size).astype(np.float32))
    sampler = AWRS(max_checks=3)
    tokens, lw = _draw(sampler, m, row, 3000, seed=8)
    exact = _exact_mass(m, row)
    fell_back = np.array(sampler.fell_back)
    assert 0 < fell_back.sum() == sampler.fallbacks < 3000
    assert (np.array(sampler.stats)[fell_back] == 3).all()
    np.testing.assert_allclose(lw.numpy()[fell_back], math.log(exact), atol=1e-6)
    assert set(tokens.tolist()) <= set(m.allowed_token_ids().tolist())
    _check_unbiased(lw, exact)


# --------------------------------------------------------------------------------------------
# errors


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="temperature"):
        AWRS(temperature=0.0)
    with pytest.raises(ValueError, match="max_checks"):
        AWRS(max_checks=-1)
    m = _matcher("regex", BIASED_REGEX)
    with pytest.raises(ValueError, match="one row per matcher"):
        AWRS().sample(torch.zeros(2, 10), [m])


def test_no_allowed_token_of_positive_probability_raises() -> None:
    m = _matcher("regex", BIASED_REGEX)
    logits = torch.zeros(1, 10)
    logits[0, [0, 2, 3, 4]] = float("-inf")  # every allowed first token is masked out
    with pytest.raises(SamplerError, match="probability 0"):
        AWRS().sample(logits, [m], torch.Generator().manual_seed(0))


def test_language_helper_matches_the_matcher() -> None:
    # the toy's enumerated language and the compiled grammar agree (guards the exact targets)
    compiled_ok = []
    for s in language():
        m = _matcher("regex", BIASED_REGEX)
        compiled_ok.append(all(m.accept_token(CHARS.index(c)) for c in s) and m.is_accepting())
    assert all(compiled_ok) and len(compiled_ok) == 22


def test_allowed_tokens_of_underflowing_probability_fall_back_exactly() -> None:
    m = _matcher("regex", BIASED_REGEX)
    logits = torch.zeros(3, 10)
    logits[:, [0, 2, 3, 4]] = -2000.0  # allowed, but exp() underflows in float64
    out = AWRS().sample(logits, [m] * 3, torch.Generator().manual_seed(0))
    assert set(out.token_ids.tolist()) <= {0, 2, 3, 4}
    exact = float(torch.logsumexp(logits[0, [0, 2, 3, 4]].double(), 0) - math.log(6.0))
    np.testing.assert_allclose(out.log_weights.numpy(), exact, rtol=1e-9)
