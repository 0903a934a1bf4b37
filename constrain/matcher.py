"""Stage 5: the Matcher, one per sequence: accept tokens, fill bitmasks, roll back, fork.

The names and contracts follow XGrammar's ``GrammarMatcher`` (the interface vLLM and SGLang
integrate with): ``accept_token`` returns ``False`` for a token the grammar does not allow and
leaves the state unchanged (it never raises for that), ``fill_next_token_bitmask`` writes one row
of the de-facto int32 bitmask (bit ``j`` of word ``w`` is token ``32 * w + j``; 1 = allowed).

State: a set of lexing/parsing hypotheses over a persistent Earley chart (see
``constrain.kernels.numba_match``). Rolling back restores the hypotheses of an earlier step and
truncates the chart, so it costs O(1) per token rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from constrain._types import Int32Array
from constrain.batch import bitmask_row, bitmask_rows, fill_next_token_bitmasks, row_token_ids
from constrain.canonical_track import CanonicalTrack
from constrain.compiler import CompiledGrammar
from constrain.errors import CompileLimitError, MatcherStateError
from constrain.kernels.entry import cached_entry
from constrain.kernels.numba_earley import (
    STATUS_CAPACITY,
    STATUS_LIMIT,
    earley_init_kernel,
    scan_kernel_items,
)
from constrain.kernels.numba_match import (
    H_ITEMS,
    H_NUM,
    H_OFF,
    H_SETS,
    H_TERM,
    MEMO_HYPS,
    STATUS_ENTRY_MISS,
    STATUS_HISTORY,
    STATUS_HYPOTHESES,
    accept_token_kernel,
    end_accepting_kernel,
    fill_row_kernel,
    simulate_kernel,
)
from constrain.tables import TableSnapshot
from constrain.token_budgets import BudgetTrack, end_terminal
from constrain.vocab.canonical import START, CanonicalBpe

__all__ = ["Matcher", "fill_next_token_bitmasks"]

_Snapshot = tuple[Int32Array, int, int, bool]

_MEMO_SIZE = 1 << 12
_SHARED_HYPS = 32
_ROW_MEMO = 4
_MAX_FORCED = 4096
# jump-forward probes' bytes, read-only as accept_bytes' (simulate_kernel takes read-only data)
_EVERY_BYTE = np.arange(256, dtype=np.uint8)
_EVERY_BYTE.flags.writeable = False


class Matcher:
    """Track one sequence against a compiled grammar.

    Parameters
    ----------
    compiled : CompiledGrammar
        The grammar, compiled for the tokenizer's vocabulary.
    canonical : bool or CanonicalBpe, optional
        Also keep to the tokenizer's own encoding of the text (``True``: the relation of the
        tokenizer the vocabulary was read from; or a
        :class:`~constrain.vocab.canonical.CanonicalBpe` of the same vocabulary): masks and
        ``accept_token`` refuse a token the tokenizer would never write there. Text accepted by
        :meth:`accept_bytes` starts a new text for this check.

    Examples
    --------
    >>> m = Matcher(compiled)  # doctest: +SKIP
    >>> bitmask = allocate_token_bitmask(1, vocab.size)  # doctest: +SKIP
    >>> m.fill_next_token_bitmask(bitmask)  # doctest: +SKIP
    >>> m.accept_token(token_id)  # doctest: +SKIP
    True
    """

    def __init__(
        self, compiled: CompiledGrammar, *, canonical: bool | CanonicalBpe | None = None
    ) -> None:
        if not isinstance(compiled, CompiledGrammar):
            raise TypeError(
                f"Matcher takes a CompiledGrammar, got {type(compiled).__name__}; "
                "use Compiler(vocab).compile(grammar)"
            )
        if canonical is True:
            canonical = CanonicalBpe.for_vocabulary(compiled.vocab)
        elif canonical is False:
            canonical = None
        if canonical is not None and canonical.vocab != compiled.vocab:
            raise ValueError(
                "canonical= was built for another vocabulary than the compiled grammar's; build "
                "it with CanonicalBpe.from_huggingface(tokenizer, compiled.vocab)"
            )
        self.canonical = canonical
        self._track = None if canonical is None else CanonicalTrack(canonical)
        budgets = compiled.token_budgets  # counted here: constrain.token_budgets
        self._budget = BudgetTrack(budgets) if budgets else None
        # terminals that never span a token boundary (Grammar.token_aligned, "token")
        self._one_token = tuple(t for t, kind in compiled.token_aligned if kind == "token")
        self.compiled = compiled
        self.vocab = compiled.vocab
        self._vocab_size = compiled.vocab.size
        self._entries_by_kernel = compiled.kernel_entries
        self._grammar = compiled.match_arrays
        self._lazy = compiled.lazy is not None
        parser = compiled.parser
        cap = compiled.limits.max_hypotheses
        self._hyp = np.zeros((2, cap), dtype=np.int32)
        self._cur = np.zeros((2, cap), dtype=np.int32)
        self._stack = np.zeros((2, 2, cap), dtype=np.int32)  # ping-pong buffers for accepting
        self._stack_n = np.zeros(2, dtype=np.int32)
        max_len = self.vocab.max_token_length
        self._fstack = np.zeros((max_len + 2, 2, _SHARED_HYPS), dtype=np.int32)
        self._fstack_n = np.zeros(max_len + 2, dtype=np.int32)
        self._no_lcp = np.zeros(1, dtype=np.int64)
        self._eos = self._grammar[2][2]
        self._eos_set = frozenset(int(e) for e in self._eos)
        self._items = np.zeros((3, 4096), dtype=np.int32)
        self._sets = np.zeros((6, 256), dtype=np.int64)
        self._set_bits = np.zeros((256, parser.num_words), dtype=np.uint64)
        self._counts = np.zeros(4, dtype=np.int64)
        self._scratch = np.full((2, parser.num_items), -1, dtype=np.int64)
        self._memo = np.full((3, _MEMO_SIZE), -1, dtype=np.int64)
        self._kernels: dict[int, Int32Array] = {}
        self._entry_index: object = None
        self._entry_memo: dict[tuple[int, int], int] = {}
        # the last rows, memoised inside the fill kernel (numba_match.fill_row_kernel)
        self._rm_n = np.full(_ROW_MEMO, -1, dtype=np.int64)
        self._rm_key = np.zeros((_ROW_MEMO, 2 * MEMO_HYPS), dtype=np.int64)
        self._rm_rows = np.zeros((_ROW_MEMO, (self.vocab.size + 31) // 32), dtype=np.uint32)
        self._rm_next = np.zeros(1, dtype=np.int64)
        self._ids4 = np.zeros(4, dtype=np.int32)
        self._kbuf = np.empty(256, dtype=np.int32)
        self._eids_unset = np.full(cap, -1, dtype=np.int32)  # the fill's first try: all unknown
        self._tables = compiled.tables
        # the two hot kernels' compiled entries, once resolved (constrain.kernels.entry)
        self._fill_kernel: Any = None
        self._accept_kernel: Any = None
        self._item_next_t = parser.item_next_t
        self._last_bitmask: Any = None
        self._last_rows = np.zeros((0, 0), dtype=np.uint32)
        # the row of the last (bitmask, index) filled, and its padding words past the vocabulary
        self._last_index = -1
        empty = np.zeros(0, dtype=np.uint32)
        self._last_row: tuple[np.ndarray, np.ndarray] = (empty, empty)
        self._job = np.zeros((4, 1), dtype=np.int64)  # hyp start, hyp end, byte start, byte end
        self._result = np.zeros(1, dtype=np.int32)
        # history, one row per step (numba_match.H_*), and the hypotheses of each step
        self._hist = np.zeros((64, 5), dtype=np.int64)
        self._hist_hyp = np.zeros((2, 256), dtype=np.int32)
        self._hist_len = np.zeros(2, dtype=np.int64)
        self._rebuild_structures()
        self.reset()

    # -- chart storage ----------------------------------------------------------------------

    def _rebuild_structures(self) -> None:
        """Rebuild the kernels' per-matcher structures (after arrays were replaced: grown, forked).

        The only place they are made (``constrain.kernels.numba_match``): the Earley ``chart``,
        the fill's ``fill_work`` and the accept's ``step_work``.
        """
        self._chart = (
            self._items, self._sets, self._set_bits, self._counts, self._scratch, self._memo
        )  # fmt: skip
        # _grow_ahead grows the chart past three quarters of its capacity
        self._grow_items = 3 * self._items.shape[1] // 4
        self._grow_sets = 3 * self._sets.shape[1] // 4
        self._fill_work = (
            self._kbuf, self._fstack, self._fstack_n, self._stack, self._rm_n, self._rm_key,
            self._rm_rows, self._rm_next,
        )  # fmt: skip
        self._step_work = (
            self._job, self._no_lcp, self._result, self._stack, self._stack_n, self._cur,
            self._hist, self._hist_hyp, self._hist_len,
        )  # fmt: skip

    def _grow(self) -> None:
        """Double the chart capacity, keeping its content."""
        n_sets, n_items = int(self._counts[0]), int(self._counts[1])
        items = np.zeros((3, 2 * self._items.shape[1]), dtype=np.int32)
        items[:, :n_items] = self._items[:, :n_items]
        sets = np.zeros((6, 2 * self._sets.shape[1]), dtype=np.int64)
        sets[:, :n_sets] = self._sets[:, :n_sets]
        set_bits = np.zeros((2 * self._set_bits.shape[0], self._set_bits.shape[1]), np.uint64)
        set_bits[:n_sets] = self._set_bits[:n_sets]
        self._items, self._sets, self._set_bits = items, sets, set_bits
        self._rebuild_structures()

    def _check(self, status: int) -> bool:
        """Handle a kernel status; return True when the call must be retried after growing."""
        if status >= 0:
            return False
        if status == STATUS_CAPACITY:
            self._grow()
            return True
        if status == STATUS_LIMIT:
            limit = self.compiled.limits.max_set_items
            raise CompileLimitError(
                "max_set_items", limit, limit + 1, hint="the grammar is too ambiguous here"
            )
        if status == STATUS_HYPOTHESES:
            limit = self.compiled.limits.max_hypotheses
            raise CompileLimitError(
                "max_hypotheses", limit, limit + 1, hint="too many ways to lex the input"
            )
        return False

    def _truncate(self, n_sets: int, n_items: int) -> None:
        self._counts[0] = n_sets
        self._counts[1] = n_items

    # -- state ------------------------------------------------------------------------------

    def reset(self) -> None:
        """Return to the initial state (nothing accepted)."""
        while True:
            status = earley_init_kernel(self._grammar[1], self._chart)
            if not self._check(status):
                break
        self._n = 1
        self._hyp[:, 0] = 0
        self._terminated = False
        self._hist_len[:] = 0
        if self._track is not None:
            self._track.reset()
        if self._budget is not None:
            self._budget.reset()
            self._budget_step(0, self._budget.counts, counted=False)

    def _snapshot(self) -> _Snapshot:
        return (
            self._hyp[:, : self._n].copy(),
            int(self._counts[0]),
            int(self._counts[1]),
            self._terminated,
        )

    def _restore(self, snap: _Snapshot) -> None:
        hyp, n_sets, n_items, terminated = snap
        self._n = hyp.shape[1]
        self._hyp[:, : self._n] = hyp
        self._truncate(n_sets, n_items)
        self._terminated = terminated

    def _grow_history(self) -> None:
        rows, used = int(self._hist_len[0]), int(self._hist_len[1])
        hist = np.zeros((2 * self._hist.shape[0], self._hist.shape[1]), dtype=np.int64)
        hist[:rows] = self._hist[:rows]
        need = used + self._n
        hist_hyp = np.zeros((2, max(2 * self._hist_hyp.shape[1], 2 * need)), dtype=np.int32)
        hist_hyp[:, :used] = self._hist_hyp[:, :used]
        self._hist, self._hist_hyp = hist, hist_hyp
        self._rebuild_structures()

    def _push_history(self) -> None:
        """Record the current state as one step (what ``rollback(1)`` returns to)."""
        rows, used, n = int(self._hist_len[0]), int(self._hist_len[1]), self._n
        while rows >= self._hist.shape[0] or used + n > self._hist_hyp.shape[1]:
            self._grow_history()
        self._hist[rows] = (used, n, self._counts[0], self._counts[1], self._terminated)
        self._hist_hyp[:, used : used + n] = self._hyp[:, :n]
        self._hist_len[0] = rows + 1
        self._hist_len[1] = used + n

    @property
    def num_accepted_tokens(self) -> int:
        """Number of tokens accepted since the last reset (what ``rollback`` can undo)."""
        return int(self._hist_len[0])

    def fork(self) -> Matcher:
        """Return an independent copy of this matcher (same position, own state)."""
        other = Matcher.__new__(Matcher)
        other.__dict__.update(self.__dict__)
        for name in ("_hyp", "_cur", "_stack", "_stack_n", "_fstack", "_fstack_n", "_items",
                     "_sets", "_set_bits", "_counts", "_scratch", "_memo", "_job",
                     "_result", "_ids4", "_kbuf", "_hist", "_hist_hyp",
                     "_hist_len", "_rm_n", "_rm_key", "_rm_rows", "_rm_next"):  # fmt: skip
            setattr(other, name, getattr(self, name).copy())
        # Earley set uids are per matcher, numbered from one counter by both sides of a fork:
        # memos keyed by uid must not be shared
        other._kernels = dict(self._kernels)
        other._entry_memo = dict(self._entry_memo)
        other._track = None if self._track is None else self._track.copy()
        other._budget = None if self._budget is None else self._budget.copy()
        other._rebuild_structures()
        return other

    @property
    def end_token_ids(self) -> frozenset[int]:
        """The ids that end the output (the compiled grammar's EOS tokens)."""
        return self._eos_set

    def is_terminated(self) -> bool:
        """Return whether an end-of-sequence token was accepted."""
        return self._terminated

    def is_accepting(self) -> bool:
        """Return whether the text so far is a complete sentence of the grammar."""
        if self._terminated:
            return True
        while True:
            res = end_accepting_kernel(self._hyp, self._n, self._grammar, self._chart)
            if not self._check(res):
                break
        return bool(res == 1)

    # -- accepting ----------------------------------------------------------------------------

    def _sync(self, path: np.ndarray | None = None, light: bool = False, token: int = -1) -> bool:
        """Build the lazy lexer's rows a token (the bytes ``path``, the token ``token``) reads.

        True where a ``light`` one leaves a mask candidates' rows to build (``candidate_rows``).
        """
        if not self._lazy:
            return False
        states = self._hyp[1, : self._n]
        self._grammar = self.compiled.reach(states, path, light=light, token=token)
        return light and self.compiled.pending(states)

    def _run(self, data: np.ndarray, lo: np.ndarray, hi: np.ndarray, result: np.ndarray) -> None:
        """Run simulation jobs over ``data[lo[j]:hi[j]]``, all from the current hypotheses."""
        self._sync()  # single bytes: the hypotheses' own rows
        zeros = np.zeros(lo.shape[0], dtype=np.int64)
        ends = np.full(lo.shape[0], self._n, dtype=np.int64)
        jobs = (zeros, ends, lo, hi, zeros)
        while True:
            res = simulate_kernel(
                jobs, self._hyp, data, result, self._stack, self._stack_n, self._cur, True, False,
                self._grammar, self._chart,
            )  # fmt: skip
            if not self._check(res):
                break

    def _advance(self, data: np.ndarray, start: int, end: int) -> int:
        """Advance over ``data[start:end]``; normalised survivors are left in ``self._cur``."""
        self._sync(data[start:end])
        job = self._job
        job[1, 0] = self._n
        job[2, 0] = start
        job[3, 0] = end
        while True:
            res = simulate_kernel(
                (job[0], job[1], job[2], job[3], self._no_lcp), self._hyp, data, self._result,
                self._stack, self._stack_n, self._cur, True, True, self._grammar, self._chart,
            )  # fmt: skip
            if not self._check(res):
                break
        return int(self._result[0])

    def _commit(self, n: int) -> None:
        self._push_history()
        self._hyp[:, :n] = self._cur[:, :n]
        self._n = n
        self._grow_ahead()

    def _grow_ahead(self) -> None:
        """Grow the chart once an advance leaves it three quarters full.

        A kernel that runs out of room returns and is called again from the start (a whole
        mask fill, checks included): growing between steps avoids that.
        """
        counts = self._counts
        if counts[1] > self._grow_items or counts[0] > self._grow_sets:
            self._grow()

    def _entry(self, site: str, dispatcher: Any, args: tuple[Any, ...]) -> Any:
        """Return what to call at a hot kernel ``site`` ("fill", "accept"); keep it once resolved.

        The call site is shared by the grammar's matchers (``cached_entry``); once it has
        resolved a compiled entry, the matcher keeps it in ``_fill_kernel``/``_accept_kernel``.
        """
        kernel = cached_entry(self._entries_by_kernel, site, dispatcher, args)
        if kernel is not dispatcher:
            setattr(self, f"_{site}_kernel", kernel)
        return kernel

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token if the grammar allows it.

        Parameters
        ----------
        token_id : int
            A token id in ``[0, vocab.size)`` (or a padded id, which is never allowed).

        Returns
        -------
        bool
            ``True`` if accepted. ``False`` if the grammar does not allow it here, after
            termination, or for special tokens other than EOS; the state is then unchanged.

        Raises
        ------
        ValueError
            If ``token_id`` is negative, not an integer, or past the model's vocabulary
            (``vocab.model_vocab_size``; ids between ``vocab.size`` and it are padding and
            never allowed).
        """
        tok = int(token_id)
        if tok < 0 or tok != token_id:
            raise ValueError(f"token id must be a non-negative integer, got {token_id!r}")
        if self._terminated:
            return False
        vocab = self.vocab
        if tok >= self._vocab_size:
            if tok >= vocab.model_vocab_size:
                raise ValueError(
                    f"token id {tok} is out of range: the model vocabulary has "
                    f"{vocab.model_vocab_size} ids"
                )
            return False
        track = self._track
        rows = int(self._hist_len[0])
        if tok in self._eos_set:
            if not self.is_accepting() or (track is not None and not track.may_end()):
                return False
            self._push_history()
            if track is not None:
                track.push(START)
            self._terminated = True
            return True
        canon = None if track is None else track.admit(self, tok)
        if track is not None and canon is None:
            return False
        self._sync(token=tok)
        while True:
            args = (tok, self._hyp, self._n, self._grammar, self._chart, self._step_work)
            # one compiled entry serves every matcher of the grammar (constrain.kernels.entry)
            kernel = self._accept_kernel or self._entry("accept", accept_token_kernel, args)
            res = kernel(*args)
            if res >= 0:
                break
            if res == STATUS_HISTORY:
                self._grow_history()
                continue
            if not self._check(res):
                break
        if res <= 0:
            return False
        self._n = res
        if track is not None:
            track.push(canon)  # type: ignore[arg-type]
        self._grow_ahead()
        if self._one_token:
            self._end_one_token_lexemes()
        if self._budget is not None:
            self._budget_step(rows, self._budget.counts, counted=True)
        return True

    def accept_tokens(self, token_ids: Sequence[int]) -> int:
        """Accept tokens in order until one is rejected; return how many were accepted."""
        for k, tok in enumerate(token_ids):
            if not self.accept_token(tok):
                return k
        return len(token_ids)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """Return how many leading tokens would be accepted, without changing the state."""
        k = self.accept_tokens(token_ids)
        if k:
            self.rollback(k)
        return k

    def accept_bytes(self, data: bytes | str) -> bool:
        """Advance by raw text (counted as one step for :meth:`rollback`), if allowed.

        Special tokens are accepted by id only (:meth:`accept_token`): bytes holding 0xFF, the
        lead byte of their encoding, which no UTF-8 text contains, are refused.
        """
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if self._terminated or 0xFF in raw:
            return False
        rows = int(self._hist_len[0])
        if not raw:
            self._push_history()
            if self._track is not None:  # nothing read: the text goes on as it was
                self._track.push(self._track.states[-1])
            return True
        text = np.frombuffer(raw, dtype=np.uint8)
        if self._lazy and len(raw) > self.compiled.reach_depth:
            if not self._accept_chunks(text):
                return False
        else:
            n = self._advance(text, 0, len(raw))
            if n <= 0:
                return False
            self._commit(n)
        if self._track is not None:
            self._track.push(START)
        if self._one_token:
            self._end_one_token_lexemes()
        if self._budget is not None:
            self._budget_step(rows, self._budget.counts, counted=False)
        return True

    def _end_one_token_lexemes(self) -> None:
        """End every lexeme of a one-token terminal that the last step left in progress.

        Such a lexeme is the rest of the token it starts in (``Grammar.token_aligned``); the
        hypotheses where it ended at the token's end go on. If none would survive (the token
        stops inside a character the lexeme must finish), it goes on into the next token.
        """
        chart = lambda: self._chart  # noqa: E731 (the chart is replaced when it grows)
        for term in self._one_token:
            n = end_terminal(
                term, 1 << 62, self._hyp, self._n, self._grammar, chart, self._check,
                lexemes_only=True,
            )  # fmt: skip
            self._n = n or self._n

    def _budget_step(self, rows: int, before: Any, *, counted: bool) -> None:
        """Keep the token counts of the step saved at history row ``rows``; update them."""
        assert self._budget is not None
        first = -1  # for a token, the chart's sets before it (self._hist row: H_SETS)
        if rows < int(self._hist_len[0]):
            self._budget.record(rows, before)
            first = int(self._hist[rows, H_SETS]) if counted else -1
        lex = self._grammar[0]
        self._budget.boundary(self._budget_view, (lex[3], lex[6]), first, self._end_terminal)

    def _budget_view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
        counts = self._counts  # sets, items, the last set uid given, memo entries
        return self._hyp[:, : self._n], self._sets, self._set_bits, int(counts[0]), int(counts[2])

    def _end_terminal(self, term: int, mark: int) -> bool:
        """End an occurrence of a budgeted terminal where it stands (False: none would live)."""
        chart, hyp = (lambda: self._chart), self._hyp
        n = end_terminal(term, mark, hyp, self._n, self._grammar, chart, self._check)
        self._n = n or self._n
        return n > 0

    def _accept_chunks(self, data: np.ndarray) -> bool:
        """Accept long text a token's length at a time (a lazy lexer builds rows on the way)."""
        self._push_history()  # the state before, as one step
        step = self.compiled.reach_depth
        accepted = False
        try:
            for lo in range(0, data.shape[0], step):
                n = self._advance(data, lo, min(lo + step, data.shape[0]))
                if n <= 0:
                    return False
                self._hyp[:, :n] = self._cur[:, :n]
                self._n = n
                self._grow_ahead()
            accepted = True
        finally:
            if not accepted:  # refused, or a limit raised on the way: as before the call
                self._undo_step()
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens.

        Raises
        ------
        MatcherStateError
            If more tokens are rolled back than were accepted since the last reset.
        """
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        rows = int(self._hist_len[0])
        if num_tokens > rows:
            raise MatcherStateError(
                f"cannot roll back {num_tokens} tokens: only {rows} were accepted "
                "since the last reset"
            )
        if num_tokens == 0:
            return
        self._undo_step(num_tokens)
        if self._track is not None:
            self._track.pop(num_tokens)

    def _undo_step(self, num_tokens: int = 1) -> None:
        """Restore the hypotheses and chart of ``num_tokens`` steps ago (history rows)."""
        rows = int(self._hist_len[0])
        row = self._hist[rows - num_tokens]
        off, n = int(row[H_OFF]), int(row[H_NUM])
        self._n = n
        self._hyp[:, :n] = self._hist_hyp[:, off : off + n]
        self._truncate(int(row[H_SETS]), int(row[H_ITEMS]))
        self._terminated = bool(row[H_TERM])
        self._hist_len[0] = rows - num_tokens
        self._hist_len[1] = off
        if self._budget is not None:
            self._budget.undo(rows - num_tokens)

    # -- masks ------------------------------------------------------------------------------

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> bool:
        """Write the allowed next tokens into row ``index`` of ``bitmask``.

        Parameters
        ----------
        bitmask : (batch, ceil(V/32)) int32 torch.Tensor or numpy.ndarray, on the CPU
            As returned by :func:`constrain.allocate_token_bitmask`; it may be wider than the
            vocabulary (padded model vocabularies), the extra bits are cleared.
        index : int, optional
            Row to fill.

        Returns
        -------
        bool
            Whether the row must be applied to the logits (``False`` only when every token is
            allowed, which a grammar-constrained matcher never reports).

        Raises
        ------
        TypeError
            If the bitmask is not int32.
        ValueError
            If the bitmask is not on the CPU, not a C-contiguous 1-D or 2-D array, read-only,
            or narrower than the vocabulary.
        IndexError
            If ``index`` is not a row of the bitmask.

        Notes
        -----
        Semantics, as a loop::

            for t in range(bitmask.shape[1] * 32):
                allowed = t < vocab.size and matcher.validate_tokens([t]) == 1
                set_bit(bitmask[index], t, allowed)
        """
        if bitmask is self._last_bitmask and index == self._last_index:
            row, padded = self._last_row
        else:
            if bitmask is self._last_bitmask:
                rows = self._last_rows
            else:
                rows = bitmask_rows(bitmask)
                self._last_bitmask, self._last_rows = bitmask, rows
            row, padded = bitmask_row(rows, index, self.vocab.size)
            self._last_index = index
            self._last_row = (row, padded)
        if padded.shape[0]:
            padded[:] = 0
        self._fill_row(row)
        return True

    def _fill_row(self, row: np.ndarray) -> None:
        """Write the row (``words`` uint32, C-contiguous, writable); one kernel call mostly."""
        if self._terminated:
            row[:] = 0
            self._set_eos(row)
            return
        n = self._n
        # entries looked up inside the kernel first; on a miss, found or built here and passed
        entry_ids = self._eids_unset
        snap = self._tables.snapshot()
        if self._sync(light=True):  # a state sharing tables: its candidates' rows first
            entry_ids, snap = self._entries(n)
            self._grammar = self.compiled.candidate_rows(self._hyp[1, :n], entry_ids, snap)
        while True:
            args = (
                self._hyp, n, entry_ids, row, self._grammar, snap.arrays, self._chart,
                self._fill_work,
            )  # fmt: skip
            kernel = self._fill_kernel or self._entry("fill", fill_row_kernel, args)
            res = kernel(*args)
            if res >= 0:
                break
            if res == STATUS_ENTRY_MISS:
                entry_ids, snap = self._entries(n)
                continue
            if not self._check(res):
                break
        if self._track is not None:
            self._track.filter_row(self, row)

    def _entries(self, n: int) -> tuple[Int32Array, TableSnapshot]:
        """Token-table entries of the current hypotheses, memoised by (set uid, lexer state)."""
        tables = self._tables
        snap = tables.snapshot()
        if self._entry_index is not snap.key_index:
            self._entry_index = snap.key_index
            self._entry_memo = {}
        memo = self._entry_memo
        hyp = self._hyp
        uid_row = self._sets[5]
        ids = self._ids4[:n] if n <= 4 else np.empty(n, dtype=np.int32)
        keys = []
        complete = True
        for h in range(n):
            key = (int(uid_row[hyp[0, h]]), int(hyp[1, h]))
            keys.append(key)
            e = memo.get(key, -1)
            if not 0 <= e < snap.num_entries:
                complete = False
            ids[h] = e
        if complete:
            return ids, snap
        kernels = [self._kernel(int(hyp[0, h])) for h in range(n)]
        entry_ids, snap = tables.lookup(hyp[1, :n], kernels)
        if self._entry_index is snap.key_index:
            for key, e in zip(keys, entry_ids.tolist(), strict=True):
                memo[key] = e
        return entry_ids, snap

    def _kernel(self, p: int) -> Int32Array:
        """Sorted ids of the items of Earley set ``p`` with a terminal after the dot (cached)."""
        uid = int(self._sets[5, p])
        kernel = self._kernels.get(uid)
        if kernel is None:
            out = self._kbuf
            n = scan_kernel_items(p, self._items, self._sets, self._item_next_t, out)
            if n < 0:
                self._kbuf = out = np.empty(2 * -n, dtype=np.int32)
                self._rebuild_structures()  # the fill kernel takes it too
                n = scan_kernel_items(p, self._items, self._sets, self._item_next_t, out)
            kernel = out[:n].copy()
            if len(self._kernels) > 4096:
                self._kernels.clear()
            self._kernels[uid] = kernel
        return kernel

    def _set_eos(self, row: np.ndarray) -> None:
        for e in self._eos:
            row[e >> 5] |= np.uint32(1 << (int(e) & 31))

    def is_dead_end(self, token_id: int) -> bool:
        """Return whether ``token_id`` is allowed but leaves nothing allowed after it.

        Only canonical masks (``canonical=``) can lead there: a token may be canonical after the
        last one while the grammar then forces bytes the tokenizer would merge into it. The
        state is unchanged.
        """
        tok = int(token_id)
        kept = None if self._track is None else self._track.dropped
        if tok in self._eos_set or not self.accept_token(tok):
            return False
        try:
            return not self._terminated and self.allowed_token_ids().shape[0] == 0
        finally:
            self.rollback(1)
            if self._track is not None:  # this state's look-ahead, not the next one's
                self._track.dropped = kept

    def allowed_token_ids(self) -> Int32Array:
        """Return the sorted ids of the tokens allowed next (EOS included when accepting)."""
        words = (self.vocab.size + 31) // 32
        row = np.zeros(words, dtype=np.uint32)
        self._fill_row(row)
        ids = row_token_ids(row)  # sorted: bits past the vocabulary (padding) cut off
        return ids[: int(np.searchsorted(ids, self.vocab.size))]

    def next_bytes(self) -> np.ndarray:
        """Return which bytes the grammar allows next, ``(256,)`` bool; the state is unchanged.

        Byte 0xFF stands for the special tokens (matched by id, never text).
        """
        result = np.zeros(256, dtype=np.int32)
        if not self._terminated:
            lo = np.arange(256, dtype=np.int64)
            self._run(_EVERY_BYTE, lo, lo + 1, result)
        return result > 0

    def forced_bytes(self) -> bytes:
        """Return the bytes the grammar alone decides next (jump-forward), possibly empty.

        Stops where more than one byte is possible, the text could end here or a special token
        comes next (it is a token id, not text). The state is unchanged.
        """
        if self._terminated:
            return b""
        saved = self._snapshot()
        out = bytearray()
        lo = np.arange(256, dtype=np.int64)
        hi = lo + 1
        result = np.zeros(256, dtype=np.int32)
        try:
            while len(out) < _MAX_FORCED and not self.is_accepting():
                self._run(_EVERY_BYTE, lo, hi, result)
                choices = np.flatnonzero(result > 0)
                if choices.shape[0] != 1:
                    break
                b = int(choices[0])
                if b == 0xFF:  # a special token comes next: a token id, never forced text
                    break
                n = self._advance(_EVERY_BYTE, b, b + 1)
                self._hyp[:, :n] = self._cur[:, :n]
                self._n = n
                out.append(b)
        finally:
            self._restore(saved)
        return bytes(out)
