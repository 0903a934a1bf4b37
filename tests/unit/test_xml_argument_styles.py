"""XGrammar 0.2.9's XML argument styles beyond the ``qwen_xml`` family, and the implied types.

Every expectation below was checked against XGrammar 0.2.9's own acceptor;
``test_xgrammar_agrees`` checks them again where ``xgrammar`` is installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from xml_styles import accepts, check_language, style_spec

import constrain
from constrain.frontends.xml_arguments import kimi_type


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

NS = "]<]minimax[>["


def _m3(name: str, value: str) -> str:
    return f"{NS}<{name}>{value}{NS}</{name}>"


M3_ARGS = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"enum": ["c", "f"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "ok": {"type": "boolean"},
        "t": {"type": ["number", "null"]},
    },
    "required": ["location"],
}
M3_NESTED = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "f": {
            "type": "object",
            "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}},
            "required": ["lang"],
        },
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "p": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
            "minItems": 1,
        },
    },
}
M3_LITERALS = {
    "type": "object",
    "properties": {
        "c": {"const": {"x": [1, "a"], "y": None}},
        "e": {"enum": ["a", 2.0, [True], {"k": "v"}]},
        "o": {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"type": "string"},
            ]
        },
        "r": {"$ref": "#/$defs/d"},
    },
    "$defs": {"d": {"type": "boolean"}},
}
LOC3 = _m3("location", "x")
CASES += [
    (
        "minimax_m3_xml",
        M3_ARGS,
        {},
        [
            _m3("location", "Paris"),
            f"\n{_m3('location', ' Paris ')}\n{_m3('unit', 'c')} ",  # strings keep spaces
            LOC3 + _m3("days", "14"),
            LOC3 + _m3("ok", "true") + _m3("t", "null"),
            LOC3 + _m3("t", "-1.5e3"),
            _m3("location", "a]<]b<"),
        ],
        [
            "",
            "  ",
            _m3("unit", "c"),  # location is required
            LOC3 + _m3("days", "15"),  # maximum
            LOC3 + _m3("days", " 3"),  # no whitespace around a value
            _m3("location", f"a{NS}b"),  # a string cannot hold the marker
            LOC3 + _m3("location", "y"),
            _m3("days", "3") + LOC3,  # declared order
            LOC3 + _m3("unit", '"c"'),
            LOC3 + _m3("zz", "1"),
        ],
    ),
    (
        "minimax_m3_xml",
        M3_NESTED,
        {},
        [
            "",  # nothing required: empty, without whitespace
            " " + _m3("q", "hi") + " ",
            _m3("f", _m3("lang", "en")),
            _m3("f", f" {_m3('lang', 'en')}\n{_m3('safe', 'false')} "),
            _m3("tags", ""),
            _m3("tags", _m3("item", "a") + " " + _m3("item", "b")),
            _m3("p", _m3("item", "1")),
            _m3("p", _m3("item", "1") + _m3("item", "true")),
        ],
        [
            "  ",
            _m3("f", ""),  # lang is required
            _m3("f", _m3("safe", "true")),
            _m3("tags", "".join(_m3("item", c) for c in "abc")),  # maxItems
            _m3("tags", " "),
            _m3("p", ""),  # minItems
            _m3("p", _m3("item", "1") + _m3("item", "true") + _m3("item", "x")),  # no items
        ],
    ),
    (
        "minimax_m3_xml",
        M3_LITERALS,
        {},
        [
            _m3("c", _m3("x", _m3("item", "1") + _m3("item", "a")) + _m3("y", "null")),
            _m3("e", "2"),
            _m3("e", _m3("item", "true")),
            _m3("e", _m3("k", "v")),
            _m3("o", _m3("a", "1")),
            _m3("o", f" {_m3('a', '1')} "),
            _m3("o", "text"),
            _m3("o", ""),
            _m3("r", "true"),
        ],
        [
            _m3("c", _m3("x", _m3("item", "1") + " " + _m3("item", "a")) + _m3("y", "null")),
            _m3("e", "2.0"),
            _m3("r", "1"),
        ],
    ),
    (
        "minimax_m3_xml",
        M3_ARGS,
        {"max_whitespace_cnt": 1},
        [LOC3 + " " + _m3("days", "3")],
        [LOC3 + "  " + _m3("days", "3"), "  " + LOC3],
    ),
]


def _cv(name: str, kind: str, value: str) -> str:
    return f'<cofl:value name="{name}" type="{kind}">{value}</cofl:value>'


def _ci(kind: str, value: str) -> str:
    return f'<cofl:value type="{kind}">{value}</cofl:value>'


C_ARGS = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"enum": ["c", "f"]},
        "days": {"type": "integer"},
        "mix": {"enum": ["a", 1, None]},
        "tl": {"type": ["integer", "string"]},
    },
    "required": ["location"],
}
C_NESTED = {
    "type": "object",
    "properties": {
        "q": {"type": "string", "maxLength": 3},
        "f": {
            "type": "object",
            "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}},
            "required": ["lang"],
        },
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "p": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        "any": {},
        "c": {"const": {"k": [1]}},
    },
}
LOCC = _cv("location", "raw", "x")
ANY_DICT = (
    ' <cofl:value name="k&amp;" type="list">'
    + _ci("json", "1")
    + _ci("dict", "")
    + "</cofl:value> "
)
CASES += [
    (
        "cohere_xml",
        C_ARGS,
        {},
        [
            _cv("location", "raw", "Paris"),
            _cv("location", "raw", " Paris\n") + "\n" + _cv("unit", "raw", " c "),
            LOCC + _cv("days", "json", " 3 "),
            LOCC + _cv("mix", "raw", "a"),  # each enum member with its own type
            LOCC + _cv("mix", "json", " null "),
            LOCC + _cv("tl", "json", "5"),
            LOCC + _cv("tl", "raw", "five"),
            _cv("location", "raw", "a</cofl:value") + " ",
        ],
        [
            "",
            _cv("unit", "raw", "c"),  # location is required
            LOCC + _cv("days", "raw", "3"),  # an integer is json
            LOCC + _cv("mix", "raw", "1"),
            LOCC + _cv("mix", "json", "a"),
            LOCC + _cv("unit", "raw", '"c"'),
            LOCC + _cv("zz", "raw", "1"),  # strict: no undeclared property
            LOCC + LOCC,
        ],
    ),
    (
        "cohere_xml",
        C_NESTED,
        {},
        [
            "",
            "  ",
            _cv("q", "raw", " ab "),
            _cv("f", "dict", " " + _cv("lang", "raw", "en") + "\n" + _cv("safe", "json", "false")),
            _cv("tags", "list", ""),
            _cv("tags", "list", _ci("raw", "a") + _ci("raw", "b")),
            _cv("p", "list", _ci("json", "1") + _ci("raw", "x")),  # every prefix item
            _cv("any", "json", "1.5"),
            _cv("any", "dict", ANY_DICT),
            _cv("any", "list", _ci("raw", "x") + _ci("list", "")),
            _cv("c", "json", '{"k":[1]}'),  # object literals are JSON text
        ],
        [
            _cv("q", "raw", "abcd"),
            _cv("f", "dict", " "),  # lang is required
            _cv("tags", "list", " " + _ci("raw", "a") + " " + _ci("raw", "b")),  # no spaces
            _cv("tags", "list", _ci("raw", "a") * 3),
            _cv("p", "list", _ci("json", "1")),
            _cv("any", "dict", '<cofl:value name="a<b" type="raw">x</cofl:value>'),
            _cv("any", "json", '"s"'),
            _cv("c", "dict", '{"k":[1]}'),
        ],
    ),
    (
        "cohere_xml",
        {
            "type": "object",
            "properties": {'a&"<b': {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        {},
        [
            _cv("a&amp;&quot;&lt;b", "json", "1") + _cv("x", "raw", "hi"),
            _cv("zz y", "raw", "hi") + " " + _cv("a&amp;&quot;&lt;b2", "raw", ""),
        ],
        [
            _cv('a&"<b', "json", "1"),
            _cv("a&amp;&quot;&lt;b", "raw", "hi"),  # a declared name is not undeclared
        ],
    ),
    (
        "cohere_xml",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]},
        {},
        [_cv("a", "json", "1")],
        ["", " "],  # an undeclared required name still makes the object non-empty
    ),
]


def _q(text: str) -> str:
    return f'<|"|>{text}<|"|>'


G_ARGS = {
    "type": "object",
    "properties": {
        "s": {"type": "string"},
        "p": {"type": "string", "pattern": "[a-z]+"},
        "m": {"type": "string", "maxLength": 3},
        "e": {"enum": ["a", 1, None]},
        "c": {"const": {"k": ["v"]}},
        "n": {"type": "integer", "minimum": 1},
    },
    "required": ["s"],
}
G_NESTED = {
    "type": "object",
    "properties": {
        "arr": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "o": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        "u": {},
        "b": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]},
    },
}
S = "{s:" + _q("x")
CASES += [
    (
        "gemma",
        G_ARGS,
        {},
        [
            "{s:" + _q("hi") + "}",
            "{ s : " + _q('a "b"\n{') + " , p:" + _q("abc") + "}",  # strings are raw
            S + ",m:" + _q("abcdef") + "}",  # maxLength is not enforced
            S + ",e:" + _q("a") + ",c:{k:[" + _q("v") + "]},n:3}",
            S + ",e:null}",
        ],
        [
            "{}",
            '{"s":' + _q("x") + "}",  # keys are not quoted
            '{s:"x"}',
            S + ",p:" + _q("ABC") + "}",
            S + ",n:0}",
            S + ",e:a}",
            S + ",c:{k: [" + _q("v") + "]}}",  # const values are compact
            " " + S + "}",
            S + ",zz:1}",
            "{n:1," + S[1:] + "}",
        ],
    ),
    (
        "gemma",
        G_NESTED,
        {},
        [
            "{ }",
            "{arr:[" + _q("a") + "]}",
            "{o:{k:" + _q("v") + "}}",
            "{u:{x:[1," + _q("s") + ",{}],y_2:null}}",
            "{b:[]}",
            "{b:[1, true]}",
        ],
        [
            "{arr:[]}",
            "{arr:[" + ",".join(_q(c) for c in "abc") + "]}",
            "{o:{}}",
            '{u:{"x":1}}',
            "{b:[1,true,3]}",
            "{b:[true]}",
        ],
    ),
    (
        "gemma",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        {},
        ["{a:1,b:" + _q("x") + "}", "{b:" + _q("x") + ",c:" + _q("") + "}"],
        ["{a:1,a:" + _q("x") + "}", "{b:1}"],
    ),
    ("gemma", {}, {}, ["1", _q("x"), "[ ]"], ['"x"', "{1a:1}"]),
]


@pytest.mark.parametrize(("style", "schema", "extra", "accepted", "rejected"), CASES)
def test_language(
    style: str, schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    check_language(style_spec(schema, style, **extra), accepted, rejected)


@pytest.mark.parametrize(("style", "schema", "extra", "accepted", "rejected"), CASES)
def test_xgrammar_agrees(
    style: str, schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    xgr = pytest.importorskip("xgrammar")
    xgr_testing = pytest.importorskip("xgrammar.testing")
    grammar = xgr.Grammar.from_structural_tag(json.dumps(style_spec(schema, style, **extra)))
    xgr_accepts = xgr_testing._is_grammar_accept_string  # XGrammar's string-level acceptor
    assert [t for t in accepted if not xgr_accepts(grammar, t)] == []
    assert [t for t in rejected if xgr_accepts(grammar, t)] == []


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
        constrain.Grammar.from_structural_tag(style_spec(fmt, "kimi_k3_xml"))
    assert info.value.location == pointer


def _object(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


J = "#/format/json_schema"


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [  # XGrammar 0.2.9 refuses these too
        ({}, ""),
        (_object({"a": {}}), "/properties/a"),
        (_object({"a": {"minimum": 1}}), "/properties/a"),
        (_object({"a": {"type": "array", "items": True}}), "/properties/a/items"),
        (_object({"a": {"type": "integer"}}, additionalProperties=True), "/additionalProperties"),
        (_object({"a": {"type": "string", "pattern": "x"}}), "/properties/a/pattern"),
        (_object({"a": {"type": "string", "format": "email"}}), "/properties/a/format"),
        (_object({"a": {"type": "string", "maxLength": 3}}), "/properties/a/maxLength"),
        (_object({"a": {"const": f"x{NS}"}}), "/properties/a/const"),
        (_object({"a>": {"type": "integer"}}), "/properties/a>"),
        (_object({"a": {"type": "integer"}}, required=["b"]), "/required"),
        (
            _object({"a": {"type": "object", "patternProperties": {}}}),
            "/properties/a/patternProperties",
        ),
        # constrain does not enforce these in this style
        (_object({"a": {"type": "integer"}}, minProperties=1), "/minProperties"),
        (_object({"a": {"allOf": [{"type": "integer"}]}}), "/properties/a/allOf"),
        (
            _object({"a": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}),
            "/properties/a/uniqueItems",
        ),
        ({"type": "string"}, "/type"),
    ],
)
def test_minimax_m3_errors_name_the_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(style_spec(schema, "minimax_m3_xml"))
    assert info.value.location == f"{J}{pointer}"


def test_minimax_m3_unknown_format_is_a_plain_string() -> None:
    schema = _object({"a": {"type": "string", "format": "no-such-format", "minLength": 0}})
    grammar = constrain.Grammar.from_structural_tag(style_spec(schema, "minimax_m3_xml"))
    assert accepts(grammar, _m3("a", "anything <at> all"))


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "array"}, "/type"),
        ({"type": "object", "minProperties": 1}, "/minProperties"),
        (_object({"a": {"type": "array", "uniqueItems": True}}), "/properties/a/uniqueItems"),
        (_object({"a": {"allOf": [{"type": "integer"}]}}), "/properties/a/allOf"),
        (
            _object({"a": {"type": "object", "patternProperties": {}}}),
            "/properties/a/patternProperties",
        ),
        (
            _object({"a": {"type": "array", "prefixItems": [{}, {}], "maxItems": 1}}),
            "/properties/a/maxItems",
        ),
        (_object({"a": {"type": "string", "pattern": "("}}), "/properties/a/pattern"),
    ],
)
def test_cohere_errors_name_the_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(style_spec(schema, "cohere_xml"))
    assert info.value.location == f"{J}{pointer}"


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"allOf": [{"type": "integer"}]}, "/allOf"),
        ({"type": "object", "minProperties": 1}, "/minProperties"),
        (_object({"a": {"type": "array", "uniqueItems": True}}), "/properties/a/uniqueItems"),
        (_object({"a": {"type": "string", "pattern": "("}}), "/properties/a/pattern"),
        (_object({"a": False}), "/properties/a"),
    ],
)
def test_gemma_errors_name_the_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(style_spec(schema, "gemma"))
    assert info.value.location == f"{J}{pointer}"
