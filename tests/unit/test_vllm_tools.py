"""vLLM's server: tool requests, structural tags and reasoning specs (no vLLM needed)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

import constrain
from constrain.errors import GrammarError
from constrain.integrations.vllm import SPEC_KEY, parse_request, request_args, spec_grammar
from constrain.integrations.vllm_reasoning import prompt_reasoning, reasoning_plan
from constrain.integrations.vllm_server import ResponseFormatMiddleware, translate_body
from constrain.integrations.vllm_tools import (
    FieldError,
    ServerSettings,
    server_settings,
    tool_bounds,
    tool_request,
)
from constrain.reasoning import Reasoning
from constrain.testing import byte_vocabulary
from constrain.tools import TOOL_FORMATS

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
        "strict": True,
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
XLAM = ServerSettings("xlam", enable_auto_tool_choice=True)
HERMES = ServerSettings("hermes", enable_auto_tool_choice=True)
OSLO = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
CALL = {
    "smollm2": f"<tool_call>[\n{OSLO}\n]</tool_call>",
    "hermes": f"<tool_call>\n{OSLO}\n</tool_call>",
}


def accepts(spec: str, text: str) -> bool:
    compiled = constrain.Compiler(byte_vocabulary()).compile(spec_grammar(spec))
    m = constrain.Matcher(compiled)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def tool_body(choice: Any = "required", **extra: Any) -> dict[str, Any]:
    return {**CHAT, "tools": [WEATHER, ADD], "tool_choice": choice, **extra}


# -- tools -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "fmt"), [(XLAM, "smollm2"), (HERMES, "hermes")])
def test_required_tool_call_becomes_a_structural_tag_and_auto_for_vllms_parser(
    settings: ServerSettings, fmt: str
) -> None:
    sent = tool_body(parallel_tool_calls=False, vllm_xargs={"other": 1})
    out = translate_body("/v1/chat/completions", sent, settings)
    assert out is not None
    assert out["tool_choice"] == "auto" and "parallel_tool_calls" not in out
    assert "strict" not in out["tools"][0]["function"]  # vLLM would add its own tag for it
    assert out["tools"][1] == ADD and out["vllm_xargs"]["other"] == 1
    spec = out["vllm_xargs"][SPEC_KEY]
    assert accepts(spec, CALL[fmt])
    assert not accepts(spec, "Sure. " + CALL[fmt])  # calls only
    assert not accepts(spec, CALL[fmt].replace('"Oslo"', "3"))  # arguments follow the schema
    assert not accepts(spec, CALL[fmt] + TOOL_FORMATS[fmt].separator + CALL[fmt])  # one call


def test_named_tool_choice_allows_that_tool_only() -> None:
    choice = {"type": "function", "function": {"name": "add"}}
    out = translate_body("/v1/chat/completions", tool_body(choice), XLAM)
    assert out is not None
    spec = out["vllm_xargs"][SPEC_KEY]
    add = '<tool_call>[\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n]</tool_call>'
    assert accepts(spec, add) and not accepts(spec, CALL["smollm2"])


def test_parallel_calls_are_allowed_by_default() -> None:
    out = tool_body()
    translated = translate_body("/v1/chat/completions", out, HERMES)
    assert translated is not None
    two = CALL["hermes"] + "\n" + CALL["hermes"]
    assert accepts(translated["vllm_xargs"][SPEC_KEY], two)


@pytest.mark.parametrize(
    ("body", "settings", "path"),
    [
        (tool_body("auto"), XLAM, "/v1/chat/completions"),
        ({**CHAT, "tools": [WEATHER]}, XLAM, "/v1/chat/completions"),  # no choice: auto
        (tool_body(), ServerSettings(), "/v1/chat/completions"),  # no tool parser
        (tool_body(), ServerSettings("xlam"), "/v1/chat/completions"),  # no auto tool choice
        (tool_body(), ServerSettings("mistral", True), "/v1/chat/completions"),  # not mapped
        (tool_body(), ServerSettings("xlam", True, "function"), "/v1/chat/completions"),
        (tool_body(response_format={"type": "json_object"}), XLAM, "/v1/chat/completions"),
        (tool_body({"type": "function", "function": {"name": "nope"}}), XLAM,
         "/v1/chat/completions"),
        ({**CHAT, "tools": [{"type": "function"}], "tool_choice": "required"}, XLAM,
         "/v1/chat/completions"),
        (tool_body(), XLAM, "/v1/completions"),
    ],
)  # fmt: skip
def test_tool_requests_constrain_does_not_serve_stay_with_vllm(
    body: dict[str, Any], settings: ServerSettings, path: str
) -> None:
    assert translate_body(path, body, settings) is None


def test_a_tool_request_with_a_constrain_entry_is_a_400() -> None:
    sent = tool_body(vllm_xargs=request_args(regex="a"))
    with pytest.raises(ValueError, match="not both"):
        translate_body("/v1/chat/completions", sent, XLAM)


NOTES = {
    "type": "function",
    "function": {
        "name": "take_notes",
        "parameters": {
            "type": "object",
            "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
            "required": ["notes"],
        },
    },
}


def notes_call(notes: list[str]) -> str:
    call = {"name": "take_notes", "arguments": {"notes": notes}}
    return f"<tool_call>[\n{json.dumps(call)}\n]</tool_call>"


def test_vllm_xargs_bounds_close_the_tools_open_arrays_and_strings() -> None:
    xargs = {"constrain_max_items": 2, "constrain_max_length": 3, "other": 1}
    sent = {**CHAT, "tools": [NOTES], "tool_choice": "required", "vllm_xargs": xargs}
    out = translate_body("/v1/chat/completions", sent, XLAM)
    assert out is not None
    assert set(out["vllm_xargs"]) == {"other", SPEC_KEY}  # the bounds are consumed
    spec = out["vllm_xargs"][SPEC_KEY]
    assert accepts(spec, notes_call(["a", "abc"]))
    assert not accepts(spec, notes_call(["a", "b", "c"]))  # 3 items > 2
    assert not accepts(spec, notes_call(["abcd"]))  # 4 characters > 3
    unbounded = translate_body("/v1/chat/completions", {**sent, "vllm_xargs": {}}, XLAM)
    assert unbounded is not None  # the default: the schema as given
    assert accepts(unbounded["vllm_xargs"][SPEC_KEY], notes_call(["a", "b", "c", "abcd"]))


def test_one_bound_alone_and_none() -> None:
    assert tool_bounds({"constrain_max_items": 4}) == {"max_items": 4}
    assert tool_bounds({"constrain_max_length": 32, "x": "y"}) == {"max_length": 32}
    assert tool_bounds({}) == {} and tool_bounds(None) == {} and tool_bounds([1]) == {}


@pytest.mark.parametrize("value", [0, -1, 2.5, "4", True, [4]])
def test_a_malformed_bound_is_a_400_naming_it(value: Any) -> None:
    sent = tool_body(vllm_xargs={"constrain_max_length": value})
    with pytest.raises(FieldError, match="positive int") as err:
        translate_body("/v1/chat/completions", sent, XLAM)
    assert err.value.param == "vllm_xargs.constrain_max_length"


def test_bounds_on_a_request_left_to_vllm_pass_untouched() -> None:
    sent = tool_body("auto", vllm_xargs={"constrain_max_items": 0})
    assert translate_body("/v1/chat/completions", sent, XLAM) is None


def test_server_settings_are_read_from_the_app_state() -> None:
    args = SimpleNamespace(
        tool_call_parser="xlam", enable_auto_tool_choice=True, tool_strict_level="auto"
    )
    scope = {"app": SimpleNamespace(state=SimpleNamespace(args=args))}
    assert server_settings(scope) == XLAM
    assert server_settings(scope).tool_format == "smollm2"
    assert server_settings({}) == ServerSettings() and ServerSettings().tool_format is None


def test_the_middleware_serves_tool_requests_of_the_apps_server() -> None:
    args = SimpleNamespace(tool_call_parser="hermes", enable_auto_tool_choice=True)
    raw = json.dumps(tool_body()).encode()
    received: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        received.append((await receive())["body"])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: Any) -> None:
        raise AssertionError(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"content-type", b"application/json")],
        "app": SimpleNamespace(state=SimpleNamespace(args=args)),
    }
    asyncio.run(ResponseFormatMiddleware(app)(scope, receive, send))
    body = json.loads(received[0])
    assert body["tool_choice"] == "auto" and accepts(body["vllm_xargs"][SPEC_KEY], CALL["hermes"])


def test_tool_request_returns_the_tag_apart() -> None:
    result = tool_request(tool_body(), XLAM)
    assert result is not None
    out, tag = result
    assert tag["type"] == "structural_tag" and "structural_tag" not in out


# -- structural tags -------------------------------------------------------------------------------

TAG_FORMAT = {
    "type": "triggered_tags",
    "triggers": ["<f="],
    "tags": [
        {
            "type": "tag",
            "begin": "<f=a>",
            "content": {"type": "json_schema", "json_schema": {"type": "integer"}},
            "end": "</f>",
        }
    ],
}
TAG = {"type": "structural_tag", "format": TAG_FORMAT}
LEGACY = {
    "type": "structural_tag",
    "structures": [{"begin": "<f=a>", "schema": {"type": "integer"}, "end": "</f>"}],
    "triggers": ["<f="],
}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/chat/completions", {"response_format": TAG}),
        ("/v1/chat/completions", {"response_format": LEGACY}),
        ("/v1/completions", {"structured_outputs": {"structural_tag": json.dumps(TAG)}}),
        ("/v1/completions", {"structured_outputs": {"structural_tag": TAG}}),
    ],
)
def test_structural_tags_become_the_constrain_spec(path: str, field: dict[str, Any]) -> None:
    out = translate_body(path, {**CHAT, **field})
    assert out is not None and not set(field) & set(out)
    spec = out["vllm_xargs"][SPEC_KEY]
    assert accepts(spec, "so <f=a>12</f> done")
    assert not accepts(spec, "so <f=a>x</f>")


def test_a_malformed_structural_tag_field_is_a_400() -> None:
    sent = {**CHAT, "structured_outputs": {"structural_tag": "{not json"}}
    with pytest.raises(ValueError, match="structured_outputs.structural_tag"):
        translate_body("/v1/chat/completions", sent)


def test_request_args_and_admission_of_structural_tags() -> None:
    spec = request_args(structural_tag=json.dumps(TAG))[SPEC_KEY]
    assert parse_request({SPEC_KEY: spec}) == spec
    assert accepts(spec, "<f=a>1</f>")
    with pytest.raises(GrammarError):
        spec_grammar(request_args(structural_tag={"type": "structural_tag", "format": 3})[SPEC_KEY])
    # a special token is resolved in the worker's vocabulary: admission builds the grammar only
    from constrain.integrations.vllm import _check_spec

    token = {"type": "structural_tag", "format": {"type": "token", "token": "<|im_end|>"}}
    _check_spec(request_args(structural_tag=token)[SPEC_KEY])


# -- reasoning ---------------------------------------------------------------------------------


def test_a_reasoning_entry_puts_free_reasoning_before_the_constraint() -> None:
    spec = json.loads(request_args(regex=r"\d{3}")[SPEC_KEY])
    closed = json.dumps({**spec, "reasoning": {"start": "<think>", "end": "</think>"}})
    assert parse_request({SPEC_KEY: closed}) is not None
    assert accepts(closed, "<think>any <text> here</think>\n\n123")
    assert not accepts(closed, "123") and not accepts(closed, "<think>a</think>x")
    opened = json.dumps({**spec, "reasoning": {"opened": True}})
    assert accepts(opened, "thinking...</think>123") and not accepts(opened, "a</think>x")
    budget = json.dumps({**spec, "reasoning": {"max_chars": 3}})
    assert accepts(budget, "<think>abc</think>123") and not accepts(budget, "<think>abcd</think>1")


@pytest.mark.parametrize(
    "value", [3, {"start": 1}, {"opened": "yes"}, {"max_chars": "3"}, {"other": 1}]
)
def test_a_malformed_reasoning_entry_is_a_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        reasoning_plan(value)


class Decoder:
    """A tokenizer whose ids are characters."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("user: hi\nassistant:", {"opened": False}),
        ("assistant:<think>\n", {"opened": True}),
        ("assistant:<think></think>", None),  # thinking switched off
        (None, {"opened": False}),
    ],
)
def test_prompt_reasoning_reads_whether_the_prompt_opened_the_block(
    prompt: str | None, expected: dict[str, Any] | None
) -> None:
    ids = None if prompt is None else [ord(c) for c in prompt]
    # the tail is the last 8 ids: one character each here
    entry = prompt_reasoning(Reasoning(), Decoder(), ids)
    if expected is None:
        assert entry is None
    else:
        assert entry == {"start": "<think>", "end": "</think>", **expected}
