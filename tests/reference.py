"""Naive reference implementations (oracles) that the kernels and engines are tested against.

Plain Python functions, slow and obviously correct; each section names the kernel it checks.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------------------------
# Token bitmask (constrain.bitmask, constrain.kernels.{torch,numba,triton}_mask)


def bitmask_bit(word: int, bit: int) -> bool:
    """Return bit ``bit`` of an int32 ``word`` (Python int, any sign): token allowed or not."""
    return (word % 2**32) // 2**bit % 2 == 1


def reference_allowed(
    bitmask_rows: Sequence[Sequence[int]],
    num_cols: int,
    vocab_size: int | None = None,
    rows: Sequence[int] | None = None,
) -> list[list[bool]]:
    """Which logits survive ``apply_token_bitmask_inplace``: one list of ``num_cols`` per row.

    Rows not in ``rows`` (when given) are all True (untouched). ``vocab_size`` defaults to
    ``32 * len(bitmask_rows[0])``.
    """
    num_words = len(bitmask_rows[0]) if bitmask_rows else 0
    vocab = 32 * num_words if vocab_size is None else vocab_size
    selected = set(range(len(bitmask_rows))) if rows is None else set(rows)
    out = []
    for r in range(len(bitmask_rows)):
        keep = []
        for t in range(num_cols):
            if r not in selected:
                keep.append(True)
            elif t >= vocab or t >= 32 * num_words:
                keep.append(False)
            else:
                keep.append(bitmask_bit(int(bitmask_rows[r][t // 32]), t % 32))
        out.append(keep)
    return out


def reference_bool_to_bitmask(mask_row: Sequence[bool]) -> list[int]:
    """Pack one row of booleans into signed int32 words (bit j of word w = token 32w + j)."""
    words = []
    for w in range((len(mask_row) + 31) // 32):
        acc = 0
        for j in range(32):
            t = 32 * w + j
            if t < len(mask_row) and mask_row[t]:
                acc += 2**j
        words.append(acc - 2**32 if acc >= 2**31 else acc)
    return words


# --------------------------------------------------------------------------------------------
# Token trie (constrain.vocab.Vocabulary.node_* / token_next_dup, built by constrain.vocab.trie)


def naive_token_trie(tokens: Sequence[bytes | None]) -> dict[str, list[int]]:
    """Build the flat DFS token trie from nested dicts, the obvious way.

    ``tokens[i]`` is the byte string of id ``i`` (``None`` or ``b""``: special, not in the trie).
    Returns lists ``node_byte``, ``node_token`` (smallest id, -1 none), ``node_end``, ``node_depth``
    (node 0 is the root; children visited in byte order) and ``token_next_dup`` (one per id).
    """
    root: dict[int, dict] = {}  # type: ignore[type-arg]
    ids_of: dict[bytes, list[int]] = {}
    for i, tok in enumerate(tokens):
        if tok:
            ids_of.setdefault(bytes(tok), []).append(i)
            node = root
            for b in tok:
                node = node.setdefault(b, {})
    out: dict[str, list[int]] = {
        k: [] for k in ("node_byte", "node_token", "node_end", "node_depth")
    }
    # iterative pre-order DFS; an int on the stack closes the subtree of that node
    stack: list = [(root, b"", 0)]  # type: ignore[type-arg]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            out["node_end"][item] = len(out["node_byte"])
            continue
        node, path, byte = item
        index = len(out["node_byte"])
        out["node_byte"].append(byte)
        out["node_token"].append(ids_of[path][0] if path in ids_of else -1)
        out["node_end"].append(-1)
        out["node_depth"].append(len(path))
        stack.append(index)
        stack.extend((node[b], path + bytes([b]), b) for b in sorted(node, reverse=True))
    next_dup = [-1] * len(tokens)
    for ids in ids_of.values():
        for a, b in zip(ids, ids[1:], strict=False):
            next_dup[a] = b
    out["token_next_dup"] = next_dup
    return out


def naive_trie_walk(node_byte: Sequence[int], node_end: Sequence[int]) -> dict[bytes, int]:
    """Map the byte path of every trie node to its index, following first-child/next-sibling."""
    paths: dict[bytes, int] = {}
    stack = [(0, b"")]
    while stack:
        n, path = stack.pop()
        paths[path] = n
        child = n + 1
        while child < node_end[n]:
            stack.append((child, path + bytes([node_byte[child]])))
            child = node_end[child]
    return paths


# --------------------------------------------------------------------------------------------
# Regex front end and DFA builder (constrain.frontends.regex, constrain.automata.{dfa,lexer},
# constrain.kernels.numba_{subsets,minimize,dfa})


def python_fullmatch(pattern: str, text: str, flags: int = 0) -> bool:
    """The semantics ``parse_regex`` + ``compile_regex`` must reproduce."""
    import re

    return re.fullmatch(pattern, text, flags) is not None


@functools.cache
def _all_scalar_values() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def python_char_ranges(pattern: str, flags: int = 0) -> list[tuple[int, int]]:
    """Code points (surrogates excluded) matched by a one-character pattern, as ranges.

    Runs Python's engine over every code point, so it is the ground truth for ``\\d``, ``\\w``,
    ``\\s``, ``.``, classes and IGNORECASE folding.
    """
    import re

    text = _all_scalar_values()
    out = []
    for m in re.finditer(f"(?:{pattern})+", text, flags):
        lo, hi = ord(text[m.start()]), ord(text[m.end() - 1])
        if lo < 0xD800 <= hi:  # a run across the removed surrogates
            out.extend([(lo, 0xD7FF), (0xE000, hi)])
        else:
            out.append((lo, hi))
    return out


def naive_nfa_accepts(
    num_states: int,
    byte_edges: Sequence[tuple[int, int, int, int]],
    eps_edges: Sequence[tuple[int, int]],
    start: int,
    finals: Sequence[int],
    data: bytes,
) -> bool:
    """Simulate an NFA (byte edges ``(src, lo, hi, dst)``) on ``data``, set by set."""
    eps: list[list[int]] = [[] for _ in range(num_states)]
    for s, d in eps_edges:
        eps[s].append(d)

    def close(states: set[int]) -> set[int]:
        todo = list(states)
        while todo:
            for d in eps[todo.pop()]:
                if d not in states:
                    states.add(d)
                    todo.append(d)
        return states

    current = close({start})
    for byte in data:
        current = close({d for s, lo, hi, d in byte_edges if s in current and lo <= byte <= hi})
    return bool(current & set(finals))


def naive_nfa_live(
    num_states: int, edges: Sequence[tuple[int, int]], finals: Sequence[int]
) -> list[bool]:
    """States that reach a final state, by fixpoint iteration (oracle of ``nfa_live_kernel``)."""
    live = [False] * num_states
    for f in finals:
        live[f] = True
    changed = True
    while changed:
        changed = False
        for s, d in edges:
            if live[d] and not live[s]:
                live[s] = changed = True
    return live


def naive_determinize(
    num_states: int,
    class_edges: Sequence[tuple[int, int, int, int]],
    eps_edges: Sequence[tuple[int, int]],
    keep: Sequence[bool],
    live: Sequence[bool],
    start: int,
    num_classes: int,
    keep_start: bool = False,
) -> tuple[list[list[int]], list[tuple[int, ...]]]:
    """Subset construction in BFS order over classes 0..C-1 (oracle of ``determinize_kernel``).

    ``class_edges`` are ``(src, class_lo, class_hi, dst)``. Subsets hold the ``keep`` states of
    the epsilon closure through live states. Returns ``(trans, subsets)`` with -1 = dead.
    """
    eps: list[list[int]] = [[] for _ in range(num_states)]
    for s, d in eps_edges:
        eps[s].append(d)

    def subset(seeds: set[int]) -> tuple[int, ...]:
        seen = {q for q in seeds if live[q]}
        todo = list(seen)
        while todo:
            for d in eps[todo.pop()]:
                if live[d] and d not in seen:
                    seen.add(d)
                    todo.append(d)
        return tuple(sorted(q for q in seen if keep[q]))

    first = subset({start})
    if keep_start and first and start not in first:
        first = tuple(sorted((*first, start)))
    if not first:
        return [], []
    index = {first: 0}
    sets = [first]
    trans: list[list[int]] = []
    i = 0
    while i < len(sets):
        row = []
        for c in range(num_classes):
            seeds = {d for s, lo, hi, d in class_edges if s in sets[i] and lo <= c <= hi}
            nxt = subset(seeds)
            if not nxt:
                row.append(-1)
                continue
            if nxt not in index:
                index[nxt] = len(sets)
                sets.append(nxt)
            row.append(index[nxt])
        trans.append(row)
        i += 1
    return trans, sets


def naive_compress_classes(
    trans: Sequence[Sequence[int]], byte_class: Sequence[int]
) -> tuple[list[int], list[list[int]]]:
    """Merge identical columns (oracle of ``compress_classes``): ``(byte_class, trans)``.

    A merged class keeps the position of its first column.
    """
    columns = [tuple(row[c] for row in trans) for c in range(len(trans[0]) if trans else 0)]
    first: dict[tuple[int, ...], int] = {}
    new_class = [first.setdefault(col, len(first)) for col in columns]
    keep = [columns.index(col) for col in first]  # dicts keep insertion (class) order
    return [new_class[c] for c in byte_class], [[row[c] for c in keep] for row in trans]


def naive_minimize(trans: Sequence[Sequence[int]], init_block: Sequence[int]) -> list[int]:
    """Moore's partition refinement (oracle of ``minimize_kernel``); returns a block per state.

    Two states share a block iff they are in the same initial block and every class leads them
    to the same block (-1, the dead state, being a block of its own).
    """
    block = list(init_block)
    while True:
        signature = [
            (block[q], *(block[t] if t >= 0 else -1 for t in row)) for q, row in enumerate(trans)
        ]
        ids: dict[tuple[int, ...], int] = {}
        new = [ids.setdefault(sig, len(ids)) for sig in signature]
        if len(ids) == len(set(block)):
            return new
        block = new


def naive_acyclic_states(texts: Sequence[bytes]) -> int:
    """Count the states of the minimal acyclic automaton of ``texts``, its start excluded.

    One state per distinct right language (the set of rests) of a non-empty prefix.
    """
    found = set(texts)
    prefixes = {t[:i] for t in found for i in range(1, len(t) + 1)}
    return len({frozenset(t[len(p) :] for t in found if t.startswith(p)) for p in prefixes})


def naive_bounded_classes(
    trans: Sequence[Sequence[int]], outputs: Sequence[Hashable], depth: int
) -> list[int]:
    """``depth`` rounds of Moore's refinement from the outputs (oracle of
    ``bounded_classes_kernel``): states share a class iff they have equal outputs after every
    string of at most ``depth`` classes (-1, the dead state, being alike only to itself)."""
    ids0: dict[Hashable, int] = {}
    block = [ids0.setdefault(o, len(ids0)) for o in outputs]
    for _ in range(depth):
        signature = [
            (block[q], *(block[t] if t >= 0 else -1 for t in row)) for q, row in enumerate(trans)
        ]
        ids: dict[tuple[int, ...], int] = {}
        block = [ids.setdefault(sig, len(ids)) for sig in signature]
    return block


def naive_alike_within(
    trans: Sequence[Sequence[int]], outputs: Sequence[Hashable], p: int, q: int, depth: int
) -> bool:
    """Whether every string of at most ``depth`` classes leads ``p`` and ``q`` to equal outputs
    (the definition, by enumerating the strings)."""
    level = [(p, q)]
    for d in range(depth + 1):
        for a, b in level:
            if (a < 0) != (b < 0) or (a >= 0 and outputs[a] != outputs[b]):
                return False
        if d == depth:
            break
        level = [
            (trans[a][c] if a >= 0 else -1, trans[b][c] if b >= 0 else -1)
            for a, b in level
            for c in range(len(trans[0]))
        ]
    return True


def naive_body_bound(
    lexer: Any,
    built: Sequence[bool] | None,
    allowed: Sequence[int],
    start: int,
    max_chars: int,
    shapes: Sequence[Sequence[tuple[int, int]]],
) -> int:
    """What ``body_bound_kernel`` returns first (oracle), by following each string-body
    character alone: one per sequence of byte classes its bytes can take (``shapes``, UTF-8
    byte ranges; a character's transitions depend on its bytes' classes only).

    ``R[d]``: the states exactly ``d`` characters lead to; a state is open when a terminal of
    ``allowed`` (a bitset) is alive there. Returns ``r`` when every character from ``R[0..r-1]``
    leads to an open state and none from ``R[r]`` does, ``max_chars + 1`` when every one up to
    ``R[max_chars]`` does, -1 when they disagree or a state met accepts a terminal. States
    whose rows are not ``built`` are left out, with where they lead."""
    trans, alive, accept = lexer.trans, lexer.alive_bits, lexer.accept_bits

    def is_built(s: int) -> bool:
        return built is None or (s < len(built) and bool(built[s]))

    chars = [
        seq
        for shape in shapes
        for seq in itertools.product(
            *(sorted({int(lexer.byte_class[b]) for b in range(lo, hi + 1)}) for lo, hi in shape)
        )
    ]
    level = {start}
    for d in range(max_chars + 1):
        opened, closed = set(), False
        for x in level:
            for seq in chars:
                s = x
                for c in seq:
                    if not is_built(s):
                        s = -2  # (no token goes there)
                        break
                    s = int(trans[s, c])
                    if s < 0:
                        closed = True
                        break
                    if built is not None and s >= len(built):
                        s = -2  # (past the flags: a row built after them; left out)
                        break
                    if accept[s].any():
                        return -1
                if s < 0 or not is_built(s):
                    continue
                if any(int(alive[s, w]) & int(allowed[w]) for w in range(len(allowed))):
                    opened.add(s)
                else:
                    closed = True
        if opened and closed:
            return -1
        if not opened:
            return d
        level = opened
    return max_chars + 1


def naive_dfa_equivalent(
    a: tuple[Sequence[int], Sequence[Sequence[int]], Sequence[bool]],
    b: tuple[Sequence[int], Sequence[Sequence[int]], Sequence[bool]],
) -> bool:
    """Whether two byte DFAs ``(byte_class, trans, accept)`` accept the same language."""
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        p, q = todo.pop()
        if (p >= 0 and bool(a[2][p])) != (q >= 0 and bool(b[2][q])):
            return False
        for byte in range(256):
            nxt = (
                a[1][p][a[0][byte]] if p >= 0 else -1,
                b[1][q][b[0][byte]] if q >= 0 else -1,
            )
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


# --------------------------------------------------------------------------------------------
# Context-free grammars (constrain.matcher, constrain.tables, constrain.kernels.numba_{earley,
# match,tables}): the language of a Grammar IR and its prefixes, decided without the engine's
# combined lexer, parser tables, hypotheses or token tables.
#
# Semantics (the language of the grammar, "complete lexing"): a text is accepted iff it can be
# cut into lexemes l1 .. lk, with any number of ignored lexemes (``%ignore``) before, between and
# after them, such that the terminal names of l1 .. lk are derived from the start rule and each
# li is in its terminal's language. Every way of cutting the text counts (no greedy lexer).


def _grammar_parts(grammar: Any) -> tuple[dict[str, Any], dict[str, list[tuple[str, ...]]]]:
    """Return ``({terminal: regex IR}, {rule: [alternative, ...]})`` of a Grammar IR."""
    terms = {t.name: t.regex for t in grammar.terminals}
    rules: dict[str, list[tuple[str, ...]]] = {}
    for rule in grammar.rules:
        rules.setdefault(rule.name, []).extend(tuple(alt) for alt in rule.alternatives)
    return terms, rules


def naive_productive(rules: dict[str, list[tuple[str, ...]]], symbols: set[str]) -> set[str]:
    """The symbols that derive a finite string: ``symbols`` (terminals that match some text)
    and the rules with an alternative of such symbols, by passes until nothing changes."""
    productive = set(symbols)
    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            if name not in productive and any(all(s in productive for s in a) for a in alts):
                productive.add(name)
                changed = True
    return productive


def naive_reduce(
    rules: dict[str, list[tuple[str, ...]]], terms: set[str], start: str
) -> tuple[dict[str, list[tuple[str, ...]]], set[str]] | None:
    """The productive rules reachable from ``start``, with their productive alternatives, and
    the terminals those use (``Grammar.normalise``'s reduction); None if ``start`` derives
    nothing."""
    productive = naive_productive(rules, terms)
    if start not in productive:
        return None
    kept = {n: [a for a in alts if all(s in productive for s in a)] for n, alts in rules.items()}
    reachable, todo = {start}, [start]
    while todo:
        for alt in kept[todo.pop()]:
            for sym in alt:
                if sym in rules and sym not in reachable:
                    reachable.add(sym)
                    todo.append(sym)
    used = {s for n in reachable for a in kept[n] for s in a if s in terms}
    return {n: kept[n] for n in reachable}, used


def naive_cfg_accepts(grammar: Any, text: bytes) -> bool:
    """Whether ``text`` is a sentence of the Grammar IR ``grammar`` (see the section comment).

    A least fixpoint over substrings, CYK style, with no parser at all: ``lexeme(t, i, j)`` is
    ``re.fullmatch(regex_to_pattern(t.regex), s[i:j])``; ``gap(i, j)`` says ``s[i:j]`` is a run of
    ignored lexemes; ``span[X][i]`` is the set of ``j`` such that ``X`` derives ``s[i:j]`` (gaps
    allowed between the lexemes of ``X``, not around them). Rules are re-applied to every start
    position until no span is added, so left recursion, ambiguity and empty rules need no care.
    Text that is not UTF-8 is rejected (every lexeme is a string of code points). Cubic in
    ``len(text)`` per rule and iteration: keep texts short (tens of characters).
    """
    import re

    from constrain.ir import regex_to_pattern

    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    n = len(s)
    terms, rules = _grammar_parts(grammar)
    compiled = {name: re.compile(regex_to_pattern(regex)) for name, regex in terms.items()}
    span: dict[str, list[set[int]]] = {}
    for name, pattern in compiled.items():
        span[name] = [
            {j for j in range(i, n + 1) if pattern.fullmatch(s[i:j])} for i in range(n + 1)
        ]
    gap: list[set[int]] = []
    for i in range(n + 1):
        reach, todo = {i}, [i]
        while todo:
            p = todo.pop()
            for name in grammar.ignore:
                for q in span[name][p]:
                    if q not in reach:
                        reach.add(q)
                        todo.append(q)
        gap.append(reach)
    at_end = grammar.ignore_at_end
    for name in rules:
        span[name] = [set() for _ in range(n + 1)]

    def ends(alt: tuple[str, ...], i: int) -> set[int]:
        out = {i}
        for k, sym in enumerate(alt):
            if at_end:  # gaps between the symbols (and around the text, below)
                starts = out if k == 0 else {b for a in out for b in gap[a]}
            else:  # ignore_at_end=False: a gap before each terminal, nowhere else
                starts = {b for a in out for b in gap[a]} if sym in terms else out
            out = {j for b in starts for j in span[sym][b]}
        return out

    changed = True
    while changed:
        changed = False
        for name, alts in rules.items():
            for i in range(n + 1):
                new = set().union(*(ends(alt, i) for alt in alts)) - span[name][i]
                if new:
                    span[name][i] |= new
                    changed = True
    if not at_end:
        return n in span[grammar.start][0]
    return any(n in gap[b] for a in gap[0] for b in span[grammar.start][a])


class NaiveCfgRecognizer:
    """Byte-level scannerless Earley recogniser of a Grammar IR: prefixes and sentences.

    No lexer: every terminal occurrence is read byte by byte with its own minimal DFA
    (``constrain.automata.dfa.compile_regex``, itself checked against ``re`` elsewhere). The
    grammar is augmented as ``$start -> $gap start``, each terminal ``t`` in a rule becomes
    ``t $gap``, and ``$gap -> | $gap I`` for every ignored terminal ``I`` (with
    ``ignore_at_end=False``: ``$start -> start`` and ``$gap t``). Alternatives that use
    an unproductive symbol are dropped first, so every item in an Earley set can be completed:

    - ``viable(text)``: some string starting with ``text`` is a sentence, iff the Earley set after
      ``text`` is non-empty (it holds a live DFA state of a terminal in progress, or a parse
      item; either can be completed);
    - ``accepts(text)``: the set after ``text`` holds ``$start -> $gap start .`` from origin 0.

    Charts are memoised per text (a chart extends its parent's by one byte), so calling
    ``viable`` for every token of a vocabulary after one prefix costs one step per token byte.
    """

    def __init__(self, grammar: Any) -> None:
        from constrain.automata.dfa import compile_regex

        terms, rules = _grammar_parts(grammar)
        self.dfas = {name: compile_regex(regex) for name, regex in terms.items()}
        productive = naive_productive(
            rules, {name for name, dfa in self.dfas.items() if bool(dfa.live[0])}
        )
        at_end = grammar.ignore_at_end
        aug: list[tuple[str, tuple[str, ...]]] = [
            ("$start", ("$gap", grammar.start) if at_end else (grammar.start,)),
            ("$gap", ()),
        ]
        # ignore_at_end=False: the gaps come before each terminal, never after the last
        aug += [("$gap", ("$gap", name)) for name in grammar.ignore if name in productive]
        for name, alts in rules.items():
            for alt in alts:
                if all(s in productive for s in alt):
                    gapped = (lambda t: (t, "$gap")) if at_end else (lambda t: ("$gap", t))
                    rhs = tuple(x for s in alt for x in (gapped(s) if s in terms else (s,)))
                    aug.append((name, rhs))
        self.rules = aug
        self.by_lhs: dict[str, list[int]] = {}
        for r, (lhs, _) in enumerate(aug):
            self.by_lhs.setdefault(lhs, []).append(r)
        self.terms = set(terms)
        self.start_ok = grammar.start in productive
        self._charts: dict[bytes, tuple[Any, ...]] = {}

    def _close(self, chart: tuple[Any, ...], k: int, items: set[Any], lex: set[Any]) -> None:
        """Predict and complete set ``k`` (``items``: (rule, dot, origin)) in place."""
        rules = self.rules
        todo = list(items)
        empty: set[str] = set()  # nonterminals completed from origin k: they derive ""

        def add(item: tuple[int, int, int]) -> None:
            if item not in items:
                items.add(item)
                todo.append(item)

        while todo:
            r, d, o = todo.pop()
            lhs, rhs = rules[r]
            if d == len(rhs):
                if o == k:
                    empty.add(lhs)
                source = items if o == k else chart[o][0]
                for r2, d2, o2 in list(source):
                    rhs2 = rules[r2][1]
                    if d2 < len(rhs2) and rhs2[d2] == lhs:
                        add((r2, d2 + 1, o2))
                continue
            sym = rhs[d]
            if sym in self.terms:
                lex.add((r, d, o, 0))
                if self.dfas[sym].accept[0]:
                    add((r, d + 1, o))
                continue
            for r2 in self.by_lhs.get(sym, ()):
                add((r2, 0, k))
            if sym in empty:
                add((r, d + 1, o))

    def chart(self, text: bytes) -> tuple[Any, ...]:
        """Return the Earley sets ``((items, lex_items), ...)`` after each byte of ``text``."""
        known = self._charts.get(text)
        if known is not None:
            return known
        if not text:
            items: set[Any] = {(0, 0, 0)} if self.start_ok else set()
            lex: set[Any] = set()
            self._close((), 0, items, lex)
            chart: tuple[Any, ...] = ((frozenset(items), frozenset(lex)),)
        else:
            parent = self.chart(text[:-1])
            k = len(text)
            items, lex = set(), set()
            for r, d, o, q in parent[-1][1]:
                dfa = self.dfas[self.rules[r][1][d]]
                q2 = dfa.step(q, text[-1])
                if q2 >= 0 and dfa.live[q2]:
                    lex.add((r, d, o, q2))
                    if dfa.accept[q2]:
                        items.add((r, d + 1, o))
            self._close(parent, k, items, lex)
            chart = (*parent, (frozenset(items), frozenset(lex)))
        self._charts[text] = chart
        return chart

    def viable(self, text: bytes) -> bool:
        """Whether some sentence starts with ``text``."""
        items, lex = self.chart(text)[-1]
        return bool(items or lex)

    def accepts(self, text: bytes) -> bool:
        """Whether ``text`` is a sentence."""
        return (0, len(self.rules[0][1]), 0) in self.chart(text)[-1][0]


@functools.lru_cache(maxsize=32)
def naive_cfg_recognizer(grammar: Any) -> NaiveCfgRecognizer:
    """Return the (shared, memoising) :class:`NaiveCfgRecognizer` of a Grammar IR."""
    return NaiveCfgRecognizer(grammar)


def naive_cfg_prefix_viable(grammar: Any, prefix: bytes) -> bool:
    """Whether some sentence of the Grammar IR ``grammar`` starts with the bytes ``prefix``."""
    return naive_cfg_recognizer(grammar).viable(prefix)


def naive_mask(
    vocab: Any,
    viable: Callable[[bytes], bool],
    complete: Callable[[bytes], bool],
    prefix: bytes,
) -> set[int]:
    """The allowed next tokens by definition: the oracle of every mask the engine computes.

    Token ``t`` (with bytes) is allowed iff ``viable(prefix + bytes(t))``; an EOS id iff
    ``complete(prefix)``; special tokens without bytes never are.
    """
    data = vocab.token_bytes.tobytes()
    indptr = vocab.token_indptr.tolist()
    out = {
        t
        for t in range(vocab.size)
        if indptr[t + 1] > indptr[t] and viable(prefix + data[indptr[t] : indptr[t + 1]])
    }
    if complete(prefix):
        out.update(int(e) for e in vocab.eos_ids)
    return out


def load_examples(path: Path) -> list[str]:
    """Examples of a corpus file, separated by lines holding only ``---`` (bytes kept exact)."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    assert text.endswith("\n"), f"{path} must end with a newline"
    return text[:-1].split("\n---\n")


def naive_grammar_sets(
    rules: Sequence[tuple[int, Sequence[int]]], num_nt: int, num_t: int
) -> tuple[list[bool], list[int], list[int], list[tuple[int, bool] | None]]:
    """Textbook fixpoints (oracle of ``grammar_sets_kernel``) over Python-int bitsets.

    ``rules``: (lhs, rhs) with rhs symbols >= 0 nonterminals, < 0 terminals (``-1 - t``).
    Returns nullable, FIRST of each nonterminal, FOLLOW of each terminal, and for every item
    (rules in order, ``len(rhs) + 1`` items each) with a terminal after the dot, FIRST and
    nullability of the rest of its rule after that terminal (None for other items).
    """

    def seq_first(seq: Sequence[int]) -> tuple[int, bool]:
        out = 0
        for s in seq:
            if s < 0:
                return out | (1 << (-1 - s)), False
            out |= first[s]
            if not nullable[s]:
                return out, False
        return out, True

    nullable = [False] * num_nt
    first = [0] * num_nt
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            if not nullable[lhs] and all(s >= 0 and nullable[s] for s in rhs):
                nullable[lhs] = changed = True
            f = first[lhs] | seq_first(rhs)[0]
            if f != first[lhs]:
                first[lhs], changed = f, True
    follow_nt = [0] * num_nt
    follow_t = [0] * num_t
    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            for k, s in enumerate(rhs):
                rest, empty = seq_first(rhs[k + 1 :])
                add = rest | (follow_nt[lhs] if empty else 0)
                target = follow_t if s < 0 else follow_nt
                idx = -1 - s if s < 0 else s
                if add & ~target[idx]:
                    target[idx] |= add
                    changed = True
    items: list[tuple[int, bool] | None] = []
    for _, rhs in rules:
        for k, s in enumerate(rhs):
            items.append(seq_first(rhs[k + 1 :]) if s < 0 else None)
        items.append(None)
    return nullable, first, follow_t, items


def naive_greedy_accepts(grammar: Any, text: str) -> bool:
    """Whether ``text`` is a sentence of a Grammar IR under greedy lexing (``Grammar.greedy``).

    Greedy boundaries are deterministic: from each lexeme start the plain lexer runs while the
    next byte keeps some terminal alive, and the lexeme must then be accepted; an ignored-only
    lexeme may not be followed by one that only those ignored terminals could start. A marker
    byte (``\x01``) is written after each lexeme and appended to every terminal's language, and
    :func:`naive_cfg_accepts` decides the marked text: a sentence iff some derivation has
    exactly the greedy boundaries.
    """
    import dataclasses

    from constrain.automata.lexer import grammar_lexer
    from constrain.ir import Concat, Grammar, Literal, Terminal

    # lexed with Lark's %ignore rule: ignore_at_end=False is decided here, not by its rewrite
    g, lexer = grammar_lexer(dataclasses.replace(grammar, ignore_at_end=True))
    data = text.encode()
    live = (lexer.alive_bits != 0).any(axis=1)
    ignored = {lexer.names.index(n) for n in g.ignore}
    marked = bytearray()
    previous: set[int] = set()  # the terminals of the last lexeme, if all ignored
    i = 0
    while i < len(data):
        first = int(lexer.trans[0, lexer.byte_class[data[i]]])
        if previous and first >= 0 and set(_set_bits(lexer.alive_bits[first])) <= previous:
            return False  # an ignored terminal right after itself
        s, j = 0, i
        while j < len(data):
            nxt = int(lexer.trans[s, lexer.byte_class[data[j]]])
            if nxt < 0 or not live[nxt]:
                break
            s, j = nxt, j + 1
        if j == i or not (lexer.accept_bits[s] != 0).any():
            return False
        accepted = set(_set_bits(lexer.accept_bits[s]))
        previous = accepted if accepted <= ignored else set()
        marked += data[i:j] + b"\x01"
        i = j
    if previous and not grammar.ignore_at_end:
        return False  # the text ends in an ignored lexeme
    terminals = tuple(Terminal(t.name, Concat((t.regex, Literal("\x01")))) for t in g.terminals)
    plain = Grammar(g.rules, terminals, g.start, g.ignore)
    return naive_cfg_accepts(plain, bytes(marked))


def _set_bits(row: Any) -> list[int]:
    return [w * 64 + b for w, word in enumerate(row.tolist()) for b in range(64) if word >> b & 1]


def bpe_encode(pieces: Sequence[int], merge: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """Run BPE over ``pieces``: merge the lowest-ranked adjacent pair, leftmost first, till none.

    ``merge[(x, y)] = (rank, result)`` (``CanonicalBpe.merge``). The naive definition the
    canonical-tokenization kernels are tested against.
    """
    out = list(pieces)
    while len(out) > 1:
        best: tuple[int, int, int] | None = None
        for i in range(len(out) - 1):
            hit = merge.get((out[i], out[i + 1]))
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], i, hit[1])
        if best is None:
            break
        _, i, result = best
        out[i : i + 2] = [result]
    return out
