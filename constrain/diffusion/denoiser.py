"""The model's side of a denoising step: scores, Gumbel noise, the unmasking order (stage 7).

:func:`~constrain.diffusion.denoising.diffusion_decode` runs the loop; a :class:`Denoiser`
runs the :class:`DiffusionModel` on the output so far and turns its logits into the block's
scores (tempered log-probabilities over the vocabulary's ids, plus Gumbel noise when sampling)
and the order in which the unmasking policy commits the masked positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import torch

from constrain.vocab.vocabulary import Vocabulary

__all__ = ["Denoiser", "DiffusionModel", "banned_ids", "gumbel_noise", "schedule"]

Unmasking = Literal["confidence", "random", "left_to_right"]


@runtime_checkable
class DiffusionModel(Protocol):
    """A masked-diffusion LM: predicts every position of a sequence at once.

    :class:`constrain.integrations.diffusion.HFMaskedLM` adapts Hugging Face models;
    :class:`constrain.models.tiny_diffusion.TinyDiffusionLM` is the small model shipped with
    constrain. ``isinstance(obj, DiffusionModel)`` checks that the three members exist (it is
    how ``generate()`` recognises a diffusion model).
    """

    @property
    def mask_token_id(self) -> int:
        """The id of the mask token (it must not be a text token of the vocabulary)."""
        ...

    @property
    def vocab_size(self) -> int:
        """``V``, the width of the logits."""
        ...

    def predict(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Return the logits ``(N, V)`` of every position.

        Parameters
        ----------
        tokens : (N,) int64
            The sequence (prompt and output); what masked positions hold is ignored.
        mask : (N,) bool
            True where the position is masked (the model sees ``mask_token_id`` there).
        """
        ...


def schedule(num: int, steps: int) -> list[int]:
    """Positions committed per step: ``num`` spread over ``steps`` steps (LLaDA's schedule)."""
    s = min(steps, num)
    return [num // s + (1 if j < num % s else 0) for j in range(s)]


def banned_ids(vocab: Vocabulary, width: int, mask_id: int) -> torch.Tensor:
    """Columns never chosen: special tokens but EOS, padded ids, the mask token."""
    banned = np.ones(width, dtype=np.bool_)
    banned[: vocab.size] = vocab.token_lengths == 0
    banned[vocab.eos_ids] = False
    if mask_id < width:
        banned[mask_id] = True
    return torch.from_numpy(banned)


def gumbel_noise(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Draw standard Gumbel noise of ``shape`` (float64) from ``generator``."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64).clamp_(1e-20, 1.0)
    return -torch.log(-torch.log(u))


class Denoiser:
    """The model's side of a denoising step: the block's scores and the unmasking order.

    Parameters
    ----------
    model : DiffusionModel
        Predicts every position.
    vocab : Vocabulary
        The output's vocabulary (its model ids are the score columns).
    prompt : sequence of int
        Token ids before the output.
    length : int
        Output positions.
    temperature : float
        0 is greedy; else the scores carry Gumbel noise.
    generator : torch.Generator
        The noise and the random unmasking order.
    """

    def __init__(
        self,
        model: DiffusionModel,
        vocab: Vocabulary,
        prompt: Sequence[int],
        length: int,
        temperature: float,
        generator: torch.Generator,
    ) -> None:
        self.model = model
        self.width = vocab.model_vocab_size
        self.mask_id = int(model.mask_token_id)
        self.banned_t = banned_ids(vocab, self.width, self.mask_id)
        self.banned = self.banned_t.numpy()
        self.prompt_t = torch.as_tensor(list(prompt), dtype=torch.long)
        self.length = length
        self.temperature = temperature
        self.generator = generator

    def scores(self, tokens: list[int], start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the model on the output so far; return the block's probabilities and scores.

        The probabilities are the model's over the vocabulary's ids (banned ones 0), for the
        positions ``start`` to ``end``; the scores, from ``start`` to the output's end, are the
        tempered log-probabilities, plus Gumbel noise over the block when sampling.

        Raises
        ------
        ValueError
            If the model's logits do not have the shape ``(prompt + length, vocab_size)``.
        """
        n_prompt, length, width = self.prompt_t.shape[0], self.length, self.width
        seq = torch.cat([self.prompt_t, torch.tensor(tokens, dtype=torch.long)])
        is_masked = torch.zeros(n_prompt + length, dtype=torch.bool)
        is_masked[n_prompt:] = seq[n_prompt:] < 0
        seq[is_masked] = self.mask_id
        logits = self.model.predict(seq, is_masked)
        if logits.shape != (n_prompt + length, self.model.vocab_size):
            raise ValueError(
                f"model.predict returned shape {tuple(logits.shape)}, expected "
                f"({n_prompt + length}, {self.model.vocab_size})"
            )
        rows = logits[n_prompt + start :].detach().to("cpu", torch.float64)
        # columns = the vocabulary's model ids; banned ones never chosen
        if rows.shape[1] >= width:
            rows = rows[:, :width].clone()
        else:
            pad = torch.full((rows.shape[0], width - rows.shape[1]), -torch.inf)
            rows = torch.cat([rows, pad.double()], dim=1)
        rows[:, self.banned_t] = -torch.inf
        probs = torch.softmax(rows[: end - start], dim=-1)
        t = self.temperature
        scores = torch.log_softmax(rows / t if t > 0 else rows, dim=-1)
        if t > 0:
            scores[: end - start] += gumbel_noise((end - start, width), self.generator)
        return probs, scores

    def order(
        self,
        masked: list[int],
        unmasking: Unmasking,
        probs: torch.Tensor,
        proposals: torch.Tensor,
        start: int,
    ) -> list[int]:
        """Return the masked positions in the order the unmasking policy commits them."""
        if unmasking == "confidence":
            conf = probs.gather(1, proposals[:, None])[:, 0].tolist()
            return sorted(masked, key=lambda j: -conf[j - start])
        if unmasking == "random":
            order = torch.randperm(len(masked), generator=self.generator).tolist()
            return [masked[i] for i in order]
        return masked
