"""The typed front door: what ``generate`` returns is what a type checker says it returns.

:func:`typed_calls` is ordinary code using ``generate``; ``assert_type`` states the static type
of every call (a no-op at run time). :func:`test_the_typed_calls_type_check` runs mypy (strict)
over this file, and :func:`test_the_typed_calls_return_what_their_types_say` runs the calls on
the default model and checks the values have those types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from typing_extensions import assert_type

import constrain
from constrain import GenerationResult, Model
from constrain.tools import AssistantMessage

ROOT = Path(__file__).resolve().parents[2]


class City(BaseModel):
    name: str = Field(max_length=12)
    population: int = Field(ge=0, le=99_999_999)


CHAT = [{"role": "user", "content": "Name a city and its population."}]


def weather(city: str) -> str:
    """Get the weather in a city."""
    return f"sunny in {city}"


def typed_calls(model: Model) -> dict[str, object]:
    """Call ``generate`` every way its overloads distinguish; return the values by name."""
    one = constrain.generate("Name a city.", schema=City, model=model, max_tokens=64)
    assert_type(one, City)
    chat = constrain.generate(CHAT, schema=City, model=model, max_tokens=64)
    assert_type(chat, City)
    batch = constrain.generate(["Paris?", "Rome?"], schema=City, model=model, max_tokens=64)
    assert_type(batch, list[City])
    chats = constrain.generate([CHAT, CHAT], schema=City, model=model, max_tokens=64)
    assert_type(chats, list[City])
    text = constrain.generate("A year:", regex=r"\d{4}", model=model)
    assert_type(text, str)
    texts = constrain.generate(["Yes?", "No?"], choices=["yes", "no"], model=model)
    assert_type(texts, list[str])
    value = constrain.generate("A number:", schema={"type": "integer"}, model=model)
    assert_type(value, Any)
    info = constrain.generate("A year:", regex=r"\d{4}", model=model, return_info=True)
    assert_type(info, Any)
    turn = constrain.generate(
        "Weather in Oslo?",
        tools=[weather],
        tool_choice="required",
        parallel_tool_calls=False,
        model=model,
        max_tokens=48,
    )
    assert_type(turn, AssistantMessage)
    return {
        "one": one,
        "chat": chat,
        "batch": batch,
        "chats": chats,
        "text": text,
        "texts": texts,
        "info": info,
        "turn": turn,
    }


def test_the_typed_calls_type_check() -> None:
    """The calls above type-check under the project's strict mypy settings (``assert_type``).

    The options are exactly ``make typecheck``'s (the config's ``strict``, no flag on top), so
    the run reuses the cache that stage left (a changed option would check torch again).
    """
    api = pytest.importorskip("mypy.api")
    config, cache = str(ROOT / "pyproject.toml"), str(ROOT / ".mypy_cache")  # (from any cwd)
    stdout, stderr, status = api.run(
        ["--no-error-summary", "--config-file", config, "--cache-dir", cache, __file__]
    )
    assert status == 0, stdout + stderr


@pytest.mark.slow
def test_the_typed_calls_return_what_their_types_say(model: Model) -> None:
    values = typed_calls(model)
    assert isinstance(values["one"], City) and isinstance(values["chat"], City)
    for key in ("batch", "chats"):
        batch = values[key]
        assert isinstance(batch, list) and len(batch) == 2
        assert all(isinstance(v, City) for v in batch)
    assert isinstance(values["text"], str) and len(values["text"]) == 4
    assert values["texts"] in (["yes", "yes"], ["yes", "no"], ["no", "yes"], ["no", "no"])
    assert isinstance(values["info"], GenerationResult)
    turn = values["turn"]
    assert isinstance(turn, AssistantMessage) and turn.tool_calls
    assert turn.tool_calls[0].name == "weather"
