"""Grammar.from_structural_tag: XGrammar's structural-tag language, by strings and by tokens."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

import constrain
from constrain.testing import byte_vocabulary

ROOT = Path(__file__).resolve().parents[2]


def _tag(begin: str, content: Any, end: Any) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


X = {"type": "const_string", "value": "X"}
FUNC = _tag(
    "<f=a>",
    {
        "type": "json_schema",
        "json_schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
    },
    "</f>",
)

# (format, accepted, rejected): each expectation was checked against XGrammar 0.2.9.
CASES = [
    (
        {"type": "triggered_tags", "triggers": ["aa"], "tags": [_tag("aab", X, "E")]},
        ["xaabXE", "aabXEaabXE", "aabXEq", "a", "xa", ""],
        ["xaaabXE", "aa", "aab"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["ab", "b"],
            "tags": [_tag("abc", X, "E"), _tag("bd", X, "F")],
        },
        ["abcXE", "bdXF", "xbdXF"],
        ["abdXF"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["<f"],
            "tags": [_tag("<fa>", X, "E")],
            "stop_after_first": True,
        },
        ["", "hi", "hi<fa>XE"],
        ["hi<fa>XEmore", "<fa>XE<fa>XE"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["<f"],
            "tags": [_tag("<fa>", X, "E")],
            "excludes": ["x<"],
        },
        ["y<fa>XE", "x"],
        ["x<fa>XE", "ax<b", "<fa>XEx<"],
    ),
    (
        {
            "type": "triggered_tags",
            "triggers": ["<f"],
            "tags": [_tag("<fa>", X, "E")],
            "at_least_one": True,
        },
        ["<fa>XE", "<fa>XEtext<fa>XE"],
        ["", "text<fa>XE"],
    ),
    (
        _tag(
            "<t>",
            {"type": "triggered_tags", "triggers": ["<f"], "tags": [_tag("<fa>", X, "E")]},
            "</t>",
        ),
        ["<t>a</t>", "<t>a<fa>XEb</t>", "<t></t>"],
        ["<t>a</t>b</t>"],
    ),
    (
        {
            "type": "sequence",
            "elements": [
                {"type": "any_text", "excludes": ["ab"]},
                {"type": "const_string", "value": "b"},
            ],
        },
        ["ab", "xb"],
        ["abb"],
    ),
    (
        _tag("<a>", {"type": "any_text"}, ["aab", "</u>"]),
        ["<a>aaab", "<a>x</u>"],
        ["<a>xaabaab"],
    ),
    (
        FUNC,
        ['<f=a>{"x": 1}</f>', '<f=a>{ "x"   :\n\n\n\n\n\n 1 }</f>', "<f=a>{}</f>"],
        ['<f=a>{"x":1} </f>', '<f=a> {"x":1}</f>', '<f=a>{"y":1}</f>', '<f=a>{"x":1.0}</f>'],
    ),
    (
        {
            "type": "tags_with_separator",
            "tags": [_tag("<i>", {"type": "regex", "pattern": r"\d+"}, "</i>")],
            "separator": ",",
        },
        ["", "<i>1</i>", "<i>1</i>,<i>22</i>"],
        ["<i>1</i>,", "<i>\u0661</i>"],
    ),
]


def _accepts(grammar: constrain.Grammar, text: str) -> bool:
    matcher = constrain.Matcher(constrain.Compiler(byte_vocabulary()).compile(grammar))
    return matcher.accept_bytes(text) and matcher.is_accepting()


@pytest.mark.parametrize(("fmt", "accepted", "rejected"), CASES)
def test_language_matches_xgrammar(fmt: Any, accepted: list[str], rejected: list[str]) -> None:
    grammar = constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert [t for t in accepted if not _accepts(grammar, t)] == []
    assert [t for t in rejected if _accepts(grammar, t)] == []


def test_legacy_form_is_triggered_tags() -> None:
    spec = {
        "triggers": ["<f="],
        "tags": [{"begin": "<f=a>", "schema": '{"type": "integer"}', "end": "</f>"}],
    }
    grammar = constrain.Grammar.from_structural_tag(spec)
    assert _accepts(grammar, "hi <f=a>12</f> bye")
    assert not _accepts(grammar, "hi <f=b>12</f>")


@pytest.mark.parametrize(
    ("fmt", "pointer"),
    [
        ({"type": "exclude_token", "exclude_tokens": "x"}, "#/format/exclude_tokens"),
        ({"type": "token", "token": -1}, "#/format/token"),
        ({"type": "sequence", "elements": [X, {"type": "nope"}]}, "#/format/elements/1"),
        (_tag("<a>", {"type": "any_text"}, ""), "#/format/end"),
        (
            {"type": "triggered_tags", "triggers": ["<f", "<fu"], "tags": [_tag("<fun>", X, "E")]},
            "#/format/tags/0/begin",
        ),  # fmt: skip
        ({"type": "grammar", "grammar": 'root ::= "a"', "syntax": "gbnf"}, "#/format/syntax"),
        ({"type": "grammar", "grammar": 'root ::= "a" (= "b")'}, "#/format/grammar"),
        ({"type": "regex", "pattern": "(?<=a)b"}, "#/format/pattern"),
    ],
)
def test_errors_name_the_pointer(fmt: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert info.value.location == pointer


def test_token_formats_match_special_tokens_by_id() -> None:
    # ids 0..127 are ASCII bytes, then text spelling the name, then <|call|>, <|end|>, EOS
    tokens: list[bytes | None] = [bytes([b]) for b in range(128)] + [b"<|call|>", None, None, None]
    call, end, eos = 129, 130, 131
    vocab = constrain.Vocabulary.from_bytes(
        tokens, eos_ids=[eos], special_names={"<|call|>": call, "<|end|>": end}
    )
    spec = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "a"},
                {
                    "type": "tag",
                    "begin": {"type": "token", "token": "<|call|>"},
                    "content": {"type": "any_text"},
                    "end": {"type": "token", "token": end},
                },
            ],
        },
    }
    compiled = constrain.Compiler(vocab).compile(constrain.Grammar.from_structural_tag(spec))
    m = constrain.Matcher(compiled)
    assert m.accept_token(ord("a"))
    assert m.allowed_token_ids().tolist() == [call]  # the id, not the text spelling it (128)
    assert m.accept_token(call)
    assert m.accept_tokens([ord("h"), ord("i")]) == 2
    allowed = set(m.allowed_token_ids().tolist())
    assert end in allowed and call not in allowed and eos not in allowed  # no specials in text
    assert m.accept_token(end) and m.is_accepting()
    unknown = {"type": "structural_tag", "format": {"type": "token", "token": "<|nope|>"}}
    with pytest.raises(constrain.GrammarError, match=r"<\|nope\|> is not a special token"):
        constrain.Compiler(vocab).compile(constrain.Grammar.from_structural_tag(unknown))


def test_json_schema_error_pointer_runs_into_the_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": {"properties": {"a": {"type": "nonsense"}}}}
    with pytest.raises(constrain.JsonSchemaError) as info:
        constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert info.value.pointer.startswith("#/format/json_schema/properties/a")


def _parity_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "structural_tag_parity", ROOT / "benchmarks" / "structural_tag_parity.py"
    )
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name",
    [
        "triggered_function",
        "triggers_overlap",
        "tags_with_separator",
        "think_then_tools",
        "tag_any_tokens",
        "tok_triggered",
        "budget_text",  # token budgets: the region ends after the same token on both sides
        "budget_loop",
        "budget_any_tokens",
        "aligned_one_star",  # token-aligned regions end after the same token on both sides
        "aligned_free_json",
        "ebnf_list",  # a grammar in XGrammar's EBNF
    ],
)
def test_walks_and_masks_match_xgrammar(name: str) -> None:
    pytest.importorskip("xgrammar")
    parity = _parity_module()
    try:
        vocab, compiler, encode, decode = parity.llama_setup()
    except constrain.VocabularyError as err:
        pytest.skip(str(err))
    spec = dict(parity.parity_specs())[name]
    result = parity.compare(spec, vocab, compiler, encode, decode, walks=2, steps=12, seed=1)
    assert result.masks > 0
    assert (result.mask_diffs, result.rejected) == (0, 0), result.notes


def test_any_order_is_every_order_of_a_valid_object() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["a", "b"],
    }
    fmt = {"type": "json_schema", "json_schema": schema, "any_order": True}
    grammar = constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    for text in ('{"b": "x", "a": 1}', '{"c": true, "a": 1, "b": ""}', '{"a":1,"c":false,"b":"y"}'):
        assert _accepts(grammar, text), text
    # XGrammar's any_order also lets a key repeat and a required key be missing: not here
    for text in ('{"a": 1}', '{"a": 1, "b": "x", "a": 2}', '{"b": "x", "d": 1, "a": 1}'):
        assert not _accepts(grammar, text), text
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(
            {"type": "structural_tag", "format": {**fmt, "style": "qwen_xml"}}
        )
    assert info.value.location == "#/format"


@pytest.mark.parametrize(
    ("schema", "accepted", "rejected"),
    [
        ({"type": "string"}, ['"xa"', '"x\\u0061b"', '"a\\nb"'], ['"xab"', '"ab"']),
        ({"type": "string", "pattern": "^x.*$"}, ['"xab"'], []),  # a pattern is not filtered
        ({"enum": ["ab", "cd", 1]}, ['"cd"', "1"], ['"ab"']),
        ({"anyOf": [{"const": "zab"}, {"type": "integer"}]}, ["1"], ['"zab"']),
        (
            {"type": "object", "properties": {"kab": {"type": "integer"}, "b": {}}},
            ['{"b": 1}', "{}"],
            ['{"kab": 1}'],
        ),
        ({"additionalProperties": {"type": "integer"}}, ['{"b": 1}'], ['{"kab": 1}']),
        ({"type": "string", "maxLength": 3}, ['"xyz"'], ['"xyzw"', '"xab"']),  # length kept
    ],
)
def test_excludes_as_xgrammar_reads_them(
    schema: Any, accepted: list[str], rejected: list[str]
) -> None:
    fmt = {"type": "json_schema", "json_schema": schema, "excludes": ["ab"]}
    grammar = constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert [t for t in accepted if not _accepts(grammar, t)] == []
    assert [t for t in rejected if _accepts(grammar, t)] == []


def test_an_excluded_required_property_is_refused() -> None:
    schema = {"properties": {"kab": {}}, "required": ["kab"]}
    fmt = {"type": "json_schema", "json_schema": schema, "excludes": ["ab"]}
    with pytest.raises(constrain.JsonSchemaError) as info:
        constrain.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert info.value.pointer == "#/format/json_schema/required"
