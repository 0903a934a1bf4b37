"""Reasoning before the answer on the real default model: generate(reasoning=...), templates.

SmolLM2 is not a reasoning model, but asked to think it writes ``<think> ... </think>`` when the
grammar opens the block, and a thinking budget forces the end marker where it does not. The
templates of reasoning models are simulated by swapping the tokenizer's chat template.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

import constrain
from constrain.integrations.transformers import Model
from constrain.reasoning import Reasoning
from constrain.tools import AssistantMessage

pytestmark = pytest.mark.slow

PROMPT = "What is the capital of France? Think first."


class Capital(BaseModel):
    city: str = Field(max_length=30)
    country: str = Field(max_length=20)


def _generate(model: Model, **kwargs: object) -> constrain.GenerationResult:
    result: constrain.GenerationResult = constrain.generate(
        PROMPT, schema=Capital, model=model, max_tokens=120, return_info=True, **kwargs
    )
    return result


@pytest.fixture(scope="module")
def thought(model: Model) -> constrain.GenerationResult:
    return _generate(model, reasoning=True)


def test_reasoning_comes_apart_from_the_value(thought: constrain.GenerationResult) -> None:
    assert thought.finish_reason == "stop"
    assert thought.text.startswith("<think>")
    assert thought.reasoning is not None and thought.reasoning.strip()
    assert f"<think>{thought.reasoning}</think>" in thought.text
    assert isinstance(thought.value, Capital)
    answer = thought.text.split("</think>", 1)[1]
    assert Capital.model_validate_json(answer) == thought.value


def test_without_reasoning_the_default_model_answers_at_once(model: Model) -> None:
    # SmolLM2's template is not a reasoning model's: reasoning=None adds no block
    plain = _generate(model)
    assert plain.reasoning is None and plain.text.startswith("{")


@pytest.mark.parametrize("budget", [12, None])
def test_speculative_drafts_cross_the_boundary_exactly(model: Model, budget: int | None) -> None:
    # greedy speculative decoding returns the plain greedy output; with a budget of 12
    # characters the grammar forces "</think>" mid-thought and the jump-forward draft runs
    # from the reasoning into the answer
    spec = Reasoning(max_chars=budget)
    plain = _generate(model, reasoning=spec)
    fast = _generate(model, reasoning=spec, speculative=True)
    assert fast.text == plain.text and fast.value == plain.value
    assert fast.reasoning == plain.reasoning
    if budget is not None:
        assert plain.reasoning is not None and len(plain.reasoning) <= budget
        assert fast.details["accepted"]["grammar"] > 0


def test_a_token_budget_ends_the_reasoning_even_in_speculative_drafts(model: Model) -> None:
    spec = Reasoning(max_tokens=10)
    plain = _generate(model, reasoning=spec)
    fast = _generate(model, reasoning=spec, speculative=True)
    assert fast.text == plain.text and fast.token_ids == plain.token_ids
    assert isinstance(plain.value, Capital)
    ids = list(plain.token_ids)
    starts = [len(model.tokenizer.decode(ids[:k])) for k in range(len(ids))]
    begin, end = len("<think>"), plain.text.index("</think>")
    counted = sum(begin <= s < end for s in starts)
    assert 0 < counted <= 10, (counted, plain.text)


@pytest.fixture
def template(model: Model) -> Iterator[list[str]]:
    """Swap the chat template for the test (the list's one item is the template to use)."""
    tokenizer = model.tokenizer
    before = tokenizer.chat_template
    chosen: list[str] = [before]
    yield chosen
    tokenizer.chat_template = before


R1_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
THINKING_OFF = R1_LIKE.replace("<think>\n{% endif %}", "<think>\n\n</think>\n\n{% endif %}")
OPTIONAL = R1_LIKE.replace("<think>\n{% endif %}", "{% endif %}{# strips </think> #}")


def test_a_template_that_opens_the_block(model: Model, template: list[str]) -> None:
    model.tokenizer.chat_template = R1_LIKE
    result = _generate(model, reasoning=Reasoning(max_chars=40))
    assert not result.text.startswith("<think>")  # the prompt opened it
    assert "</think>" in result.text and result.reasoning is not None
    assert isinstance(result.value, Capital)


def test_a_template_with_thinking_off_and_one_that_may_think(
    model: Model, template: list[str]
) -> None:
    model.tokenizer.chat_template = THINKING_OFF
    off = _generate(model)  # the prompt closed an empty block: no reasoning expected
    assert off.reasoning is None and off.text.startswith("{")
    model.tokenizer.chat_template = OPTIONAL
    maybe = _generate(model)  # the template mentions </think>: an optional block
    assert isinstance(maybe.value, Capital)
    assert (maybe.reasoning is None) == (not maybe.text.startswith("<think>"))


def test_tool_calls_after_reasoning(model: Model) -> None:
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return f"sunny in {city}"

    message = constrain.generate(
        "What is the weather in Paris? Think, then call a tool.",
        tools=[get_weather],
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning=Reasoning(max_chars=60),
        model=model,
        max_tokens=120,
    )
    assert isinstance(message, AssistantMessage)
    assert message.reasoning is not None and len(message.reasoning) <= 60
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    assert message.text.startswith("<think>")
