"""Speculative decoding on the toy bigram model: the output distribution is exactly the masked one.

The toy's language (``BIASED_REGEX``, 22 strings) lets the distribution of locally masked
sampling be computed exactly (``statistical.toy.exact_masked``). Speculation with any drafter —
the grammar's forced text, prompt lookup, a draft model (another bigram model), garbage, all of
them chained — must sample that same distribution (chi-square goodness of fit at fixed seeds),
and greedy speculation must return the non-speculative greedy output token for token.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
import torch
from statistical.toy import (
    BIASED_REGEX,
    CHARS,
    EOS,
    BigramLM,
    ToyModel,
    ToySpecSession,
    exact_masked,
    language,
    toy_matcher,
    toy_vocabulary,
)

from constrain import Matcher
from constrain.decoding import decode
from constrain.decoding.speculative import (
    Drafter,
    DraftModelDrafter,
    DraftRequest,
    GrammarDrafter,
    PromptLookupDrafter,
    speculative_decode,
)
from constrain.sampling import MaskedSampler

pytestmark = pytest.mark.statistical

N_SAMPLES = 2000
BATCH = 500
MAX_TOKENS = 8
LM = BigramLM(0)
PROMPT = [0, 1, 1, 3, 5]  # "abbdf": gives prompt lookup something to match


def _matcher(pattern: str = BIASED_REGEX) -> Matcher:
    return toy_matcher(pattern)


@functools.cache
def _language() -> tuple[str, ...]:
    return tuple(language())


class GarbageDrafter:
    """Proposes random ids, including EOS, special and out-of-range ones."""

    name = "garbage"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def begin(self, session: object, prompts: Sequence[Sequence[int]]) -> None:
        return None

    def propose(self, request: DraftRequest) -> None:
        for row in request.rows:
            request.offer(row, [self.rng.randrange(0, 14) for _ in range(5)], self.name)


def _drafters(name: str) -> list[Drafter]:
    vocab = toy_vocabulary()
    if name == "none":
        return []
    if name == "grammar":
        return [GrammarDrafter(vocab)]
    if name == "lookup":
        return [PromptLookupDrafter()]
    if name == "lookup_text":
        return [PromptLookupDrafter(vocab, min_chars=1)]
    if name == "draft_model":
        return [DraftModelDrafter(ToyModel(BigramLM(1)))]
    if name == "garbage":
        return [GarbageDrafter(1)]
    if name == "all":
        return [
            GrammarDrafter(vocab),
            PromptLookupDrafter(vocab, min_chars=1),
            DraftModelDrafter(ToyModel(BigramLM(1))),
            GarbageDrafter(2),
        ]
    raise AssertionError(name)


def _sample(drafters: list[Drafter], n: int, *, temperature: float, seed: int) -> list[str]:
    gen = torch.Generator().manual_seed(seed)
    out: list[str] = []
    for _ in range(n // BATCH):
        matchers: list[Matcher | None] = [_matcher() for _ in range(BATCH)]
        res = speculative_decode(
            ToySpecSession(LM, BATCH),
            matchers,
            drafters,
            prompts=[PROMPT] * BATCH,
            eos_ids=[EOS],
            max_tokens=MAX_TOKENS,
            temperature=temperature,
            generator=gen,
        )
        assert all(r == "stop" for r in res.finish_reasons)
        out += ["".join(CHARS[t] for t in toks) for toks in res.token_ids]
    return out


def _chi_square_p(samples: Sequence[str], probs: Mapping[str, float]) -> float:
    """Goodness-of-fit p-value (bins with expected count < 5 pooled; Wilson-Hilferty)."""
    n = len(samples)
    counts = Counter(samples)
    assert set(counts) <= set(probs), f"outside the language: {set(counts) - set(probs)}"
    big = [s for s in probs if probs[s] * n >= 5]
    small = [s for s in probs if probs[s] * n < 5]
    bins = [([s], probs[s]) for s in big]
    if small:
        bins.append((small, sum(probs[s] for s in small)))
    stat = 0.0
    for keys, p in bins:
        observed = sum(counts.get(k, 0) for k in keys)
        stat += (observed - n * p) ** 2 / (n * p)
    k = len(bins) - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))


@pytest.mark.parametrize("name", ["grammar", "lookup_text", "draft_model", "garbage", "all"])
def test_speculative_sampling_is_the_masked_distribution(name: str) -> None:
    target = exact_masked(LM, _language())
    samples = _sample(_drafters(name), N_SAMPLES, temperature=1.0, seed=11)
    p = _chi_square_p(samples, target)
    assert p > 1e-3, f"{name}: chi-square p = {p:.2g}"


def test_the_chi_square_check_detects_a_wrong_distribution() -> None:
    """The check has power: the exact target P(x | L) differs from the masked distribution."""
    from statistical.toy import exact_target

    samples = _sample([], N_SAMPLES, temperature=1.0, seed=11)
    assert _chi_square_p(samples, exact_masked(LM, _language())) > 1e-3
    assert _chi_square_p(samples, exact_target(LM, _language())) < 1e-6


def test_drafters_draft_and_mostly_get_accepted() -> None:
    """Not a vacuous pass: the drafters propose tokens and verification accepts many."""
    gen = torch.Generator().manual_seed(3)
    res = speculative_decode(
        ToySpecSession(LM, BATCH),
        [_matcher() for _ in range(BATCH)],
        _drafters("all"),
        prompts=[PROMPT] * BATCH,
        eos_ids=[EOS],
        max_tokens=MAX_TOKENS,
        temperature=1.0,
        generator=gen,
    )
    st = res.stats
    assert st.drafted["grammar"] > BATCH  # "a" forces "bbbbb" in ~94% of rows
    assert st.accepted["grammar"] == st.drafted["grammar"]  # forced tokens: p' = 1
    assert st.drafted["draft_model"] > 0 and st.accepted["draft_model"] > 0
    # batched verification: far fewer forward passes than output tokens
    assert st.forwards < st.output_tokens / 20


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("name", ["grammar", "lookup_text", "draft_model", "garbage", "all"])
def test_greedy_speculation_equals_greedy_decoding(seed: int, name: str) -> None:
    lm = BigramLM(seed, biased=seed % 2 == 0)
    pattern = BIASED_REGEX if seed < 3 else r"[a-e]{2,5}|f+g"
    base = decode(
        lm.session(1),
        [_matcher(pattern)],
        MaskedSampler(0.0),
        eos_ids=[EOS],
        max_tokens=MAX_TOKENS,
    )
    res = speculative_decode(
        ToySpecSession(lm, 1),
        [_matcher(pattern)],
        _drafters(name),
        prompts=[PROMPT],
        eos_ids=[EOS],
        max_tokens=MAX_TOKENS,
    )
    assert res.token_ids == base.token_ids
    assert res.finish_reasons == base.finish_reasons


def test_garbage_drafts_never_make_invalid_output() -> None:
    gen = torch.Generator().manual_seed(5)
    drafters: list[Drafter] = [GarbageDrafter(s) for s in range(3)]
    res = speculative_decode(
        ToySpecSession(LM, BATCH),
        [_matcher() for _ in range(BATCH)],
        drafters,
        prompts=[PROMPT] * BATCH,
        eos_ids=[EOS],
        max_tokens=MAX_TOKENS,
        temperature=1.5,
        generator=gen,
        max_draft=6,
    )
    lang = set(_language())
    for toks, why in zip(res.token_ids, res.finish_reasons, strict=True):
        assert why == "stop"
        assert "".join(CHARS[t] for t in toks) in lang
