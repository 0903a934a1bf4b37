"""Constrained decoding for masked-diffusion LMs (stage 7): DINGO, infilling and LAVE.

A diffusion LM fills a block of ``L`` masked positions in parallel, in any order: each forward
pass gives a distribution over the vocabulary at every position, and an unmasking policy
commits some positions. Left-to-right masks do not apply; this module provides the three exact
building blocks of the literature, over the grammars of the rest of the library:

- :func:`dingo` (Suresh et al., regular constraints): the most probable assignment of the
  block under the model's factorised prediction, positions allowed to stay masked, such that
  the output stays a valid prefix of the language. A Viterbi recursion over (position,
  token-level DFA state) (:class:`~constrain.decoding.token_dfa.TokenDfa`).
- :class:`~constrain.decoding.infilling.InfillChecker` (Mündler et al., any CFG): whether a
  partial output with holes can still be completed, with an example completion;
  :func:`block_completable` applies it to a block.
- :func:`lave_step` (Zhang et al., any CFG): accept a proposed token only if a lookahead filling
  of the other masked positions, built from the same forward pass, verifies under the grammar;
  when it does not, fall back to the exact infilling check.

Token ids use ``MASK = -1`` for a position that is (or stays) masked. The denoising loop over a
model is :func:`~constrain.decoding.denoising.diffusion_decode`; ``generate()`` reaches it
through :mod:`constrain.diffusion.route` (see ``docs/diffusion.md``).

References
----------
.. [1] T. Suresh, D. Banerjee, S. Ugare, S. Misailovic, G. Singh, "DINGO: Constrained Inference
   for Diffusion LLMs", NeurIPS 2025, arXiv:2505.23061.
.. [2] N. Mündler, J. Dekoninck, M. Vechev, "Constrained Decoding of Diffusion LLMs with
   Context-Free Grammars", arXiv:2508.10111 (2025).
.. [3] Y. Zhang, Y. Li, Y. Liu, J. Li, X. Jia, Z. Li, G. Li, "Lookahead-then-Verify: Reliable
   Constrained Decoding for Diffusion LLMs under Context-Free Grammars", arXiv:2602.00612
   (2026).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from constrain._types import BoolArray, Int32Array
from constrain.diffusion.infilling import Gap, InfillChecker, InfillResult, Part
from constrain.diffusion.token_dfa import NotRegularError, TokenDfa, grammar_regex
from constrain.kernels.numba_diffusion import MASK_TOKEN, viterbi_step_kernel
from constrain.matcher import Matcher
from constrain.vocab.vocabulary import Vocabulary

__all__ = [
    "MASK",
    "DingoResult",
    "Gap",
    "InfillChecker",
    "InfillResult",
    "LaveResult",
    "NotRegularError",
    "TokenDfa",
    "block_completable",
    "block_problems",
    "dingo",
    "grammar_regex",
    "lave_step",
    "lookahead",
]

MASK = MASK_TOKEN
"""Token id of a position that is, or stays, masked (-1)."""


def _to_numpy(x: Any, dtype: type, name: str, ndim: int) -> np.ndarray[Any, Any]:
    if hasattr(x, "detach"):  # a torch tensor: no torch import needed here
        x = x.detach().to("cpu").double().numpy() if dtype is np.float64 else x.cpu().numpy()
    out: np.ndarray[Any, Any] = np.ascontiguousarray(np.asarray(x), dtype=dtype)
    if out.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {out.shape}")
    return out


# --------------------------------------------------------------------------------------------
# DINGO
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DingoResult:
    """The most probable valid assignment of a block (see :func:`dingo`).

    Attributes
    ----------
    tokens : (L,) int32
        The chosen token per position (committed ones copied); :data:`MASK` where the
        position stays masked.
    log_prob : float
        Sum of the chosen log-probabilities over the free positions.
    end_state : int
        Token-DFA state at the end of the optimal path (masks resolved as on that path); the
        exact state of the output when no mask remains.
    """

    tokens: Int32Array
    log_prob: float
    end_state: int


def dingo(
    tdfa: TokenDfa,
    logp: Any,
    *,
    mask_logp: Any = None,
    committed: Any = None,
    start_state: int = 0,
    complete: bool = False,
    end_states: Any = None,
) -> DingoResult | None:
    """Return the most probable assignment of a block that keeps the output valid (DINGO).

    The model's prediction is factorised: an assignment ``r`` (a token or :data:`MASK` per
    free position) has log-probability ``sum(logp[i, r[i]])`` (``mask_logp[i]`` for a mask);
    committed positions are point masses. ``r`` is *valid* when its masks can be replaced by
    real tokens so that the text is a valid prefix of the language (with ``complete=True``: a
    complete word, or one ended by EOS). Semantics as a loop over all assignments::

        best = max((a for a in assignments(block) if valid(a)), key=log_prob)

    computed by a Viterbi recursion over (position, state): a token moves ``q`` to
    ``tdfa.row(q)[t]``; a mask moves ``q`` to any state one real token reaches (DINGO's
    substitution set). Cost ``O(L * N)`` for ``N`` live transitions out of the states reachable
    at each position (at most ``R * V`` for ``R`` states); token rows are built lazily.

    Parameters
    ----------
    tdfa : TokenDfa
        The token-level DFA of the regular constraint.
    logp : (L, V) float array or tensor
        Per-position log-probabilities over real tokens (``V`` between ``vocab.size`` and
        ``vocab.model_vocab_size``; missing columns are never chosen). Rows of committed
        positions are ignored.
    mask_logp : (L,) float array or tensor, optional
        Log-probability of leaving each position masked; None (default) means every free
        position must get a token.
    committed : (L,) int array, optional
        A token id per committed position, :data:`MASK` (any negative) for free positions;
        default: all free.
    start_state : int, optional
        The token-DFA state of the output before the block (``tdfa.walk(previous_tokens)``).
    complete : bool, optional
        Require a complete word at the end of the block (the last block).
    end_states : (S,) bool array, optional
        Only these states may end the block (with ``complete``, both conditions apply); the
        denoising loop passes the states from which the positions after the block can still
        reach a complete word.

    Returns
    -------
    DingoResult or None
        None when no assignment is valid (a committed token is already invalid, or every
        allowed choice has probability 0).

    Raises
    ------
    ValueError
        If shapes disagree, ``V`` is out of range, or a committed id or ``start_state`` is out
        of range.
    """
    lp = _to_numpy(logp, np.float64, "logp", 2)
    length, width = lp.shape
    if not tdfa.vocab.size <= width <= tdfa.width:
        raise ValueError(
            f"logp has {width} columns; the vocabulary has {tdfa.vocab.size} tokens and "
            f"{tdfa.width} model ids: slice or pad the logits to that width"
        )
    if width < tdfa.width:
        lp = np.hstack([lp, np.full((length, tdfa.width - width), -np.inf)])
    if mask_logp is None:
        mlp = np.full(length, -np.inf)
    else:
        mlp = _to_numpy(mask_logp, np.float64, "mask_logp", 1)
    com = np.full(length, MASK, np.int64)
    if committed is not None:
        com = _to_numpy(committed, np.int64, "committed", 1)
    if mlp.shape[0] != length or com.shape[0] != length:
        raise ValueError(
            f"logp has {length} positions but mask_logp has {mlp.shape[0]} and committed "
            f"{com.shape[0]}"
        )
    if (com >= tdfa.width).any():
        raise ValueError(f"committed ids must be < {tdfa.width}, got {com.max()}")
    num = tdfa.num_states
    if not 0 <= start_state < num:
        raise ValueError(f"start_state must be in [0, {num}), got {start_state}")
    back_state = np.full((length, num), -1, dtype=np.int32)
    back_token = np.full((length, num), MASK, dtype=np.int32)
    states = np.array([start_state], dtype=np.int32)
    scores = np.zeros(1)
    for i in range(length):
        out = np.full(num, -np.inf)
        tok = int(com[i])
        if tok >= 0:
            for q, score in zip(states.tolist(), scores.tolist(), strict=True):
                q2 = tdfa.step(q, tok)
                if q2 >= 0 and score > out[q2]:
                    out[q2], back_state[i, q2], back_token[i, q2] = score, q, tok
        else:
            row_ptr, tokens, targets, succ_ptr, succ = tdfa.csr(states)
            viterbi_step_kernel(
                states, row_ptr, tokens, targets, succ_ptr, succ, scores, lp[i], float(mlp[i]),
                out, back_state[i], back_token[i],
            )  # fmt: skip
        states = np.flatnonzero(out > -np.inf).astype(np.int32)
        scores = out[states]
        if not states.size:
            return None
    if complete or end_states is not None:
        keep = tdfa.accepting[states] if complete else np.ones(states.size, dtype=np.bool_)
        if end_states is not None:
            allowed = _to_numpy(end_states, np.bool_, "end_states", 1)
            if allowed.shape[0] != num:
                raise ValueError(f"end_states must have {num} entries, got {allowed.shape[0]}")
            keep &= allowed[states]
        states, scores = states[keep], scores[keep]
        if not states.size:
            return None
    best = int(np.argmax(scores))
    end = q = int(states[best])
    chosen = np.empty(length, dtype=np.int32)
    for i in range(length - 1, -1, -1):
        chosen[i] = back_token[i, q]
        q = int(back_state[i, q])
    return DingoResult(chosen, float(scores[best]), end)


# --------------------------------------------------------------------------------------------
# Mündler et al.: a diffusion block as infilling problems
# --------------------------------------------------------------------------------------------

GapMode = Literal["auto", "tokens", "bytes", "unbounded"]

_AUTO_TOKEN_STATES = 2048


def _single_bytes(vocab: Vocabulary) -> tuple[bytes, ...] | None:
    """Return the single-byte tokens of ``vocab`` as a Gap alphabet (None: all 256 exist)."""
    ids = np.flatnonzero(vocab.token_lengths == 1)
    found = np.unique(vocab.token_bytes[vocab.token_indptr[ids]])
    return None if len(found) == 256 else tuple(bytes([b]) for b in found.tolist())


def block_problems(
    block: Sequence[int],
    vocab: Vocabulary,
    *,
    prefix: bytes = b"",
    final: bool = False,
    gaps: GapMode = "auto",
) -> list[list[Part]]:
    """Turn a diffusion block into infilling problems (completable iff one of them is).

    Every masked position (id < 0) becomes exactly one token. A run of ``k`` masks before a
    committed token is a gap of ``k`` tokens; masks may also become EOS padding, which only
    ends the text (a run before a committed EOS, or at the end of the last block, is ``0..k``
    tokens). After a non-final block more text follows, so its trailing run of ``k`` masks
    gives two problems: ``k`` tokens then ``Gap()``, or fewer than ``k`` tokens then the end.
    What "one token" is, is the gap model:

    - ``"tokens"``: any non-special token (:meth:`Gap.tokens`, a token trie per position):
      exact, for small vocabularies;
    - ``"bytes"``: a single-byte token: a sound under-approximation (a completion found is a
      real one; one that needs multi-byte tokens in a gap is missed), one NFA state per mask;
    - ``"unbounded"``: every run is ``Gap()`` (Mündler et al.): an over-approximation that may
      accept a block no ``k`` tokens complete;
    - ``"auto"`` (default): ``"tokens"`` when the vocabulary's trie has at most
      ``2048 / len(block)`` nodes, else ``"bytes"``.

    Parameters
    ----------
    block : sequence of int
        Token ids; negative = still masked.
    vocab : Vocabulary
        Gives token bytes, special and EOS ids.
    prefix : bytes, optional
        The output before the block.
    final : bool, optional
        Whether this is the last block (the text must be complete at its end).
    gaps : {"auto", "tokens", "bytes", "unbounded"}, optional
        Gap model (see above).

    Returns
    -------
    list of list of (bytes or Gap)
        Empty when a committed token already makes completion impossible (a special token
        that is not EOS, a padded id, text after EOS).
    """
    toks = [int(t) for t in block]
    if gaps == "auto":
        gaps = "tokens" if vocab.num_nodes * max(len(toks), 1) <= _AUTO_TOKEN_STATES else "bytes"
    if gaps not in ("tokens", "bytes", "unbounded"):
        raise ValueError(f"gaps must be 'auto', 'tokens', 'bytes' or 'unbounded', got {gaps!r}")
    eos = set(vocab.eos_ids.tolist())
    singles = _single_bytes(vocab) if gaps == "bytes" else None
    parts: list[Part] = [bytes(prefix)]
    run = 0

    def hole(lo: int, hi: int) -> Gap:
        if gaps == "tokens":
            return Gap.tokens(vocab, lo, hi)
        return Gap(lo, hi, singles) if gaps == "bytes" else Gap()

    for j, tok in enumerate(toks):
        if tok < 0:
            run += 1
            continue
        if tok in eos:
            if any(x >= 0 and x not in eos for x in toks[j + 1 :]):
                return []
            if run:
                parts.append(hole(0, run))
            return [parts]
        if tok >= vocab.size or vocab.token_lengths[tok] == 0:
            return []
        if run:
            parts.append(hole(run, run))
            run = 0
        parts.append(vocab.token_bytes_of(tok))
    if final:
        return [parts + [hole(0, run)]] if run else [parts]
    if gaps == "unbounded" or run == 0:
        return [parts + [Gap()]]
    return [parts + [hole(run, run), Gap()], parts + [hole(0, run - 1)]]


def block_completable(
    checker: InfillChecker,
    block: Sequence[int],
    vocab: Vocabulary,
    *,
    prefix: bytes = b"",
    final: bool = False,
    gaps: GapMode = "auto",
) -> InfillResult:
    """Return the first completable problem of :func:`block_problems` (or a negative result).

    This is Mündler et al.'s check for a diffusion step: fill a proposed token into ``block``
    and reject it when the result is not completable.
    """
    items = 0
    for parts in block_problems(block, vocab, prefix=prefix, final=final, gaps=gaps):
        result = _check_relaxed_tail(checker, parts)
        if result is None:
            result = checker.check(parts)
        if result:
            return result
        items += result.num_items
    return InfillResult(False, num_items=items)


# a trailing gap of at least this many units is first checked as an unbounded one
_RELAX_MIN_UNITS = 4


def _check_relaxed_tail(checker: InfillChecker, parts: list[Part]) -> InfillResult | None:
    """Decide a problem ending in a long ``Gap(0, k)`` through its unbounded relaxation, if can.

    ``L(G) ∩ w·A^{≤k}`` is empty when ``L(G) ∩ w·A*`` is (a superset), and non-empty when the
    relaxation's witness fills the tail with at most ``k`` bytes (its words are at least one
    byte each, so at most ``k`` units). The relaxed NFA has one state for the tail instead of
    ``k + 1``, which is most of a diffusion check: the positions after the current block are
    one long trailing gap. Returns None when the relaxation does not decide (a longer witness).
    """
    tail = parts[-1] if parts else None
    if not isinstance(tail, Gap) or tail.min_len != 0 or tail.max_len is None:
        return None
    if tail.max_len < _RELAX_MIN_UNITS:
        return None
    relaxed = checker.check([*parts[:-1], Gap(0, None, tail.alphabet)])
    if not relaxed:
        return relaxed
    assert relaxed.fills is not None
    return relaxed if len(relaxed.fills[-1]) <= tail.max_len else None


# --------------------------------------------------------------------------------------------
# LAVE
# --------------------------------------------------------------------------------------------


def lookahead(
    matcher: Matcher, block: Any, candidates: Any, *, final: bool = False
) -> Int32Array | None:
    """Fill the masked positions of a block from the model's predictions, if the grammar allows.

    Left to right, a committed token must be accepted by the grammar, and a masked position
    takes its first candidate the grammar accepts (the argmax when it is allowed, so an
    all-argmax filling is tried first). Once EOS is taken, every later position must be EOS
    (diffusion LMs pad with it). A filling found here is a concrete witness: the block stays
    completable.

    Parameters
    ----------
    matcher : Matcher
        The grammar state before the block (not modified: a fork is advanced).
    block : (L,) int array
        Token ids, :data:`MASK` where masked.
    candidates : (L, k) or (L,) int array or tensor
        Predictions of the same forward pass per position, best first (negative = none).
    final : bool, optional
        Also require a complete sentence at the end of the block.

    Returns
    -------
    (L,) int32 or None
        The filled block, or None when this greedy filling fails.
    """
    toks = _to_numpy(block, np.int64, "block", 1)
    cand = np.asarray(candidates.cpu() if hasattr(candidates, "cpu") else candidates)
    cand = cand.reshape(cand.shape[0], -1).astype(np.int64)
    if cand.shape[0] != toks.shape[0]:
        raise ValueError(f"candidates have {cand.shape[0]} rows for a block of {toks.shape[0]}")
    vocab = matcher.vocab
    eos = set(vocab.eos_ids.tolist())
    pad = int(vocab.eos_ids[0]) if vocab.eos_ids.size else MASK
    m = matcher.fork()
    out = toks.astype(np.int32)
    for j, tok in enumerate(toks.tolist()):
        if m.is_terminated():
            if (tok >= 0 and tok not in eos) or (tok < 0 and pad < 0):
                return None
            out[j] = tok if tok >= 0 else pad
        elif tok >= 0:
            if not m.accept_token(tok):
                return None
        else:
            for c in cand[j].tolist():
                if 0 <= c < vocab.model_vocab_size and m.accept_token(c):
                    out[j] = c
                    break
            else:
                return None
    if final and not m.is_accepting():
        return None
    return out


@dataclass(frozen=True, slots=True)
class LaveResult:
    """The outcome of :func:`lave_step`.

    Attributes
    ----------
    block : (L,) int32
        The block with every accepted proposal committed.
    accepted : (P,) bool
        Per proposal, whether it was committed.
    methods : tuple of str
        Per proposal: ``"lookahead"`` (a lookahead filling verified it), ``"infill"`` (the
        exact fallback did) or ``"rejected"``.
    """

    block: Int32Array
    accepted: BoolArray
    methods: tuple[str, ...]


def lave_step(
    matcher: Matcher,
    block: Any,
    proposals: Sequence[tuple[int, int]],
    candidates: Any,
    *,
    checker: InfillChecker | None = None,
    prefix: bytes = b"",
    final: bool = False,
    gaps: GapMode = "auto",
) -> LaveResult:
    """Verify the tokens a diffusion step proposes, committing those that keep the block valid.

    Proposals are checked in order, each against the block with the previous accepted ones
    committed. A proposal ``(i, t)`` is accepted when :func:`lookahead` fills the rest of the
    block with ``t`` at ``i`` (LAVE's lookahead-then-verify); otherwise, when ``checker`` is
    given, when :func:`block_completable` finds a completion. With a checker and
    ``gaps="tokens"`` a proposal is accepted if and only if the block stays completable; with
    ``"bytes"`` or without a checker, only verified proposals are (never an uncompletable one,
    sometimes not a completable one); with ``"unbounded"``, every completable one is, and
    possibly some that no filling of the block's masks completes.

    Parameters
    ----------
    matcher : Matcher
        The grammar state before the block (not modified).
    block : (L,) int array
        Token ids, :data:`MASK` where masked.
    proposals : sequence of (int, int)
        ``(position, token)`` pairs, in the order the unmasking policy ranks them; positions
        must be masked.
    candidates : (L, k) or (L,) int array or tensor
        Predictions of the same forward pass, best first, for the lookahead.
    checker : InfillChecker, optional
        The exact fallback; None disables it.
    prefix : bytes, optional
        The output text before the block (what ``matcher`` has accepted), for the fallback.
    final : bool, optional
        Whether this is the last block.
    gaps : {"auto", "tokens", "bytes", "unbounded"}, optional
        Gap model of the fallback (see :func:`block_problems`).

    Returns
    -------
    LaveResult

    Raises
    ------
    ValueError
        If a proposal names a position out of range or already committed.
    """
    cur = _to_numpy(block, np.int64, "block", 1).astype(np.int32)
    accepted = np.zeros(len(proposals), dtype=np.bool_)
    methods: list[str] = []
    for k, (pos, tok) in enumerate(proposals):
        if not 0 <= pos < cur.shape[0] or cur[pos] >= 0:
            raise ValueError(f"proposal {k} names position {pos}, which is not a masked position")
        trial = cur.copy()
        trial[pos] = tok
        method = "rejected"
        if lookahead(matcher, trial, candidates, final=final) is not None:
            method = "lookahead"
        elif checker is not None and block_completable(
            checker, trial.tolist(), matcher.vocab, prefix=prefix, final=final, gaps=gaps
        ):
            method = "infill"
        if method != "rejected":
            cur = trial
            accepted[k] = True
        methods.append(method)
    return LaveResult(cur, accepted, tuple(methods))
