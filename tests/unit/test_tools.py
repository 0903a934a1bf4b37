"""Tool calls: tools from functions, pydantic models and OpenAI dicts; the structural tag of each
format and tool choice (its language, through constrain's own matcher); calls read back."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel

from constrain import Compiler, Grammar, Matcher, OutputValidationError
from constrain.frontends.json_schema.open_ends import close_open_ends, open_ends
from constrain.request import GenerationOptions
from constrain.testing import byte_vocabulary
from constrain.tools import (
    TOOL_FORMATS,
    as_tool,
    parse_tool_calls,
    tool_structural_tag,
    tool_system_prompt,
)


class Unit(str, Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def get_weather(city: str, unit: Unit = Unit.CELSIUS) -> str:
    """Return the weather in a city.

    Ignored: only the first paragraph is the description.
    """
    return f"sunny in {city}, 20 degrees {unit.value}"


class Search(BaseModel):
    """Search the web."""

    query: str
    limit: int | None = None


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOLS: list[Any] = [get_weather, Search, ADD]
COMPILER = Compiler(byte_vocabulary())
# Formats whose prose stands around the calls (Harmony's answer is a message of its own:
# tests/unit/test_tool_formats.py)
PROSE_FORMATS = sorted(f for f, fmt in TOOL_FORMATS.items() if not fmt.answer_begin)


def accepts(spec: dict[str, Any], text: str) -> bool:
    matcher = Matcher(COMPILER.compile(Grammar.from_structural_tag(spec)))
    return matcher.accept_bytes(text.encode()) and matcher.is_accepting()


def calls_text(fmt: str, *calls: tuple[str, str]) -> str:
    f = TOOL_FORMATS[fmt]
    written = [f.begin(name) + args + f.call_end for name, args in calls]
    joined = f.separator.join(written)
    return f.block_begin + joined + f.block_end if f.block_begin else joined


def test_tools_from_functions_models_and_dicts() -> None:
    weather = as_tool(get_weather)
    assert weather.name == "get_weather"
    assert weather.description == "Return the weather in a city."
    assert weather.parameters["required"] == ["city"]
    search = as_tool(Search)
    assert (search.name, search.description) == ("Search", "Search the web.")
    assert set(search.parameters["properties"]) == {"query", "limit"}
    add = as_tool(ADD)
    assert add.parameters == ADD["function"]["parameters"] and add.model is None
    assert as_tool(add) is add
    assert add.openai() == ADD | {"function": ADD["function"]}


def test_tools_refuse_what_they_cannot_describe() -> None:
    def variadic(*args: int) -> None: ...

    with pytest.raises(TypeError, match="passable by keyword"):
        as_tool(variadic)
    with pytest.raises(TypeError, match="a tool is a function"):
        as_tool(42)
    with pytest.raises(ValueError, match="OpenAI tool dict"):
        as_tool({"type": "function", "function": {"description": "no name"}})
    with pytest.raises(ValueError, match="object schema"):
        as_tool({"name": "f", "parameters": {"type": "array"}})


@pytest.mark.parametrize("fmt", PROSE_FORMATS)
def test_the_language_of_each_format_and_choice(fmt: str) -> None:
    one = calls_text(fmt, ("add", '{"a": 1, "b": 2}'))
    two = calls_text(
        fmt, ("get_weather", '{"city": "Paris", "unit": "celsius"}'), ("add", '{"a": 1, "b": 2}')
    )
    bad_args = calls_text(fmt, ("add", '{"a": 1}'))  # b is required
    bad_type = calls_text(fmt, ("add", '{"a": 1, "b": "2"}'))
    unknown = calls_text(fmt, ("mul", '{"a": 1, "b": 2}'))
    expected = {
        # choice, parallel: prose, one call, two calls, prose then a call
        ("auto", True): (True, True, True, True),
        ("auto", False): (True, True, False, True),
        ("required", True): (False, True, True, False),
        ("required", False): (False, True, False, False),
        ("none", True): (True, False, False, False),
        ("named", True): (False, True, False, False),
    }
    for (choice, parallel), want in expected.items():
        tool_choice: Any = {"name": "add"} if choice == "named" else choice
        spec = tool_structural_tag(TOOLS, tool_choice=tool_choice, parallel=parallel, format=fmt)
        got = tuple(accepts(spec, t) for t in ("Hello.", one, two, "Sure. " + one))
        assert got == want, (fmt, choice, parallel)
        for wrong in (bad_args, bad_type, unknown):
            assert not accepts(spec, wrong), (fmt, choice, wrong)


@pytest.mark.parametrize("fmt", PROSE_FORMATS)
def test_calls_are_read_back_validated(fmt: str) -> None:
    text = "Let me check. " + calls_text(
        fmt, ("get_weather", '{"city": "Paris"}'), ("Search", '{"query": "news", "limit": 3}')
    )
    prose, calls = parse_tool_calls(text, TOOLS, fmt)
    assert prose == "Let me check."
    assert [c.name for c in calls] == ["get_weather", "Search"]
    assert calls[0].arguments.city == "Paris" and calls[0].arguments.unit is Unit.CELSIUS
    assert calls[0]() == "sunny in Paris, 20 degrees celsius"
    assert isinstance(calls[1].arguments, Search) and calls[1].arguments.limit == 3
    with pytest.raises(TypeError, match="nothing to call"):
        calls[1]()
    assert parse_tool_calls("No tools needed.", TOOLS, fmt) == ("No tools needed.", [])
    with pytest.raises(OutputValidationError, match="tool 'add'"):
        parse_tool_calls(calls_text(fmt, ("add", '{"a": 1}')), TOOLS, fmt)
    with pytest.raises(OutputValidationError, match="no known tool"):
        parse_tool_calls(calls_text(fmt, ("mul", "{}")), TOOLS, fmt)


def test_tool_choice_is_checked() -> None:
    with pytest.raises(ValueError, match="not a tool"):
        tool_structural_tag(TOOLS, tool_choice={"name": "mul"})
    with pytest.raises(ValueError, match="tool_choice is"):
        tool_structural_tag(TOOLS, tool_choice="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one tool"):
        tool_structural_tag([], tool_choice="required")
    with pytest.raises(ValueError, match="unknown tool format"):
        tool_structural_tag(TOOLS, format="chatml")
    named = tool_structural_tag(
        TOOLS, tool_choice={"type": "function", "function": {"name": "add"}}
    )
    assert accepts(named, calls_text("hermes", ("add", '{"a": 1, "b": 2}')))


def test_the_system_prompt_lists_every_tool() -> None:
    for fmt in TOOL_FORMATS:
        prompt = tool_system_prompt(TOOLS, fmt)
        assert "{tools}" not in prompt
        for tool in map(as_tool, TOOLS):
            assert f'"name": "{tool.name}"' in prompt
    assert "<tool_call>[\n" in tool_system_prompt(TOOLS, "smollm2")
    assert tool_system_prompt(TOOLS, "mistral").startswith("[AVAILABLE_TOOLS][")


def test_open_arrays_and_strings_are_bounded_only_on_request() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "to": {"type": "array", "items": {"type": "string"}},
            "code": {"type": "string", "pattern": "^x"},
            "few": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/Name"}},
            "tag": {"enum": ["a", "b"]},
        },
        "$defs": {"Name": {"type": "string"}},
    }
    assert close_open_ends(schema) is schema
    closed = close_open_ends(schema, max_items=3, max_length=5)
    props = closed["properties"]
    assert props["to"] == {"type": "array", "items": {"type": "string", "maxLength": 5}} | {
        "maxItems": 3
    }
    assert props["code"] == schema["properties"]["code"]  # a pattern closes it already
    assert props["few"]["maxItems"] == 2 and props["tag"] == {"enum": ["a", "b"]}
    assert closed["$defs"]["Name"] == {"type": "string", "maxLength": 5}
    assert "maxItems" not in schema["properties"]["to"]  # a copy
    assert not [s for s in open_ends(closed) if "array" in s or "string" in s]
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="positive int"):
            close_open_ends(schema, max_items=bad)


def test_tool_arguments_bounds() -> None:
    tags = {
        "type": "function",
        "function": {
            "name": "tag",
            "parameters": {
                "type": "object",
                "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                "required": ["names"],
            },
        },
    }
    three, four = (calls_text("hermes", ("tag", json.dumps({"names": ["a"] * n}))) for n in (3, 4))
    open_spec = tool_structural_tag([tags], tool_choice="required")
    assert accepts(open_spec, three) and accepts(open_spec, four)  # the default: as the schema
    bounded = tool_structural_tag([tags], tool_choice="required", max_items=3, max_length=1)
    assert accepts(bounded, three) and not accepts(bounded, four)
    long_name = calls_text("hermes", ("tag", json.dumps({"names": ["ab"]})))
    assert not accepts(bounded, long_name)
    assert parse_tool_calls(four, [tags])[1][0].arguments == {"names": ["a"] * 4}
    # generate(tools=...) takes these two json_options and no other
    assert GenerationOptions(tools=[tags], json_options={"max_items": 3}).tool_bounds == {
        "max_items": 3
    }
    with pytest.raises(TypeError, match="max_items and max_length"):
        GenerationOptions(tools=[tags], json_options={"whitespace": "compact"})
    with pytest.raises(ValueError, match="positive int"):
        GenerationOptions(tools=[tags], json_options={"max_length": 0})
