"""``generate()`` with a masked-diffusion model: the route to :func:`diffusion_decode`.

:func:`constrain.generate` hands a call over to :func:`generate_diffusion` when ``model=`` is a
:class:`~constrain.decoding.denoising.DiffusionModel` (it has ``predict``, ``mask_token_id``
and ``vocab_size``) rather than a causal :class:`~constrain.Model`. The autoregressive path is
untouched. What such a model must also have, for ``generate``:

- ``vocabulary``: the constrain :class:`~constrain.Vocabulary` of its ids (with an EOS id);
- ``encode_prompt(prompt, chat=, system=) -> list[int]``: the prompt's token ids
  (:class:`~constrain.models.tiny_diffusion.TinyDiffusionLM`: the UTF-8 bytes;
  :class:`~constrain.integrations.diffusion.HFMaskedLM`: its tokenizer, chat template when
  asked);
- optionally ``max_length``: the positions it holds, prompt included.

The prompt is a prefix that is never masked; the output is ``length`` positions after it,
denoised in blocks (see :mod:`constrain.diffusion.denoising`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, cast

from constrain.compiler import CompiledGrammar, Compiler
from constrain.diffusion.denoising import (
    DiffusionModel,
    DiffusionResult,
    Method,
    diffusion_decode,
)
from constrain.output import output_type

__all__ = ["DIFFUSION_OPTIONS", "generate_diffusion"]

DIFFUSION_OPTIONS = ("length", "block_size", "steps", "unmasking", "num_candidates", "gaps")
"""Keyword options of ``generate`` with a diffusion model (see :func:`generate_diffusion`)."""
_METHODS = ("auto", "dingo", "infill", "lave")

_COMPILERS: weakref.WeakKeyDictionary[Any, Compiler] = weakref.WeakKeyDictionary()


def _compile(model: Any, grammar: Any) -> CompiledGrammar:
    """Compile for the model's vocabulary, with one cached :class:`Compiler` per model."""
    vocab = getattr(model, "vocabulary", None)
    if vocab is None:
        raise TypeError(
            f"{type(model).__name__} has no .vocabulary: generate() needs the constrain "
            "Vocabulary of a diffusion model's ids (HFMaskedLM builds it from the tokenizer)"
        )
    try:
        compiler = _COMPILERS.get(model)
        if compiler is None or compiler.vocab is not vocab:
            compiler = _COMPILERS[model] = Compiler(vocab)
    except TypeError:  # not weak-referenceable: no cache
        compiler = Compiler(vocab)
    return compiler.compile(grammar)


def _prompt_ids(model: Any, prompt: Any, chat: bool | None, system: str | None) -> list[int]:
    encode = getattr(model, "encode_prompt", None)
    if encode is None:
        raise TypeError(
            f"{type(model).__name__} has no encode_prompt(prompt, chat=, system=): generate() "
            "cannot turn the prompt into token ids; call diffusion_decode(prompt=ids) instead"
        )
    return [int(i) for i in encode(prompt, chat=chat, system=system)]


def generate_diffusion(
    prompts: Sequence[Any],
    model: DiffusionModel,
    constraint: Mapping[str, Any],
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    sampler: Any,
    chat: bool | None,
    system: str | None,
    json_options: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> list[tuple[Any, str, DiffusionResult, int, float]]:
    """Decode every prompt with :func:`diffusion_decode`; return the parsed values.

    Parameters
    ----------
    prompts : sequence of str (or chat messages, when the model has a chat template)
        Each is encoded by ``model.encode_prompt`` and kept as a prefix that is never masked.
    model : DiffusionModel
        With ``vocabulary`` and ``encode_prompt`` (module docstring).
    constraint : mapping
        ``generate``'s ``schema``/``regex``/``grammar``/``choices`` keywords.
    max_tokens : int
        Output positions when ``length`` is not given, capped so that prompt and output fit
        in ``model.max_length`` when the model has one.
    temperature, seed
        As :func:`diffusion_decode`; prompt ``i`` of a batch uses ``seed + i``.
    sampler : str or None
        The method: ``None``/``"auto"`` (DINGO for a regular constraint, else LAVE),
        ``"dingo"``, ``"infill"`` or ``"lave"``.
    chat, system
        Passed to ``model.encode_prompt``.
    json_options : mapping, optional
        As ``generate``.
    options : mapping
        Any of :data:`DIFFUSION_OPTIONS`: ``length`` (output positions), ``block_size``
        (default: one block), ``steps`` (denoising steps per block; default one position per
        step), ``unmasking`` (``"confidence"``, ``"random"``, ``"left_to_right"``),
        ``num_candidates``, ``gaps``.

    Returns
    -------
    list of (value, text, DiffusionResult, prompt tokens, compile seconds)

    Raises
    ------
    TypeError
        For options that do not apply to diffusion models, or a model without
        ``vocabulary``/``encode_prompt``.
    ValueError
        For an unknown method or an output that cannot fit in the model.
    """
    unknown = sorted(set(options) - set(DIFFUSION_OPTIONS))
    if unknown:
        raise TypeError(
            f"unexpected keyword arguments {unknown} for a diffusion model; its options are "
            f"{', '.join(DIFFUSION_OPTIONS)} (and sampler= for the method)"
        )
    if sampler is not None and sampler not in _METHODS:
        raise ValueError(
            f"with a diffusion model, sampler= names the constrained method: one of "
            f"{', '.join(_METHODS)} (or None for 'auto'), got {sampler!r}"
        )
    method = cast(Method, "auto" if sampler is None else sampler)
    out = output_type(**constraint, json_options=json_options)
    t0 = time.perf_counter()
    compiled = _compile(model, out.grammar)
    compile_seconds = time.perf_counter() - t0
    results = []
    for i, prompt in enumerate(prompts):
        ids = _prompt_ids(model, prompt, chat, system)
        kw = dict(options)
        limit = getattr(model, "max_length", None)
        if "length" not in kw:
            kw["length"] = max_tokens if limit is None else min(max_tokens, limit - len(ids))
        if limit is not None and kw["length"] + len(ids) > limit:
            raise ValueError(
                f"the prompt ({len(ids)} tokens) and length={kw['length']} need more than the "
                f"model's {limit} positions: shorten the prompt or the length"
            )
        if kw["length"] < 1:
            raise ValueError(f"the prompt ({len(ids)} tokens) leaves no room for the output")
        res = diffusion_decode(
            model, compiled, method=method, temperature=temperature,
            seed=None if seed is None else seed + i, prompt=ids, **kw,
        )  # fmt: skip
        results.append((out.parse(res.text), res.text, res, len(ids), compile_seconds))
    return results
