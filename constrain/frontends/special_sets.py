"""Stage 1: open special-token sets, "any special token except these", and token boundaries.

XGrammar's token-level structural-tag formats (``any_tokens``, ``token_triggered_tags``,
``token_dispatch``) accept any token except a few. constrain's grammars read ordinary tokens as
their text and special tokens as pseudo characters (:func:`~constrain.ir.special_token`), so
"any token except these special tokens" is free text joined with an *open* set of special
tokens: every special token of the vocabulary the grammar is compiled for (end-of-sequence
tokens aside: the matcher allows those where the grammar accepts), minus the excluded ones.

An open set is a :class:`~constrain.ir.CharSet` that holds the last name placeholder
(:data:`OPEN_MARK`), every token-id pseudo character except the excluded ids, and every name
placeholder except those of the excluded names. ``Compiler.compile`` replaces it with the
finite set of the vocabulary's special tokens (:func:`resolve_open_set`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from constrain.ir import (
    ANY_CHAR,
    MAX_SPECIAL_TOKENS,
    SPECIAL_BASE,
    CharSet,
    Grammar,
    Regex,
    Repeat,
    special_token,
)

__all__ = [
    "OPEN_MARK",
    "is_open_set",
    "open_special_set",
    "open_text",
    "resolve_open_set",
    "token_boundary_errors",
]

_PLACEHOLDER_BASE = SPECIAL_BASE + MAX_SPECIAL_TOKENS
OPEN_MARK = _PLACEHOLDER_BASE + MAX_SPECIAL_TOKENS - 1
"""The pseudo character (the last name placeholder) that marks an open special-token set."""


def open_special_set(excluded_ids: Iterable[int], excluded_names: Iterable[int]) -> CharSet:
    """Return the open set of every special token except some ids and some names.

    Parameters
    ----------
    excluded_ids : iterable of int
        Token ids left out.
    excluded_names : iterable of int
        Indices into the grammar's ``special_names`` of the names left out.

    Returns
    -------
    CharSet
        Pseudo characters only (no Unicode), :data:`OPEN_MARK` included.
    """
    gaps = {SPECIAL_BASE + t for t in excluded_ids if 0 <= t < MAX_SPECIAL_TOKENS}
    gaps |= {_PLACEHOLDER_BASE + k for k in excluded_names if 0 <= k < MAX_SPECIAL_TOKENS - 1}
    ranges, lo = [], SPECIAL_BASE
    for gap in sorted(gaps):
        ranges.append((lo, gap - 1))
        lo = gap + 1
    ranges.append((lo, OPEN_MARK))
    return CharSet.of(ranges)


def open_text(excluded_ids: Iterable[int], excluded_names: Iterable[int]) -> Regex:
    """Return any run of text and special tokens, except the excluded special tokens.

    Parameters
    ----------
    excluded_ids, excluded_names : iterable of int
        As :func:`open_special_set`.

    Returns
    -------
    Regex
        ``(ANY_CHAR | open set)*``.
    """
    return Repeat(ANY_CHAR.union(open_special_set(excluded_ids, excluded_names)), 0, None)


def is_open_set(cs: CharSet) -> bool:
    """Whether ``cs`` is an open special-token set (it holds :data:`OPEN_MARK`)."""
    return OPEN_MARK in cs


def resolve_open_set(
    cs: CharSet, special_ids: Sequence[int], name_ids: Mapping[int, int]
) -> CharSet:
    """Return an open set made finite for a vocabulary.

    Parameters
    ----------
    cs : CharSet
        An open set (:func:`is_open_set`), possibly with Unicode characters.
    special_ids : sequence of int
        The special tokens of the vocabulary that a grammar may match (no end-of-sequence
        token, no token with text).
    name_ids : mapping of int to int
        The token id of each resolved name placeholder index.

    Returns
    -------
    CharSet
        The Unicode part of ``cs`` and the special tokens of ``special_ids`` whose id it holds
        and whose name, if the grammar names it, it does not leave out.
    """
    left_out = {tid for k, tid in name_ids.items() if _PLACEHOLDER_BASE + k not in cs}
    out = cs.intersect(ANY_CHAR)
    kept = [t for t in special_ids if t not in left_out and SPECIAL_BASE + t in cs]
    for tid in kept:
        out = out.union(special_token(tid))
    return out


def token_boundary_errors(grammar: Grammar, token_level: Iterable[str]) -> list[str]:
    """Return the token-level terminals that text may follow (empty: the grammar is exact).

    XGrammar matches a token-level region (``any_tokens``, the free part of
    ``token_triggered_tags`` and ``token_dispatch``) whole token by whole token: a token that
    starts in such a region ends in it, so text after a region starts at a token boundary
    (XGrammar 0.2.9 with ``any_tokens`` then ``"abc"``: the one token `` abc`` is all region,
    and ``abc`` is still owed). A token may still end text before a region and begin the
    region. constrain's grammars read bytes, where one token may also end a region and begin
    the text after it, so the two agree when whatever follows a region is a special token,
    another token-level region, or the end of the output; this returns the names of the
    terminals for which that fails.

    Parameters
    ----------
    grammar : Grammar
        The grammar, before normalisation.
    token_level : iterable of str
        Names of its token-level terminals.

    Returns
    -------
    list of str
        The token-level terminals with a text neighbour, sorted.
    """
    regions = set(token_level)
    if not regions:
        return []
    rules = {r.name: r.alternatives for r in grammar.rules}
    terms = {t.name: t.regex for t in grammar.terminals}
    safe = regions | {n for n, r in terms.items() if _special_only(r)}
    nullable: set[str] = set()
    first: dict[str, set[str]] = {n: set() for n in rules}

    def ends(seq: Sequence[str], table: dict[str, set[str]]) -> set[str]:
        out: set[str] = set()
        for sym in seq:
            out |= table[sym] if sym in rules else {sym}
            if sym not in nullable:
                break
        return out

    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            for alt in alts:
                if name not in nullable and all(s in nullable for s in alt):
                    nullable.add(name)
                    changed = True
                new = ends(alt, first) - first[name]
                if new:
                    first[name] |= new
                    changed = True
    after: dict[str, set[str]] = {n: set() for n in rules}
    after[grammar.start].add("")
    bad: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            for alt in alts:
                for i, sym in enumerate(alt):
                    right = ends(alt[i + 1 :], first)
                    if all(s in nullable for s in alt[i + 1 :]):
                        right |= after[name]
                    if sym in rules:
                        if not right <= after[sym]:
                            after[sym] |= right
                            changed = True
                    elif sym in regions and any(n and n not in safe for n in right):
                        bad.add(sym)
    return sorted(bad)


def _special_only(regex: Regex) -> bool:
    """Whether a terminal is special tokens only (one pseudo character of a set)."""
    return isinstance(regex, CharSet) and bool(regex.ranges) and regex.ranges[0][0] >= SPECIAL_BASE
