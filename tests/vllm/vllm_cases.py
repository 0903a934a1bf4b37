"""The constrained requests shared by the offline and server tests, with their checks."""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import lark
from pydantic import BaseModel, Field

from constrain.integrations.vllm import request_args

# the 40 tool-use prompts and their tools, shared with benchmarks/tool_calls.py
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from tool_calls import CASES, TOOLS  # noqa: E402, F401 (re-exported to the tests)

TOOL_PARSER = "xlam"
"""The vLLM tool parser of the test servers: it reads SmolLM2's own call format (a JSON list of
calls in ``<tool_call>...</tool_call>``, constrain's ``smollm2`` format)."""

# engine arguments that work on a 2-core CPU box
ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": 1024,
    "enforce_eager": True,
    "dtype": "float32",
    "max_num_seqs": 16,
    "seed": 0,
}


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int = Field(ge=0, le=120)


ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "item": {"type": "string", "enum": ["apple", "pear", "plum"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "fresh": {"type": "boolean"},
    },
    "required": ["item", "count", "fresh"],
    "additionalProperties": False,
}

PHONE = r"\d{3}-\d{4}"

GREETING = r"""
start: greeting " " NAME "!"
greeting: "hello" | "hi"
NAME: /[a-z]{1,8}/
"""

COLORS = ["red", "green", "blue"]

# a schema constrain refuses (lookahead is not regular): a clear error for that request only
REFUSED_SCHEMA: dict[str, Any] = {"type": "string", "pattern": "(?=a)b"}


def cases() -> list[tuple[str, str, dict[str, str] | None]]:
    """Return (name, prompt, extra_args) for a batch mixing every kind with free text."""
    return [
        ("pydantic", "Describe a person as JSON.", request_args(json_schema=Person)),
        (
            "schema",
            "What fruit is in the basket? Answer in JSON.",
            request_args(json_schema=ITEM_SCHEMA),
        ),
        ("free1", "Tell me about the sea.", None),
        ("regex", "Give me a phone number.", request_args(regex=PHONE)),
        ("lark", "Greet someone.", request_args(grammar=GREETING)),
        ("choices", "Name a color.", request_args(choices=COLORS)),
        ("free2", "Write a haiku about bread.", None),
    ]


def check(name: str, text: str) -> None:
    """Assert that a constrained output is valid for its case."""
    if name == "pydantic":
        Person.model_validate_json(text)
    elif name == "schema":
        jsonschema.validate(json.loads(text), ITEM_SCHEMA)
    elif name == "regex":
        assert re.fullmatch(PHONE, text), text
    elif name == "lark":
        lark.Lark(GREETING).parse(text)
    elif name == "choices":
        assert text in COLORS, text


def post(base: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a JSON body to a server; return the status and the JSON answer (errors included)."""
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
