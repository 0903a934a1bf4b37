"""The front door: ``constrain.generate(prompt, schema=Person)`` returns a ``Person``.

:func:`generate` resolves the constraint (:mod:`constrain.output`), compiles it for the model's
vocabulary (cached per model), decodes with the method ``sampler=`` names
(:mod:`constrain.decoding.registry`) and parses the text into the value asked for, validating
it once more independently of the automata. :func:`stream` yields the text as it is produced.
Both validate their options in one place, :class:`GenerationOptions`, and build the
constraint before loading a model, so a misuse fails at once.

No output is ever returned silently invalid: when ``max_tokens`` ends generation before the
grammar accepts, :class:`~constrain.IncompleteOutputError` carries the partial text.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from constrain.decoding.method import (
    DecodeJob,
    DecodingMethod,
    MethodOutcome,
    SamplingOptions,
    StreamingMethod,
)
from constrain.decoding.registry import resolve_method
from constrain.decoding.speculative import (
    DRAFTER_NAMES,
    SpeculativeMethod,
    SpeculativeSpec,
    resolve_drafters,
    speculative_target,
)
from constrain.diffusion.denoising import DiffusionModel
from constrain.diffusion.route import generate_diffusion
from constrain.errors import IncompleteOutputError
from constrain.frontends.json_schema.open_ends import open_ends
from constrain.frontends.pydantic import pydantic_schema
from constrain.integrations.progress import LOGGER, notice_kernel_compilation
from constrain.integrations.transformers import Model, load_model
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.output import DEFAULT_NUMBER_DIGITS, OutputType, output_type
from constrain.sampling import RandomStreams
from constrain.sampling.base import Sampler

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["GenerationOptions", "GenerationResult", "default_model", "generate", "stream"]

Message = Mapping[str, str]
Prompt = str | Sequence[Message]
Batch = list[str] | Sequence[Sequence[Message]]
"""A batch of prompts as the typed overloads of :func:`generate` see it (other sequences of
prompts work too, typed ``Any``)."""
ModelT = TypeVar("ModelT", bound="BaseModel")
SamplerSpec = str | Sampler | DecodingMethod | None
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')  # a JSON object key and its colon

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
    """``"stop"``: the model ended (EOS) or the grammar admits no continuation. ``"length"``:
    ``max_tokens`` ended generation where the grammar accepts, so the value is complete and
    valid but the model had not finished it (a warning on the ``"constrain"`` logger says so;
    raise ``max_tokens`` or bound the constraint if the value looks cut)."""
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


def _resolve_model(model: object) -> Model:
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


@dataclass(frozen=True)
class GenerationOptions:
    """The keyword options of :func:`generate` and :func:`stream`, validated in one place.

    The fields are the functions' keyword parameters (documented in :func:`generate`);
    ``sampler_options`` holds the further keyword arguments (a method's options).

    Raises
    ------
    TypeError
        If none of ``schema``, ``regex``, ``grammar`` and ``choices`` is given, or an option
        has the wrong type.
    ValueError
        If an option is out of range (``max_tokens`` or ``max_draft`` below 1, a negative or
        NaN ``temperature``, ``top_k`` below 0, ``top_p`` outside (0, 1]) or ``speculative``
        names an unknown drafter.
    """

    schema: Any = None
    regex: str | None = None
    grammar: str | Path | Grammar | None = None
    choices: Sequence[str] | None = None
    model: Model | DiffusionModel | str | os.PathLike[str] | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    sampler: SamplerSpec = None
    chat: bool | None = None
    system: str | None = None
    json_options: Mapping[str, Any] | None = None
    overlap: bool | None = None
    speculative: SpeculativeSpec = None
    max_draft: int = 8
    sampler_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if all(v is None for v in self.constraint.values()):
            raise TypeError("give one of schema=, regex=, grammar= or choices=")
        for name in ("max_tokens", "max_draft", "top_k", "seed"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool)) and not (
                name == "seed" and value is None
            ):
                raise TypeError(f"{name}= must be an int, got {value!r}")
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"{name}= must be a number, got {value!r}")
        for name, kind in (("chat", bool), ("overlap", bool), ("system", str)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"{name}= must be a {kind.__name__} or None, got {value!r}")
        if self.max_tokens < 1 or self.max_draft < 1:
            raise ValueError(
                f"max_tokens and max_draft must be at least 1, got {self.max_tokens} and "
                f"{self.max_draft}"
            )
        if math.isnan(self.temperature) or self.temperature < 0 or self.top_k < 0:
            raise ValueError(
                f"temperature must be >= 0 and top_k >= 0, got {self.temperature} and {self.top_k}"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        spec = self.speculative
        names = [spec] if isinstance(spec, str) else spec if isinstance(spec, Sequence) else []
        known = (*DRAFTER_NAMES, "all") if isinstance(spec, str) else DRAFTER_NAMES
        for item in names:
            if isinstance(item, str) and item.lower() not in known:
                raise ValueError(
                    f"unknown drafter {item!r}; choose from {', '.join(DRAFTER_NAMES)} or 'all'"
                )

    @property
    def constraint(self) -> dict[str, Any]:
        """The constraint keywords, as :func:`~constrain.output.output_type` takes them."""
        return {
            "schema": self.schema,
            "regex": self.regex,
            "grammar": self.grammar,
            "choices": self.choices,
        }

    @property
    def sampling(self) -> SamplingOptions:
        """``temperature``, ``top_k`` and ``top_p``, as a method's factory takes them."""
        return SamplingOptions(self.temperature, self.top_k, self.top_p)

    @property
    def is_diffusion(self) -> bool:
        """Whether ``model`` is a masked-diffusion model (:mod:`constrain.diffusion.route`)."""
        return isinstance(self.model, DiffusionModel)

    def method(self) -> DecodingMethod:
        """Return the decoding method ``sampler=`` and its options ask for.

        Raises
        ------
        TypeError
            For options the method does not take, or ``speculative=`` with a method other
            than the masked sampler.
        ValueError
            For an unknown method name or an option value out of range.
        """
        method = resolve_method(self.sampler, self.sampling, self.sampler_options)
        if self.speculative:
            speculative_target(method)
        return method


class _Prepared:
    """Everything a call needs before decoding: model, output type, the job and its method."""

    def __init__(self, prompt: Any, options: GenerationOptions, method: DecodingMethod) -> None:
        self.t0 = time.perf_counter()
        self.batch = _is_batch(prompt)
        prompts = list(prompt) if self.batch else [prompt]
        _check_prompts(prompts)
        self.options = options
        self.output = output_type(**options.constraint, json_options=options.json_options)
        model = _resolve_model(options.model)  # after every argument is checked
        self.model = model
        self.max_tokens = options.max_tokens
        notice_kernel_compilation()
        t1 = time.perf_counter()
        compiled = model.compile(self.output.grammar)
        self.compile_seconds = time.perf_counter() - t1
        matchers = [Matcher(compiled) for _ in prompts]
        chat, system = options.chat, options.system
        self.job = DecodeJob(
            model=model,
            prompts=prompts,
            prompt_ids=[model.encode_prompt(p, chat=chat, system=system) for p in prompts],
            matchers=matchers,
            compiled=compiled,
            output_kind=self.output.kind,
            max_tokens=options.max_tokens,
            sampling=options.sampling,
            generator=_generator(model, options.seed, len(prompts)),
            chat=chat,
            system=system,
            overlap=options.overlap,
        )
        self.method = method
        if options.speculative:
            drafters = resolve_drafters(model, options.speculative)
            self.method = SpeculativeMethod(speculative_target(method), drafters, options.max_draft)

    def results(self, outcome: MethodOutcome) -> list[GenerationResult]:
        """Parse and validate every row; raise IncompleteOutputError for rows cut short."""
        res = outcome.result
        prompt_ids = outcome.prompt_ids or self.job.prompt_ids
        out = []
        incomplete = []
        for i, tokens in enumerate(res.token_ids):
            text = self.model.vocabulary.decode(tokens).decode("utf-8", errors="replace")
            if outcome.complete is not None:
                done = outcome.complete[i]
            else:
                done = res.finish_reasons[i] == "stop" or self.job.matchers[i].is_accepting()
            if not done:
                incomplete.append((i, text))
                continue
            out.append(
                GenerationResult(
                    value=self.output.parse(text),
                    text=text,
                    finish_reason=res.finish_reasons[i],
                    prompt_tokens=len(prompt_ids[i]),
                    output_tokens=len(tokens),
                    seconds=time.perf_counter() - self.t0,
                    compile_seconds=self.compile_seconds,
                    log_weight=res.log_weights[i],
                    sampler=outcome.name,
                    details=None if outcome.details is None else outcome.details[i],
                )
            )
        if incomplete:
            rows = ", ".join(str(i) for i, _ in incomplete)
            where = f" (rows {rows} of {len(res.token_ids)})" if self.batch else ""
            first = incomplete[0][1]
            raise IncompleteOutputError(
                f"max_tokens={self.max_tokens} ended generation before the output was complete"
                f"{where}; it ends with {first[-60:]!r}. {self._open_hint(first)}",
                incomplete[0][1],
                dict(incomplete),
            )
        cut = [i for i, r in enumerate(out) if r.finish_reason == "length"]
        if cut:
            which = f"rows {', '.join(map(str, cut))}: " if self.batch else ""
            LOGGER.warning(
                "%sthe output is complete for the grammar but max_tokens=%d ended it, not the "
                "model (finish_reason 'length'); raise max_tokens if it looks cut",
                which,
                self.max_tokens,
            )
        return out

    def _open_hint(self, text: str) -> str:
        """Say how to bound the output: the open places of a schema, by JSON pointer.

        The places under the last key the partial ``text`` wrote come first (best effort).
        """
        if self.output.kind not in ("json", "pydantic", "type"):
            return "Raise max_tokens, or bound the repetitions of the regex or grammar."
        opts = dict(self.options.json_options or {})
        spots = open_ends(
            _json_schema(self.options.schema, self.output, opts),
            max_number_digits=opts.get("max_number_digits", DEFAULT_NUMBER_DIGITS),
        )
        if not spots:
            return "Raise max_tokens."
        keys = _KEY.findall(text)
        if keys:
            last = f"/properties/{keys[-1]}"
            spots.sort(key=lambda spot: last not in spot.partition(": ")[0])
        listed = "; ".join(spots[:6]) + ("; ..." if len(spots) > 6 else "")
        return f"Raise max_tokens, or bound what the schema leaves open: {listed}."


@overload
def generate(
    prompt: Prompt,
    *,
    schema: type[ModelT],
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
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> ModelT: ...


@overload
def generate(
    prompt: Batch,
    *,
    schema: type[ModelT],
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
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> list[ModelT]: ...


@overload
def generate(
    prompt: Prompt,
    *,
    schema: None = None,
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
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> str: ...


@overload
def generate(
    prompt: Batch,
    *,
    schema: None = None,
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
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> list[str]: ...


@overload
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
) -> Any: ...


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
        Most output tokens per prompt (default 512). An output it ends where the grammar
        accepts is returned with ``finish_reason="length"`` and a warning on the
        ``"constrain"`` logger; one it ends before raises :class:`IncompleteOutputError`.
    temperature, top_k, top_p : optional
        Sampling: ``temperature=0`` (default) is greedy.
    seed : int, optional
        Seed of the sampling generator (reproducible outputs).
    sampler : str or sampler object, optional
        How tokens are chosen (``docs/sampling.md``). ``None``: :class:`MaskedSampler` with
        ``temperature``/``top_k``/``top_p``. By a name registered in
        :mod:`constrain.decoding.registry`, with the method's options as further keyword
        arguments (e.g. ``sampler="smc", n_particles=8``): ``"greedy"``; ``"masked"``
        (mask and sample; temperature 1 unless given); ``"awrs"`` (adaptive weighted rejection
        sampling: checks a few tokens instead of the whole vocabulary); ``"smc"`` (sequential
        Monte Carlo over ``n_particles``, returns the particle drawn from the final weights);
        ``"asap"`` (grammar-aligned sampling; its trie of expected futures is kept across calls
        with the same model, grammar, prompt and ``max_tokens``, so repeated calls converge to
        the model's distribution conditioned on the grammar); ``"dccd"`` (an unconstrained
        draft first, then a constrained copy conditioned on it). Or an instance of
        :class:`~constrain.sampling.MaskedSampler`, ``AWRS``, ``SMC``, ``ASAp``, ``DCCD``, any
        object following the :class:`~constrain.sampling.Sampler` protocol (token-level) or
        the :class:`~constrain.decoding.method.DecodingMethod` protocol.
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
        output or ``"flexible"`` to let the model choose (bounded). ``max_number_digits``
        defaults to 15 here: a number the schema leaves unbounded is written plainly with at
        most 15 digits before and 15 after the point (listed in the grammar's warnings), so a
        greedy model cannot write digits until ``max_tokens``; ``None`` lifts it.
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
    **sampler_options
        The options of a method given by name (e.g. ``n_particles=8`` for ``"smc"``), or of a
        diffusion model.

    Returns
    -------
    value, list of values, GenerationResult or list of GenerationResult
        A pydantic model instance for ``schema=`` a model class, the JSON value or validated
        value for other schemas, a ``str`` for ``regex=``, ``grammar=`` and ``choices=``; a
        list of those for a list of prompts.

    Raises
    ------
    IncompleteOutputError
        If ``max_tokens`` ended generation before the grammar accepted (``.partial_text``).
    GrammarError, JsonSchemaError, CompileLimitError
        If the constraint cannot be compiled (with where and how to fix).
    OutputValidationError
        If the final, independent validation rejects an output (a bug in constrain).
    TypeError
        If no constraint is given, for options that do not apply (to the sampler, to a
        diffusion model) or misplaced ones, and for prompts of another type.
    ValueError
        For an unknown sampler or drafter name, an empty prompt list, or an option value out
        of range.
    ModelNotFoundError
        If ``model`` is a path with no model, or the default model's package is missing.
    """
    options = GenerationOptions(
        schema=schema, regex=regex, grammar=grammar, choices=choices, model=model,
        max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
        sampler=sampler, chat=chat, system=system, json_options=json_options, overlap=overlap,
        speculative=speculative, max_draft=max_draft, sampler_options=sampler_options,
    )  # fmt: skip
    if options.is_diffusion:
        results = _generate_diffusion(prompt, options)
        batch = _is_batch(prompt)
    else:
        prep = _Prepared(prompt, options, options.method())
        results = prep.results(prep.method.run_job(prep.job))
        batch = prep.batch
    values: list[Any] = results if return_info else [r.value for r in results]
    return values if batch else values[0]


def _json_schema(schema: Any, output: OutputType, opts: Mapping[str, Any]) -> Any:
    """Return the JSON Schema that ``output`` was built from (``schema=`` as output.py reads it)."""
    if output.kind != "json":
        return pydantic_schema(schema, extra_properties=bool(opts.get("extra_properties")))
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "true", "false")):
        return json.loads(schema)
    return json.loads(Path(schema).read_text(encoding="utf-8"))


def _generate_diffusion(prompt: Any, options: GenerationOptions) -> list[GenerationResult]:
    """``generate`` with a masked-diffusion model (:func:`generate_diffusion`)."""
    if options.top_k or options.top_p != 1.0 or options.overlap is not None or options.speculative:
        raise TypeError(
            "top_k, top_p, overlap and speculative do not apply to a diffusion model; its "
            "options are length, block_size, steps, unmasking, num_candidates and gaps"
        )
    assert isinstance(options.model, DiffusionModel)
    rows = list(prompt) if _is_batch(prompt) else [prompt]
    done = generate_diffusion(
        rows, options.model, options.constraint, max_tokens=options.max_tokens,
        temperature=options.temperature, seed=options.seed, sampler=options.sampler,
        chat=options.chat, system=options.system, json_options=options.json_options,
        options=options.sampler_options,
    )  # fmt: skip
    return [
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


def _generator(model: Model, seed: int | None, n: int) -> RandomStreams | None:
    # one random stream per request, keyed seed + k: independent of the batch around it
    return None if seed is None else RandomStreams.for_requests(seed, n, model.device)


def stream(
    prompt: Prompt,
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
    **sampler_options: Any,
) -> Iterator[str]:
    """Yield the output text of one prompt as it is produced (arguments as :func:`generate`).

    The pieces concatenate to the full output; a multi-byte character split across tokens is
    yielded once complete. The finished text is validated like :func:`generate`'s, and
    :class:`~constrain.IncompleteOutputError` is raised at the end if ``max_tokens`` cut it.
    Token-level samplers only (``"greedy"``, ``"masked"``, ``"awrs"`` or a
    :class:`~constrain.sampling.Sampler`): SMC, ASAp and DCCD choose the output at the end.

    Raises
    ------
    TypeError
        For a batch of prompts, a diffusion model, a method that is not token-level, and as
        :func:`generate`.
    IncompleteOutputError, OutputValidationError, GrammarError, ValueError
        As :func:`generate`.
    """
    if _is_batch(prompt):
        raise TypeError("stream() takes one prompt; use generate() for a batch")
    options = GenerationOptions(
        schema=schema, regex=regex, grammar=grammar, choices=choices, model=model,
        max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
        sampler=sampler, chat=chat, system=system, json_options=json_options, overlap=overlap,
        speculative=speculative, max_draft=max_draft, sampler_options=sampler_options,
    )  # fmt: skip
    if options.is_diffusion:
        raise TypeError("stream() needs an autoregressive model; use generate() for diffusion")
    method = options.method()
    if not isinstance(method, StreamingMethod):
        raise TypeError(
            f"stream() needs a token-level sampler; {method.name!r} picks its output only at "
            "the end: use generate()"
        )
    prep = _Prepared(prompt, options, method)
    assert isinstance(prep.method, StreamingMethod)
    steps = prep.method.steps(prep.job)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    vocab = prep.model.vocabulary
    try:
        while True:
            try:
                _rows, tokens = next(steps)
            except StopIteration as done:
                outcome = MethodOutcome(done.value, prep.method.name)
                break
            first = tokens[0]
            piece = decoder.decode(vocab.decode(first if isinstance(first, list) else [first]))
            if piece:
                yield piece
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
        prep.results(outcome)  # raises IncompleteOutputError / OutputValidationError
    finally:
        steps.close()
