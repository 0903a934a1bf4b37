"""Stage 1: token attributes in Lark text: llguidance's ``name[max_tokens=N]:`` and alignment.

llguidance's Lark dialect bounds a lexeme's tokens with an attribute on its definition::

    start: "<think>" thought "</think>" ANSWER
    thought[max_tokens=256]: /[^<]+/       # a rule that is one lexeme
    ANSWER[max_tokens=16]: /[0-9]+/        # a terminal

constrain also reads ``token_end`` (the lexeme ends where a token ends) and ``one_token`` (it is
also the rest of the one token it starts in), :attr:`Grammar.token_aligned
<constrain.ir.Grammar.token_aligned>`, alone or with a budget: ``FREE[max_tokens=8, token_end]``.

:func:`strip_budgets` blanks the attributes out (Lark's loader does not know them; the text
keeps its lines and columns) and :func:`apply_budgets` puts them on the parsed grammar as
:attr:`Grammar.token_budgets <constrain.ir.Grammar.token_budgets>` (counted by the matcher,
:mod:`constrain.token_budgets`) and ``token_aligned``. A terminal gets the attributes itself. A
rule must be a single lexeme, one terminal and nothing else (as llguidance's attributed rules
are); it gets a copy of that terminal of its own, so the terminal's other uses keep none. Other
attributes (``stop``, ``suffix``, ``temperature``) are refused with their position.
"""

from __future__ import annotations

import dataclasses
import re

from constrain.frontends.lark_terminals import error_at_offset
from constrain.ir import TOKEN_ALIGNMENTS, Grammar, Rule, Terminal

__all__ = ["Attributes", "apply_budgets", "strip_budgets"]

# A definition head with attributes: NAME[...] before its colon (and an optional priority).
_ATTRIBUTED = re.compile(r"^([ \t]*[?!]?)(\w+)(\[[^\]\n]*\])(?=[ \t]*(?:\.-?\d+)?[ \t]*:)", re.M)
_BUDGET = re.compile(r"max_tokens[ \t]*=[ \t]*(\d+)")
_KINDS = {spelling: kind for kind, spelling in TOKEN_ALIGNMENTS.items()}

Attributes = tuple[int | None, str | None, int]
"""A definition's token budget (or None), its token alignment (or None) and its offset."""


def strip_budgets(text: str) -> tuple[str, dict[str, Attributes]]:
    """Return the text without its ``[...]`` attributes, and ``{name: attributes}``.

    Raises
    ------
    LarkGrammarError
        For another attribute, a budget below 1, or a name given two attribute lists.
    """
    found: dict[str, Attributes] = {}
    pieces: list[str] = []
    copied = 0
    for m in _ATTRIBUTED.finditer(text):
        name, attribute, at = m[2], m[3], m.start(3)
        limit: int | None = None
        kind: str | None = None
        for item in attribute[1:-1].split(","):
            budget = _BUDGET.fullmatch(item.strip())
            if budget is not None and limit is None:
                limit = int(budget[1])
            elif item.strip() in _KINDS and kind is None:
                kind = _KINDS[item.strip()]
            else:
                raise error_at_offset(
                    f"unknown or repeated attribute {item.strip()!r} on {name!r}: constrain reads "
                    "max_tokens=N (a token budget), token_end and one_token (token alignment); "
                    "llguidance's stop, suffix and temperature are not supported",
                    text,
                    at,
                )
        if limit is not None and limit < 1:
            raise error_at_offset(
                f"{name}[max_tokens={limit}]: a budget is at least 1 token (0 is no text at "
                "all: leave the lexeme out)",
                text,
                at,
            )
        if name in found:
            raise error_at_offset(f"{name!r} has two attribute lists", text, at)
        found[name] = (limit, kind, at)
        pieces += [text[copied:at], " " * len(attribute)]
        copied = m.end()
    pieces.append(text[copied:])
    return "".join(pieces), found


def apply_budgets(grammar: Grammar, found: dict[str, Attributes], text: str) -> Grammar:
    """Return ``grammar`` (not normalised) with the attributes :func:`strip_budgets` found.

    Raises
    ------
    LarkGrammarError
        For attributes on a rule that is not one terminal, or on an ignored terminal.
    """
    if not found:
        return grammar
    terms = grammar.terminal_map()
    rules = {r.name: r for r in grammar.rules}
    taken = set(terms) | set(rules)
    new_terms: list[Terminal] = []
    out: list[tuple[str, int]] = []
    aligned: list[tuple[str, str]] = []

    def attach(term: str, limit: int | None, kind: str | None) -> None:
        if limit is not None:
            out.append((term, limit))
        if kind is not None:
            aligned.append((term, kind))

    for name, (limit, kind, at) in found.items():
        shown = ", ".join(
            [f"max_tokens={limit}"] * (limit is not None)
            + ([TOKEN_ALIGNMENTS[kind]] if kind is not None else [])
        )
        if name in terms:
            if name in grammar.ignore:
                raise error_at_offset(f"{name} is %ignore-d: it takes no [{shown}]", text, at)
            attach(name, limit, kind)
            continue
        rule = rules.get(name)
        if rule is None:
            raise error_at_offset(
                f"{name}[{shown}]: no rule or terminal {name!r} is left after Lark's "
                "compile (one that Lark inlined or dropped: make it a plain rule or a terminal)",
                text,
                at,
            )
        alts = rule.alternatives
        if len(alts) != 1 or len(alts[0]) != 1 or alts[0][0] not in terms:
            raise error_at_offset(
                f"{name}[{shown}]: a rule with token attributes must be one lexeme (a single "
                "terminal, string or regex, and nothing else), or put them on a terminal",
                text,
                at,
            )
        base = f"{name.upper()}_{'BUDGET' if limit is not None else 'ALIGNED'}"
        copy = next(f"{base}{k or ''}" for k in range(len(taken) + 1)
                    if f"{base}{k or ''}" not in taken)  # fmt: skip
        taken.add(copy)
        new_terms.append(Terminal(copy, terms[alts[0][0]].regex))
        rules[name] = Rule(name, ((copy,),))
        attach(copy, limit, kind)
    return dataclasses.replace(
        grammar,
        rules=tuple(rules[r.name] for r in grammar.rules),
        terminals=(*grammar.terminals, *new_terms),
        token_budgets=(*grammar.token_budgets, *out),
        token_aligned=(*grammar.token_aligned, *aligned),
    )
