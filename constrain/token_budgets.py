"""Stage 5: token budgets, the matcher's count of the tokens inside a bounded region.

A grammar over bytes cannot count tokens: the same text is spelled by many token sequences.
XGrammar's ``max_tokens`` (``any_text``, ``any_tokens``; a reasoning budget) is therefore kept
by the matcher, as XGrammar keeps it, per terminal of :attr:`Grammar.token_budgets
<constrain.ir.Grammar.token_budgets>`:

- at each token boundary (after the reset and after every accepted token) the region is
  *open* when some hypothesis is inside an occurrence of the terminal: a lexeme of it in
  progress, or a lexeme boundary where the parser expects it (the next token starts the
  occurrence). The token that then follows is counted; a token that began before the
  occurrence (whose last bytes start it) is not;
- once ``max_tokens`` tokens are counted and the region is still open, the occurrence ends where
  it stands: every hypothesis stops expecting the terminal
  (:func:`~constrain.kernels.numba_earley.earley_drop_kernel`), so its lexeme in progress
  dies, while the hypotheses in which it already ended (split when it could end) go on. Other
  lexemes in progress from the same parser state go on too;
- when no hypothesis is inside, the count starts again at 0 (the next occurrence is a new one);
- text given to ``accept_bytes`` is not counted (XGrammar's ``accept_string`` neither), though
  the region is looked at again after it;
- if ending the occurrence would leave no hypothesis (the text stops inside a multi-byte
  character that the region's lexeme must finish), the budget is exceeded until it can end, at
  the next token boundary where it can, as XGrammar relaxes it.

Counts are per terminal and per matcher: a structural tag gives each bounded format a terminal
of its own, and two occurrences of one terminal are never open together there (a tag's end or a
trigger separates them). The state is saved per step, so ``rollback`` and ``fork`` restore it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from constrain.kernels.numba_earley import earley_drop_kernel

__all__ = ["BudgetTrack", "end_terminal"]

_Counts = tuple[tuple[int, bool], ...]
"""Per budget: the tokens counted in the open occurrence, and whether it is open."""


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
        self.counts: _Counts = tuple((0, False) for _ in self.budgets)
        self.history: list[_Counts] = []  # the counts before each step, one per history row

    def reset(self) -> None:
        """Forget every count and the history (the matcher's reset)."""
        self.counts = tuple((0, False) for _ in self.budgets)
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
        hyps: Callable[[], tuple[np.ndarray, np.ndarray]],
        alive_bits: np.ndarray,
        counted: bool,
        end: Callable[[int], bool],
    ) -> None:
        """Update the counts at a token boundary; end the occurrences past their budget.

        Parameters
        ----------
        hyps : callable
            Returns the current hypotheses, ``(2, n)`` int32 (Earley set, lexer state), and the
            terminals each Earley set expects (uint64 rows).
        alive_bits : uint64 array
            The terminals each lexer state can still complete.
        counted : bool
            Whether the step was a token (``accept_bytes`` text is not counted).
        end : callable
            Ends the occurrences of a terminal where they stand (:func:`end_terminal`);
            returns False, changing nothing, when that would leave no hypothesis.
        """
        hyp, set_bits = hyps()
        pairs = list(zip(hyp[0].tolist(), hyp[1].tolist(), strict=True))  # a few: no numpy
        out = []
        for (term, limit), (used, was_open), (word, bit) in zip(
            self.budgets, self.counts, self._bits, strict=True
        ):
            if counted and was_open:
                used += 1
            inside = any(
                int(set_bits[p, word]) & bit and int(alive_bits[s, word]) & bit for p, s in pairs
            )
            if not inside:
                used = 0
            elif used >= limit and end(term):
                used, inside = 0, False  # ended: a later occurrence is a new one
                hyp, set_bits = hyps()
                pairs = list(zip(hyp[0].tolist(), hyp[1].tolist(), strict=True))
            out.append((used, inside))
        self.counts = tuple(out)


def end_terminal(
    term: int,
    hyp: np.ndarray,
    n: int,
    grammar: tuple[Any, ...],
    chart: Callable[[], tuple[Any, ...]],
    check: Callable[[int], bool],
) -> int:
    """End every occurrence of terminal ``term`` in progress: the hypotheses that remain.

    Each hypothesis whose Earley set expects ``term`` moves to a copy of the set without those
    items; one left with a lexeme in progress that no expected terminal (nor an ignored one)
    can complete, or at a lexeme boundary expecting nothing and not accepting, is dropped. The
    survivors are written to the front of ``hyp`` and their number returned; 0 means nothing
    would survive, and then ``hyp`` is unchanged.

    Parameters
    ----------
    term : int
        The terminal.
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
    """
    lex, par = grammar[0], grammar[1]
    alive_bits, ignore_bits, restart = lex[3], lex[4], lex[6]
    word, bit = term >> 6, np.uint64(1) << np.uint64(term & 63)
    moved: dict[int, int] = {}
    kept: list[tuple[int, int]] = []
    for k in range(n):
        p, s = int(hyp[0, k]), int(hyp[1, k])
        if chart()[2][p, word] & bit:
            q = moved.get(p)
            if q is None:
                while True:
                    q = int(earley_drop_kernel(p, term, par, chart()))
                    if not check(q):
                        break
                moved[p] = q
            p = q
        _, sets, set_bits, _, _, _ = chart()
        expects = set_bits[p] | ignore_bits
        if restart[s] == s:
            live = bool(np.any(expects & alive_bits[s])) or bool(sets[4, p])
        else:
            live = bool(np.any(expects & alive_bits[s]))
        if live and (p, s) not in kept:
            kept.append((p, s))
    for k, (p, s) in enumerate(kept):
        hyp[0, k], hyp[1, k] = p, s
    return len(kept)
