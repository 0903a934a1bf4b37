"""Stage 4a: a grammar's special tokens resolved against a vocabulary.

Grammars name special tokens by id (:func:`~constrain.ir.special_token`) or by name (a
placeholder of ``Grammar.special_names``), and token-level regions hold *open* sets, "every
special token but these" (:mod:`constrain.frontends.special_sets`). :func:`special_chars` lists
what a grammar uses; :func:`resolve_special_tokens` gives names their ids in a vocabulary, makes
open sets finite and refuses what the vocabulary cannot provide (an end-of-sequence token, an
ordinary token required or excluded by id). ``Compiler.compile`` calls it first.
"""

from __future__ import annotations

import dataclasses

from constrain.automata.utf8 import special_bytes
from constrain.errors import GrammarError
from constrain.frontends.compose import map_regex, map_specials
from constrain.frontends.special_sets import is_open_set, resolve_open_set
from constrain.ir import (
    MAX_SPECIAL_TOKENS,
    SPECIAL_BASE,
    Automaton,
    CharSet,
    Grammar,
    Literal,
    Regex,
    Terminal,
    special_token,
    special_token_id,
)
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["resolve_special_tokens", "special_chars"]


def special_chars(grammar: Grammar) -> tuple[frozenset[int], frozenset[int]]:
    """Return the special token ids and the name placeholders the grammar's terminals use.

    Parameters
    ----------
    grammar : Grammar
        Any grammar.

    Returns
    -------
    tuple of frozenset of int
        The ids of :func:`~constrain.ir.special_token` pseudo characters, and the indices of
        :func:`~constrain.ir.special_placeholder` ones (into ``grammar.special_names``); an
        open set (:mod:`constrain.frontends.special_sets`) adds the index
        ``MAX_SPECIAL_TOKENS - 1``.
    """
    ids: set[int] = set()
    names: set[int] = set()
    seen: set[int] = set()
    stack: list[Regex] = [t.regex for t in grammar.terminals]
    while stack:  # every node once; a literal is text (no pseudo character is a str's)
        node = stack.pop()
        if isinstance(node, Literal) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, CharSet):
            sets = [node]
        elif isinstance(node, Automaton):
            sets = [cs for _, cs, _ in node.edges]
        else:
            items = getattr(node, "items", None)
            stack.extend(items if items is not None else (node.item,))  # type: ignore[union-attr]
            continue
        for cs in sets:
            if not cs.ranges or cs.ranges[-1][1] < SPECIAL_BASE:  # ranges are sorted
                continue
            if is_open_set(cs):  # "any special token but ...": resolved against a vocabulary
                names.add(MAX_SPECIAL_TOKENS - 1)
                continue
            for lo, hi in cs.ranges:
                for cp in range(max(lo, SPECIAL_BASE), hi + 1):
                    kind, k = special_token_id(cp) or ("", 0)
                    (ids if kind == "id" else names).add(k)
    return frozenset(ids), frozenset(names)


def _refuse_ordinary_exclusions(cs: CharSet, vocab: Vocabulary) -> None:
    """Raise if an open special-token set leaves out an ordinary token by id.

    Only special tokens can be left out of a token-level region: an ordinary token's text can
    be written by other tokens, so leaving the id out would not keep its text out.
    """
    lo = SPECIAL_BASE
    for start, end in [*cs.ranges, (SPECIAL_BASE + MAX_SPECIAL_TOKENS, 0)]:
        for tid in range(
            lo - SPECIAL_BASE, min(start - SPECIAL_BASE, vocab.size, MAX_SPECIAL_TOKENS)
        ):
            length = int(vocab.token_lengths[tid])
            if length and vocab.token_bytes_of(tid) != special_bytes(tid):
                raise GrammarError(
                    f"exclude_tokens names token id {tid} "
                    f"({vocab.token_bytes_of(tid).decode('utf-8', 'replace')!r}), an ordinary "
                    "token: only special tokens can be excluded from a token-level region (other "
                    "tokens can write an ordinary token's text); leave it out, or exclude its "
                    "text with an any_text region's excludes"
                )
        lo = max(lo, end + 1)


def resolve_special_tokens(grammar: Grammar, vocab: Vocabulary) -> tuple[Grammar, frozenset[int]]:
    """Return ``grammar`` with its special token names replaced by ids, and the ids it uses.

    Parameters
    ----------
    grammar : Grammar
        A grammar, possibly with special tokens by id or by name (``special_names``).
    vocab : Vocabulary
        The vocabulary whose :attr:`~constrain.Vocabulary.special_names` give the ids.

    Returns
    -------
    tuple of (Grammar, frozenset of int)
        ``(grammar, frozenset())`` itself when it has no special token; else the grammar
        with ids only (no ``special_names``) and every id it requires.

    Raises
    ------
    GrammarError
        If a name is not a special token of the vocabulary (the message lists some that are),
        or an id or name is an end-of-sequence token or not a special token.
    """
    ids, used = special_chars(grammar)
    if not ids and not used:
        return grammar, frozenset()
    known = vocab.special_names
    by_index: dict[int, int] = {}
    has_open = MAX_SPECIAL_TOKENS - 1 in used
    if has_open:  # an open set leaves out names it does not hold: resolve them all
        used = (used - {MAX_SPECIAL_TOKENS - 1}) | set(range(len(grammar.special_names)))
    for k in sorted(used):
        if k >= len(grammar.special_names):
            raise GrammarError(f"special token name placeholder {k} has no name in special_names")
        name = grammar.special_names[k]
        inner = name[1:-1] if name.startswith("<") and name.endswith(">") else name
        tid = known.get(name, known.get(inner))
        if tid is None:
            some = ", ".join(sorted(known)[:8]) or "none: build it with special_names"
            text = inner if name.startswith("<[") else name
            ordinary = vocab.size and any(
                vocab.token_bytes_of(t) == text.encode("utf-8") for t in range(vocab.size)
            )
            hint = (
                f"{text!r} is an ordinary token of this vocabulary: write it as text (a string "
                "literal, or const_string in a structural tag)"
                if ordinary
                else f"its special tokens include {some}; or require a special token by id, <[id]>"
            )
            raise GrammarError(
                f"special token {name} is not a special token of this vocabulary: {hint}"
            )
        by_index[k] = tid
    for tid in sorted(ids | set(by_index.values())):
        what = next((n for k, n in enumerate(grammar.special_names) if by_index.get(k) == tid), "")
        label = what or f"<[{tid}]>"
        if tid in set(vocab.eos_ids.tolist()):
            raise GrammarError(
                f"special token {label} (id {tid}) is an end-of-sequence token: a grammar cannot "
                "require it; end the grammar there instead (the matcher allows EOS exactly when "
                "the grammar accepts)"
            )
        has_bytes = 0 <= tid < vocab.size and vocab.token_lengths[tid] != 0
        if not 0 <= tid < vocab.size or (
            has_bytes and vocab.token_bytes_of(tid) != special_bytes(tid)
        ):
            raise GrammarError(
                f"{label}: token id {tid} is not a special token of this vocabulary (its ids "
                f"are 0..{vocab.size - 1}, and only ids with no text can be required by id)"
            )

    def rewrite(kind: str, k: int) -> CharSet:
        return special_token(by_index[k] if kind == "name" else k)

    open_ids: set[int] = set()
    eos = set(vocab.eos_ids.tolist())
    matchable = [
        int(t)
        for t in vocab.special_ids.tolist()
        if int(t) not in eos
        and 0 <= int(t) < min(vocab.size, MAX_SPECIAL_TOKENS)
        and (
            vocab.token_lengths[int(t)] == 0
            or vocab.token_bytes_of(int(t)) == special_bytes(int(t))
        )
    ]

    def finite(node: Regex) -> Regex:
        if isinstance(node, CharSet) and is_open_set(node):
            _refuse_ordinary_exclusions(node, vocab)
            node = resolve_open_set(node, matchable, by_index)
            open_ids.update(
                cp - SPECIAL_BASE
                for lo, hi in node.ranges
                for cp in range(max(lo, SPECIAL_BASE), hi + 1)
            )
        return node

    terminals = tuple(
        Terminal(t.name, map_specials(map_regex(t.regex, finite) if has_open else t.regex, rewrite))
        for t in grammar.terminals
    )
    resolved = dataclasses.replace(grammar, terminals=terminals, special_names=())
    return resolved, frozenset(ids | set(by_index.values()) | open_ids)
