"""Chat-template tool formats: DeepSeek V3 / V3.1 and gpt-oss Harmony, markers by token id."""

from __future__ import annotations

import json
from typing import Any

import pytest

from constrain import Compiler, Grammar, Matcher, OutputValidationError, Vocabulary
from constrain.testing import byte_vocabulary
from constrain.tool_formats import TOOL_FORMATS, detect_tool_format, pieces
from constrain.tools import parse_tool_calls, tool_output, tool_structural_tag

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
TOOLS = [WEATHER, TIME]
PARIS = {"city": "Paris", "days": 2}
UTC: dict[str, Any] = {}

# Calls as each template renders them (llama.cpp's copies of the DeepSeek templates, the
# openai/harmony docs' example): one call, then two.
BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def _v3(name: str, args: Any) -> str:
    return f"{CALL}function{SEP}{name}\n```json\n{json.dumps(args)}\n```{CALL_END}"


def _v31(name: str, args: Any) -> str:
    return f"{CALL}{name}{SEP}{json.dumps(args)}{CALL_END}"


def _harmony(name: str, args: Any) -> str:
    return (
        f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
        f"{json.dumps(args)}<|call|>"
    )


RENDERED = {
    "deepseek_v3": (
        BEGIN + _v3("get_weather", PARIS) + END,
        BEGIN + _v3("get_weather", PARIS) + "\n" + _v3("get_time", UTC) + END,
    ),
    "deepseek_v31": (
        BEGIN + _v31("get_weather", PARIS) + END,
        BEGIN + _v31("get_weather", PARIS) + _v31("get_time", UTC) + END,
    ),
    "harmony": (
        _harmony("get_weather", PARIS),
        _harmony("get_weather", PARIS) + "<|start|>assistant" + _harmony("get_time", UTC),
    ),
}
# Near misses: a wrong tool name, the V3 fence missing, arguments against the schema.
WRONG = {
    "deepseek_v3": (
        BEGIN + _v3("get_wether", PARIS) + END,
        BEGIN + f'{CALL}function{SEP}get_weather\n{{"city": "Paris"}}{CALL_END}{END}',
        BEGIN + _v3("get_weather", {"city": 3}) + END,
    ),
    "deepseek_v31": (
        BEGIN + _v31("get_wether", PARIS) + END,
        BEGIN + _v31("get_weather", PARIS),
        BEGIN + _v31("get_weather", {"days": 2}) + END,
    ),
    "harmony": (
        _harmony("get_wether", PARIS),
        _harmony("get_weather", PARIS).replace(" <|constrain|>", "<|constrain|>"),
        _harmony("get_weather", {"days": "2"}),
    ),
}
NEW = sorted(RENDERED)
HARMONY_EOS = ("<|call|>", "<|return|>")


def _vocab(fmt: str) -> Vocabulary:
    """Every byte, plus the format's markers as special tokens (gpt-oss's EOS among them)."""
    markers = TOOL_FORMATS[fmt].markers
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None] * len(markers)
    names = {m: 256 + i for i, m in enumerate(markers)}
    eos = [names[m] for m in HARMONY_EOS if m in names]
    return Vocabulary.from_bytes(tokens, eos_ids=eos or [0], special_names=names)


def _ids(vocab: Vocabulary, text: str) -> list[int]:
    """The token ids of a text whose markers are special tokens (every other byte alone)."""
    names = vocab.special_names
    out: list[int] = []
    pos = 0
    while pos < len(text):
        marker = next((m for m in names if text.startswith(m, pos)), None)
        if marker is not None:
            out.append(names[marker])
            pos += len(marker)
        else:
            out.extend(text[pos].encode())
            pos += 1
    return out


def _accepts_text(spec: dict[str, Any], text: str) -> bool:
    matcher = Matcher(Compiler(byte_vocabulary()).compile(Grammar.from_structural_tag(spec)))
    return matcher.accept_bytes(text) and matcher.is_accepting()


def _accepts_ids(compiled: Any, ids: list[int]) -> bool:
    matcher = Matcher(compiled)
    return matcher.accept_tokens(ids) == len(ids) and matcher.is_accepting()


@pytest.mark.parametrize("fmt", NEW)
def test_rendered_calls_parse_back(fmt: str) -> None:
    one, two = RENDERED[fmt]
    prose, calls = parse_tool_calls(one, TOOLS, fmt)
    assert prose == "" and [(c.name, c.arguments) for c in calls] == [("get_weather", PARIS)]
    calls = parse_tool_calls(two, TOOLS, fmt)[1]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", PARIS), ("get_time", UTC)]
    for wrong in WRONG[fmt]:
        with pytest.raises(OutputValidationError):
            parse_tool_calls(wrong, TOOLS, fmt)


@pytest.mark.parametrize("fmt", NEW)
def test_markers_as_text_without_special_tokens(fmt: str) -> None:
    spec = tool_structural_tag(TOOLS, tool_choice="required", format=fmt)
    assert '"token"' not in json.dumps(spec)
    for text in RENDERED[fmt]:
        assert _accepts_text(spec, text)
    for wrong in WRONG[fmt]:
        assert not _accepts_text(spec, wrong)
    single = tool_structural_tag(TOOLS, tool_choice="required", parallel=False, format=fmt)
    assert _accepts_text(single, RENDERED[fmt][0])
    assert not _accepts_text(single, RENDERED[fmt][1])


@pytest.mark.parametrize("fmt", NEW)
def test_special_markers_are_matched_by_id(fmt: str) -> None:
    vocab = _vocab(fmt)
    eos = {n for n, i in vocab.special_names.items() if i in set(vocab.eos_ids.tolist())}
    special = set(vocab.special_names) - eos
    output = tool_output(
        TOOLS, tool_choice="required", format=fmt, special_tokens=special, end_tokens=eos
    )
    spec = tool_structural_tag(
        TOOLS, tool_choice="required", format=fmt, special_tokens=special, end_tokens=eos
    )
    tokens = {m for m in special if f'"token": "{m}"' in json.dumps(spec, ensure_ascii=False)}
    assert tokens == special
    compiled = Compiler(vocab).compile(output.grammar)
    for text in RENDERED[fmt]:
        shown = text.replace("<|call|>", "") if eos else text  # an EOS token ends the output
        ids = _ids(vocab, shown)
        assert _accepts_ids(compiled, ids), shown
        assert vocab.decode_text(ids) == shown
        assert [c.name for c in output.parse(shown).tool_calls][0] == "get_weather"
        spelled = list(shown.encode())  # the markers' text, not their tokens
        assert not _accepts_ids(compiled, spelled)
    for wrong in WRONG[fmt]:
        assert not _accepts_ids(compiled, _ids(vocab, wrong.replace("<|call|>", "")))


def test_pieces_split_special_markers_only() -> None:
    fmt = TOOL_FORMATS["deepseek_v3"]
    text = fmt.begin("f")
    assert pieces(text, fmt, ()) == [{"type": "const_string", "value": text}]
    assert pieces(text, fmt, fmt.markers) == [
        {"type": "token", "token": CALL},
        {"type": "const_string", "value": "function"},
        {"type": "token", "token": SEP},
        {"type": "const_string", "value": "f\n```json\n"},
    ]


def test_harmony_answer_reasoning_and_choices() -> None:
    vocab = _vocab("harmony")
    eos = set(HARMONY_EOS)
    special = set(vocab.special_names) - eos
    thinking = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
    answer = "<|channel|>final<|message|>It is sunny."
    call = _harmony("get_weather", PARIS).replace("<|call|>", "")
    for choice, good, bad in (
        ("auto", [answer, call, thinking + answer, thinking + call], ["It is sunny."]),
        ("required", [call, thinking + call], [answer, thinking + answer]),
        ("none", [answer, thinking + answer], [call]),
    ):
        output = tool_output(
            TOOLS, tool_choice=choice, format="harmony", special_tokens=special, end_tokens=eos
        )
        compiled = Compiler(vocab).compile(output.grammar)
        for text in good:
            assert _accepts_ids(compiled, _ids(vocab, text)), (choice, text)
        for text in bad:
            assert not _accepts_ids(compiled, _ids(vocab, text)), (choice, text)
    turn = output.parse(thinking + answer)
    assert (turn.content, turn.tool_calls, turn.reasoning) == (
        "It is sunny.",
        [],
        "Need the weather.",
    )
    turn = tool_output(TOOLS, format="harmony").parse(thinking + _harmony("get_time", UTC))
    assert turn.reasoning == "Need the weather." and turn.tool_calls[0].name == "get_time"


def test_deepseek_auto_prose_then_calls() -> None:
    vocab = _vocab("deepseek_v31")
    special = set(vocab.special_names)
    output = tool_output(TOOLS, format="deepseek_v31", special_tokens=special)
    compiled = Compiler(vocab).compile(output.grammar)
    for text in ("Let me check.", "Let me check." + RENDERED["deepseek_v31"][1]):
        assert _accepts_ids(compiled, _ids(vocab, text))
    turn = output.parse("Let me check." + RENDERED["deepseek_v31"][0])
    assert turn.content == "Let me check." and turn.tool_calls[0].arguments == PARIS
    # prose never spells a marker: it would read as one
    assert not _accepts_ids(compiled, list(f"Hi {BEGIN}".encode()))


# Snippets of the real chat templates (llama.cpp's models/templates copies; gpt-oss-120b's).
DEEPSEEK_R1 = (
    "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
    "'<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + "
    "tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}"
)
DEEPSEEK_V31 = (
    "{%- if message['content'] is none -%}{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ "
    "tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + "
    "'<｜tool▁call▁end｜>'}}"
)
GPT_OSS = (
    '{{- "<|start|>assistant to=" }}\n{{- "functions." + tool_call.name + '
    '"<|channel|>commentary " }}\n{{- (tool_call.content_type if tool_call.content_type is '
    'defined else "json") + "<|message|>" }}\n{{- tool_call.arguments|tojson }}\n'
    '{{- "<|call|>" }}'
)


@pytest.mark.parametrize(
    ("template", "fmt"),
    [(DEEPSEEK_R1, "deepseek_v3"), (DEEPSEEK_V31, "deepseek_v31"), (GPT_OSS, "harmony")],
)
def test_detection_on_real_templates(template: str, fmt: str) -> None:
    assert detect_tool_format(template) == fmt
