"""Stage 1: the intermediate representation every front end produces.

- :mod:`constrain.ir.nodes`: the regex IR of terminals (:class:`CharSet`, :class:`Literal`, ...);
- :mod:`constrain.ir.grammar`: :class:`Grammar`, :class:`Terminal`, :class:`Rule`;
- :mod:`constrain.ir.casefold`: Python's ``re.IGNORECASE`` case folding;
- :mod:`constrain.ir.printer`: the IR printed back as Python ``re`` patterns and Lark text.

The IR imports no front end; ``Grammar.from_regex`` and the other ``from_*`` constructors import
theirs when called.
"""

from constrain.ir.casefold import ignorecase_charset, ignorecase_literal
from constrain.ir.grammar import TOKEN_ALIGNMENTS, Grammar, Rule, Terminal, is_terminal_name
from constrain.ir.nodes import (
    ANY_CHAR,
    ANY_SPECIAL,
    EMPTY,
    MAX_SPECIAL_TOKENS,
    NOTHING,
    SPECIAL_BASE,
    Alt,
    Automaton,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
    matches_empty,
    non_empty,
    special_placeholder,
    special_token,
    special_token_id,
)
from constrain.ir.printer import regex_to_pattern

__all__ = [
    "TOKEN_ALIGNMENTS",
    "ANY_CHAR",
    "ANY_SPECIAL",
    "EMPTY",
    "MAX_SPECIAL_TOKENS",
    "NOTHING",
    "SPECIAL_BASE",
    "Alt",
    "Automaton",
    "CharSet",
    "Complement",
    "Concat",
    "Grammar",
    "Intersect",
    "Literal",
    "Regex",
    "Repeat",
    "Rule",
    "Terminal",
    "ignorecase_charset",
    "ignorecase_literal",
    "is_terminal_name",
    "matches_empty",
    "non_empty",
    "regex_to_pattern",
    "special_placeholder",
    "special_token",
    "special_token_id",
]
