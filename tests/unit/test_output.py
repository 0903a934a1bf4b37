"""constrain.output: constraint keywords -> grammar + parser, and the final validation."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from pathlib import Path
from typing import Any, Literal

import lark
import pydantic
import pytest
from typing_extensions import TypedDict

from constrain import Compiler, Grammar, Matcher, OutputValidationError
from constrain.frontends.lark import without_option_lines
from constrain.output import OutputType, output_type
from constrain.testing import byte_vocabulary

_COMPILER = Compiler(byte_vocabulary())


def _accepts(ot: OutputType, text: str) -> bool:
    m = Matcher(_COMPILER.compile(ot.grammar))
    return m.accept_bytes(text) and m.is_accepting()


def _spaced(text: str) -> str:
    """``text`` in the layout schema outputs have by default (json.dumps's separators)."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


def _check(ot: OutputType, valid: str, invalid: str) -> Any:
    """The grammar and the parser agree on one valid and one invalid text; return the value.

    JSON texts are checked in the default layout (``", "``, ``": "``), so the invalid one is
    rejected for its content, not its spacing.
    """
    if ot.kind in ("json", "pydantic", "type"):
        valid, invalid = _spaced(valid), _spaced(invalid)
    assert _accepts(ot, valid), valid
    assert not _accepts(ot, invalid), invalid
    with pytest.raises(OutputValidationError, match="bug in constrain") as info:
        ot.parse(invalid)
    assert info.value.text == invalid
    return ot.parse(valid)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(pydantic.BaseModel):
    x: int = pydantic.Field(ge=0, le=9)
    y: int


class Shape(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=8)
    color: Color
    points: list[Point] = pydantic.Field(max_length=3)


class Movie(TypedDict):
    title: str
    year: int


@dataclasses.dataclass
class Pair:
    left: int
    right: bool


OBJECT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["id"],
    "additionalProperties": False,
}

# --------------------------------------------------------------------------------------------
# Keywords


def test_exactly_one_keyword() -> None:
    with pytest.raises(TypeError, match="got none"):
        output_type()
    with pytest.raises(TypeError, match="schema, regex"):
        output_type(schema={"type": "integer"}, regex="a")
    with pytest.raises(TypeError, match="grammar, choices"):
        output_type(grammar="json", choices=["a"])


@pytest.mark.parametrize("kwargs", [{"regex": "a+"}, {"grammar": "json"}, {"choices": ["a", "b"]}])
def test_json_options_only_with_schema(kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="json_options"):
        output_type(**kwargs, json_options={"whitespace": "flexible"})
    # empty options are no options
    assert output_type(**kwargs, json_options={}).kind in {"regex", "grammar", "choices"}


# --------------------------------------------------------------------------------------------
# schema=


def test_pydantic_model_gives_an_instance() -> None:
    ot = output_type(schema=Shape)
    assert (ot.kind, ot.description) == ("pydantic", "Shape")
    valid = '{"name":"tri","color":"red","points":[{"x":1,"y":-2},{"x":9,"y":0}]}'
    invalid = '{"name":"tri","color":"blue","points":[]}'
    value = _check(ot, valid, invalid)
    assert isinstance(value, Shape)
    assert value.color is Color.RED
    assert value.points == [Point(x=1, y=-2), Point(x=9, y=0)]
    # the bounds are in the grammar, not only in the validator
    for bad in (
        '{"name":"tri","color":"red","points":[{"x":10,"y":0}]}',
        '{"name":"123456789","color":"red","points":[]}',
        '{"name":"t","color":"red","points":[' + ",".join(['{"x":1,"y":1}'] * 4) + "]}",
    ):
        assert not _accepts(ot, _spaced(bad)), bad
        with pytest.raises(OutputValidationError):
            ot.parse(bad)


@pytest.mark.parametrize(
    ("schema", "valid", "invalid", "value"),
    [
        (list[int], "[1,-2,3]", "[1,2.5]", [1, -2, 3]),
        (Literal["yes", "no"], '"no"', '"maybe"', "no"),
        (Movie, '{"title":"Up","year":2009}', '{"title":"Up"}', {"title": "Up", "year": 2009}),
        (Pair, '{"left":3,"right":true}', '{"left":3}', Pair(3, True)),
        (dict[str, float], '{"a":1.5}', '{"a":"x"}', {"a": 1.5}),
    ],
)
def test_type_adapter_types_give_the_validated_value(
    schema: Any, valid: str, invalid: str, value: Any
) -> None:
    ot = output_type(schema=schema)
    assert ot.kind == "type"
    got = _check(ot, valid, invalid)
    assert got == value
    assert type(got) is type(value)


def test_json_schema_dict_text_and_file(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(OBJECT_SCHEMA), encoding="utf-8")
    variants = [
        (OBJECT_SCHEMA, "JSON Schema"),
        (json.dumps(OBJECT_SCHEMA), "JSON Schema text"),
        ("  " + json.dumps(OBJECT_SCHEMA, indent=2), "JSON Schema text"),
        (path, str(path)),
        (str(path), str(path)),
    ]
    for schema, label in variants:
        ot = output_type(schema=schema)
        assert (ot.kind, ot.description) == ("json", label)
        value = _check(ot, '{"id":7,"tags":["b","a"]}', '{"id":7,"extra":1}')
        assert value == {"id": 7, "tags": ["b", "a"]}
        with pytest.raises(OutputValidationError, match="not JSON"):
            ot.parse('{"id":')
        with pytest.raises(OutputValidationError, match="/tags/0"):
            ot.parse('{"id":1,"tags":["c"]}')


def test_boolean_json_schemas() -> None:
    ot = output_type(schema=True)
    assert ot.parse('{"any": [1, null]}') == {"any": [1, None]}
    assert _accepts(ot, "[1, 2]")
    ot_text = output_type(schema="true")
    assert ot_text.parse("3") == 3


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="neither JSON text nor an existing file"):
        output_type(schema=str(tmp_path / "nope.json"))
    with pytest.raises(FileNotFoundError):
        output_type(schema=tmp_path / "nope.json")


def test_json_options_are_passed_through() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": 3}
    compact = output_type(schema=schema, json_options={"whitespace": "compact"})
    spaced = output_type(schema=schema)  # the default: json.dumps's separators
    flexible = output_type(schema=schema, json_options={"whitespace": "flexible"})
    assert _accepts(compact, "[1,2]")
    assert not _accepts(compact, "[1, 2]")
    assert _accepts(spaced, "[1, 2]")
    assert not _accepts(spaced, "[1,2]") and not _accepts(spaced, "[ 1, 2]")
    assert spaced.parse("[1, 2]") == [1, 2]
    assert _accepts(flexible, "[ 1 ,2]")
    assert not _accepts(flexible, "[1,     2]")  # at most max_whitespace (4) characters
    # also for pydantic types
    assert _accepts(output_type(schema=list[int]), "[1, 2]")
    loose = output_type(schema=list[int], json_options={"whitespace": "flexible"})
    assert _accepts(loose, "[ 1 ]")
    tight = output_type(schema=list[int], json_options={"whitespace": "compact"})
    assert not _accepts(tight, "[ 1 ]")
    with pytest.raises(TypeError):
        output_type(schema=schema, json_options={"no_such_option": True})


def test_formats_ignore_also_relaxes_the_final_check() -> None:
    schema = {"type": "string", "format": "date"}
    strict = output_type(schema=schema)
    assert strict.parse('"2024-02-29"') == "2024-02-29"
    assert not _accepts(strict, '"tomorrow"')
    with pytest.raises(OutputValidationError, match="date"):
        strict.parse('"tomorrow"')
    relaxed = output_type(schema=schema, json_options={"formats": "ignore"})
    assert _accepts(relaxed, '"tomorrow"')
    assert relaxed.parse('"tomorrow"') == "tomorrow"


# --------------------------------------------------------------------------------------------
# regex=, grammar=, choices=


@pytest.mark.parametrize(
    ("pattern", "valid", "invalid"),
    [
        (r"\d{3}-\d{4}", "555-1234", "555-12345"),
        (r"(cat|dog)s?", "dogs", "dogss"),
        (r"[A-Z][a-z]*( [A-Z][a-z]*)*", "New York", "new York"),
        (r"é+€", "éé€", "€"),
    ],
)
def test_regex_is_a_fullmatch(pattern: str, valid: str, invalid: str) -> None:
    ot = output_type(regex=pattern)
    assert (ot.kind, ot.description) == ("regex", pattern)
    assert re.fullmatch(pattern, valid) and not re.fullmatch(pattern, invalid)
    assert _check(ot, valid, invalid) == valid
    # a prefix or an embedded match is not enough
    with pytest.raises(OutputValidationError, match="does not match"):
        ot.parse(valid + "!")


def test_regex_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="regex"):
        output_type(regex=re.compile("a"))  # type: ignore[arg-type]


def test_shipped_grammars_by_name() -> None:
    sql = output_type(grammar="sql")
    assert (sql.kind, sql.description) == ("grammar", "sql")
    assert _check(sql, "SELECT a, b FROM t WHERE a = 1", "SELECT FROM WHERE") == (
        "SELECT a, b FROM t WHERE a = 1"
    )
    js = output_type(grammar="json")
    assert _check(js, '{"a": [1, true, null]}', '{"a": [1, true, null]') == '{"a": [1, true, null]}'
    with pytest.raises(ValueError, match="no built-in grammar"):
        output_type(grammar="no_such_grammar")


def test_ebnf_text_is_read_as_ebnf() -> None:
    ebnf = output_type(grammar='root ::= pair ("," pair)*\npair ::= [a-z]+ "=" [0-9]+')
    assert ebnf.kind == "grammar"
    assert _check(ebnf, "a=1,bc=22", "a=1,") == "a=1,bc=22"


LARK_TEXT = """
start: pair ("," pair)*
pair: KEY "=" VALUE
KEY: /[a-z]+/
VALUE: /[0-9]+/
"""


def test_lark_file_text_and_grammar_object(tmp_path: Path) -> None:
    path = tmp_path / "pairs.lark"
    path.write_text(LARK_TEXT, encoding="utf-8")
    variants = [
        (path, str(path)),
        (str(path), str(path)),
        (LARK_TEXT, "Lark grammar"),
        (Grammar.from_lark(LARK_TEXT), "grammar"),
        (Grammar.from_lark_file(path), "grammar"),
    ]
    for spec, label in variants:
        ot = output_type(grammar=spec)
        assert (ot.kind, ot.description) == ("grammar", label)
        assert _check(ot, "a=1,bc=23", "a=1,") == "a=1,bc=23"
        with pytest.raises(OutputValidationError, match="lark cannot parse"):
            ot.parse("a=x")


def test_grammar_object_with_another_start_rule() -> None:
    grammar = Grammar.from_lark('query: "a"+ "b"\n', start="query")
    ot = output_type(grammar=grammar)
    assert _check(ot, "aab", "aa b") == "aab"


def test_lark_file_imports_resolve_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "words.lark").write_text("WORD: /[a-z]+/\n", encoding="utf-8")
    path = tmp_path / "main.lark"
    path.write_text('%import .words.WORD\nstart: WORD (" " WORD)*\n', encoding="utf-8")
    ot = output_type(grammar=path)
    assert _check(ot, "hello world", "hello  world") == "hello world"


def test_missing_lark_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        output_type(grammar=str(tmp_path / "missing.lark"))
    with pytest.raises(FileNotFoundError):
        output_type(grammar=tmp_path / "missing.lark")


def test_grammar_object_without_lark_text_is_checked_on_bytes() -> None:
    # open object schemas use intersection in their terminals (a key other than the declared
    # ones), which Lark text cannot express
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    grammar = Grammar.from_json_schema(schema)
    with pytest.raises(Exception, match="intersection"):
        grammar.to_lark()
    ot = output_type(grammar=grammar)
    assert ot.kind == "grammar"
    assert _check(ot, '{"id":1,"tags":["a"]}', '{"tags":["a"]}') == '{"id":1,"tags":["a"]}'
    with pytest.raises(OutputValidationError, match="not a sentence of the grammar"):
        ot.parse('{"id":1,"id":2}')


def test_grammar_validation_is_independent_lark() -> None:
    # the final check of a shipped grammar is lark's own Earley parser on the shipped file
    ot = output_type(grammar="sql")
    folder = Path(__file__).resolve().parents[2] / "grammars"
    text = without_option_lines((folder / "sql.lark").read_text())  # constrain's lines
    parser = lark.Lark(text, parser="earley", import_paths=[folder])
    for text in ("SELECT a FROM t", "SELECT * FROM t WHERE x > 2 ORDER BY x"):
        parser.parse(text)
        assert ot.parse(text) == text


def test_choices() -> None:
    ot = output_type(choices=["red", "green", "red", "greenish"])
    assert (ot.kind, ot.description) == ("choices", "one of 3 strings")
    assert _check(ot, "green", "gree") == "green"
    assert _accepts(ot, "greenish")
    assert ot.parse("greenish") == "greenish"
    assert not _accepts(ot, "blue")
    with pytest.raises(OutputValidationError, match="not one of the choices"):
        ot.parse("blue")
    # regex metacharacters are literal
    meta = output_type(choices=["a.b", "(x)"])
    assert _check(meta, "a.b", "axb") == "a.b"
    assert meta.parse("(x)") == "(x)"


def test_choices_errors() -> None:
    with pytest.raises(ValueError, match="at least one"):
        output_type(choices=[])
    with pytest.raises(TypeError, match="strings"):
        output_type(choices=["a", 1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="strings"):
        output_type(choices="ab")


def test_parse_errors_say_it_is_a_bug() -> None:
    cases = [
        (output_type(schema=Point), '{"x":1}'),
        (output_type(schema=list[int]), "[1.5]"),
        (output_type(schema={"type": "integer", "maximum": 3}), "4"),
        (output_type(regex="a+"), "b"),
        (output_type(grammar="json"), "{"),
        (output_type(choices=["a"]), "b"),
    ]
    for ot, bad in cases:
        with pytest.raises(OutputValidationError) as info:
            ot.parse(bad)
        assert "this is a bug in constrain" in str(info.value)
        assert info.value.text == bad


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "number", "multipleOf": 1e-12}, "0.684"),  # 0.684 / 1e-12 is not exact in binary
        ({"type": "number", "multipleOf": 0.1}, "0.3"),  # 0.3 / 0.1 = 2.9999999999999996
        ({"type": "number", "multipleOf": 0.01}, "-1234567890123.47"),
        ({"type": "number", "minimum": 0.1}, "0.1"),
        ({"type": "number", "exclusiveMinimum": 0.1}, "0.1000000000001"),
        ({"type": "number", "multipleOf": 0.7, "maximum": 2.1}, "2.1"),
    ],
)
def test_numbers_the_grammar_accepts_pass_the_final_check(
    schema: dict[str, Any], text: str
) -> None:
    ot = output_type(schema=schema)
    m = Matcher(Compiler(byte_vocabulary()).compile(ot.grammar))
    assert m.accept_bytes(text) and m.is_accepting()  # the grammar's decimal arithmetic
    assert ot.parse(text) == json.loads(text)  # the check agrees; the value is a plain float
    assert type(ot.parse(text)) is type(json.loads(text))


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "number", "multipleOf": 0.1}, "0.35"),
        ({"type": "number", "multipleOf": 1e-12}, "0.0000000000001"),
        ({"type": "number", "exclusiveMaximum": 0.3}, "0.3"),
        ({"type": "number", "minimum": 0.1}, "0.09999999999999999"),
    ],
)
def test_numbers_the_grammar_rejects_fail_the_final_check(
    schema: dict[str, Any], text: str
) -> None:
    ot = output_type(schema=schema)
    m = Matcher(Compiler(byte_vocabulary()).compile(ot.grammar))
    assert not (m.accept_bytes(text) and m.is_accepting())
    with pytest.raises(OutputValidationError):
        ot.parse(text)


def test_grammar_with_constrain_directives_is_checked_by_its_automaton() -> None:
    """%json is not Lark: the final check uses the grammar's own automaton (lark raised)."""
    schema = '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}'
    out = output_type(grammar=f'start: "CALL " %json {schema}\n')
    assert out.parse('CALL {"a":5}') == 'CALL {"a":5}'
    with pytest.raises(OutputValidationError):
        out.parse('CALL {"b":5}')
    with pytest.raises(OutputValidationError):
        out.parse("CALL 5")
