"""The denoising loop (``diffusion_decode``) and the Hugging Face masked-LM adapter.

- Every constrained method (DINGO, infilling, LAVE) yields complete sentences for many seeds,
  unmasking policies, temperatures and block layouts: regex outputs pass ``re.fullmatch``, Lark
  outputs parse with ``lark``, JSON outputs validate with ``jsonschema``; unconstrained outputs
  of the same toy model mostly do not.
- DINGO blocks agree with :func:`dingo` run on the same predictions with the positions after the
  block spelled out as masks (so ``end_states`` agrees with the explicit computation).
- ``HFMaskedLM``: shapes, masking and logit shift of ``predict``; ``from_pretrained`` from a
  local folder. The model is a randomly initialised tiny BERT built from a config (no network).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import lark
import numpy as np
import pytest
import torch

from constrain import CompiledGrammar, Compiler, Grammar, Vocabulary
from constrain.diffusion import DiffusionResult, diffusion_decode
from constrain.diffusion.denoising import _fill_from_witness, _split, tokens_to_accept
from constrain.diffusion.dingo_lave import MASK, NotRegularError, TokenDfa, dingo
from constrain.errors import IncompleteOutputError
from constrain.integrations.masked_lm import HFMaskedLM
from constrain.integrations.transformers import ModelNotFoundError
from constrain.testing import tiny_vocabulary

EOS, MASK_ID = 256, 257
ALPHABET = b'abc-0123456789{}":, []()+xyz'
POLICIES = ("confidence", "random", "left_to_right")

REGEX = r"[a-c]{2,5}(-[0-9]{1,3})?"
LARK = 'start: expr\n?expr: term ("+" term)*\n?term: NUMBER | "(" expr ")"\nNUMBER: /[0-9]{1,2}/\n'
SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 99},
        "b": {"enum": ["x", "yz"]},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}


@cache
def byte_vocab() -> Vocabulary:
    """Bytes 0..255, EOS (256) and the mask token (257, special)."""
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None, None]
    return Vocabulary.from_bytes(tokens, eos_ids=[EOS], special_ids=[MASK_ID])


class ToyModel:
    """A deterministic stand-in for a diffusion LM: favours ``ALPHABET`` and EOS, with noise.

    The noise depends on the seed and on the committed tokens, so predictions change as the
    output fills in.
    """

    def __init__(self, vocab: Vocabulary, mask_token_id: int, seed: int) -> None:
        self.vocab_size = vocab.model_vocab_size
        self.mask_token_id = mask_token_id
        self.seed = seed
        self.calls = 0
        favoured = [
            t
            for t in range(vocab.size)
            if vocab.token_lengths[t] and set(vocab.token_bytes_of(t)) <= set(ALPHABET)
        ]
        self.base = torch.full((self.vocab_size,), -6.0)
        self.base[favoured] = 0.0
        self.base[vocab.eos_ids.tolist()] = -1.0

    def predict(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        assert tokens.dtype == torch.long and mask.dtype == torch.bool
        assert (tokens[mask] == self.mask_token_id).all()
        key = int((tokens * (~mask) * torch.arange(1, tokens.shape[0] + 1)).sum())
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + key)
        noise = torch.randn(tokens.shape[0], self.vocab_size, generator=g)
        return self.base + 2.0 * noise


@cache
def compiled(kind: str, vocab_name: str = "bytes") -> CompiledGrammar:
    vocab = byte_vocab() if vocab_name == "bytes" else tiny_vocabulary()
    grammar = {
        "regex": lambda: Grammar.from_regex(REGEX),
        "lark": lambda: Grammar.from_lark(LARK),
        "json": lambda: Grammar.from_json_schema(SCHEMA),
    }[kind]()
    return Compiler(vocab).compile(grammar)


def is_valid(kind: str, text: str) -> bool:
    try:
        if kind == "regex":
            return re.fullmatch(REGEX, text) is not None
        if kind == "lark":
            lark_parser().parse(text)
        else:
            jsonschema.validate(json.loads(text), SCHEMA)
    except (ValueError, lark.exceptions.LarkError, jsonschema.ValidationError):
        return False
    return True


@cache
def lark_parser() -> lark.Lark:
    return lark.Lark(LARK)


def run(kind: str, method: str, case: int, vocab_name: str = "bytes", **kw: Any) -> DiffusionResult:
    """Decode with the toy model; ``case`` picks the seed, block layout, policy and temperature."""
    comp = compiled(kind, vocab_name)
    mask_id = MASK_ID if vocab_name == "bytes" else comp.vocab.size - 1  # tiny: a special id
    length = {"regex": 10, "lark": 10, "json": 22}[kind]
    options: dict[str, Any] = {
        "length": length,
        "block_size": [length, length // 2, 4][case % 3],
        "steps": [None, 2, 3][(case // 3) % 3],
        "unmasking": POLICIES[case % 3],
        "temperature": [0.0, 0.7, 1.5][(case // 2) % 3],
        "seed": case,
    }
    options.update(kw)
    model = ToyModel(comp.vocab, mask_id, case)
    return diffusion_decode(model, comp, method=method, **options)


CASES = [
    ("regex", "dingo"),
    ("regex", "infill"),
    ("regex", "lave"),
    ("lark", "infill"),
    ("lark", "lave"),
    ("json", "dingo"),
    ("json", "infill"),
    ("json", "lave"),
]


@pytest.mark.parametrize(("kind", "method"), CASES)
def test_constrained_methods_yield_sentences(kind: str, method: str) -> None:
    for case in range(6 if kind != "json" else 3):
        result = run(kind, method, case)
        assert is_valid(kind, result.text), (case, result.text)
        assert result.is_valid and result.method == method
        assert len(result.token_ids) == {"regex": 10, "lark": 10, "json": 22}[kind]
        assert MASK not in result.token_ids
        eos = result.token_ids.index(EOS) if EOS in result.token_ids else len(result.token_ids)
        assert result.token_ids[eos:] == [EOS] * (len(result.token_ids) - eos)
        assert result.output_ids == result.token_ids[:eos]
        assert len(result.forward_seconds) == len(result.constraint_seconds) == result.num_steps


@pytest.mark.parametrize(
    ("kind", "method"), [("regex", "dingo"), ("regex", "infill"), ("json", "lave")]
)
def test_multi_byte_vocabulary(kind: str, method: str) -> None:
    """tiny_vocabulary has multi-byte tokens: exact token gaps for few masks, else single bytes."""
    for case in range(2 if method == "dingo" else 1):
        result = run(kind, method, case, "tiny")
        assert is_valid(kind, result.text), (case, result.text)
    result = run("regex", "infill", 0, "tiny", gaps="tokens", length=4, block_size=4)
    assert is_valid("regex", result.text)


def test_unconstrained_outputs_are_mostly_invalid() -> None:
    results = [run("regex", "none", seed) for seed in range(6)]
    assert all(r.is_valid == is_valid("regex", r.text) for r in results)
    assert sum(not r.is_valid for r in results) >= 4
    assert all(r.num_rejected == r.num_witness == 0 for r in results)


def test_auto_method_and_context_free_grammars() -> None:
    assert run("regex", "auto", 0).method == "dingo"
    assert run("lark", "auto", 0).method == "lave"
    with pytest.raises(NotRegularError):
        run("lark", "dingo", 0)


def test_seeded_runs_are_reproducible() -> None:
    a, b = run("json", "infill", 4), run("json", "infill", 4)
    assert a.token_ids == b.token_ids
    others = [run("json", "infill", 4, seed=seed).token_ids for seed in (5, 6)]
    assert a.token_ids not in others  # the seed matters (temperature 0.7 here)


@pytest.mark.parametrize("block_size", [4, 12])
def test_dingo_blocks_agree_with_dingo(block_size: int) -> None:
    """One step per block: each block is DINGO's best assignment given the earlier blocks."""
    comp = compiled("json")
    tdfa = TokenDfa.from_compiled(comp)
    length = 22
    for seed in range(3):
        model = ToyModel(comp.vocab, MASK_ID, seed)
        result = diffusion_decode(
            model, comp, length=length, block_size=block_size, steps=1, method="dingo"
        )
        out = result.token_ids
        for start in range(0, length, block_size):
            end = min(start + block_size, length)
            state = tdfa.walk(out[:start])
            tokens = torch.tensor(out[:start] + [MASK_ID] * (length - start))
            mask = torch.arange(length) >= start
            logits = model.predict(tokens, mask)[start:].double()
            banned = comp.vocab.token_lengths == 0  # special tokens but EOS: the mask token
            banned[EOS] = False
            logits[:, torch.from_numpy(banned)] = -torch.inf
            logp = torch.log_softmax(logits, dim=-1)
            logp[end - start :] = -torch.inf  # later blocks: masks only
            mask_logp = torch.zeros(length - start)
            mask_logp[: end - start] = -torch.inf
            best = dingo(tdfa, logp, mask_logp=mask_logp, start_state=state, complete=True)
            assert best is not None
            assert best.tokens[: end - start].tolist() == out[start:end], (seed, start)
            if (best.tokens[: end - start] == EOS).any():
                break  # later blocks are EOS padding, committed without a forward pass


def test_tokens_to_accept_and_length_budget() -> None:
    comp = compiled("regex")
    tdfa = TokenDfa.from_compiled(comp)
    dist = tokens_to_accept(tdfa)
    assert dist[tdfa.start] == 2  # "aa"
    assert dist[tdfa.walk(list(b"ab-"))] == 1
    logp = np.zeros((2, comp.vocab.size))
    with pytest.raises(ValueError, match="end_states"):
        dingo(tdfa, logp, end_states=np.ones(3, dtype=bool))
    assert dingo(tdfa, logp, end_states=dist <= 0) is not None  # two tokens: "aa" and others
    assert dingo(tdfa, logp[:1], end_states=dist <= 0) is None  # one token is too short
    for method in ("dingo", "infill", "lave"):
        with pytest.raises(IncompleteOutputError, match="length=1"):
            run("regex", method, 0, length=1, block_size=1)
        assert re.fullmatch("[a-c]{2}", run("regex", method, 0, length=2, block_size=1).text)


def test_witness_fills_gaps_with_tokens() -> None:
    vocab = tiny_vocabulary()
    ab = [t for t in range(vocab.size) if vocab.token_bytes_of(t) == b"ab"][0]
    assert _split(b"abab", 2, 2, vocab) == [ab, ab]
    assert len(_split(b"abab", 3, 3, vocab) or []) == 3
    assert _split(b"abab", 5, 6, vocab) is None
    eos = int(vocab.eos_ids[0])
    region = [MASK, MASK, ord("x"), MASK, MASK, MASK]
    filled = _fill_from_witness(region, [b"abc", b"y"], vocab)
    assert filled is not None and vocab.decode(filled[:4]) == b"abcxy"
    assert filled[4:] == [eos, eos]


def test_argument_errors() -> None:
    comp = compiled("regex")
    model = ToyModel(comp.vocab, MASK_ID, 0)
    with pytest.raises(ValueError, match="method"):
        diffusion_decode(model, comp, length=4, method="greedy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unmasking"):
        diffusion_decode(model, comp, length=4, unmasking="best")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        diffusion_decode(model, comp, length=0)
    with pytest.raises(ValueError, match="compiled grammar"):
        diffusion_decode(model, None, length=4, method="dingo")
    model.mask_token_id = ord("a")
    with pytest.raises(ValueError, match="text token"):
        diffusion_decode(model, comp, length=4)
    result = diffusion_decode(
        ToyModel(comp.vocab, MASK_ID, 0), None, length=4, method="none", vocab=comp.vocab
    )
    assert result.is_valid is None and len(result.token_ids) == 4


# -- the Hugging Face adapter -----------------------------------------------------------------


@cache
def tiny_bert() -> Any:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=258, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    return BertForMaskedLM(config).eval()


def test_hf_adapter_predict_masks_and_shapes(tmp_path: Path) -> None:
    model = HFMaskedLM(tiny_bert(), mask_token_id=MASK_ID)
    assert model.vocab_size == 258 and model.mask_token_id == MASK_ID
    tokens = torch.arange(10) * 7
    mask = torch.zeros(10, dtype=torch.bool)
    mask[3:6] = True
    logits = model.predict(tokens, mask)
    assert logits.shape == (10, 258)
    other = tokens.clone()
    other[3:6] = 99  # masked positions are read as the mask token, whatever they hold
    assert torch.equal(model.predict(other, mask), logits)
    explicit = tokens.clone()
    explicit[3:6] = MASK_ID
    assert torch.equal(model.predict(explicit, torch.zeros_like(mask)), logits)
    assert not torch.equal(model.predict(tokens, torch.zeros_like(mask)), logits)
    shifted = HFMaskedLM(tiny_bert(), mask_token_id=MASK_ID, shift_logits=True)
    assert torch.equal(shifted.predict(tokens, mask)[1:], logits[:-1])
    with pytest.raises(ValueError, match="bool"):
        model.predict(tokens, mask.long())
    with pytest.raises(ValueError, match="mask token id"):
        HFMaskedLM(tiny_bert())
    with pytest.raises(ValueError, match="tokenizer"):
        _ = model.vocabulary
    with pytest.raises(ValueError, match="tokenizer"):
        model.encode_prompt("x")
    tiny_bert().save_pretrained(tmp_path)
    loaded = HFMaskedLM.from_pretrained(tmp_path, device="cpu", mask_token_id=MASK_ID)
    assert loaded.tokenizer is None
    assert torch.allclose(loaded.predict(tokens, mask), logits)
    with pytest.raises(ModelNotFoundError):
        HFMaskedLM.from_pretrained(tmp_path / "missing")


@pytest.mark.parametrize("method", ["dingo", "infill", "lave", "none"])
def test_hf_masked_lm_decodes(method: str) -> None:
    model = HFMaskedLM(tiny_bert(), mask_token_id=MASK_ID)
    for seed in range(3):
        result = diffusion_decode(
            model, compiled("regex"), length=8, block_size=4, steps=2, method=method,
            temperature=1.0, seed=seed, prompt=[1, 2, 3],
        )  # fmt: skip
        assert result.num_steps == 4 or method != "none"
        if method != "none":
            assert is_valid("regex", result.text), result.text
        assert np.isfinite(result.seconds)


def test_left_context_prefilter_only_rejects_uncompletable_proposals() -> None:
    """The matcher pre-filter of the checked methods is exact: a proposal it rejects is one the
    infilling check rejects too (the text left of it is no prefix of any sentence)."""
    from constrain.diffusion.denoising import _checker, _Loop
    from constrain.diffusion.dingo_lave import block_completable

    comp = compiled("lark")
    vocab = byte_vocab()
    rng = np.random.default_rng(3)
    fired = 0
    text = b"(1+2)+34+(5)"
    for case in range(60):
        loop = _Loop(vocab, "infill", comp, None, _checker(comp), "auto", 12)
        pos = int(rng.integers(12))
        for j in range(12):  # the left part of a valid text (a byte sometimes changed)
            if j < pos or rng.random() < 0.3:
                loop.tokens[j] = text[j] if rng.random() < 0.8 else int(rng.integers(40, 58))
        loop.tokens[pos] = MASK
        if pos and rng.random() < 0.2:  # a masked position on the left: no pre-filter
            loop.tokens[int(rng.integers(pos))] = MASK
        tok = int(rng.choice(list(b"0123456789()+")))
        if loop._left_rejects(0, pos, tok):
            fired += 1
            trial = list(loop.tokens)
            trial[pos] = tok
            res = block_completable(loop.checker, trial, vocab, final=True, gaps="bytes")
            assert not res, (case, trial)
    assert fired >= 5
