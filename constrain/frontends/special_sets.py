"""Stage 1: open special-token sets, "any special token except these".

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
    Regex,
    Repeat,
    special_token,
)

__all__ = [
    "OPEN_MARK",
    "is_open_set",
    "open_special_set",
    "one_token",
    "open_text",
    "resolve_open_set",
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


def one_token(excluded_ids: Iterable[int], excluded_names: Iterable[int]) -> Regex:
    """Return the text of one token, any but the excluded special tokens.

    Parameters
    ----------
    excluded_ids, excluded_names : iterable of int
        As :func:`open_special_set`.

    Returns
    -------
    Regex
        ``(ANY_CHAR | open set)+``: the terminal of ``exclude_token`` (a structural-tag format)
        and ``ExcludeToken(...)`` (EBNF), which the matcher ends where the token ends
        (:attr:`~constrain.ir.Grammar.token_aligned`, ``"token"``).
    """
    return Repeat(ANY_CHAR.union(open_special_set(excluded_ids, excluded_names)), 1, None)


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
