r"""Tool calls (stage 8): how each chat-template family writes calls, and its structural tag.

:data:`TOOL_FORMATS` holds one :class:`ToolFormat` per family; :func:`detect_tool_format`
picks one from a chat template's text. :func:`sequence_tag` writes the structural tag of a
format whose markers are special tokens (matched by id, the ``token`` format) or whose answer
is a message of its own (Harmony's final channel), where XGrammar's ``triggered_tags`` and
``tags_with_separator`` cannot serve: their tags begin and end with text.

==================  ==========================================================================
``hermes``          Hermes, Qwen 2.5 and 3: ``<tool_call>\n{"name": ..., "arguments": {...}}\n
                    </tool_call>``, one tag per call, prose around them
``smollm2``         SmolLM2 (the default model): ``<tool_call>[\n{"name": ..., "arguments":
                    {...}},\n...\n]</tool_call>``, one list of calls after the prose
``mistral``         Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``
``llama3_json``     Llama 3.1-3.3 custom tools: ``{"name": ..., "parameters": {...}}``
``deepseek_v3``     DeepSeek V3, R1 (and their 0324 / 0528 updates): ``<｜tool▁calls▁begin｜>``
                    then per call ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n
                    {...}\n```<｜tool▁call▁end｜>`` (a newline between calls), then
                    ``<｜tool▁calls▁end｜>``
``deepseek_v31``    DeepSeek V3.1 and V3.2-Exp: the same block, each call
                    ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>``
``harmony``         gpt-oss (OpenAI Harmony): an optional ``<|channel|>analysis<|message|>...
                    <|end|><|start|>assistant`` message, then either the answer
                    ``<|channel|>final<|message|>...<|return|>`` or calls
                    ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
                    {...}<|call|>``, messages separated by ``<|start|>assistant``
==================  ==========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "TOOL_FORMATS",
    "ToolFormat",
    "detect_tool_format",
    "pieces",
    "sequence_tag",
    "uses_sequence_tag",
]


@dataclass(frozen=True)
class ToolFormat:
    """How a chat template writes tool calls.

    A call is ``call_begin`` (with ``{name}``), the arguments as JSON, then ``call_end``. With a
    ``block_begin``, the calls form one list inside ``block_begin`` ... ``block_end`` separated
    by ``separator``; without, each call stands alone and ``call_begin``'s text before ``{name}``
    is the trigger that starts it. With ``answer_begin`` (Harmony), the prose is a message of
    its own, ``answer_begin`` ... ``answer_end``, written instead of the calls; ``thinking_begin``
    ... ``thinking_end`` is an optional reasoning message before either. ``markers`` are the
    strings that the model's tokenizer may hold as special tokens: where it does, the
    structural tag requires them by token id.
    """

    name: str
    call_begin: str
    call_end: str
    block_begin: str = ""
    block_end: str = ""
    separator: str = ""
    instructions: str = ""
    """The system-prompt text that lists the tools (``{tools}``: their JSON, one per line)."""
    answer_begin: str = ""
    answer_end: str = ""
    thinking_begin: str = ""
    thinking_end: str = ""
    markers: tuple[str, ...] = field(default=(), repr=False)

    @property
    def trigger(self) -> str:
        """The text that starts the tool calls."""
        return self.block_begin or self.call_begin.split("{name}", 1)[0]

    def begin(self, tool: str) -> str:
        """Return the text before a call's arguments."""
        return self.call_begin.replace("{name}", json.dumps(tool)[1:-1])

    def ending_at(self, end_tokens: Collection[str]) -> ToolFormat:
        """Return the format with the markers in ``end_tokens`` (EOS tokens) left out.

        A grammar cannot require an end-of-sequence token: the output ends where it would
        stand (Harmony's ``<|call|>`` and ``<|return|>`` are gpt-oss's EOS tokens).
        """
        gone = [m for m in self.markers if m in end_tokens]
        if not gone:
            return self

        def cut(text: str) -> str:
            for marker in gone:
                text = text.replace(marker, "")
            return text

        return replace(
            self,
            call_end=cut(self.call_end),
            block_end=cut(self.block_end),
            answer_end=cut(self.answer_end),
            markers=tuple(m for m in self.markers if m not in gone),
        )


_JSON_RULES = (
    "For each call, write the function's name and its arguments as a JSON object that follows "
    "the function's parameters."
)
_DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_DS_CALLS_END = "<｜tool▁calls▁end｜>"
_DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_DS_CALL_END = "<｜tool▁call▁end｜>"
_DS_SEP = "<｜tool▁sep｜>"
_DS_MARKERS = (_DS_CALLS_BEGIN, _DS_CALLS_END, _DS_CALL_BEGIN, _DS_CALL_END, _DS_SEP)
_HARMONY_MARKERS = (
    "<|start|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    "<|return|>",
)
TOOL_FORMATS: dict[str, ToolFormat] = {
    "hermes": ToolFormat(
        "hermes",
        '<tool_call>\n{"name": "{name}", "arguments": ',
        "}\n</tool_call>",
        separator="\n",
        instructions=(
            "You may call one or more functions to assist with the user query. The functions "
            "are listed in <tools></tools>:\n<tools>\n{tools}\n</tools>\nFor each function "
            "call, return a JSON object with the function name and arguments within "
            '<tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, '
            '"arguments": <args-json-object>}\n</tool_call>'
        ),
        markers=("<tool_call>", "</tool_call>"),
    ),
    "smollm2": ToolFormat(
        "smollm2",
        '{"name": "{name}", "arguments": ',
        "}",
        block_begin="<tool_call>[\n",
        block_end="\n]</tool_call>",
        separator=",\n",
        instructions=(
            "You are an expert in composing functions. You are given a question and a set of "
            "possible functions.\nBased on the question, you will need to make one or more "
            "function/tool calls to achieve the purpose.\nIf none of the functions can be "
            "used, point it out and refuse to answer.\nIf the given question lacks the "
            "parameters required by the function, also point it out.\nYou have access to the "
            "following tools:\n<tools>{tools}</tools>\nThe output MUST strictly adhere to the "
            "following format, and NO other text MUST be included.\nThe example format is as "
            "follows. Please make sure the parameter type is correct.\n<tool_call>[\n"
            '{"name": "func_name1", "arguments": {"argument1": "value1", "argument2": '
            '"value2"}},\n(more tool calls as required)\n]</tool_call>'
        ),
    ),
    "mistral": ToolFormat(
        "mistral",
        '{"name": "{name}", "arguments": ',
        "}",
        block_begin="[TOOL_CALLS][",
        block_end="]",
        separator=", ",
        instructions="[AVAILABLE_TOOLS][{tools}][/AVAILABLE_TOOLS] " + _JSON_RULES,
        markers=("[TOOL_CALLS]",),
    ),
    "llama3_json": ToolFormat(
        "llama3_json",
        '{"name": "{name}", "parameters": ',
        "}",
        instructions=(
            "Given the following functions, please respond with a JSON for a function call "
            "with its proper arguments that best answers the given prompt.\nRespond in the "
            'format {"name": function name, "parameters": dictionary of argument name and '
            "its value}. Do not use variables.\n\n{tools}"
        ),
    ),
    "deepseek_v3": ToolFormat(
        "deepseek_v3",
        f"{_DS_CALL_BEGIN}function{_DS_SEP}{{name}}\n```json\n",
        f"\n```{_DS_CALL_END}",
        block_begin=_DS_CALLS_BEGIN,
        block_end=_DS_CALLS_END,
        separator="\n",
        instructions=(
            "## Tools\nYou have access to the following tools:\n{tools}\n"
            "To call tools, write "
            + _DS_CALLS_BEGIN
            + _DS_CALL_BEGIN
            + "function"
            + _DS_SEP
            + "<function name>\n```json\n<arguments as JSON>\n```"
            + _DS_CALL_END
            + " (one such call per tool call, a newline between calls) then "
            + _DS_CALLS_END
            + ". "
            + _JSON_RULES
        ),  # fmt: skip
        markers=_DS_MARKERS,
    ),
    "deepseek_v31": ToolFormat(
        "deepseek_v31",
        f"{_DS_CALL_BEGIN}{{name}}{_DS_SEP}",
        _DS_CALL_END,
        block_begin=_DS_CALLS_BEGIN,
        block_end=_DS_CALLS_END,
        instructions=(
            "## Tools\nYou have access to the following tools:\n{tools}\n"
            "To call tools, write "
            + _DS_CALLS_BEGIN
            + _DS_CALL_BEGIN
            + "<function name>"
            + _DS_SEP
            + "<arguments as JSON>"
            + _DS_CALL_END
            + " (one such call per tool "
            "call) then " + _DS_CALLS_END + ". " + _JSON_RULES
        ),  # fmt: skip
        markers=_DS_MARKERS,
    ),
    "harmony": ToolFormat(
        "harmony",
        "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>",
        "<|call|>",
        separator="<|start|>assistant",
        instructions=(
            "# Tools\n\n## functions\n\nEach function is called on the commentary channel "
            "(to=functions.<name>) with its arguments as JSON:\n{tools}"
        ),
        answer_begin="<|channel|>final<|message|>",
        answer_end="<|return|>",
        thinking_begin="<|channel|>analysis<|message|>",
        thinking_end="<|end|><|start|>assistant",
        markers=_HARMONY_MARKERS,
    ),
}


def detect_tool_format(chat_template: str | None) -> str:
    """Return the :data:`TOOL_FORMATS` name a chat template writes its calls in.

    Read from the template's text: Harmony's ``<|channel|>`` with ``<|call|>`` is gpt-oss's,
    DeepSeek's ``<｜tool▁calls▁begin｜>`` is ``deepseek_v3`` when the arguments sit in a
    ```` ```json ```` fence and ``deepseek_v31`` otherwise, ``[TOOL_CALLS]`` is Mistral's,
    ``<|python_tag|>`` Llama 3's, a SmolLM template SmolLM2's, and anything else
    (``<tool_call>`` included: Hermes, Qwen) Hermes'.
    """
    template = chat_template or ""
    if "<|channel|>" in template and "<|call|>" in template:
        return "harmony"
    if _DS_CALLS_BEGIN in template:
        return "deepseek_v3" if "```json" in template else "deepseek_v31"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or "Environment: ipython" in template:
        return "llama3_json"
    if "SmolLM" in template and "<tool_call>" not in template:
        return "smollm2"
    return "hermes"


def uses_sequence_tag(fmt: ToolFormat, special_tokens: Collection[str]) -> bool:
    """Whether ``fmt``'s structural tag is built by :func:`sequence_tag`.

    Yes when one of its markers is a special token (matched by id) or its answer is a
    message of its own; otherwise the text formats' ``triggered_tags`` serve.
    """
    return bool(fmt.answer_begin) or any(m in special_tokens for m in fmt.markers)


def pieces(text: str, fmt: ToolFormat, special_tokens: Collection[str]) -> list[dict[str, Any]]:
    """Return ``text`` as formats: ``token`` for each special marker, ``const_string`` between.

    Parameters
    ----------
    text : str
        A string of the format (a call's begin, an end, a separator).
    fmt : ToolFormat
        The format, whose :attr:`~ToolFormat.markers` are looked for.
    special_tokens : collection of str
        The markers that are special tokens of the model's tokenizer.

    Returns
    -------
    list of dict
        The formats, in order (empty for ``""``).
    """
    out: list[dict[str, Any]] = []
    found = [m for m in fmt.markers if m in special_tokens]
    pos = 0
    while pos < len(text):
        hits = [(text.find(m, pos), m) for m in found if text.find(m, pos) >= 0]
        at, marker = min(hits, default=(len(text), ""), key=lambda hit: (hit[0], -len(hit[1])))
        if at > pos:
            out.append({"type": "const_string", "value": text[pos:at]})
        if marker:
            out.append({"type": "token", "token": marker})
        pos = at + len(marker)
    return out


def sequence_tag(
    fmt: ToolFormat,
    calls: list[tuple[str, dict[str, Any]]],
    mode: str,
    *,
    parallel: bool,
    special_tokens: Collection[str],
) -> dict[str, Any]:
    """Return the structural tag of ``fmt`` built from sequences, with special tokens by id.

    Parameters
    ----------
    fmt : ToolFormat
        The format (:meth:`ToolFormat.ending_at` already applied).
    calls : list of (str, dict)
        Each callable tool's name and arguments schema.
    mode : {"auto", "required", "none"}
        Prose then optional calls (with ``answer_begin``: the answer or the calls), calls
        only, or prose only.
    parallel : bool
        Allow more than one call, ``separator`` between them.
    special_tokens : collection of str
        The markers to match by id (the tokenizer's special tokens).

    Returns
    -------
    dict
        ``{"type": "structural_tag", "format": ...}``. Free text never contains a marker's
        text (a text that spells a special token would read as one).
    """

    def seq(*parts: list[dict[str, Any]]) -> dict[str, Any]:
        elements = [p for part in parts for p in part]
        return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}

    def text(*ends: str) -> list[dict[str, Any]]:
        excludes = sorted({*fmt.markers, *(e for e in ends if e)})
        return [{"type": "any_text", "excludes": excludes}]

    def of(value: str) -> list[dict[str, Any]]:
        return pieces(value, fmt, special_tokens)

    one: dict[str, Any] = {
        "type": "or",
        "elements": [
            seq(of(fmt.begin(name)), [{"type": "json_schema", "json_schema": schema}],
                of(fmt.call_end))
            for name, schema in calls
        ],
    }  # fmt: skip
    repeated = [one]
    if parallel:
        repeated.append({"type": "star", "content": seq(of(fmt.separator), [one])})
    block = seq(of(fmt.block_begin), repeated, of(fmt.block_end))
    if fmt.answer_begin:
        answer = seq(of(fmt.answer_begin), text(fmt.answer_end), of(fmt.answer_end))
        if mode == "required":
            body = block
        elif mode == "none":
            body = answer
        else:
            body = {"type": "or", "elements": [answer, block]}
    elif mode == "required":
        body = block
    elif mode == "none":
        body = seq(text())
    else:
        body = seq(text(), [{"type": "optional", "content": block}])
    if fmt.thinking_begin:
        thinking = seq(of(fmt.thinking_begin), text(fmt.thinking_end), of(fmt.thinking_end))
        body = seq([{"type": "optional", "content": thinking}], [body])
    return {"type": "structural_tag", "format": body}
