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

import numpy as np

from constrain._types import BoolArray, Int32Array, UInt64Array
from constrain.errors import CompileLimitError
from constrain.ir import Grammar
from constrain.kernels.numba_earley import grammar_sets_kernel

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
    # complete); Python lists turned into arrays once (grammars are mostly small: numpy's
    # per-call cost would dominate).
    item_rule_l: list[int] = []
    next_nt_l: list[int] = []
    next_t_l: list[int] = []
    first_item_l: list[int] = []
    by_nt: list[list[int]] = [[] for _ in range(n_nt)]
    for r, (lhs, rhs) in enumerate(rules):
        first_item_l.append(len(item_rule_l))
        by_nt[lhs].append(r)
        item_rule_l.extend([r] * (len(rhs) + 1))
        for sym in rhs:
            if sym >= 0:
                next_nt_l.append(sym)
                next_t_l.append(-1)
            else:
                next_nt_l.append(-1)
                next_t_l.append(-1 - sym)
        next_nt_l.append(-1)
        next_t_l.append(-1)
    item_rule = np.array(item_rule_l, dtype=np.int32)
    item_next_nt = np.array(next_nt_l, dtype=np.int32)
    item_next_t = np.array(next_t_l, dtype=np.int32)
    rule_lhs = np.array([lhs for lhs, _ in rules], dtype=np.int32)
    rule_first_item = np.array(first_item_l, dtype=np.int32)
    nt_rules = np.array([r for x in by_nt for r in x], dtype=np.int32)
    nt_rules_indptr = np.zeros(n_nt + 1, dtype=np.int32)
    nt_rules_indptr[1:] = np.cumsum([len(x) for x in by_nt])

    num_words = max(1, (n_t + 63) // 64)
    # Nullability, FIRST and FOLLOW; for an item "A -> alpha . t beta", FIRST(beta) and whether
    # beta is nullable (when it is not, the terminals expected right after scanning t are
    # exactly FIRST(beta), whatever the item's origin).
    nullable = np.zeros(n_nt, dtype=np.bool_)
    first = np.zeros((n_nt, num_words), dtype=np.uint64)
    follow_t = np.zeros((max(n_t, 1), num_words), dtype=np.uint64)
    item_rest_first = np.zeros((num_items, num_words), dtype=np.uint64)
    item_rest_nullable = np.zeros(num_items, dtype=np.bool_)
    grammar_sets_kernel(
        rule_lhs,
        rule_first_item,
        item_next_nt,
        item_next_t,
        nullable,
        first,
        follow_t,
        item_rest_first,
        item_rest_nullable,
    )
    ignore_ids = sorted({term_id[name] for name in grammar.ignore})
    ignore_bits = terminal_bits(ignore_ids, num_words)
    # every terminal may follow an ignored one, and an ignored one may follow any terminal
    follow_bits = follow_t | ignore_bits
    if ignore_ids:
        follow_bits[ignore_ids] = _int_bits((1 << n_t) - 1, num_words)
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
        nullable=nullable,
        final_item=int(rule_first_item[0] + 1),
        follow_bits=follow_bits,
        ignore_bits=ignore_bits,
        scannable_bits=terminal_bits(set(item_next_t[item_next_t >= 0].tolist()), num_words),
        item_rest_first=item_rest_first,
        item_rest_nullable=item_rest_nullable,
        nonterminal_names=tuple(nt_names),
    )
