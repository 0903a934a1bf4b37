"""Speculative decoding's parts: draft requests, drafters, the adaptive policy, the loop's edges.

The distribution tests are in ``tests/statistical/test_speculative.py`` (toy model) and the
real-model tests in ``tests/integration/test_speculative_generate.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from constrain import Compiler, Grammar, Matcher, Vocabulary
from constrain.decoding.draft_policy import PER_TOKEN, DraftPolicy
from constrain.decoding.drafters import (
    DraftRequest,
    GrammarDrafter,
    PromptLookupDrafter,
    TokenText,
)
from constrain.decoding.speculative import speculative_decode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from statistical.toy import EOS, BigramLM, ToySpecSession, toy_vocabulary  # noqa: E402


def _words_vocab() -> Vocabulary:
    # bytes 0-255, then a few merged tokens, then EOS
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    tokens += [b'{"', b'":', b'":"', b'",', b"name", b"na", b"Ana", b" Silva", b"order", b"orderId"]
    tokens.append(None)
    return Vocabulary.from_bytes(tokens, eos_ids=[len(tokens) - 1])


def _id(vocab: Vocabulary, text: bytes) -> int:
    return next(t for t in range(vocab.size) if vocab.token_bytes_of(t) == text)


def _request(matchers: list[Matcher | None], budget: int = 8) -> DraftRequest:
    n = len(matchers)
    return DraftRequest(list(range(n)), [[1, 2] for _ in range(n)], matchers, [budget] * n, {9})


def _toy_matcher(pattern: str) -> Matcher:
    return Matcher(Compiler(toy_vocabulary()).compile(Grammar.from_regex(pattern)))


# -- DraftRequest ---------------------------------------------------------------------------


def test_offer_stops_at_the_first_token_the_grammar_rejects() -> None:
    m = _toy_matcher("abc|abd")
    req = _request([m])
    assert req.offer(0, [0, 1, 5, 2], "x") == 2  # "a", "b", then "f" is rejected
    assert req.drafts[0] == [0, 1]
    assert req.sources[0] == ["x", "x"]
    assert m.num_accepted_tokens == 2  # drafting advances the matcher (the loop rolls back)


def test_offer_closes_the_row_after_eos_and_respects_the_budget() -> None:
    m = _toy_matcher("ab?")
    req = _request([m], budget=5)
    assert req.offer(0, [0, EOS, 1], "x") == 2
    assert req.room(0) == 0 and req.closed[0]
    req2 = _request([_toy_matcher("a{1,9}")], budget=3)
    assert req2.offer(0, [0] * 6, "x") == 3


def test_offer_rejects_ids_past_the_vocabulary_and_unconstrained_rows_take_anything() -> None:
    req = _request([_toy_matcher("a+"), None])
    assert req.offer(0, [10_000], "x") == 0
    assert req.offer(1, [3, 4, 5], "x") == 3


def test_quota_limits_each_drafter_separately() -> None:
    req = _request([_toy_matcher("a{1,9}")])
    req.quota = lambda row, source, drafted: 2 if source == "x" else 1
    assert req.offer(0, [0, 0, 0], "x") == 2
    assert req.offer(0, [0, 0], "y") == 1
    assert req.drafts[0] == [0, 0, 0]


def test_pick_takes_the_most_likely_allowed_token_above_min_prob() -> None:
    req = _request([_toy_matcher("[bc]")])
    logits = torch.tensor([5.0, 1.0, 2.0, -9, -9, -9, -9, -9, -9, -9])
    assert req.pick(0, logits, "x")  # "a" is not allowed: the best allowed is "c"
    assert req.drafts[0] == [2]
    req2 = _request([_toy_matcher("[bc]")])
    assert not req2.pick(0, logits, "x", min_prob=0.5)  # "c" has p ~ 0.05


# -- TokenText, GrammarDrafter, PromptLookupDrafter ------------------------------------------


def test_token_text_learns_the_models_style() -> None:
    vocab = _words_vocab()
    text = TokenText(vocab)
    colon_quote = _id(vocab, b'":"')
    assert text.tokenize(b'":"') == [colon_quote]  # fewest tokens before any output is seen
    text.observe([_id(vocab, b'":'), _id(vocab, b'"')])
    assert text.tokenize(b'":"') == [_id(vocab, b'":'), _id(vocab, b'"')]


def test_token_text_uses_the_canonical_encoder_until_it_has_seen_output() -> None:
    vocab = _words_vocab()
    calls: list[str] = []

    def encode(s: str) -> list[int]:
        calls.append(s)
        return [_id(vocab, b"n"), _id(vocab, b"a")]

    text = TokenText(vocab, encode)
    assert text.tokenize(b"na") == [_id(vocab, b"n"), _id(vocab, b"a")]
    assert calls == ["na"]
    text.observe([_id(vocab, b"na")])
    assert text.tokenize(b"na") == [_id(vocab, b"na")]


def test_grammar_drafter_drops_a_last_token_that_could_merge_with_what_follows() -> None:
    vocab = _words_vocab()
    drafter = GrammarDrafter(vocab)
    assert drafter.tokens_for(b"order") == []  # "order" + "Id" may follow: "orderId"
    assert drafter.tokens_for(b'{"name') == [_id(vocab, b'{"'), _id(vocab, b"name")]


def test_grammar_drafter_drafts_the_forced_text() -> None:
    vocab = _words_vocab()
    grammar = Grammar.from_regex(r'\{"name":"[A-Z][a-z]+"\}')
    m = Matcher(Compiler(vocab).compile(grammar))
    req = DraftRequest([0], [[1]], [m], [8], {vocab.eos_ids[0]})
    drafter = GrammarDrafter(vocab)
    drafter.begin(None, [[1]])
    drafter.propose(req)
    assert vocab.decode(req.drafts[0]) == b'{"name":"'  # fewest tokens: '{"', 'name', '":"'
    assert req.sources[0] == ["grammar"] * len(req.drafts[0])


def test_prompt_lookup_by_tokens() -> None:
    drafter = PromptLookupDrafter(max_ngram=2)
    assert drafter.lookup([5, 6, 7, 8, 9, 5, 6], 3) == [7, 8, 9]
    assert drafter.lookup([5, 6, 7, 1, 2], 3) == []
    assert drafter.lookup([4, 7, 1, 7], 2) == [1, 7]  # the latest earlier match of "7"


def test_prompt_lookup_by_text_finds_values_tokenized_differently() -> None:
    vocab = _words_vocab()
    drafter = PromptLookupDrafter(vocab)
    prompt = b"Name: Ana Silva. Age: 34."
    toks, cursor = drafter.lookup_text(prompt, b'{"name":"Ana', 4)
    assert vocab.decode(toks).startswith(b" Silva")
    assert cursor == prompt.index(b"Ana") + 3
    # a short match only in the output is not used
    assert drafter.lookup_text(b"zzz", b'{"a":"x","b":"', 4) == ([], 0)
    # a value just begun ("3" of "34") is matched at a word start, after the cursor
    toks, cursor = drafter.lookup_text(b"Room 3. Age: 34.", b'{"age":3', 4, cursor=8)
    assert vocab.decode(toks).startswith(b"4")
    assert cursor == len(b"Room 3. Age: 3")


# -- the adaptive policy ---------------------------------------------------------------------


class _D:
    def __init__(self, name: str, prior: float, cost: float = 0.0) -> None:
        self.name, self.prior, self.cost = name, prior, cost


def test_policy_switches_off_drafters_that_do_not_pay_and_probes_them() -> None:
    policy = DraftPolicy([_D("good", 0.9), _D("bad", 0.2), _D("costly", 0.5, cost=0.9)], 8)  # type: ignore[list-item]
    policy.timed(1, 0.10)
    policy.timed(4, 0.18)  # a multi-position pass costs 1.8x
    policy.iteration = 1
    assert policy(0, "good", 0) == 8
    assert policy(0, "bad", 0) == 0
    assert policy(0, "costly", 3) == 0  # extending costs its own 0.9 per token
    policy.iteration = 0
    assert policy(0, "bad", 0) == 1  # probe
    for _ in range(40):
        policy.outcome("good", False)
    assert policy.rates["good"] < 0.1
    policy.iteration = 5
    assert policy(0, "good", 0) == 0
    assert math.isclose(policy.start, 0.8)
    assert PER_TOKEN < 0.1


# -- the loop's edges ------------------------------------------------------------------------


def test_max_tokens_is_respected_with_long_drafts() -> None:
    lm = BigramLM(0)
    m = _toy_matcher("a+")
    vocab = toy_vocabulary()
    res = speculative_decode(
        ToySpecSession(lm, 1),
        [m],
        [PromptLookupDrafter(vocab, min_chars=1)],
        prompts=[[0] * 10],
        eos_ids=[EOS],
        max_tokens=5,
        max_draft=8,
    )
    assert len(res.token_ids[0]) == 5 and res.finish_reasons == ["length"]


def test_zero_tokens_and_unconstrained_rows() -> None:
    lm = BigramLM(0)
    res = speculative_decode(
        ToySpecSession(lm, 2), [None, None], [], prompts=[[1], [2]], eos_ids=[EOS], max_tokens=0
    )
    assert res.token_ids == [[], []]
    res = speculative_decode(
        ToySpecSession(lm, 2),
        [None, _toy_matcher("c+")],
        [PromptLookupDrafter()],
        prompts=[[1, 2, 1, 2], [2, 2]],
        eos_ids=[EOS],
        max_tokens=6,
    )
    assert all(t == 2 for t in res.token_ids[1]) and res.token_ids[1]
    assert res.stats.output_tokens == sum(len(t) for t in res.token_ids)
    assert math.isnan(res.log_weights[0])


def test_argument_errors() -> None:
    lm = BigramLM(0)
    with pytest.raises(ValueError, match="max_draft"):
        speculative_decode(
            ToySpecSession(lm, 1), [None], [], prompts=[[1]], eos_ids=[EOS], max_tokens=2,
            max_draft=-1,
        )  # fmt: skip
    with pytest.raises(ValueError, match="prompts"):
        speculative_decode(
            ToySpecSession(lm, 1), [None], [], prompts=[[1], [2]], eos_ids=[EOS], max_tokens=2
        )
    with pytest.raises(ValueError, match="eos"):
        speculative_decode(
            ToySpecSession(lm, 1), [None], [], prompts=[[1]], eos_ids=[], max_tokens=2
        )
