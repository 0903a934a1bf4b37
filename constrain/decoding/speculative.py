"""Grammar-aware speculative decoding, exact in distribution (stage 7).

Each iteration, for every live row of the batch:

1. **Draft.** Drafters propose up to ``max_draft`` tokens that follow the *pending* token (the
   last token chosen, not yet fed to the model). They run in a chain, each extending what the
   previous ones proposed: the grammar's forced text first (jump-forward), then prompt lookup,
   then a model drafter. Every proposed token is checked against the row's matcher as it is
   offered (:meth:`DraftRequest.offer`), so no drafted token is ever invalid, whatever the
   drafter proposes.
2. **Verify.** One forward pass of the target over ``[pending, d_1, ..., d_k]`` gives the
   target's logits at all ``k + 1`` positions. Position ``j`` is masked with the matcher's state
   after ``d_1 .. d_j`` (the masked target, the distribution :class:`~constrain.sampling.
   MaskedSampler` samples at that step, temperature/top-k/top-p included). Drafts are
   deterministic proposals (a point mass ``q``), so Leviathan et al.'s rule reduces to: accept
   ``d_j`` with probability ``p'(d_j)``; on rejection draw from ``p'`` with ``d_j`` removed,
   renormalised; if all ``k`` are accepted, draw a bonus token from position ``k + 1``. This
   is implemented as a coupling: the token of position ``j`` is drawn from ``p'`` by the
   Gumbel-max trick with the row's next random draw, exactly as non-speculative masked
   sampling draws it, and ``d_j`` is accepted iff it is that token (probability ``p'(d_j)``;
   on rejection the token is a draw from ``p'`` without ``d_j``). Each emitted token is
   therefore distributed exactly as in non-speculative masked sampling, and, with per-row
   random streams (:class:`~constrain.sampling.RandomStreams`, what ``generate(seed=...)``
   uses), it is the very token non-speculative sampling would draw from the same logits,
   whatever was drafted: the adaptive draft length changes the speed, never the output. In
   greedy mode a draft is accepted iff it is the masked argmax (ties go to the lower id, as in
   ``torch.argmax``), so the output is the non-speculative greedy output.
3. **Commit.** The matcher keeps the accepted drafts and the emitted token (the rest was never
   accepted: drafting advanced the matcher and rolled it back before verification), and the
   session keeps ``1 + accepted`` of the ``k + 1`` positions it appended
   (:meth:`SpeculativeSession.keep`): rejected positions are masked out of attention and the
   key-value cache is cropped to the longest row.

Greedy verification usually needs no full mask: a draft whose logit no other token beats is the
masked argmax at once, and when a few tokens beat it, checking those few with the matcher
decides (at most ``_GREEDY_CHECKS``, else the full mask is computed).

Distribution: this samples the *locally masked* distribution, like every speculative decoder
with mask access (../docs/sampling.md), not ``P(x | x in L)``; for that, use the ``smc`` or
``asap`` samplers without speculation.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from constrain.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from constrain.decoding.autoregressive import DecodeResult, TokenMethod
from constrain.decoding.draft_policy import DraftPolicy
from constrain.decoding.drafters import (
    Drafter,
    DraftModelDrafter,
    DraftRequest,
    EarlyExitDrafter,
    GrammarDrafter,
    PromptLookupDrafter,
    TokenText,
    ragged_block,
)
from constrain.decoding.method import (
    DecodeJob,
    DecodingMethod,
    LanguageModel,
    MethodOutcome,
    Steps,
    drain,
)
from constrain.errors import InternalError
from constrain.matcher import Matcher
from constrain.sampling.masked import MaskedSampler, gumbel_argmax, tempered_scores
from constrain.sampling.streams import Randomness, RandomStreams

__all__ = [
    "DRAFTER_NAMES",
    "DraftModelDrafter",
    "DraftRequest",
    "Drafter",
    "EarlyExitDrafter",
    "GrammarDrafter",
    "PromptLookupDrafter",
    "SpeculativeMethod",
    "SpeculativeResult",
    "SpeculativeSession",
    "SpeculativeSpec",
    "SpeculativeStats",
    "TokenText",
    "iter_speculative_decode",
    "resolve_drafters",
    "speculative_decode",
    "speculative_target",
]

_GREEDY_CHECKS = 16
"""Most higher-ranked tokens greedy verification checks one by one before filling a mask."""


class SpeculativeSession(Protocol):
    """A model with a key-value cache that can append several positions and drop some again."""

    def forward(self, token_ids: torch.Tensor | None) -> torch.Tensor:
        """Prefill (``None``): the next-token logits ``(B, C)`` after the prompts."""
        ...

    def extend(self, token_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Append ``token_ids`` ``(B, T)``; return the logits ``(B, T, C)`` after each one.

        Positions where ``valid`` ``(B, T)`` is false are padding: masked out of attention and
        of the positions of later tokens.
        """
        ...

    def keep(self, counts: Sequence[int]) -> None:
        """Of the positions the last :meth:`extend` appended, row ``i`` keeps ``counts[i]``."""
        ...


@dataclass
class SpeculativeStats:
    """Counters of one speculative decode (all rows together)."""

    forwards: int = 0
    """Target forward passes after the prefill (verification passes)."""
    output_tokens: int = 0
    """Tokens emitted (EOS excluded)."""
    drafted: dict[str, int] = field(default_factory=dict)
    """Tokens each drafter proposed (and the grammar allowed)."""
    accepted: dict[str, int] = field(default_factory=dict)
    """Of those, how many verification accepted."""
    forced_tokens: int = 0
    """Output tokens the grammar forced: the only token its mask allowed (counted where a full
    mask was computed: at every position when sampling, at corrections in greedy mode)."""
    forced_checked: int = 0
    """Positions where a full mask was computed (the denominator of ``forced_tokens``)."""
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    forward_seconds: float = 0.0

    @property
    def forwards_per_token(self) -> float:
        """Target forward passes per output token (non-speculative decoding: about 1)."""
        return self.forwards / self.output_tokens if self.output_tokens else math.nan

    def acceptance(self, name: str) -> float:
        """Share of drafter ``name``'s tokens that verification accepted."""
        d = self.drafted.get(name, 0)
        return self.accepted.get(name, 0) / d if d else math.nan

    def as_dict(self) -> dict[str, Any]:
        """Return the counters as a JSON-ready dict."""
        return {
            "forwards": self.forwards,
            "output_tokens": self.output_tokens,
            "forwards_per_token": self.forwards_per_token,
            "drafted": dict(self.drafted),
            "accepted": dict(self.accepted),
            "forced_tokens": self.forced_tokens,
            "forced_checked": self.forced_checked,
            "draft_seconds": self.draft_seconds,
            "verify_seconds": self.verify_seconds,
            "forward_seconds": self.forward_seconds,
        }


@dataclass
class SpeculativeResult(DecodeResult):
    """:class:`DecodeResult` plus the speculation counters."""

    stats: SpeculativeStats = field(default_factory=SpeculativeStats)


# -- verification -----------------------------------------------------------------------------


class _Target:
    """The masked target distribution (what MaskedSampler samples) and its randomness."""

    def __init__(self, temperature: float, top_k: int, top_p: float, generator: Randomness) -> None:
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.generator = generator

    def randomness(self, batch: int) -> list[Randomness]:
        """Return what each of ``batch`` rows draws from: its own stream, or the generator.

        Raises
        ------
        ValueError
            If the streams are not one per row.
        """
        gen = self.generator
        if not isinstance(gen, RandomStreams):
            return [gen] * batch
        if len(gen) != batch:
            raise ValueError(f"{len(gen)} random streams for {batch} rows")
        return [gen.rows([i]) for i in range(batch)]


class _Verifier:
    """Masks one row's positions with its matcher and applies the acceptance rule."""

    def __init__(self, target: _Target, eos_ids: Sequence[int], backend: str) -> None:
        self.target = target
        self.eos = {int(e) for e in eos_ids}
        self.stats = SpeculativeStats()
        self.backend = backend
        self._row: torch.Tensor | None = None

    def _mask(self, m: Matcher, logits: torch.Tensor) -> torch.Tensor:
        """Return ``logits`` (C,) with the disallowed tokens at -inf (a copy)."""
        vs = m.vocab.size
        if self._row is None or self._row.shape[1] != (vs + 31) // 32:
            self._row = allocate_token_bitmask(1, vs)
        m.fill_next_token_bitmask(self._row, 0)
        out = logits.float().clone().view(1, -1)
        apply_token_bitmask_inplace(out, self._row, vocab_size=vs, backend=self.backend)  # type: ignore[arg-type]
        # forced = exactly one bit set: one nonzero word, a power of two
        words = self._row.numpy().view(np.uint32).reshape(-1)
        nonzero = np.flatnonzero(words)
        self.stats.forced_checked += 1
        if nonzero.shape[0] == 1:
            w = int(words[nonzero[0]])
            if w & (w - 1) == 0:
                self.stats.forced_tokens += 1
        return out.view(-1)

    def _allowed(self, m: Matcher | None, tok: int) -> bool:
        if m is None:
            return True
        if tok in self.eos:
            return m.is_accepting()
        try:
            ok = m.accept_token(tok)
        except ValueError:
            return False
        if ok:
            m.rollback(1)
        return ok

    def greedy(
        self, m: Matcher | None, logits: torch.Tensor, draft: int | None, rng: Randomness
    ) -> int:
        """Return the masked argmax (checking only a few tokens when ``draft`` is it).

        ``rng`` is not used: greedy verification draws nothing.

        Raises
        ------
        InternalError
            If the grammar allows no token (a bug in constrain).
        """
        if draft is not None:
            z = logits
            zd = z[draft]
            above = torch.nonzero((z > zd), as_tuple=False).view(-1)
            if above.numel() <= _GREEDY_CHECKS:
                ties = torch.nonzero(z[:draft] == zd, as_tuple=False).view(-1)
                cand = torch.cat([above, ties]) if ties.numel() else above
                if cand.numel() <= _GREEDY_CHECKS:
                    # by descending logit, then ascending id: the first allowed one is the argmax
                    order = sorted(cand.tolist(), key=lambda t: (-float(z[t]), t))
                    for t in order:
                        if self._allowed(m, t):
                            return int(t)
                    return int(draft)
        masked = logits if m is None else self._mask(m, logits)
        if m is not None and bool(torch.isneginf(masked).all()):
            raise InternalError(
                "no token is allowed here: the grammar has no continuation and no end. This is "
                "a bug in constrain; please report it with the grammar."
            )
        return int(masked.argmax())

    def sample(
        self, m: Matcher | None, logits: torch.Tensor, draft: int | None, rng: Randomness
    ) -> int:
        """Draw this position's token from p' with one Gumbel-max draw from ``rng``.

        The caller accepts ``draft`` iff it is the token drawn: probability ``p'(draft)``, and
        on rejection the token is a draw from ``p'`` without ``draft``, Leviathan et al.'s rule
        for a point-mass proposal. The draw does not depend on ``draft`` (the parameter keeps
        :meth:`greedy`'s signature), so the output does not depend on what was drafted.

        Raises
        ------
        InternalError
            If the grammar allows no token (a bug in constrain).
        """
        masked = logits.float() if m is None else self._mask(m, logits)
        target = self.target
        scores = tempered_scores(masked.view(1, -1), target.temperature, target.top_k, target.top_p)
        if bool(torch.isneginf(scores).all()) or bool(torch.isnan(scores).any()):
            raise InternalError(
                "no token is allowed here: the grammar has no continuation and no end. This is "
                "a bug in constrain; please report it with the grammar."
            )
        return int(gumbel_argmax(scores, rng)[0])


def speculative_decode(
    session: SpeculativeSession,
    matchers: Sequence[Matcher | None],
    drafters: Sequence[Drafter],
    *,
    prompts: Sequence[Sequence[int]],
    eos_ids: Sequence[int],
    max_tokens: int,
    max_draft: int = 8,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: Randomness = None,
    pad_id: int | None = None,
    backend: str = "auto",
    adaptive: bool = True,
) -> SpeculativeResult:
    """Generate like :func:`constrain.decoding.decode` with a masked sampler, speculatively.

    Parameters
    ----------
    session : SpeculativeSession
        The target model, positioned before its prefill (it is run here).
    matchers : sequence of Matcher or None
        One per row, advanced in place.
    drafters : sequence of Drafter
        Chained in order (each extends the previous ones' drafts); may be empty (then this is
        plain masked decoding, one forward pass per token).
    prompts : sequence of sequence of int
        The rows' prompt tokens (prompt lookup searches them).
    eos_ids : sequence of int
        End-of-sequence ids.
    max_tokens : int
        Most output tokens per row.
    max_draft : int
        Most draft tokens per row and iteration.
    temperature, top_k, top_p
        The masked target distribution (``temperature=0``: greedy), as in
        :class:`~constrain.sampling.MaskedSampler`.
    generator : torch.Generator or RandomStreams, optional
        Randomness of the draws: a generator shared by the rows, or one stream per row (then
        a row's output depends on its stream, logits and drafts' verification alone: not on
        the other rows, the draft lengths or the clock).
    pad_id : int, optional
        Token put in padding positions (default ``eos_ids[0]``).
    backend : str
        Bitmask kernel (:func:`constrain.apply_token_bitmask_inplace`).
    adaptive : bool
        Let each drafter draft only as much as pays, from its running acceptance rate and the
        measured cost of multi-position passes (:class:`_Policy`): a drafter the model keeps
        rejecting is switched off (and probed now and then). This changes how many positions
        a pass verifies, not the tokens drawn (one draw per output position).

    Returns
    -------
    SpeculativeResult
        ``log_weights`` are NaN: speculation does not compute the allowed mass of every step.
    """
    args = dict(locals())
    steps = iter_speculative_decode(**args)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: SpeculativeResult = done.value
            return result


def iter_speculative_decode(
    session: SpeculativeSession,
    matchers: Sequence[Matcher | None],
    drafters: Sequence[Drafter],
    *,
    prompts: Sequence[Sequence[int]],
    eos_ids: Sequence[int],
    max_tokens: int,
    max_draft: int = 8,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: Randomness = None,
    pad_id: int | None = None,
    backend: str = "auto",
    adaptive: bool = True,
) -> Generator[tuple[list[int], list[list[int]]], None, SpeculativeResult]:
    """Like :func:`speculative_decode`, as a generator.

    Yields ``(rows, tokens)`` after every iteration: the rows that got tokens and, per row, the
    tokens (one or more); returns the :class:`SpeculativeResult`.

    Raises
    ------
    ValueError
        For a negative ``max_tokens``, ``max_draft`` or ``temperature``, no EOS id, or not one
        prompt (and, with streams, one random stream) per matcher.
    InternalError
        If a matcher rejects a token verification chose (a bug in constrain).
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if max_draft < 0:
        raise ValueError(f"max_draft must be >= 0, got {max_draft}")
    if not eos_ids:
        raise ValueError("eos_ids must name at least one end-of-sequence token")
    if not temperature >= 0.0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if len(prompts) != len(matchers):
        raise ValueError(f"{len(prompts)} prompts for {len(matchers)} matchers")
    pad = int(eos_ids[0]) if pad_id is None else int(pad_id)
    verifier = _Verifier(_Target(temperature, top_k, top_p, generator), eos_ids, backend)
    loop = _Loop(session, matchers, drafters, prompts, verifier, pad, max_tokens, max_draft)
    if max_tokens == 0:
        return loop.result()
    got = loop.first()
    if got[0]:
        yield got
    while loop.live:
        req = loop.draft(adaptive)
        logits = loop.forward(req)
        got = loop.verify(req, logits)
        if got[0]:
            yield got
    return loop.result()


class _Loop:
    """The state of one speculative decode, and its steps (:func:`iter_speculative_decode`)."""

    def __init__(
        self,
        session: SpeculativeSession,
        matchers: Sequence[Matcher | None],
        drafters: Sequence[Drafter],
        prompts: Sequence[Sequence[int]],
        verifier: _Verifier,
        pad: int,
        max_tokens: int,
        max_draft: int,
    ) -> None:
        self.session = session
        self.matchers = matchers
        self.drafters = drafters
        self.prompts = prompts
        self.max_tokens = max_tokens
        self.max_draft = max_draft
        self.batch = batch = len(matchers)
        self.eos = verifier.eos
        self.pad = pad
        self.stats = stats = verifier.stats
        for d in drafters:
            stats.drafted.setdefault(d.name, 0)
            stats.accepted.setdefault(d.name, 0)
        self.choose = verifier.greedy if verifier.target.temperature == 0.0 else verifier.sample
        self.rngs = verifier.target.randomness(batch)
        self.out: list[list[int]] = [[] for _ in range(batch)]
        self.finish = ["length"] * batch
        self.histories = [list(p) for p in prompts]
        self.policy = DraftPolicy(drafters, max_draft)
        self.live: list[int] = []
        self.t_start = time.perf_counter()

    def commit(self, i: int, tok: int) -> bool:
        """Append ``tok`` to row ``i``; return whether the row goes on.

        Raises
        ------
        InternalError
            If the row's matcher rejects ``tok`` (a bug in constrain).
        """
        m = self.matchers[i]
        if tok in self.eos:
            if m is not None and not m.accept_token(tok):
                raise InternalError(f"row {i}: EOS chosen where the grammar does not accept")
            self.finish[i] = "stop"
            return False
        if m is not None and not m.accept_token(tok):
            raise InternalError(
                f"row {i}: token {tok} chosen, which the grammar rejects. This is a bug in "
                "constrain; please report it with the grammar."
            )
        self.out[i].append(tok)
        self.histories[i].append(tok)
        self.stats.output_tokens += 1
        if m is not None and m.is_terminated():
            self.finish[i] = "stop"
            return False
        return len(self.out[i]) < self.max_tokens

    def first(self) -> tuple[list[int], list[list[int]]]:
        """Prefill, start the drafters and choose every row's first token; return them."""
        stats = self.stats
        t0 = time.perf_counter()
        logits = self.session.forward(None)
        stats.forward_seconds += time.perf_counter() - t0
        for d in self.drafters:
            d.begin(self.session, self.prompts)
        rows: list[int] = []
        toks: list[list[int]] = []
        t0 = time.perf_counter()
        for i in range(self.batch):
            tok = self.choose(self.matchers[i], logits[i], None, self.rngs[i])
            if self.commit(i, tok):
                self.live.append(i)
            if tok not in self.eos:
                rows.append(i)
                toks.append([tok])
        stats.verify_seconds += time.perf_counter() - t0
        return rows, toks

    def draft(self, adaptive: bool) -> DraftRequest:
        """Draft after every live row's pending token; return the request with the drafts.

        The drafters advance the matchers as they offer tokens; they are rolled back here.
        """
        t0 = time.perf_counter()
        live, stats = self.live, self.stats
        budget = [0] * self.batch
        for i in live:
            budget[i] = max(0, min(self.max_draft, self.max_tokens - len(self.out[i]) - 1))
        req = DraftRequest(live, self.histories, self.matchers, budget, self.eos)
        if adaptive:
            self.policy.iteration = stats.forwards
            req.quota = self.policy
        if any(budget[i] for i in live):
            for d in self.drafters:
                d.propose(req)
        for i in live:
            m = self.matchers[i]
            if m is not None and req.drafts[i]:
                m.rollback(len(req.drafts[i]))
            for s in req.sources[i]:
                stats.drafted[s] = stats.drafted.get(s, 0) + 1
        stats.draft_seconds += time.perf_counter() - t0
        return req

    def forward(self, req: DraftRequest) -> torch.Tensor:
        """One forward pass over every live row's ``[pending, drafts]``; return the logits."""
        blocks = {i: [self.histories[i][-1], *req.drafts[i]] for i in self.live}
        ids, valid = ragged_block(blocks, self.batch, self.pad)
        t0 = time.perf_counter()
        logits = self.session.extend(ids, valid)
        spent = time.perf_counter() - t0
        self.stats.forward_seconds += spent
        self.policy.timed(ids.shape[1], spent)
        self.stats.forwards += 1
        return logits

    def verify(self, req: DraftRequest, logits: torch.Tensor) -> tuple[list[int], list[list[int]]]:
        """Verify and commit every live row's drafts; return the rows that got tokens, and them.

        The session keeps each row's accepted positions; finished rows leave ``live``.
        """
        t0 = time.perf_counter()
        keep = [0] * self.batch
        still: list[int] = []
        rows: list[int] = []
        toks: list[list[int]] = []
        for i in self.live:
            keep[i], new, going = self._verify_row(i, req, logits[i])
            if new:
                rows.append(i)
                toks.append(new)
            if going:
                still.append(i)
        self.stats.verify_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.session.keep(keep)
        self.stats.forward_seconds += time.perf_counter() - t0
        self.live = still
        return rows, toks

    def _verify_row(
        self, i: int, req: DraftRequest, logits: torch.Tensor
    ) -> tuple[int, list[int], bool]:
        """Verify row ``i``: ``(positions kept, tokens emitted, whether the row goes on)``."""
        draft = req.drafts[i]
        m = self.matchers[i]
        kept = 1  # the pending token
        new: list[int] = []
        going = True
        for j in range(len(draft) + 1):
            proposed = draft[j] if j < len(draft) else None
            tok = self.choose(m, logits[j], proposed, self.rngs[i])
            going = self.commit(i, tok)
            if tok not in self.eos:
                new.append(tok)
            if proposed is not None:
                src = req.sources[i][j]
                hit = tok == proposed
                self.policy.outcome(src, hit)
                if hit:
                    self.stats.accepted[src] = self.stats.accepted.get(src, 0) + 1
                    if going:
                        kept += 1
                        continue
            break
        return kept, new, going

    def result(self) -> SpeculativeResult:
        """Return the outputs and counters."""
        stats = self.stats
        return SpeculativeResult(
            token_ids=self.out,
            finish_reasons=self.finish,
            log_weights=[math.nan] * self.batch,
            steps=stats.forwards,
            seconds=time.perf_counter() - self.t_start,
            timings={
                "draft": stats.draft_seconds,
                "verify": stats.verify_seconds,
                "forward": stats.forward_seconds,
            },
            stats=stats,
        )


# -- the speculative method of generate(speculative=...) ---------------------------------------

DRAFTER_NAMES = ("grammar", "lookup", "early_exit")
"""The drafters ``generate(speculative=...)`` knows by name (``True`` or ``"all"``: all three)."""

SpeculativeSpec = bool | str | Drafter | Sequence[str | Drafter] | None

# per model: the style of tokens it emits, learned (weak keys: an id() key could be reused by
# another model after this one is freed, with another vocabulary)
_TOKEN_TEXT: weakref.WeakKeyDictionary[Any, TokenText] = weakref.WeakKeyDictionary()


def _token_text(model: LanguageModel) -> TokenText:
    """Return the model's :class:`TokenText` (one per model, learning as it decodes)."""
    text = _TOKEN_TEXT.get(model)
    if text is None:
        tok = model.tokenizer

        def encode(t: str) -> list[int]:
            return [int(i) for i in tok(t, add_special_tokens=False)["input_ids"]]

        text = _TOKEN_TEXT[model] = TokenText(model.vocabulary, encode)
    return text


def resolve_drafters(model: LanguageModel, spec: SpeculativeSpec) -> list[Drafter]:
    """Resolve ``generate``'s ``speculative=`` into drafters for ``model``.

    Parameters
    ----------
    model : LanguageModel
        The target model (its tokenizer tokenizes forced and copied text).
    spec : bool, str, Drafter or sequence of those
        ``None``/``False``: none; ``True``/``"all"``: every drafter of :data:`DRAFTER_NAMES`;
        a name, a :class:`Drafter` or a sequence of those, chained in order.

    Returns
    -------
    list of Drafter

    Raises
    ------
    ValueError
        For an unknown drafter name.
    """
    if spec is None or spec is False:
        return []
    items: list[str | Drafter]
    if spec is True:
        items = list(DRAFTER_NAMES)
    elif isinstance(spec, str):
        items = list(DRAFTER_NAMES) if spec.lower() == "all" else [spec]
    elif isinstance(spec, Sequence):
        items = list(spec)
    else:
        items = [spec]
    out: list[Drafter] = []
    for item in items:
        if not isinstance(item, str):
            out.append(item)
            continue
        name = item.lower()
        if name == "grammar":
            out.append(GrammarDrafter(model.vocabulary, text=_token_text(model)))
        elif name == "lookup":
            out.append(PromptLookupDrafter(model.vocabulary, text=_token_text(model)))
        elif name == "early_exit":
            out.append(EarlyExitDrafter(model))
        else:
            raise ValueError(
                f"unknown drafter {item!r}; choose from {', '.join(DRAFTER_NAMES)}, 'all', "
                "or pass Drafter objects (constrain.decoding.drafters)"
            )
    return out


def speculative_target(method: DecodingMethod) -> MaskedSampler:
    """Return the masked sampler whose distribution speculation reproduces.

    Raises
    ------
    TypeError
        If ``method`` is not the masked sampler (greedy or sampling).
    """
    if not (isinstance(method, TokenMethod) and isinstance(method.sampler, MaskedSampler)):
        raise TypeError(
            f"speculative= works with the masked sampler (greedy or sampling), not "
            f"{method.name!r}: speculation reproduces the locally masked distribution; "
            "SMC, ASAp, AWRS and DCCD run without it"
        )
    return method.sampler


class SpeculativeMethod:
    """Masked decoding sped up by drafters, exact in distribution (:func:`iter_speculative_decode`).

    Parameters
    ----------
    target : MaskedSampler
        The distribution reproduced (its temperature, ``top_k``, ``top_p`` and backend).
    drafters : list of Drafter
        Chained in order.
    max_draft : int
        Most draft tokens per row and forward pass.
    """

    def __init__(self, target: MaskedSampler, drafters: list[Drafter], max_draft: int) -> None:
        self.target = target
        self.drafters = drafters
        self.max_draft = max_draft
        self.name = f"{target.method_name}+speculative"

    def steps(self, job: DecodeJob) -> Steps:
        """Return the speculative loop of ``job`` (:func:`iter_speculative_decode`)."""
        return iter_speculative_decode(
            job.model.start(job.prompt_ids),
            job.matchers,
            self.drafters,
            prompts=job.prompt_ids,
            eos_ids=job.model.eos_ids,
            max_tokens=job.max_tokens,
            max_draft=self.max_draft,
            temperature=self.target.temperature,
            top_k=self.target.top_k,
            top_p=self.target.top_p,
            generator=job.generator,
            pad_id=job.model.pad_id,
            backend=self.target.backend,
        )

    def run_job(self, job: DecodeJob) -> MethodOutcome:
        """Decode every row of ``job``; the details are the speculation counters (a dict)."""
        result: SpeculativeResult = drain(self.steps(job))
        stats = result.stats.as_dict()
        return MethodOutcome(result, self.name, details=[stats] * len(job.prompt_ids))
