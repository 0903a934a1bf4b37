"""The two processor classes driven directly, with the batch changes vLLM's runners make.

No engine runs here: the V1 class gets `BatchUpdate`s (additions, removals, moves and swaps), the
V2 class gets slots and `LogitsContext`-like step layouts, including a resumed request and
speculative draft rows. The V2 runner needs Triton, which vLLM's CPU build lacks, so this is the
only place its processor runs on this machine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from constrain.integrations.vllm import request_args

REGEX = r"[a-c]{2,4}-[0-9]"
SCHEMA = {
    "type": "object",
    "properties": {"k": {"enum": ["x", "y"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["k", "n"],
    "additionalProperties": False,
}
EOS = 2


@pytest.fixture(scope="module")
def vllm_config(model_path: Path) -> Any:
    from vllm.config import ModelConfig

    return SimpleNamespace(
        model_config=ModelConfig(model=str(model_path)),
        scheduler_config=SimpleNamespace(max_num_seqs=8),
        speculative_config=None,
    )


@pytest.fixture(scope="module")
def tokenizer(model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_path))


def _params(extra: dict[str, str] | None) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=64, extra_args=extra)


def _valid(kind: str, text: str) -> bool:
    if kind == "regex":
        return re.fullmatch(REGEX, text) is not None
    value = json.loads(text)
    return value["k"] in ("x", "y") and 0 <= value["n"] <= 9 and set(value) == {"k", "n"}


def _sample(logits: torch.Tensor, row: int) -> int:
    assert torch.isfinite(logits[row]).any(), "a row with every token masked"
    return int(torch.argmax(logits[row]))


def test_v1_follows_additions_removals_moves_and_swaps(vllm_config: Any, tokenizer: Any) -> None:
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from constrain.integrations.vllm import LogitsProcessor

    proc = LogitsProcessor(vllm_config, torch.device("cpu"), False)
    assert not proc.is_argmax_invariant()
    kinds = {"a": "regex", "b": "json", "c": None}
    extra = {
        "regex": request_args(regex=REGEX),
        "json": request_args(json_schema=SCHEMA),
        None: None,
    }
    outputs: dict[str, list[int]] = {name: [] for name in kinds}
    order = ["a", "b", "c"]  # batch index -> request
    added = [(i, _params(extra[kinds[n]]), [1, 2, 3], outputs[n]) for i, n in enumerate(order)]
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=added, moved=[]))
    gen = torch.Generator().manual_seed(0)
    done: set[str] = set()
    for step in range(40):
        if step == 3:  # swap a and c, then move b to index 0 after removing nothing
            proc.update_state(
                BatchUpdate(3, removed=[], added=[], moved=[(0, 2, MoveDirectionality.SWAP)])
            )
            order = ["c", "b", "a"]
        if step == 5:  # c finishes early: removed; a moves into its slot
            proc.update_state(
                BatchUpdate(
                    2,
                    removed=[0],
                    added=[],
                    moved=[(2, 0, MoveDirectionality.UNIDIRECTIONAL)],
                )
            )
            order = ["a", "b"]
        live = [n for n in order if n not in done]
        if not live:
            break
        logits = torch.randn((len(order), 49152), generator=gen)
        proc.update_state(None)
        proc.apply(logits)
        for row, name in enumerate(order):
            if name in done:
                continue
            token = _sample(logits, row)
            outputs[name].append(token)
            if token == EOS:
                done.add(name)
    for name in ("a", "b"):
        ids = outputs[name]
        assert ids[-1] == EOS, (name, ids)
        assert _valid(kinds[name] or "", tokenizer.decode(ids[:-1])), tokenizer.decode(ids)


def _v2(vllm_config: Any, max_reqs: int = 8) -> tuple[Any, Any]:
    from constrain.integrations.vllm import LogitsProcessorV2

    states = SimpleNamespace(
        max_num_reqs=max_reqs,
        prompt_len=SimpleNamespace(np=np.zeros(max_reqs, dtype=np.int32)),
        all_token_ids=SimpleNamespace(gpu=torch.zeros((max_reqs, 256), dtype=torch.int32)),
    )
    return LogitsProcessorV2(vllm_config, states), states


def _ctx(rows: list[tuple[int, int, int, int]]) -> Any:
    """rows: (slot, local position, input token, position)."""
    slot, local, token, pos = (torch.tensor(list(col)) for col in zip(*rows, strict=True))
    return SimpleNamespace(
        expanded_idx_mapping=slot, expanded_local_pos=local, input_ids=token, pos=pos
    )


def test_v2_slots_resume_and_unconstrained_rows(vllm_config: Any, tokenizer: Any) -> None:
    proc, states = _v2(vllm_config)
    kinds = {3: "regex", 5: "json"}
    assert proc.add_request(3, _params(request_args(regex=REGEX)))
    assert proc.add_request(5, _params(request_args(json_schema=SCHEMA)))
    assert not proc.add_request(1, _params(None))
    prompts = {3: [7, 8, 9], 5: [4, 5], 1: [6, 6, 6, 6]}
    history = {s: list(p) for s, p in prompts.items()}
    for s, p in prompts.items():
        states.prompt_len.np[s] = len(p)
        states.all_token_ids.gpu[s, : len(p)] = torch.tensor(p)
    gen = torch.Generator().manual_seed(1)
    finished: set[int] = set()
    for step in range(40):
        if step == 4:  # slot 5 is preempted and resumed: a fresh add_request, output kept
            assert proc.add_request(5, _params(request_args(json_schema=SCHEMA)))
        live = [s for s in (5, 1, 3) if s not in finished]  # rows in a shuffled slot order
        if not live:
            break
        ctx = _ctx([(s, 0, history[s][-1], len(history[s]) - 1) for s in live])
        logits = torch.randn((len(live), 49152), generator=gen)
        proc.apply(logits, ctx)
        for row, s in enumerate(live):
            token = _sample(logits, row)
            states.all_token_ids.gpu[s, len(history[s])] = token
            history[s].append(token)
            if token == EOS and s in kinds:
                finished.add(s)
        if step == 6:
            finished.add(1)
    for s, kind in kinds.items():
        out = history[s][len(prompts[s]) :]
        assert out[-1] == EOS, out
        assert _valid(kind, tokenizer.decode(out[:-1])), tokenizer.decode(out)


def test_v2_draft_rows_are_masked_after_their_drafts(vllm_config: Any, tokenizer: Any) -> None:
    import constrain
    from constrain.integrations.vllm import spec_grammar

    proc, states = _v2(vllm_config)
    spec = request_args(regex=REGEX)
    assert proc.add_request(0, _params(spec))
    states.prompt_len.np[0] = 2
    states.all_token_ids.gpu[0, :2] = torch.tensor([5, 6])
    vocab = proc.core.vocab
    reference = constrain.Matcher(
        constrain.Compiler(vocab).compile(spec_grammar(spec["constrain"]))
    )
    drafts = tokenizer.encode("ab-3", add_special_tokens=False)
    assert len(drafts) >= 2
    # step 1: the prefill row plus draft rows for drafts[0], drafts[1]
    ctx = _ctx([(0, 0, 6, 1), (0, 1, drafts[0], 2), (0, 2, drafts[1], 3)])
    logits = torch.zeros((3, 49152))
    proc.apply(logits, ctx)
    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    for j in range(3):
        if j:
            assert reference.accept_token(drafts[j - 1])
        reference.fill_next_token_bitmask(bitmask)
        allowed = set(reference.allowed_token_ids().tolist())
        assert set(torch.isfinite(logits[j]).nonzero().flatten().tolist()) == allowed
    # the drafts were rolled back: the next step (drafts[0] accepted, then a bonus token)
    # catches up from the history
    states.all_token_ids.gpu[0, 2] = drafts[0]
    ctx = _ctx([(0, 0, drafts[1], 3)])
    logits = torch.zeros((1, 49152))
    proc.apply(logits, ctx)
    assert proc.requests[0].num_seen == 2
    assert set(torch.isfinite(logits[0]).nonzero().flatten().tolist()) == allowed
