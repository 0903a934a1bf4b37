"""The Hugging Face LogitsProcessor, driven the way ``generate`` drives it (no model).

A fake ``generate`` appends one greedy token per row to ``input_ids`` at every call, from seeded
random scores over a byte vocabulary plus padding columns; reference matchers fed the same
tokens say which tokens each row must allow.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from constrain import Compiler, Grammar, Matcher, MatcherStateError
from constrain.integrations.transformers import LogitsProcessor
from constrain.testing import byte_vocabulary

VOCAB = byte_vocabulary()  # ids 0..255 are bytes, 256 is EOS
EOS = 256
WIDTH = 300  # scores columns; 257..299 are padding
PATTERN = r"[a-c]{1,4}(-[0-9]{1,2})?"
COMPILED = Compiler(VOCAB).compile(Grammar.from_regex(PATTERN))
PROMPT = 3  # prompt length


def _scores(rng: np.random.Generator, rows: int) -> torch.Tensor:
    scores = rng.normal(scale=3.0, size=(rows, WIDTH)).astype(np.float32)
    scores[:, VOCAB.size :] = 50.0  # padding would win if it were not masked
    return torch.from_numpy(scores)


def _generate(
    proc: LogitsProcessor, rows: int, steps: int, seed: int
) -> tuple[list[list[int]], list[torch.Tensor]]:
    """Run ``steps`` calls like ``generate``; return each row's tokens and each step's scores."""
    rng = np.random.default_rng(seed)
    input_ids = torch.zeros((rows, PROMPT), dtype=torch.long)
    seen = []
    for _ in range(steps):
        scores = _scores(rng, rows)
        proc(input_ids, scores)
        seen.append(scores.clone())
        input_ids = torch.cat([input_ids, scores.argmax(dim=-1, keepdim=True)], dim=1)
    return input_ids[:, PROMPT:].tolist(), seen


def _check_masks(tokens: list[list[int]], masked: list[torch.Tensor]) -> None:
    """Every step masks exactly what a fresh matcher fed the same tokens disallows."""
    rows = len(tokens)
    refs = [Matcher(COMPILED) for _ in range(rows)]
    for step, scores in enumerate(masked):
        for i, ref in enumerate(refs):
            if ref.is_terminated():
                allowed = {EOS}  # after EOS, generate pads with EOS
            else:
                allowed = set(ref.allowed_token_ids().tolist())
            finite = set(torch.isfinite(scores[i]).nonzero().flatten().tolist())
            assert finite == allowed, (step, i)
            tok = tokens[i][step]
            assert tok in allowed
            if not ref.is_terminated():
                assert ref.accept_token(tok)


@pytest.mark.parametrize("rows", [1, 3])
def test_processor_masks_every_row_with_its_matcher(rows: int) -> None:
    proc = LogitsProcessor(COMPILED, batch_size=rows)
    tokens, masked = _generate(proc, rows, 9, seed=rows)
    _check_masks(tokens, masked)
    assert any(EOS in row for row in tokens)  # the runs reached the end of the grammar


def test_processor_reused_after_reset_and_beside_another_batch_size() -> None:
    proc = LogitsProcessor(COMPILED, batch_size=2)
    first = _generate(proc, 2, 6, seed=1)
    with pytest.raises(MatcherStateError, match="reset"):
        _generate(proc, 2, 6, seed=1)
    other = LogitsProcessor(COMPILED, batch_size=4)  # its own buffer and row arrays
    tokens, masked = _generate(other, 4, 6, seed=2)
    _check_masks(tokens, masked)
    proc.reset()
    again = _generate(proc, 2, 6, seed=1)
    assert again[0] == first[0]
    assert all(torch.equal(a, b) for a, b in zip(again[1], first[1], strict=True))
    proc.reset()
    assert _generate(proc, 2, 6, seed=3)[0] == _generate(LogitsProcessor(COMPILED, 2), 2, 6, 3)[0]


def test_processor_rejects_another_batch_size_and_keeps_its_state() -> None:
    proc = LogitsProcessor(COMPILED, batch_size=2)
    fresh = LogitsProcessor(COMPILED, batch_size=2)
    rng = np.random.default_rng(4)
    input_ids = torch.zeros((2, PROMPT), dtype=torch.long)
    with pytest.raises(ValueError, match="batch_size=2 but generate\\(\\) passed 3 rows"):
        proc(torch.zeros((3, PROMPT), dtype=torch.long), _scores(rng, 3))  # at the start
    for step in range(5):
        scores = _scores(rng, 2)
        if step == 2:  # mid-way: rejected before anything moves
            with pytest.raises(ValueError, match="batch_size=2"):
                proc(torch.zeros((1, input_ids.shape[1]), dtype=torch.long), _scores(rng, 1))
            with pytest.raises(ValueError, match="scores must be"):
                proc(input_ids, scores[:1].clone())
        want = scores.clone()
        fresh(input_ids, want)
        proc(input_ids, scores)
        assert torch.equal(scores, want)
        input_ids = torch.cat([input_ids, scores.argmax(dim=-1, keepdim=True)], dim=1)


def test_processor_backends_agree() -> None:
    for seed in range(3):
        auto = _generate(LogitsProcessor(COMPILED, 2), 2, 7, seed)
        plain = _generate(LogitsProcessor(COMPILED, 2, backend="torch"), 2, 7, seed)
        assert auto[0] == plain[0]
        assert all(torch.equal(a, b) for a, b in zip(auto[1], plain[1], strict=True))
    with pytest.raises(ValueError, match="backend must be one of"):
        LogitsProcessor(COMPILED, 1, backend="cuda")


def test_processor_rejects_a_token_the_grammar_forbids() -> None:
    proc = LogitsProcessor(COMPILED, batch_size=1)
    input_ids = torch.zeros((1, PROMPT), dtype=torch.long)
    proc(input_ids, _scores(np.random.default_rng(0), 1))
    forced = torch.cat([input_ids, torch.tensor([[ord("z")]])], dim=1)
    with pytest.raises(MatcherStateError, match="row 0: generate\\(\\) appended token 122"):
        proc(forced, _scores(np.random.default_rng(1), 1))
