"""Reasoning blocks before the constraint: the plan, the grammar's language and masks, the split."""

from __future__ import annotations

import random

import pytest

from constrain import Compiler, Matcher
from constrain.output import output_type
from constrain.reasoning import (
    Reasoning,
    ReasoningPlan,
    detect_reasoning,
    plan_reasoning,
    read_reasoning,
    reasoning_output,
    split_reasoning,
)
from constrain.testing import brute_force_mask, byte_vocabulary, tiny_vocabulary

ANSWER = output_type(regex=r"[0-9]{1,3}")
START, END = b"<think>", b"</think>"


def _utf8_prefix(data: bytes) -> int | None:
    """The characters ``data`` starts (a cut last one counted) if it is a UTF-8 prefix, else None.

    RFC 3629's table: the lead byte fixes the length and the range of the second byte.
    """
    chars = 0
    i = 0
    while i < len(data):
        b = data[i]
        if b < 0x80:
            need, low, high = 0, 0x80, 0xBF
        elif 0xC2 <= b <= 0xDF:
            need, low, high = 1, 0x80, 0xBF
        elif 0xE0 <= b <= 0xEF:
            need = 2
            low, high = (0xA0, 0xBF) if b == 0xE0 else (0x80, 0x9F) if b == 0xED else (0x80, 0xBF)
        elif 0xF0 <= b <= 0xF4:
            need = 3
            low, high = (0x90, 0xBF) if b == 0xF0 else (0x80, 0x8F) if b == 0xF4 else (0x80, 0xBF)
        else:
            return None
        tail = data[i + 1 : i + 1 + need]
        if tail and not low <= tail[0] <= high:
            return None
        if any(not 0x80 <= c <= 0xBF for c in tail[1:]):
            return None
        chars += 1
        i += 1 + need
    return chars


def _answer_prefix(data: bytes, complete: bool) -> bool:
    ok = data.isdigit() and len(data) <= 3 if data else not complete
    return ok and (len(data) >= 1 or not complete)


def _in_language(data: bytes, plan: ReasoningPlan, complete: bool) -> bool:
    """The definition: [start] text end "\\n"{0,n} answer, or the answer alone if optional.

    ``complete=False`` asks whether ``data`` is a prefix of such a text.
    """
    spec = plan.reasoning
    n = spec.newlines
    readings = []
    if plan.optional and _answer_prefix(data, complete):
        return True
    if not plan.opened:
        if not data.startswith(START):
            return not complete and START.startswith(data)
        data = data[len(START) :]
    at = data.find(END)
    if at < 0:  # still inside the reasoning (maybe inside a cut end marker)
        if complete or _utf8_prefix(data) is None:
            return False
        for cut in range(len(END), -1, -1):
            if cut and not data.endswith(END[:cut]):
                continue
            chars = _utf8_prefix(data[: len(data) - cut])
            if chars is not None and (spec.max_chars is None or chars <= spec.max_chars):
                return True
        return False
    body = data[:at]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if spec.max_chars is not None and len(text) > spec.max_chars:
        return False
    rest = data[at + len(END) :]
    for k in range(n + 1):
        if rest[:k] == b"\n" * k:
            readings.append(rest[k:])
        if len(rest) <= k:
            break
    return any(_answer_prefix(r, complete) for r in readings)


PLANS = [
    ReasoningPlan(Reasoning(), opened=False, optional=False),
    ReasoningPlan(Reasoning(max_chars=4), opened=False, optional=True),
    ReasoningPlan(Reasoning(newlines=1), opened=True, optional=False),
    # a token budget no walk here reaches: the block in three lexemes, the same language
    ReasoningPlan(Reasoning(max_chars=4, max_tokens=1000), opened=False, optional=True),
    ReasoningPlan(Reasoning(newlines=1, max_tokens=1000), opened=True, optional=False),
]
PLAN_IDS = ["required", "optional-budget", "opened", "optional-tokens", "opened-tokens"]
TEXTS = [
    "<think>hm</think>\n\n42",
    "<think>hm</think>42",
    "42",
    "hm</think>7",
    "<think></think>\n\n\n1",
    "<think>a</think>b</think>1",
    "<think>abcde</think>1",
    "<think>abcd</think>\n1",
    "<think>é≠</think>5",
    "<think><think></think>9",
    "<think>hm</think>\n",
]


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_language_is_the_definition(plan: ReasoningPlan) -> None:
    compiled = Compiler(byte_vocabulary()).compile(reasoning_output(ANSWER, plan).grammar)
    for text in TEXTS:
        data = text.encode()
        m = Matcher(compiled)
        accepted = m.accept_tokens(list(data)) == len(data) and m.is_accepting()
        assert accepted == _in_language(data, plan, complete=True), (plan, text)


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_masks_equal_brute_force(plan: ReasoningPlan) -> None:
    vocab = tiny_vocabulary()
    compiled = Compiler(vocab).compile(reasoning_output(ANSWER, plan).grammar)
    rng = random.Random(7)
    single = {vocab.token_bytes_of(t): t for t in range(vocab.size)}
    closed = b"ab" + END if plan.opened else START + b"ab" + END
    for walk in range(8):  # random walks of the matcher, the mask checked at every step
        m = Matcher(compiled)
        prefix = b"" if walk % 2 else closed  # inside the reasoning, or past it
        assert m.accept_tokens([single[bytes([b])] for b in prefix]) == len(prefix)
        for _step in range(30):
            want = brute_force_mask(
                vocab,
                lambda b: _in_language(b, plan, complete=False),
                prefix,
                lambda b: _in_language(b, plan, complete=True),
            )
            got = m.allowed_token_ids().tolist()
            assert got == want.nonzero()[0].tolist(), (plan, prefix)
            options = [t for t in got if t not in vocab.eos_ids]
            if not options:
                break
            token = rng.choice(options)
            assert m.accept_token(token)
            prefix += vocab.token_bytes_of(token)


def test_a_token_budget_forces_the_end_marker() -> None:
    vocab = tiny_vocabulary()
    single = {vocab.token_bytes_of(t): t for t in range(vocab.size)}
    plan = ReasoningPlan(Reasoning(max_tokens=3), opened=False, optional=False)
    m = Matcher(Compiler(vocab).compile(reasoning_output(ANSWER, plan).grammar))
    assert m.accept_tokens([single[bytes([b])] for b in START + b"abc"]) == len(START) + 3
    allowed = [vocab.token_bytes_of(t) for t in m.allowed_token_ids().tolist()]
    assert allowed and all(END.startswith(t) for t in allowed)
    assert not m.accept_token(single[b"a"])
    assert m.accept_tokens([single[bytes([b])] for b in END + b"42"]) == len(END) + 2
    assert m.is_accepting()
    none = ReasoningPlan(Reasoning(max_tokens=0), opened=False, optional=False)  # no text
    m = Matcher(Compiler(vocab).compile(reasoning_output(ANSWER, none).grammar))
    assert m.accept_tokens([single[bytes([b])] for b in START + END + b"7"]) == 16
    assert m.is_accepting()
    m.rollback(9)
    assert not m.accept_token(single[b"a"])


def test_a_marker_that_overlaps_itself_ends_the_text_at_its_first_occurrence() -> None:
    # "aba" ends "xab" + "aba" early (at "xababa"[1:4]): both forms of the block agree
    vocab = byte_vocabulary()
    spec = {"start": "<s>", "end": "aba", "newlines": 0}
    grammars = [
        Compiler(vocab).compile(
            reasoning_output(ANSWER, ReasoningPlan(Reasoning(**spec, max_tokens=k), False, False))
            .grammar
        )
        for k in (None, 1000)
    ]  # fmt: skip
    rng = random.Random(3)
    for _ in range(300):
        text = "<s>" + "".join(rng.choice("ab<s>1") for _ in range(rng.randint(0, 9)))
        results = []
        for compiled in grammars:
            m = Matcher(compiled)
            results.append(m.accept_bytes(text) and m.is_accepting())
        assert results[0] == results[1], text


def test_split_and_read() -> None:
    plan = PLANS[0]
    assert split_reasoning("<think>a\nb</think>\n\n12", plan) == [
        ("a\nb", "12"),
        ("a\nb", "\n12"),
        ("a\nb", "\n\n12"),
    ]
    assert read_reasoning("<think>ok</think>\n7", plan, ANSWER) == ("ok", "7")
    # a line break the answer needs stays the answer's
    lines = output_type(regex=r"\n[0-9]")
    assert read_reasoning("<think>x</think>\n\n5", plan, lines) == ("x", "\n5")
    optional = PLANS[1]
    assert read_reasoning("12", optional, ANSWER) == (None, "12")
    assert read_reasoning("<think>a</think>3", optional, ANSWER) == ("a", "3")
    assert read_reasoning("a b</think>3", PLANS[2], ANSWER) == ("a b", "3")


def test_plan_from_the_setting_and_the_prompt() -> None:
    qwen = "{%- if enable_thinking %}<think>{%- endif %} ... </think>"
    assert detect_reasoning(qwen) and not detect_reasoning("<|im_start|>{{ content }}")
    assert plan_reasoning(None, "<|im_start|>", ["<|im_start|>assistant\n"]) is None
    plan = plan_reasoning(None, qwen, ["<|im_start|>assistant\n"])
    assert plan == ReasoningPlan(Reasoning(), opened=False, optional=True)
    # DeepSeek-R1 opens the block in the prompt: the output starts inside it, not optional
    plan = plan_reasoning(None, qwen, ["Assistant:<think>\n"])
    assert plan == ReasoningPlan(Reasoning(), opened=True, optional=False)
    # Qwen3 with thinking off closes an empty block in the prompt: no reasoning
    assert plan_reasoning(True, qwen, ["<think>\n\n</think>\n\n"]) is None
    assert plan_reasoning(False, qwen, ["x"]) is None
    budget = Reasoning(max_chars=100)
    assert plan_reasoning(budget, None, ["x"]) == ReasoningPlan(budget, False, False)
    with pytest.raises(ValueError, match="separate calls"):
        plan_reasoning(True, qwen, ["<think>\n", "x"])
    with pytest.raises(TypeError, match="reasoning="):
        plan_reasoning("yes", qwen, ["x"])  # type: ignore[arg-type]


def test_reasoning_spec_is_checked() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Reasoning(start="")
    with pytest.raises(ValueError, match="occurs in the start"):
        Reasoning(start="<x></x>", end="</x>")
    with pytest.raises(ValueError, match="max_chars"):
        Reasoning(max_chars=-1)
    with pytest.raises(TypeError, match="max_tokens"):
        Reasoning(max_tokens=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="newlines"):
        Reasoning(newlines=1.5)  # type: ignore[arg-type]
