"""XGrammar 0.2.9's XML argument styles beyond the ``qwen_xml`` family, and the implied types.

Every expectation below was checked against XGrammar 0.2.9's own acceptor;
``test_xgrammar_agrees`` checks them again where ``xgrammar`` is installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import constrain
from constrain.frontends.xml_arguments import kimi_type
from constrain.testing import byte_vocabulary


def _spec(schema: Any, style: str, **extra: Any) -> dict[str, Any]:
    fmt = {"type": "json_schema", "json_schema": schema, "style": style, **extra}
    return {"type": "structural_tag", "format": fmt}


def _accepts(grammar: constrain.Grammar, text: str) -> bool:
    matcher = constrain.Matcher(constrain.Compiler(byte_vocabulary()).compile(grammar))
    return matcher.accept_bytes(text) and matcher.is_accepting()


def _kimi(name: str, kind: str, value: str) -> str:
    return f'<|open|>argument key="{name}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


P, E = "<parameter=", "</parameter>"
KIMI_ARGS = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"enum": ["c", "f"]},
        "days": {"type": "integer"},
        "ok": {"type": "boolean"},
        "any": {},
        "mix": {"enum": ["a", 1]},
    },
    "required": ["location"],
}
KIMI_FREE = {
    "type": "object",
    "properties": {'a&"b': {"const": 1}},
    "additionalProperties": {"type": "string"},
}
LOC = _kimi("location", "string", "x")
# (style, schema, extra, accepted, rejected)
CASES: list[tuple[str, Any, dict[str, Any], list[str], list[str]]] = [
    (  # without "type", only object and array keywords imply a type; others take any value
        "qwen_xml",
        {
            "type": "object",
            "properties": {
                "n": {"minimum": 1},
                "s": {"pattern": "a", "maxLength": 3},
                "o": {"properties": {}, "items": {}},
                "a": {"prefixItems": [{"type": "integer"}]},
            },
        },
        {},
        [
            f"{P}n>abc{E}",
            f"{P}n>[1]{E}{P}s>{{}}{E}",
            f"{P}s>zzzzz{E}",
            f"{P}o>{{}}{E}",
            f"{P}a>[1]{E}",
            f"{P}a>[]{E}",
        ],
        [f"{P}o>[]{E}", f"{P}o>x{E}", f"{P}a>x{E}", f"{P}a>[1, 2]{E}"],
    ),
    (
        "kimi_k3_xml",
        KIMI_ARGS,
        {},
        [
            _kimi("location", "string", "Paris"),
            f"\n{_kimi('location', 'string', ' Paris ')}\n{_kimi('unit', 'string', 'c')}\n",
            LOC + _kimi("unit", "string", " f\n"),
            LOC + _kimi("days", "number", " 3 "),
            LOC + _kimi("ok", "boolean", "true"),
            LOC + _kimi("any", "integer", "hello"),  # an untyped value: any type name
            LOC + _kimi("any", "null", '{"a": 1}'),
            LOC + _kimi("mix", "object", "1"),  # a mixed enum: any type name
            _kimi("location", "string", "a<|close|>argument") + _kimi("ok", "boolean", "false"),
        ],
        [
            "",
            _kimi("location", "number", "Paris"),  # the type is the schema's
            _kimi("unit", "string", "c"),  # location is required
            LOC + _kimi("days", "integer", "3"),  # integers are "number"
            LOC + _kimi("days", "number", "1.5"),
            LOC + _kimi("unit", "string", '"c"'),  # enum strings are raw
            LOC + _kimi("mix", "text", "a"),
            _kimi("location", "String", "x"),
            LOC + _kimi("zz", "string", "1"),  # strict: no undeclared property
            LOC + LOC,
        ],
    ),
    (
        "kimi_k3_xml",
        KIMI_FREE,
        {},
        [
            _kimi("a&amp;&quot;b", "number", "1"),  # names are escaped as attribute values
            _kimi("a&amp;&quot;b", "number", "1") + _kimi("x_1", "string", "hi"),
            _kimi("a&amp;&quot;b", "number", " 1 ") + "\n" + _kimi("y", "string", ""),
        ],
        [
            _kimi('a&"b', "number", "1"),
            _kimi("x_1", "number", "hi"),
            _kimi("1x", "string", "hi"),
        ],
    ),
    (
        "kimi_k3_xml",
        {},
        {"max_whitespace_cnt": 1},
        [_kimi("x", "null", "1"), _kimi("x", "integer", "[1, 2]") + " " + _kimi("y", "array", "t")],
        ["  ", _kimi("x", "float", "1"), _kimi("x", "null", "1") + "  " + _kimi("y", "null", "1")],
    ),
]


@pytest.mark.parametrize(("style", "schema", "extra", "accepted", "rejected"), CASES)
def test_language(
    style: str, schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    grammar = constrain.Grammar.from_structural_tag(_spec(schema, style, **extra))
    assert [t for t in accepted if not _accepts(grammar, t)] == []
    assert [t for t in rejected if _accepts(grammar, t)] == []


@pytest.mark.parametrize(("style", "schema", "extra", "accepted", "rejected"), CASES)
def test_xgrammar_agrees(
    style: str, schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    xgr = pytest.importorskip("xgrammar")
    xgr_testing = pytest.importorskip("xgrammar.testing")
    grammar = xgr.Grammar.from_structural_tag(json.dumps(_spec(schema, style, **extra)))
    accepts = xgr_testing._is_grammar_accept_string  # XGrammar's string-level acceptor
    assert [t for t in accepted if not accepts(grammar, t)] == []
    assert [t for t in rejected if accepts(grammar, t)] == []


@pytest.mark.parametrize(
    ("schema", "kind"),
    [
        ({"type": "integer"}, "number"),
        ({"const": 1.5}, "number"),
        ({"const": [1]}, "array"),
        ({"enum": ["a", "b"]}, "string"),
        ({"enum": ["a", None]}, None),
        ({"type": ["string"]}, None),
        ({"$ref": "#/$defs/s", "type": "string"}, None),
        ({"anyOf": [{"type": "string"}], "const": "x"}, "string"),
        ({"anyOf": [{"type": "string"}], "type": "string"}, None),
        ({"additionalProperties": False}, "object"),
        ({"minimum": 1}, None),
        ({}, None),
    ],
)
def test_kimi_type_pins_as_xgrammar(schema: Any, kind: str | None) -> None:
    # the attribute XGrammar 0.2.9 prints for the same property schema
    assert kimi_type(schema) == kind


@pytest.mark.parametrize(
    ("fmt", "pointer"),
    [
        ({"type": "array"}, "#/format/json_schema/type"),
        ({"type": "object", "maxProperties": 1}, "#/format/json_schema/maxProperties"),
        (
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
            "#/format/json_schema/properties/a/not",
        ),
    ],
)
def test_kimi_errors_name_the_pointer(fmt: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(_spec(fmt, "kimi_k3_xml"))
    assert info.value.location == pointer
