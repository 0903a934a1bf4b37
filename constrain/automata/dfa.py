"""Stage 3: regex IR to minimal byte-level DFAs (:func:`compile_regex`).

The compiler joins the two halves of regular-language construction, which call each other
through the function that :func:`build_dfa` hands the NFA builder:

- :mod:`constrain.automata.nfa` builds the Thompson NFA of the IR over bytes and turns it into a
  minimal DFA (subset construction over byte classes, then partition refinement);
- :mod:`constrain.automata.product` compiles the :class:`~constrain.ir.Intersect` and
  :class:`~constrain.ir.Complement` nodes the NFA builder meets, by products of the operands'
  DFAs (compiled the same way), and the builder splices them in whole.

The result is a :class:`~constrain.automata.byte_dfa.Dfa` of flat arrays: ``byte_class:
uint8[256]``, ``trans: int32[S, C]`` (-1 = dead), ``accept: bool[S]``, start state 0.
Multi-byte characters are simply several steps, so a token may end in the middle of a
character. ``Dfa`` is importable from here too, the module of the compiler that returns it.
"""

from __future__ import annotations

from constrain.automata.byte_dfa import Dfa
from constrain.automata.nfa import regex_dfa
from constrain.automata.product import boolean_fragment
from constrain.ir import Regex

__all__ = ["Dfa", "build_dfa", "compile_regex"]


def compile_regex(regex: Regex, *, max_states: int = 100_000) -> Dfa:
    """Compile a regex IR node into a minimal byte-level DFA.

    Parameters
    ----------
    regex : Regex
        The language (UTF-8 encoded; surrogate code points are dropped).
    max_states : int, optional
        Construction stops with :class:`~constrain.errors.CompileLimitError` as soon as the
        subset construction needs more states than this, or the unrolled NFA would exceed
        ``4 * max_states + 4096`` states.

    Returns
    -------
    Dfa
        The minimal DFA of the language, without dead states; its arrays are read-only.

    Raises
    ------
    CompileLimitError
        With ``limit_name="max_dfa_states"`` when the automaton (or an intersection or
        complement inside it) is too large.
    GrammarError
        If an :class:`~constrain.ir.Automaton` names a state outside ``0 .. num_states - 1``.
    ValueError
        If ``max_states`` is not positive.

    Examples
    --------
    >>> from constrain.frontends.regex import parse_regex
    >>> dfa = compile_regex(parse_regex(r"(a|b)*abb"))
    >>> dfa.num_states, dfa.matches(b"babb"), dfa.matches(b"ab")
    (4, True, False)
    """
    if max_states < 1:
        raise ValueError(f"max_states must be positive, got {max_states}")
    return build_dfa(regex, max_states=max_states, limit_name="max_dfa_states")


def build_dfa(regex: Regex, *, max_states: int, limit_name: str) -> Dfa:
    """Return :func:`compile_regex` of ``regex``, reporting ``limit_name`` when too large.

    Parameters
    ----------
    regex : Regex
        The language.
    max_states : int
        Largest automaton allowed (the DFA, each intersection or complement inside it).
    limit_name : str
        The limit reported in the error (``"max_dfa_states"``, ``"max_lexer_states"``).

    Returns
    -------
    Dfa
        The minimal DFA of the language, without dead states; its arrays are read-only.

    Raises
    ------
    CompileLimitError
        When an automaton grows past ``max_states``.
    GrammarError
        If an :class:`~constrain.ir.Automaton` names a state outside ``0 .. num_states - 1``.
    """
    return regex_dfa(regex, max_states=max_states, limit_name=limit_name, boolean=boolean_fragment)
