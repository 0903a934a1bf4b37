"""Hugging Face transformers: models for :func:`constrain.generate`.

- :func:`load_model` loads a local causal LM directory (model + tokenizer), or, with no path,
  the embedded default model: SmolLM2-135M-Instruct, converted once to the user cache
  (:mod:`constrain.integrations.default_model`).
- :class:`Model` wraps a model and its tokenizer with what decoding needs: the constrain
  :class:`~constrain.Vocabulary`, the chat template, EOS ids and a key-value-cached
  :class:`HFSession`; on a CPU in float32 it computes few rows the fast way
  (:mod:`constrain.integrations.cpu_layers`).
- :class:`LogitsProcessor` (:mod:`constrain.integrations.logits_processor`, re-exported here)
  plugs a compiled grammar into ``model.generate(logits_processor=...)``.

Only the modules of :mod:`constrain.integrations` and :mod:`constrain.generation` import
``transformers``.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from constrain.compiler import CompiledGrammar, Compiler
from constrain.errors import ModelNotFoundError
from constrain.integrations.cpu_layers import CpuHead, route_linears
from constrain.integrations.default_model import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_INSTALL,
    convert_default_model,
    default_model_path,
    model_cache_dir,
)
from constrain.integrations.logits_processor import LogitsProcessor
from constrain.integrations.progress import silence_progress_bars
from constrain.vocab.canonical import CanonicalBpe
from constrain.vocab.huggingface import as_token_ids
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_INSTALL",
    "HFSession",
    "LogitsProcessor",
    "Model",
    "ModelNotFoundError",
    "convert_default_model",
    "default_model_path",
    "encode_prompt_ids",
    "load_model",
    "logits_width",
    "model_cache_dir",
]
Message = Mapping[str, str]


def encode_prompt_ids(
    tokenizer: Any,
    prompt: str | Sequence[Message],
    *,
    chat: bool | None = None,
    system: str | None = None,
    name: str = "the model",
) -> list[int]:
    """Return a prompt's token ids with a Hugging Face tokenizer, through its chat template.

    ``chat=None`` applies the template when the tokenizer has one; chat messages always need
    it. ``system`` puts a system message first (chat only). ``name`` names the model in errors.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    use_chat = has_template if chat is None else chat
    if not isinstance(prompt, str):
        use_chat = True
    if use_chat:
        if not has_template:
            raise ValueError(f"{name} has no chat template: pass a str prompt with chat=False")
        messages = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [dict(m) for m in prompt]
        )
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        if system is not None:
            raise ValueError("system= needs the chat template (chat=True)")
        ids = tokenizer(prompt)["input_ids"]
    return [int(i) for i in ids]


# -- the model wrapper -------------------------------------------------------------------------


class Model:
    """A causal language model, its tokenizer and its constrain vocabulary.

    Build one with :func:`load_model`, or wrap objects you already have with
    ``Model(hf_model, tokenizer)``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM (``model(input_ids, ...).logits``).
    tokenizer : transformers tokenizer
        Its fast tokenizer.
    name : str, optional
        For messages and benchmark reports.

    Attributes
    ----------
    vocabulary : Vocabulary
        The token bytes, with the model's logits width and every EOS id of the tokenizer and
        of ``model.generation_config``.
    compiler : Compiler
        Compiles grammars for this vocabulary; its cache is shared by every call.
    """

    def __init__(self, model: Any, tokenizer: Any, *, name: str | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "name_or_path", None) or type(model).__name__
        self.load_seconds = 0.0
        eos = set(as_token_ids(getattr(model.generation_config, "eos_token_id", None)))
        eos |= set(as_token_ids(getattr(tokenizer, "eos_token_id", None)))
        width = logits_width(model)
        self.vocabulary = Vocabulary.from_huggingface(
            tokenizer, vocab_size=width, eos_ids=sorted(eos)
        )
        self.eos_ids = [int(e) for e in self.vocabulary.eos_ids]
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]
        self.compiler = Compiler(self.vocabulary)
        self._canonical: CanonicalBpe | None = None
        params = inspect.signature(model.forward).parameters
        # transformers 5 renamed ``past_key_values`` to ``cache``
        self.cache_keyword = "cache" if "cache" in params else "past_key_values"
        self.head = CpuHead(model)

    def __repr__(self) -> str:
        return f"Model({self.name!r}, device={self.device}, vocab={self.vocabulary.size})"

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return torch.device(next(self.model.parameters()).device)

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer has a chat template."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    def compile(self, grammar: Any) -> CompiledGrammar:
        """Compile a :class:`~constrain.Grammar` for this model's vocabulary (cached)."""
        return self.compiler.compile(grammar)

    def canonical(self) -> CanonicalBpe:
        """Return the tokenizer's canonical-encoding relation (built on first use, kept)."""
        if self._canonical is None:
            self._canonical = CanonicalBpe.from_huggingface(self.tokenizer, self.vocabulary)
        return self._canonical

    def encode_prompt(
        self,
        prompt: str | Sequence[Message],
        *,
        chat: bool | None = None,
        system: str | None = None,
    ) -> list[int]:
        """Return the prompt's token ids.

        Parameters
        ----------
        prompt : str or sequence of {"role": ..., "content": ...}
            Text, or chat messages.
        chat : bool, optional
            Apply the chat template (default: when the tokenizer has one; always for messages).
        system : str, optional
            A system message put first (chat only).
        """
        return encode_prompt_ids(self.tokenizer, prompt, chat=chat, system=system, name=self.name)

    def start(self, prompts: Sequence[Sequence[int]]) -> HFSession:
        """Return a decoding session positioned after the (left-padded) prompts."""
        return HFSession(self, prompts)


class HFSession:
    """Key-value-cached forward passes of a batch of left-padded prompts.

    Implements :class:`constrain.decoding.DecodingSession`.
    """

    def __init__(self, owner: Model, prompts: Sequence[Sequence[int]]) -> None:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt must have at least one token")
        self.owner = owner
        device = owner.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), owner.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
        self.input_ids = ids.to(device)
        self.attention_mask = mask.to(device)
        self.cache: Any = None
        self.prompt_tokens = [len(p) for p in prompts]
        self._cache_kw = owner.cache_keyword
        self._head: CpuHead = getattr(owner, "head", None) or CpuHead(None)

    @torch.inference_mode()
    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        """Return the next-token logits ``(B, C)`` (prefill when ``token_ids`` is None)."""
        model = self.owner.model
        head = self._head
        if token_ids is None:
            mask = self.attention_mask
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(
                input_ids=self.input_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                output_hidden_states=head.unchecked,
            )
            if head.unchecked:
                head.check(out.hidden_states[-1][:, -1:], out.logits[:, -1:])
        else:
            dev = self.attention_mask.device
            ones = torch.ones((self.attention_mask.shape[0], 1), dtype=torch.long, device=dev)
            self.attention_mask = torch.cat([self.attention_mask, ones], dim=1)
            positions = self.attention_mask.sum(-1, keepdim=True) - 1
            out = head.run(
                model,
                input_ids=token_ids.to(dev).view(-1, 1),
                attention_mask=self.attention_mask,
                position_ids=positions,
                use_cache=True,
                **{self._cache_kw: self.cache},
            )
        cache = getattr(out, "cache", None)
        self.cache = cache if cache is not None else out.past_key_values
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits

    @property
    def length(self) -> int:
        """Positions in the key-value cache (prompt width plus every appended position)."""
        return int(self.attention_mask.shape[1])

    def extend(self, token_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Append ``token_ids`` ``(B, T)``; return the logits ``(B, T, C)`` after each one.

        Positions where ``valid`` is false are padding, masked out of attention and skipped by
        the position ids (speculative decoding: drafts of different lengths, finished rows).
        """
        return self.extend_with(self.owner.model, token_ids, valid)

    @torch.inference_mode()
    def extend_with(self, model: Any, token_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Run :meth:`extend` through ``model``, a module sharing this cache's layout.

        An early-exit view of the first layers writes only those layers' cache.
        """
        if self.cache is None:
            raise RuntimeError("run the prefill (forward(None)) before extend()")
        dev = self.attention_mask.device
        new = valid.to(device=dev, dtype=torch.long)
        self.attention_mask = torch.cat([self.attention_mask, new], dim=1)
        width = int(token_ids.shape[1])
        positions = (self.attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -width:]
        inputs: dict[str, Any] = {
            "input_ids": token_ids.to(dev),
            "attention_mask": self.attention_mask,
            "position_ids": positions,
            "use_cache": True,
            self._cache_kw: self.cache,
        }
        out = self._head.run(model, **inputs) if model is self.owner.model else model(**inputs)
        cache = getattr(out, "cache", None)
        self.cache = cache if cache is not None else out.past_key_values
        self._last_width = width
        logits: torch.Tensor = out.logits.float()
        return logits

    def keep(self, counts: Sequence[int]) -> None:
        """Of the positions the last :meth:`extend` appended, row ``i`` keeps ``counts[i]``.

        The rest are masked out, and the cache is cropped to the longest row.
        """
        width = getattr(self, "_last_width", 0)
        if len(counts) != self.attention_mask.shape[0]:
            raise ValueError(f"{len(counts)} counts for {self.attention_mask.shape[0]} rows")
        if any(not 0 <= c <= width for c in counts):
            raise ValueError(f"counts must lie in [0, {width}], got {list(counts)}")
        base = self.length - width
        cols = torch.arange(width, device=self.attention_mask.device)
        keep = cols.unsqueeze(0) < torch.tensor(list(counts), device=cols.device).unsqueeze(1)
        tail = self.attention_mask[:, base:] * keep.long()
        self.attention_mask = torch.cat([self.attention_mask[:, :base], tail], dim=1)
        self.truncate(base + max(counts))
        self._last_width = 0

    @torch.inference_mode()
    def truncate(self, length: int) -> None:
        """Drop every position from ``length`` on (cache and attention mask)."""
        if not 0 < length <= self.length:
            raise ValueError(f"length must be in (0, {self.length}], got {length}")
        if length == self.length and not self._partial_layers():
            return
        self.attention_mask = self.attention_mask[:, :length]
        cache = self.cache
        if cache is None:
            return
        self.cache = _crop_cache(cache, length)

    def _partial_layers(self) -> bool:
        """Whether some cache layers are longer than the mask (after an early-exit draft)."""
        layers = getattr(self.cache, "layers", None)
        if not layers:
            return False
        return any(
            getattr(layer, "keys", None) is not None
            and layer.keys.numel() > 0
            and int(layer.keys.shape[-2]) > self.length
            for layer in layers
        )

    @torch.inference_mode()
    def reorder(self, indices: Sequence[int] | torch.Tensor) -> None:
        """Make row ``i`` a copy of (old) row ``indices[i]``: key-value cache, mask and prompt.

        Used by particle methods (:class:`constrain.sampling.SMC` resampling). ``indices`` may
        repeat rows and drop others; its length becomes the new batch size.
        """
        idx = torch.as_tensor(
            indices if isinstance(indices, torch.Tensor) else list(indices), dtype=torch.long
        )
        rows = int(self.attention_mask.shape[0])
        if idx.ndim != 1 or idx.numel() == 0:
            raise ValueError(
                f"indices must be a non-empty 1-D sequence, got shape {tuple(idx.shape)}"
            )
        if int(idx.min()) < 0 or int(idx.max()) >= rows:
            raise IndexError(f"indices must lie in [0, {rows}), got {idx.tolist()}")
        dev = self.attention_mask.device
        idx = idx.to(dev)
        self.attention_mask = self.attention_mask.index_select(0, idx)
        self.input_ids = self.input_ids.index_select(0, idx)
        self.prompt_tokens = [self.prompt_tokens[i] for i in idx.tolist()]
        cache = self.cache
        if cache is None:
            return
        if hasattr(cache, "reorder_cache"):
            cache.reorder_cache(idx)
        else:  # legacy tuple of (key, value) per layer
            self.cache = tuple(
                tuple(t.index_select(0, idx.to(t.device)) for t in layer) for layer in cache
            )


def _crop_cache(cache: Any, length: int) -> Any:
    """Cut every layer of a key-value cache to at most ``length`` positions.

    Layer by layer, because an early-exit draft leaves the first layers longer than the rest
    (``DynamicCache.crop`` removes the same count from every layer, and its argument changed
    meaning across transformers versions).
    """
    layers = getattr(cache, "layers", None)
    if layers is not None:  # transformers >= 4.56: DynamicLayer.keys / .values
        for layer in layers:
            keys = getattr(layer, "keys", None)
            if keys is None or keys.numel() == 0 or int(keys.shape[-2]) <= length:
                continue
            layer.keys = keys[..., :length, :]
            layer.values = layer.values[..., :length, :]
        return cache
    if hasattr(cache, "key_cache"):  # older DynamicCache
        for i, keys in enumerate(cache.key_cache):
            if keys.numel() and int(keys.shape[-2]) > length:
                cache.key_cache[i] = keys[..., :length, :]
                cache.value_cache[i] = cache.value_cache[i][..., :length, :]
        return cache
    # legacy tuple of (key, value) per layer
    return tuple(tuple(t[..., :length, :] for t in layer) for layer in cache)


def logits_width(model: Any) -> int:
    """Return the width of the model's logits (its output embedding rows, else its config)."""
    out = model.get_output_embeddings()
    if out is not None and hasattr(out, "weight"):
        return int(out.weight.shape[0])
    return int(model.config.vocab_size)


def _pick_device(device: str | torch.device | None) -> torch.device:
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(
    path: str | os.PathLike[str] | None = None,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> Model:
    """Load a causal language model and its tokenizer for :func:`constrain.generate`.

    Parameters
    ----------
    path : str or PathLike, optional
        A local Hugging Face model folder (``config.json``, weights, tokenizer files), or a
        ``.gguf`` file. ``None``: the embedded default model, SmolLM2-135M-Instruct (converted
        once to the cache, see :func:`model_cache_dir`). Nothing is downloaded.
    device : str or torch.device, optional
        Default: CUDA when available, else CPU.
    dtype : torch.dtype or str, optional
        Default: the checkpoint's dtype on CPU (float32 for the default model), bfloat16 on
        CUDA.

    Notes
    -----
    On a CPU in float32, the linear layers of the model's body compute 1-16 rows (a decoding
    step, a speculative pass, a small batch) with constrain's numba kernel instead of
    ``F.linear`` (:class:`~constrain.integrations.cpu_layers.SkinnyLinear`; equal to float32
    rounding, 1.4-1.8x faster for 2-4 rows on this project's CPU). A model you load yourself
    and wrap with :class:`Model` is left as it is.

    transformers' progress bars are hidden when standard error is not a terminal. The first
    load of the default model on a machine converts it (about 25 s) and says so once on the
    ``"constrain"`` logger (:mod:`constrain.integrations.progress`). Each call loads the model
    anew (1-2 s for the default model): load once and pass ``model=`` to every ``generate``.

    Returns
    -------
    Model

    Raises
    ------
    ModelNotFoundError
        If the path does not exist, or the default model's package is not installed (the
        message gives the install command).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    dev = _pick_device(device)
    quiet = not _is_terminal(sys.stderr)
    if path is None:
        with silence_progress_bars(quiet):
            folder, gguf_file, name = convert_default_model(), None, DEFAULT_MODEL
    else:
        p = Path(path).expanduser()
        if not p.exists():
            raise ModelNotFoundError(
                f"no model at {str(p)!r}: pass the path of a local Hugging Face model folder "
                "(config.json, weights and tokenizer files) or of a .gguf file; models are "
                "never downloaded. model=None uses the embedded default model."
            )
        if p.is_file():
            folder, gguf_file, name = p.parent, p.name, p.stem
        else:
            folder, gguf_file, name = p, None, p.name
    kwargs: dict[str, Any] = {}
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
    if dtype is not None:
        kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    elif dev.type == "cuda":
        kwargs["dtype"] = torch.bfloat16
    try:
        with warnings.catch_warnings(), silence_progress_bars(quiet):
            warnings.simplefilter("ignore")
            tokenizer = AutoTokenizer.from_pretrained(str(folder), **_only_gguf(kwargs))
            hf_model = AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
    except OSError as err:
        raise ModelNotFoundError(f"cannot load a model from {str(folder)!r}: {err}") from err
    hf_model = hf_model.to(dev)  # type: ignore[arg-type]
    hf_model.eval()  # type: ignore[no-untyped-call]
    if dev.type == "cpu":
        route_linears(hf_model)
    model = Model(hf_model, tokenizer, name=name)
    model.load_seconds = time.perf_counter() - t0
    return model


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def _only_gguf(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k == "gguf_file"}
