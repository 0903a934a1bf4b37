"""``generate(prompt, tools=...)`` on the default model (SmolLM2-135M-Instruct): its chat
template's call syntax (``smollm2``), each ``tool_choice``, validated and callable calls."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import constrain
from constrain import Model
from constrain.tools import AssistantMessage, detect_tool_format


def get_weather(city: str, unit: str = "celsius") -> str:
    """Get the current weather in a city."""
    return f"20 degrees {unit} in {city}"


class SendEmail(BaseModel):
    """Send an email."""

    to: str
    subject: str


TOOLS = [get_weather, SendEmail]


def test_the_default_model_writes_smollm2_calls(model: Model) -> None:
    assert detect_tool_format(model.tokenizer.chat_template) == "smollm2"


@pytest.mark.slow
def test_required_calls_are_valid_and_callable(model: Model) -> None:
    for prompt in ("What's the weather in Paris?", "Is it raining in Tokyo right now?"):
        result = constrain.generate(
            prompt, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
            model=model, max_tokens=64, return_info=True,
        )  # fmt: skip
        turn = result.value
        assert isinstance(turn, AssistantMessage)
        assert result.finish_reason == "stop" and turn.content == ""
        assert turn.text.startswith("<tool_call>[\n") and turn.text.endswith("\n]</tool_call>")
        assert turn.tool_calls, turn.text
        for call in turn.tool_calls:
            if call.name == "get_weather":
                assert call().startswith("20 degrees")
            else:
                assert isinstance(call.arguments, SendEmail)


@pytest.mark.slow
def test_named_none_and_auto_choices(model: Model) -> None:
    named = constrain.generate(
        "Write to bob@example.com about lunch.", tools=TOOLS,
        tool_choice={"name": "SendEmail"}, parallel_tool_calls=False, model=model,
        max_tokens=64,
    )  # fmt: skip
    assert [c.name for c in named.tool_calls] == ["SendEmail"]
    assert isinstance(named.tool_calls[0].arguments, SendEmail)
    prose = constrain.generate(
        "Say hello.", tools=TOOLS, tool_choice="none", model=model, max_tokens=24
    )
    assert prose.tool_calls == [] and "<tool_call>" not in prose.text
    auto = constrain.generate(
        "What's the weather in Rome?", tools=TOOLS, model=model, max_tokens=64
    )
    assert isinstance(auto, AssistantMessage)
    assert auto.tool_calls or auto.content  # prose or calls, both parsed


def test_tool_options_are_checked_before_the_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from constrain import request

    def no_loading() -> Model:
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(request, "default_model", no_loading)
    with pytest.raises(TypeError, match="constraint of its own"):
        constrain.generate("x", tools=TOOLS, regex="a")
    with pytest.raises(ValueError, match="not a tool"):
        constrain.generate("x", tools=TOOLS, tool_choice={"name": "nope"})
    with pytest.raises(ValueError, match="unknown tool_format"):
        constrain.generate("x", tools=TOOLS, tool_format="chatml")
    with pytest.raises(TypeError, match="list of tools"):
        constrain.generate("x", tools=get_weather)  # type: ignore[call-overload]


@pytest.mark.slow
def test_special_token_markers_are_generated_by_id(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A format whose trigger is one of the model's special tokens (SmolLM2 has <repo_name>):
    # generate requires it by id and reads it back by name.
    from constrain import tool_formats

    assert "<repo_name>" in model.vocabulary.special_names
    fmt = tool_formats.ToolFormat(
        "repo_test", '<repo_name>{"name": "{name}", "arguments": ', "}", separator="\n",
        markers=("<repo_name>",),
    )  # fmt: skip
    monkeypatch.setitem(tool_formats.TOOL_FORMATS, "repo_test", fmt)
    result = constrain.generate(
        "What's the weather in Paris?", tools=TOOLS, tool_choice="required",
        parallel_tool_calls=False, tool_format="repo_test", model=model, max_tokens=64,
        return_info=True,
    )  # fmt: skip
    turn = result.value
    assert turn.text.startswith('<repo_name>{"name": "'), turn.text
    assert turn.tool_calls and result.finish_reason == "stop" and turn.content == ""
    pieces = constrain.stream(
        "What's the weather in Paris?", tools=TOOLS, tool_choice="required",
        parallel_tool_calls=False, tool_format="repo_test", model=model, max_tokens=64,
    )  # fmt: skip
    assert "".join(pieces) == turn.text
