"""ASAp (grammar-aligned decoding) on the toy bigram model, whose target is enumerable.

The toy's language (``BIASED_REGEX``, 22 strings) is small enough that the exact target
``P(y | y in L)``, the exact masked distribution and the exact expected future grammaticality
``EFG(w) = sum_{y: w y in L} P(y | w)`` are computed by enumeration (``statistical.toy``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import pytest
import torch
from statistical.toy import (
    BIASED_REGEX,
    CHARS,
    EOS,
    BigramLM,
    exact_masked,
    exact_target,
    language,
    toy_matcher,
)

from constrain import Matcher
from constrain.decoding import decode
from constrain.decoding.asap import ASAp, ASApSample
from constrain.sampling import MaskedSampler
from constrain.testing import empirical, kl_divergence, total_variation

pytestmark = pytest.mark.statistical

N_SAMPLES = 20_000
MAX_TOKENS = 8  # longer than every string of the language: no truncation
LM = BigramLM(0)


def _matcher(pattern: str = BIASED_REGEX) -> Matcher:
    return toy_matcher(pattern)


@functools.cache
def _language() -> list[str]:
    return language()  # enumerates 9**6 strings: once per module


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _text(tokens: Sequence[int]) -> str:
    return "".join(CHARS[t] for t in tokens)


def _ids(text: str) -> list[int]:
    return [CHARS.index(c) for c in text]


def _prefix_logprob(lm: BigramLM, prefix: str) -> float:
    prev, total = 10, 0.0  # 10: the BOS row
    for ch in prefix:
        tok = CHARS.index(ch)
        total += float(lm.logprobs[prev, tok])
        prev = tok
    return total


def _exact_efg(lm: BigramLM, strings: Sequence[str], prefix: str) -> float:
    """``EFG(prefix) = sum over strings s of L starting with prefix of P(s, EOS | prefix)``."""
    base = _prefix_logprob(lm, prefix)
    return sum(math.exp(lm.string_logprob(s) - base) for s in strings if s.startswith(prefix))


def _sample(
    asap: ASAp, n: int, seed: int, *, lm: BigramLM = LM, max_tokens: int = MAX_TOKENS
) -> list[ASApSample]:
    return asap.sample(
        lambda: lm.session(1), _matcher(), n=n, max_tokens=max_tokens, generator=_gen(seed)
    )


@pytest.fixture(scope="module")
def converged() -> tuple[ASAp, list[ASApSample]]:
    asap = ASAp()
    return asap, _sample(asap, N_SAMPLES, seed=0)


def test_asap_matches_the_exact_target_where_masking_does_not(
    converged: tuple[ASAp, list[ASApSample]],
) -> None:
    asap, samples = converged
    strings = _language()
    target = exact_target(LM, strings)
    assert all(s.finish_reason == "stop" for s in samples)
    texts = [_text(s.token_ids) for s in samples]
    assert set(texts) <= set(strings)
    asap_emp = empirical(texts)
    tv_asap = total_variation(asap_emp, target)
    # plain masked sampling with the library's sampler and decoding loop (fewer samples: its
    # bias is large), and its exact distribution
    n_masked = 1000
    first = _matcher()
    res = decode(
        LM.session(n_masked),
        [first.fork() for _ in range(n_masked)],
        MaskedSampler(1.0),
        eos_ids=[EOS],
        max_tokens=MAX_TOKENS,
        generator=_gen(1),
        overlap=False,
    )
    masked_emp = empirical(_text(t) for t in res.token_ids)
    tv_masked = total_variation(masked_emp, target)
    tv_masked_exact = total_variation(exact_masked(LM, strings), target)
    print(
        f"\nTV(ASAp {N_SAMPLES} samples, target) = {tv_asap:.4f}, "
        f"KL(target || ASAp) = {kl_divergence(target, asap_emp):.5f}; "
        f"TV(masked {n_masked} samples, target) = {tv_masked:.4f}, "
        f"TV(exact masked, target) = {tv_masked_exact:.4f}; "
        f"P_ASAp(abbbbb) = {asap_emp.get('abbbbb', 0.0):.4f} (target "
        f"{target['abbbbb']:.4f}, masked {masked_emp.get('abbbbb', 0.0):.4f}); "
        f"trie {asap.trie_size} nodes, {asap.forward_passes} forward passes"
    )
    assert tv_asap <= 0.05
    assert tv_masked >= 0.15
    assert tv_masked_exact >= 0.15
    assert abs(asap_emp["abbbbb"] - target["abbbbb"]) < 0.02
    # learning makes later samples free: far fewer forward passes than 20,000 decodes
    assert asap.forward_passes < N_SAMPLES


def test_expected_future_converges_to_the_exact_efg(
    converged: tuple[ASAp, list[ASApSample]],
) -> None:
    asap, samples = converged
    strings = _language()
    seen = {_text(s.token_ids) for s in samples}
    prefixes = sorted({s[:k] for s in strings for k in range(len(s) + 1)})
    exact_nodes = 0
    for prefix in prefixes:
        estimate = asap.expected_future(_ids(prefix))
        efg = _exact_efg(LM, strings, prefix)
        if estimate is None:  # never visited: only possible for a rare prefix
            assert efg < 1e-3
            continue
        assert estimate >= efg * (1 - 1e-9)  # a sound over-approximation
        if all(s in seen for s in strings if s.startswith(prefix)):
            # everything under the prefix was explored: the estimate is exact
            assert estimate == pytest.approx(efg, rel=1e-9)
            exact_nodes += 1
        else:
            assert estimate == pytest.approx(efg, rel=0.05)
    root = asap.expected_future()
    assert root == pytest.approx(_exact_efg(LM, strings, ""), rel=1e-3)
    assert exact_nodes >= 10
    # a node of the biased branch: 'a' must be followed by 'bbbbb' and EOS
    assert asap.expected_future(_ids("a")) == pytest.approx(_exact_efg(LM, strings, "a"), rel=1e-9)


def test_expected_future_only_decreases_and_stays_an_upper_bound() -> None:
    strings = _language()
    watched = ["", "a", "ab", "c", "e", "eg"]
    exact = {p: _exact_efg(LM, strings, p) for p in watched}
    asap = ASAp()
    gen = _gen(3)
    previous: dict[str, float] = {}
    for _ in range(400):
        asap.sample(lambda: LM.session(1), _matcher(), n=1, max_tokens=MAX_TOKENS, generator=gen)
        for p in watched:
            est = asap.expected_future(_ids(p))
            if est is None:
                continue
            assert est >= exact[p] * (1 - 1e-9)
            if p in previous:
                assert est <= previous[p] * (1 + 1e-12)
            previous[p] = est
    assert set(previous) == set(watched)
    assert previous[""] < 0.5  # it did learn: Ẽ(root) started at 1 (true value 0.008)


@pytest.mark.parametrize("biased", [True, False])
def test_first_sample_is_plain_masked_sampling(biased: bool) -> None:
    lm = BigramLM(1, biased=biased)
    pattern = BIASED_REGEX if biased else r"[a-i]{1,5}"
    distinct = set()
    # enough seeds for the biased model, whose masked draw is "abbbbb" 90% of the time
    for seed in range(40):
        asap = ASAp()
        first = asap.sample(
            lambda lm=lm: lm.session(1),
            _matcher(pattern),
            n=1,
            max_tokens=MAX_TOKENS,
            generator=_gen(seed),
        )[0]
        masked = decode(
            lm.session(1),
            [_matcher(pattern)],
            MaskedSampler(1.0),
            eos_ids=[EOS],
            max_tokens=MAX_TOKENS,
            generator=_gen(seed),
            overlap=False,
        )
        assert first.token_ids == masked.token_ids[0]
        assert first.finish_reason == "stop"
        # with Ẽ = 1 everywhere, ASAp's importance weight is masking's (float32 logits)
        assert first.log_weight == pytest.approx(masked.log_weights[0], abs=1e-4)
        distinct.add(tuple(first.token_ids))
    assert len(distinct) >= (2 if biased else 5)  # the seeds exercised different paths


def test_trie_persists_across_calls_and_reset_forgets() -> None:
    asap = ASAp()
    m = _matcher()
    first = asap.sample(lambda: LM.session(1), m, n=30, max_tokens=MAX_TOKENS, generator=_gen(5))
    assert len(first) == 30 and asap.num_samples == 30
    assert m.num_accepted_tokens == 0  # the matcher is left where it started
    size, root = asap.trie_size, asap.expected_future()
    assert size > 1 and root is not None and root < 1.0
    passes = asap.forward_passes
    asap.sample(lambda: LM.session(1), m, n=30, max_tokens=MAX_TOKENS, generator=_gen(6))
    assert asap.num_samples == 60
    assert asap.trie_size >= size
    after = asap.expected_future()
    assert after is not None and after <= root
    # the second round reused the trie: fewer forward passes than the first
    assert asap.forward_passes - passes < passes
    asap.reset()
    assert (asap.trie_size, asap.num_samples, asap.forward_passes) == (1, 0, 0)
    assert asap.expected_future() == 1.0
    assert asap.expected_future(_ids("a")) is None
    # a new key (another prompt) starts a new trie too
    asap.sample(lambda: LM.session(1), m, n=5, max_tokens=MAX_TOKENS, generator=_gen(7), key="p1")
    assert asap.num_samples == 5
    asap.sample(lambda: LM.session(1), m, n=2, max_tokens=MAX_TOKENS, generator=_gen(8), key="p2")
    assert asap.num_samples == 2


def test_max_tokens_dead_ends_are_learned() -> None:
    # With 3 tokens, 'a' can never complete (it needs 'bbbbb'): the first sample (masked)
    # almost surely walks into it; ASAp then gives 'a' Ẽ = 0 and never returns.
    asap = ASAp()
    samples = _sample(asap, 3000, seed=11, max_tokens=3)
    incomplete = [s for s in samples if s.finish_reason == "length"]
    assert len(incomplete) == 1  # "a" -> "ab" -> "abb", then never again
    for s in incomplete:
        assert _text(s.token_ids).startswith("a") and s.log_weight == -math.inf
    assert asap.expected_future(_ids("a")) == 0.0
    short = [s for s in _language() if len(s) <= 3]
    target = exact_target(LM, short)
    complete = [_text(s.token_ids) for s in samples if s.finish_reason == "stop"]
    assert set(complete) <= set(short)
    assert total_variation(empirical(complete), target) <= 0.05


def test_importance_weights_estimate_the_target() -> None:
    # Self-normalised importance weights correct the early, biased samples.
    asap = ASAp()
    samples = _sample(asap, 3000, seed=21)
    top = max(s.log_weight for s in samples)
    weights = [math.exp(s.log_weight - top) for s in samples]
    total = sum(weights)
    estimate = sum(
        w for s, w in zip(samples, weights, strict=True) if s.token_ids == _ids("abbbbb")
    )
    target = exact_target(LM, _language())["abbbbb"]
    assert estimate / total == pytest.approx(target, abs=0.03)


def test_decode_returns_rows_and_validates_arguments() -> None:
    asap = ASAp()
    res = asap.decode(
        lambda: LM.session(1), _matcher(), n=4, max_tokens=MAX_TOKENS, generator=_gen(0)
    )
    assert len(res.token_ids) == 4 and res.finish_reasons == ["stop"] * 4
    assert all(_text(t) in _language() for t in res.token_ids)
    assert all(math.isfinite(w) for w in res.log_weights)
    with pytest.raises(ValueError, match="temperature"):
        ASAp(0.0)
    with pytest.raises(ValueError, match="max_tokens"):
        asap.sample(lambda: LM.session(1), _matcher(), max_tokens=-1)
