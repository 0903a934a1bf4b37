"""MaskedSampler and the autoregressive decoding loop, on fake sessions (no model).

The fake session returns seeded random logits that depend only on each row's own history, like
a real model with a key-value cache, over a byte vocabulary plus padding columns.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest
import torch

from constrain import Compiler, Grammar, Matcher
from constrain.decoding import DecodeResult, decode
from constrain.decoding.autoregressive import PenalizedSession, iter_decode
from constrain.errors import InternalError
from constrain.sampling import MaskedSampler, RandomStreams, Sample, Sampler
from constrain.sampling.masked import gumbel_argmax
from constrain.sampling.streams import draw_uniform
from constrain.testing import byte_vocabulary

VOCAB = byte_vocabulary()  # ids 0..255 are bytes, 256 is EOS
EOS = 256
WIDTH = 300  # logits columns; 257..299 are padding


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():  # type: ignore[no-untyped-def]
    # The tensors here are tiny; torch's intra-op threads only add contention on a busy machine.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


_COMPILED: dict[str, object] = {}


def _compiled(pattern: str):  # type: ignore[no-untyped-def]
    if pattern not in _COMPILED:
        _COMPILED[pattern] = Compiler(VOCAB).compile(Grammar.from_regex(pattern))
    return _COMPILED[pattern]


def _matcher(pattern: str) -> Matcher:
    return Matcher(_compiled(pattern))  # type: ignore[arg-type]


def _allowed(m: Matcher) -> set[int]:
    return set(m.allowed_token_ids().tolist())


def _walk(m: Matcher, rng: np.random.Generator, steps: int) -> Matcher:
    """Advance ``m`` by up to ``steps`` random allowed non-EOS tokens."""
    for _ in range(steps):
        options = [t for t in _allowed(m) if t != EOS]
        if not options:
            break
        assert m.accept_token(int(rng.choice(options)))
    return m


def _random_logits(rng: np.random.Generator, rows: int, pad_value: float = 50.0) -> torch.Tensor:
    logits = rng.normal(scale=3.0, size=(rows, WIDTH)).astype(np.float32)
    logits[:, VOCAB.size :] = pad_value  # padding columns would win if they were not masked
    return torch.from_numpy(logits)


def _logsumexp(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    top = x.max()
    return float(top + np.log(np.exp(x - top).sum()))


PATTERNS = [r"[a-h]{1,6}(-[0-9]{2})?", r"(true|false|null|[0-9]+)", r"\w+( \w+)*", r"[^x]{2,5}x"]

# --------------------------------------------------------------------------------------------
# MaskedSampler


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(0.0, 0, 1.0), (0.7, 0, 1.0), (1.5, 0, 1.0), (0.7, 3, 1.0), (1.5, 0, 0.6), (1.0, 2, 0.9)],
)
def test_sampler_never_chooses_a_disallowed_token(
    temperature: float, top_k: int, top_p: float
) -> None:
    rng = np.random.default_rng(7)
    gen = torch.Generator().manual_seed(7)
    sampler = MaskedSampler(temperature, top_k=top_k, top_p=top_p)
    for trial in range(12):
        matchers = [
            _walk(_matcher(p), rng, int(rng.integers(0, 5)))
            for p in PATTERNS[trial % 2 :] + PATTERNS[: trial % 2]
        ]
        allowed = [_allowed(m) for m in matchers]
        for _ in range(5):
            logits = _random_logits(rng, len(matchers))
            sample = sampler.sample(logits, matchers, gen)
            assert sample.token_ids.dtype == torch.int64
            assert sample.token_ids.shape == (len(matchers),)
            for i, tok in enumerate(sample.token_ids.tolist()):
                assert tok in allowed[i], (trial, i, tok)
                assert tok < VOCAB.size


def test_greedy_is_argmax_over_allowed_tokens() -> None:
    rng = np.random.default_rng(11)
    sampler = MaskedSampler(0.0)
    for _ in range(20):
        matchers = [_walk(_matcher(p), rng, int(rng.integers(0, 4))) for p in PATTERNS]
        logits = _random_logits(rng, len(matchers))
        raw = logits.numpy().copy()
        tokens = sampler.sample(logits, matchers).token_ids.tolist()
        for i, m in enumerate(matchers):
            ids = np.array(sorted(_allowed(m)))
            assert tokens[i] == int(ids[np.argmax(raw[i, ids])])


def test_sampler_masks_the_logits_in_place() -> None:
    m = _matcher("[a-c]+")
    logits = _random_logits(np.random.default_rng(0), 1)
    MaskedSampler(0.0).sample(logits, [m])
    finite = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    assert finite == {ord("a"), ord("b"), ord("c")}


def test_padding_columns_are_never_chosen() -> None:
    # every real token gets a low logit, the padding a huge one
    m = _matcher(".")
    gen = torch.Generator().manual_seed(3)
    for temperature in (0.0, 1.0, 5.0):
        sampler = MaskedSampler(temperature)
        for _ in range(20):
            logits = torch.full((1, WIDTH), -20.0)
            logits[0, VOCAB.size :] = 100.0
            tok = int(sampler.sample(logits, [m], gen).token_ids[0])
            assert tok < VOCAB.size
            assert tok in _allowed(m)


def _reference_distribution(
    scores: np.ndarray, allowed: list[int], temperature: float, top_k: int, top_p: float
) -> dict[int, float]:
    """Naive top-k / top-p over the allowed tokens: {token: probability}."""
    vals = np.array([scores[t] for t in allowed], dtype=np.float64) / temperature
    order = sorted(range(len(allowed)), key=lambda j: -vals[j])
    if top_k:
        order = order[:top_k]
    probs = np.exp(vals[order] - vals[order].max())
    probs /= probs.sum()
    if top_p < 1.0:
        kept, mass = 0, 0.0
        while mass < top_p:
            mass += probs[kept]
            kept += 1
        order, probs = order[:kept], probs[:kept] / probs[:kept].sum()
    return {allowed[j]: float(p) for j, p in zip(order, probs, strict=True)}


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(1.0, 0, 1.0), (1.0, 3, 1.0), (0.5, 0, 0.7), (2.0, 4, 0.8), (1.0, 1, 1.0), (1.0, 0, 0.05)],
)
def test_top_k_top_p_keep_exactly_the_reference_candidates(
    temperature: float, top_k: int, top_p: float
) -> None:
    allowed = [ord(c) for c in "abcdefgh"]
    scores = np.full(WIDTH, 6.0, dtype=np.float32)  # disallowed tokens would dominate
    scores[allowed] = [1.2, 0.1, 1.0, 0.7, 0.4, 0.9, -0.3, 0.0]
    expected = _reference_distribution(scores, allowed, temperature, top_k, top_p)

    rows, draws = 32, 60
    matchers = [_matcher("[a-h]") for _ in range(rows)]
    sampler = MaskedSampler(temperature, top_k=top_k, top_p=top_p)
    gen = torch.Generator().manual_seed(1234)
    counts: dict[int, int] = {}
    base = torch.from_numpy(scores).expand(rows, WIDTH)
    for _ in range(draws):
        for tok in sampler.sample(base.clone(), matchers, gen).token_ids.tolist():
            counts[tok] = counts.get(tok, 0) + 1
    total = rows * draws
    assert set(counts) == set(expected)
    for tok, p in expected.items():
        assert abs(counts[tok] / total - p) < 0.04, (chr(tok), counts[tok] / total, p)


def test_log_weights_are_the_log_allowed_mass() -> None:
    rng = np.random.default_rng(5)
    for temperature in (0.0, 0.8):
        sampler = MaskedSampler(temperature, top_k=2)
        for _ in range(10):
            matchers: list[Matcher | None] = [
                _walk(_matcher(p), rng, int(rng.integers(0, 4))) for p in PATTERNS
            ]
            matchers.append(None)  # unconstrained: weight 0
            logits = _random_logits(rng, len(matchers), pad_value=float(rng.normal()))
            raw = logits.numpy().astype(np.float64).copy()
            weights = sampler.sample(logits, matchers).log_weights
            assert weights.dtype == torch.float64
            assert weights.device.type == "cpu"
            for i, m in enumerate(matchers):
                if m is None:
                    assert float(weights[i]) == 0.0
                    continue
                ids = sorted(_allowed(m))
                ref = _logsumexp(raw[i, ids]) - _logsumexp(raw[i])  # at temperature 1
                assert float(weights[i]) == pytest.approx(ref, abs=1e-4)
                assert float(weights[i]) <= 0.0


def test_dead_ends_are_drawn_again_and_leave_the_weight() -> None:
    """A canonical dead end is masked out and redrawn; the weight is the mass left without it."""
    dead = {ord("a")}
    m = _matcher("[abc]x")
    m.canonical = object()  # type: ignore[assignment]  # only "is canonical" is read
    m.is_dead_end = lambda token: token in dead  # type: ignore[method-assign]
    logits = torch.full((1, VOCAB.size), -5.0)
    logits[0, [ord("a"), ord("b"), ord("c")]] = torch.tensor([3.0, 2.0, 1.0])
    raw = logits.numpy().astype(np.float64).copy()
    sample = MaskedSampler(0.0).sample(logits, [m])
    assert int(sample.token_ids[0]) == ord("b")
    ref = _logsumexp(raw[0, [ord("b"), ord("c")]]) - _logsumexp(raw[0])
    assert float(sample.log_weights[0]) == pytest.approx(ref, abs=1e-5)
    dead.update((ord("b"), ord("c")))  # nothing left: a bug, said at once
    with pytest.raises(InternalError, match="dead ends"):
        MaskedSampler(0.0).sample(logits.clone(), [m])


def test_unconstrained_rows_are_left_alone() -> None:
    logits = _random_logits(np.random.default_rng(2), 2)
    raw = logits.clone()
    tokens = MaskedSampler(0.0).sample(logits, [None, _matcher("[a-c]")]).token_ids.tolist()
    assert torch.equal(logits[0], raw[0])
    assert tokens[0] == int(raw[0].argmax())


def test_sample_uses_the_prepared_rows() -> None:
    # prepare() decides which rows are masked; sample() with the same matchers (another list
    # holding the same objects) uses that work instead of redoing it for every row
    matchers = [_matcher("[a-c]+"), _matcher("[0-9]+")]
    sampler = MaskedSampler()
    sampler.prepare(list(matchers), [1])
    logits = _random_logits(np.random.default_rng(8), 2)
    raw = logits.clone()
    sampler.sample(logits, list(matchers))
    assert torch.equal(logits[0], raw[0])  # row 0 was not among the prepared rows
    assert set(torch.isfinite(logits[1]).nonzero().flatten().tolist()) == _allowed(matchers[1])


def test_sample_ignores_a_preparation_for_other_matchers() -> None:
    # e.g. left over from a decode that was closed early
    letters, digits = _matcher("[a-c]+"), _matcher("[0-9]+")
    sampler = MaskedSampler()
    sampler.prepare([letters], [0])
    logits = torch.zeros(1, WIDTH)
    logits[0, ord("a")] = 5.0
    tok = int(sampler.sample(logits, [digits]).token_ids[0])
    assert tok in _allowed(digits)


def test_sampler_argument_validation() -> None:
    with pytest.raises(ValueError, match="temperature"):
        MaskedSampler(-0.1)
    with pytest.raises(ValueError, match="temperature"):
        MaskedSampler(float("nan"))
    with pytest.raises(ValueError, match="top_k"):
        MaskedSampler(1.0, top_k=-1)
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="top_p"):
            MaskedSampler(1.0, top_p=bad)
    m = _matcher("[a-c]")
    with pytest.raises(ValueError, match="shape"):
        MaskedSampler().sample(torch.zeros(WIDTH), [m])
    with pytest.raises(ValueError, match="shape"):
        MaskedSampler().sample(torch.zeros(2, WIDTH), [m])


def test_masked_sampler_is_a_sampler() -> None:
    assert isinstance(MaskedSampler(), Sampler)
    assert "temperature=0.5" in repr(MaskedSampler(0.5))


def test_sampler_reuses_its_buffer_across_batch_sizes() -> None:
    # one sampler, batches of changing size (SMC resampling, a decode after another): each
    # step masks, chooses and weighs exactly what a fresh sampler does
    rng = np.random.default_rng(21)
    sampler = MaskedSampler(0.0)
    for size in (2, 5, 1, 3, 5, 6):
        matchers: list[Matcher | None] = [
            _walk(_matcher(PATTERNS[j % len(PATTERNS)]), rng, int(rng.integers(0, 3)))
            for j in range(size)
        ]
        if size == 3:
            matchers[0] = None  # a subset of live rows
        logits = _random_logits(rng, size)
        want = logits.clone()
        expected = MaskedSampler(0.0).sample(want, matchers)
        before = sampler._applier
        got = sampler.sample(logits, matchers)
        assert torch.equal(logits, want)
        assert torch.equal(got.token_ids, expected.token_ids)
        assert torch.equal(got.log_weights, expected.log_weights)
        if before is not None and before.bitmask.shape[0] >= size:
            assert sampler._applier is before  # no new buffer when the old one is big enough


@pytest.mark.parametrize("front", [True, False])
def test_log_weights_of_a_subset_of_rows(front: bool) -> None:
    rng = np.random.default_rng(13)
    matchers: list[Matcher | None] = [_walk(_matcher(p), rng, 2) for p in PATTERNS]
    matchers.insert(0 if front else 2, None)
    logits = _random_logits(rng, len(matchers), pad_value=0.0)
    raw = logits.numpy().astype(np.float64).copy()
    weights = MaskedSampler(0.7).sample(logits, matchers, torch.Generator().manual_seed(0))
    for i, m in enumerate(matchers):
        if m is None:
            assert float(weights.log_weights[i]) == 0.0
            continue
        ids = sorted(_allowed(m))
        ref = _logsumexp(raw[i, ids]) - _logsumexp(raw[i])
        assert float(weights.log_weights[i]) == pytest.approx(ref, abs=1e-5)


def test_log_weights_of_a_tiny_allowed_mass_are_exact() -> None:
    # the allowed tokens 90 below the rest: float32 exp underflows, the exact path takes over
    m = _matcher("[a-c]+")
    logits = _random_logits(np.random.default_rng(3), 2, pad_value=0.0)
    for row in range(2):
        logits[row, [ord("a"), ord("b"), ord("c")]] -= 90.0 if row == 0 else 30.0
    raw = logits.numpy().astype(np.float64).copy()
    weights = MaskedSampler(0.0).sample(logits, [m, _matcher("[a-c]+")]).log_weights
    for row in range(2):
        ref = _logsumexp(raw[row, [97, 98, 99]]) - _logsumexp(raw[row])
        assert float(weights[row]) == pytest.approx(ref, abs=1e-4)
    assert float(weights[0]) < -90.0


def test_a_row_with_nothing_allowed_raises() -> None:
    logits = _random_logits(np.random.default_rng(4), 2)
    logits[1, [ord("a"), ord("b"), ord("c")]] = float("-inf")
    with pytest.raises(InternalError, match=r"no token is allowed in rows \[1\]"):
        MaskedSampler(1.0).sample(logits, [_matcher("[a-c]+"), _matcher("[a-c]+")])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sampler_backends_agree(temperature: float) -> None:
    rng = np.random.default_rng(17)
    matchers = [_walk(_matcher(p), rng, 2) for p in PATTERNS]
    logits = _random_logits(rng, len(matchers))
    plain = logits.clone()
    auto = MaskedSampler(temperature).sample(logits, matchers, torch.Generator().manual_seed(5))
    torch_ = MaskedSampler(temperature, backend="torch").sample(
        plain, matchers, torch.Generator().manual_seed(5)
    )
    assert torch.equal(logits, plain)
    assert torch.equal(auto.token_ids, torch_.token_ids)
    torch.testing.assert_close(auto.log_weights, torch_.log_weights, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="backend must be one of"):
        MaskedSampler(backend="cuda")


def test_seeded_sampling_is_reproducible() -> None:
    rng = np.random.default_rng(9)
    matchers = [_matcher(r"\w+") for _ in range(4)]
    logits = _random_logits(rng, 4)

    def draw(seed: int) -> list[list[int]]:
        gen = torch.Generator().manual_seed(seed)
        sampler = MaskedSampler(1.3, top_k=50)
        return [sampler.sample(logits.clone(), matchers, gen).token_ids.tolist() for _ in range(8)]

    assert draw(0) == draw(0)
    assert draw(0) != draw(1)


def test_gumbel_argmax_draws_the_softmax() -> None:
    # the sampling primitive: exact frequencies, never a -inf entry, the generator's draws
    p = np.array([0.5, 0.0, 0.2, 0.05, 0.25, 0.0])
    logp = np.full(len(p), -np.inf, dtype=np.float32)
    logp[p > 0] = np.log(p[p > 0])
    scores = torch.from_numpy(logp).expand(4000, -1)
    gen = torch.Generator().manual_seed(11)
    counts = np.zeros(len(p))
    for _ in range(10):
        chosen = gumbel_argmax(scores, gen)
        assert chosen.dtype == torch.int64
        assert chosen.shape == (4000,)
        counts += np.bincount(chosen.numpy(), minlength=len(p))
    assert counts[1] == counts[5] == 0
    np.testing.assert_allclose(counts / counts.sum(), p, atol=0.01)
    again = gumbel_argmax(scores[0], torch.Generator().manual_seed(3))
    assert again.ndim == 0
    assert int(again) == int(gumbel_argmax(scores[0], torch.Generator().manual_seed(3)))


# --------------------------------------------------------------------------------------------
# Decoding loop


class FakeSession:
    """Logits ``(B, WIDTH)`` seeded by each row's seed and own history; records what it is fed."""

    def __init__(
        self,
        seeds: Sequence[int],
        *,
        width: int = WIDTH,
        bias: dict[int, float] | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        self.seeds = list(seeds)
        self.width = width
        self.bias = bias or {}
        self.shape = shape
        self.history: list[list[int]] = [[] for _ in self.seeds]
        self.fed: list[list[int]] = []
        self.logits: list[torch.Tensor] = []
        self.calls = 0

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        self.calls += 1
        if token_ids is not None:
            assert token_ids.dtype == torch.long
            ids = token_ids.tolist()
            assert len(ids) == len(self.seeds)
            self.fed.append(ids)
            for hist, tok in zip(self.history, ids, strict=True):
                hist.append(tok)
        rows = []
        for seed, hist in zip(self.seeds, self.history, strict=True):
            rng = np.random.default_rng([seed, len(hist), *hist])
            rows.append(rng.normal(scale=2.0, size=self.width))
        out = np.array(rows, dtype=np.float32)
        for tok, b in self.bias.items():
            out[:, tok] += b
        if self.width > VOCAB.size:
            out[:, VOCAB.size :] += 30.0
        logits = torch.from_numpy(out)
        self.logits.append(logits.clone())
        if self.shape is not None:
            return torch.zeros(self.shape)
        return logits


def _text(tokens: list[int]) -> str:
    return bytes(tokens).decode("latin-1")


def _accepts(pattern: str, tokens: list[int]) -> bool:
    m = _matcher(pattern)
    return m.accept_tokens(tokens) == len(tokens) and m.is_accepting()


def test_decode_stops_at_eos() -> None:
    # EOS is strongly preferred but only allowed once the output is complete
    m = _matcher("[a-z]+")
    session = FakeSession([1], bias={EOS: 10.0})
    res = decode(session, [m], MaskedSampler(), eos_ids=[EOS], max_tokens=20)
    assert isinstance(res, DecodeResult)
    assert res.finish_reasons == ["stop"]
    assert len(res.token_ids[0]) == 1
    assert chr(res.token_ids[0][0]).islower()
    assert m.is_terminated()
    assert res.steps == 2  # one letter, then EOS
    assert session.calls == 2  # prefill + one forward


def test_decode_stops_when_the_grammar_is_complete() -> None:
    # EOS is disfavoured, but after "abc" nothing else is allowed
    m = _matcher("abc")
    session = FakeSession([2], bias={EOS: -10.0})
    res = decode(session, [m], MaskedSampler(), eos_ids=[EOS], max_tokens=50)
    assert _text(res.token_ids[0]) == "abc"
    assert res.finish_reasons == ["stop"]
    assert m.is_terminated()
    assert res.steps == 4


def test_decode_length_at_max_tokens() -> None:
    m = _matcher("[a-z]+")
    session = FakeSession([3], bias={EOS: -10.0})
    res = decode(session, [m], MaskedSampler(), eos_ids=[EOS], max_tokens=5)
    assert res.finish_reasons == ["length"]
    assert len(res.token_ids[0]) == 5
    assert res.steps == 5
    assert session.calls == 5  # no forward pass after the last step
    assert not m.is_terminated()
    assert _accepts("[a-z]+", res.token_ids[0])


def test_decode_max_tokens_zero() -> None:
    session = FakeSession([3])
    res = decode(session, [_matcher("[a-z]+")], MaskedSampler(), eos_ids=[EOS], max_tokens=0)
    assert res.token_ids == [[]]
    assert res.finish_reasons == ["length"]
    assert res.steps == 0
    assert session.calls == 1


def test_unconstrained_row_follows_the_raw_logits() -> None:
    session = FakeSession([4, 5], width=VOCAB.size, bias={EOS: 4.0})
    matchers: list[Matcher | None] = [None, _matcher("[0-9]{3}")]
    res = decode(session, matchers, MaskedSampler(), eos_ids=[EOS], max_tokens=30)
    # row 0 is the greedy argmax of the raw logits until it picks EOS
    expected: list[int] = []
    for logits in session.logits:
        tok = int(logits[0].argmax())
        if tok == EOS:
            break
        expected.append(tok)
    assert res.token_ids[0] == expected
    assert res.finish_reasons[0] == ("stop" if len(expected) < 30 else "length")
    assert res.log_weights[0] == 0.0
    assert _accepts("[0-9]{3}", res.token_ids[1])
    assert res.finish_reasons[1] == "stop"
    assert res.log_weights[1] < 0.0


BATCH_PATTERNS: list[str | None] = [r"[a-h]{1,6}(-[0-9]{2})?", None, r"\w+( \w+)*", r"[0-9]{2}"]


def _run_batch(
    patterns: Sequence[str | None],
    seeds: Sequence[int],
    *,
    temperature: float = 0.0,
    overlap: bool | None = None,
    max_tokens: int = 12,
    pad_id: int | None = None,
) -> tuple[DecodeResult, FakeSession, list[Matcher | None]]:
    matchers = [None if p is None else _matcher(p) for p in patterns]
    session = FakeSession(seeds, bias={EOS: 1.0})
    gen = torch.Generator().manual_seed(99) if temperature else None
    res = decode(
        session,
        matchers,
        MaskedSampler(temperature),
        eos_ids=[EOS],
        max_tokens=max_tokens,
        pad_id=pad_id,
        generator=gen,
        overlap=overlap,
    )
    return res, session, matchers


def test_batch_rows_are_independent() -> None:
    seeds = [10, 11, 12, 13]
    res, _, _ = _run_batch(BATCH_PATTERNS, seeds)
    for i, (pattern, seed) in enumerate(zip(BATCH_PATTERNS, seeds, strict=True)):
        alone, _, _ = _run_batch([pattern], [seed])
        assert res.token_ids[i] == alone.token_ids[0], i
        assert res.finish_reasons[i] == alone.finish_reasons[0]
        assert res.log_weights[i] == pytest.approx(alone.log_weights[0], abs=1e-9)
        if pattern is not None and res.finish_reasons[i] == "stop":
            assert _accepts(pattern, res.token_ids[i])


def test_finished_rows_are_fed_the_pad_token() -> None:
    patterns = ["ab", "[a-z]+"]
    for pad_id in (None, 7):
        matchers = [_matcher(p) for p in patterns]
        session = FakeSession([20, 21], bias={EOS: -10.0})
        res = decode(session, matchers, MaskedSampler(), eos_ids=[EOS], max_tokens=6, pad_id=pad_id)
        assert _text(res.token_ids[0]) == "ab"
        assert res.finish_reasons == ["stop", "length"]
        pad = EOS if pad_id is None else pad_id
        # steps 1-2 feed "a", "b"; row 0 takes EOS at step 3 and is padded from then on
        assert [fed[0] for fed in session.fed] == [ord("a"), ord("b"), pad, pad, pad]
        assert [fed[1] for fed in session.fed] == res.token_ids[1][:5]


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_overlap_does_not_change_the_output(temperature: float) -> None:
    seeds = [30, 31, 32, 33]
    on, _, _ = _run_batch(BATCH_PATTERNS, seeds, temperature=temperature, overlap=True)
    off, _, _ = _run_batch(BATCH_PATTERNS, seeds, temperature=temperature, overlap=False)
    assert on.token_ids == off.token_ids
    assert on.finish_reasons == off.finish_reasons
    assert on.log_weights == off.log_weights
    assert on.steps == off.steps


class RecordingSampler:
    """Wrap a sampler; record the threads ``prepare`` ran on and every sample."""

    def __init__(self, inner: MaskedSampler) -> None:
        self.inner = inner
        self.prepare_threads: list[int] = []
        self.samples: list[Sample] = []

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        self.prepare_threads.append(threading.get_ident())
        self.inner.prepare(matchers, rows)

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: torch.Generator | None = None,
    ) -> Sample:
        s = self.inner.sample(logits, matchers, generator)
        self.samples.append(s)
        return s


@pytest.mark.parametrize("overlap", [True, False, None])
def test_prepare_runs_in_a_worker_thread_only_with_overlap(overlap: bool | None) -> None:
    # None (the default) overlaps only for a model on a GPU; FakeSession's logits are on the CPU
    sampler = RecordingSampler(MaskedSampler())
    res = decode(
        FakeSession([40]),
        [_matcher("[a-z]{4}")],
        sampler,
        eos_ids=[EOS],
        max_tokens=10,
        overlap=overlap,
    )
    assert len(res.token_ids[0]) == 4
    assert len(sampler.prepare_threads) == res.steps  # prefill + one per forward
    main = threading.get_ident()
    if overlap:
        assert all(t != main for t in sampler.prepare_threads)
    else:
        assert all(t == main for t in sampler.prepare_threads)


def test_log_weights_sum_the_sampler_weights_of_live_steps() -> None:
    sampler = RecordingSampler(MaskedSampler())
    patterns = ["ab", "[a-z]{5}"]
    res = decode(
        FakeSession([50, 51]),
        [_matcher(p) for p in patterns],
        sampler,
        eos_ids=[EOS],
        max_tokens=10,
    )
    assert res.finish_reasons == ["stop", "stop"]
    lengths = [len(t) + 1 for t in res.token_ids]  # tokens plus EOS
    assert lengths == [3, 6]
    for i, n in enumerate(lengths):
        expected = sum(float(s.log_weights[i]) for s in sampler.samples[:n])
        assert res.log_weights[i] == pytest.approx(expected, abs=1e-12)
        assert res.log_weights[i] < 0.0


class FixedSampler:
    """Always choose ``token`` (ignoring the mask)."""

    def __init__(self, token: int) -> None:
        self.token = token

    def prepare(self, matchers: Sequence[Matcher | None], rows: Sequence[int]) -> None:
        pass

    def sample(
        self,
        logits: torch.Tensor,
        matchers: Sequence[Matcher | None],
        generator: torch.Generator | None = None,
    ) -> Sample:
        n = logits.shape[0]
        return Sample(
            torch.full((n,), self.token, dtype=torch.long), torch.zeros(n, dtype=torch.float64)
        )


def test_rejected_token_raises() -> None:
    with pytest.raises(InternalError, match="rejects"):
        decode(
            FakeSession([1]),
            [_matcher("[0-9]+")],
            FixedSampler(ord("x")),
            eos_ids=[EOS],
            max_tokens=5,
        )


def test_eos_before_the_output_is_complete_raises() -> None:
    with pytest.raises(InternalError, match="EOS"):
        decode(
            FakeSession([1]), [_matcher("[0-9]+")], FixedSampler(EOS), eos_ids=[EOS], max_tokens=5
        )


def test_fixed_sampler_is_fine_on_unconstrained_rows() -> None:
    res = decode(FakeSession([1]), [None], FixedSampler(ord("x")), eos_ids=[EOS], max_tokens=3)
    assert res.token_ids == [[ord("x")] * 3]
    assert res.finish_reasons == ["length"]


def test_iter_decode_yields_each_step() -> None:
    seeds = [60, 61, 62, 63]
    matchers = [None if p is None else _matcher(p) for p in BATCH_PATTERNS]
    steps = iter_decode(
        FakeSession(seeds, bias={EOS: 1.0}),
        matchers,
        MaskedSampler(),
        eos_ids=[EOS],
        max_tokens=12,
    )
    rebuilt: list[list[int]] = [[] for _ in seeds]
    yielded = 0
    while True:
        try:
            rows, ids = next(steps)
        except StopIteration as done:
            result: DecodeResult = done.value
            break
        yielded += 1
        assert len(rows) == len(ids) > 0
        assert rows == sorted(set(rows))
        for i, tok in zip(rows, ids, strict=True):
            assert tok != EOS
            rebuilt[i].append(tok)
    assert rebuilt == result.token_ids
    assert yielded <= result.steps
    # decode() and its on_tokens callback see the same thing
    seen: list[tuple[list[int], list[int]]] = []
    again = decode(
        FakeSession(seeds, bias={EOS: 1.0}),
        [None if p is None else _matcher(p) for p in BATCH_PATTERNS],
        MaskedSampler(),
        eos_ids=[EOS],
        max_tokens=12,
        on_tokens=lambda r, t: seen.append((list(r), list(t))),
    )
    assert again.token_ids == result.token_ids
    assert len(seen) == yielded


def test_iter_decode_can_be_closed_early() -> None:
    # warm up, so that lazily started threads are not counted
    decode(FakeSession([70]), [_matcher("[a-z]+")], MaskedSampler(), eos_ids=[EOS], max_tokens=2)
    threads_before = threading.active_count()
    session = FakeSession([70], bias={EOS: -10.0})
    m = _matcher("[a-z]+")
    steps = iter_decode(session, [m], MaskedSampler(), eos_ids=[EOS], max_tokens=100, overlap=True)
    first = next(steps)
    second = next(steps)
    assert first[0] == second[0] == [0]
    steps.close()
    calls = session.calls
    assert calls == 2  # the prefill and the forward pass after the first step
    with pytest.raises(StopIteration):
        next(steps)
    assert session.calls == calls
    assert m.num_accepted_tokens == 2
    assert threading.active_count() == threads_before  # the worker thread was shut down


def test_decode_argument_validation() -> None:
    m = _matcher("[a-z]+")
    with pytest.raises(ValueError, match="max_tokens"):
        decode(FakeSession([1]), [m], MaskedSampler(), eos_ids=[EOS], max_tokens=-1)
    with pytest.raises(ValueError, match="eos_ids"):
        decode(FakeSession([1]), [m], MaskedSampler(), eos_ids=[], max_tokens=4)
    for shape in [(2, WIDTH), (WIDTH,)]:
        with pytest.raises(ValueError, match="shape"):
            decode(
                FakeSession([1], shape=shape),
                [_matcher("[a-z]+")],
                MaskedSampler(),
                eos_ids=[EOS],
                max_tokens=4,
            )


def test_random_streams_are_keyed_per_row_and_counter() -> None:
    alone = RandomStreams.for_requests(5, 1)
    batch = RandomStreams.for_requests(4, 3)
    for _ in range(3):  # draw n of key 5 is the same alone and as row 1 of a batch
        assert torch.equal(alone.uniform(7)[0], batch.uniform(7)[1])
    view = batch.rows([2])
    assert not torch.equal(view.uniform(7), RandomStreams([6]).uniform(7))  # counter 3, not 0
    kids = RandomStreams([5]).spawn(2)
    assert len(kids) == 2 and not torch.equal(kids.uniform(4)[0], kids.uniform(4)[1])
    with pytest.raises(ValueError, match="leading axis"):
        draw_uniform((2, 3), RandomStreams([1, 2, 3]))


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_masked_sampling_with_streams_does_not_depend_on_the_batch(temperature: float) -> None:
    logits = torch.randn(3, 300, generator=torch.Generator().manual_seed(0))
    sampler = MaskedSampler(temperature)
    streams = RandomStreams.for_requests(10, 3)
    together = [sampler.sample(logits.clone(), [None] * 3, streams).token_ids for _ in range(4)]
    for k in range(3):
        one = RandomStreams.for_requests(10 + k, 1)
        alone = [sampler.sample(logits[k : k + 1].clone(), [None], one).token_ids for _ in range(4)]
        assert [int(t[k]) for t in together] == [int(t[0]) for t in alone]


def test_penalized_session_lowers_each_generated_token_by_its_count() -> None:
    inner = FakeSession([60, 61])
    session = PenalizedSession(FakeSession([60, 61]), frequency_penalty=0.5, presence_penalty=2.0)
    fed = [[7, 9], [7, 9], [8, 9]]
    for step in [None, *fed]:
        ids = None if step is None else torch.tensor(step, dtype=torch.long)
        got = session.forward(ids)
        want = inner.forward(ids)
    counts = {0: {7: 2, 8: 1}, 1: {9: 3}}  # row -> token -> times generated
    for row, tokens in counts.items():
        for tok, c in tokens.items():
            want[row, tok] -= 0.5 * c + 2.0
    assert torch.equal(got, want)  # the prompt is not counted; nothing else changes


def test_frequency_penalty_breaks_a_repetition_loop() -> None:
    # a "model" that always prefers the token it just wrote: greedy repeats it until max_tokens;
    # the penalty makes it move on and end where the grammar allows
    class Sticky:
        def __init__(self) -> None:
            self.last = 97  # "a"

        def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
            if token_ids is not None:
                self.last = int(token_ids[0])
            logits = torch.zeros((1, VOCAB.size))
            logits[0, self.last] = 5.0
            logits[0, EOS] = 1.0
            return logits

    plain = decode(Sticky(), [_matcher("[a-c]+")], MaskedSampler(), eos_ids=[EOS], max_tokens=30)
    assert plain.finish_reasons == ["length"] and _text(plain.token_ids[0]) == "a" * 30
    session = PenalizedSession(Sticky(), frequency_penalty=1.0, presence_penalty=0.0)
    res = decode(session, [_matcher("[a-c]+")], MaskedSampler(), eos_ids=[EOS], max_tokens=30)
    assert res.finish_reasons == ["stop"]
    assert _accepts("[a-c]+", res.token_ids[0]) and len(res.token_ids[0]) < 30
