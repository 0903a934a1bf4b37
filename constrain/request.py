"""One ``generate`` or ``stream`` call, prepared: options checked, constraint built, job made.

:class:`GenerationOptions` validates the keywords of :func:`constrain.generate` and
:func:`constrain.stream` in one place; :class:`PreparedCall` resolves the model, builds the
constraint's :class:`~constrain.output.OutputType` (or, with ``tools=``, the tool calls' one,
:mod:`constrain.tools`), compiles it, encodes the prompts and turns the decoded rows into
:class:`GenerationResult` s, raising :class:`~constrain.IncompleteOutputError` for rows that
``max_tokens`` cut before the grammar accepted.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from constrain.decoding.autoregressive import TokenMethod
from constrain.decoding.method import DecodeJob, DecodingMethod, MethodOutcome, SamplingOptions
from constrain.decoding.registry import resolve_method
from constrain.decoding.speculative import (
    DRAFTER_NAMES,
    SpeculativeMethod,
    SpeculativeSpec,
    resolve_drafters,
    speculative_target,
)
from constrain.diffusion.denoising import DiffusionModel
from constrain.errors import IncompleteOutputError
from constrain.frontends.json_schema.open_ends import open_ends
from constrain.frontends.pydantic import pydantic_schema
from constrain.integrations.progress import LOGGER, notice_kernel_compilation
from constrain.integrations.transformers import Model, load_model
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.output import DEFAULT_NUMBER_DIGITS, OutputType, output_type
from constrain.reasoning import Reasoning, plan_reasoning, read_reasoning, reasoning_output
from constrain.sampling import RandomStreams
from constrain.sampling.base import Sampler
from constrain.tools import (
    TOOL_FORMATS,
    AssistantMessage,
    ToolChoice,
    detect_tool_format,
    tool_output,
    tool_structural_tag,
    tool_system_prompt,
)
from constrain.vocab.grammar_specials import special_chars

__all__ = [
    "GenerationOptions",
    "GenerationResult",
    "PreparedCall",
    "SamplerSpec",
    "TOOL_JSON_OPTIONS",
    "default_model",
    "is_batch",
]

SamplerSpec = str | Sampler | DecodingMethod | None

TOOL_JSON_OPTIONS = ("max_items", "max_length")
"""The ``json_options`` keys that apply with ``tools=``."""

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
    reasoning: str | None = None
    """The reasoning written before the answer, without its markers (``reasoning=``;
    ``None``: no reasoning block)."""
    token_ids: tuple[int, ...] = ()
    """The output's token ids (EOS included when the model wrote it)."""

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of wall time."""
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0


def resolve_model(model: object) -> Model:
    """Return the model ``model=`` names: the default one, a loaded one or one from a path."""
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


def is_batch(prompt: Any) -> bool:
    """Return whether ``prompt`` is a list of prompts (not one str or one chat)."""
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
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    canonical: bool = False
    seed: int | None = None
    sampler: SamplerSpec = None
    chat: bool | None = None
    system: str | None = None
    json_options: Mapping[str, Any] | None = None
    overlap: bool | None = None
    speculative: SpeculativeSpec = None
    max_draft: int = 8
    tools: Sequence[Any] | None = None
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    tool_format: str | None = None
    reasoning: bool | Reasoning | None = None
    sampler_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        given = [k for k, v in self.constraint.items() if v is not None]
        if self.tools is not None:
            if given:
                raise TypeError(
                    f"tools= is a constraint of its own: give it without {given[0]}= (a tool's "
                    "arguments already follow its schema)"
                )
            self._check_tools()
        elif not given:
            raise TypeError("give one of schema=, regex=, grammar=, choices= or tools=")
        for name in ("max_tokens", "max_draft", "top_k", "seed"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool)) and not (
                name == "seed" and value is None
            ):
                raise TypeError(f"{name}= must be an int, got {value!r}")
        for name in ("temperature", "top_p", "frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"{name}= must be a number, got {value!r}")
        for name in ("frequency_penalty", "presence_penalty"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)}")
        if self.reasoning is not None and not isinstance(self.reasoning, (bool, Reasoning)):
            raise TypeError(
                "reasoning= must be a bool, a constrain.reasoning.Reasoning or None, got "
                f"{self.reasoning!r}"
            )
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

    def _check_tools(self) -> None:
        """Check ``tools``, ``tool_choice`` and ``tool_format`` before any model is loaded."""
        if isinstance(self.tools, (str, Mapping)) or not isinstance(self.tools, Sequence):
            raise TypeError(f"tools= must be a list of tools, got {type(self.tools).__name__}")
        if self.tool_format is not None and self.tool_format not in TOOL_FORMATS:
            raise ValueError(
                f"unknown tool_format {self.tool_format!r}; choose from {', '.join(TOOL_FORMATS)}"
            )
        if not isinstance(self.parallel_tool_calls, bool):
            raise TypeError(
                f"parallel_tool_calls= must be a bool, got {self.parallel_tool_calls!r}"
            )
        unknown = sorted(set(self.json_options or {}) - set(TOOL_JSON_OPTIONS))
        if unknown:
            raise TypeError(
                f"with tools=, json_options takes {' and '.join(TOOL_JSON_OPTIONS)} (bounds of "
                f"the arguments' open arrays and strings), not {', '.join(unknown)}"
            )
        # every tool readable, the choice and bounds valid (a dict only: the grammar comes later)
        tool_structural_tag(self.tools, tool_choice=self.tool_choice, **self.tool_bounds)

    @property
    def tool_bounds(self) -> dict[str, Any]:
        """``max_items`` and ``max_length`` of ``json_options`` for the tools' arguments."""
        opts = self.json_options or {}
        return {k: opts[k] for k in TOOL_JSON_OPTIONS if k in opts}

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
        """The sampling options, as a method's factory and the decoding loop take them."""
        return SamplingOptions(
            self.temperature, self.top_k, self.top_p, self.frequency_penalty, self.presence_penalty
        )

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
        if self.sampling.penalized and (self.speculative or not isinstance(method, TokenMethod)):
            raise TypeError(
                "frequency_penalty and presence_penalty apply to the token-level samplers "
                "(None, 'greedy', 'masked', 'awrs' or a Sampler object) without speculative=; "
                f"{getattr(method, 'name', method)!r} would not apply them"
            )
        return method


class PreparedCall:
    """Everything a call needs before decoding: model, output type, the job and its method."""

    def __init__(self, prompt: Any, options: GenerationOptions, method: DecodingMethod) -> None:
        self.t0 = time.perf_counter()
        self.batch = is_batch(prompt)
        prompts = list(prompt) if self.batch else [prompt]
        _check_prompts(prompts)
        self.options = options
        self.by_name = False
        if options.tools is None:
            self.output = output_type(**options.constraint, json_options=options.json_options)
        model = resolve_model(options.model)  # after every argument is checked
        self.model = model
        system = options.system
        if options.tools is not None:  # the calls' syntax is the model's chat template's
            template = getattr(model.tokenizer, "chat_template", None)
            fmt = options.tool_format or detect_tool_format(template)
            vocab = model.vocabulary
            eos = {int(i) for i in vocab.eos_ids}
            names = vocab.special_names
            self.output = tool_output(
                options.tools,
                tool_choice=options.tool_choice,
                parallel=options.parallel_tool_calls,
                format=fmt,
                special_tokens={n for n, i in names.items() if i not in eos},
                end_tokens={n for n, i in names.items() if i in eos},
                **options.tool_bounds,
            )
            # the calls' special tokens (matched by id) are read back by name
            self.by_name = bool(special_chars(self.output.grammar)[1])
            if options.tool_choice != "none":
                listed = tool_system_prompt(options.tools, fmt)
                system = listed if system is None else f"{system}\n\n{listed}"
        self.max_tokens = options.max_tokens
        chat = options.chat
        prompt_ids = [model.encode_prompt(p, chat=chat, system=system) for p in prompts]
        self.answer = self.output
        self.reasoning = plan_reasoning(
            options.reasoning,
            getattr(model.tokenizer, "chat_template", None),
            [model.tokenizer.decode(ids[-8:]) for ids in prompt_ids],
        )
        if self.reasoning is not None:
            self.output = reasoning_output(self.answer, self.reasoning)
        notice_kernel_compilation()
        t1 = time.perf_counter()
        compiled = model.compile(self.output.grammar)
        self.compile_seconds = time.perf_counter() - t1
        canonical = None
        if options.canonical:
            build = getattr(model, "canonical", None)
            if build is None:
                raise TypeError(
                    f"canonical=True needs a model whose tokenizer constrain can read "
                    f"(a transformers model); {type(model).__name__} has none"
                )
            canonical = build()
        matchers = [Matcher(compiled, canonical=canonical) for _ in prompts]
        self.job = DecodeJob(
            model=model,
            prompts=prompts,
            prompt_ids=prompt_ids,
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
            text = self._text(tokens)
            if outcome.complete is not None:
                done = outcome.complete[i]
            else:
                done = res.finish_reasons[i] == "stop" or self.job.matchers[i].is_accepting()
            if not done:
                incomplete.append((i, text))
                continue
            reasoning, value = self._parse(text)
            out.append(
                GenerationResult(
                    value=value,
                    text=text,
                    finish_reason=res.finish_reasons[i],
                    prompt_tokens=len(prompt_ids[i]),
                    output_tokens=len(tokens),
                    seconds=time.perf_counter() - self.t0,
                    compile_seconds=self.compile_seconds,
                    log_weight=res.log_weights[i],
                    sampler=outcome.name,
                    details=None if outcome.details is None else outcome.details[i],
                    reasoning=reasoning,
                    token_ids=tuple(int(t) for t in tokens),
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

    def _text(self, tokens: Sequence[int]) -> str:
        """Return the text of an output's tokens (special tokens by name for tool markers)."""
        vocab = self.model.vocabulary
        if self.by_name:
            return vocab.decode_text(tokens)
        return vocab.decode(tokens).decode("utf-8", errors="replace")

    def _parse(self, text: str) -> tuple[str | None, Any]:
        """Return the reasoning (``None`` without a block) and the value of a finished text."""
        if self.reasoning is None:
            return None, self.output.parse(text)
        reasoning, value = read_reasoning(text, self.reasoning, self.answer)
        if isinstance(value, AssistantMessage):
            value = replace(value, reasoning=reasoning, text=text)
        return reasoning, value

    def _open_hint(self, text: str) -> str:
        """Say how to bound the output: the open places of a schema, by JSON pointer.

        The places under the last key the partial ``text`` wrote come first (best effort).
        """
        plan = self.reasoning
        inside = plan is not None and (plan.opened or text.startswith(plan.reasoning.start))
        if plan is not None and inside and plan.reasoning.end not in text:
            return (
                f"The reasoning block is still open (no {plan.reasoning.end!r} yet): raise "
                "max_tokens, or give the reasoning a budget: "
                "reasoning=constrain.reasoning.Reasoning(max_chars=...)."
            )
        if self.output.kind not in ("json", "pydantic", "type"):
            return "Raise max_tokens, or bound the repetitions of the regex or grammar."
        opts = dict(self.options.json_options or {})
        spots = open_ends(
            _json_schema(self.options.schema, self.answer, opts),
            max_number_digits=opts.get("max_number_digits", DEFAULT_NUMBER_DIGITS),
        )
        if not spots:
            return "Raise max_tokens."
        if plan is not None and plan.reasoning.end in text:  # the keys of the answer only
            text = text.split(plan.reasoning.end, 1)[1]
        keys = _KEY.findall(text)
        if keys:
            last = f"/properties/{keys[-1]}"
            spots.sort(key=lambda spot: last not in spot.partition(": ")[0])
        listed = "; ".join(spots[:6]) + ("; ..." if len(spots) > 6 else "")
        return f"Raise max_tokens, or bound what the schema leaves open: {listed}."


def _json_schema(schema: Any, output: OutputType, opts: Mapping[str, Any]) -> Any:
    """Return the JSON Schema that ``output`` was built from (``schema=`` as output.py reads it)."""
    if output.kind != "json":
        return pydantic_schema(schema, extra_properties=bool(opts.get("extra_properties")))
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "true", "false")):
        return json.loads(schema)
    return json.loads(Path(schema).read_text(encoding="utf-8"))


def _generator(model: Model, seed: int | None, n: int) -> RandomStreams | None:
    # one random stream per request, keyed seed + k: independent of the batch around it
    return None if seed is None else RandomStreams.for_requests(seed, n, model.device)
