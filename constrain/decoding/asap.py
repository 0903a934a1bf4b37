r"""Grammar-aligned decoding: ASAp, adaptive sampling with approximate expected futures.

Locally constrained decoding (:class:`~constrain.sampling.MaskedSampler`) samples each token
from ``P(t | w)`` restricted to the tokens the grammar allows. The sequence distribution this
gives is *not* the model conditioned on the output being grammatical,
``P(y | y in L) ∝ P(y) 1[y in L]``: a prefix that the grammar allows but whose grammatical
continuations the model finds unlikely is taken as often as the model likes its first token.
The exact target samples

.. math::

    Q^*(t \mid w) \propto P(t \mid w)\, \mathrm{EFG}(w t), \qquad
    \mathrm{EFG}(w) = \sum_y P(y \mid w)\, 1[w y \in L],

where the *expected future grammaticality* ``EFG`` is intractable. ASAp (Park et al., 2024)
over-approximates it with an estimate ``Ẽ`` that every sample refines:

1. A trie over the sampled token prefixes stores, at each visited prefix ``w``, the model's
   ``P(t | w)`` for the allowed tokens and the estimates ``Ẽ(w t)`` of its children: ``1`` for
   an allowed child not yet explored, ``0`` for a disallowed one, ``1`` for EOS when the
   grammar accepts ``w``.
2. A sample is drawn with ``Q(t | w) ∝ P(t | w) Ẽ(w t)`` (the first sample, when every ``Ẽ``
   is 1, is exactly masked sampling).
3. After the sample, ``Ẽ(w) = Σ_t P(t | w) Ẽ(w t)`` is recomputed bottom-up along its path.

``Ẽ`` only decreases, stays an upper bound of ``EFG``, and equals it once every continuation
under ``w`` has been explored, so the sample distribution converges to ``P(y | y in L)``. Call
:meth:`ASAp.sample` repeatedly on the same object (same prompt, same grammar) to converge; the
trie is the memory of what was learned. Each sample also carries its importance weight
``log P(y) - log Q(y)`` with respect to the unnormalised target ``P(y) 1[y in L]``, so weighted
estimates are consistent from the first sample on.

Implementation notes
--------------------
- A trie node keeps only its explored children (edge probability and estimate) and the
  probability mass ``U(w)`` of its allowed but unexplored tokens, never a vocabulary-sized
  array, so a long JSON output does not cost a vocabulary row per token. Sampling at a node
  first picks an explored child (weight ``P(t|w) Ẽ(w t)``) or "unexplored" (weight ``U(w)``);
  only the latter needs the model's logits and the grammar's mask at ``w``.
- The model and the matcher are evaluated lazily: a path that stays inside the explored trie
  costs no forward pass and no mask. When a sample leaves it, a fresh session (from the
  session factory) is fed the path so far, one token per forward pass, which costs what plain
  decoding up to that point would have.
- ``max_tokens`` bounds the output: a prefix of ``max_tokens`` tokens may only be followed by
  EOS (and only when the grammar accepts it), so the target is ``P(y | y in L, |y| <=
  max_tokens)``. A prefix of that length that the grammar does not accept has ``Ẽ = 0``; a
  sample that reaches it ends with ``finish_reason="length"`` and ``log_weight = -inf``, and
  later samples avoid it.

References
----------
.. [1] K. Park, J. Wang, T. Berg-Kirkpatrick, N. Polikarpova and L. D'Antoni, "Grammar-Aligned
   Decoding", Advances in Neural Information Processing Systems 37 (NeurIPS 2024),
   arXiv:2405.21047.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from constrain.decoding.autoregressive import DecodeResult, DecodingSession
from constrain.decoding.method import DecodeJob, MethodOutcome, SamplingOptions
from constrain.errors import InternalError, SamplerError
from constrain.matcher import Matcher
from constrain.sampling.masked import gumbel_argmax
from constrain.sampling.streams import Randomness, RandomStreams, draw_uniform

__all__ = ["ASAp", "ASApSample", "NamedASAp"]

_NEG_INF = float("-inf")


class ASApSample(NamedTuple):
    """One sample of :meth:`ASAp.sample`."""

    token_ids: list[int]
    """The generated tokens (EOS excluded)."""
    finish_reason: str
    """``"stop"``: ended with EOS, the output is in the language. ``"length"``: the sample
    reached ``max_tokens`` tokens where the grammar does not accept; it is incomplete."""
    log_p: float
    """``log P(y, EOS)`` under the model (at the sampler's temperature); for an incomplete
    sample, the log-probability of its prefix."""
    log_q: float
    """The log-probability that ASAp's proposal gave this sample."""

    @property
    def log_weight(self) -> float:
        """Return ``log P(y) - log Q(y)``, the importance weight for ``P(y) 1[y in L]``.

        ``-inf`` when incomplete. Self-normalised over samples, it gives consistent estimates
        of expectations under ``P(y | y in L)``.
        """
        return self.log_p - self.log_q if self.finish_reason == "stop" else _NEG_INF


class _Node:
    """A prefix ``w`` in the trie."""

    __slots__ = ("children", "expanded", "log_e", "log_u", "logp")

    def __init__(self, logp: float) -> None:
        self.logp = logp
        """``log P(t | parent)`` of the edge into this node."""
        self.log_e = 0.0
        """``log Ẽ(w)``: 0 (Ẽ = 1) until the node is expanded and updated."""
        self.log_u = 0.0
        """Log of the probability mass of the allowed tokens not yet explored."""
        self.children: dict[int, _Node] = {}
        self.expanded = False


class _Cursor:
    """The model and the matcher of one sample, advanced lazily along its path."""

    def __init__(self, factory: Callable[[], DecodingSession], matcher: Matcher) -> None:
        self.factory = factory
        self.session: DecodingSession | None = None
        self.fed = 0
        self.logits: torch.Tensor | None = None
        self.matcher = matcher
        self.accepted = 0
        self.forward_passes = 0

    def logits_at(self, path: list[int]) -> torch.Tensor:
        """Return the next-token logits ``(C,)`` after ``path``."""
        if self.session is None:
            self.session = self.factory()
            self.logits = self.session.forward(None)
            self.forward_passes += 1
            self.fed = 0
        while self.fed < len(path):
            tok = torch.tensor([path[self.fed]], dtype=torch.long)
            self.logits = self.session.forward(tok)
            self.forward_passes += 1
            self.fed += 1
        assert self.logits is not None
        return self.logits[0]

    def allowed_at(self, path: list[int]) -> np.ndarray:
        """Return the sorted token ids the grammar allows after ``path``."""
        m = self.matcher
        while self.accepted < len(path):
            tok = path[self.accepted]
            if not m.accept_token(tok):
                raise SamplerError(
                    f"the grammar rejects token {tok} that it allowed before at the same prefix; "
                    "ASAp needs the same grammar and start state on every call (reset() it, "
                    "or pass a new key=)"
                )
            self.accepted += 1
        return np.asarray(m.allowed_token_ids(), dtype=np.int64)

    def close(self) -> None:
        if self.accepted:
            self.matcher.rollback(self.accepted)
            self.accepted = 0


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values, default=_NEG_INF)
    if top == _NEG_INF:
        return _NEG_INF
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


class ASAp:
    """Sample ``P(y | y in L)`` asymptotically exactly, learning from previous samples (ASAp).

    Parameters
    ----------
    temperature : float, optional
        The model distribution is ``softmax(logits / temperature)`` (default 1). Must be > 0:
        ASAp samples.

    Attributes
    ----------
    forward_passes : int
        Model forward passes (prefills included) since the last :meth:`reset`; once the
        language's likely part is explored, samples cost none.

    Notes
    -----
    One trie belongs to one prompt, one grammar (and start state) and one ``max_tokens``:
    :meth:`sample` starts a new trie when its ``key``, the matcher's compiled grammar, the EOS
    ids or ``max_tokens`` change. Pass ``key=`` (e.g. the prompt's token ids) when the same
    object serves several prompts.

    Samples are drawn one after the other, each with the trie as the previous one left it (the
    sequential algorithm of the paper, not a batched variant).

    Examples
    --------
    >>> asap = ASAp()
    >>> factory = lambda: model.start([prompt_ids])  # doctest: +SKIP
    >>> samples = asap.sample(factory, matcher, n=100, max_tokens=64)  # doctest: +SKIP
    >>> samples[-1].token_ids, asap.trie_size  # doctest: +SKIP

    References
    ----------
    .. [1] K. Park, J. Wang, T. Berg-Kirkpatrick, N. Polikarpova and L. D'Antoni,
       "Grammar-Aligned Decoding", NeurIPS 2024, arXiv:2405.21047.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        if not temperature > 0.0 or math.isinf(temperature):
            raise ValueError(
                f"ASAp samples: temperature must be > 0 and finite, got {temperature!r}"
            )
        self.temperature = float(temperature)
        self._root = _Node(0.0)
        self._size = 1
        self._samples = 0
        self._signature: tuple[object, ...] | None = None
        self._compiled_ref: object = None
        self.forward_passes = 0

    def __repr__(self) -> str:
        return (
            f"ASAp(temperature={self.temperature}, trie_size={self._size}, samples={self._samples})"
        )

    name = "asap"
    """Its name as a decoding method (``GenerationResult.sampler``)."""

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """Draw one sample per prompt of ``job`` from this object's trie (keyed by the prompt)."""
        return _sample_rows(job, lambda prompt_ids: self)

    # -- state -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the trie (start learning from scratch)."""
        self._root = _Node(0.0)
        self._size = 1
        self._samples = 0
        self._signature = None
        self.forward_passes = 0

    @property
    def trie_size(self) -> int:
        """Number of prefixes in the trie (the root and every explored token, EOS included)."""
        return self._size

    @property
    def num_samples(self) -> int:
        """Samples drawn since the last :meth:`reset`."""
        return self._samples

    def expected_future(self, prefix: Sequence[int] = ()) -> float | None:
        """Return the current estimate ``Ẽ(prefix)`` of the expected future grammaticality.

        ``None`` when ``prefix`` is not in the trie (an allowed unexplored prefix counts as 1,
        a disallowed one as 0). An EOS token in ``prefix`` ends it.
        """
        node = self._root
        for tok in prefix:
            child = node.children.get(int(tok))
            if child is None:
                return None
            node = child
        return math.exp(node.log_e)

    # -- sampling ----------------------------------------------------------------------------

    def sample(
        self,
        session_factory: Callable[[], DecodingSession],
        matcher: Matcher,
        *,
        max_tokens: int,
        n: int = 1,
        eos_ids: Sequence[int] | None = None,
        generator: Randomness = None,
        key: Hashable = None,
    ) -> list[ASApSample]:
        """Draw ``n`` samples one after the other, refining the trie after each.

        Parameters
        ----------
        session_factory : callable
            Returns a fresh one-row :class:`~constrain.decoding.DecodingSession` positioned
            after the prompt (e.g. ``lambda: model.start([prompt_ids])``). Called at most once
            per sample, and only when the sample leaves the explored trie.
        matcher : Matcher
            The grammar at the start of the output. Used (and rolled back) during the call; it
            is left in its initial state.
        max_tokens : int
            Most tokens per output (EOS not counted).
        n : int, optional
            Number of samples (default 1).
        eos_ids : sequence of int, optional
            End-of-sequence ids (default: the matcher's vocabulary's).
        generator : torch.Generator or RandomStreams, optional
            Randomness (on the logits' device). With the same seed, the first sample of a new
            trie is the one :class:`~constrain.sampling.MaskedSampler` at the same temperature
            draws.
        key : hashable, optional
            Identifies the prompt: a different key than the previous call's starts a new trie.

        Returns
        -------
        list of ASApSample

        Raises
        ------
        ValueError
            For a negative ``max_tokens`` or ``n``, or no EOS id.
        SamplerError
            If the grammar rejects a token it allowed before at the same prefix (the matcher's
            grammar or start state changed under the same ``key``).
        InternalError
            If no unexplored allowed token is left where the trie says there is one (a bug in
            constrain).
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        eos = tuple(
            sorted({int(e) for e in (matcher.vocab.eos_ids if eos_ids is None else eos_ids)})
        )
        if not eos:
            raise ValueError("eos_ids must name at least one end-of-sequence token")
        signature = (key, id(matcher.compiled), eos, int(max_tokens))
        if self._signature != signature:
            if self._signature is not None:
                self.reset()
            self._signature = signature
            self._compiled_ref = matcher.compiled  # keeps id() unique while the trie lives
        return [
            self._sample_one(session_factory, matcher, int(max_tokens), eos, generator)
            for _ in range(n)
        ]

    def decode(
        self,
        session_factory: Callable[[], DecodingSession],
        matcher: Matcher,
        *,
        max_tokens: int,
        n: int = 1,
        eos_ids: Sequence[int] | None = None,
        generator: Randomness = None,
        key: Hashable = None,
    ) -> DecodeResult:
        """Like :meth:`sample`, as a :class:`~constrain.decoding.DecodeResult` (one row a sample).

        ``log_weights[i]`` is ``samples[i].log_weight`` (``log P(y) - log Q(y)``, the same
        quantity as :class:`~constrain.sampling.MaskedSampler`'s summed weights);
        ``finish_reasons[i] == "length"`` marks an incomplete output (never accepted).
        """
        t0 = time.perf_counter()
        passes = self.forward_passes
        samples = self.sample(
            session_factory,
            matcher,
            max_tokens=max_tokens,
            n=n,
            eos_ids=eos_ids,
            generator=generator,
            key=key,
        )
        return DecodeResult(
            token_ids=[s.token_ids for s in samples],
            finish_reasons=[s.finish_reason for s in samples],
            log_weights=[s.log_weight for s in samples],
            steps=max((len(s.token_ids) for s in samples), default=0),
            seconds=time.perf_counter() - t0,
            timings={"forward_passes": float(self.forward_passes - passes)},
        )

    def _sample_one(
        self,
        factory: Callable[[], DecodingSession],
        matcher: Matcher,
        max_tokens: int,
        eos: tuple[int, ...],
        generator: Randomness,
    ) -> ASApSample:
        cursor = _Cursor(factory, matcher)
        path: list[int] = []
        nodes = [self._root]
        log_p = log_q = 0.0
        finish = "length"
        node = self._root
        try:
            while True:
                logits: torch.Tensor | None = None
                allowed: np.ndarray | None = None
                if not node.expanded:
                    logits, allowed = self._observe(cursor, path, max_tokens, eos)
                    self._expand(node, logits, allowed)
                log_z = node.log_u
                if node.children:
                    log_z = _logsumexp([log_z, *(c.logp + c.log_e for c in node.children.values())])
                if log_z == _NEG_INF:
                    break  # no grammatical continuation within max_tokens: incomplete
                tok = -1
                if node.children:
                    tok = self._pick_explored(node, log_z, generator)
                if tok < 0:  # a fresh node, or the unexplored mass was picked
                    if logits is None:
                        logits, allowed = self._observe(cursor, path, max_tokens, eos)
                    assert allowed is not None
                    tok = self._pick_unexplored(node, logits, allowed, generator)
                child = node.children[tok]
                log_p += child.logp
                log_q += child.logp + child.log_e - log_z
                nodes.append(child)
                if tok in eos:
                    finish = "stop"
                    break
                path.append(tok)
                node = child
        finally:
            cursor.close()
            self.forward_passes += cursor.forward_passes
        self._update(nodes)
        self._samples += 1
        return ASApSample(path, finish, log_p, log_q)

    def _observe(
        self, cursor: _Cursor, path: list[int], max_tokens: int, eos: tuple[int, ...]
    ) -> tuple[torch.Tensor, np.ndarray]:
        allowed = cursor.allowed_at(path)
        if len(path) >= max_tokens:
            allowed = allowed[np.isin(allowed, np.asarray(eos, dtype=np.int64))]
        if allowed.size == 0:  # a dead end: no need for the model
            return torch.empty(0), allowed
        return cursor.logits_at(path), allowed

    def _expand(self, node: _Node, logits: torch.Tensor, allowed: np.ndarray) -> None:
        node.expanded = True
        if allowed.size == 0:
            node.log_u = node.log_e = _NEG_INF
            return
        scores = logits.float() / self.temperature
        lse_all = torch.logsumexp(scores.double(), dim=-1)
        idx = torch.as_tensor(allowed, device=scores.device)
        lse_allowed = torch.logsumexp(scores[idx].double(), dim=-1)
        node.log_u = node.log_e = float(lse_allowed - lse_all)

    def _pick_explored(self, node: _Node, log_z: float, generator: Randomness) -> int:
        """Pick an explored child with ``P Ẽ / Z``; return -1 for the unexplored mass."""
        u = float(draw_uniform((), generator))
        acc = 0.0
        last = -1
        for tok, child in node.children.items():
            weight = math.exp(child.logp + child.log_e - log_z)
            if weight <= 0.0:
                continue
            acc += weight
            last = tok
            if u < acc:
                return tok
        if node.log_u == _NEG_INF:
            return last  # rounding: the explored children hold all the mass
        return -1

    def _pick_unexplored(
        self,
        node: _Node,
        logits: torch.Tensor,
        allowed: np.ndarray,
        generator: Randomness,
    ) -> int:
        """Sample an unexplored allowed token with probability ``∝ P(t | w)``; add the child.

        Draws like :class:`~constrain.sampling.MaskedSampler` (the Gumbel-max trick over the
        full row, with the same draws from the generator), so a fresh node chooses what
        ``MaskedSampler`` chooses with the same generator state.
        """
        scores = logits.float() / self.temperature
        mask = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
        mask[torch.as_tensor(allowed, device=scores.device)] = True
        if node.children:
            explored = torch.tensor(list(node.children), dtype=torch.long, device=scores.device)
            mask[explored] = False
        tok = int(gumbel_argmax(scores.masked_fill(~mask, _NEG_INF), generator))
        if not bool(mask[tok]):
            raise InternalError("ASAp found no unexplored allowed token (a bug in constrain)")
        # log P(t | w), and the exact mass left unexplored
        logp_all = scores.double() - torch.logsumexp(scores.double(), dim=-1)
        mask[tok] = False
        rest = logp_all.masked_fill(~mask, _NEG_INF)
        node.log_u = float(torch.logsumexp(rest, dim=-1)) if bool(mask.any()) else _NEG_INF
        node.children[tok] = _Node(float(logp_all[tok]))
        self._size += 1
        return tok

    def _update(self, nodes: list[_Node]) -> None:
        """Recompute ``Ẽ`` bottom-up along a sample's path."""
        last = nodes[-1]
        if not last.expanded:  # an EOS leaf: the output is complete, Ẽ = 1 exactly
            last.expanded = True
            last.log_u = _NEG_INF
            last.log_e = 0.0
        for node in reversed(nodes[:-1]):
            node.log_e = _logsumexp(
                [node.log_u, *(c.logp + c.log_e for c in node.children.values())]
            )


def _sample_rows(job: DecodeJob, trie_for: Callable[[list[int]], ASAp]) -> MethodOutcome:
    """Draw one sample per prompt of ``job``, from the ASAp object ``trie_for(prompt_ids)``."""
    tokens, reasons, weights, complete, details = [], [], [], [], []
    for k, (ids, m) in enumerate(zip(job.prompt_ids, job.matchers, strict=True)):
        rng = job.generator
        if isinstance(rng, RandomStreams):  # prompt k draws from its own stream
            rng = rng.rows([k])
        (got,) = trie_for(ids).sample(
            functools.partial(job.model.start, [ids]),
            m,
            max_tokens=job.max_tokens,
            n=1,
            eos_ids=job.model.eos_ids,
            generator=rng,
            key=(tuple(ids),),
        )
        tokens.append(list(got.token_ids))
        reasons.append(got.finish_reason)
        weights.append(got.log_weight)
        complete.append(got.finish_reason == "stop")
        details.append(got)
    result = DecodeResult(token_ids=tokens, finish_reasons=reasons, log_weights=weights)
    return MethodOutcome(result, ASAp.name, complete=complete, details=details)


# ASAp's trie only helps across calls: sampler="asap" keeps one per (model, grammar, prompt,
# max_tokens, temperature), the most recent ones.
_TRIES: OrderedDict[tuple[Any, ...], ASAp] = OrderedDict()
_TRIES_KEPT = 32


class NamedASAp:
    """``generate(sampler="asap")``: ASAp whose tries are kept across calls.

    One trie per (model, grammar, prompt, ``max_tokens``, temperature), for the 32 most recent
    combinations, so repeated calls converge to the model's distribution conditioned on the
    grammar; a combination not seen before starts from ``fresh``.

    Parameters
    ----------
    fresh : ASAp
        The sampler (with its options) for a combination not seen before.
    """

    name = ASAp.name

    def __init__(self, fresh: ASAp) -> None:
        self.fresh = fresh

    def __repr__(self) -> str:
        return f"NamedASAp({self.fresh!r})"

    @classmethod
    def from_options(cls, sampling: SamplingOptions, options: Mapping[str, Any]) -> NamedASAp:
        """``generate(sampler="asap", **options)``: :class:`ASAp`'s keywords (temperature 1).

        Raises
        ------
        TypeError
            For an option :class:`ASAp` does not take.
        ValueError
            For a temperature that is not positive and finite.
        """
        return cls(ASAp(**{"temperature": sampling.sampling_temperature, **options}))

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """Draw one sample per prompt of ``job``, each from its combination's kept trie."""

        def trie_for(prompt_ids: list[int]) -> ASAp:
            key = (
                id(job.model),
                job.compiled,
                tuple(prompt_ids),
                job.max_tokens,
                self.fresh.temperature,
            )
            found = _TRIES.get(key)
            if found is None:
                _TRIES[key] = found = self.fresh
                while len(_TRIES) > _TRIES_KEPT:
                    _TRIES.popitem(last=False)
            _TRIES.move_to_end(key)
            return found

        return _sample_rows(job, trie_for)
