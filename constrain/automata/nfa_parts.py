"""Stage 3: the NFA type and the regex-node helpers the NFA builder uses.

:class:`Nfa` is the byte-level NFA as flat arrays (:mod:`constrain.automata.nfa` builds it);
the helpers say whether a node matches the empty string, read a literal alternative, collapse
repeats of stars and check an :class:`~constrain.ir.Automaton`'s state ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from constrain._types import Int32Array
from constrain.errors import GrammarError
from constrain.ir import NOTHING, Automaton, Concat, Literal, Regex, Repeat, matches_empty

__all__ = ["Nfa", "check_automaton", "literal_text", "nullable", "simplify_repeat"]


def nullable(node: Regex) -> bool:
    """Return whether the language of ``node`` contains the empty string."""
    return matches_empty(node)


def literal_text(node: Regex) -> str | None:
    """Return the one string ``node`` matches if it is a literal or a concat of literals."""
    if isinstance(node, Literal):
        return node.text
    if isinstance(node, Concat) and all(isinstance(item, Literal) for item in node.items):
        return "".join(item.text for item in node.items)  # type: ignore[union-attr]
    return None


def simplify_repeat(node: Repeat) -> Regex:
    """Collapse repeats of stars and pluses, so ``(a*){1,100000}`` stays small."""
    item, lo, hi = node.item, node.min, node.max
    if hi is not None and lo > hi:
        return NOTHING  # no count is both >= min and <= max (e.g. minLength 5, maxLength 3)
    if hi == 0:
        return Concat(())
    if hi == 1 and lo == 1:
        return item
    if isinstance(item, Repeat) and item.max is None and item.min <= 1:
        if item.min == 0 or lo == 0:
            return Repeat(item.item, 0, None)
        return Repeat(item.item, lo, None)
    if hi is None and lo > 0 and nullable(item):
        return Repeat(item, 0, None)
    return node


def check_automaton(node: Automaton) -> None:
    """Raise :class:`GrammarError` unless every state id of ``node`` is in range."""
    n = node.num_states
    ids = [node.start, *node.accept, *(q for src, _, dst in node.edges for q in (src, dst))]
    bad = next((q for q in ids if not 0 <= q < n), None)
    if n < 1 or bad is not None:
        raise GrammarError(
            f"invalid Automaton: state {bad if n >= 1 else node.start} is out of range for "
            f"num_states={n} (states are 0 .. num_states - 1)"
        )


@dataclass(frozen=True, slots=True, eq=False)
class Nfa:
    """A byte-level NFA as flat arrays (internal to stage 3).

    Parameters
    ----------
    num_states : int
        Number of states ``N``.
    src, lo, hi, dst : (E,) int32
        Byte edges ``src --[lo..hi]--> dst``.
    eps_src, eps_dst : (Ee,) int32
        Epsilon edges.
    start : int
        Initial state.
    tag : (N,) int32
        Terminal accepted in each state, -1 for none.
    comp : (N,) int32
        Terminal whose automaton each state belongs to, -1 for none.
    """

    num_states: int
    src: Int32Array
    lo: Int32Array
    hi: Int32Array
    dst: Int32Array
    eps_src: Int32Array
    eps_dst: Int32Array
    start: int
    tag: Int32Array
    comp: Int32Array
