"""Autoregressive decoding with grammar constraints (stage 7).

The loop, for a batch of ``B`` rows, each with its own :class:`~constrain.Matcher` (or ``None``
for an unconstrained row)::

    logits = session.forward(None)                 # prefill: logits of the next token, (B, C)
    sampler.prepare(matchers, live)                # bitmasks on the CPU
    for step in range(max_tokens):
        tokens = sampler.sample(logits, matchers)  # mask + choose, (B,)
        for each live row i:
            EOS          -> row i stops ("stop")
            other token  -> matchers[i].accept_token(token); row stops if the matcher terminated
        logits = session.forward(tokens)           # finished rows are fed a pad token
        sampler.prepare(matchers, live)            # overlaps with the forward pass

**Overlap.** The next step's bitmasks depend only on the tokens just chosen, not on the model's
next logits, so when the model runs on a GPU they are computed in a worker thread while the
forward pass runs (the matcher kernels release the GIL, and the GPU works asynchronously). When
the model runs on the CPU the two would compete for the same cores, so by default they run one
after the other there (``overlap=True`` forces the thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from constrain.decoding.method import (
    DecodeJob,
    DecodingMethod,
    MethodOutcome,
    SamplingOptions,
    Steps,
    drain,
)
from constrain.errors import InternalError
from constrain.matcher import Matcher
from constrain.sampling.awrs import AWRS
from constrain.sampling.base import Sampler
from constrain.sampling.masked import MaskedSampler
from constrain.sampling.streams import Randomness

__all__ = [
    "DecodeResult",
    "DecodingSession",
    "PenalizedSession",
    "TokenMethod",
    "awrs_method",
    "decode",
    "greedy_method",
    "iter_decode",
    "masked_method",
]


class DecodingSession(Protocol):
    """A model with its key-value cache, advanced one token per row at a time."""

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        """Return the next-token logits ``(B, C)``.

        ``None`` runs the prompt (prefill); afterwards ``token_ids`` is ``(B,)`` int64, the
        token appended to each row. The result may be computed asynchronously (CUDA).
        """
        ...


class PenalizedSession:
    """A session whose logits carry OpenAI's frequency and presence penalties.

    Row ``i``'s logit of token ``t`` becomes ``logit - frequency_penalty * c - presence_penalty
    * (c > 0)``, where ``c`` counts the times row ``i`` has generated ``t`` (the prompt is not
    counted). The tokens are the ones fed to :meth:`forward`, which are the rows' generated
    tokens in the autoregressive loop; a finished row's padding is counted too, but nothing
    samples from that row any more.

    The penalties change the distribution the model gives, so the samplers then target the
    penalized model: a remedy for small models that repeat themselves under greedy decoding
    (an array item or a CSV row written until ``max_tokens``), not an exact sampling of the
    model's own distribution.

    Parameters
    ----------
    session : DecodingSession
        The model's session, whose logits are penalized.
    frequency_penalty, presence_penalty : float
        The penalties (0: none).
    """

    def __init__(
        self, session: DecodingSession, frequency_penalty: float, presence_penalty: float
    ) -> None:
        self.session = session
        self.frequency_penalty = float(frequency_penalty)
        self.presence_penalty = float(presence_penalty)
        self.counts: torch.Tensor | None = None

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        """Return the session's next-token logits ``(B, C)``, penalized."""
        logits = self.session.forward(token_ids)
        if self.counts is None:
            self.counts = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
        if token_ids is not None:
            rows = torch.arange(self.counts.shape[0], device=self.counts.device)
            self.counts[rows, token_ids.to(self.counts.device).view(-1)] += 1.0
        if self.frequency_penalty:
            logits = logits - self.frequency_penalty * self.counts
        if self.presence_penalty:
            logits = logits - self.presence_penalty * (self.counts > 0).float()
        return logits


@dataclass
class DecodeResult:
    """What :func:`decode` produced, per row."""

    token_ids: list[list[int]]
    """Generated tokens (EOS excluded)."""
    finish_reasons: list[str]
    """``"stop"`` (EOS, or the grammar admits no continuation) or ``"length"`` (max_tokens)."""
    log_weights: list[float]
    """Sum of the sampler's incremental log-weights."""
    steps: int = 0
    """Forward passes after the prefill."""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


def decode(
    session: DecodingSession,
    matchers: Sequence[Matcher | None],
    sampler: Sampler,
    *,
    eos_ids: Sequence[int],
    max_tokens: int,
    pad_id: int | None = None,
    generator: Randomness = None,
    overlap: bool | None = None,
    on_tokens: Callable[[list[int], list[int]], None] | None = None,
) -> DecodeResult:
    """Generate up to ``max_tokens`` tokens per row, constrained by the rows' matchers.

    Parameters
    ----------
    session : DecodingSession
        The model, positioned after the prompts.
    matchers : sequence of Matcher or None
        One per row, fresh or positioned after a forced prefix; advanced in place. ``None``:
        unconstrained row (it stops at EOS or ``max_tokens``).
    sampler : Sampler
        Chooses tokens (e.g. :class:`constrain.sampling.MaskedSampler`).
    eos_ids : sequence of int
        End-of-sequence ids: a row that samples one stops.
    max_tokens : int
        Most tokens generated per row (EOS not counted).
    pad_id : int, optional
        Fed to finished rows (default ``eos_ids[0]``).
    generator : torch.Generator or RandomStreams, optional
        Randomness for the sampler.
    overlap : bool, optional
        Compute the next bitmasks in a worker thread while the forward pass runs. Default: when
        the model runs on a GPU. On the CPU the worker competes with torch's own threads for
        the same cores; on 2 cores overlap measured between 7% slower and 5% faster, within
        noise (``docs/performance.md``).
    on_tokens : callable, optional
        Called after every step with the rows that got a token and those tokens.

    Returns
    -------
    DecodeResult

    Raises
    ------
    InternalError
        If a matcher rejects the token its sampler chose (a bug in constrain).
    """
    steps = iter_decode(
        session,
        matchers,
        sampler,
        eos_ids=eos_ids,
        max_tokens=max_tokens,
        pad_id=pad_id,
        generator=generator,
        overlap=overlap,
    )
    while True:
        try:
            rows, ids = next(steps)
        except StopIteration as done:
            result: DecodeResult = done.value
            return result
        if on_tokens is not None:
            on_tokens(rows, ids)


def iter_decode(
    session: DecodingSession,
    matchers: Sequence[Matcher | None],
    sampler: Sampler,
    *,
    eos_ids: Sequence[int],
    max_tokens: int,
    pad_id: int | None = None,
    generator: Randomness = None,
    overlap: bool | None = None,
) -> Generator[tuple[list[int], list[int]], None, DecodeResult]:
    """Like :func:`decode`, as a generator.

    Yields ``(rows, token_ids)`` after every step (the rows that got a token, and those
    tokens); its return value (``StopIteration.value``) is the :class:`DecodeResult`. Closing
    the generator stops decoding.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if not eos_ids:
        raise ValueError("eos_ids must name at least one end-of-sequence token")
    batch = len(matchers)
    eos = {int(e) for e in eos_ids}
    pad = int(eos_ids[0]) if pad_id is None else int(pad_id)
    out: list[list[int]] = [[] for _ in range(batch)]
    finish = ["length"] * batch
    weights = [0.0] * batch
    live = list(range(batch))
    pool = ThreadPoolExecutor(max_workers=1) if overlap else None
    t_start = time.perf_counter()
    t_sample = t_wait = 0.0
    steps = 0
    try:
        logits = _forward_overlapped(session, None, sampler, matchers, live, pool)
        if pool is None and overlap is None and logits.device.type == "cuda":
            pool = ThreadPoolExecutor(max_workers=1)
        while live and steps < max_tokens:
            t0 = time.perf_counter()
            chosen = sampler.sample(logits, matchers, generator)
            ids = chosen.token_ids.tolist()
            lw = chosen.log_weights.tolist()
            t_sample += time.perf_counter() - t0
            got_rows: list[int] = []
            got_ids: list[int] = []
            still: list[int] = []
            for i in live:
                tok = int(ids[i])
                weights[i] += lw[i]
                m = matchers[i]
                if tok in eos:
                    if m is not None and not m.accept_token(tok):
                        raise InternalError(
                            f"row {i}: the sampler chose EOS where the grammar does not accept "
                            "the output yet. This is a bug in constrain; please report it."
                        )
                    finish[i] = "stop"
                    continue
                if m is not None and not m.accept_token(tok):
                    raise InternalError(
                        f"row {i}: the sampler chose token {tok}, which the grammar rejects. "
                        "This is a bug in constrain; please report it with the grammar."
                    )
                out[i].append(tok)
                got_rows.append(i)
                got_ids.append(tok)
                if m is not None and m.is_terminated():
                    finish[i] = "stop"
                else:
                    still.append(i)
            live = still
            steps += 1
            if got_rows:
                yield got_rows, got_ids
            if not live or steps >= max_tokens:
                break
            feed = [pad] * batch
            for i in live:
                feed[i] = out[i][-1]
            t0 = time.perf_counter()
            feed_t = torch.tensor(feed, dtype=torch.long)
            logits = _forward_overlapped(session, feed_t, sampler, matchers, live, pool)
            t_wait += time.perf_counter() - t0
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    seconds = time.perf_counter() - t_start
    return DecodeResult(
        token_ids=out,
        finish_reasons=finish,
        log_weights=weights,
        steps=steps,
        seconds=seconds,
        timings={"sample": t_sample, "forward_and_prepare": t_wait},
    )


def _forward_overlapped(
    session: DecodingSession,
    feed: torch.Tensor | None,
    sampler: Sampler,
    matchers: Sequence[Matcher | None],
    live: list[int],
    pool: ThreadPoolExecutor | None,
) -> torch.Tensor:
    """Run the forward pass and ``sampler.prepare`` concurrently; return the logits."""
    if pool is None or not any(matchers[i] is not None for i in live):
        logits = session.forward(feed)
        sampler.prepare(matchers, live)
        return logits
    job: Future[None] = pool.submit(sampler.prepare, matchers, live)
    logits = session.forward(feed)
    job.result()
    return logits


# -- the token-level methods of generate(sampler=...) ------------------------------------------


class TokenMethod:
    """A token-level :class:`~constrain.sampling.Sampler` run by the autoregressive loop.

    The :class:`~constrain.decoding.method.DecodingMethod` of ``generate(sampler="greedy" |
    "masked" | "awrs")``, of ``sampler=None`` and of any ``Sampler`` object.

    Parameters
    ----------
    sampler : Sampler
        Chooses each step's tokens.
    """

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.name: str = getattr(sampler, "method_name", type(sampler).__name__)

    def __repr__(self) -> str:
        return f"TokenMethod({self.sampler!r})"

    def steps(self, job: DecodeJob) -> Steps:
        """Return the decoding loop of ``job`` (:func:`iter_decode`'s generator)."""
        session: DecodingSession = job.model.start(job.prompt_ids)
        sampling = job.sampling
        if sampling.penalized:
            session = PenalizedSession(
                session, sampling.frequency_penalty, sampling.presence_penalty
            )
        return iter_decode(
            session,
            job.matchers,
            self.sampler,
            eos_ids=job.model.eos_ids,
            max_tokens=job.max_tokens,
            pad_id=job.model.pad_id,
            generator=job.generator,
            overlap=job.overlap,
        )

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """Decode every row of ``job`` to the end."""
        result: DecodeResult = drain(self.steps(job))
        return MethodOutcome(result, self.name)


def greedy_method(sampling: SamplingOptions, options: Mapping[str, Any]) -> DecodingMethod:
    """``sampler="greedy"``: the argmax of the masked distribution (``temperature`` ignored).

    Raises
    ------
    TypeError
        For an option :class:`~constrain.sampling.MaskedSampler` does not take.
    """
    return TokenMethod(MaskedSampler(0.0, **options))


def masked_method(sampling: SamplingOptions, options: Mapping[str, Any]) -> DecodingMethod:
    """``sampler="masked"``: mask, renormalise and sample (temperature 1 unless given).

    Raises
    ------
    TypeError
        For an option :class:`~constrain.sampling.MaskedSampler` does not take.
    """
    return TokenMethod(
        MaskedSampler(
            sampling.sampling_temperature, top_k=sampling.top_k, top_p=sampling.top_p, **options
        )
    )


def awrs_method(sampling: SamplingOptions, options: Mapping[str, Any]) -> DecodingMethod:
    """``sampler="awrs"``: adaptive weighted rejection sampling (temperature 1 unless given).

    Raises
    ------
    TypeError
        For an option :class:`~constrain.sampling.AWRS` does not take.
    """
    return TokenMethod(AWRS(sampling.sampling_temperature, **options))
