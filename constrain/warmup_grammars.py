"""The warm-up grammars: the constraints that, compiled and driven once, run every numba kernel.

One list for both warm-ups: :func:`constrain.warmup.warm_up` (the install warm-up, and a
server's at start) builds each entry's grammar with :meth:`WarmUpGrammar.grammar`; the vLLM
logits processor (:mod:`constrain.integrations.vllm`) sends each as a request spec (its ``kind``
is the spec's key) and feeds the tokens of its ``sample``, a text the grammar accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from constrain.frontends.json_schema.formats import SUPPORTED_FORMATS
from constrain.frontends.sources import source_grammar
from constrain.ir import Grammar

__all__ = ["WARM_UP_GRAMMARS", "WARM_UP_SCHEMA", "WarmUpGrammar"]


@dataclass(frozen=True)
class WarmUpGrammar:
    """One warm-up constraint and a text its grammar accepts.

    Attributes
    ----------
    kind : str
        ``"regex"``, ``"json_schema"``, ``"grammar"`` (Lark text, or a shipped grammar's name)
        or ``"structural_tag"``: the key of a vLLM request spec
        (:func:`constrain.integrations.vllm.request_args`).
    source : Any
        The regex, schema, grammar text or structural tag.
    sample : str
        A text the grammar accepts (under vLLM's JSON defaults for a schema).
    json_options : mapping, optional
        Options of :meth:`Grammar.from_json_schema` (a schema only).
    """

    kind: str
    source: Any
    sample: str
    json_options: Mapping[str, Any] | None = None

    def grammar(self) -> Grammar:
        """Return the grammar, as a request spec of this kind would build it."""
        return source_grammar(self.kind, self.source, self.json_options)


WARM_UP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "multipleOf": 3},
        "name": {"type": "string", "maxLength": 40, "pattern": "^[A-Z][a-z]+$"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1},
        "score": {"type": "number", "exclusiveMaximum": 10},
        "nested": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
    "required": ["id"],
    "not": {"required": ["score", "tags"]},
}
"""A schema with intersections, complements and counted strings (also saved and loaded)."""

_LARK = """
start: pair ("," pair)*
pair: KEY "=" (NUMBER | WORD | list)
list: "[" [WORD ("," WORD)*] "]"
KEY: /[a-z_]+/
WORD: /[A-Za-z]+/
%import common.NUMBER
%import common.WS
%ignore WS
"""

_BUDGET = {
    "type": "structural_tag",
    "format": {
        "type": "tag",
        "begin": "<",
        "content": {"type": "any_text", "max_tokens": 2},
        "end": ">",
    },
}

_FORMATS = {
    "type": "object",
    "properties": {
        f"{name}-{copy}": {"type": "string", "format": name}
        for name in sorted(SUPPORTED_FORMATS)
        for copy in (1, 2)
    },
}

_RECORD = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "ok": {"type": "boolean"},
    },
}

WARM_UP_GRAMMARS: tuple[WarmUpGrammar, ...] = (
    WarmUpGrammar("regex", r"\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}", "(555) 123-4567"),
    WarmUpGrammar("regex", "", ""),
    WarmUpGrammar("regex", "(yes|no|maybe)", "maybe"),
    WarmUpGrammar("regex", r"[a-z]+-\d{2}", "abc-12"),
    WarmUpGrammar("grammar", _LARK, "a=1, b=Xy, c=[P, Q]"),
    WarmUpGrammar("grammar", "json", '{"a": [1, 2.5, "x", true, null]}'),
    WarmUpGrammar(
        "json_schema", _RECORD, '{"name": "Ann", "n": 3, "x": 1.5, "tags": ["a"], "ok": true}'
    ),
    WarmUpGrammar("json_schema", WARM_UP_SCHEMA, '{"id": 3, "name": "Ann", "tags": ["a", 3]}'),
    WarmUpGrammar(
        "json_schema", WARM_UP_SCHEMA, '{ "id":  6 }', json_options={"whitespace": "flexible"}
    ),
    # long counted string bodies: bounded state classes, token classes, single walks
    WarmUpGrammar("json_schema", {"type": "string", "maxLength": 3000}, '"hello"'),
    WarmUpGrammar("regex", "[a-z]{1,3000}", "hello"),
    # a count the lexer folds and builds as it is reached (constrain.automata.lazy_lexer)
    WarmUpGrammar("regex", "[a-z0-9]{1,100000}!", "abc123!"),
    # a count intersected with a pattern, built as reached (a product region of the lazy lexer)
    WarmUpGrammar(
        "json_schema",
        {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 100000},
        '"ab-cd"',
    ),
    # an enum past a few strings: its minimal acyclic automaton (nfa_parts.literal_trie)
    WarmUpGrammar("json_schema", {"enum": [f"code-{i}" for i in range(100)]}, '"code-42"'),
    # a token budget, which ends its region after two tokens (constrain.token_budgets)
    WarmUpGrammar("structural_tag", _BUDGET, "<hi>"),
    # every format twice: the big format bodies enter the process's cache of minimal DFAs
    # (constrain.automata.nfa), so a request's first uri or email field does not build one
    WarmUpGrammar("json_schema", _FORMATS, '{"date-1": "2024-01-31"}'),
)
"""Every warm-up grammar, each with a text it accepts."""
