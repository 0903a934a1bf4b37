"""Hugging Face masked-diffusion models for :func:`~constrain.decoding.denoising.diffusion_decode`.

:class:`HFMaskedLM` adapts a model that predicts masked positions to the
:class:`~constrain.decoding.denoising.DiffusionModel` protocol (``predict(tokens, mask)``):

- masked LMs of transformers itself (``AutoModelForMaskedLM``: BERT, RoBERTa, ModernBERT, ...),
  built in memory or loaded from a local folder;
- LLaDA- and Dream-style diffusion LMs: causal-LM-shaped classes with a mask token and
  bidirectional attention, shipped as remote code. Load them from a local folder with
  ``HFMaskedLM.from_pretrained(path, trust_remote_code=True)``. The folder must hold
  ``config.json`` (with ``auto_map``), the modelling code, the weights and, for
  :attr:`HFMaskedLM.vocabulary`, the tokenizer. The mask id is read from
  ``config.mask_token_id`` (LLaDA: 126336, Dream: 151666), ``generation_config.mask_token_id``
  or ``tokenizer.mask_token_id``; pass ``mask_token_id=`` otherwise. Dream predicts token
  ``i`` at position ``i - 1`` (it was adapted from an autoregressive model): its logits are
  shifted right by one (``shift_logits``, automatic for ``model_type == "Dream"``).

Nothing is downloaded: paths are local folders (``local_files_only=True``). This module is in
``integrations`` because only this stage may import ``transformers``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from constrain.integrations.transformers import (
    ModelNotFoundError,
    encode_prompt_ids,
    logits_width,
)
from constrain.vocab.huggingface import as_token_ids
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["HFMaskedLM"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def _find_mask_id(model: Any, tokenizer: Any) -> int | None:
    for source in (
        getattr(model, "config", None),
        getattr(model, "generation_config", None),
        tokenizer,
    ):
        value = getattr(source, "mask_token_id", None)
        if value is not None:
            return int(value)
    return None


class HFMaskedLM:
    """A Hugging Face model that predicts masked positions, as a ``DiffusionModel``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        ``model(input_ids=ids).logits`` is ``(1, N, V)`` with bidirectional attention.
    tokenizer : transformers tokenizer, optional
        Gives :attr:`vocabulary` and, possibly, the mask id.
    mask_token_id : int, optional
        Default: ``model.config.mask_token_id``, ``model.generation_config.mask_token_id`` or
        ``tokenizer.mask_token_id``, the first that is set.
    shift_logits : bool, optional
        The logits at position ``i - 1`` predict token ``i`` (Dream); default: True iff
        ``model.config.model_type`` is ``"Dream"``.

    Attributes
    ----------
    mask_token_id : int
    vocab_size : int
        The logits width.

    Raises
    ------
    ValueError
        If no mask id is given or found.
    """

    def __init__(
        self,
        model: Any,
        *,
        tokenizer: Any = None,
        mask_token_id: int | None = None,
        shift_logits: bool | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        found = mask_token_id if mask_token_id is not None else _find_mask_id(model, tokenizer)
        if found is None:
            raise ValueError(
                "the model has no mask token id (config.mask_token_id, "
                "generation_config.mask_token_id or tokenizer.mask_token_id): pass "
                "mask_token_id="
            )
        self.mask_token_id = int(found)
        self.vocab_size = logits_width(model)
        if shift_logits is None:
            kind = str(getattr(getattr(model, "config", None), "model_type", ""))
            shift_logits = kind.lower() == "dream"
        self.shift_logits = shift_logits
        self._vocabulary: Vocabulary | None = None

    def __repr__(self) -> str:
        config = getattr(self.model, "config", None)
        name = getattr(config, "name_or_path", "") or type(self.model).__name__
        return f"HFMaskedLM({name!r}, mask_token_id={self.mask_token_id}, V={self.vocab_size})"

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return torch.device(next(self.model.parameters()).device)

    @property
    def vocabulary(self) -> Vocabulary:
        """The constrain vocabulary of the tokenizer (logits width, EOS ids), built once.

        Raises
        ------
        ValueError
            Without a tokenizer.
        """
        if self._vocabulary is None:
            if self.tokenizer is None:
                raise ValueError(
                    "no tokenizer: build the Vocabulary yourself (Vocabulary.from_bytes / "
                    "from_huggingface) or pass tokenizer="
                )
            eos = set(as_token_ids(getattr(self.tokenizer, "eos_token_id", None)))
            gen = getattr(self.model, "generation_config", None)
            eos |= set(as_token_ids(getattr(gen, "eos_token_id", None)))
            self._vocabulary = Vocabulary.from_huggingface(
                self.tokenizer, vocab_size=self.vocab_size, eos_ids=sorted(eos)
            )
        return self._vocabulary

    def encode_prompt(
        self,
        prompt: str | Sequence[Mapping[str, str]],
        *,
        chat: bool | None = None,
        system: str | None = None,
    ) -> list[int]:
        """Return the prompt's token ids (what ``generate()`` keeps unmasked before the output).

        Parameters
        ----------
        prompt : str or sequence of {"role": ..., "content": ...}
            Text, or chat messages.
        chat : bool, optional
            Apply the tokenizer's chat template (default: when it has one; always for messages).
        system : str, optional
            A system message put first (chat only).

        Raises
        ------
        ValueError
            Without a tokenizer, or when a chat template is needed and there is none.
        """
        if self.tokenizer is None:
            raise ValueError("no tokenizer: pass tokenizer= to encode prompts")
        return encode_prompt_ids(
            self.tokenizer, prompt, chat=chat, system=system, name=type(self.model).__name__
        )

    def predict(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Return the logits ``(N, V)`` of every position, masked ones as ``mask_token_id``.

        Parameters
        ----------
        tokens : (N,) int64
            The sequence; values at masked positions are ignored.
        mask : (N,) bool
            True where masked.

        Returns
        -------
        (N, V) float tensor
            On the model's device, in its dtype.

        Raises
        ------
        ValueError
            If the shapes or the mask dtype are wrong.
        """
        if tokens.ndim != 1 or mask.shape != tokens.shape or mask.dtype != torch.bool:
            raise ValueError(
                f"tokens must be (N,) and mask (N,) bool, got {tuple(tokens.shape)} and "
                f"{tuple(mask.shape)} {mask.dtype}"
            )
        ids = torch.where(mask, torch.full_like(tokens, self.mask_token_id), tokens)
        ids = ids.to(device=self.device, dtype=torch.long)[None]
        with torch.inference_mode():
            out = self.model(input_ids=ids)
        logits: torch.Tensor = out.logits[0] if hasattr(out, "logits") else out[0][0]
        if self.shift_logits:
            logits = torch.cat([logits[:1], logits[:-1]], dim=0)
        return logits

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        trust_remote_code: bool = False,
        mask_token_id: int | None = None,
        shift_logits: bool | None = None,
    ) -> HFMaskedLM:
        """Load a model (and its tokenizer, when the folder has one) from a local folder.

        The class: ``AutoModelForMaskedLM`` for the architectures of transformers; with remote
        code (``config.auto_map``), the first of ``AutoModelForMaskedLM``, ``AutoModel``
        (LLaDA, Dream) and ``AutoModelForCausalLM`` that the folder maps.

        Parameters
        ----------
        path : str or PathLike
            A local model folder; nothing is downloaded.
        device : str or torch.device, optional
            Default: CUDA when available, else CPU.
        dtype : torch.dtype or str, optional
            Default: the checkpoint's dtype on CPU, bfloat16 on CUDA.
        trust_remote_code : bool, optional
            Run the folder's modelling code (needed for LLaDA and Dream).
        mask_token_id, shift_logits
            See :class:`HFMaskedLM`.

        Returns
        -------
        HFMaskedLM
            In evaluation mode.

        Raises
        ------
        ModelNotFoundError
            If the folder does not exist or holds no loadable model.
        """
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForMaskedLM,
            AutoTokenizer,
        )

        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ModelNotFoundError(
                f"no model folder at {str(folder)!r}: pass a local Hugging Face model folder "
                "(config.json and weights); models are never downloaded"
            )
        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs: dict[str, Any] = {"local_files_only": True, "trust_remote_code": trust_remote_code}
        if dtype is not None:
            kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        elif dev.type == "cuda":
            kwargs["dtype"] = torch.bfloat16
        try:
            config = AutoConfig.from_pretrained(str(folder), **kwargs)
            auto_map = getattr(config, "auto_map", None) or {}
            auto: Any = AutoModelForMaskedLM
            if auto_map and "AutoModelForMaskedLM" not in auto_map:
                auto = AutoModel if "AutoModel" in auto_map else AutoModelForCausalLM
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = auto.from_pretrained(str(folder), **kwargs)
        except (OSError, ValueError) as err:
            raise ModelNotFoundError(
                f"cannot load a masked-diffusion model from {str(folder)!r}: {err}"
            ) from err
        tokenizer = None
        # transformers builds an empty tokenizer from config.json alone: only load real files
        if any((folder / f).is_file() for f in _TOKENIZER_FILES):
            tokenizer = AutoTokenizer.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=trust_remote_code
            )
        model = model.to(dev)
        model.eval()
        return cls(
            model, tokenizer=tokenizer, mask_token_id=mask_token_id, shift_logits=shift_logits
        )
