"""Stage 5: token budgets, the matcher's count of the tokens inside a bounded region.

A grammar over bytes cannot count tokens: the same text is spelled by many token sequences.
XGrammar's ``max_tokens`` (``any_text``, ``any_tokens``; a reasoning budget) is therefore kept
by the matcher, as XGrammar keeps it, per terminal of :attr:`Grammar.token_budgets
<constrain.ir.Grammar.token_budgets>`:

- at each token boundary (after the reset and after every accepted token) an *occurrence* of
  the terminal is open when some hypothesis is inside it: a lexeme of it in progress, or a
  lexeme boundary where the parser expects it. It is marked with the chart's last set uid:
  its parser states have uids up to the mark, a later occurrence's are newer;
- a token read while an occurrence is open counts when it put bytes in the occurrence's
  lexeme (the lexeme goes on after it, or it ended inside it): a token that began before the
  occurrence (whose last bytes start it) does not count, nor one of ignored text before it;
- once ``max_tokens`` tokens are counted and the occurrence is still open, it ends where it
  stands: its parser states stop expecting the terminal
  (:func:`~constrain.kernels.numba_earley.earley_drop_kernel`), so its lexeme in progress
  dies, while the hypotheses in which it already ended (split when it could end) go on, as do
  other lexemes in progress from the same states and a later occurrence (``T T``, a loop);
- when no hypothesis is inside the occurrence it is over, and the count starts again at 0;
- text given to ``accept_bytes`` is not counted (XGrammar's ``accept_string`` neither), though
  the occurrences are looked at again after it;
- if ending the occurrence would leave no hypothesis (the text stops inside a multi-byte
  character that the region's lexeme must finish), the budget is exceeded until it can end, at
  the next token boundary where it can, as XGrammar relaxes it.

Counts are per terminal and per matcher (a structural tag gives each bounded format a terminal
of its own). The state is saved per step, so ``rollback`` and ``fork`` restore it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from constrain.kernels.numba_earley import earley_drop_kernel

__all__ = ["BudgetTrack", "end_terminal"]

_Counts = tuple[tuple[int, int], ...]
"""Per budget: the tokens counted in the open occurrence and its mark, the chart's last set uid
when it opened (its sets have uids up to it; -1: no occurrence open)."""

_CLOSED = (0, -1)
_PARENT, _TERM, _ACC, _UID = 2, 3, 4, 5  # rows of the chart's sets (kernels/numba_earley.py)

View = tuple[np.ndarray, np.ndarray, np.ndarray, int, int]
"""What :meth:`BudgetTrack.boundary` reads of a matcher: the hypotheses ``(2, n)`` (Earley set,
lexer state), the chart's sets ``(6, cap)``, the terminals each set expects, the number of
sets and the last set uid given (every set has one up to it)."""


class BudgetTrack:
    """The token counts of one matcher's budgeted terminals, and their history per step.

    Parameters
    ----------
    budgets : sequence of (int, int)
        ``(terminal, max tokens)`` pairs (``CompiledGrammar.token_budgets``).
    """

    def __init__(self, budgets: Sequence[tuple[int, int]]) -> None:
        self.budgets = tuple(budgets)
        # per budget: its terminal's word and bit in the terminal bitsets, as Python ints
        self._bits = tuple((term >> 6, 1 << (term & 63)) for term, _ in self.budgets)
        self.counts: _Counts = tuple(_CLOSED for _ in self.budgets)
        self.history: list[_Counts] = []  # the counts before each step, one per history row

    def reset(self) -> None:
        """Forget every count and the history (the matcher's reset)."""
        self.counts = tuple(_CLOSED for _ in self.budgets)
        self.history = []

    def copy(self) -> BudgetTrack:
        """Return an independent copy (the counts are immutable tuples; the list is copied)."""
        other = BudgetTrack(self.budgets)
        other.counts, other.history = self.counts, list(self.history)
        return other

    def record(self, rows: int, before: _Counts) -> None:
        """Keep ``before``, the counts of the step that history row ``rows`` saved.

        Rows not recorded since the last one (an end-of-sequence token, empty text) left the
        counts as they were: they get ``before`` too.
        """
        del self.history[rows:]
        self.history.extend([before] * (rows + 1 - len(self.history)))

    def undo(self, rows: int) -> None:
        """Return to the counts of history row ``rows`` (the matcher rolled back to it)."""
        if rows < len(self.history):
            self.counts = self.history[rows]
            del self.history[rows:]

    def boundary(
        self,
        view: Callable[[], View],
        lex: tuple[np.ndarray, np.ndarray],
        first: int,
        end: Callable[[int, int], bool],
    ) -> None:
        """Update the counts at a token boundary; end the occurrences past their budget.

        Parameters
        ----------
        view : callable
            Returns the matcher's :data:`View` (it changes when an occurrence ends).
        lex : (alive_bits, restart)
            The terminals each lexer state can still complete, and each state's boundary state
            (a state that is its own is a lexeme boundary).
        first : int
            For a token, the number of chart sets before it (the sets made while reading it
            follow); -1 for a step that is not counted (``accept_bytes`` text, the reset).
        end : callable
            ``end(terminal, mark)`` ends the occurrence whose sets have uids up to ``mark``
            where it stands (:func:`end_terminal`); returns False, changing nothing, when that
            would leave no hypothesis.
        """
        hyp, sets, set_bits, n_sets, last = view()
        out = []
        for (term, limit), (used, mark), (word, bit) in zip(
            self.budgets, self.counts, self._bits, strict=True
        ):
            inside = _inside(hyp, sets, set_bits, lex, word, bit)
            if first >= 0 and mark >= 0:  # a token read while an occurrence was open
                lexeme = any(uid <= mark and mid for uid, mid in inside)
                if lexeme or _scanned(term, mark, sets, first, n_sets):
                    used += 1  # it put bytes in the occurrence's lexeme
            if not any(uid <= mark for uid, _ in inside):  # the occurrence is over
                used, mark = 0, last if inside else -1
            elif used >= limit and end(term, mark):
                hyp, sets, set_bits, n_sets, last = view()
                inside = _inside(hyp, sets, set_bits, lex, word, bit)
                used, mark = 0, last if inside else -1
            out.append((used, mark))
        self.counts = tuple(out)


def _inside(
    hyp: np.ndarray,
    sets: np.ndarray,
    set_bits: np.ndarray,
    lex: tuple[np.ndarray, np.ndarray],
    word: int,
    bit: int,
) -> list[tuple[int, bool]]:
    """Return (set uid, lexeme in progress) of each hypothesis where the terminal may go on."""
    alive, restart = lex
    return [
        (int(sets[_UID, p]), int(restart[s]) != s)
        for p, s in zip(hyp[0].tolist(), hyp[1].tolist(), strict=True)
        if int(set_bits[p, word]) & bit and int(alive[s, word]) & bit
    ]


def _scanned(term: int, mark: int, sets: np.ndarray, first: int, n_sets: int) -> bool:
    """Whether a set made by the last token scanned ``term`` from one of the occurrence's."""
    return any(
        int(sets[_TERM, q]) == term and int(sets[_UID, int(sets[_PARENT, q])]) <= mark
        for q in range(first, n_sets)
    )


def end_terminal(
    term: int,
    mark: int,
    hyp: np.ndarray,
    n: int,
    grammar: tuple[Any, ...],
    chart: Callable[[], tuple[Any, ...]],
    check: Callable[[int], bool],
    *,
    lexemes_only: bool = False,
) -> int:
    """End the occurrence of terminal ``term`` whose sets have uids up to ``mark``: survivors.

    Each hypothesis in one of those sets that expects ``term`` moves to a copy of the set
    without those items (sets made later hold a later occurrence, which keeps its own count).
    A hypothesis is dropped when its set then expects no terminal and does not accept, or its
    lexeme in progress is one no expected terminal (nor an ignored one) can complete. The
    survivors are written to the front of ``hyp`` and their number returned; 0 means nothing
    would survive, and then ``hyp`` and the chart are as they were.

    Parameters
    ----------
    term : int
        The terminal.
    mark : int
        The occurrence's mark (:class:`BudgetTrack`).
    hyp : (2, cap) int32
        The matcher's hypotheses; the first ``n`` are current.
    n : int
        Their number.
    grammar : tuple
        The matcher kernels' ``grammar`` structure (``CompiledGrammar.match_arrays``).
    chart : callable
        Returns the matcher's current chart structure (it changes when the chart grows).
    check : callable
        The matcher's status handler: True when the kernel must run again after growing.
    lexemes_only : bool, optional
        Move only the hypotheses with a lexeme in progress that may still be one of ``term``
        (a lexeme that spans the token boundary: a ``"token"`` alignment,
        ``Grammar.token_aligned``); a hypothesis at a lexeme boundary keeps the terminal, which
        may start there.
    """
    lex, par = grammar[0], grammar[1]
    alive_bits, ignore_bits, restart = lex[3], lex[4], lex[6]
    word, bit = term >> 6, np.uint64(1) << np.uint64(term & 63)
    counts = chart()[3]
    saved = int(counts[0]), int(counts[1])
    moved: dict[int, int] = {}
    kept: list[tuple[int, int]] = []
    for k in range(n):
        p, s = int(hyp[0, k]), int(hyp[1, k])
        _, sets, set_bits, _, _, _ = chart()
        inside = not lexemes_only or (restart[s] != s and bool(alive_bits[s, word] & bit))
        if inside and set_bits[p, word] & bit and sets[_UID, p] <= mark:
            q = moved.get(p)
            if q is None:
                while True:
                    q = int(earley_drop_kernel(p, term, par, chart()))
                    if not check(q):
                        break
                moved[p] = q
            p = q
        _, sets, set_bits, _, _, _ = chart()
        live = bool(np.any(set_bits[p])) or bool(sets[_ACC, p])  # something may follow
        if live and restart[s] != s:  # and the lexeme in progress can end as one of them
            live = bool(np.any((set_bits[p] | ignore_bits) & alive_bits[s]))
        if live and (p, s) not in kept:
            kept.append((p, s))
    if not kept:
        counts = chart()[3]
        counts[0], counts[1] = saved  # the copies go (their uids are never reused)
        return 0
    for k, (p, s) in enumerate(kept):
        hyp[0, k], hyp[1, k] = p, s
    return len(kept)
