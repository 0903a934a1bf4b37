"""Stage 5: a matcher's canonical-tokenization state, and the look-ahead past dead ends.

:class:`~constrain.vocab.canonical.CanonicalBpe` says which token may follow which in the
tokenizer's own encodings; :class:`CanonicalTrack` keeps, for one
:class:`~constrain.Matcher`, the relation's state after every accepted step (so rollback and
fork follow it), ANDs the relation into each mask, and drops dead ends.

The relation is pairwise: a token may be canonical after the last one yet leave no canonical
continuation that the grammar allows (the grammar forces bytes the tokenizer would merge into
it: ``{`` where only ``{"`` may follow). Where at most :data:`LOOKAHEAD_SET` tokens remain in a
mask (the grammar's structural parts, where that happens), each is kept only if a continuation
exists: EOS, or a token kept in turn, up to :data:`LOOKAHEAD_DEPTH` tokens ahead and
:data:`LOOKAHEAD_BUDGET` tokens tried. ``accept_token`` refuses what the mask drops, so
``validate_tokens`` agrees with the mask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from constrain.batch import row_token_ids
from constrain.vocab.canonical import START, CanonicalBpe, CanonicalState

if TYPE_CHECKING:
    from constrain.matcher import Matcher

__all__ = [
    "LOOKAHEAD_BUDGET",
    "LOOKAHEAD_DEPTH",
    "LOOKAHEAD_SCAN",
    "LOOKAHEAD_SET",
    "SPARSE_ROW",
    "CanonicalTrack",
]

LOOKAHEAD_SET = 64
"""Masks with at most this many tokens get the look-ahead."""
LOOKAHEAD_DEPTH = 8
"""How many tokens ahead a continuation is looked for."""
LOOKAHEAD_BUDGET = 4096
"""Tokens tried per mask at most; past it a token is kept."""
SPARSE_ROW = 256
"""Masks of at most this many tokens are judged token by token when their row is not built
(a new pre-token context's row judges all of its about 1,600 head keys)."""
LOOKAHEAD_SCAN = 1024
"""Tokens of a many-token mask judged one by one inside the look-ahead before the whole row."""


class CanonicalTrack:
    """The canonical state of one matcher, one entry per accepted step.

    Parameters
    ----------
    relation : CanonicalBpe
        The tokenizer's relation, for the matcher's vocabulary.
    """

    def __init__(self, relation: CanonicalBpe) -> None:
        self.relation = relation
        self.states: list[CanonicalState] = [START]
        self.looking = False
        self.budget = 0
        # one number per state (a new one for every accepted step; a rollback returns to the
        # earlier state's number), and the tokens the look-ahead dropped from the last mask with
        # the number of the state it was filled at
        self.versions = [0]
        self.counter = 0
        self.dropped: tuple[int, frozenset[int]] | None = None

    def copy(self) -> CanonicalTrack:
        """Return an independent copy (for :meth:`Matcher.fork`)."""
        other = CanonicalTrack(self.relation)
        other.states = list(self.states)
        other.versions = list(self.versions)
        other.counter = self.counter
        other.dropped = self.dropped
        return other

    def reset(self) -> None:
        """Back to the start of a text."""
        self.states = [START]
        self.counter += 1
        self.versions = [self.counter]

    def push(self, state: CanonicalState) -> None:
        """Record the state after one more accepted step."""
        self.states.append(state)
        self.counter += 1
        self.versions.append(self.counter)

    def pop(self, steps: int) -> None:
        """Forget the last ``steps`` steps (a rollback)."""
        del self.states[len(self.states) - steps :]
        del self.versions[len(self.versions) - steps :]

    def may_end(self) -> bool:
        """Whether the text may end here (EOS)."""
        return self.relation.may_end(self.states[-1])

    def admit(self, matcher: Matcher, token: int) -> CanonicalState | None:
        """Return the state after ``token``, or None where the mask would not allow it."""
        after = self.relation.advance(self.states[-1], token)
        if after is None or (not self.looking and token in self._dead_ends(matcher)):
            return None
        return after

    def filter_row(self, matcher: Matcher, row: np.ndarray) -> None:
        """AND the relation into ``row`` (``words`` uint32) and drop dead ends from few tokens."""
        relation, state = self.relation, self.states[-1]
        if relation.has_row(state):
            row &= relation.row(state).view(np.uint32)
        elif int(np.bitwise_count(row).sum()) <= SPARSE_ROW:
            # a few tokens (a structural position): each judged alone, without the row
            for t in row_token_ids(row).tolist():
                if not relation.status(state, t):
                    row[t >> 5] &= ~np.uint32(1 << (t & 31))
        elif not (self.looking and self._enough(row)):
            row &= relation.row(state).view(np.uint32)
        if self.looking:
            return
        version = self.versions[-1]
        if int(np.bitwise_count(row).sum()) > LOOKAHEAD_SET:
            self.dropped = (version, frozenset())
            return
        ids = row_token_ids(row)
        eos = matcher.end_token_ids
        self.looking = True
        self.budget = LOOKAHEAD_BUDGET
        dropped = set()
        try:
            for t in ids.tolist():
                if t not in eos and not self._live(matcher, t, LOOKAHEAD_DEPTH, eos):
                    row[t >> 5] &= ~np.uint32(1 << (t & 31))
                    dropped.add(t)
        finally:
            self.looking = False
        self.dropped = (version, frozenset(dropped))

    def _enough(self, row: np.ndarray) -> bool:
        """Inside the look-ahead, cut ``row`` to its first canonical tokens where that suffices.

        The look-ahead only asks whether more than :data:`LOOKAHEAD_SET` tokens remain, and
        which ones when fewer do: the first ``LOOKAHEAD_SET + 1`` canonical tokens of the first
        :data:`LOOKAHEAD_SCAN`, judged one by one, answer that without the whole row (a new
        pre-token context judges every head key). False, with ``row`` unchanged, when they do not.
        """
        ids = row_token_ids(row)
        kept = []
        for t in ids[:LOOKAHEAD_SCAN].tolist():
            if self.relation.status(self.states[-1], t):
                kept.append(t)
                if len(kept) > LOOKAHEAD_SET:
                    break
        if len(kept) <= LOOKAHEAD_SET and ids.shape[0] > LOOKAHEAD_SCAN:
            return False
        row[:] = 0
        for t in kept:
            row[t >> 5] |= np.uint32(1 << (t & 31))
        return True

    def _dead_ends(self, matcher: Matcher) -> frozenset[int]:
        """Return the tokens the look-ahead drops here (from the mask, filled if need be)."""
        if self.dropped is None or self.dropped[0] != self.versions[-1]:
            matcher.allowed_token_ids()
        assert self.dropped is not None
        return self.dropped[1]

    def _splits_next(self, matcher: Matcher) -> bool:
        """Whether the text may end here, or go on with a byte that starts a new pre-token.

        Either way a canonical continuation exists without filling a mask: the rest of a valid
        text after a split is encoded on its own.
        """
        state = self.states[-1]
        if matcher.is_accepting() and self.relation.may_end(state):
            return True
        return self.relation.splits_before_any(state, matcher.next_bytes()[:0x80])

    def _live(self, matcher: Matcher, token: int, depth: int, eos: frozenset[int]) -> bool:
        """Whether some canonical continuation allowed by the grammar follows ``token``."""
        self.budget -= 1
        if not matcher.accept_token(token):
            return False
        try:
            if matcher.is_terminated() or self.budget <= 0 or self._splits_next(matcher):
                return True
            after = matcher.allowed_token_ids()
            if after.shape[0] == 0:
                return False
            if depth == 0 or after.shape[0] > LOOKAHEAD_SET:
                return True
            if any(int(t) in eos for t in after):
                return True
            return any(self._live(matcher, int(t), depth - 1, eos) for t in after)
        finally:
            matcher.rollback(1)
