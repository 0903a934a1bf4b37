"""Stage 3: terminals that differ only in the keys they exclude, built as shared automata.

A JSON object that declares properties and allows others has a terminal for its other keys,
``P "(S & ~(k1|k2|...))" Q``: a string of characters ``S`` but not a declared key, between the
same ``P`` (a comma, whitespace) and ``Q`` (whitespace, colon). A schema of many such objects
(a Kubernetes resource: a hundred) has as many of these terminals, alike but for their keys. In
the union NFA each would keep its own copy of the key automaton alive inside every key, so
every lexer state inside a key would hold a member per object: ~75 members a state, and
0.3-0.5 s of subset construction on such schemas.

:func:`key_groups` finds such terminals, alike in ``P``, ``S`` and ``Q``, and plans their union
as shared fragments, each accepted by a *group* of terminals:

- ``P "(S & ~U)" Q``, ``U`` the union of their key sets: a key none of them declares, every
  terminal of the group accepts it;
- per set ``A`` of the group's terminals, ``P "(u1|u2|...)" Q`` over the keys ``u`` of ``U``
  (strings of ``S``) that exactly the terminals of ``A`` allow.

Each terminal's language is the union of the fragments whose group holds it, the same as its
own (a declared key ``u`` is allowed by exactly the terminals that do not exclude it), and a
lexer state inside a key holds a member or two of the group instead of one per terminal; the
combined lexer (:func:`~constrain.automata.lexer.lexer_nfa`) tags their states with the groups
(:class:`~constrain.automata.nfa_parts.Nfa`), and its terminal bitsets, hence every mask, are
those of the terminals built one by one.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from constrain.automata.byte_dfa import Dfa
from constrain.automata.product import plain_dfa
from constrain.errors import CompileLimitError
from constrain.ir import Alt, Complement, Concat, Intersect, Literal, Regex

__all__ = ["GROUP_MIN", "KeyGroups", "key_groups"]

# alike terminals grouped from this many on (two already share the key automaton)
GROUP_MIN = 2
# the character language S is small (a JSON string character: ~20 states); terminals whose S
# has a larger DFA are left as they are
_S_MAX_STATES = 4096


class KeyGroups(NamedTuple):
    """The plan of :func:`key_groups`.

    ``fragments`` lists ``(regex, terminals)``: a fragment of the union NFA and the terminals
    (indices, ascending) that accept it; ``grouped`` the terminals built from fragments only.
    """

    fragments: list[tuple[Regex, tuple[int, ...]]]
    grouped: frozenset[int]


def _flat(node: Regex) -> list[Regex]:
    """Return the items of ``node`` as one sequence (nested concatenations flattened)."""
    if isinstance(node, Concat):
        out: list[Regex] = []
        for item in node.items:
            out.extend(_flat(item))
        return out
    return [node]


def _one_intersection(node: Regex) -> bool:
    """Whether ``node`` is a concatenation with exactly one intersection among its items.

    A quick test of every terminal (most have none), before :func:`_excluding` looks closer:
    it builds no list, and one flattening walk for every terminal instead was ~7% slower.
    """
    if type(node) is not Concat:
        return False
    found = 0
    stack: list[Regex] = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is Concat:
            stack.extend(item.items)  # type: ignore[union-attr]
        elif kind is Intersect:
            found += 1
    return found == 1


def _excluding(node: Regex) -> tuple[tuple[Regex, Regex, tuple[Regex, ...]], frozenset[str]] | None:
    """Split ``P (S & ~(k1|...)) Q`` into ``((P, S, Q), {k1, ...})``; None for another shape."""
    items = _flat(node)
    where = [i for i, item in enumerate(items) if isinstance(item, Intersect)]
    if len(where) != 1:
        return None
    both = items[where[0]].items  # type: ignore[union-attr]
    if len(both) != 2:
        return None
    chars, other = both if isinstance(both[1], Complement) else both[::-1]
    if not isinstance(other, Complement) or isinstance(chars, Complement):
        return None
    if isinstance(other.item, Literal):
        keys: tuple[Regex, ...] = (other.item,)
    elif isinstance(other.item, Alt):
        keys = other.item.items
    else:
        return None
    texts = [k.text for k in keys if isinstance(k, Literal)]
    if len(texts) < len(keys):
        return None  # not literals only
    head = Concat(tuple(items[: where[0]]))
    return (head, chars, tuple(items[where[0] + 1 :])), frozenset(texts)


@functools.lru_cache(maxsize=64)
def _chars_dfa(chars: Regex) -> Dfa | None:
    """Return the DFA of ``chars`` (None when it is larger than ``_S_MAX_STATES``)."""
    try:
        return plain_dfa(chars, _S_MAX_STATES, "max_lexer_states")
    except CompileLimitError:
        return None


def key_groups(terminals: Sequence[Regex]) -> KeyGroups:
    """Plan the terminals that differ only in the keys they exclude as shared fragments.

    Parameters
    ----------
    terminals : sequence of Regex
        The lexer's terminals, terminal ``t`` at index ``t``.

    Returns
    -------
    KeyGroups
        No fragment when no ``GROUP_MIN`` terminals are alike.
    """
    if len(terminals) < GROUP_MIN:
        return KeyGroups([], frozenset())
    alike: defaultdict[tuple[Regex, Regex, tuple[Regex, ...]], list[tuple[int, frozenset[str]]]]
    alike = defaultdict(list)
    for t, regex in enumerate(terminals):
        if _one_intersection(regex):
            split = _excluding(regex)
            if split is not None:
                alike[split[0]].append((t, split[1]))
    fragments: list[tuple[Regex, tuple[int, ...]]] = []
    grouped: set[int] = set()
    for (head, chars, tail), members in alike.items():
        dfa = _chars_dfa(chars) if len(members) >= GROUP_MIN else None
        if dfa is None:
            continue
        union = sorted(set().union(*(keys for _, keys in members)))
        ids = tuple(t for t, _ in members)
        fragments.append(
            (
                Concat((head, Intersect((chars, Complement(_alt(union)))), *tail)),
                ids,
            )
        )
        allowed: defaultdict[tuple[int, ...], list[str]] = defaultdict(list)
        for key in union:
            state = dfa.walk(0, key.encode("utf-8"))
            if state < 0 or not dfa.accept[state]:
                continue  # not a string of S: no terminal accepts it
            who = tuple(t for t, keys in members if key not in keys)
            if who:
                allowed[who].append(key)
        for who, keys in allowed.items():
            fragments.append((Concat((head, _alt(keys), *tail)), who))
        grouped.update(ids)
    return KeyGroups(fragments, frozenset(grouped))


def _alt(keys: Sequence[str]) -> Regex:
    """Return the alternation of literal ``keys`` (one literal alone)."""
    return Literal(keys[0]) if len(keys) == 1 else Alt(tuple(Literal(k) for k in keys))
