"""Stage 1: composing grammars, the building blocks of embedded sub-grammars and free text.

Front ends that nest one language inside another (structural tags, ``%json`` in Lark) build
their grammar from these pieces:

- :func:`embed`: a grammar's rules and terminals renamed under a prefix, so that several
  grammars can live in one; its ``%ignore`` terminals become explicit optional symbols before
  each of its terminals and at its end, so they stay inside the embedded part;
- :func:`splice`: a grammar whose placeholder symbols are replaced by whole embedded grammars
  (``%json``, ``%grammar`` in Lark), its own ``%ignore`` kept out of them;
- :func:`without_trailing`: the same language less the strings that end in given characters
  (a JSON value without the layout whitespace after its last token);
- :func:`map_regex`: a bottom-up rewrite of a regex IR tree;
- :func:`free_text` and :func:`until_first`: the regular languages of free text, "any text not
  containing these strings" and "free text up to the first occurrence of a trigger".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from constrain.ir import (
    ANY_CHAR,
    ANY_SPECIAL,
    SPECIAL_BASE,
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Grammar,
    Intersect,
    Literal,
    Regex,
    Repeat,
    Rule,
    Terminal,
    special_placeholder,
    special_token,
    special_token_id,
)

__all__ = [
    "ANY_TEXT",
    "Embedded",
    "contains_any",
    "embed",
    "free_text",
    "map_regex",
    "map_specials",
    "splice",
    "until_first",
    "with_special_names",
    "without_trailing",
]

ANY_TEXT: Regex = Repeat(ANY_CHAR, 0, None)
"""Every string of valid characters, the empty one included."""


@dataclass(frozen=True, slots=True)
class Embedded:
    """A grammar's rules and terminals renamed for inclusion in a larger grammar.

    Parameters
    ----------
    start : str
        The rule that derives the embedded language.
    rules : tuple of Rule
        Its rules, renamed.
    terminals : tuple of Terminal
        Its terminals, renamed.
    token_budgets : tuple of (str, int)
        Its terminals' token budgets (:attr:`Grammar.token_budgets`), renamed.
    token_aligned : tuple of (str, str)
        Its token-aligned terminals (:attr:`Grammar.token_aligned`), renamed.
    """

    start: str
    rules: tuple[Rule, ...]
    terminals: tuple[Terminal, ...]
    token_budgets: tuple[tuple[str, int], ...] = ()
    token_aligned: tuple[tuple[str, str], ...] = ()


def embed(grammar: Grammar, prefix: str) -> Embedded:
    """Return the rules and terminals of ``grammar`` renamed under ``prefix``.

    Rule ``r`` becomes ``prefix + r`` and terminal ``T`` becomes ``prefix.upper() + T``, so the
    Lark naming conventions still hold; the caller picks a prefix no other part uses. Ignored
    terminals are made explicit: an optional run of them before every terminal of every
    alternative and once after the start rule, which is where ``%ignore`` lets them appear, so
    they do not leak into the grammar the part is embedded in.

    Parameters
    ----------
    grammar : Grammar
        The grammar to embed (normalised or not).
    prefix : str
        A lowercase prefix, such as ``"json0_"``.

    Returns
    -------
    Embedded
        The renamed parts; ``start`` derives the language of ``grammar``.
    """
    terms = grammar.terminal_map()
    upper = prefix.upper()
    names = {t: upper + t for t in terms}
    names.update({r.name: prefix + r.name for r in grammar.rules})
    rules = [
        Rule(names[r.name], tuple(tuple(names[s] for s in alt) for alt in r.alternatives))
        for r in grammar.rules
    ]
    start = names[grammar.start]
    if grammar.ignore:
        ignored = [names[t] for t in grammar.ignore]
        runs = not (grammar.greedy and not grammar.ignore_at_end)
        rules = _explicit_ignore(
            rules, {names[t] for t in terms}, ignored, prefix + "ignored_", runs=runs
        )
        if grammar.ignore_at_end:  # else nothing ignored after the part's last lexeme
            rules.append(Rule(prefix + "top_", ((start, prefix + "ignored_"),)))
            start = prefix + "top_"
    terminals = tuple(Terminal(names[t.name], t.regex) for t in grammar.terminals)
    budgets = tuple((names[name], limit) for name, limit in grammar.token_budgets)
    aligned = tuple((names[name], kind) for name, kind in grammar.token_aligned)
    return Embedded(start, tuple(rules), terminals, budgets, aligned)


def splice(grammar: Grammar, parts: Mapping[str, Grammar]) -> Grammar:
    """Return ``grammar`` with placeholder symbols replaced by whole embedded grammars.

    The rules of ``grammar`` use the keys of ``parts`` as symbols (neither rules nor terminals
    of ``grammar``); each occurrence derives the language of that part, embedded with
    :func:`embed` under a prefix no name of ``grammar`` starts with, so the part keeps its own
    layout. The ``%ignore`` terminals of ``grammar`` are made explicit around its own lexemes
    and around each part (an optional run before each and one at the end): from the outside a
    part is one lexeme, with the outer layout allowed before and after it, never inside it.

    Parameters
    ----------
    grammar : Grammar
        The enclosing grammar, not normalised (it uses the placeholders).
    parts : mapping of str to Grammar
        The grammar each placeholder stands for.

    Returns
    -------
    Grammar
        The composed grammar, not normalised, with no ``ignore``; its start rule keeps its
        name, and the parts' warnings are added to its own.
    """
    taken = {r.name for r in grammar.rules} | {t.name for t in grammar.terminals}
    lowered = {name.lower() for name in taken}
    starts: dict[str, str] = {}
    rules: list[Rule] = []
    terminals: list[Terminal] = list(grammar.terminals)
    budgets = list(grammar.token_budgets)
    aligned = list(grammar.token_aligned)
    warnings = list(grammar.warnings)
    special_names = list(grammar.special_names)
    k = 0
    for placeholder, part in parts.items():
        while any(name.startswith(f"e{k}_") for name in lowered):
            k += 1
        embedded = embed(with_special_names(part, special_names), f"e{k}_")
        k += 1
        starts[placeholder] = embedded.start
        rules.extend(embedded.rules)
        terminals.extend(embedded.terminals)
        budgets.extend(embedded.token_budgets)
        aligned.extend(embedded.token_aligned)
        warnings.extend(part.warnings)
    outer = [
        Rule(r.name, tuple(tuple(starts.get(s, s) for s in alt) for alt in r.alternatives))
        for r in grammar.rules
    ]
    start = grammar.start
    if grammar.ignore:
        ignore_rule = _fresh("ignored_", taken)
        body = _fresh(start + "_body_", taken | {ignore_rule})
        outer = [
            Rule(
                body if r.name == start else r.name,
                tuple(tuple(body if s == start else s for s in alt) for alt in r.alternatives),
            )
            for r in outer
        ]
        lexemes = {t.name for t in grammar.terminals} | set(starts.values())
        runs = not (grammar.greedy and not grammar.ignore_at_end)
        outer = _explicit_ignore(outer, lexemes, grammar.ignore, ignore_rule, runs=runs)
        # the run after the last lexeme, unless the grammar keeps ignored lexemes off the end
        outer.append(Rule(start, ((body, ignore_rule) if grammar.ignore_at_end else (body,),)))
    meta = {**grammar._meta, "warnings": tuple(warnings)} if warnings else grammar._meta
    return Grammar(
        rules=(*outer, *rules),
        terminals=tuple(terminals),
        start=start,
        greedy=grammar.greedy,
        ignore_at_end=grammar.ignore_at_end,
        special_names=tuple(special_names),
        token_budgets=tuple(budgets),
        token_aligned=tuple(aligned),
        _meta=meta,
    )


def with_special_names(grammar: Grammar, names: list[str]) -> Grammar:
    """Return ``grammar`` with its special-token name placeholders renumbered into ``names``.

    Each of the grammar's ``special_names`` is looked up in ``names`` (and appended when
    missing); the placeholders of its terminals are rewritten to the new indices, so that
    several grammars can share one name table (the composed grammar's).

    Parameters
    ----------
    grammar : Grammar
        A grammar, possibly with ``special_names``.
    names : list of str
        The shared name table, extended in place.

    Returns
    -------
    Grammar
        ``grammar`` itself when it names no special token; else a copy whose placeholders index
        ``names`` and whose ``special_names`` is ``tuple(names)``.
    """
    if not grammar.special_names:
        return grammar
    index: dict[int, int] = {}
    for k, name in enumerate(grammar.special_names):
        if name not in names:
            names.append(name)
        index[k] = names.index(name)

    def rewrite(kind: str, k: int) -> CharSet:
        return special_placeholder(index.get(k, k)) if kind == "name" else special_token(k)

    terminals = tuple(Terminal(t.name, map_specials(t.regex, rewrite)) for t in grammar.terminals)
    return dataclasses.replace(grammar, terminals=terminals, special_names=tuple(names))


def map_specials(node: Regex, rewrite: Callable[[str, int], CharSet]) -> Regex:
    """Return ``node`` with every special-token pseudo character replaced by a set.

    Parameters
    ----------
    node : Regex
        A regex IR tree (automaton edges included).
    rewrite : callable
        Called as ``rewrite(kind, k)`` for each pseudo character, ``kind`` being ``"id"`` (a
        token id ``k``) or ``"name"`` (name placeholder ``k``, :func:`~constrain.ir.
        special_placeholder`); returns the set that replaces it.

    Returns
    -------
    Regex
        The rewritten tree (``node`` itself when it has no pseudo character).
    """

    def charset(cs: CharSet) -> CharSet:
        if not cs.ranges or cs.ranges[-1][1] < SPECIAL_BASE:
            return cs
        out = cs.intersect(ANY_CHAR.union(CharSet(((0xD800, 0xDFFF),))))
        for lo, hi in cs.intersect(ANY_SPECIAL).ranges:
            for cp in range(lo, hi + 1):
                kind = special_token_id(cp)
                assert kind is not None
                out = out.union(rewrite(*kind))
        return out

    def leaf(item: Regex) -> Regex:
        if isinstance(item, CharSet):
            return charset(item)
        if isinstance(item, Automaton):
            edges = tuple((src, charset(cs), dst) for src, cs, dst in item.edges)
            return Automaton(item.num_states, edges, item.start, item.accept)
        return item

    return map_regex(node, leaf)


def _explicit_ignore(
    rules: Sequence[Rule],
    lexemes: set[str],
    ignore: Sequence[str],
    ignore_rule: str,
    *,
    runs: bool = True,
) -> list[Rule]:
    """Return ``rules`` with an optional run of ``ignore`` before every lexeme symbol.

    The run is the new rule ``ignore_rule`` (also returned); the caller adds the run after the
    start rule. With ``runs=False`` it is at most one ignored lexeme (``ignore_at_end=False``
    under greedy lexing, as :func:`~constrain.automata.lexer.ignored_as_prefixes`).
    """
    out: list[Rule] = []
    for rule in rules:
        alts = []
        for alt in rule.alternatives:
            symbols: list[str] = []
            for sym in alt:
                if sym in lexemes:
                    symbols.append(ignore_rule)
                symbols.append(sym)
            alts.append(tuple(symbols))
        out.append(Rule(rule.name, tuple(alts)))
    loops = tuple((t, ignore_rule) if runs else (t,) for t in dict.fromkeys(ignore))
    out.append(Rule(ignore_rule, ((), *loops)))
    return out


def _fresh(base: str, taken: set[str]) -> str:
    """Return ``base``, or ``base`` with a number added, whichever no name in ``taken`` is."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def without_trailing(grammar: Grammar, chars: CharSet) -> Grammar:
    """Return the grammar of the strings of ``grammar`` that do not end in one of ``chars``.

    A non-empty string ends where its last non-empty lexeme ends, so every rule that can come
    last gets a *final* copy whose last non-nullable symbol is final too, and a final terminal
    is the terminal intersected with "does not end in ``chars``". Nullable symbols after it are
    dropped (they derive the empty string there). The grammar must have no ignored terminals
    (they could come last); terminals must not match the empty string.

    Parameters
    ----------
    grammar : Grammar
        A grammar with no ``ignore`` and no nullable terminal (a normalised one).
    chars : CharSet
        The characters the strings must not end with.

    Returns
    -------
    Grammar
        The restricted grammar (start rule ``<start>_final_``), not normalised.

    Raises
    ------
    ValueError
        If the grammar has ignored terminals.
    """
    if grammar.ignore:
        raise ValueError("without_trailing: the grammar has %ignore terminals")
    rules = grammar.rule_map()
    nullable = _nullable_rules(grammar.rules)
    not_ending = Complement(Concat((ANY_TEXT, chars)))
    final: dict[str, str] = {}
    new_rules: list[Rule] = []
    new_terms: list[Terminal] = []
    pending = [grammar.start]
    final[grammar.start] = grammar.start + "_final_"
    while pending:
        name = pending.pop()
        alts: list[tuple[str, ...]] = []
        for alt in rules[name].alternatives:
            for i in range(len(alt) - 1, -1, -1):
                sym = alt[i]
                if sym not in final:
                    final[sym] = sym + ("_final_" if sym in rules else "_FINAL_")
                    if sym in rules:
                        pending.append(sym)
                    else:
                        regex = grammar.terminal_map()[sym].regex
                        new_terms.append(Terminal(final[sym], Intersect((regex, not_ending))))
                alts.append((*alt[:i], final[sym]))
                if sym not in nullable:
                    break
            else:
                alts.append(())
        new_rules.append(Rule(final[name], tuple(dict.fromkeys(alts))))
    limits = dict(grammar.token_budgets)  # a budgeted terminal's final copy keeps its budget
    copies = tuple((final[name], limits[name]) for name in limits if name in final)
    kinds = dict(grammar.token_aligned)  # and a token-aligned one its alignment
    aligned = tuple((final[name], kinds[name]) for name in kinds if name in final)
    return Grammar(
        rules=(*new_rules, *grammar.rules),
        terminals=(*grammar.terminals, *new_terms),
        start=final[grammar.start],
        special_names=grammar.special_names,
        token_budgets=grammar.token_budgets + copies,
        token_aligned=grammar.token_aligned + aligned,
        _meta=grammar._meta,
    )


def _nullable_rules(rules: Sequence[Rule]) -> set[str]:
    """Return the names of the rules that derive the empty string (terminals never do)."""
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.name not in nullable and any(
                all(s in nullable for s in alt) for alt in rule.alternatives
            ):
                nullable.add(rule.name)
                changed = True
    return nullable


def map_regex(node: Regex, rewrite: Callable[[Regex], Regex]) -> Regex:
    """Return ``node`` with ``rewrite`` applied bottom-up to every composite node and leaf.

    :class:`~constrain.ir.Automaton` nodes are passed to ``rewrite`` whole.
    """
    if isinstance(node, (Concat, Alt, Intersect)):
        node = type(node)(tuple(map_regex(i, rewrite) for i in node.items))
    elif isinstance(node, Repeat):
        node = Repeat(map_regex(node.item, rewrite), node.min, node.max)
    elif isinstance(node, Complement):
        node = Complement(map_regex(node.item, rewrite))
    return rewrite(node)


def _any_of(strings: Iterable[str]) -> Regex:
    items = tuple(Literal(s) for s in dict.fromkeys(strings))
    return items[0] if len(items) == 1 else Alt(items)


def contains_any(strings: Iterable[str]) -> Regex:
    """Return the language of the texts that contain at least one of ``strings``."""
    return Concat((ANY_TEXT, _any_of(strings), ANY_TEXT))


def free_text(excluded: Iterable[str], max_chars: int | None = None) -> Regex:
    """Return the texts (the empty one included) that contain none of ``excluded``.

    Parameters
    ----------
    excluded : iterable of str
        Non-empty strings that must not occur.
    max_chars : int, optional
        At most this many characters (code points).

    Returns
    -------
    Regex
        The language, as regex IR.
    """
    strings = [s for s in excluded if s]
    text = ANY_TEXT if max_chars is None else Repeat(ANY_CHAR, 0, max_chars)
    if not strings:
        return text
    return Intersect((text, Complement(contains_any(strings))))


def until_first(
    trigger: str, triggers: Sequence[str], excluded: Sequence[str], max_chars: int | None = None
) -> Regex:
    """Return free text up to and including the first trigger found, when it is ``trigger``.

    The text ``w + trigger`` is accepted when no trigger ends before its end (the scan stops at
    the first trigger it completes), no longer trigger ending with ``trigger`` ends there too
    (the longest trigger ending at a position wins) and no excluded string occurs in it.

    Parameters
    ----------
    trigger : str
        The trigger that ends the text (non-empty).
    triggers : sequence of str
        Every trigger scanned for (``trigger`` among them).
    excluded : sequence of str
        Strings that must not occur in the text, trigger included.
    max_chars : int, optional
        At most this many characters of free text before the trigger.

    Returns
    -------
    Regex
        The language, as regex IR.
    """
    free = ANY_TEXT if max_chars is None else Repeat(ANY_CHAR, 0, max_chars)
    parts: list[Regex] = [
        Concat((free, Literal(trigger))),
        Complement(Concat((ANY_TEXT, _any_of(triggers), ANY_CHAR, ANY_TEXT))),
    ]
    longer = [t for t in triggers if len(t) > len(trigger) and t.endswith(trigger)]
    if longer:
        parts.append(Complement(Concat((ANY_TEXT, _any_of(longer)))))
    strings = [s for s in excluded if s]
    if strings:
        parts.append(Complement(contains_any(strings)))
    return Intersect(tuple(parts))
