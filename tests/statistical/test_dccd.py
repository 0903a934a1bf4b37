"""DCCD (draft-conditioned constrained decoding) with toy models standing in for `Model`.

The drafter is the toy bigram model behind a fake ``Model`` (prompt ignored). The structurer of
the conditioning test is a "copy" model: its logits favour, at output position ``j``, the
``j``-th character of the draft found in its prompt, so what reaches the output shows both that
the second stage reads the draft and that it is constrained.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import pytest
import torch
from statistical.toy import BIASED_REGEX, BOS_ROW, CHARS, EOS, BigramLM, toy_vocabulary

from constrain import Compiler, Grammar, Matcher
from constrain.decoding.dccd import DCCD, DCCDTemplate

pytestmark = pytest.mark.statistical

VOCAB = toy_vocabulary()
COMPILED = Compiler(VOCAB).compile(Grammar.from_regex(BIASED_REGEX))
HEADER = "Prior analysis (source text; do not add new facts):\n"


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _text(tokens: Sequence[int]) -> str:
    return "".join(CHARS[t] for t in tokens)


class FakeModel:
    """The toy bigram LM behind the attributes DCCD uses of ``constrain.Model``."""

    def __init__(self, lm: BigramLM, *, chat: bool = True) -> None:
        self.lm = lm
        self.vocabulary = VOCAB
        self.eos_ids = [EOS]
        self.pad_id = EOS
        self.has_chat_template = chat
        self.encoded: list[tuple[Any, bool | None, str | None]] = []
        self.started: list[list[list[int]]] = []

    def encode_prompt(self, prompt: Any, *, chat: bool | None = None, system: str | None = None):
        self.encoded.append((prompt, chat, system))
        return [len(self.encoded)]

    def start(self, prompts: Sequence[Sequence[int]]) -> Any:
        self.started.append([list(p) for p in prompts])
        return self.lm.session(len(prompts))


class CopySession:
    """Row logits favour the prompt's characters in order, then EOS."""

    def __init__(self, prompts: Sequence[Sequence[int]]) -> None:
        self.prompts = [list(p) for p in prompts]
        self.pos = [0] * len(prompts)
        self.noise = torch.randn((len(prompts), EOS + 1), generator=_gen(0))

    def _logits(self) -> torch.Tensor:
        out = self.noise.clone()
        for i, (p, j) in enumerate(zip(self.prompts, self.pos, strict=True)):
            out[i, p[j] if j < len(p) else EOS] += 8.0
        return out

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        if token_ids is not None:
            self.pos = [j + 1 for j in self.pos]
        return self._logits()


class CopyModel(FakeModel):
    """A structurer whose prompt ids are the draft's characters."""

    def encode_prompt(self, prompt: Any, *, chat: bool | None = None, system: str | None = None):
        self.encoded.append((prompt, chat, system))
        text = prompt[-1]["content"] if not isinstance(prompt, str) else prompt
        draft = text.split(HEADER, 1)[1] if HEADER in text else ""
        return [CHARS.index(c) for c in draft if c in CHARS] or [EOS]

    def start(self, prompts: Sequence[Sequence[int]]) -> Any:
        self.started.append([list(p) for p in prompts])
        return CopySession(prompts)


def _greedy_lm(word: str) -> BigramLM:
    """A bigram model whose greedy output is ``word`` then EOS."""
    lm = BigramLM(0, biased=False)
    prev = BOS_ROW
    for tok in [CHARS.index(c) for c in word] + [EOS]:
        lm.logits[prev, tok] = 12.0
        prev = tok
    lm.logprobs = torch.log_softmax(lm.logits.double(), dim=-1)
    return lm


def _mean_logprob(lm: BigramLM, tokens: Sequence[int], stopped: bool) -> float:
    prev, total = BOS_ROW, 0.0
    seq = [*tokens, EOS] if stopped else list(tokens)
    for tok in seq:
        total += float(lm.logprobs[prev, tok])
        prev = tok
    return total / len(seq)


def test_structurer_prompt_contains_question_and_draft() -> None:
    dccd = DCCD()
    msgs = dccd.structurer_messages("Who is it?", "It is Ana, 31.", system="Be brief.")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"].startswith("Be brief.\n\n")
    assert "Use only information present in the prior analysis" in msgs[0]["content"]
    assert msgs[0]["content"].endswith("Output only the JSON.")
    assert msgs[1]["content"] == f"Who is it?\n\n{HEADER}It is Ana, 31."
    # chat prompts: the last user message is the question
    chat = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "second"},
    ]
    assert dccd.structurer_messages(chat, "d", format="answer")[1]["content"].startswith("second")
    assert dccd.structurer_messages(chat, "d", format="answer")[0]["content"].endswith("answer.")
    # a model without a chat template gets one plain-text prompt
    plain = FakeModel(BigramLM(0), chat=False)
    dccd.structurer_prompt_ids(plain, "Q?", "D.")
    ((text, chat_flag, _),) = plain.encoded
    assert chat_flag is False and isinstance(text, str)
    assert text.startswith("You are a precise extractor.") and f"Q?\n\n{HEADER}D." in text
    custom = DCCD(template=DCCDTemplate(system="S {format}", user="{draft} | {question}"))
    assert custom.structurer_messages("q", "d", format="YAML") == [
        {"role": "system", "content": "S YAML"},
        {"role": "user", "content": "d | q"},
    ]


def test_best_of_k_keeps_the_most_likely_draft() -> None:
    lm = BigramLM(2, biased=False)
    model = FakeModel(lm)
    dccd = DCCD(k=6, draft_temperature=1.0, max_draft_tokens=5)
    (info,) = dccd.draft(model, ["question"], generator=_gen(4))
    assert len(info.drafts) == 6 and model.started == [[[1]] * 6]  # one batch of k rows
    means = []
    for d in info.drafts:
        assert d.text == _text(d.token_ids)
        assert d.finish_reason in ("stop", "length")
        expected = _mean_logprob(lm, d.token_ids, d.finish_reason == "stop")
        assert d.mean_logprob == pytest.approx(expected, abs=1e-5)
        means.append(expected)
    assert len({d.text for d in info.drafts}) >= 3  # sampled drafts differ
    assert info.selected == max(range(6), key=lambda j: means[j])
    assert info.text == info.drafts[info.selected].text
    assert info.draft_tokens == sum(len(d.token_ids) for d in info.drafts)


def test_concat_gives_every_draft() -> None:
    model = FakeModel(BigramLM(2, biased=False))
    dccd = DCCD(k=3, draft_temperature=1.0, max_draft_tokens=4, select="concat")
    (info,) = dccd.draft(model, ["q"], generator=_gen(1))
    assert info.selected is None
    parts = info.text.split("\n\n")
    assert parts == [f"Response {j + 1}: {d.text}" for j, d in enumerate(info.drafts)]


def test_second_stage_copies_the_draft_within_the_grammar() -> None:
    for word, expected in [("dfg", "dfg"), ("dfgh", "dfg"), ("cgf", "cgf"), ("bad", None)]:
        drafter = FakeModel(_greedy_lm(word))
        structurer = CopyModel(BigramLM(0))
        dccd = DCCD(drafter=drafter, max_draft_tokens=8)
        matcher = Matcher(COMPILED)
        out = dccd.run(structurer, "Which word?", matcher, max_tokens=8)
        assert out.draft.text == word and out.draft.selected == 0
        # the drafter drafted (one row), the structurer decoded (one row) on the new prompt
        assert len(drafter.started) == 1 and len(structurer.started) == 1
        assert drafter.encoded[0][0] == "Which word?"
        messages = structurer.encoded[0][0]
        assert messages[1]["content"] == f"Which word?\n\n{HEADER}{word}"
        text = _text(out.token_ids)
        assert re.fullmatch(BIASED_REGEX, text)
        if expected is not None:  # copied, and cut where the grammar ends ("dfgh" -> "dfg")
            assert text == expected
        assert matcher.is_terminated() and out.decode.finish_reasons == ["stop"]
        assert out.timings["draft"] >= 0 and out.timings["structure"] >= 0
    # the same structurer without a draft in its prompt has nothing to copy: EOS is favoured,
    # which the grammar forbids at the start; the output is still in the language.
    plain = CopyModel(BigramLM(0))
    from constrain.decoding import decode
    from constrain.sampling import MaskedSampler

    m = Matcher(COMPILED)
    res = decode(plain.start([[EOS]]), [m], MaskedSampler(0.0), eos_ids=[EOS], max_tokens=8)
    assert m.is_terminated() and _text(res.token_ids[0]) != "dfg"


def test_prepare_batches_the_drafts_of_several_prompts() -> None:
    model = FakeModel(BigramLM(3, biased=False))
    dccd = DCCD(k=2, draft_temperature=0.8, max_draft_tokens=4)
    pairs = dccd.prepare(model, ["p1", "p2", "p3"], generator=_gen(9))
    assert len(pairs) == 3 and len(model.started) == 1 and len(model.started[0]) == 6
    for ids, info in pairs:
        assert len(ids) == 1 and len(info.drafts) == 2
        assert all(math.isfinite(d.mean_logprob) for d in info.drafts)
    # the structurer prompts follow the draft prompts, one per input prompt
    questions = [e[0][1]["content"].split("\n\n")[0] for e in model.encoded[3:]]
    assert questions == ["p1", "p2", "p3"]


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="draft_temperature > 0"):
        DCCD(k=2)
    with pytest.raises(ValueError, match="select"):
        DCCD(select="vote")
    with pytest.raises(ValueError, match="k must"):
        DCCD(k=0)
    with pytest.raises(ValueError, match="user message"):
        DCCD().structurer_messages([{"role": "system", "content": "s"}], "d")
