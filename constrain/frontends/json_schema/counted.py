"""Counted repetition in a number of rules logarithmic in the count: ``unit{lo,hi}``.

An array's items and an object's members are counted by the grammar, not the lexer. Written as a
chain of counts (one rule per count) a ``maxItems`` of a million is a million rules, so a
count past :data:`CHAIN_LIMIT` is written in binary instead:

- ``U_0`` is the unit (a comma and one item, say) and ``U_j`` is a rule ``U_{j-1} U_{j-1}``:
  ``2**j`` units;
- ``unit{a}`` (exactly ``a``) is the units ``U_j`` of the set bits of ``a``;
- ``unit{0,m}`` is ``U_1{0,k} U_0?`` for ``m = 2k + 1`` and ``U_1{0,k} | U_1{0,k-1} U_0`` for
  ``m = 2k``, and so on up the levels: every count has one parse, and the open choices always
  start where the repetition starts, so an Earley set holds a few items per level
  (``log2(hi)`` levels) however many units have been read;
- ``unit{a,}`` is ``unit{a}`` then a left-recursive ``unit*``.

The rules are memoised under the caller's key (the unit's identity), so the entry points of a
count (one per number of items already written) share their levels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Alternative = tuple[str, ...]
RuleFactory = Callable[[Any, Callable[[str], list[Alternative]]], str]

CHAIN_LIMIT = 32
"""Counts up to this stay one rule per count (deterministic, the cheapest to parse)."""


class Counted:
    """Build ``unit{lo,hi}`` over one unit, with rules registered through ``rule``.

    Parameters
    ----------
    rule : callable
        ``rule(key, build) -> name``: the emitter's memoised rule factory.
    key : hashable
        Identifies the unit (its rules are memoised under it).
    unit : tuple of str
        The symbols of one unit.
    """

    def __init__(self, rule: RuleFactory, key: Any, unit: Alternative) -> None:
        self._rule = rule
        self._key = key
        self._unit = unit

    def level(self, j: int) -> Alternative:
        """Return the symbols of ``2**j`` units."""
        if j == 0:
            return self._unit
        half = self.level(j - 1)
        return (self._rule(("cnt2", self._key, j), lambda _: [half + half]),)

    def exactly(self, a: int, j: int = 0) -> Alternative:
        """Return the symbols of exactly ``a`` units of level ``j``."""
        out: Alternative = ()
        while a:
            if a & 1:
                out = self.level(j) + out
            a >>= 1
            j += 1
        return out

    def at_most(self, m: int, j: int = 0) -> Alternative:
        """Return the symbols of ``0..m`` units of level ``j`` (one parse per count)."""
        if m == 0:
            return ()
        unit = self.level(j)
        if m == 1:
            return (self._rule(("cnt?", self._key, j), lambda _: [(), unit]),)
        k = m // 2
        if m & 1:
            return self.at_most(k, j + 1) + self.at_most(1, j)

        def build(_: str) -> list[Alternative]:
            return [self.at_most(k, j + 1), self.at_most(k - 1, j + 1) + unit]

        return (self._rule(("cnt<=", self._key, j, m), build),)

    def any_number(self) -> Alternative:
        """Return the symbols of any number of units (left recursion: no items pile up)."""

        def build(name: str) -> list[Alternative]:
            return [(), (name, *self._unit)]

        return (self._rule(("cnt*", self._key), build),)

    def between(self, lo: int, hi: int | None) -> Alternative:
        """Return the symbols of ``lo..hi`` units (``hi`` None: no upper bound)."""
        if hi is None:
            return self.exactly(lo) + self.any_number()
        return self.exactly(lo) + self.at_most(hi - lo)
