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
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from constrain.decoding.method import MethodOutcome, StreamingMethod
from constrain.decoding.speculative import SpeculativeSpec
from constrain.diffusion.denoising import DiffusionModel
from constrain.diffusion.route import generate_diffusion
from constrain.integrations.transformers import Model
from constrain.ir import Grammar
from constrain.reasoning import Reasoning
from constrain.request import (
    GenerationOptions,
    GenerationResult,
    PreparedCall,
    SamplerSpec,
    default_model,
    is_batch,
)
from constrain.tools import AssistantMessage, ToolChoice

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["GenerationOptions", "GenerationResult", "default_model", "generate", "stream"]

Message = Mapping[str, str]
Prompt = str | Sequence[Message]
Batch = list[str] | Sequence[Sequence[Message]]
"""A batch of prompts as the typed overloads of :func:`generate` see it (other sequences of
prompts work too, typed ``Any``)."""
ModelT = TypeVar("ModelT", bound="BaseModel")


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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any],
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> AssistantMessage: ...


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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any],
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
    return_info: Literal[False] = False,
    **sampler_options: Any,
) -> list[AssistantMessage]: ...


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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
    return_info: bool = False,
    **sampler_options: Any,
) -> Any:
    """Generate text that follows a schema, regex, grammar, choices or tools; return its value.

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
        A shipped grammar by name (``"sql"``, ``"json"``, ...), a ``.lark`` path, Lark text,
        EBNF text (``root ::= ...``) or a :class:`~constrain.Grammar`. Returns the string.
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
    frequency_penalty, presence_penalty : float, optional
        OpenAI's repetition penalties (default 0: off), for the token-level samplers: a
        token's logit is lowered by ``frequency_penalty`` for each time the output already
        has it, and by ``presence_penalty`` once if it has it at all (the prompt does not
        count). A remedy for a small model that repeats an array item or a row until
        ``max_tokens`` under greedy decoding; they change the distribution sampled
        (``docs/sampling.md``).
    canonical : bool, optional
        Write only the tokens the model's tokenizer itself would write for the text (its
        canonical encoding; byte-level and SentencePiece BPE tokenizers:
        :class:`~constrain.vocab.canonical.CanonicalBpe`), so that the output's token ids equal
        ``tokenizer.encode(text)`` (within the bounded look-ahead of docs/canonical.md). Off by
        default (docs/canonical.md says why, with its figures).
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
        greedy model cannot write digits until ``max_tokens``; ``None`` lifts it. With
        ``tools=``, only ``max_items`` and ``max_length``: bounds of the arrays and strings
        the tools' schemas leave open (none by default; docs/tool_calling.md).
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
    tools : list of tools, optional
        Tool calling, a constraint of its own (:mod:`constrain.tools`): each tool is a Python
        function (its signature and docstring give the schema), a pydantic model class or an
        OpenAI tool dict. The tools are listed in the system message and the output is prose
        and calls in the chat template's syntax, each call's arguments following its tool's
        schema. Returns an :class:`~constrain.tools.AssistantMessage` (``content``, validated
        ``tool_calls``; a call of a function tool runs it: ``call()``).
    tool_choice : "auto", "required", "none" or {"name": ...}, optional
        ``"auto"`` (default): the model writes prose or calls; ``"required"``: calls only;
        ``"none"``: prose only; ``{"name": "f"}``: one call of ``f``.
    parallel_tool_calls : bool, optional
        Allow more than one call (default True).
    tool_format : str, optional
        The calls' syntax, a :data:`~constrain.tools.TOOL_FORMATS` name (``"hermes"``,
        ``"smollm2"``, ``"mistral"``, ``"llama3_json"``, ``"deepseek_v3"``, ``"deepseek_v31"``,
        ``"harmony"``); default: read from the model's chat template
        (:func:`~constrain.tools.detect_tool_format`). Its markers that are special tokens of
        the model's tokenizer are required by token id and written by name in the text.
    reasoning : bool, Reasoning or None, optional
        A reasoning block before the constraint (:mod:`constrain.reasoning`): free text between
        ``<think>`` and ``</think>``, then the output. ``True``: required; a
        :class:`~constrain.reasoning.Reasoning` sets other markers or a thinking budget
        (``max_chars``); ``None`` (default): an optional block when the chat template mentions
        ``</think>`` (a reasoning model's), none otherwise; ``False``: none. A prompt that the
        template already opened the block in starts inside it; one it closed (thinking
        switched off) gets none. The reasoning is returned apart, as
        ``GenerationResult.reasoning`` (and ``AssistantMessage.reasoning`` with ``tools=``);
        the value is parsed from the answer alone.
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
        value for other schemas, a ``str`` for ``regex=``, ``grammar=`` and ``choices=``, an
        :class:`~constrain.tools.AssistantMessage` for ``tools=``; a list of those for a list
        of prompts.

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
        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
        canonical=canonical,
        sampler=sampler, chat=chat, system=system, json_options=json_options, overlap=overlap,
        speculative=speculative, max_draft=max_draft, tools=tools, tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls, tool_format=tool_format, reasoning=reasoning,
        sampler_options=sampler_options,
    )  # fmt: skip
    if options.is_diffusion:
        results = _generate_diffusion(prompt, options)
        batch = is_batch(prompt)
    else:
        prep = PreparedCall(prompt, options, options.method())
        results = prep.results(prep.method.run_job(prep.job))
        batch = prep.batch
    values: list[Any] = results if return_info else [r.value for r in results]
    return values if batch else values[0]


def _generate_diffusion(prompt: Any, options: GenerationOptions) -> list[GenerationResult]:
    """``generate`` with a masked-diffusion model (:func:`generate_diffusion`)."""
    if options.tools is not None:
        raise TypeError("tools= needs an autoregressive model, not a diffusion model")
    if options.reasoning not in (None, False):
        raise TypeError("reasoning= needs an autoregressive model, not a diffusion model")
    if options.canonical:
        raise TypeError("canonical= needs an autoregressive model, not a diffusion model")
    if (
        options.top_k
        or options.top_p != 1.0
        or options.overlap is not None
        or options.speculative
        or options.sampling.penalized
    ):
        raise TypeError(
            "top_k, top_p, penalties, overlap and speculative do not apply to a diffusion "
            "model; its options are length, block_size, steps, unmasking, num_candidates and gaps"
        )
    assert isinstance(options.model, DiffusionModel)
    rows = list(prompt) if is_batch(prompt) else [prompt]
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
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    canonical: bool = False,
    seed: int | None = None,
    sampler: SamplerSpec = None,
    chat: bool | None = None,
    system: str | None = None,
    json_options: Mapping[str, Any] | None = None,
    overlap: bool | None = None,
    speculative: SpeculativeSpec = None,
    max_draft: int = 8,
    tools: Sequence[Any] | None = None,
    tool_choice: ToolChoice = "auto",
    parallel_tool_calls: bool = True,
    tool_format: str | None = None,
    reasoning: bool | Reasoning | None = None,
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
    if is_batch(prompt):
        raise TypeError("stream() takes one prompt; use generate() for a batch")
    options = GenerationOptions(
        schema=schema, regex=regex, grammar=grammar, choices=choices, model=model,
        max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
        canonical=canonical,
        sampler=sampler, chat=chat, system=system, json_options=json_options, overlap=overlap,
        speculative=speculative, max_draft=max_draft, tools=tools, tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls, tool_format=tool_format, reasoning=reasoning,
        sampler_options=sampler_options,
    )  # fmt: skip
    if options.is_diffusion:
        raise TypeError("stream() needs an autoregressive model; use generate() for diffusion")
    method = options.method()
    if not isinstance(method, StreamingMethod):
        raise TypeError(
            f"stream() needs a token-level sampler; {method.name!r} picks its output only at "
            "the end: use generate()"
        )
    prep = PreparedCall(prompt, options, method)
    assert isinstance(prep.method, StreamingMethod)
    steps = prep.method.steps(prep.job)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    vocab = prep.model.vocabulary
    eos = {int(i) for i in vocab.eos_ids}
    try:
        while True:
            try:
                _rows, tokens = next(steps)
            except StopIteration as done:
                outcome = MethodOutcome(done.value, prep.method.name)
                break
            first = tokens[0]
            piece = ""
            for tid in first if isinstance(first, list) else [first]:
                raw = vocab.decode([tid])
                if raw or not prep.by_name or tid in eos:
                    piece += decoder.decode(raw)
                else:  # a special token the calls require by id: its name, as in the text
                    piece += vocab.decode_text([tid])
            if piece:
                yield piece
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
        prep.results(outcome)  # raises IncompleteOutputError / OutputValidationError
    finally:
        steps.close()
