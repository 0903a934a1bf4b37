"""Tool calls and structural tags through vLLM's OpenAI server, served by constrain.

The `server` fixture (conftest.py) runs with ``--enable-auto-tool-choice --tool-call-parser
xlam``: the middleware turns ``tool_choice="required"`` (or a named function) into constrain's
structural tag of SmolLM2's call format, and vLLM's own xlam parser reads the output back into
``message.tool_calls``. The prompts are the 40 of ``benchmarks/tool_calls.py``, run as given and
with the benchmark's bounds of the tools' open arrays and strings (``vllm_xargs``
``constrain_max_items`` 4, ``constrain_max_length`` 32).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from vllm_cases import CASES, TOOL_PARSER, TOOLS, post

from constrain.integrations.vllm_tools import TOOL_PARSER_FORMATS
from constrain.tools import as_tool, tool_system_prompt

FORMAT = TOOL_PARSER_FORMATS[TOOL_PARSER]


def tool_body(prompt: str, names: list[str], choice: Any, **extra: Any) -> dict[str, Any]:
    """A chat request offering ``names`` (listed in the system prompt, as SmolLM2 reads them)."""
    tools = [TOOLS[n] for n in names]
    return {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": tool_system_prompt(tools, FORMAT)},
            {"role": "user", "content": prompt},
        ],
        "tools": [as_tool(t).openai() for t in tools],
        "tool_choice": choice,
        "max_tokens": 200,
        "temperature": 0.0,
        "frequency_penalty": 0.3,
        "parallel_tool_calls": False,
        **extra,
    }


def valid_calls(message: dict[str, Any], names: list[str]) -> list[str]:
    """Return the called names, checking each call's arguments against its tool's schema."""
    tools = {n: as_tool(TOOLS[n]) for n in names}
    called = []
    for call in message["tool_calls"]:
        assert call["type"] == "function", call
        tool = tools[call["function"]["name"]]
        tool.validate(json.loads(call["function"]["arguments"]))  # raises if invalid
        called.append(tool.name)
    return called


# the bounds of benchmarks/tool_calls.py (json_options max_items 4, max_length 32), sent as
# vllm_xargs entries the middleware reads; None: the schemas as given (the default)
BOUNDS = {"constrain_max_items": 4, "constrain_max_length": 32}


@pytest.mark.parametrize(
    ("bounds", "most_cut"), [(None, 4), (BOUNDS, 0)], ids=["unbounded", "bounded"]
)
def test_required_tool_calls_of_the_40_prompts_parse_with_vllms_parser(
    server: str, bounds: dict[str, int] | None, most_cut: int
) -> None:
    extra = {} if bounds is None else {"vllm_xargs": bounds}

    def ask(case: tuple[str, list[str], Any]) -> tuple[int, dict[str, Any]]:
        return post(server, "/v1/chat/completions", tool_body(*case[:2], "required", **extra))

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, CASES))
    ended = parsed = intended = 0
    cut: list[str] = []
    for (prompt, names, expected), (status, body) in zip(CASES, results, strict=True):
        assert status == 200, (prompt, body)
        choice = body["choices"][0]
        if choice["finish_reason"] == "length":  # cut by max_tokens inside the arguments
            cut.append(prompt)
            continue
        ended += 1
        message = choice["message"]
        assert choice["finish_reason"] == "tool_calls", (prompt, choice)
        assert len(message["tool_calls"]) == 1, (prompt, message)  # parallel_tool_calls=False
        intended += valid_calls(message, names) == [expected]
        assert not (message.get("content") or "").strip(), message
        parsed += 1
    print(f"\ntool_choice=required, bounds {bounds}, {len(CASES)} prompts: {ended} ended, "
          f"{parsed} parsed by vLLM's {TOOL_PARSER} parser and valid ({intended} on the "
          f"intended tool); cut by max_tokens: {cut}")  # fmt: skip
    assert parsed == ended and ended >= len(CASES) - most_cut, cut


def test_named_tool_choice_calls_that_tool(server: str) -> None:
    choice = {"type": "function", "function": {"name": "search_web"}}
    body = tool_body("Find a hotel in Madrid.", ["get_weather", "search_web"], choice)
    status, out = post(server, "/v1/chat/completions", body)
    assert status == 200, out
    message = out["choices"][0]["message"]
    assert valid_calls(message, ["get_weather", "search_web"]) == ["search_web"], message


def test_parallel_calls_when_allowed(server: str) -> None:
    body = tool_body(
        "Weather in Rome and in Oslo.", ["get_weather"], "required", parallel_tool_calls=True
    )
    status, out = post(server, "/v1/chat/completions", body)
    assert status == 200, out
    choice = out["choices"][0]
    if choice["finish_reason"] != "length":
        assert valid_calls(choice["message"], ["get_weather"]), choice


def test_auto_tool_choice_stays_with_vllm_and_a_bad_tool_choice_is_vllms_400(
    server: str,
) -> None:
    status, out = post(server, "/v1/chat/completions", tool_body("Say hello.", ["add"], "auto"))
    assert status == 200, out
    choice = {"type": "function", "function": {"name": "not_a_tool"}}
    status, out = post(server, "/v1/chat/completions", tool_body("Hi.", ["add"], choice))
    assert status == 400, out


def test_a_malformed_bound_is_the_middlewares_400(server: str) -> None:
    body = tool_body("Hi.", ["add"], "required", vllm_xargs={"constrain_max_items": 0})
    status, out = post(server, "/v1/chat/completions", body)
    assert status == 400 and out["error"]["param"] == "vllm_xargs.constrain_max_items", out


ARGS_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}


@pytest.mark.parametrize("field", ["response_format", "structured_outputs"])
def test_structural_tag_request(server: str, field: str) -> None:
    fmt = {
        "type": "sequence",
        "elements": [
            {"type": "const_string", "value": "Forecast: "},
            {
                "type": "tag",
                "begin": "<forecast>",
                "content": {"type": "json_schema", "json_schema": ARGS_SCHEMA},
                "end": "</forecast>",
            },
        ],
    }
    tag = {"type": "structural_tag", "format": fmt}
    extra = (
        {"response_format": tag}
        if field == "response_format"
        else {"structured_outputs": {"structural_tag": json.dumps(tag)}}
    )
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "What is the weather in Lisbon for 3 days?"}],
        "max_tokens": 60,
        "temperature": 0.0,
        **extra,
    }
    status, out = post(server, "/v1/chat/completions", body)
    assert status == 200, out
    choice = out["choices"][0]
    text = choice["message"]["content"]
    assert choice["finish_reason"] == "stop", text
    assert text.startswith("Forecast: <forecast>") and text.endswith("</forecast>"), text
    import jsonschema

    jsonschema.validate(
        json.loads(text[len("Forecast: <forecast>") : -len("</forecast>")]), ARGS_SCHEMA
    )


def test_legacy_structural_tag_response_format(server: str) -> None:
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<forecast>", "schema": ARGS_SCHEMA, "end": "</forecast>"}],
        "triggers": ["<forecast>"],
    }
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Write <forecast> and the Lisbon forecast."}],
        "max_tokens": 60,
        "temperature": 0.0,
        "response_format": tag,
    }
    status, out = post(server, "/v1/chat/completions", body)
    assert status == 200, out
    text = out["choices"][0]["message"]["content"] or ""
    start = text.find("<forecast>")
    if start >= 0 and out["choices"][0]["finish_reason"] == "stop":
        end = text.index("</forecast>", start)
        json.loads(text[start + len("<forecast>") : end])
