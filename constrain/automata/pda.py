"""Stage 3 (CFG part): flat Earley parser tables built from the Grammar IR.

The parser runs over *terminals* (lexemes); the lexer (``constrain.automata.lexer``) turns bytes
into terminals. Rules are flattened into dotted items, one integer per (rule, dot position), so
the Earley kernels in ``constrain.kernels.numba_earley`` work over plain int32 arrays:

- ``item_rule[i]``, ``item_next_nt[i]`` (nonterminal after the dot, or -1), ``item_next_t[i]``
  (terminal after the dot, or -1); an item with both -1 is complete; item ``i + 1`` is item ``i``
  with the dot advanced.
- ``rule_lhs[r]``, ``rule_first_item[r]``; ``nt_rules_indptr``/``nt_rules`` list each
  nonterminal's rules (CSR); ``nullable[n]``.
- Rule 0 is the augmented rule ``S' -> start``; ``final_item`` is ``S' -> start .``.

``follow_bits[t]`` is the set of terminals that can come right after terminal ``t`` (plus the
ignored terminals; every terminal may follow an ignored one); it over-approximates what the
parser allows and is only used to prune the precomputed token tables. ``scannable_bits`` marks
the terminals that occur in rules (an ignored terminal may occur in rules too).
``item_rest_first``/``item_rest_nullable`` give, for an item with a terminal after the dot, FIRST
and nullability of the rest of its rule after that terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from constrain._types import BoolArray, Int32Array, UInt64Array
from constrain.errors import CompileLimitError
from constrain.ir import Grammar

__all__ = ["ParserTables", "build_parser_tables", "terminal_bits"]


def terminal_bits(term_ids: list[int] | set[int], num_words: int) -> UInt64Array:
    """Return a ``uint64[num_words]`` bitset with the given terminal ids set."""
    mask = 0
    for t in term_ids:
        mask |= 1 << t
    return _int_bits(mask, num_words)


def _int_bits(mask: int, num_words: int) -> UInt64Array:
    """Return the Python-int bitset ``mask`` as ``uint64[num_words]`` (bit ``t`` = terminal t)."""
    return np.frombuffer(mask.to_bytes(8 * num_words, "little"), dtype="<u8").astype(np.uint64)


@dataclass(frozen=True, slots=True)
class ParserTables:
    """Flat Earley tables of a grammar (see the module docstring for the layout)."""

    num_terminals: int
    num_nonterminals: int
    num_words: int
    item_rule: Int32Array
    item_next_nt: Int32Array
    item_next_t: Int32Array
    rule_lhs: Int32Array
    rule_first_item: Int32Array
    nt_rules_indptr: Int32Array
    nt_rules: Int32Array
    nullable: BoolArray
    final_item: int
    follow_bits: UInt64Array
    ignore_bits: UInt64Array
    scannable_bits: UInt64Array
    item_rest_first: UInt64Array
    item_rest_nullable: BoolArray
    nonterminal_names: tuple[str, ...]

    @property
    def num_items(self) -> int:
        """Number of dotted items."""
        return int(self.item_rule.shape[0])

    def nbytes(self) -> int:
        """Return the memory held by the arrays, in bytes."""
        return sum(
            int(a.nbytes)
            for a in (
                self.item_rule,
                self.item_next_nt,
                self.item_next_t,
                self.rule_lhs,
                self.rule_first_item,
                self.nt_rules_indptr,
                self.nt_rules,
                self.nullable,
                self.follow_bits,
                self.ignore_bits,
                self.scannable_bits,
                self.item_rest_first,
                self.item_rest_nullable,
            )
        )


def build_parser_tables(
    grammar: Grammar, terminal_names: list[str], *, max_items: int = 2_000_000
) -> ParserTables:
    """Flatten a normalised grammar into Earley tables.

    Parameters
    ----------
    grammar : Grammar
        A grammar returned by :meth:`Grammar.normalise`.
    terminal_names : list of str
        Terminal names in lexer order; terminal ``t`` of the lexer is ``terminal_names[t]``.
    max_items : int, optional
        Limit on the number of dotted items.

    Returns
    -------
    ParserTables

    Raises
    ------
    CompileLimitError
        If the grammar has more than ``max_items`` dotted items.
    """
    term_id = {name: i for i, name in enumerate(terminal_names)}
    nt_names = ["$start"] + [r.name for r in grammar.rules]
    nt_id = {name: i for i, name in enumerate(nt_names)}
    # rules as (lhs, rhs) with rhs symbols encoded: >= 0 nonterminal, < 0 terminal (-1 - t)
    rules: list[tuple[int, list[int]]] = [(0, [nt_id[grammar.start]])]
    rules.extend(
        (nt_id[rule.name], [nt_id[s] if s in nt_id else -1 - term_id[s] for s in alt])
        for rule in grammar.rules
        for alt in rule.alternatives
    )
    num_items = sum(len(rhs) + 1 for _, rhs in rules)
    if num_items > max_items:
        raise CompileLimitError(
            "max_grammar_items",
            max_items,
            num_items,
            hint="simplify the grammar or raise the limit",
        )
    n_nt = len(nt_names)
    n_t = len(terminal_names)
    # Items in rule order, rule r's items at rule_first_item[r] .. + len(rhs) (the last one
    # complete); built with array operations (one Python step per rule, not per item).
    lens = np.fromiter((len(rhs) for _, rhs in rules), dtype=np.int64, count=len(rules))
    rule_lhs = np.fromiter((lhs for lhs, _ in rules), dtype=np.int32, count=len(rules))
    ends = np.cumsum(lens + 1)
    rule_first_item = (ends - lens - 1).astype(np.int32)
    item_rule = np.repeat(np.arange(len(rules), dtype=np.int32), lens + 1)
    is_symbol = np.ones(num_items, dtype=np.bool_)
    is_symbol[ends - 1] = False
    symbol = np.zeros(num_items, dtype=np.int64)
    symbol[is_symbol] = np.fromiter(
        chain.from_iterable(rhs for _, rhs in rules), dtype=np.int64, count=int(lens.sum())
    )
    item_next_nt = np.where(is_symbol & (symbol >= 0), symbol, -1).astype(np.int32)
    item_next_t = np.where(is_symbol & (symbol < 0), -1 - symbol, -1).astype(np.int32)
    nt_rules = np.argsort(rule_lhs, kind="stable").astype(np.int32)
    nt_rules_indptr = np.zeros(n_nt + 1, dtype=np.int32)
    nt_rules_indptr[1:] = np.cumsum(np.bincount(rule_lhs, minlength=n_nt))

    nullable = [False] * n_nt  # a list while the Python loops read it
    changed = True
    bottom_up = rules[::-1]  # rules are usually written top-down: fewer passes this way
    while changed:
        changed = False
        for lhs, rhs in bottom_up:
            if not nullable[lhs] and all(s >= 0 and nullable[s] for s in rhs):
                nullable[lhs] = True
                changed = True

    # FIRST sets over terminals, then FOLLOW sets of terminals, as Python-int bitsets.
    first = [0] * n_nt
    changed = True
    while changed:
        changed = False
        for lhs, rhs in bottom_up:
            acc = first[lhs]
            for s in rhs:
                acc |= (1 << (-1 - s)) if s < 0 else first[s]
                if s < 0 or not nullable[s]:
                    break
            if acc != first[lhs]:
                first[lhs] = acc
                changed = True
    follow_nt = [0] * n_nt
    follow_t = [0] * n_t
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            trailer = follow_nt[lhs]
            for s in reversed(rhs):
                if s < 0:
                    t = -1 - s
                    if trailer & ~follow_t[t]:
                        follow_t[t] |= trailer
                        changed = True
                    trailer = 1 << t
                else:
                    if trailer & ~follow_nt[s]:
                        follow_nt[s] |= trailer
                        changed = True
                    trailer = (trailer | first[s]) if nullable[s] else first[s]
    num_words = max(1, (n_t + 63) // 64)
    width = 8 * num_words
    # For an item "A -> alpha . t beta": FIRST(beta) and whether beta is nullable. When beta is
    # not nullable, the terminals expected right after scanning t are exactly FIRST(beta),
    # whatever the item's origin.
    rest_bytes = bytearray(num_items * width)
    item_rest_nullable = np.zeros(num_items, dtype=np.bool_)
    for r, (_, rhs) in enumerate(rules):
        base = int(rule_first_item[r])
        rest_first = 0  # FIRST and nullability of rhs[k + 1:], walking k backwards
        rest_nullable = True
        for k in range(len(rhs) - 1, -1, -1):
            sym = rhs[k]
            if sym < 0:
                at = (base + k) * width
                rest_bytes[at : at + width] = rest_first.to_bytes(width, "little")
                item_rest_nullable[base + k] = rest_nullable
                rest_first = 1 << (-1 - sym)
                rest_nullable = False
            elif nullable[sym]:
                rest_first |= first[sym]
            else:
                rest_first = first[sym]
                rest_nullable = False
    item_rest_first = (
        np.frombuffer(bytes(rest_bytes), dtype="<u8")
        .astype(np.uint64)
        .reshape(num_items, num_words)
    )
    ignore_ids = {term_id[name] for name in grammar.ignore}
    ignore_mask = 0
    for t in ignore_ids:
        ignore_mask |= 1 << t
    all_mask = (1 << n_t) - 1
    follow_bytes = b"".join(
        (all_mask if t in ignore_ids else follow_t[t] | ignore_mask).to_bytes(width, "little")
        for t in range(n_t)
    )
    follow_bits = np.zeros((max(n_t, 1), num_words), dtype=np.uint64)
    if n_t:
        follow_bits[:] = np.frombuffer(follow_bytes, dtype="<u8").reshape(n_t, num_words)
    return ParserTables(
        num_terminals=n_t,
        num_nonterminals=n_nt,
        num_words=num_words,
        item_rule=item_rule,
        item_next_nt=item_next_nt,
        item_next_t=item_next_t,
        rule_lhs=rule_lhs,
        rule_first_item=rule_first_item,
        nt_rules_indptr=nt_rules_indptr,
        nt_rules=nt_rules,
        nullable=np.array(nullable, dtype=np.bool_),
        final_item=int(rule_first_item[0] + 1),
        follow_bits=follow_bits,
        ignore_bits=_int_bits(ignore_mask, num_words),
        scannable_bits=terminal_bits({-1 - s for _, rhs in rules for s in rhs if s < 0}, num_words),
        item_rest_first=item_rest_first,
        item_rest_nullable=item_rest_nullable,
        nonterminal_names=tuple(nt_names),
    )
