"""Composition in Lark grammars: %json, %grammar and %regex, languages, errors and masks."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import lark
import pytest
import reference

import constrain
from constrain import Grammar
from constrain.errors import LarkGrammarError
from constrain.testing import byte_vocabulary, tiny_vocabulary

TOOL_CALL = """
start: "<tool_call>" %json {
  "type": "object",
  "properties": {"city": {"type": "string", "maxLength": 4, "description": "a } brace"}},
  "required": ["city"],
  "additionalProperties": false
} "</tool_call>"
"""

IGNORED_AROUND = """
start: "<a>" value "</a>"
value: %json {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
%ignore " "
"""

SPACED = """
start: pair ("," pair)*
pair: NAME "=" %json {"type": "object", "properties": {"k": {"type": "boolean"}}} {"whitespace": "spaced"}
NAME: /[a-z]+/
"""  # noqa: E501

REGEX = r"""
start: %regex "\\d{2}" ":" WORD
WORD: %regex "[a-c]+" "!"
"""


def _accepts(grammar: Grammar, text: str) -> bool:
    matcher = constrain.Matcher(constrain.Compiler(byte_vocabulary()).compile(grammar))
    return matcher.accept_bytes(text.encode()) and matcher.is_accepting()


@pytest.mark.parametrize(
    ("text", "accepted", "rejected"),
    [
        (
            TOOL_CALL,
            ['<tool_call>{"city":"Oslo"}</tool_call>', '<tool_call>{"city":""}</tool_call>'],
            [
                '<tool_call>{"city": "Oslo"}</tool_call>',  # compact: no layout whitespace
                '<tool_call>{"city":"Paris"}</tool_call>',  # maxLength 4
                "<tool_call>{}</tool_call>",
                '<tool_call>{"city":"Oslo"} </tool_call>',
            ],
        ),
        (
            IGNORED_AROUND,
            ["<a>[1,2]</a>", " <a> [] </a> ", "<a>[-3]   </a>"],
            ["<a>[1, 2]</a>", "<a>[ 1]</a>", "<a>[1,2,3]</a>", "< a>[]</a>"],
        ),
        (
            SPACED,
            ['x={"k": true}', 'x={"k": false},yz={}'],
            ['x={"k":true}', 'x={ "k": true}', "x=[]"],
        ),
        # Python re semantics, as /.../ in Lark: \d is any Unicode digit
        (REGEX, ["12:ab!", "07:c!", "١٢:a!"], ["1:ab!", "12:ab", "12:d!"]),
    ],
)
def test_language(text: str, accepted: list[str], rejected: list[str]) -> None:
    grammar = Grammar.from_lark(text)
    assert [t for t in accepted if not _accepts(grammar, t)] == []
    assert [t for t in rejected if _accepts(grammar, t)] == []


def test_json_files_and_grammar_files_resolve_from_the_grammar_folder(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "args.json").write_text('{"type": "integer", "minimum": 0}')
    (tmp_path / "list.lark").write_text(
        'start: "(" item ("," item)* ")"\n'
        'item: %json "schemas/args.json"\n'  # relative to list.lark's folder
        '%ignore "_"\n'
    )
    (tmp_path / "main.lark").write_text(
        'start: "call" %grammar "list.lark" ";"\nexpr: "x"\n%ignore " "\n'
    )
    grammar = Grammar.from_lark_file(tmp_path / "main.lark")
    # The sub-grammar's "_" is ignored inside it, the outer " " only around it.
    assert _accepts(grammar, "call (1,_2)_;")
    assert _accepts(grammar, "call _(0) ;")
    assert not _accepts(grammar, "call (1, 2);")
    assert not _accepts(grammar, "call (-1);")
    assert not _accepts(grammar, "call(1)_ _;")


def test_grammar_start_option_and_absolute_paths(tmp_path: Path) -> None:
    sub = tmp_path / "sub.lark"
    sub.write_text('start: "s"\nother: "o"+\n')
    text = f'start: %grammar {json.dumps(str(sub))} {{"start": "other"}} "!"'
    grammar = Grammar.from_lark(text)
    assert _accepts(grammar, "ooo!")
    assert not _accepts(grammar, "s!")


def test_a_grammar_embedding_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.lark").write_text('start: "a" %grammar "b.lark"\n')
    (tmp_path / "b.lark").write_text('start: "b" | "b" %grammar "a.lark"\n')
    with pytest.raises(LarkGrammarError, match=r"embeds itself \(a.lark -> b.lark -> a.lark\)"):
        Grammar.from_lark_file(tmp_path / "a.lark")


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('start: "a" %json {"type": "nonsense"}', 1, 27, r"unknown type .* \(at #/type\)"),
        (
            'start: "a" %json {\n  "properties": {"x": {"type": "nonsense"}}\n} "b"',
            2,
            32,
            "#/properties/x/type",
        ),
        ('start: "a" %json {"type": "integer"', 1, 36, "Expecting ',' delimiter"),
        ('start: "a" %json "schema.json"', 1, 18, "relative path"),
        ('start: "a" %json {} {"whitespace": "wide"}', 1, 21, "%json options"),
        ('start: "a" %json 12', 1, 18, "got 12"),
        ('start: %regex {"substring_words": "a b"}', 1, 15, "structured %regex"),
        ('start: "a" %regex "(?<=a)b"', 1, 19, "lookbehind"),
        ('start: "a" %regex "x*"', 1, 19, "empty string"),
        ('start: A\nA: "x" %json {}', 2, 8, "cannot be part of terminal A"),
        ('%ignore %grammar "x.lark"\nstart: "a"', 1, 9, "in a %ignore statement"),
        ('start: "a" %grammar "x.lark" {"rule": "s"}', 1, 30, "only option of %grammar"),
        # lark's own errors after a multi-line directive keep the text's lines and columns
        ('start: "a" %json {\n "type": "integer"\n} "b" nothere', 3, 7, "'nothere' used but"),
        ('start: "a" %json {\n "type": "integer"\n} "b" )', 3, 7, "Unexpected token"),
    ],
)
def test_error_positions(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(LarkGrammarError, match=message) as info:
        Grammar.from_lark(text)
    assert (info.value.line, info.value.column) == (line, column)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    main = tmp_path / "main.lark"
    main.write_text('start: "a"\n  | %json "none.json"\n')
    with pytest.raises(LarkGrammarError, match="cannot read") as info:
        Grammar.from_lark_file(main)
    assert (info.value.line, info.value.column) == (2, 11)


def test_directive_text_inside_strings_regexes_and_comments_is_not_read() -> None:
    grammar = Grammar.from_lark('start: "%json {" /%regex/ // %grammar "x"\n# %json\n')
    assert _accepts(grammar, "%json {%regex")


# -- random strings against lark's Earley parser with the JSON part checked by jsonschema --------

ITEMS_SCHEMA = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
REFERENCE = r"""
start: "<a>" JSON "</a>"
JSON: /[^<> ](?:[^<>]*[^<> ])?/
%ignore " "
"""
PIECES = ["<a>", "</a>", "[", "]", ",", " ", "1", "-", "0", "12", "a", "[]", '"x"', "1.5"]


def _random_text(rng: random.Random) -> str:
    """A sentence of the composed grammar (or nearly: up to 3 items), then maybe an edit."""
    items = [str(rng.choice([0, 7, -3, 12, 1.5])) for _ in range(rng.randint(0, 3))]
    pad = [rng.choice(["", " ", "  "]) for _ in range(4)]
    text = f"{pad[0]}<a>{pad[1]}[{','.join(items)}]{pad[2]}</a>{pad[3]}"
    for _ in range(rng.choice([0, 0, 1, 2])):
        i = rng.randrange(len(text) + 1)
        edit = rng.choice(["insert", "delete"])
        text = (
            text[:i] + rng.choice(PIECES) + text[i:]
            if edit == "insert"
            else text[:i] + text[i + 1 :]
        )
    return text


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _compact_json_valid(text: str, schema: Any) -> bool:
    """Whether ``schema`` accepts ``text``, compact JSON (no space: none is put in strings)."""
    try:
        value = json.loads(text, parse_constant=_not_json)
    except ValueError:
        return False
    return " " not in text and jsonschema.Draft202012Validator(schema).is_valid(value)


def _reference_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        tree = parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    (token,) = (
        t for t in tree.scan_values(lambda v: isinstance(v, lark.Token)) if t.type == "JSON"
    )
    return _compact_json_valid(str(token), ITEMS_SCHEMA)


def test_random_strings_agree_with_lark_and_jsonschema() -> None:
    grammar = Grammar.from_lark(IGNORED_AROUND)
    compiled = constrain.Compiler(byte_vocabulary()).compile(grammar)
    parser = lark.Lark(REFERENCE, parser="earley", lexer="dynamic_complete")
    rng = random.Random(3)
    texts = {"<a>[1,2]</a>", " <a> [-12] </a>"}
    while len(texts) < 400:
        texts.add(_random_text(rng))
    accepted = 0
    for text in sorted(texts):
        matcher = constrain.Matcher(compiled)
        ours = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        assert ours == _reference_accepts(parser, text), text
        accepted += ours
    assert 20 <= accepted <= len(texts) - 20  # both sides of the language were exercised


# -- masks by brute force on small byte-level vocabularies --------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (TOOL_CALL, ['<tool_call>{"city":"a\\"é"}</tool_call>']),
        (IGNORED_AROUND, [" <a> [1,-20] </a>", "<a>[]</a>"]),
        (SPACED, ['ab={"k": true},c={}']),
        (REGEX, ["12:ab!"]),
    ],
)
def test_masks_equal_brute_force(text: str, sentences: list[str]) -> None:
    grammar = Grammar.from_lark(text)
    recognizer = reference.naive_cfg_recognizer(grammar)
    for vocab in (byte_vocabulary(), tiny_vocabulary()):
        compiled = constrain.Compiler(vocab).compile(grammar)
        for sentence in sentences:
            raw = sentence.encode()
            matcher = constrain.Matcher(compiled)
            for k in range(len(raw) + 1):
                expected = reference.naive_mask(
                    vocab, recognizer.viable, recognizer.accepts, raw[:k]
                )
                assert set(matcher.allowed_token_ids().tolist()) == expected, raw[:k]
                if k < len(raw):
                    assert matcher.accept_bytes(raw[k : k + 1])
            assert matcher.is_accepting()
