"""CPU fast paths for a transformers model: the LM head and the body's linear layers.

MKL's single-precision GEMM is slow for a few rows, and a decoding step, a speculative pass or a
small batch sends 1-16 rows through every layer. :class:`CpuHead` computes the LM head the
faster way for the number of rows; :class:`SkinnyLinear` (switched in by
:func:`route_linears`) computes a layer's 1-16 rows with
:func:`~constrain.kernels.numba_head.skinny_linear_kernel`, which reads each weight row once.
:class:`~constrain.integrations.transformers.Model` and
:func:`~constrain.integrations.transformers.load_model` use them on a CPU in float32.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from constrain.kernels.numba_head import skinny_linear_kernel

__all__ = ["CpuHead", "SkinnyLinear", "route_linears"]


class CpuHead:
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


class SkinnyLinear(torch.nn.Linear):
    """``torch.nn.Linear`` computing 1-16 rows with the skinny kernel (CPU, float32, inference).

    A decoding step or a speculative pass sends 1-16 rows through each projection of every
    layer; MKL's GEMM reads the weight once per few rows there, the kernel once in all (see
    :mod:`constrain.kernels.numba_head`; the default model's 30 layers: 21 / 24 / 28 ms for
    1 / 2 / 4 rows against 29 / 45 / 49 ms). Anything else (more rows, another dtype or device,
    autograd on, torch on more than two threads, where MKL's threads may win) takes
    ``F.linear``. :func:`~constrain.integrations.transformers.load_model` switches a CPU
    float32 model's layers to it (:func:`route_linears`); the weights are shared, not copied.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias`` for ``x`` ``(..., in_features)``."""
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


def route_linears(model: Any) -> int:
    """Switch the ``nn.Linear`` layers of ``model``'s body to :class:`SkinnyLinear`.

    Only a CPU float32 model's body (``model.model``); the LM head is :class:`CpuHead`'s.
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
            module.__class__ = SkinnyLinear
            switched += 1
    return switched


class _HeadOutput:
    def __init__(self, logits: torch.Tensor, cache: Any) -> None:
        self.logits = logits
        self.past_key_values = cache
        self.cache = cache
