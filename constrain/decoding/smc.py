"""Sequential Monte Carlo over grammar-constrained decoding: sample the model *given* the grammar.

Locally constrained decoding (masking) samples each token from the model restricted to the
grammar at that step, which over-weights prefixes the model likes but that have few valid
continuations. The target that answers "what would the model say, given that its output is
valid" is the global one::

    g(x)  ∝  p_LM(x) · 1[x ∈ L(G)] · φ(x)        (φ: an optional potential)

SMC (Lew et al., 2023; Loula et al., 2025) runs ``N`` particles with a locally constrained
proposal (:class:`~constrain.sampling.MaskedSampler` at temperature 1, or
:class:`~constrain.sampling.AWRS`), multiplies each particle's weight by the allowed mass the
proposal reports (exact, or an unbiased estimate) and by the potential's ratio, and resamples
the particles when the weights degenerate. The weighted particles approximate ``g``; the
approximation (and the distribution of :attr:`SMCResult.chosen`) converges to ``g`` as ``N``
grows.

All particles of all runs share one :class:`~constrain.decoding.DecodingSession`: one batched
forward pass per step. Resampling reorders the session's rows, so the session must also have
``reorder(indices)`` (:class:`~constrain.integrations.transformers.HFSession` has it).
"""

from __future__ import annotations

import codecs
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import torch

from constrain.decoding.autoregressive import DecodeResult
from constrain.decoding.method import DecodeJob, MethodOutcome, SamplingOptions
from constrain.errors import InternalError, SamplerError
from constrain.matcher import Matcher
from constrain.sampling.awrs import AWRS
from constrain.sampling.base import Sampler
from constrain.sampling.streams import Randomness, RandomStreams, draw_uniform

__all__ = [
    "SMC",
    "ParticleSession",
    "Potential",
    "SMCResult",
    "effective_sample_size",
    "resample_indices",
]

Potential = Callable[[str, bool], float]
"""``potential(text, complete) -> log-score``: of a prefix (``complete=False``) or of a whole
output (``complete=True``); ``-inf`` rules the text (and, for a prefix, every continuation) out."""

ResampleMethod = Literal["multinomial", "systematic"]


class ParticleSession(Protocol):
    """A :class:`~constrain.decoding.DecodingSession` whose rows can be permuted and copied."""

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        """Return the next-token logits ``(B, C)`` (``None``: prefill)."""
        ...

    def reorder(self, indices: torch.Tensor) -> None:
        """Make row ``i`` a copy of (old) row ``indices[i]``."""
        ...


@dataclass
class SMCResult:
    """The weighted particles of one SMC run."""

    token_ids: list[list[int]]
    """Generated tokens of every particle (EOS excluded)."""
    texts: list[str]
    """The particles' outputs, decoded as UTF-8 (invalid bytes replaced)."""
    log_weights: list[float]
    """Unnormalised final log-weights; ``-inf`` for particles ruled out."""
    finish_reasons: list[str]
    """``"stop"`` (EOS), ``"length"`` (``max_tokens`` reached: EOS forced if the output was
    complete, else weight ``-inf``) or ``"rejected"`` (the potential returned ``-inf``)."""
    chosen: int | None
    """A particle drawn from the normalised weights; ``None`` when every weight is ``-inf``."""
    log_marginal_likelihood: float
    """Estimate of ``log sum_x p_LM(x) 1[x ∈ L] φ(x)`` (unbiased for the mass itself) over
    outputs of at most ``max_tokens`` tokens; ``-inf`` when every particle was ruled out."""
    ess: list[float] = field(default_factory=list)
    """Effective sample size after every step (before resampling)."""
    resamples: int = 0
    """Resampling events."""
    steps: int = 0
    """Decoding steps (forward passes after the prefill)."""
    seconds: float = 0.0

    @property
    def weights(self) -> list[float]:
        """Normalised weights (all 0 when every particle was ruled out)."""
        lw = np.asarray(self.log_weights, dtype=np.float64)
        if not np.isfinite(lw).any():
            return [0.0] * len(self.log_weights)
        w = np.exp(lw - lw[np.isfinite(lw)].max())
        return (w / w.sum()).tolist()  # type: ignore[no-any-return]

    @property
    def text(self) -> str | None:
        """The chosen particle's output."""
        return None if self.chosen is None else self.texts[self.chosen]

    def distribution(self) -> dict[str, float]:
        """Return the particle approximation of the target: total weight per distinct text."""
        out: dict[str, float] = {}
        for t, w in zip(self.texts, self.weights, strict=True):
            if w > 0.0:
                out[t] = out.get(t, 0.0) + w
        return out


def effective_sample_size(log_weights: Sequence[float] | np.ndarray) -> float:
    """Return ``(sum w)^2 / sum w^2`` of ``exp(log_weights)`` (0 when every weight is 0).

    Examples
    --------
    >>> effective_sample_size([0.0, 0.0, 0.0, 0.0])
    4.0
    >>> effective_sample_size([0.0, float("-inf")])
    1.0
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    finite = np.isfinite(lw)
    if not finite.any():
        return 0.0
    w = np.exp(lw[finite] - lw[finite].max())
    return float(w.sum() ** 2 / (w**2).sum())


def resample_indices(
    log_weights: Sequence[float] | np.ndarray,
    uniforms: np.ndarray,
    method: ResampleMethod = "multinomial",
) -> np.ndarray:
    """Return ``len(log_weights)`` ancestor indices drawn from the normalised weights.

    Parameters
    ----------
    log_weights : (N,) array of float
        Unnormalised log-weights; at least one must be finite.
    uniforms : (N,) array of float in [0, 1)
        The randomness: ``multinomial`` uses all of them (independent draws), ``systematic``
        only the first (one stratified comb ``(i + u) / N``).
    method : {"multinomial", "systematic"}
        Systematic resampling has lower variance; both are unbiased (every particle's expected
        number of copies is ``N`` times its normalised weight).

    Returns
    -------
    (N,) int64 numpy array
        Particles of zero weight are never chosen.
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    n = lw.shape[0]
    finite = np.isfinite(lw)
    if not finite.any():
        raise ValueError("cannot resample: every weight is zero")
    w = np.zeros(n)
    w[finite] = np.exp(lw[finite] - lw[finite].max())
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    if method == "multinomial":
        u = np.asarray(uniforms, dtype=np.float64)[:n]
    elif method == "systematic":
        u = (np.arange(n) + float(uniforms[0])) / n
    else:
        raise ValueError(f"method must be 'multinomial' or 'systematic', got {method!r}")
    idx: np.ndarray = np.minimum(np.searchsorted(cdf, u, side="right"), n - 1)
    return idx.astype(np.int64)


def _uniforms(n: int, generator: Randomness) -> np.ndarray:
    """``n`` uniforms: from a generator, or one draw of ``n`` from a single stream."""
    return draw_uniform((n,), generator).cpu().numpy()  # type: ignore[no-any-return]


def _logmeanexp(lw: np.ndarray) -> float:
    finite = np.isfinite(lw)
    if not finite.any():
        return -math.inf
    top = float(lw[finite].max())
    return top + math.log(float(np.exp(lw[finite] - top).sum()) / lw.shape[0])


class _Particles:
    """Per-particle state of every run, in session row order."""

    def __init__(self, matchers: list[Matcher], phi0: float) -> None:
        # With AWRS, particles in the same state share one Matcher object (copy on write:
        # _step forks a shared matcher before advancing it), so resampling copies no matcher
        # and AWRS checks a token once for all the particles of a state. Other proposals may
        # fill masks from several threads, so their particles each own a matcher (unshare).
        n = len(matchers)
        self.matchers = matchers
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.raw: list[bytearray] = [bytearray() for _ in range(n)]
        self.alive = [phi0 > -math.inf] * n
        self.reasons = ["length" if phi0 > -math.inf else "rejected"] * n
        self.phi = [phi0] * n
        self.logw = np.full(n, phi0, dtype=np.float64)

    def unshare(self) -> None:
        """Give every particle its own Matcher object (fork the shared ones)."""
        seen: set[int] = set()
        for i, m in enumerate(self.matchers):
            if id(m) in seen:
                self.matchers[i] = m.fork()
            seen.add(id(m))

    def reorder(self, idx: list[int]) -> None:
        self.matchers = [self.matchers[j] for j in idx]
        self.tokens = [list(self.tokens[j]) for j in idx]
        self.raw = [bytearray(self.raw[j]) for j in idx]
        self.alive = [self.alive[j] for j in idx]
        self.reasons = [self.reasons[j] for j in idx]
        self.phi = [self.phi[j] for j in idx]
        self.logw = self.logw[idx]


def _text(raw: bytearray, complete: bool) -> str:
    """Decode UTF-8; a prefix keeps an incomplete trailing character back."""
    if complete:
        return raw.decode("utf-8", errors="replace")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(bytes(raw), final=False)


class SMC:
    """Sequential Monte Carlo with a grammar-constrained proposal and an optional potential.

    Parameters
    ----------
    proposal : Sampler, optional
        Proposes each particle's next token and returns the log of the allowed mass (or an
        unbiased estimate of it) as its log-weight: :class:`~constrain.sampling.AWRS` (the
        default) or ``MaskedSampler(1.0)``. It must sample at temperature 1 without
        truncation, or the weights would not correct it.
    n_particles : int, optional
        Particles per run.
    ess_threshold : float, optional
        Resample a run when its effective sample size falls below ``ess_threshold *
        n_particles`` (``0``: never; ``1``: whenever the weights are not all equal).
    potential : callable, optional
        ``potential(text, complete) -> float``, a log-score of a prefix (``complete=False``)
        or of a finished output (``complete=True``), applied as a twist: a particle's weight is
        multiplied by ``φ(x_≤t) / φ(x_<t)`` after every token, and by ``φ(x, complete) /
        φ(x)`` at EOS, so the final weights target ``p_LM(x) 1[x ∈ L] φ(x, complete)``.
        ``-inf`` rules the particle out. Called once per live particle per step.
    resample : {"multinomial", "systematic"}, optional
        Resampling scheme (:func:`resample_indices`).
    overlap : bool, optional
        Run the proposal's ``prepare`` (the bitmasks of ``MaskedSampler``) in a worker thread
        while the forward pass runs (default: True).

    Notes
    -----
    **Target and truncation.** Outputs are limited to ``max_tokens`` tokens: a particle that
    reaches the limit with a complete output is ended with EOS and its weight multiplied by the
    model's EOS probability (one more forward pass); one with an incomplete output gets weight
    0. The target is therefore ``g`` restricted to outputs of at most ``max_tokens`` tokens.

    **Weights.** Step ``t`` multiplies a particle's weight by the proposal's weight (``Z_t``, the
    mass the grammar allowed, or AWRS's unbiased estimate of it) and by the potential's ratio.
    Finished particles keep their weight and are fed a pad token. After resampling, every
    particle of the run gets the run's mean weight, so the mean of the final weights estimates
    the normalising constant (:attr:`SMCResult.log_marginal_likelihood`).

    References
    ----------
    .. [1] A. K. Lew, T. Zhi-Xuan, G. Grand, V. K. Mansinghka, "Sequential Monte Carlo Steering
       of Large Language Models using Probabilistic Programs", arXiv:2306.03081, 2023.
    .. [2] J. Loula, B. LeBrun, L. Du, B. Lipkin, C. Pasti, G. Grand, T. Liu, Y. Emara,
       M. Freedman, J. Eisner, R. Cotterell, V. Mansinghka, A. K. Lew, T. Vieira,
       T. J. O'Donnell, "Syntactic and Semantic Control of Large Language Models via
       Sequential Monte Carlo", ICLR 2025, arXiv:2504.13139.

    Examples
    --------
    >>> smc = SMC(AWRS(), n_particles=16)
    >>> session = model.start([prompt_ids] * 16)  # doctest: +SKIP
    >>> m = Matcher(compiled)  # doctest: +SKIP
    >>> result = smc.run(session, m, eos_ids=model.eos_ids, max_tokens=64)  # doctest: +SKIP
    >>> result.text  # doctest: +SKIP
    """

    def __init__(
        self,
        proposal: Sampler | None = None,
        *,
        n_particles: int = 32,
        ess_threshold: float = 0.5,
        potential: Potential | None = None,
        resample: ResampleMethod = "multinomial",
        overlap: bool | None = None,
    ) -> None:
        proposal = AWRS() if proposal is None else proposal
        if getattr(proposal, "temperature", 1.0) != 1.0:
            raise ValueError(
                f"the proposal must sample at temperature 1 (got {proposal!r}): SMC's weights "
                "correct a proposal toward the model itself"
            )
        if getattr(proposal, "top_k", 0) or getattr(proposal, "top_p", 1.0) != 1.0:
            raise ValueError(f"the proposal must not truncate the distribution, got {proposal!r}")
        if n_particles < 1:
            raise ValueError(f"n_particles must be >= 1, got {n_particles}")
        if not 0.0 <= ess_threshold <= 1.0:
            raise ValueError(f"ess_threshold must be in [0, 1], got {ess_threshold!r}")
        if resample not in ("multinomial", "systematic"):
            raise ValueError(f"resample must be 'multinomial' or 'systematic', got {resample!r}")
        self.proposal = proposal
        self.n_particles = int(n_particles)
        self.ess_threshold = float(ess_threshold)
        self.potential = potential
        self.resample: ResampleMethod = resample
        self.overlap = overlap

    def __repr__(self) -> str:
        return (
            f"SMC({self.proposal!r}, n_particles={self.n_particles}, "
            f"ess_threshold={self.ess_threshold}, resample={self.resample!r})"
        )

    name = "smc"
    """Its name as a decoding method (``GenerationResult.sampler``)."""

    @classmethod
    def from_options(cls, sampling: SamplingOptions, options: Mapping[str, Any]) -> SMC:
        """``generate(sampler="smc", **options)``: the options are this class's keywords.

        ``sampling`` does not apply: the proposal samples at temperature 1.

        Raises
        ------
        TypeError
            For an option this class does not take.
        ValueError
            For an option out of range.
        """
        return cls(**options)

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """One SMC run per prompt of ``job``, all prompts' particles in one batched session.

        Each row's output is the particle drawn from its run's final weights, with the run's
        log marginal-likelihood estimate as log-weight; a run whose particles were all ruled
        out reports its longest particle as incomplete (log-weight ``-inf``). The details are
        the :class:`SMCResult` of every run.
        """
        rows = [ids for ids in job.prompt_ids for _ in range(self.n_particles)]
        runs = self.run_batch(
            job.model.start(rows),
            job.matchers,
            eos_ids=job.model.eos_ids,
            max_tokens=job.max_tokens,
            pad_id=job.model.pad_id,
            generator=job.generator,
        )
        tokens, reasons, weights, complete = [], [], [], []
        for run in runs:
            if run.chosen is None:  # every particle ruled out: report the longest as partial
                longest = max(range(len(run.token_ids)), key=lambda j: len(run.token_ids[j]))
                tokens.append(run.token_ids[longest])
                reasons.append("length")
                weights.append(float("-inf"))
                complete.append(False)
                continue
            tokens.append(run.token_ids[run.chosen])
            reasons.append("stop")
            weights.append(run.log_marginal_likelihood)
            complete.append(True)
        result = DecodeResult(token_ids=tokens, finish_reasons=reasons, log_weights=weights)
        return MethodOutcome(result, self.name, complete=complete, details=runs)

    def run(
        self,
        session: ParticleSession,
        matcher: Matcher,
        *,
        eos_ids: Sequence[int],
        max_tokens: int,
        pad_id: int | None = None,
        generator: Randomness = None,
    ) -> SMCResult:
        """Run SMC for one prompt.

        Parameters
        ----------
        session : ParticleSession
            The model positioned after ``n_particles`` copies of the prompt (one row per
            particle); it must not have run its prefill yet.
        matcher : Matcher
            Fresh or positioned after a forced prefix; forked for every particle, not
            modified.
        eos_ids : sequence of int
            End-of-sequence ids.
        max_tokens : int
            Most tokens per output (EOS not counted).
        pad_id : int, optional
            Fed to finished particles (default ``eos_ids[0]``).
        generator : torch.Generator or RandomStreams, optional
            Randomness of the proposal (on the logits' device) and of resampling. Streams: one
            per run (a single one here); the particles draw from its children
            (:meth:`RandomStreams.spawn`), resampling and the final choice from the stream
            itself, so a run's draws do not depend on the other runs of a batch.

        Returns
        -------
        SMCResult

        Raises
        ------
        ValueError
            For a negative ``max_tokens``, no EOS id, a session of another batch size, or
            streams that are not one per run.
        SamplerError
            If the potential returns NaN or ``+inf``.
        InternalError
            If the proposal chose a token the grammar rejects (a bug in constrain).
        """
        return self.run_batch(
            session,
            [matcher],
            eos_ids=eos_ids,
            max_tokens=max_tokens,
            pad_id=pad_id,
            generator=generator,
        )[0]

    def run_batch(
        self,
        session: ParticleSession,
        matchers: Sequence[Matcher],
        *,
        eos_ids: Sequence[int],
        max_tokens: int,
        pad_id: int | None = None,
        generator: Randomness = None,
    ) -> list[SMCResult]:
        """Run independent SMC runs side by side, one per matcher, in one session.

        Run ``r`` owns the session rows ``r * n_particles`` to ``(r + 1) * n_particles - 1``
        (the session has ``len(matchers) * n_particles`` rows); resampling never mixes runs.
        Parameters and result as :meth:`run`, one :class:`SMCResult` per matcher.
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if not eos_ids:
            raise ValueError("eos_ids must name at least one end-of-sequence token")
        if not matchers:
            raise ValueError("run_batch needs at least one matcher")
        t_start = time.perf_counter()
        n = self.n_particles
        runs = len(matchers)
        total = runs * n
        eos = {int(e) for e in eos_ids}
        eos_list = sorted(eos)
        pad = int(eos_ids[0]) if pad_id is None else int(pad_id)
        run_rngs: list[Randomness] = [generator] * runs
        particle_rng: Randomness = generator
        if isinstance(generator, RandomStreams):
            if len(generator) != runs:
                raise ValueError(f"{len(generator)} random streams for {runs} SMC runs")
            run_rngs = [generator.rows([r]) for r in range(runs)]
            particle_rng = generator.spawn(n)
        phi0 = self._phi("", False) if self.potential is not None else 0.0
        forks = [m.fork() for m in matchers]
        parts = _Particles([forks[r] for r in range(runs) for _ in range(n)], phi0)
        share = isinstance(self.proposal, AWRS)
        if not share:
            parts.unshare()
        ess_hist: list[list[float]] = [[] for _ in range(runs)]
        resamples = [0] * runs
        pool = ThreadPoolExecutor(max_workers=1) if self.overlap is not False else None
        steps = 0
        try:
            logits = self._forward(session, None, parts, pool)
            if logits.ndim != 2 or logits.shape[0] != total:
                raise ValueError(
                    f"the session has {logits.shape[0]} rows; SMC needs n_particles * runs = "
                    f"{n} * {runs} = {total}"
                )
            while any(parts.alive):
                live = [i for i in range(total) if parts.alive[i]]
                if steps == max_tokens:
                    self._force_end(parts, live, logits, eos_list)
                    break
                self._step(parts, live, logits, eos, particle_rng)
                steps += 1
                reorder = self._maybe_resample(parts, run_rngs, ess_hist, resamples)
                if reorder is not None:
                    session.reorder(torch.tensor(reorder, dtype=torch.long))
                    if not share:
                        parts.unshare()
                if not any(parts.alive):
                    break
                feed = [parts.tokens[i][-1] if parts.alive[i] else pad for i in range(total)]
                logits = self._forward(session, torch.tensor(feed, dtype=torch.long), parts, pool)
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        seconds = time.perf_counter() - t_start
        if isinstance(generator, RandomStreams):
            uniforms = np.concatenate([_uniforms(1, rng) for rng in run_rngs])
        else:
            uniforms = _uniforms(runs, generator)
        results = []
        for r in range(runs):
            rows = range(r * n, (r + 1) * n)
            lw = parts.logw[r * n : (r + 1) * n]
            chosen: int | None = None
            if np.isfinite(lw).any():
                chosen = int(resample_indices(lw, uniforms[r : r + 1], "multinomial")[0])
            results.append(
                SMCResult(
                    token_ids=[parts.tokens[i] for i in rows],
                    texts=[_text(parts.raw[i], True) for i in rows],
                    log_weights=lw.tolist(),
                    finish_reasons=[parts.reasons[i] for i in rows],
                    chosen=chosen,
                    log_marginal_likelihood=_logmeanexp(lw),
                    ess=ess_hist[r],
                    resamples=resamples[r],
                    steps=steps,
                    seconds=seconds,
                )
            )
        return results

    # -- one step -------------------------------------------------------------------------------

    def _phi(self, text: str, complete: bool) -> float:
        assert self.potential is not None
        value = float(self.potential(text, complete))
        if math.isnan(value) or value == math.inf:
            raise SamplerError(
                f"the potential returned {value} for {text!r} (complete={complete}); it must "
                "return a finite log-score or -inf"
            )
        return value

    def _forward(
        self,
        session: ParticleSession,
        feed: torch.Tensor | None,
        parts: _Particles,
        pool: ThreadPoolExecutor | None,
    ) -> torch.Tensor:
        """Run the forward pass and the proposal's ``prepare`` (concurrently with a pool)."""
        view: list[Matcher | None] = [
            m if a else None for m, a in zip(parts.matchers, parts.alive, strict=True)
        ]
        live = [i for i, a in enumerate(parts.alive) if a]
        if pool is None:
            logits = session.forward(feed)
            self.proposal.prepare(view, live)
            return logits
        job: Future[None] = pool.submit(self.proposal.prepare, view, live)
        logits = session.forward(feed)
        job.result()
        return logits

    def _step(
        self,
        parts: _Particles,
        live: list[int],
        logits: torch.Tensor,
        eos: set[int],
        generator: Randomness,
    ) -> None:
        """Extend every live particle by one proposed token and update its weight."""
        view: list[Matcher | None] = [
            m if a else None for m, a in zip(parts.matchers, parts.alive, strict=True)
        ]
        sample = self.proposal.sample(logits, view, generator)
        ids = sample.token_ids.tolist()
        lw = sample.log_weights.tolist()
        refs: dict[int, int] = {}
        for m in parts.matchers:
            refs[id(m)] = refs.get(id(m), 0) + 1
        for i in live:
            tok = int(ids[i])
            m = parts.matchers[i]
            if refs[id(m)] > 1:  # shared with other particles: advance a copy
                refs[id(m)] -= 1
                m = m.fork()
                parts.matchers[i] = m
            if not m.accept_token(tok):
                raise InternalError(
                    f"particle {i}: the proposal chose token {tok}, which the grammar rejects. "
                    "This is a bug in constrain; please report it with the grammar."
                )
            parts.logw[i] += lw[i]
            done = tok in eos
            if not done:
                parts.tokens[i].append(tok)
                parts.raw[i] += m.vocab.token_bytes_of(tok)
            if done:
                parts.alive[i] = False
                parts.reasons[i] = "stop"
            if self.potential is not None:
                phi = self._phi(_text(parts.raw[i], done), done)
                parts.logw[i] += phi - parts.phi[i]
                parts.phi[i] = phi
                if phi == -math.inf:
                    parts.logw[i] = -math.inf
                    if not done:
                        parts.alive[i] = False
                        parts.reasons[i] = "rejected"

    def _force_end(
        self, parts: _Particles, live: list[int], logits: torch.Tensor, eos_list: list[int]
    ) -> None:
        """At ``max_tokens``: end complete outputs with EOS, rule out incomplete ones."""
        logp = torch.log_softmax(logits[live].double(), dim=-1)
        eos_logp = torch.logsumexp(logp[:, eos_list], dim=-1).cpu().tolist()
        for k, i in enumerate(live):
            parts.alive[i] = False
            parts.reasons[i] = "length"
            m = parts.matchers[i]
            if not m.is_accepting():
                parts.logw[i] = -math.inf
                continue
            parts.logw[i] += eos_logp[k]
            if self.potential is not None:
                phi = self._phi(_text(parts.raw[i], True), True)
                parts.logw[i] += phi - parts.phi[i]
                parts.phi[i] = phi

    def _maybe_resample(
        self,
        parts: _Particles,
        run_rngs: list[Randomness],
        ess_hist: list[list[float]],
        resamples: list[int],
    ) -> list[int] | None:
        """Resample the runs whose ESS fell below the threshold; return the row permutation.

        ``run_rngs`` holds each run's randomness (the same generator for all, or its stream).
        """
        n = self.n_particles
        runs = len(run_rngs)
        order: list[int] | None = None
        for r in range(runs):
            lo, hi = r * n, (r + 1) * n
            lw = parts.logw[lo:hi]
            ess = effective_sample_size(lw)
            ess_hist[r].append(ess)
            if ess == 0.0 or ess >= self.ess_threshold * n or not any(parts.alive[lo:hi]):
                continue
            idx = resample_indices(lw, _uniforms(n, run_rngs[r]), self.resample)
            if order is None:
                order = list(range(runs * n))
            order[lo:hi] = (idx + lo).tolist()
            parts.logw[lo:hi] = _logmeanexp(lw)
            resamples[r] += 1
        if order is not None:
            parts.reorder(order)  # a resampled run's particles all carry its mean weight
        return order
