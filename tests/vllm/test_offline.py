"""constrain inside vLLM's offline engine (`LLM.generate`), on the CPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_cases import CASES, ENGINE_ARGS, REFUSED_SCHEMA, TOOLS, cases, check

from constrain.integrations.vllm import LogitsProcessor, request_args
from constrain.integrations.vllm_tools import TOOL_PARSER_FORMATS
from constrain.tools import as_tool, tool_structural_tag, tool_system_prompt


@pytest.fixture(scope="module")
def llm(model_path: Path) -> Iterator[Any]:
    from vllm import LLM

    engine = LLM(model=str(model_path), logits_processors=[LogitsProcessor], **ENGINE_ARGS)
    yield engine
    del engine


def _params(extra: dict[str, str] | None, seed: int) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=48, temperature=0.8, seed=seed, extra_args=extra)


def test_mixed_batch_every_constrained_output_valid(llm: Any) -> None:
    batch = cases() * 2  # each kind twice, with different seeds
    prompts = [prompt for _, prompt, _ in batch]
    params = [_params(extra, seed) for seed, (_, _, extra) in enumerate(batch)]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    for (name, _, extra), out in zip(batch, outputs, strict=True):
        completion = out.outputs[0]
        if extra is None:
            assert completion.token_ids, "an unconstrained request produced nothing"
            continue
        assert completion.finish_reason == "stop", (name, completion.text)
        check(name, completion.text)


def test_greedy_and_repeated_schema(llm: Any) -> None:
    from vllm import SamplingParams

    extra = request_args(regex=r"[0-9]{2}/[0-9]{2}/[0-9]{4}")
    params = SamplingParams(max_tokens=16, temperature=0.0, extra_args=extra)
    outputs = llm.generate(["Today's date is"] * 3, params, use_tqdm=False)
    texts = {out.outputs[0].text for out in outputs}
    assert len(texts) == 1
    import re

    assert re.fullmatch(r"[0-9]{2}/[0-9]{2}/[0-9]{4}", texts.pop())


def test_refused_schema_is_a_clear_error_and_the_engine_keeps_serving(llm: Any) -> None:
    from vllm import SamplingParams

    bad = SamplingParams(max_tokens=8, extra_args=request_args(json_schema=REFUSED_SCHEMA))
    with pytest.raises(Exception, match="constrain refused .*lookahead"):
        llm.generate(["Say a word."], bad, use_tqdm=False)
    with pytest.raises(Exception, match="must name exactly one"):
        llm.generate(
            ["Say a word."], SamplingParams(extra_args={"constrain": "{}"}), use_tqdm=False
        )
    good = SamplingParams(
        max_tokens=8, temperature=0.0, extra_args=request_args(choices=["yes", "no"])
    )
    (out,) = llm.generate(["Is the sky blue?"], good, use_tqdm=False)
    assert out.outputs[0].text in {"yes", "no"}


@pytest.mark.parametrize("parser_name", sorted(TOOL_PARSER_FORMATS))
def test_tool_calls_in_each_format_parse_with_vllms_own_parser(llm: Any, parser_name: str) -> None:
    """Calls generated under the tag of a parser's format are read back by that vLLM parser."""
    import json

    from vllm import SamplingParams
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    fmt = TOOL_PARSER_FORMATS[parser_name]
    picked = [case for case in CASES if case[2] is not None][::4]  # 9 tool prompts
    tokenizer = llm.get_tokenizer()
    prompts, params = [], []
    for prompt, names, _ in picked:
        tools = [TOOLS[n] for n in names]
        system = tool_system_prompt(tools, fmt)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        prompts.append(
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        )
        tag = tool_structural_tag(tools, tool_choice="required", parallel=False, format=fmt)
        extra = request_args(structural_tag=tag)
        params.append(SamplingParams(max_tokens=200, temperature=0.0, frequency_penalty=0.3,
                                     extra_args=extra))  # fmt: skip
    outputs = llm.generate(prompts, params, use_tqdm=False)
    parser = ToolParserManager.get_tool_parser(parser_name)(tokenizer)
    parsed = 0
    for (prompt, names, _), out in zip(picked, outputs, strict=True):
        completion = out.outputs[0]
        if completion.finish_reason == "length":  # cut inside the arguments by max_tokens
            continue
        assert completion.finish_reason == "stop", completion.text
        tools = {n: as_tool(TOOLS[n]) for n in names}
        request = ChatCompletionRequest(
            model="smollm2",
            messages=[{"role": "user", "content": prompt}],
            tools=[t.openai() for t in tools.values()],
        )
        info = parser.extract_tool_calls(completion.text, request)
        assert info.tools_called and len(info.tool_calls) == 1, completion.text
        call = info.tool_calls[0].function
        tools[call.name].validate(json.loads(call.arguments))
        parsed += 1
    print(f"\n{parser_name} ({fmt}): {parsed} of {len(picked)} outputs parsed and valid")
    assert parsed >= len(picked) - 2
