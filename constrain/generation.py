"""The front door: ``constrain.generate(prompt, schema=Person)`` returns a ``Person``.

:func:`generate` resolves the constraint (:mod:`constrain.output`), compiles it for the model's
vocabulary (cached per model), decodes with a sampler (:mod:`constrain.sampling`,
:mod:`constrain.decoding`) and parses the text into the value asked for, validating it once more
independently of the automata. :func:`stream` yields the text as it is produced.

No output is ever returned silently invalid: when ``max_tokens`` ends generation before the
grammar accepts, :class:`~constrain.IncompleteOutputError` carries the partial text.
"""

from __future__ import annotations

import codecs
import functools
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from constrain.decoding.asap import ASAp
from constrain.decoding.autoregressive import DecodeResult, iter_decode
from constrain.decoding.dccd import DCCD
from constrain.decoding.drafters import (
    Drafter,
    EarlyExitDrafter,
    GrammarDrafter,
    PromptLookupDrafter,
    TokenText,
)
from constrain.decoding.smc import SMC
from constrain.decoding.speculative import SpeculativeResult, iter_speculative_decode
from constrain.diffusion.denoising import DiffusionModel
from constrain.diffusion.route import generate_diffusion
from constrain.errors import IncompleteOutputError
from constrain.integrations.transformers import Model, load_model
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.output import OutputType, output_type
from constrain.sampling.awrs import AWRS
from constrain.sampling.base import Sampler
from constrain.sampling.masked import MaskedSampler

__all__ = ["GenerationResult", "default_model", "generate", "stream"]

Message = Mapping[str, str]
Prompt = str | Sequence[Message]

_DEFAULT: list[Model] = []
_DEFAULT_LOCK = threading.Lock()


def default_model() -> Model:
    """Return the embedded default model (SmolLM2-135M-Instruct), loaded once per process."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(load_model())
        return _DEFAULT[0]


@dataclass(frozen=True)
class GenerationResult:
    """One output of :func:`generate` with ``return_info=True``."""

    value: Any
    """What ``generate`` returns without ``return_info`` (a model instance, JSON value, str)."""
    text: str
    """The generated text, exactly as the grammar saw it."""
    finish_reason: str
    """``"stop"``: the model ended (EOS) or the grammar admits no continuation."""
    prompt_tokens: int
    output_tokens: int
    seconds: float
    """Wall time of the whole call (compile, prefill, decoding, parsing)."""
    compile_seconds: float
    """Time spent compiling the constraint (a cache lookup, well under a millisecond, when the
    model's compiler has seen the same grammar before)."""
    log_weight: float
    """The sampler's log-weight of the output. :class:`~constrain.sampling.MaskedSampler` and
    :class:`~constrain.sampling.AWRS`: the (estimated) log-probability the model gave to the
    grammar's allowed tokens along the output; SMC: the run's log marginal-likelihood estimate;
    ASAp: ``log P(y) - log Q(y)``."""
    sampler: str = "masked"
    """Which method produced the output (``"masked"``, ``"awrs"``, ``"smc"``, ``"asap"``,
    ``"dccd"`` or the class name of a custom sampler)."""
    details: Any = None
    """Method-specific record: the :class:`~constrain.sampling.SMCResult` (all weighted
    particles), the :class:`~constrain.sampling.ASApSample`, or the DCCD
    :class:`~constrain.sampling.DraftInfo` (the draft text and its likelihood)."""

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of wall time."""
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def _resolve_model(model: Model | str | os.PathLike[str] | None) -> Model:
    if model is None:
        return default_model()
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    raise TypeError(
        f"model= must be a constrain Model (constrain.load_model(path)), a path or None, "
        f"got {type(model).__name__}"
    )


def _is_batch(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return False
    if isinstance(prompt, Sequence) and not prompt:
        raise ValueError(
            "empty prompt list: pass a str, a list of chat messages, or a non-empty list of prompts"
        )
    if isinstance(prompt, Sequence) and not isinstance(prompt[0], Mapping):
        return True
    return False


SamplerSpec = Sampler | SMC | ASAp | DCCD | str | None
_SAMPLER_NAMES = ("greedy", "masked", "awrs", "smc", "asap", "dccd")


def _make_sampler(
    sampler: SamplerSpec,
    temperature: float,
    top_k: int,
    top_p: float,
    options: Mapping[str, Any],
) -> Sampler | SMC | ASAp | DCCD:
    """Resolve ``generate``'s ``sampler=`` (an object, a method name or None) into an object."""
    if not isinstance(sampler, str):
        if options:
            raise TypeError(
                f"unexpected keyword arguments {sorted(options)}: options by keyword only apply "
                f"with a sampler given by name (sampler={_SAMPLER_NAMES})"
            )
        if sampler is None:
            return MaskedSampler(temperature, top_k=top_k, top_p=top_p)
        return sampler
    name = sampler.lower()
    sampling_t = temperature if temperature > 0 else 1.0  # a sampling method samples
    try:
        if name == "greedy":
            return MaskedSampler(0.0, **options)
        if name == "masked":
            return MaskedSampler(sampling_t, top_k=top_k, top_p=top_p, **options)
        if name == "awrs":
            return AWRS(sampling_t, **options)
        if name == "smc":
            return SMC(**options)
        if name == "asap":
            return ASAp(**{"temperature": sampling_t, **options})
        if name == "dccd":
            return DCCD(**options)
    except TypeError as err:
        raise TypeError(f"sampler={sampler!r}: {err}") from err
    raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(_SAMPLER_NAMES)}")


def _method_name(sampler: object) -> str:
    names = {MaskedSampler: "masked", AWRS: "awrs", SMC: "smc", ASAp: "asap", DCCD: "dccd"}
    return names.get(type(sampler), type(sampler).__name__)


# ASAp's trie only helps across calls: sampler="asap" keeps one per (model, grammar, prompt,
# max_tokens, temperature), the most recent ones.
_ASAP_CACHE: OrderedDict[tuple[Any, ...], ASAp] = OrderedDict()
_ASAP_CACHE_SIZE = 32


def _asap_for(key: tuple[Any, ...], fresh: ASAp) -> ASAp:
    found = _ASAP_CACHE.get(key)
    if found is None:
        _ASAP_CACHE[key] = found = fresh
        while len(_ASAP_CACHE) > _ASAP_CACHE_SIZE:
            _ASAP_CACHE.popitem(last=False)
    _ASAP_CACHE.move_to_end(key)
    return found


SpeculativeSpec = bool | str | Drafter | Sequence[str | Drafter] | None
_DRAFTER_NAMES = ("grammar", "lookup", "early_exit")
# per model: the style of tokens it emits, learned (weak keys: an id() key could be reused by
# another model after this one is freed, with another vocabulary)
_TOKEN_TEXT: weakref.WeakKeyDictionary[Model, TokenText] = weakref.WeakKeyDictionary()


def _drafters(model: Model, spec: SpeculativeSpec) -> list[Drafter]:
    """Resolve ``generate``'s ``speculative=`` into drafters (``True``/``"all"``: all three)."""
    if spec is None or spec is False:
        return []
    items: list[str | Drafter]
    if spec is True:
        items = list(_DRAFTER_NAMES)
    elif isinstance(spec, str):
        items = list(_DRAFTER_NAMES) if spec.lower() == "all" else [spec]
    elif isinstance(spec, Sequence):
        items = list(spec)
    else:
        items = [spec]
    text = _TOKEN_TEXT.get(model)
    if text is None:
        tok = model.tokenizer

        def encode(t: str) -> list[int]:
            return [int(i) for i in tok(t, add_special_tokens=False)["input_ids"]]

        text = _TOKEN_TEXT[model] = TokenText(model.vocabulary, encode)
    out: list[Drafter] = []
    for item in items:
        if not isinstance(item, str):
            out.append(item)
            continue
        name = item.lower()
        if name == "grammar":
            out.append(GrammarDrafter(model.vocabulary, text=text))
        elif name == "lookup":
            out.append(PromptLookupDrafter(model.vocabulary, text=text))
        elif name == "early_exit":
            out.append(EarlyExitDrafter(model))
        else:
            raise ValueError(
                f"unknown drafter {item!r}; choose from {', '.join(_DRAFTER_NAMES)}, 'all', "
                "or pass Drafter objects (constrain.decoding.drafters)"
            )
    return out


def _speculative_target(chosen: object) -> MaskedSampler:
    if not isinstance(chosen, MaskedSampler):
        raise TypeError(
            f"speculative= works with the masked sampler (greedy or sampling), not "
            f"{_method_name(chosen)!r}: speculation reproduces the locally masked distribution; "
            "SMC, ASAp, AWRS and DCCD run without it"
        )
    return chosen


def _spec_steps(
    prep: _Prepared,
    drafters: list[Drafter],
    target: MaskedSampler,
    max_tokens: int,
    generator: torch.Generator | None,
    max_draft: int,
) -> Generator[tuple[list[int], list[list[int]]], None, SpeculativeResult]:
    return iter_speculative_decode(
        prep.model.start(prep.prompt_ids),
        prep.matchers,
        drafters,
        prompts=prep.prompt_ids,
        eos_ids=prep.model.eos_ids,
        max_tokens=max_tokens,
        max_draft=max_draft,
        temperature=target.temperature,
        top_k=target.top_k,
        top_p=target.top_p,
        generator=generator,
        pad_id=prep.model.pad_id,
        backend=target.backend,
    )


def _check_prompts(prompts: Sequence[Any]) -> None:
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            continue
        if isinstance(p, Sequence) and all(isinstance(m, Mapping) for m in p):
            continue
        raise TypeError(
            f"prompt {i} must be a str or a list of chat messages "
            f"({{'role': ..., 'content': ...}}), got {type(p).__name__}"
        )


class _Prepared:
    """Everything a call needs before decoding: model, output type, prompts, matchers."""

    def __init__(
        self,
        prompt: Any,
        constraint: dict[str, Any],
        model: Model | str | os.PathLike[str] | None,
        chat: bool | None,
        system: str | None,
        json_options: Mapping[str, Any] | None,
    ) -> None:
        self.t0 = time.perf_counter()
        self.batch = _is_batch(prompt)
        prompts = list(prompt) if self.batch else [prompt]
        _check_prompts(prompts)
        self.model = _resolve_model(model)
        self.output: OutputType | None = None
        self.compile_seconds = 0.0
        self.prompts = prompts
        self.chat, self.system = chat, system
        self.compiled: Any = None
        self.matchers: list[Matcher | None]
        if any(v is not None for v in constraint.values()):
            self.output = output_type(**constraint, json_options=json_options)
            t1 = time.perf_counter()
            self.compiled = self.model.compile(self.output.grammar)
            self.compile_seconds = time.perf_counter() - t1
            self.matchers = [Matcher(self.compiled) for _ in prompts]
        elif json_options:
            raise TypeError("json_options only apply with schema=")
        else:
            self.matchers = [None for _ in prompts]
        self.prompt_ids = [self.model.encode_prompt(p, chat=chat, system=system) for p in prompts]

    def text_of(self, tokens: list[int]) -> str:
        return self.model.vocabulary.decode(tokens).decode("utf-8", errors="replace")

    def results(
        self,
        res: DecodeResult,
        max_tokens: int,
        *,
        method: str = "masked",
        complete: Sequence[bool] | None = None,
        details: Sequence[Any] | None = None,
    ) -> list[GenerationResult]:
        """Parse and validate every row; raise IncompleteOutputError for rows cut short.

        ``complete[i]`` says whether row ``i``'s output is a sentence of the grammar (default:
        it ended with EOS, or its matcher accepts).
        """
        out = []
        incomplete = []
        for i, tokens in enumerate(res.token_ids):
            text = self.text_of(tokens)
            m = self.matchers[i]
            if complete is not None:
                done = complete[i]
            else:
                done = res.finish_reasons[i] == "stop" or m is None or m.is_accepting()
            if not done:
                incomplete.append((i, text))
                continue
            value = self.output.parse(text) if self.output is not None else text
            out.append(
                GenerationResult(
                    value=value,
                    text=text,
                    finish_reason=res.finish_reasons[i],
                    prompt_tokens=len(self.prompt_ids[i]),
                    output_tokens=len(tokens),
                    seconds=time.perf_counter() - self.t0,
                    compile_seconds=self.compile_seconds,
                    log_weight=res.log_weights[i],
                    sampler=method,
                    details=None if details is None else details[i],
                )
            )
        if incomplete:
            rows = ", ".join(str(i) for i, _ in incomplete)
            where = f" (rows {rows} of {len(res.token_ids)})" if self.batch else ""
            err = IncompleteOutputError(
                f"max_tokens={max_tokens} ended generation before the output was complete"
                f"{where}; raise max_tokens, or bound the output in the schema (maxLength, "
                "maxItems) or the grammar",
                incomplete[0][1],
            )
            err.partial_texts = {i: t for i, t in incomplete}  # type: ignore[attr-defined]
            raise err
        return out


def generate(
    prompt: Prompt | Sequence[Prompt],
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: str | Path | Grammar | None = None,
    choices: Sequence[str] | None = None,
    model: Model | DiffusionModel | str | os.PathLike[str] | None = None,
    max_tokens: int = 512,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    return_info: bool = False,
    **sampler_options: Any,
) -> Any:
    """Generate text that follows a schema, regex, grammar or list of choices; return its value.

    Parameters
    ----------
    prompt : str, list of chat messages, or a list of those
        One prompt, or a batch (a list of prompts: a list of results, generated as one batch).
        Chat models get their chat template applied.
    schema : pydantic model class, type, dict, JSON text or path, optional
        Returns a validated model instance, the validated value of a ``TypeAdapter`` type, or
        the parsed JSON value of a JSON Schema.
    regex : str, optional
        Returns a string that fully matches the Python regular expression.
    grammar : str, Path or Grammar, optional
        A shipped grammar by name (``"sql"``, ``"json"``, ...), a ``.lark`` path, Lark text or a
        :class:`~constrain.Grammar`. Returns the string.
    choices : sequence of str, optional
        Returns one of the strings.
    model : Model, DiffusionModel, path or None, optional
        ``None``: the embedded default model (SmolLM2-135M-Instruct, loaded once). A path is
        loaded with :func:`constrain.load_model` (prefer loading once yourself). A
        masked-diffusion model (a :class:`~constrain.decoding.DiffusionModel` with
        ``vocabulary`` and ``encode_prompt``, e.g.
        :func:`constrain.models.tiny_diffusion.load_tiny_diffusion` or
        :class:`~constrain.integrations.diffusion.HFMaskedLM`) is decoded by
        :func:`~constrain.decoding.diffusion_decode` (:mod:`constrain.diffusion.route`):
        the prompt is a prefix that is never masked, ``max_tokens`` output positions follow
        (capped by the model's ``max_length``), ``sampler=`` names the method (``None`` or
        ``"auto"``, ``"dingo"``, ``"infill"``, ``"lave"``) and the keyword options are
        ``length``, ``block_size``, ``steps``, ``unmasking``, ``num_candidates`` and ``gaps``.
        ``GenerationResult.details`` is the :class:`~constrain.decoding.DiffusionResult`;
        ``log_weight`` is NaN (not computed).
    max_tokens : int, optional
        Most output tokens per prompt (default 512).
    temperature, top_k, top_p : optional
        Sampling: ``temperature=0`` (default) is greedy.
    seed : int, optional
        Seed of the sampling generator (reproducible outputs).
    sampler : str or sampler object, optional
        How tokens are chosen (``docs/sampling.md``). ``None``: :class:`MaskedSampler` with
        ``temperature``/``top_k``/``top_p``. By name, with the method's options as further
        keyword arguments (e.g. ``sampler="smc", n_particles=8``): ``"greedy"``; ``"masked"``
        (mask and sample; temperature 1 unless given); ``"awrs"`` (adaptive weighted rejection
        sampling: checks a few tokens instead of the whole vocabulary); ``"smc"`` (sequential
        Monte Carlo over ``n_particles``, returns the particle drawn from the final weights);
        ``"asap"`` (grammar-aligned sampling; its trie of expected futures is kept across calls
        with the same model, grammar, prompt and ``max_tokens``, so repeated calls converge to
        the model's distribution conditioned on the grammar); ``"dccd"`` (an unconstrained
        draft first, then a constrained copy conditioned on it). Or an instance of
        :class:`~constrain.sampling.MaskedSampler`, ``AWRS``, ``SMC``, ``ASAp``, ``DCCD`` or any
        object following the :class:`~constrain.sampling.Sampler` protocol.
    chat : bool, optional
        Apply the chat template (default: when the tokenizer has one).
    system : str, optional
        System message (chat only).
    json_options : mapping, optional
        Options of :meth:`Grammar.from_json_schema` (``whitespace``, ``any_order``, ...).
        ``python_compatible`` defaults to True here, since the output is parsed by Python:
        integers are written plainly (``10``, never ``10.00``, which ``json.loads`` would make
        a float). ``whitespace`` defaults to ``"spaced"`` here (``", "`` and ``": "`` separators, as
        ``json.dumps`` writes): models write JSON with spaces, and forbidding them costs
        accuracy (``docs/sampling.md``); pass ``{"whitespace": "compact"}`` for the shortest
        output or ``"flexible"`` to let the model choose (bounded).
    overlap : bool, optional
        Compute the next mask while the forward pass runs (default: when the model is on a GPU).
    speculative : bool, str, Drafter or list of those, optional
        Speculative decoding (:mod:`constrain.decoding.speculative`), exact: the output has the
        distribution of plain masked decoding (greedy: the same output). ``True`` or ``"all"``:
        the grammar's forced text (jump-forward), prompt lookup and early-exit self-drafting;
        or any of ``"grammar"``, ``"lookup"``, ``"early_exit"`` and
        :mod:`~constrain.decoding.drafters` objects (e.g. a ``DraftModelDrafter``), chained in
        order. Only with the masked sampler (the default, ``"greedy"`` or ``"masked"``).
        ``GenerationResult.details`` holds the speculation counters.
    max_draft : int, optional
        Most draft tokens per row and forward pass (default 8).
    return_info : bool, optional
        Return :class:`GenerationResult` objects (value, text, finish reason, token counts,
        time, log-weight) instead of bare values.

    Returns
    -------
    value, list of values, GenerationResult or list of GenerationResult

    Raises
    ------
    IncompleteOutputError
        If ``max_tokens`` ended generation before the grammar accepted (``.partial_text``).
    GrammarError, JsonSchemaError, CompileLimitError
        If the constraint cannot be compiled (with where and how to fix).
    OutputValidationError
        If the final, independent validation rejects an output (a bug in constrain).
    """
    constraint = {"schema": schema, "regex": regex, "grammar": grammar, "choices": choices}
    if all(v is None for v in constraint.values()):
        raise TypeError("give one of schema=, regex=, grammar= or choices=")
    if isinstance(model, DiffusionModel):
        if top_k or top_p != 1.0 or overlap is not None or speculative:
            raise TypeError(
                "top_k, top_p, overlap and speculative do not apply to a diffusion model; its "
                "options are length, block_size, steps, unmasking, num_candidates and gaps"
            )
        rows = list(prompt) if _is_batch(prompt) else [prompt]
        done = generate_diffusion(
            rows, model, constraint, max_tokens=max_tokens, temperature=temperature,
            seed=seed, sampler=sampler, chat=chat, system=system, json_options=json_options,
            options=sampler_options,
        )  # fmt: skip
        infos = [
            GenerationResult(
                value=value,
                text=text,
                finish_reason="stop",
                prompt_tokens=n_prompt,
                output_tokens=len(res.output_ids),
                seconds=res.seconds,
                compile_seconds=compile_s,
                log_weight=float("nan"),
                sampler=res.method,
                details=res,
            )
            for value, text, res, n_prompt, compile_s in done
        ]
        found: list[Any] = infos if return_info else [r.value for r in infos]
        return found if _is_batch(prompt) else found[0]
    chosen = _make_sampler(sampler, temperature, top_k, top_p, sampler_options)
    if speculative:
        _speculative_target(chosen)
    prep = _Prepared(prompt, constraint, model, chat, system, json_options)
    gen = _generator(prep.model, seed)
    method = _method_name(chosen)
    if speculative:
        drafters = _drafters(prep.model, speculative)
        steps = _spec_steps(prep, drafters, _speculative_target(chosen), max_tokens, gen, max_draft)
        res = _drain(steps)
        stats = res.stats.as_dict()
        results = prep.results(
            res, max_tokens, method=f"{method}+speculative", details=[stats] * len(prep.prompts)
        )
    elif isinstance(chosen, SMC):
        results = _run_smc(prep, chosen, max_tokens, gen)
    elif isinstance(chosen, ASAp):
        results = _run_asap(prep, chosen, max_tokens, gen, fresh=isinstance(sampler, str))
    elif isinstance(chosen, DCCD):
        inner = MaskedSampler(temperature, top_k=top_k, top_p=top_p)
        results = _run_dccd(prep, chosen, inner, max_tokens, gen, overlap)
    else:
        res = _run(prep, max_tokens, chosen, gen, overlap)
        results = prep.results(res, max_tokens, method=method)
    values: list[Any] = results if return_info else [r.value for r in results]
    return values if prep.batch else values[0]


def _generator(model: Model, seed: int | None) -> torch.Generator | None:
    if seed is None:
        return None
    gen = torch.Generator(device=model.device)
    gen.manual_seed(seed)
    return gen


def _steps(
    prep: _Prepared,
    max_tokens: int,
    sampler: Sampler,
    generator: torch.Generator | None,
    overlap: bool | None,
) -> Generator[tuple[list[int], list[int]], None, DecodeResult]:
    """Return the decoding loop of a prepared call (:func:`iter_decode`'s generator)."""
    return iter_decode(
        prep.model.start(prep.prompt_ids),
        prep.matchers,
        sampler,
        eos_ids=prep.model.eos_ids,
        max_tokens=max_tokens,
        pad_id=prep.model.pad_id,
        generator=generator,
        overlap=overlap,
    )


def _drain(steps: Generator[Any, None, Any]) -> Any:
    """Run a decoding generator to the end; return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def _run(
    prep: _Prepared,
    max_tokens: int,
    sampler: Sampler,
    generator: torch.Generator | None,
    overlap: bool | None,
) -> DecodeResult:
    result: DecodeResult = _drain(_steps(prep, max_tokens, sampler, generator, overlap))
    return result


def _needs_grammar(prep: _Prepared, name: str) -> None:
    if prep.compiled is None:
        raise TypeError(
            f"sampler {name!r} needs a constraint (schema=, regex=, grammar= or choices=)"
        )


def _run_smc(
    prep: _Prepared, smc: SMC, max_tokens: int, generator: torch.Generator | None
) -> list[GenerationResult]:
    """One SMC run per prompt, all prompts' particles in one batched session."""
    _needs_grammar(prep, "smc")
    n = smc.n_particles
    rows = [ids for ids in prep.prompt_ids for _ in range(n)]
    matchers = [m for m in prep.matchers if m is not None]
    runs = smc.run_batch(
        prep.model.start(rows),
        matchers,
        eos_ids=prep.model.eos_ids,
        max_tokens=max_tokens,
        pad_id=prep.model.pad_id,
        generator=generator,
    )
    tokens, reasons, weights, complete = [], [], [], []
    for run in runs:
        if run.chosen is None:  # every particle ruled out: report the longest as partial
            best = max(range(len(run.token_ids)), key=lambda j: len(run.token_ids[j]))
            tokens.append(run.token_ids[best])
            reasons.append("length")
            weights.append(float("-inf"))
            complete.append(False)
            continue
        tokens.append(run.token_ids[run.chosen])
        reasons.append("stop")
        weights.append(run.log_marginal_likelihood)
        complete.append(True)
    res = DecodeResult(token_ids=tokens, finish_reasons=reasons, log_weights=weights)
    return prep.results(res, max_tokens, method="smc", complete=complete, details=runs)


def _run_asap(
    prep: _Prepared,
    asap: ASAp,
    max_tokens: int,
    generator: torch.Generator | None,
    *,
    fresh: bool,
) -> list[GenerationResult]:
    """One ASAp sample per prompt; by name, the trie is cached per (model, grammar, prompt)."""
    _needs_grammar(prep, "asap")
    tokens, reasons, weights, complete, details = [], [], [], [], []
    for ids, m in zip(prep.prompt_ids, prep.matchers, strict=True):
        assert m is not None
        key = (tuple(ids),)
        sampler = asap
        if fresh:
            cache_key = (id(prep.model), prep.compiled, tuple(ids), max_tokens, asap.temperature)
            sampler = _asap_for(cache_key, asap)
        (got,) = sampler.sample(
            functools.partial(prep.model.start, [ids]),
            m,
            max_tokens=max_tokens,
            n=1,
            eos_ids=prep.model.eos_ids,
            generator=generator,
            key=key,
        )
        tokens.append(list(got.token_ids))
        reasons.append(got.finish_reason)
        weights.append(got.log_weight)
        complete.append(got.finish_reason == "stop")
        details.append(got)
    res = DecodeResult(token_ids=tokens, finish_reasons=reasons, log_weights=weights)
    return prep.results(res, max_tokens, method="asap", complete=complete, details=details)


def _run_dccd(
    prep: _Prepared,
    dccd: DCCD,
    inner: Sampler,
    max_tokens: int,
    generator: torch.Generator | None,
    overlap: bool | None,
) -> list[GenerationResult]:
    """Draft every prompt (one batch), then decode the structurer prompts constrained."""
    _needs_grammar(prep, "dccd")
    fmt = (
        "JSON"
        if prep.output is not None and prep.output.kind in ("json", "pydantic", "type")
        else "answer"
    )
    pairs = dccd.prepare(
        prep.model,
        prep.prompts,
        chat=prep.chat,
        system=prep.system,
        generator=generator,
        format=fmt,
    )
    prep.prompt_ids = [ids for ids, _ in pairs]
    res = _run(prep, max_tokens, inner, generator, overlap)
    return prep.results(res, max_tokens, method="dccd", details=[info for _, info in pairs])


def stream(
    prompt: Prompt,
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: str | Path | Grammar | None = None,
    choices: Sequence[str] | None = None,
    model: Model | str | os.PathLike[str] | None = None,
    max_tokens: int = 512,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    **sampler_options: Any,
) -> Iterator[str]:
    """Yield the output text of one prompt as it is produced (arguments as :func:`generate`).

    The pieces concatenate to the full output; a multi-byte character split across tokens is
    yielded once complete. The finished text is validated like :func:`generate`'s, and
    :class:`~constrain.IncompleteOutputError` is raised at the end if ``max_tokens`` cut it.
    Token-level samplers only (``"greedy"``, ``"masked"``, ``"awrs"`` or a
    :class:`~constrain.sampling.Sampler`): SMC and ASAp choose the output at the end.
    """
    if _is_batch(prompt):
        raise TypeError("stream() takes one prompt; use generate() for a batch")
    if isinstance(model, DiffusionModel):
        raise TypeError("stream() needs an autoregressive model; use generate() for diffusion")
    constraint = {"schema": schema, "regex": regex, "grammar": grammar, "choices": choices}
    if all(v is None for v in constraint.values()):
        raise TypeError("give one of schema=, regex=, grammar= or choices=")
    chosen = _make_sampler(sampler, temperature, top_k, top_p, sampler_options)
    if isinstance(chosen, (SMC, ASAp, DCCD)):
        raise TypeError(
            f"stream() needs a token-level sampler; {_method_name(chosen)!r} picks its output "
            "only at the end: use generate()"
        )
    target = _speculative_target(chosen) if speculative else None
    prep = _Prepared(prompt, constraint, model, chat, system, json_options)
    gen = _generator(prep.model, seed)
    steps: Generator[Any, None, DecodeResult]
    if target is not None:
        drafters = _drafters(prep.model, speculative)
        steps = _spec_steps(prep, drafters, target, max_tokens, gen, max_draft)
    else:
        steps = _steps(prep, max_tokens, chosen, gen, overlap)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    vocab = prep.model.vocabulary
    try:
        while True:
            try:
                step: Any = next(steps)
            except StopIteration as done:
                result: DecodeResult = done.value
                break
            first: Any = step[1][0]
            got: list[int] = first if isinstance(first, list) else [int(first)]
            piece = decoder.decode(vocab.decode(got))
            if piece:
                yield piece
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
        prep.results(
            result, max_tokens, method=_method_name(chosen)
        )  # raises IncompleteOutputError / OutputValidationError
    finally:
        steps.close()
