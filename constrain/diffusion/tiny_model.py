"""A tiny byte-level masked-diffusion LM, trained by this project (stage: models).

:class:`TinyDiffusionLM` is a bidirectional transformer encoder over bytes that predicts every
masked position at once: a :class:`~constrain.decoding.denoising.DiffusionModel`, so
``diffusion_decode`` and ``generate(..., model=load_tiny_diffusion())`` run it. The shipped
weights (``tiny_diffusion.safetensors``, next to this module) were trained by
``benchmarks/train_diffusion.py`` on the synthetic corpus of :mod:`constrain.diffusion.tiny_corpus`,
undertrained on purpose so that its unconstrained samples are often, but not always, valid
(``docs/diffusion.md`` has the numbers).

Token ids: bytes are ``0..255``, :data:`EOS_ID` = 256 (also the padding after the text),
:data:`MASK_ID` = 257. A sequence is ``prompt bytes + text bytes + EOS padding``,
``max_length`` (64) positions in all.

Training (LLaDA's objective, :func:`diffusion_loss`): per sequence a ratio ``t ~ U(0, 1)``;
each position after the prompt is masked with probability ``t``; the loss is the cross-entropy
at the masked positions weighted by ``1 / t``, divided by the number of positions after the
prompt. The prompt is never masked (supervised fine-tuning in LLaDA's terms).
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from constrain.diffusion.tiny_corpus import Record
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "EOS_ID",
    "MASK_ID",
    "TinyDiffusionConfig",
    "TinyDiffusionLM",
    "diffusion_loss",
    "encode_records",
    "load_tiny_diffusion",
    "save_tiny_diffusion",
    "train",
]

EOS_ID = 256
"""End of text; every position after the text holds it."""
MASK_ID = 257
"""The mask token (a special id: never a text token)."""
WEIGHTS = "tiny_diffusion.safetensors"
"""The shipped weights, package data of :mod:`constrain.diffusion.tiny_model`."""


@dataclass(frozen=True)
class TinyDiffusionConfig:
    """The architecture of :class:`TinyDiffusionLM`."""

    vocab_size: int = 258
    max_length: int = 64
    dim: int = 128
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int = 384


class TinyDiffusionLM(nn.Module):
    """A bidirectional transformer over bytes that predicts masked positions.

    Parameters
    ----------
    config : TinyDiffusionConfig, optional

    Attributes
    ----------
    mask_token_id : int
        :data:`MASK_ID`.
    vocab_size : int
        The logits width (258).
    max_length : int
        Positions the model holds (prompt and output together).
    """

    def __init__(self, config: TinyDiffusionConfig | None = None) -> None:
        super().__init__()
        self.config = config or TinyDiffusionConfig()
        c = self.config
        self.mask_token_id = MASK_ID
        self.vocab_size = c.vocab_size
        self.max_length = c.max_length
        self.embed = nn.Embedding(c.vocab_size, c.dim)
        self.position = nn.Embedding(c.max_length, c.dim)
        layer = nn.TransformerEncoderLayer(
            c.dim, c.num_heads, c.ffn_dim, dropout=0.0, activation="gelu",
            batch_first=True, norm_first=True,
        )  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, c.num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab_size)
        self._vocabulary: Vocabulary | None = None
        self.info: dict[str, Any] = {}
        """How the weights were trained (from the weights file's metadata)."""

    def __repr__(self) -> str:
        c = self.config
        params = sum(p.numel() for p in self.parameters())
        return (
            f"TinyDiffusionLM(dim={c.dim}, layers={c.num_layers}, max_length={c.max_length}, "
            f"params={params})"
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Return the logits ``(B, N, V)`` of token ids ``(B, N)`` (masked ones = MASK_ID)."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.embed(ids) + self.position(pos)[None]
        logits: torch.Tensor = self.head(self.norm(self.encoder(h)))
        return logits

    @property
    def vocabulary(self) -> Vocabulary:
        """Bytes 0..255, EOS (256) and the mask token (257, special)."""
        if self._vocabulary is None:
            tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None, None]
            self._vocabulary = Vocabulary.from_bytes(
                tokens, eos_ids=[EOS_ID], special_ids=[MASK_ID]
            )
        return self._vocabulary

    def encode_prompt(
        self, prompt: str, *, chat: bool | None = None, system: str | None = None
    ) -> list[int]:
        """Return the UTF-8 bytes of ``prompt`` as token ids (the model has no chat template).

        Raises
        ------
        TypeError
            If ``prompt`` is not a str.
        ValueError
            With ``chat=True`` or a system message.
        """
        if not isinstance(prompt, str):
            raise TypeError(
                f"TinyDiffusionLM takes a str prompt (its bytes), got {type(prompt).__name__}"
            )
        if chat or system is not None:
            raise ValueError("TinyDiffusionLM has no chat template: pass chat=None, system=None")
        return list(prompt.encode("utf-8"))

    def predict(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Return the logits ``(N, V)`` of every position, masked ones read as MASK_ID.

        Parameters
        ----------
        tokens : (N,) int64
            The sequence, ``N <= max_length``.
        mask : (N,) bool
            True where masked.

        Raises
        ------
        ValueError
            If the shapes or dtypes are wrong, or ``N > max_length``.
        """
        if tokens.ndim != 1 or mask.shape != tokens.shape or mask.dtype != torch.bool:
            raise ValueError(
                f"tokens must be (N,) and mask (N,) bool, got {tuple(tokens.shape)} and "
                f"{tuple(mask.shape)} {mask.dtype}"
            )
        if tokens.shape[0] > self.max_length:
            raise ValueError(
                f"{tokens.shape[0]} positions, but the model holds {self.max_length} (prompt and "
                "output together): shorten the prompt or the output length"
            )
        ids = torch.where(mask, torch.full_like(tokens, self.mask_token_id), tokens)
        with torch.inference_mode():
            logits: torch.Tensor = self(ids.long()[None])[0]
        return logits


# -- training ----------------------------------------------------------------------------------


def encode_records(records: Sequence[Record], max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(ids (B, max_length) int64, prompt_lengths (B,) int64)`` with EOS padding.

    Raises
    ------
    ValueError
        If a record does not fit in ``max_length`` positions.
    """
    ids = torch.full((len(records), max_length), EOS_ID, dtype=torch.long)
    lengths = torch.empty(len(records), dtype=torch.long)
    for i, r in enumerate(records):
        data = (r.prompt + r.text).encode("utf-8")
        if len(data) > max_length:
            raise ValueError(f"record {i} has {len(data)} bytes, more than {max_length}")
        ids[i, : len(data)] = torch.tensor(list(data))
        lengths[i] = len(r.prompt.encode("utf-8"))
    return ids, lengths


def diffusion_loss(
    model: TinyDiffusionLM,
    ids: torch.Tensor,
    prompt_lengths: torch.Tensor,
    generator: torch.Generator,
    eps: float = 1e-3,
) -> torch.Tensor:
    """LLaDA's masked-diffusion loss of a batch (an upper bound on the negative log-likelihood).

    Parameters
    ----------
    model : TinyDiffusionLM
    ids : (B, N) int64
        Clean sequences.
    prompt_lengths : (B,) int64
        Positions never masked at the start of each row.
    generator : torch.Generator
        Draws the ratios and the masks.
    eps : float, optional
        The smallest masking ratio (``t ~ U(eps, 1)``).

    Returns
    -------
    scalar tensor
        ``sum over masked positions of CE / t``, divided by the positions after the prompts.
    """
    b, n = ids.shape
    t = eps + (1 - eps) * torch.rand(b, 1, generator=generator)
    answer = torch.arange(n)[None] >= prompt_lengths[:, None]
    masked = (torch.rand(b, n, generator=generator) < t) & answer
    noisy = torch.where(masked, torch.full_like(ids, model.mask_token_id), ids)
    logits = model(noisy)
    ce = nn.functional.cross_entropy(logits.transpose(1, 2), ids, reduction="none")
    return (ce * masked / t).sum() / answer.sum()


def train(
    model: TinyDiffusionLM,
    records: Sequence[Record],
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 2e-3,
    warmup: int = 50,
    seed: int = 0,
    log: Callable[[int, float], None] | None = None,
    log_every: int = 50,
) -> list[float]:
    """Train ``model`` in place with AdamW and a cosine schedule; return the loss per step.

    Parameters
    ----------
    model : TinyDiffusionLM
    records : sequence of Record
        The corpus; batches are drawn at random (with replacement across batches).
    steps, batch_size, lr, warmup : int, int, float, int
        Optimiser steps, rows per batch, peak learning rate, linear warm-up steps.
    seed : int, optional
        Seeds the batches and the masks (with the initial weights, the run is reproducible
        on one thread).
    log : callable, optional
        ``log(step, mean loss of the last log_every steps)``.

    Returns
    -------
    list of float
    """
    ids, prompt_lengths = encode_records(records, model.max_length)
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    model.train()
    losses: list[float] = []
    for step in range(steps):
        rows = torch.randint(0, ids.shape[0], (batch_size,), generator=generator)
        loss = diffusion_loss(model, ids[rows], prompt_lengths[rows], generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if log is not None and (step + 1) % log_every == 0:
            log(step + 1, sum(losses[-log_every:]) / log_every)
    model.eval()
    return losses


# -- files -------------------------------------------------------------------------------------


def save_tiny_diffusion(
    model: TinyDiffusionLM, path: str | os.PathLike[str], info: dict[str, Any] | None = None
) -> None:
    """Write the weights as float16 safetensors, with the config and ``info`` as metadata."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    meta = {"config": json.dumps(asdict(model.config)), "info": json.dumps(info or {})}
    save_file(tensors, os.fspath(path), metadata=meta)


def load_tiny_diffusion(path: str | os.PathLike[str] | None = None) -> TinyDiffusionLM:
    """Load the shipped model (or weights written by :func:`save_tiny_diffusion`).

    Parameters
    ----------
    path : str or PathLike, optional
        A ``.safetensors`` file; default: the weights shipped with constrain.

    Returns
    -------
    TinyDiffusionLM
        In float32, evaluation mode, on the CPU; ``model.info`` holds the training record.
    """
    from safetensors import safe_open

    if path is None:
        ref = importlib.resources.files("constrain.diffusion").joinpath(WEIGHTS)
        with importlib.resources.as_file(ref) as file:
            return load_tiny_diffusion(file)
    with safe_open(os.fspath(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k).float() for k in f.keys()}  # noqa: SIM118
    model = TinyDiffusionLM(TinyDiffusionConfig(**json.loads(meta.get("config", "{}"))))
    model.load_state_dict(tensors)
    model.info = json.loads(meta.get("info", "{}"))
    model.eval()
    return model
