"""Stage 1: token budgets in Lark text, llguidance's ``name[max_tokens=N]:`` attribute.

llguidance's Lark dialect bounds a lexeme's tokens with an attribute on its definition::

    start: "<think>" thought "</think>" ANSWER
    thought[max_tokens=256]: /[^<]+/       # a rule that is one lexeme
    ANSWER[max_tokens=16]: /[0-9]+/        # a terminal

:func:`strip_budgets` blanks the attributes out (Lark's loader does not know them; the text
keeps its lines and columns) and :func:`apply_budgets` puts them on the parsed grammar as
:attr:`Grammar.token_budgets <constrain.ir.Grammar.token_budgets>`, counted by the matcher
(:mod:`constrain.token_budgets`). A terminal gets the budget itself. A rule must be a single
lexeme, one terminal and nothing else (as llguidance's attributed rules are); it gets a copy of
that terminal of its own, so the terminal's other uses stay unbounded. Other attributes
(``stop``, ``suffix``, ``temperature``) are refused with their position.
"""

from __future__ import annotations

import dataclasses
import re

from constrain.frontends.lark_terminals import error_at_offset
from constrain.ir import Grammar, Rule, Terminal

__all__ = ["apply_budgets", "strip_budgets"]

# A definition head with attributes: NAME[...] before its colon (and an optional priority).
_ATTRIBUTED = re.compile(r"^([ \t]*[?!]?)(\w+)(\[[^\]\n]*\])(?=[ \t]*(?:\.-?\d+)?[ \t]*:)", re.M)
_BUDGET = re.compile(r"\[[ \t]*max_tokens[ \t]*=[ \t]*(\d+)[ \t]*\]")


def strip_budgets(text: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """Return the text without ``[max_tokens=N]`` attributes, and ``{name: (N, offset)}``.

    Raises
    ------
    LarkGrammarError
        For another attribute, a budget below 1, or a name given two budgets.
    """
    budgets: dict[str, tuple[int, int]] = {}
    pieces: list[str] = []
    copied = 0
    for m in _ATTRIBUTED.finditer(text):
        name, attribute, at = m[2], m[3], m.start(3)
        budget = _BUDGET.fullmatch(attribute)
        if budget is None:
            raise error_at_offset(
                f"unknown attribute {attribute} on {name!r}: constrain reads [max_tokens=N] (a "
                "token budget); llguidance's stop, suffix and temperature are not supported",
                text,
                at,
            )
        limit = int(budget[1])
        if limit < 1:
            raise error_at_offset(
                f"{name}[max_tokens={limit}]: a budget is at least 1 token (0 is no text at "
                "all: leave the lexeme out)",
                text,
                at,
            )
        if name in budgets:
            raise error_at_offset(f"{name!r} has two token budgets", text, at)
        budgets[name] = (limit, at)
        pieces += [text[copied:at], " " * len(attribute)]
        copied = m.end()
    pieces.append(text[copied:])
    return "".join(pieces), budgets


def apply_budgets(grammar: Grammar, budgets: dict[str, tuple[int, int]], text: str) -> Grammar:
    """Return ``grammar`` (not normalised) with the budgets :func:`strip_budgets` found.

    Raises
    ------
    LarkGrammarError
        For a budget on a rule that is not one terminal, or on an ignored terminal.
    """
    if not budgets:
        return grammar
    terms = grammar.terminal_map()
    rules = {r.name: r for r in grammar.rules}
    taken = set(terms) | set(rules)
    new_terms: list[Terminal] = []
    out: list[tuple[str, int]] = []
    for name, (limit, at) in budgets.items():
        if name in terms:
            if name in grammar.ignore:
                raise error_at_offset(f"{name} is %ignore-d: no budget can bound it", text, at)
            out.append((name, limit))
            continue
        rule = rules.get(name)
        if rule is None:
            raise error_at_offset(
                f"{name}[max_tokens={limit}]: no rule or terminal {name!r} is left after Lark's "
                "compile (one that Lark inlined or dropped: make it a plain rule or a terminal)",
                text,
                at,
            )
        alts = rule.alternatives
        if len(alts) != 1 or len(alts[0]) != 1 or alts[0][0] not in terms:
            raise error_at_offset(
                f"{name}[max_tokens={limit}]: a rule with a token budget must be one lexeme (a "
                "single terminal, string or regex, and nothing else), or put the budget on a "
                "terminal",
                text,
                at,
            )
        copy = next(f"{name.upper()}_BUDGET{k or ''}" for k in range(len(taken) + 1)
                    if f"{name.upper()}_BUDGET{k or ''}" not in taken)  # fmt: skip
        taken.add(copy)
        new_terms.append(Terminal(copy, terms[alts[0][0]].regex))
        rules[name] = Rule(name, ((copy,),))
        out.append((copy, limit))
    return dataclasses.replace(
        grammar,
        rules=tuple(rules[r.name] for r in grammar.rules),
        terminals=(*grammar.terminals, *new_terms),
        token_budgets=(*grammar.token_budgets, *out),
    )
