"""The processors on an engine with ``--reasoning-parser deepseek_r1``, driven directly.

The model is SmolLM2 with ``<think>``/``</think>`` tokens (``reasoning_model_path``). Each request
gets free reasoning before its constraint; whether the prompt opened the block is read from the
prompt's last tokens (V1: the batch update, V2: the slot's history at its first step). With
speculative decoding (V2) the draft rows that cross ``</think>`` are masked token by token, as
the composed grammar says.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from constrain.integrations.vllm import request_args
from constrain.reasoning import Reasoning

REGEX = r"[a-c]{2,4}-[0-9]"
EOS = 2
WIDTH = 49152


@pytest.fixture(scope="module")
def vllm_config(reasoning_model_path: Path) -> Any:
    from vllm.config import ModelConfig

    return SimpleNamespace(
        model_config=ModelConfig(model=str(reasoning_model_path)),
        scheduler_config=SimpleNamespace(max_num_seqs=8),
        speculative_config=None,
        structured_outputs_config=SimpleNamespace(
            reasoning_parser="deepseek_r1", enable_in_reasoning=False
        ),
    )


@pytest.fixture(scope="module")
def tokenizer(reasoning_model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(reasoning_model_path))


def _params(extra: dict[str, str]) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=64, extra_args=extra)


def _allowed(logits: torch.Tensor, row: int) -> set[int]:
    return set(torch.isfinite(logits[row]).nonzero().flatten().tolist())


def test_v1_reasoning_then_the_constraint(vllm_config: Any, tokenizer: Any) -> None:
    from vllm.v1.sample.logits_processor import BatchUpdate

    from constrain.integrations.vllm import LogitsProcessor

    proc = LogitsProcessor(vllm_config, torch.device("cpu"), False)
    assert proc.core.reasoning == Reasoning("<think>", "</think>")
    head = "<|im_start|>user\nA code?<|im_end|>\n<|im_start|>assistant\n"
    prompts = {
        "closed": tokenizer.encode(head),  # the output writes <think> itself
        "opened": tokenizer.encode(head + "<think>\n"),
        "off": tokenizer.encode(head + "<think>\n\n</think>\n\n"),  # thinking switched off
    }
    texts = {
        "closed": ["<think>", " let", " me", " see", "</think>", "\n", "ab", "-", "3"],
        "opened": ["I", " think", "</think>", "\n\n", "abc", "-", "7"],
        "off": ["ab", "-", "1"],
    }
    order = list(prompts)
    outputs: dict[str, list[int]] = {name: [] for name in order}
    spec = request_args(regex=REGEX)
    added = [(i, _params(spec), prompts[n], outputs[n]) for i, n in enumerate(order)]
    proc.update_state(BatchUpdate(batch_size=3, removed=[], added=added, moved=[]))
    entries = {n: json.loads(proc.requests[i].spec).get("reasoning") for i, n in enumerate(order)}
    assert entries["closed"] == {"start": "<think>", "end": "</think>", "opened": False}
    assert entries["opened"] == {"start": "<think>", "end": "</think>", "opened": True}
    assert entries["off"] is None
    plans = {n: [tokenizer.convert_tokens_to_ids(p) if p in ("<think>", "</think>") else
                 tokenizer.encode(p)[0] for p in texts[n]] + [EOS] for n in order}  # fmt: skip
    for name in order:  # each piece is one token here
        assert tokenizer.decode(plans[name][:-1]) == "".join(texts[name]), name
    end_id = tokenizer.convert_tokens_to_ids("</think>")
    for step in range(max(len(p) for p in plans.values())):
        logits = torch.zeros((3, WIDTH))
        proc.update_state(None)
        proc.apply(logits)
        for row, name in enumerate(order):
            if step >= len(plans[name]):
                continue
            allowed = _allowed(logits, row)
            token = plans[name][step]
            assert token in allowed, (name, step, tokenizer.decode([token]))
            started = name == "opened" or bool(outputs[name])  # after <think>
            if name != "off" and started and end_id not in outputs[name]:  # free text
                # any text, but EOS only after the constraint
                assert EOS not in allowed and tokenizer.encode("z")[0] in allowed
            outputs[name].append(token)
    for name in order:
        assert outputs[name][-1] == EOS


def test_v2_drafts_across_the_end_of_the_reasoning(vllm_config: Any, tokenizer: Any) -> None:
    import constrain
    from constrain.integrations.vllm import LogitsProcessorV2, spec_grammar

    states = SimpleNamespace(
        max_num_reqs=4,
        prompt_len=SimpleNamespace(np=np.zeros(4, dtype=np.int32)),
        all_token_ids=SimpleNamespace(gpu=torch.zeros((4, 256), dtype=torch.int32)),
    )
    proc = LogitsProcessorV2(vllm_config, states)
    spec = request_args(regex=REGEX)
    assert proc.add_request(1, _params(spec))
    assert 1 in proc.pending and 1 not in proc.requests  # started once its prompt is known
    prompt = tokenizer.encode("<|im_start|>assistant\n<think>\n")
    states.prompt_len.np[1] = len(prompt)
    states.all_token_ids.gpu[1, : len(prompt)] = torch.tensor(prompt)
    end_id = tokenizer.convert_tokens_to_ids("</think>")
    drafts = [tokenizer.encode(" ok")[0], end_id, *tokenizer.encode("ab-3")]
    pos = len(prompt) - 1
    rows = [(1, j, tok, pos + j) for j, tok in enumerate([prompt[-1], *drafts])]
    slot, local, token, position = (torch.tensor(list(c)) for c in zip(*rows, strict=True))
    ctx = SimpleNamespace(
        expanded_idx_mapping=slot, expanded_local_pos=local, input_ids=token, pos=position
    )
    logits = torch.zeros((len(rows), WIDTH))
    proc.apply(logits, ctx)
    entry = json.loads(proc.requests[1].spec)["reasoning"]
    assert entry == {"start": "<think>", "end": "</think>", "opened": True}
    reference = constrain.Matcher(
        constrain.Compiler(proc.core.vocab).compile(spec_grammar(proc.requests[1].spec))
    )
    bitmask = constrain.allocate_token_bitmask(1, proc.core.vocab.size)
    for j in range(len(rows)):
        if j:
            assert reference.accept_token(drafts[j - 1]), j
        reference.fill_next_token_bitmask(bitmask)
        assert _allowed(logits, j) == set(reference.allowed_token_ids().tolist()), j
    assert EOS in _allowed(logits, len(rows) - 1)  # "ab-3" after </think> is a full answer
    assert proc.requests[1].matcher is not None
    assert proc.requests[1].matcher.num_accepted_tokens == 0  # the drafts were rolled back
