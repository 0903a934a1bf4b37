"""A vLLM server started with ``--reasoning-parser deepseek_r1``: free reasoning, then constrain.

The model is SmolLM2 with ``<think>`` and ``</think>`` tokens (``reasoning_model_path`` in
conftest.py) and a DeepSeek-R1-style chat template that opens the block after the assistant
header. The 135M model never ends its reasoning by itself: vLLM's ``thinking_token_budget``
forces ``</think>``, which constrain's grammar allows anywhere inside the block; after it only the
constraint is allowed. vLLM's reasoning parser splits the output into ``message.reasoning`` and
``message.content`` (and, with tools, its tool parser reads the calls from the content).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from vllm_cases import ITEM_SCHEMA, PHONE, TOOL_PARSER, post
from vllm_serve import serve

from constrain.integrations.vllm import request_args
from constrain.integrations.vllm_tools import TOOL_PARSER_FORMATS
from constrain.tools import tool_system_prompt

# SmolLM2's template, with the block opened after the assistant header (as DeepSeek-R1's does)
TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n<think>\n' }}{% endif %}"
)
BUDGET = 12  # thinking tokens before vLLM forces </think>
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def reasoning_server(
    reasoning_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("vllm-reasoning")
    template = folder / "template.jinja"
    template.write_text(TEMPLATE)
    flags = [
        "--reasoning-parser", "deepseek_r1", "--chat-template", str(template),
        "--enable-auto-tool-choice", "--tool-call-parser", TOOL_PARSER,
    ]  # fmt: skip
    with serve(reasoning_model_path, flags, folder / "serve.log") as base:
        yield base


def chat(base: str, content: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 80,
        "temperature": 0.0,
        "thinking_token_budget": BUDGET,
        **extra,
    }
    return post(base, "/v1/chat/completions", body)


def test_response_format_after_free_reasoning(reasoning_server: str) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "item", "schema": ITEM_SCHEMA}}
    status, out = chat(reasoning_server, "What fruit is in the basket? Answer in JSON.",
                       response_format=fmt)  # fmt: skip
    assert status == 200, out
    choice = out["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "stop", message
    assert message["reasoning"], message  # the thinking tokens, free text
    jsonschema.validate(json.loads(message["content"]), ITEM_SCHEMA)


def test_required_tool_call_after_free_reasoning(reasoning_server: str) -> None:
    system = tool_system_prompt([WEATHER], TOOL_PARSER_FORMATS[TOOL_PARSER])
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]
    status, out = chat(reasoning_server, "", messages=messages, tools=[WEATHER],
                       tool_choice="required", max_tokens=120)  # fmt: skip
    assert status == 200, out
    choice = out["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls", message
    assert message["reasoning"], message
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(
        json.loads(call["function"]["arguments"]), WEATHER["function"]["parameters"]
    )


def test_completion_prompts_that_open_or_close_the_block(reasoning_server: str) -> None:
    base = {"model": "smollm2", "max_tokens": 40, "temperature": 0.0}
    head = "<|im_start|>user\nGive me a phone number.<|im_end|>\n<|im_start|>assistant\n"
    # the prompt opens the block: reasoning, </think>, up to two line breaks, then the number
    status, out = post(reasoning_server, "/v1/completions", {
        **base, "prompt": head + "<think>\n", "thinking_token_budget": BUDGET,
        "structured_outputs": {"regex": PHONE},
    })  # fmt: skip
    assert status == 200, out
    text = out["choices"][0]["text"]
    assert out["choices"][0]["finish_reason"] == "stop", text
    reasoning, end, answer = text.partition("</think>")
    assert end and "<think>" not in reasoning, text
    assert re.fullmatch(r"\n{0,2}" + PHONE, answer), text
    # an empty block in the prompt (thinking switched off): the constraint from the first token
    status, out = post(reasoning_server, "/v1/completions", {
        **base, "prompt": head + "<think>\n\n</think>\n\n",
        "vllm_xargs": request_args(regex=PHONE),
    })  # fmt: skip
    assert status == 200, out
    assert re.fullmatch(PHONE, out["choices"][0]["text"]), out
