"""Grammar infilling: can a partial output with holes still be completed? (stage 7 helper).

Mündler, Dekoninck and Vechev reduce constrained decoding for any-order generators (diffusion
LMs, fill-in-the-middle models) to *additive infilling*: given committed text segments and
holes, is there a word of the grammar that matches them, i.e. is ``L(G) ∩ R`` non-empty, where
``R`` is the regular language of the partial output? :class:`InfillChecker` decides it exactly
for any grammar of the library (the same language the :class:`~constrain.Matcher` enforces:
non-greedy lexing, ``%ignore`` anywhere between lexemes) and returns an example completion.

Algorithm (a Bar-Hillel intersection explored top-down, Earley style):

1. The partial output becomes a byte NFA: one edge per committed byte; a :class:`Gap` is a run of
   ``min_len .. max_len`` *units*, a unit being any byte or one word of an alphabet (a token
   trie). An unbounded gap loops.
2. The lex map: from NFA state ``p``, a breadth-first walk of the product of the grammar's
   combined lexer DFA with the NFA gives every ``(terminal, q)`` such that some lexeme of the
   terminal leads from ``p`` to ``q``. Ignored lexemes before a terminal are a closure over it.
3. Earley deduction over items ``(dotted rule, origin state, state)`` with NFA states in place
   of string positions. Completions are memoised per ``(nonterminal, origin)`` and replayed to
   items that start waiting later, so the cycles of unbounded gaps need no special care.
   The language is non-empty iff ``S' -> start .`` is derived from state 0 to a state whose
   ignore closure holds the final state. Back-pointers of the first derivation of every item
   rebuild one completion.

Cost: at most ``G * n^2`` items for ``G`` dotted rules and ``n`` NFA states, ``O(G n^3)`` time;
``max_states`` and ``max_items`` bound it with a :class:`~constrain.CompileLimitError`.

References
----------
.. [1] N. Mündler, J. Dekoninck, M. Vechev, "Constrained Decoding of Diffusion LLMs with
   Context-Free Grammars", arXiv:2508.10111 (2025).
.. [2] Y. Bar-Hillel, M. Perles, E. Shamir, "On formal properties of simple phrase structure
   grammars" (1961).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from constrain._types import UInt64Array
from constrain.automata.lexer import LexerDfa, grammar_lexer
from constrain.automata.pda import ParserTables, build_parser_tables
from constrain.compiler import CompiledGrammar
from constrain.errors import CompileLimitError
from constrain.ir import Grammar
from constrain.vocab.vocabulary import Vocabulary

__all__ = ["Gap", "InfillChecker", "InfillResult", "Part"]

_SCAN, _COMPLETE = 0, 1
_PRINTABLE = list(range(0x20, 0x7F))


@dataclass(frozen=True, slots=True)
class Gap:
    """A hole in a partial output: ``min_len .. max_len`` units of text.

    A unit is one arbitrary byte (``alphabet=None``) or one word of ``alphabet`` (e.g. the bytes
    of every non-special token of a vocabulary, for "exactly k tokens"). ``Gap()`` is any text
    at all (Mündler et al.'s gap of unknown length); ``Gap(3, 3)`` exactly three bytes.

    Parameters
    ----------
    min_len : int, optional
        Fewest units (default 0).
    max_len : int or None, optional
        Most units; None (default) means unbounded.
    alphabet : tuple of bytes or None, optional
        The words a unit may be; None means any single byte.
    """

    min_len: int = 0
    max_len: int | None = None
    alphabet: tuple[bytes, ...] | None = None

    def __post_init__(self) -> None:
        if self.min_len < 0 or (self.max_len is not None and self.max_len < self.min_len):
            raise ValueError(
                f"Gap needs 0 <= min_len <= max_len, got min_len={self.min_len}, "
                f"max_len={self.max_len}"
            )
        if self.alphabet is not None and not all(self.alphabet):
            raise ValueError("a Gap alphabet must not contain the empty word")

    @classmethod
    def tokens(cls, vocab: Vocabulary, min_len: int, max_len: int | None = None) -> Gap:
        """Return a gap of ``min_len .. max_len`` non-special tokens of ``vocab``.

        ``max_len`` defaults to ``min_len`` (exactly that many tokens). The alphabet is the set
        of distinct token byte strings; the gap automaton is one token trie per unit, so keep
        ``max_len`` times the vocabulary's total token bytes under ``max_states``.
        """
        return cls(min_len, min_len if max_len is None else max_len, _alphabet(vocab))


@functools.lru_cache(maxsize=8)
def _alphabet(vocab: Vocabulary) -> tuple[bytes, ...]:
    words = {vocab.token_bytes_of(t) for t in range(vocab.size) if vocab.token_lengths[t]}
    return tuple(sorted(words))


@dataclass(frozen=True, slots=True)
class InfillResult:
    """The answer of :meth:`InfillChecker.check` (truthy iff completable).

    Attributes
    ----------
    completable : bool
        Whether some word of the grammar matches the partial output.
    text : bytes or None
        One such word (committed segments included), when completable.
    fills : tuple of bytes or None
        What each :class:`Gap` holds in ``text``, in order.
    num_items : int
        Earley items derived (the work done).
    """

    completable: bool
    text: bytes | None = None
    fills: tuple[bytes, ...] | None = None
    num_items: int = 0

    def __bool__(self) -> bool:
        return self.completable


Part = bytes | str | Gap


class _Nfa:
    """The partial output as an epsilon-free byte NFA (edges carry lexer-class pairs)."""

    def __init__(self, checker: InfillChecker, parts: Sequence[Part]) -> None:
        self.checker = checker
        self.edges: list[list[tuple[tuple[tuple[int, int], ...], int, int]]] = []
        self.eps: list[list[int]] = []
        cur = self._new()
        for index, part in enumerate(parts):
            if isinstance(part, Gap):
                cur = self._gap(cur, part, index)
            elif isinstance(part, (bytes, bytearray, str)):
                data = part.encode() if isinstance(part, str) else bytes(part)
                for b in data:
                    nxt = self._new()
                    self.edges[cur].append((checker.byte_pairs[b], nxt, index))
                    cur = nxt
            else:
                raise TypeError(
                    f"a partial output is a sequence of bytes, str and Gap parts; part {index} "
                    f"is {type(part).__name__}"
                )
        self._eliminate_eps(cur)

    def _new(self) -> int:
        if len(self.edges) >= self.checker.max_states:
            raise CompileLimitError(
                "max_infill_states",
                self.checker.max_states,
                len(self.edges) + 1,
                "shorten the partial output or its gaps, or raise InfillChecker(max_states=)",
            )
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def _unit(self, src: int, gap: Gap, index: int) -> int:
        dst = self._new()
        if gap.alphabet is None:
            self.edges[src].append((self.checker.any_pairs, dst, index))
            return dst
        children: dict[tuple[int, int], int] = {}
        for word in gap.alphabet:
            node = src
            for b in word:
                nxt = children.get((node, b))
                if nxt is None:
                    nxt = children[(node, b)] = self._new()
                    self.edges[node].append((self.checker.byte_pairs[b], nxt, index))
                node = nxt
            self.eps[node].append(dst)
        return dst

    def _gap(self, cur: int, gap: Gap, index: int) -> int:
        for _ in range(gap.min_len):
            cur = self._unit(cur, gap, index)
        if gap.max_len is None:
            if gap.alphabet is None:
                self.edges[cur].append((self.checker.any_pairs, cur, index))
            else:
                self.eps[self._unit(cur, gap, index)].append(cur)
            return cur
        exits = [cur]
        for _ in range(gap.max_len - gap.min_len):
            cur = self._unit(cur, gap, index)
            exits.append(cur)
        end = self._new()
        for e in exits:
            self.eps[e].append(end)
        return end

    def _eliminate_eps(self, final: int) -> None:
        n = len(self.edges)
        closure: list[list[int]] = []
        for p in range(n):
            seen, order = {p}, [p]
            for r in order:
                for q in self.eps[r]:
                    if q not in seen:
                        seen.add(q)
                        order.append(q)
            closure.append(order)
        self.final = [final in closure[p] for p in range(n)]
        edges = [[e for r in closure[p] for e in self.edges[r]] for p in range(n)]
        # trim: keep edges into states that can still reach the final state
        useful = list(self.final)
        pred: list[list[int]] = [[] for _ in range(n)]
        for p in range(n):
            for _, q, _ in edges[p]:
                pred[q].append(p)
        todo = [p for p in range(n) if useful[p]]
        while todo:
            q = todo.pop()
            for p in pred[q]:
                if not useful[p]:
                    useful[p] = True
                    todo.append(p)
        self.out = [[e for e in edges[p] if useful[e[1]]] for p in range(n)]
        self.n = n


class _Search:
    """One emptiness test: lex map, ignore closure, Earley deduction and the witness."""

    def __init__(self, checker: InfillChecker, nfa: _Nfa) -> None:
        self.c = checker
        self.nfa = nfa
        self.n = nfa.n
        self.lex: dict[int, tuple[dict[int, dict[int, int]], dict[int, tuple[int, int, int]]]] = {}
        self.ign: dict[int, dict[int, tuple[int, int] | None]] = {}
        self.scans: dict[int, dict[int, int]] = {}
        self.back: dict[int, tuple[int, ...] | None] = {}
        self.done: dict[int, dict[int, int]] = {}

    def lexmap(self, p: int) -> tuple[dict[int, dict[int, int]], dict[int, tuple[int, int, int]]]:
        """Return ``(ends, parent)``: ``ends[t][q]`` = a product pair ending lexeme ``t`` at q."""
        hit = self.lex.get(p)
        if hit is not None:
            return hit
        n, accepts, out, successors = self.n, self.c.accepts, self.nfa.out, self.c.successors
        parent: dict[int, tuple[int, int, int]] = {p: (-1, -1, -1)}
        ends: dict[int, dict[int, int]] = {}
        queue = [p]
        for pair in queue:
            s, q = divmod(pair, n)
            for t in accepts[s]:
                ends.setdefault(t, {}).setdefault(q, pair)
            for pairs, q2, part in out[q]:
                for s2, b in successors(s, pairs):
                    key = s2 * n + q2
                    if key not in parent:
                        parent[key] = (pair, b, part)
                        queue.append(key)
        self.lex[p] = (ends, parent)
        return ends, parent

    def closure(self, p: int) -> dict[int, tuple[int, int] | None]:
        """Return the states reachable from ``p`` by ignored lexemes: ``q -> (prev, terminal)``."""
        hit = self.ign.get(p)
        if hit is not None:
            return hit
        reach: dict[int, tuple[int, int] | None] = {p: None}
        order = [p]
        for r in order:
            ends = self.lexmap(r)[0]
            for t in self.c.ignore:
                for q in ends.get(t, ()):
                    if q not in reach:
                        reach[q] = (r, t)
                        order.append(q)
        self.ign[p] = reach
        return reach

    def scan(self, p: int, t: int) -> dict[int, int]:
        """Return ``q -> r``: terminal ``t`` leads from ``p`` to ``q``, its lexeme starting at r."""
        key = p * self.c.num_terminals + t
        hit = self.scans.get(key)
        if hit is None:
            hit = {}
            for r in self.closure(p):
                for q in self.lexmap(r)[0].get(t, ()):
                    hit.setdefault(q, r)
            self.scans[key] = hit
        return hit

    def run(self) -> tuple[int, int] | None:
        """Derive items until ``S' -> start .`` is accepted; return (its key, its state)."""
        c, n = self.c, self.n
        next_nt, next_t, item_rule, rule_lhs = c.next_nt, c.next_t, c.item_rule, c.rule_lhs
        first, nt_rules, final_item = c.rule_first_item, c.nt_rules, c.final_item
        back, done, final = self.back, self.done, self.nfa.final
        waiting: dict[int, list[tuple[int, int]]] = {}
        work: deque[int] = deque()  # first in, first out: shallow derivations first

        def add(item: int, origin: int, state: int, why: tuple[int, ...] | None) -> None:
            key = (item * n + origin) * n + state
            if key not in back:
                back[key] = why
                work.append(key)

        add(first[0], 0, 0, None)
        while work:
            if len(back) > c.max_items:
                raise CompileLimitError(
                    "max_infill_items",
                    c.max_items,
                    len(back),
                    "shorten the partial output or raise InfillChecker(max_items=)",
                )
            key = work.popleft()
            rest, p = divmod(key, n)
            item, o = divmod(rest, n)
            nt = next_nt[item]
            if nt >= 0:
                wk = nt * n + p
                lst = waiting.get(wk)
                if lst is None:
                    waiting[wk] = [(item, o)]
                    for r in nt_rules[nt]:
                        add(first[r], p, p, None)
                else:
                    lst.append((item, o))
                for q in done.get(wk, ()):
                    add(item + 1, o, q, (key, _COMPLETE, nt, p, q))
                continue
            t = next_t[item]
            if t >= 0:
                for q, r in self.scan(p, t).items():
                    add(item + 1, o, q, (key, _SCAN, t, r, p, q))
                continue
            lhs = rule_lhs[item_rule[item]]
            dk = lhs * n + o
            ends = done.setdefault(dk, {})
            if p in ends:
                continue
            ends[p] = key
            if item == final_item and any(final[f] for f in self.closure(p)):
                return key, p
            for it2, o2 in waiting.get(dk, ()):
                add(it2 + 1, o2, p, ((it2 * n + o2) * n + o, _COMPLETE, lhs, o, p))
        return None

    def lexeme(self, r: int, t: int, q: int) -> list[tuple[int, int]]:
        """Return the labelled bytes of the recorded lexeme of ``t`` from ``r`` to ``q``."""
        ends, parent = self.lexmap(r)
        pair = ends[t][q]
        out: list[tuple[int, int]] = []
        while True:
            prev, b, part = parent[pair]
            if prev < 0:
                break
            out.append((b, part))
            pair = prev
        out.reverse()
        return out

    def ignored(self, p: int, r: int) -> list[tuple[int, int]]:
        """Return the labelled bytes of the recorded ignored lexemes from ``p`` to ``r``."""
        reach = self.closure(p)
        pieces: list[list[tuple[int, int]]] = []
        while True:
            step = reach[r]
            if step is None:
                break
            prev, t = step
            pieces.append(self.lexeme(prev, t, r))
            r = prev
        return [x for piece in reversed(pieces) for x in piece]

    def witness(self, key: int, p: int) -> list[tuple[int, int]]:
        """Rebuild the labelled bytes of the first derivation of the accepted item."""
        end = next(f for f in self.closure(p) if self.nfa.final[f])
        tasks: list[int | list[tuple[int, int]]] = [self.ignored(p, end), key]
        out: list[tuple[int, int]] = []
        while tasks:
            task = tasks.pop()
            if not isinstance(task, int):
                out.extend(task)
                continue
            why = self.back[task]
            if why is None:
                continue
            if why[1] == _SCAN:
                _, _, t, r, p0, q = why
                tasks.append(self.lexeme(r, t, q))
                tasks.append(self.ignored(p0, r))
            else:
                _, _, lhs, o, q = why
                tasks.append(self.done[lhs * self.n + o][q])
            tasks.append(why[0])
        return out


class InfillChecker:
    """Decide whether partial outputs with holes can be completed to words of a grammar.

    Parameters
    ----------
    grammar : Grammar or CompiledGrammar
        Any grammar of the library (regex, JSON Schema, Lark); a compiled one reuses its lexer
        and parser tables.
    max_states : int, optional
        Most NFA states of one partial output (committed bytes plus gap units).
    max_items : int, optional
        Most Earley items of one check.

    Examples
    --------
    >>> checker = InfillChecker(Grammar.from_lark('start: "(" start ")" | "x"'))  # doctest: +SKIP
    >>> checker.check([b"((", Gap(), b"))"]).fills  # doctest: +SKIP
    (b'x',)
    """

    def __init__(
        self,
        grammar: Grammar | CompiledGrammar,
        *,
        max_states: int = 4096,
        max_items: int = 2_000_000,
    ) -> None:
        # A greedy grammar (%lexer basic) is checked without greedy lexing: its non-greedy
        # language, a superset (docs/diffusion.md).
        if isinstance(grammar, CompiledGrammar):
            lexer, parser = grammar.lexer, grammar.parser
        elif isinstance(grammar, Grammar):
            lexer, parser = _build_tables(grammar)
        else:
            raise TypeError(
                f"InfillChecker takes a Grammar or a CompiledGrammar, got {type(grammar).__name__}"
            )
        self.max_states = max_states
        self.max_items = max_items
        self.num_terminals = lexer.num_terminals
        self.trans: list[list[int]] = lexer.trans.tolist()
        self.accepts = [tuple(lexer.terminals_accepting(s)) for s in range(lexer.num_states)]
        self.ignore = [t for t in range(lexer.num_terminals) if _bit(parser.ignore_bits, t)]
        self.next_nt: list[int] = parser.item_next_nt.tolist()
        self.next_t: list[int] = parser.item_next_t.tolist()
        self.item_rule: list[int] = parser.item_rule.tolist()
        self.rule_lhs: list[int] = parser.rule_lhs.tolist()
        self.rule_first_item: list[int] = parser.rule_first_item.tolist()
        ptr = parser.nt_rules_indptr.tolist()
        rules = parser.nt_rules.tolist()
        self.nt_rules = [rules[ptr[a] : ptr[a + 1]] for a in range(parser.num_nonterminals)]
        self.final_item = int(parser.final_item)
        classes = lexer.byte_class.tolist()
        self.byte_pairs = tuple(((classes[b], b),) for b in range(256))
        rep: dict[int, int] = {}
        for b in _PRINTABLE + list(range(256)):  # printable ASCII first: readable witnesses
            rep.setdefault(classes[b], b)
        self.any_pairs = tuple(sorted(rep.items()))
        self._successors: dict[
            tuple[int, int], tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
        ] = {}

    def successors(
        self, state: int, pairs: tuple[tuple[int, int], ...]
    ) -> tuple[tuple[int, int], ...]:
        """Return ``(next lexer state, byte)`` for the live moves of ``state`` over ``pairs``.

        One entry per next state (its first byte in ``pairs`` order: the same byte the walk
        would record first), cached per state and ``pairs`` object (the edges carry this
        checker's own tuples; an entry keeps its ``pairs`` alive and is checked against it, so a
        reused id never hits): an any-byte gap edge has a pair per byte class but leads to a few
        states.
        """
        key = (state, id(pairs))
        hit = self._successors.get(key)
        if hit is None or hit[0] is not pairs:  # the entry holds ``pairs``: its id stays valid
            row = self.trans[state]
            first: dict[int, int] = {}
            for c, b in pairs:
                s2 = row[c]
                if s2 >= 0:
                    first.setdefault(s2, b)
            hit = self._successors[key] = (pairs, tuple(first.items()))
        return hit[1]

    def check(self, parts: Sequence[Part]) -> InfillResult:
        """Return whether some word of the grammar matches ``parts``, with an example.

        Semantics as a loop (over the infinitely many candidate words)::

            any(is_sentence(s0 + f1 + s1 + ...) for f1 in words(gap1) for ...)

        where committed parts ``s_i`` are taken as they are and each gap's fill ``f_i`` is any
        string of its units. For "still a valid prefix", end ``parts`` with ``Gap()``.

        Parameters
        ----------
        parts : sequence of bytes, str or Gap
            Committed text (str is UTF-8 encoded) and holes, in order.

        Returns
        -------
        InfillResult

        Raises
        ------
        CompileLimitError
            If the partial output needs more than ``max_states`` NFA states or the search more
            than ``max_items`` items.
        """
        nfa = _Nfa(self, parts)
        search = _Search(self, nfa)
        found = search.run()
        if found is None:
            return InfillResult(False, num_items=len(search.back))
        labelled = search.witness(*found)
        fills = tuple(
            bytes(b for b, part in labelled if part == index)
            for index, p in enumerate(parts)
            if isinstance(p, Gap)
        )
        return InfillResult(True, bytes(b for b, _ in labelled), fills, len(search.back))


def _bit(bits: UInt64Array, t: int) -> bool:
    return bool(int(bits[t >> 6]) >> (t & 63) & 1)


def _build_tables(grammar: Grammar) -> tuple[LexerDfa, ParserTables]:
    g, lexer = grammar_lexer(grammar)
    return lexer, build_parser_tables(g, [t.name for t in g.terminals])
