"""The denoising loop of masked-diffusion LMs, with grammar constraints (stage 7).

A masked-diffusion model (:class:`DiffusionModel`) predicts every masked position of a sequence
in one forward pass. :func:`diffusion_decode` fills ``length`` positions after a prompt the way
LLaDA does: blocks of ``block_size`` positions left to right (semi-autoregressive), each over
``steps`` denoising steps; a step runs the model once and commits some masked positions of the
current block, chosen by the unmasking policy. The grammar keeps the output valid with one of
the exact building blocks of :mod:`constrain.diffusion.dingo_lave`::

    for block in blocks:
        for k in schedule(len(block), steps):            # positions committed per step
            logits = model.predict(tokens, mask)         # (prompt + length, V)
            proposals = sample(logits[block] / temperature)
            order = unmasking(block)                     # confidence / random / left_to_right
            commit k positions of ``order``, so that the whole output stays completable:
              "dingo":  the most probable valid tokens at the first k positions (DINGO)
              "infill": a proposal only if the partial output stays completable, else the
                        next candidate of the position, else the next position (Muendler et al.)
              "lave":   a proposal only if a lookahead filling verifies, else as "infill"
              "none":   the proposals as they are

"Completable" is always judged with the positions after the block as part of the problem: each
of them becomes exactly one token (EOS padding included), so the output fits in ``length``
positions. When no candidate of the first positions is accepted, the remaining commits of the
step are taken from a verified completion (a *witness*), so every block ends in ``steps`` steps.
"""

from __future__ import annotations

import functools
import secrets
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from constrain._types import BoolArray, Int64Array
from constrain.compiler import CompiledGrammar
from constrain.diffusion.denoiser import Denoiser, DiffusionModel, Unmasking, schedule
from constrain.diffusion.dingo_lave import (
    MASK,
    GapMode,
    block_completable,
    dingo,
    lave_step,
    lookahead,
)
from constrain.diffusion.infilling import InfillChecker
from constrain.diffusion.token_dfa import NotRegularError, TokenDfa
from constrain.errors import IncompleteOutputError, InternalError
from constrain.matcher import Matcher
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["DiffusionModel", "DiffusionResult", "diffusion_decode"]

Method = Literal["auto", "dingo", "infill", "lave", "none"]
LoopGapMode = Literal["auto", "tokens", "bytes"]

_UNMASKING = ("confidence", "random", "left_to_right")
_METHODS = ("auto", "dingo", "infill", "lave", "none")
_AUTO_TOKEN_STATES = 2048  # as block_problems: token tries per mask while the NFA stays small


@dataclass
class DiffusionResult:
    """What :func:`diffusion_decode` produced."""

    token_ids: list[int]
    """All ``length`` positions, EOS padding included."""
    output_ids: list[int]
    """The tokens before the first EOS."""
    data: bytes
    """The bytes of ``output_ids``."""
    text: str
    """``data`` decoded as UTF-8 (invalid bytes replaced)."""
    is_valid: bool | None
    """Whether the output is a complete sentence of the grammar (None without a grammar)."""
    method: str
    """The method used (``"auto"`` resolved)."""
    forward_seconds: list[float] = field(default_factory=list)
    """Per denoising step: the model's forward pass."""
    constraint_seconds: list[float] = field(default_factory=list)
    """Per denoising step: the grammar work (DINGO, checks, witnesses)."""
    setup_seconds: float = 0.0
    """Building the token-level DFA or the infilling checker, and the length check."""
    seconds: float = 0.0
    """Wall time of the whole call."""
    num_rejected: int = 0
    """Proposed tokens the grammar check rejected ("infill", "lave")."""
    num_witness: int = 0
    """Positions committed from a verified completion because no candidate was accepted."""

    @property
    def num_steps(self) -> int:
        """Denoising steps (one forward pass each)."""
        return len(self.forward_seconds)


# -- per-grammar helpers, cached while the compiled grammar lives ------------------------------

_TOKEN_DFAS: weakref.WeakKeyDictionary[CompiledGrammar, TokenDfa] = weakref.WeakKeyDictionary()
_CHECKERS: weakref.WeakKeyDictionary[CompiledGrammar, InfillChecker] = weakref.WeakKeyDictionary()
_DISTANCES: weakref.WeakKeyDictionary[TokenDfa, Int64Array] = weakref.WeakKeyDictionary()
_UNREACHABLE = np.iinfo(np.int64).max


def tokens_to_accept(tdfa: TokenDfa) -> Int64Array:
    """Return, per token-DFA state, the fewest tokens that lead to a complete word.

    A breadth-first search backwards from the accepting states over the mask moves (every
    state's distinct successors); it builds every row of ``tdfa`` once. States that cannot
    reach acceptance get ``np.iinfo(np.int64).max``. With EOS padding, a state ``q`` can end an
    output within ``r`` more positions iff ``tokens_to_accept(tdfa)[q] <= r``.
    """
    cached = _DISTANCES.get(tdfa)
    if cached is not None:
        return cached
    num = tdfa.num_states
    preds: list[list[int]] = [[] for _ in range(num)]
    for q in range(num):
        for r in tdfa.mask_successors(q).tolist():
            preds[r].append(q)
    dist = np.full(num, _UNREACHABLE, dtype=np.int64)
    queue = deque(np.flatnonzero(tdfa.accepting).tolist())
    dist[list(queue)] = 0
    while queue:
        r = queue.popleft()
        for q in preds[r]:
            if dist[q] == _UNREACHABLE:
                dist[q] = dist[r] + 1
                queue.append(q)
    _DISTANCES[tdfa] = dist
    return dist


def _token_dfa(compiled: CompiledGrammar) -> TokenDfa:
    tdfa = _TOKEN_DFAS.get(compiled)
    if tdfa is None:
        tdfa = _TOKEN_DFAS[compiled] = TokenDfa.from_compiled(compiled)
    return tdfa


def _checker(compiled: CompiledGrammar) -> InfillChecker:
    checker = _CHECKERS.get(compiled)
    if checker is None:
        checker = _CHECKERS[compiled] = InfillChecker(compiled)
    return checker


# -- witnesses ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _words(vocab: Vocabulary) -> dict[bytes, int]:
    """Map the bytes of every text token to its first id."""
    words: dict[bytes, int] = {}
    for t in np.flatnonzero(vocab.token_lengths > 0).tolist():
        words.setdefault(vocab.token_bytes_of(t), t)
    return words


def _split(data: bytes, lo: int, hi: int, vocab: Vocabulary) -> list[int] | None:
    """Write ``data`` as ``lo..hi`` text tokens (fewest tokens first), or None."""
    words = _words(vocab)
    longest = vocab.max_token_length
    # breadth-first over (offset, tokens used): the first arrival at the end uses fewest tokens
    back: dict[tuple[int, int], tuple[int, int, int]] = {}
    frontier = [(0, 0)]
    seen = {(0, 0)}
    for used in range(hi + 1):
        if (len(data), used) in seen and used >= lo:
            out: list[int] = []
            key = (len(data), used)
            while key != (0, 0):
                i, u, tok = back[key]
                out.append(tok)
                key = (i, u)
            return out[::-1]
        nxt = []
        for i, u in frontier:
            for j in range(i + 1, min(len(data), i + longest) + 1):
                word = words.get(data[i:j])
                if word is not None and (j, u + 1) not in seen:
                    seen.add((j, u + 1))
                    back[(j, u + 1)] = (i, u, word)
                    nxt.append((j, u + 1))
        frontier = nxt
    return None


def _fill_from_witness(
    region: list[int], fills: Sequence[bytes], vocab: Vocabulary
) -> list[int] | None:
    """Turn the gap fills of :func:`block_completable` (``final=True``) into one token per mask.

    The runs of masks are the gaps of ``block_problems``: a run before a committed token is
    exactly that many tokens; a run before a committed EOS, or at the end, may be shorter and is
    padded with EOS.
    """
    eos = set(vocab.eos_ids.tolist())
    pad = int(vocab.eos_ids[0])
    out = list(region)
    gaps = iter(fills)
    start = 0
    for j in range(len(region) + 1):
        tok = region[j] if j < len(region) else pad
        if j < len(region) and tok < 0:
            continue
        run = j - start
        if run:
            exact = j < len(region) and tok not in eos
            toks = _split(next(gaps), run if exact else 0, run, vocab)
            if toks is None:
                return None
            out[start:j] = toks + [pad] * (run - len(toks))
        if tok in eos:
            return [t if t >= 0 else pad for t in out]  # all after EOS is EOS
        start = j + 1
    return out


# -- the loop ----------------------------------------------------------------------------------


class _Loop:
    """The state of one :func:`diffusion_decode` call (the grammar work of every method)."""

    def __init__(
        self,
        vocab: Vocabulary,
        method: str,
        compiled: CompiledGrammar | None,
        tdfa: TokenDfa | None,
        checker: InfillChecker | None,
        gaps: LoopGapMode,
        length: int,
    ) -> None:
        self.vocab = vocab
        self.method = method
        self.compiled = compiled
        self.tdfa = tdfa
        self.checker = checker
        self.gaps = gaps
        self.length = length
        self.tokens = [MASK] * length
        self.num_rejected = 0
        self.num_witness = 0
        self.matcher = Matcher(compiled) if method == "lave" and compiled is not None else None
        # the grammar state before the current block: LAVE's matcher, or one for the
        # left-context pre-filter of the infilling method
        self.before = self.matcher
        if method == "infill" and compiled is not None:
            self.before = Matcher(compiled)
        self.dist = tokens_to_accept(tdfa) if method == "dingo" and tdfa is not None else None
        self.state = tdfa.start if tdfa is not None else 0
        self.prefix = b""

    # -- per block --------------------------------------------------------------------------

    def check_length(self) -> None:
        """Raise IncompleteOutputError when ``length`` positions cannot hold a sentence."""
        if self.method == "dingo":
            assert self.dist is not None and self.tdfa is not None
            need = int(self.dist[self.tdfa.start])
            if need > self.length:
                hint = "it has no word" if need == _UNREACHABLE else f"its shortest needs {need}"
                raise IncompleteOutputError(
                    f"length={self.length} positions cannot hold a complete sentence of the "
                    f"grammar ({hint} tokens): raise length",
                    "",
                )
        elif self.method in ("infill", "lave") and not self._completable(self.tokens):
            raise IncompleteOutputError(
                f"length={self.length} positions cannot hold a complete sentence of the grammar "
                f"under the {self._gap_mode(self.tokens)!r} gap model: raise length (or use "
                "gaps='tokens' with a small vocabulary)",
                "",
            )

    def end_block(self, start: int, end: int) -> None:
        """Advance the grammar state over a finished block."""
        done = self.tokens[start:end]
        if self.tdfa is not None and self.method == "dingo":
            self.state = self.tdfa.walk(done, self.state)
        if self.before is not None:
            text = [t for t in done if t not in self.vocab.eos_ids]
            if self.before.accept_tokens(text) != len(text):
                raise InternalError(
                    "the grammar rejects a finished block. This is a bug in constrain; please "
                    "report it with the grammar."
                )
        self.prefix += self.vocab.decode(done)

    def pad_after_eos(self) -> None:
        """Commit EOS to every masked position after a committed EOS (nothing else is valid)."""
        eos = set(self.vocab.eos_ids.tolist())
        first = next((j for j, t in enumerate(self.tokens) if t in eos), None)
        if first is not None:
            pad = self.tokens[first]
            self.tokens[first:] = [t if t >= 0 else pad for t in self.tokens[first:]]

    # -- grammar checks ---------------------------------------------------------------------

    def _gap_mode(self, region: list[int]) -> GapMode:
        if self.gaps != "auto":
            return self.gaps
        if self.vocab.max_token_length <= 1:
            return "bytes"  # exact when every text token is one byte, and far cheaper
        small = self.vocab.num_nodes * max(sum(t < 0 for t in region), 1) <= _AUTO_TOKEN_STATES
        return "tokens" if small else "bytes"

    def _completable(self, region: list[int]) -> bool:
        assert self.checker is not None
        mode = self._gap_mode(region)
        res = block_completable(
            self.checker, region, self.vocab, prefix=self.prefix, final=True, gaps=mode
        )
        return bool(res)

    def witness(self, start: int, candidates: np.ndarray) -> list[int]:
        """Return a valid filling of every position from ``start`` on (a completion)."""
        region = self.tokens[start:]
        if self.matcher is not None:
            filled = lookahead(self.matcher, region, candidates, final=True)
            if filled is not None:
                return [int(t) for t in filled]
        assert self.checker is not None
        mode = self._gap_mode(region)
        res = block_completable(
            self.checker, region, self.vocab, prefix=self.prefix, final=True, gaps=mode
        )
        out = _fill_from_witness(region, res.fills or (), self.vocab) if res else None
        if out is None:
            raise InternalError(
                "the partial output is no longer completable. This is a bug in constrain; "
                "please report it with the grammar."
            )
        return out

    def _left_rejects(self, start: int, pos: int, tok: int) -> bool:
        """Whether the committed text left of ``pos`` and ``tok`` is no prefix of a sentence.

        Only when every position of the block before ``pos`` is committed (so that text is
        known): then a matcher decides in microseconds what the infilling check would, for the
        many proposals that the grammar rejects right where they stand.
        """
        if self.before is None or tok in self.vocab.eos_ids:
            return False
        left = self.tokens[start:pos]
        if any(t < 0 for t in left) or any(t in self.vocab.eos_ids for t in left):
            return False
        m = self.before.fork()
        try:
            return m.accept_tokens([*left, tok]) != len(left) + 1
        except ValueError:  # an id the vocabulary does not have: the full check decides
            return False

    def accepts(self, start: int, pos: int, tok: int, candidates: np.ndarray) -> bool:
        """Whether committing ``tok`` at ``pos`` keeps the output completable."""
        if self._left_rejects(start, pos, tok):
            return False
        region = self.tokens[start:]
        if self.matcher is not None:  # LAVE: lookahead, then the infilling fallback
            res = lave_step(
                self.matcher, region, [(pos - start, tok)], candidates, checker=self.checker,
                prefix=self.prefix, final=True, gaps=self._gap_mode(region),
            )  # fmt: skip
            return bool(res.accepted[0])
        trial = list(region)
        trial[pos - start] = tok
        return self._completable(trial)

    # -- one step per method ----------------------------------------------------------------

    def step_dingo(self, start: int, end: int, chosen: list[int], logp: np.ndarray) -> None:
        """Commit the most probable valid tokens at ``chosen`` (block ``start:end``)."""
        assert self.tdfa is not None and self.dist is not None
        size = end - start
        lp = np.full((size, logp.shape[1]), -np.inf)
        mask_logp = np.zeros(size)
        for pos in chosen:
            lp[pos - start] = logp[pos - start]
            mask_logp[pos - start] = -np.inf
        committed = np.asarray(self.tokens[start:end], dtype=np.int64)
        end_ok = self.dist <= self.length - end
        res = dingo(
            self.tdfa, lp, mask_logp=mask_logp, committed=committed, start_state=self.state,
            end_states=end_ok,
        )  # fmt: skip
        if res is None:  # every valid token has probability 0: any valid one will do
            lp[np.isfinite(lp)] = 0.0
            res = dingo(
                self.tdfa, lp, mask_logp=mask_logp, committed=committed, start_state=self.state,
                end_states=end_ok,
            )  # fmt: skip
            if res is None:
                raise InternalError(
                    "DINGO found no valid assignment of a block that was completable. This is "
                    "a bug in constrain; please report it with the grammar."
                )
        for pos in chosen:
            self.tokens[pos] = int(res.tokens[pos - start])

    def step_checked(
        self,
        start: int,
        ranked: list[int],
        num: int,
        candidates: np.ndarray,
        banned: BoolArray,
    ) -> None:
        """Commit ``num`` positions of ``ranked``, each with its first accepted candidate."""
        done: list[int] = []
        for pos in ranked:
            if len(done) == num:
                break
            for tok in candidates[pos - start].tolist():
                if banned[tok]:
                    continue
                if self.accepts(start, pos, tok, candidates):
                    self.tokens[pos] = tok
                    done.append(pos)
                    break
                self.num_rejected += 1
        if len(done) < num:
            filled = self.witness(start, candidates)
            for pos in ranked:
                if len(done) == num:
                    break
                if pos not in done:
                    self.tokens[pos] = filled[pos - start]
                    done.append(pos)
                    self.num_witness += 1

    def is_valid(self) -> bool | None:
        """Whether the output is a complete sentence (exact check with a fresh matcher)."""
        if self.compiled is None:
            return None
        out = _until_eos(self.tokens, self.vocab)
        m = Matcher(self.compiled)
        return m.accept_tokens(out) == len(out) and m.is_accepting()


def _until_eos(tokens: list[int], vocab: Vocabulary) -> list[int]:
    eos = set(vocab.eos_ids.tolist())
    cut = next((j for j, t in enumerate(tokens) if t in eos), len(tokens))
    return tokens[:cut]


def _checked_vocab(
    model: DiffusionModel,
    constraint: CompiledGrammar | None,
    method: str,
    vocab: Vocabulary | None,
) -> Vocabulary:
    """Return the vocabulary of the output, after checking it against the model and method.

    Raises
    ------
    ValueError
        For an unknown method, no constraint where the method needs one, no vocabulary, a
        model with fewer logits than tokens, a mask token that is a text token, or no EOS id.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if constraint is None:
        if method != "none":
            raise ValueError(f"method={method!r} needs a compiled grammar as constraint")
        if vocab is None:
            raise ValueError("pass vocab= to decode the output when constraint is None")
    else:
        vocab = constraint.vocab
    mask_id = int(model.mask_token_id)
    if model.vocab_size < vocab.size:
        raise ValueError(
            f"the model has {model.vocab_size} logits but the vocabulary {vocab.size} tokens"
        )
    if 0 <= mask_id < vocab.size and vocab.token_lengths[mask_id] > 0:
        raise ValueError(
            f"mask_token_id={mask_id} is a text token of the vocabulary; it must be a special "
            "token (Vocabulary.from_bytes(..., special_ids=[mask_id])) or past vocab.size"
        )
    if method != "none" and not vocab.eos_ids.size:
        raise ValueError("the vocabulary needs an EOS id: outputs shorter than length are padded")
    return vocab


def _check_options(
    unmasking: str,
    gaps: str,
    length: int,
    block: int,
    steps: int | None,
    num_candidates: int,
    temperature: float,
) -> None:
    """Check :func:`diffusion_decode`'s options.

    Raises
    ------
    ValueError
        For an unknown unmasking policy or gap model, a count below 1 or a negative
        temperature.
    """
    if unmasking not in _UNMASKING:
        raise ValueError(f"unmasking must be one of {_UNMASKING}, got {unmasking!r}")
    if gaps not in ("auto", "tokens", "bytes"):
        raise ValueError(f"gaps must be 'auto', 'tokens' or 'bytes', got {gaps!r}")
    if length < 1 or block < 1 or (steps is not None and steps < 1) or num_candidates < 1:
        raise ValueError(
            f"length, block_size, steps and num_candidates must be >= 1, got {length}, "
            f"{block}, {steps} and {num_candidates}"
        )
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")


def _prepare_loop(
    constraint: CompiledGrammar | None,
    method: str,
    vocab: Vocabulary,
    gaps: LoopGapMode,
    length: int,
) -> _Loop:
    """Return the loop's state for ``method`` and check that ``length`` positions suffice.

    ``"auto"`` resolves to DINGO when the grammar is regular, else LAVE (``_Loop.method``).

    Raises
    ------
    NotRegularError
        With ``method="dingo"`` and a grammar that is not regular.
    IncompleteOutputError
        If ``length`` positions cannot hold a complete sentence of the grammar.
    """
    tdfa = checker = None
    if method in ("auto", "dingo"):
        assert constraint is not None
        try:
            tdfa = _token_dfa(constraint)
            method = "dingo"
        except NotRegularError:
            if method == "dingo":
                raise
            method = "lave"
    if method in ("infill", "lave"):
        assert constraint is not None
        checker = _checker(constraint)
    loop = _Loop(vocab, method, constraint, tdfa, checker, gaps, length)
    loop.check_length()
    return loop


def diffusion_decode(
    model: DiffusionModel,
    constraint: CompiledGrammar | None,
    *,
    length: int,
    block_size: int | None = None,
    steps: int | None = None,
    unmasking: Unmasking = "confidence",
    method: Method = "auto",
    temperature: float = 0.0,
    seed: int | None = None,
    prompt: Sequence[int] = (),
    vocab: Vocabulary | None = None,
    num_candidates: int = 8,
    gaps: LoopGapMode = "auto",
    on_step: Callable[[list[int]], None] | None = None,
) -> DiffusionResult:
    """Generate ``length`` tokens with a masked-diffusion model, kept valid by a grammar.

    See the module docstring for the loop. Proposals are the argmax of the tempered
    log-probabilities plus Gumbel noise (a sample at ``temperature > 0``; the argmax at 0);
    the candidates of a position are its proposal and then the next ``num_candidates - 1``
    tokens of that perturbed order (a sample without replacement). DINGO maximises the sum of
    the same perturbed scores (perturb-and-MAP). Unmasking policies: ``"confidence"`` commits
    the positions whose proposal has the highest model probability first (LLaDA's low-confidence
    remasking), ``"random"`` a random order, ``"left_to_right"`` the leftmost first.

    Parameters
    ----------
    model : DiffusionModel
        The model (e.g. :class:`constrain.integrations.diffusion.HFMaskedLM`).
    constraint : CompiledGrammar or None
        The grammar, compiled for the model's vocabulary; None only with ``method="none"``.
    length : int
        Output positions; an output ends with EOS padding when it is shorter.
    block_size : int, optional
        Positions per block (default: ``length``, one block); the last block may be shorter.
    steps : int, optional
        Denoising steps per block (default: one position per step); at most one step per
        position.
    unmasking : {"confidence", "random", "left_to_right"}, optional
        Which masked positions of the block are committed first.
    method : {"auto", "dingo", "infill", "lave", "none"}, optional
        ``"auto"``: DINGO when the grammar is regular, else LAVE.
    temperature : float, optional
        0 (default) is greedy.
    seed : int, optional
        Seeds the Gumbel noise and the random unmasking order.
    prompt : sequence of int, optional
        Token ids before the output, never masked.
    vocab : Vocabulary, optional
        Decodes the output when ``constraint`` is None.
    num_candidates : int, optional
        Candidates tried per position before the next position ("infill", "lave").
    gaps : {"auto", "tokens", "bytes"}, optional
        The infilling checks' gap model (see :func:`~constrain.decoding.diffusion.block_problems`):
        ``"tokens"`` is exact, ``"bytes"`` sound; ``"auto"`` takes ``"tokens"`` while small.
    on_step : callable, optional
        Called after every step with the ``length`` token ids so far (:data:`MASK` = masked).

    Returns
    -------
    DiffusionResult

    Raises
    ------
    ValueError
        If an argument is out of range, the model's logits are narrower than the vocabulary,
        or the mask token is a text token of the vocabulary.
    NotRegularError
        With ``method="dingo"`` and a grammar that is not regular.
    IncompleteOutputError
        If ``length`` positions cannot hold a complete sentence of the grammar.
    InternalError
        If the constrained output breaks the grammar after all (a bug in constrain).
    """
    t_start = time.perf_counter()
    vocab = _checked_vocab(model, constraint, method, vocab)
    block = length if block_size is None else block_size
    _check_options(unmasking, gaps, length, block, steps, num_candidates, temperature)
    t0 = time.perf_counter()
    loop = _prepare_loop(constraint, method, vocab, gaps, length)
    resolved = loop.method
    setup = time.perf_counter() - t0

    generator = torch.Generator().manual_seed(seed if seed is not None else secrets.randbits(63))
    denoiser = Denoiser(model, vocab, prompt, length, temperature, generator)
    forward_s: list[float] = []
    constraint_s: list[float] = []
    for start in range(0, length, block):
        end = min(start + block, length)
        for num in schedule(end - start, length if steps is None else steps):
            masked = [j for j in range(start, end) if loop.tokens[j] < 0]
            if not masked:
                break
            t0 = time.perf_counter()
            probs, scores = denoiser.scores(loop.tokens, start, end)
            forward_s.append(time.perf_counter() - t0)
            proposals = scores[: end - start].argmax(dim=-1)
            masked = denoiser.order(masked, unmasking, probs, proposals, start)
            t0 = time.perf_counter()
            num = min(num, len(masked))
            if resolved == "none":
                for pos in masked[:num]:
                    loop.tokens[pos] = int(proposals[pos - start])
            elif resolved == "dingo":
                loop.step_dingo(start, end, masked[:num], scores[: end - start].numpy())
            else:
                k = min(num_candidates, denoiser.width)
                candidates = scores.topk(k, dim=-1).indices.numpy()
                loop.step_checked(start, masked, num, candidates, denoiser.banned)
            if resolved != "none":
                loop.pad_after_eos()
            constraint_s.append(time.perf_counter() - t0)
            if on_step is not None:
                on_step(list(loop.tokens))
        loop.end_block(start, end)
    valid = loop.is_valid()
    if resolved != "none" and not valid:
        raise InternalError(
            f"the {resolved} output is not a complete sentence of the grammar. This is a bug in "
            "constrain; please report it with the grammar."
        )
    out = _until_eos(loop.tokens, vocab)
    data = vocab.decode(out)
    return DiffusionResult(
        token_ids=list(loop.tokens),
        output_ids=out,
        data=data,
        text=data.decode("utf-8", errors="replace"),
        is_valid=valid,
        method=resolved,
        forward_seconds=forward_s,
        constraint_seconds=constraint_s,
        setup_seconds=setup,
        seconds=time.perf_counter() - t_start,
        num_rejected=loop.num_rejected,
        num_witness=loop.num_witness,
    )
