"""Stage 1: the grammar of a constraint named by a kind and a source, as requests spell it.

A serving request (the vLLM processor's spec) and the warm-up list
(:mod:`constrain.warmup_grammars`) name a constraint by a kind and a source: ``regex``,
``json_schema``, ``structural_tag``, or ``grammar``, whose inline text is a shipped grammar's
name (a bare word), EBNF (a rule head ``name ::=``, XGrammar's and llama.cpp's syntax) or Lark.
One dispatch for both, so a kind means the same to each. File paths are never read here: a
request's text is not a path on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from constrain.frontends.ebnf import is_ebnf
from constrain.ir import Grammar

__all__ = ["SOURCE_KINDS", "grammar_text", "source_grammar"]

SOURCE_KINDS = ("json_schema", "regex", "structural_tag", "grammar")
"""The kinds :func:`source_grammar` reads, in the order a request's keys are looked up."""


def grammar_text(text: str) -> Grammar:
    """Return the grammar of inline grammar text: a shipped grammar's name, EBNF or Lark."""
    if "\n" not in text and ":" not in text:
        return Grammar.builtin(text)
    if is_ebnf(text):
        return Grammar.from_ebnf(text)
    return Grammar.from_lark(text)


def source_grammar(
    kind: str, source: Any, json_options: Mapping[str, Any] | None = None
) -> Grammar:
    """Return the grammar of a constraint given as ``kind`` and ``source``.

    Parameters
    ----------
    kind : {"json_schema", "regex", "structural_tag", "grammar"}
        What ``source`` is.
    source : Any
        The schema (object or JSON text), regex, structural tag, or inline grammar text
        (:func:`grammar_text`).
    json_options : mapping, optional
        Options of :meth:`Grammar.from_json_schema` (a schema only).

    Raises
    ------
    ValueError
        For an unknown kind.
    """
    if kind == "json_schema":
        return Grammar.from_json_schema(source, **(json_options or {}))
    if kind == "regex":
        return Grammar.from_regex(source)
    if kind == "structural_tag":
        return Grammar.from_structural_tag(source)
    if kind == "grammar":
        return grammar_text(source)
    raise ValueError(f"unknown constraint kind {kind!r}; expected one of {', '.join(SOURCE_KINDS)}")
