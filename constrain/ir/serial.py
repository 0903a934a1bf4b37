"""Stage 1: a grammar IR as plain JSON data, and back, validated (no pickle, no Lark printing).

:func:`grammar_to_data` writes a :class:`~constrain.ir.Grammar` as lists, strings and integers
that ``json.dumps`` takes; :func:`grammar_from_data` rebuilds the identical grammar and trusts
nothing in its input (it reads compiled-grammar files, :mod:`constrain.compiled_file`). Every
regex node is written once, in a table where a node names its children by their (smaller) index,
so shared subtrees stay shared and reading needs no recursion::

    {"start": "start", "ignore": ["WS"], "greedy": false, "meta": {"warnings": [...]},
     "special_names": ["<|im_end|>"],              # only when the grammar names special tokens
     "token_budgets": [["S3", 256]],               # only when a terminal has a token budget
     "token_aligned": [["S4", "end"]],             # only when a terminal is token-aligned
     "rules": [["start", [["A", "b"], []]], ...],
     "terminals": [["A", 3], ...],                 # the index of the terminal's root node
     "nodes": [["set", [[48, 57]]],                # CharSet ranges
               ["lit", "ab"],                      # Literal
               ["cat", [0, 1]], ["alt", [...]], ["and", [...]],   # Concat, Alt, Intersect
               ["rep", 2, 1, null],                # Repeat(item, min, max or null)
               ["not", 2],                         # Complement
               ["fa", 3, 0, [2], [[0, [[48, 57]], 1], ...]]]}  # Automaton(n, start, accept,
                                                   #   edges as [src, ranges, dst])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from constrain.ir.grammar import Grammar, Rule, Terminal
from constrain.ir.nodes import (
    MAX_PSEUDO,
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
)

__all__ = ["grammar_from_data", "grammar_to_data"]

_META_KEYS = frozenset({"warnings", "source"})
_OPTIONAL = frozenset(
    {"greedy", "ignore_at_end", "special_names", "token_budgets", "token_aligned"}
)
_MAX_COUNT = 2**31 - 1  # repetition bounds and automaton sizes: what the builders can index


def _children(node: Regex) -> tuple[Regex, ...]:
    if isinstance(node, (Concat, Alt, Intersect)):
        return node.items
    if isinstance(node, (Repeat, Complement)):
        return (node.item,)
    return ()


def _ranges(cs: CharSet) -> list[list[int]]:
    return [[lo, hi] for lo, hi in cs.ranges]


def _encode(node: Regex, index: dict[Regex, int]) -> list[Any]:
    kids = [index[k] for k in _children(node)]
    if isinstance(node, CharSet):
        return ["set", _ranges(node)]
    if isinstance(node, Literal):
        return ["lit", node.text]
    if isinstance(node, Concat):
        return ["cat", kids]
    if isinstance(node, Alt):
        return ["alt", kids]
    if isinstance(node, Intersect):
        return ["and", kids]
    if isinstance(node, Repeat):
        return ["rep", kids[0], node.min, node.max]
    if isinstance(node, Complement):
        return ["not", kids[0]]
    if isinstance(node, Automaton):
        edges = [[src, _ranges(cs), dst] for src, cs, dst in node.edges]
        return ["fa", node.num_states, node.start, sorted(node.accept), edges]
    raise TypeError(f"not a regex IR node: {node!r}")


def grammar_to_data(grammar: Grammar) -> dict[str, Any]:
    """Return ``grammar`` as JSON-ready data (see the module docstring for the layout).

    Parameters
    ----------
    grammar : Grammar
        Any grammar.

    Returns
    -------
    dict
        Lists, strings, integers and None only; :func:`grammar_from_data` reads it back as an
        equal grammar.

    Raises
    ------
    TypeError
        If a terminal holds something that is not a regex IR node.
    """
    index: dict[Regex, int] = {}
    nodes: list[list[Any]] = []
    for term in grammar.terminals:
        stack: list[tuple[Regex, bool]] = [(term.regex, False)]
        while stack:  # post-order without recursion: children get their index first
            node, ready = stack.pop()
            if node in index:
                continue
            if ready:
                index[node] = len(nodes)
                nodes.append(_encode(node, index))
                continue
            stack.append((node, True))
            stack.extend((kid, False) for kid in reversed(_children(node)) if kid not in index)
    meta = {
        k: v if isinstance(v, str) else list(v)
        for k, v in grammar._meta.items()
        if k in _META_KEYS  # what a front end notes about its grammar (informative, uncompared)
    }
    # ignore_at_end only when false, so that other grammars read back in older versions
    at_end = {} if grammar.ignore_at_end else {"ignore_at_end": False}
    # special_names only when there are some, likewise
    names: dict[str, Any] = {}
    if grammar.special_names:
        names["special_names"] = list(grammar.special_names)
    if grammar.token_budgets:  # likewise
        names["token_budgets"] = [[name, limit] for name, limit in grammar.token_budgets]
    if grammar.token_aligned:  # likewise
        names["token_aligned"] = [[name, kind] for name, kind in grammar.token_aligned]
    return {
        "start": grammar.start,
        "ignore": list(grammar.ignore),
        "greedy": grammar.greedy,
        **at_end,
        **names,
        "meta": meta,
        "rules": [[r.name, [list(alt) for alt in r.alternatives]] for r in grammar.rules],
        "terminals": [[t.name, index[t.regex]] for t in grammar.terminals],
        "nodes": nodes,
    }


class _Reader:
    """Typed reads of untrusted JSON data; every failure is a ValueError naming the place."""

    @staticmethod
    def fail(where: str, what: str) -> ValueError:
        return ValueError(f"grammar {where}: {what}")

    def seq(self, value: Any, where: str, length: int | None = None) -> list[Any]:
        if type(value) is not list or (length is not None and len(value) != length):
            expected = "a list" if length is None else f"a list of {length}"
            raise self.fail(where, f"expected {expected}")
        return value

    def text(self, value: Any, where: str) -> str:
        if type(value) is not str:
            raise self.fail(where, "expected a string")
        return value

    def integer(self, value: Any, where: str, lo: int, hi: int) -> int:
        if type(value) is not int or not lo <= value <= hi:
            raise self.fail(where, f"expected an integer in [{lo}, {hi}]")
        return value

    def charset(self, value: Any, where: str) -> CharSet:
        pairs = [self.seq(p, where, 2) for p in self.seq(value, where)]
        ranges = tuple(
            (self.integer(lo, where, 0, MAX_PSEUDO), self.integer(hi, where, 0, MAX_PSEUDO))
            for lo, hi in pairs
        )
        cs = CharSet.of(ranges)
        if cs.ranges != ranges:
            raise self.fail(where, "character ranges are not sorted, disjoint and non-adjacent")
        return cs


def _decode_node(r: _Reader, entry: Any, nodes: list[Regex], where: str) -> Regex:
    entry = r.seq(entry, where)
    if not entry:
        raise r.fail(where, "empty node")
    tag = r.text(entry[0], where)

    def kid(value: Any) -> Regex:
        return nodes[r.integer(value, where, 0, len(nodes) - 1)]

    def kids(value: Any) -> tuple[Regex, ...]:
        return tuple(kid(v) for v in r.seq(value, where))

    def automaton(n: Any, start: Any, accept: Any, edges: Any) -> Automaton:
        num = r.integer(n, where, 1, _MAX_COUNT)
        states = [r.integer(s, where, 0, num - 1) for s in r.seq(accept, where)]
        triples = [r.seq(e, where, 3) for e in r.seq(edges, where)]
        return Automaton(
            num,
            tuple(
                (
                    r.integer(s, where, 0, num - 1),
                    r.charset(cs, where),
                    r.integer(d, where, 0, num - 1),
                )
                for s, cs, d in triples
            ),
            r.integer(start, where, 0, num - 1),
            frozenset(states),
        )

    def repeat(item: Any, lo: Any, hi: Any) -> Repeat:
        # max below min is the empty language (a schema's minLength above its maxLength)
        low = r.integer(lo, where, 0, _MAX_COUNT)
        return Repeat(kid(item), low, None if hi is None else r.integer(hi, where, 0, _MAX_COUNT))

    readers: dict[str, tuple[int, Callable[..., Regex]]] = {
        "set": (1, lambda v: r.charset(v, where)),
        "lit": (1, lambda v: Literal(r.text(v, where))),
        "cat": (1, lambda v: Concat(kids(v))),
        "alt": (1, lambda v: Alt(kids(v))),
        "and": (1, lambda v: Intersect(kids(v))),
        "not": (1, lambda v: Complement(kid(v))),
        "rep": (3, repeat),
        "fa": (4, automaton),
    }
    if tag not in readers:
        raise r.fail(where, f"unknown node kind {tag[:20]!r}")
    arity, build = readers[tag]
    if len(entry) != arity + 1:
        raise r.fail(where, f"a {tag!r} node has {arity} field(s)")
    return build(*entry[1:])


def grammar_from_data(data: Any) -> Grammar:
    """Rebuild a grammar written by :func:`grammar_to_data`, validating every field.

    Parameters
    ----------
    data : Any
        Parsed JSON (untrusted).

    Returns
    -------
    Grammar
        The grammar, checked with :meth:`Grammar.validate`.

    Raises
    ------
    ValueError
        If the data is not such a grammar: a missing or extra field, a wrong type, a node that
        names a later node, a range out of order, a count out of range, an undefined symbol
        (:class:`~constrain.GrammarError`, a ValueError) and so on; the message says where.
    """
    r = _Reader()
    fields = {"start", "ignore", "meta", "rules", "terminals", "nodes"}
    if type(data) is not dict or set(data) - _OPTIONAL != fields:
        raise r.fail(
            "",
            "expected the fields start, ignore, meta, rules, terminals, nodes "
            "(and greedy, ignore_at_end, special_names, token_budgets, token_aligned)",
        )
    nodes: list[Regex] = []
    for i, entry in enumerate(r.seq(data["nodes"], "nodes")):
        nodes.append(_decode_node(r, entry, nodes, f"node {i}"))
    terminals = []
    for entry in r.seq(data["terminals"], "terminals"):
        name, root = r.seq(entry, "terminal", 2)
        where = f"terminal {r.text(name, 'terminal')[:40]!r}"
        terminals.append(Terminal(name, nodes[r.integer(root, where, 0, len(nodes) - 1)]))
    rules = []
    for entry in r.seq(data["rules"], "rules"):
        name, alts = r.seq(entry, "rule", 2)
        where = f"rule {r.text(name, 'rule')[:40]!r}"
        rules.append(
            Rule(
                name,
                tuple(
                    tuple(r.text(s, where) for s in r.seq(alt, where)) for alt in r.seq(alts, where)
                ),
            )
        )
    if type(data["meta"]) is not dict or not set(data["meta"]) <= _META_KEYS:
        raise r.fail("meta", f"expected a mapping with keys among {sorted(_META_KEYS)}")
    meta: dict[str, Any] = {}
    if "source" in data["meta"]:
        meta["source"] = r.text(data["meta"]["source"], "meta")
    if "warnings" in data["meta"]:
        warnings = r.seq(data["meta"]["warnings"], "meta")
        meta["warnings"] = tuple(r.text(w, "meta") for w in warnings)
    greedy = data.get("greedy", False)
    if type(greedy) is not bool:
        raise r.fail("greedy", "expected true or false")
    ignore_at_end = data.get("ignore_at_end", True)
    if type(ignore_at_end) is not bool:
        raise r.fail("ignore_at_end", "expected true or false")
    special_names = tuple(
        r.text(n, "special_names") for n in r.seq(data.get("special_names", []), "special_names")
    )
    budgets = []
    for entry in r.seq(data.get("token_budgets", []), "token_budgets"):
        name, limit = r.seq(entry, "token_budgets", 2)
        where = f"token budget of {r.text(name, 'token_budgets')[:40]!r}"
        budgets.append((name, r.integer(limit, where, 1, 2**31 - 1)))
    aligned = []
    for entry in r.seq(data.get("token_aligned", []), "token_aligned"):
        name, kind = r.seq(entry, "token_aligned", 2)
        aligned.append((r.text(name, "token_aligned"), r.text(kind, "token_aligned")))
    grammar = Grammar(
        rules=tuple(rules),
        terminals=tuple(terminals),
        start=r.text(data["start"], "start"),
        ignore=tuple(r.text(n, "ignore") for n in r.seq(data["ignore"], "ignore")),
        greedy=greedy,
        ignore_at_end=ignore_at_end,
        special_names=special_names,
        token_budgets=tuple(budgets),
        token_aligned=tuple(aligned),
        _meta=meta,
    )
    grammar.validate()
    return grammar
