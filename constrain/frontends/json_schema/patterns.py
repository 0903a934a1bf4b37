"""Stage 1 (JSON Schema): ECMAScript ``pattern`` and ``patternProperties`` as regular languages.

A JSON Schema pattern matches a string when it matches *somewhere* in it (search semantics),
with ECMAScript syntax; :func:`pattern_regex` reads it into regex IR through the regex front
end. :func:`pattern_dfa` compiles one into a DFA, for the questions the front end asks about
property names while it builds the grammar (does this declared name match that pattern?).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from constrain.errors import JsonSchemaError, RegexError
from constrain.frontends.regex import parse_regex
from constrain.ir import Regex

if TYPE_CHECKING:
    from constrain.automata.byte_dfa import Dfa

__all__ = ["check_pattern", "pattern_dfa", "pattern_regex"]


def pattern_regex(pattern: Any, pointer: str) -> Regex:
    """Return the IR of the strings that contain a match of an ECMAScript ``pattern``.

    Parameters
    ----------
    pattern : Any
        The keyword's value.
    pointer : str
        JSON pointer of the keyword, for the error.

    Returns
    -------
    Regex
        The strings with a match (search semantics).

    Raises
    ------
    JsonSchemaError
        If ``pattern`` is not a string or uses syntax the regex front end does not support.
    """
    if not isinstance(pattern, str):
        raise JsonSchemaError(f"pattern must be a string, got {json.dumps(pattern)}", pointer)
    try:
        return parse_regex(pattern, flavor="ecmascript", search=True)
    except RegexError as err:
        raise JsonSchemaError(f"unsupported pattern {pattern!r}: {err}", pointer) from err


def check_pattern(pattern: Any, pointer: str) -> Regex:
    """Return the search-semantics IR of a ``patternProperties`` key (validated).

    Parameters
    ----------
    pattern : Any
        The key.
    pointer : str
        JSON pointer of the ``patternProperties`` keyword, for the error.

    Returns
    -------
    Regex
        The property names the pattern matches.

    Raises
    ------
    JsonSchemaError
        If the key is not a string or not a supported pattern.
    """
    if not isinstance(pattern, str):
        raise JsonSchemaError("patternProperties keys must be strings", pointer)
    return pattern_regex(pattern, pointer)


@functools.lru_cache(maxsize=4096)
def pattern_dfa(pattern: str) -> Dfa:
    """Return the DFA of an ECMAScript pattern with search semantics (cached).

    Parameters
    ----------
    pattern : str
        The pattern.

    Returns
    -------
    Dfa
        Its automaton over UTF-8 bytes (``pattern_dfa(p).matches(name.encode())``).

    Raises
    ------
    JsonSchemaError
        If the pattern is not supported.
    """
    # Deferred: building a grammar must not import numba (test_front_ends_are_light).
    from constrain.automata.dfa import compile_regex

    return compile_regex(pattern_regex(pattern, "#"))
