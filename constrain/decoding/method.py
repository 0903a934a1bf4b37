"""The decoding-method protocol: what ``generate(sampler=...)`` runs (stage 7b).

:func:`constrain.generate` prepares a batch (the model, the prompts' token ids, one matcher per
row) as a :class:`DecodeJob` and hands it to a :class:`DecodingMethod`, which returns each
row's tokens as a :class:`MethodOutcome`::

    method = build_method("smc", SamplingOptions(0.0, 0, 1.0), {"n_particles": 8})
    outcome = method.run_job(job)

A method given by name is built by its factory from ``generate``'s sampling options and the
method's own keyword options (:mod:`constrain.decoding.registry`); the method objects
(:class:`~constrain.decoding.SMC`, :class:`~constrain.decoding.ASAp`,
:class:`~constrain.decoding.DCCD`) are methods themselves, and a token-level
:class:`~constrain.sampling.Sampler` runs inside the autoregressive loop
(:class:`~constrain.decoding.autoregressive.TokenMethod`). A :class:`StreamingMethod` also
yields its tokens step by step, which :func:`constrain.stream` needs.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from constrain.compiler import CompiledGrammar
from constrain.matcher import Matcher
from constrain.sampling.streams import Randomness
from constrain.vocab.vocabulary import Vocabulary

if TYPE_CHECKING:  # autoregressive.py imports this module for its TokenMethod
    from constrain.decoding.autoregressive import DecodeResult

__all__ = [
    "DecodeJob",
    "DecodingMethod",
    "LanguageModel",
    "MethodFactory",
    "MethodOutcome",
    "SamplingOptions",
    "Steps",
    "StreamingMethod",
    "drain",
]

Message = Mapping[str, str]
Prompt = str | Sequence[Message]

Steps = Generator[tuple[list[int], list[Any]], None, "DecodeResult"]
"""A decoding loop as a generator: yields ``(rows, tokens)`` after every step (per row one token
id or a list of them), returns the :class:`~constrain.decoding.DecodeResult`."""


@dataclass(frozen=True)
class SamplingOptions:
    """``generate``'s sampling options, as a method's factory and the decoding loop get them."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    frequency_penalty: float = 0.0
    """Subtracted from a token's logit once per time the row has generated it (OpenAI's
    definition); applied by the token-level loop
    (:class:`~constrain.decoding.autoregressive.PenalizedSession`)."""
    presence_penalty: float = 0.0
    """Subtracted from the logit of every token the row has generated at least once."""

    @property
    def penalized(self) -> bool:
        """Whether a frequency or presence penalty changes the model's logits."""
        return self.frequency_penalty != 0.0 or self.presence_penalty != 0.0

    @property
    def sampling_temperature(self) -> float:
        """The temperature of a method that samples: ``temperature``, or 1 when it is 0."""
        return self.temperature if self.temperature > 0 else 1.0


class LanguageModel(Protocol):
    """What a decoding method needs of a model (:class:`constrain.Model` has it)."""

    vocabulary: Vocabulary
    eos_ids: list[int]
    pad_id: int
    tokenizer: Any

    @property
    def device(self) -> torch.device:
        """Where the model's logits are (and a seeded generator must be)."""
        ...

    @property
    def has_chat_template(self) -> bool:
        """Whether prompts can be chat messages."""
        ...

    def encode_prompt(
        self, prompt: Prompt, *, chat: bool | None = ..., system: str | None = ...
    ) -> list[int]:
        """Return the prompt's token ids."""
        ...

    def start(self, prompts: Sequence[Sequence[int]]) -> Any:
        """Return a decoding session (key-value cache) positioned after the prompts."""
        ...


@dataclass
class DecodeJob:
    """One prepared ``generate`` call: a batch of prompts, each with its grammar's matcher."""

    model: LanguageModel
    prompts: list[Prompt]
    """The prompts as given (a method that rewrites them, such as DCCD, encodes them anew)."""
    prompt_ids: list[list[int]]
    """Each prompt's token ids (chat template applied)."""
    matchers: list[Matcher]
    """One fresh matcher per prompt; the method advances them."""
    compiled: CompiledGrammar
    """The grammar, compiled for the model's vocabulary."""
    output_kind: str
    """What the output is parsed as (:attr:`constrain.output.OutputType.kind`: ``"json"``,
    ``"pydantic"``, ``"type"``, ``"regex"``, ``"grammar"`` or ``"choices"``)."""
    max_tokens: int
    sampling: SamplingOptions
    generator: Randomness = None
    chat: bool | None = None
    system: str | None = None
    overlap: bool | None = None
    """Compute the next bitmasks while the forward pass runs (default: on a GPU)."""


@dataclass
class MethodOutcome:
    """What a method produced for a job, per row."""

    result: DecodeResult
    """Each row's tokens, finish reason and log-weight."""
    name: str
    """The method's name, reported as ``GenerationResult.sampler``."""
    complete: list[bool] | None = None
    """Whether each row's output is a sentence of the grammar (``None``: it ended with EOS or
    its matcher accepts)."""
    details: Sequence[Any] | None = None
    """A method-specific record per row (``GenerationResult.details``)."""
    prompt_ids: list[list[int]] | None = None
    """The prompts the method decoded, when it rewrote the job's (DCCD: the structurer's)."""


@runtime_checkable
class DecodingMethod(Protocol):
    """Decode a prepared batch (:class:`DecodeJob`) into each row's tokens."""

    name: str
    """Reported as ``GenerationResult.sampler`` (``"masked"``, ``"smc"``, ...)."""

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """Decode every row of ``job``."""
        ...


@runtime_checkable
class StreamingMethod(DecodingMethod, Protocol):
    """A method that produces its tokens step by step (what :func:`constrain.stream` needs)."""

    def steps(self, job: DecodeJob) -> Steps:
        """Return the decoding loop of ``job`` as a generator (:data:`Steps`)."""
        ...


class MethodFactory(Protocol):
    """Build a method from ``generate``'s sampling options and the method's keyword options.

    It raises ``TypeError`` for an option the method does not take and ``ValueError`` for a
    value out of range.
    """

    def __call__(self, sampling: SamplingOptions, options: Mapping[str, Any]) -> DecodingMethod:
        """Return the method configured by ``sampling`` and ``options``."""
        ...


def drain(steps: Generator[Any, None, Any]) -> Any:
    """Run a decoding generator to the end; return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
