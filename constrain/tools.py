r"""Tool calls (stage 8, with the output types): tools -> a structural tag, and text -> calls.

A *tool* is a Python function (its signature and docstring give the schema, through pydantic),
a pydantic model class (its fields are the arguments) or an OpenAI tool dict (``{"type":
"function", "function": {"name", "description", "parameters"}}``). A *format* is how a chat
template writes calls; :data:`TOOL_FORMATS` (:mod:`constrain.tool_formats`) holds one entry
per family: ``hermes``, ``smollm2``, ``mistral``, ``llama3_json``, ``deepseek_v3``,
``deepseek_v31`` and ``harmony``.

:func:`tool_structural_tag` writes the constraint as XGrammar's structural tag (so the same
spec serves :meth:`~constrain.Grammar.from_structural_tag`, XGrammar and vLLM), where only each
tool's arguments follow its JSON Schema; :func:`parse_tool_calls` reads a finished text back
into the prose and the validated :class:`ToolCall` s. ``tool_choice`` is ``"auto"`` (prose, or
prose then calls), ``"required"`` (calls only), ``"none"`` (prose only) or ``{"name": ...}``
(one call of that tool); ``parallel`` allows more than one call.

A format's markers that the model's tokenizer has as special tokens (DeepSeek's
``<｜tool▁calls▁begin｜>``, Harmony's ``<|channel|>``, Mistral's ``[TOOL_CALLS]``) are named in
``special_tokens`` and then required by token id (the structural tag's ``token`` format), so
that a text merely spelling one does not match; markers that are end-of-sequence tokens
(``end_tokens``: gpt-oss's ``<|call|>`` and ``<|return|>``) end the output instead. Without
them, every marker is text.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from constrain.errors import OutputValidationError
from constrain.frontends.json_schema.open_ends import close_open_ends
from constrain.ir import Grammar
from constrain.output import OutputType
from constrain.tool_formats import (
    TOOL_FORMATS,
    ToolFormat,
    detect_tool_format,
    sequence_tag,
    uses_sequence_tag,
)

__all__ = [
    "TOOL_FORMATS",
    "AssistantMessage",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "ToolFormat",
    "as_tool",
    "detect_tool_format",
    "parse_tool_calls",
    "split_thinking",
    "tool_structural_tag",
    "tool_output",
    "tool_system_prompt",
]

ToolChoice = Literal["auto", "required", "none"] | Mapping[str, Any]


@dataclass(frozen=True)
class Tool:
    """One tool: its name, description, arguments schema and how to validate arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """The JSON Schema of the arguments (an object)."""
    function: Callable[..., Any] | None = field(default=None, compare=False)
    """The function to call, for a tool made from a function."""
    model: Any = field(default=None, compare=False)
    """The pydantic model the arguments are validated into (None: a plain dict, checked with
    ``jsonschema``)."""

    def validate(self, arguments: Any) -> Any:
        """Return the arguments validated: a model instance, or the dict itself.

        Raises
        ------
        OutputValidationError
            If they do not follow :attr:`parameters`.
        """
        text = json.dumps(arguments)
        if self.model is not None:
            import pydantic

            try:
                return self.model.model_validate(arguments)
            except pydantic.ValidationError as err:
                raise OutputValidationError(f"tool {self.name!r}: {err}", text) from err
        import jsonschema

        try:
            jsonschema.validate(arguments, dict(self.parameters))
        except jsonschema.ValidationError as err:
            raise OutputValidationError(f"tool {self.name!r}: {err.message}", text) from err
        return arguments

    def openai(self) -> dict[str, Any]:
        """Return the OpenAI tool dict of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its validated arguments."""

    name: str
    arguments: Any
    """A pydantic model instance for a function or model tool, else the dict."""
    tool: Tool = field(repr=False, compare=False)

    def __call__(self) -> Any:
        """Call the tool's function with the arguments (a tool made from a function)."""
        if self.tool.function is None:
            raise TypeError(f"tool {self.name!r} was not made from a function: nothing to call")
        args = self.arguments
        values = args.model_dump() if hasattr(args, "model_dump") else dict(args)
        return self.tool.function(**values)


def as_tool(spec: Any) -> Tool:
    """Return the :class:`Tool` of a function, a pydantic model class or an OpenAI tool dict.

    Raises
    ------
    TypeError
        If ``spec`` is none of these, or a function's parameter is positional-only or
        variadic (``*args``, ``**kwargs``).
    ValueError
        If an OpenAI dict lacks a name, or its ``parameters`` is not an object schema.
    """
    if isinstance(spec, Tool):
        return spec
    if isinstance(spec, Mapping):
        return _dict_tool(spec)
    import pydantic

    if isinstance(spec, type) and issubclass(spec, pydantic.BaseModel):
        schema = spec.model_json_schema()
        description = inspect.getdoc(spec) or ""
        if description == inspect.getdoc(pydantic.BaseModel):
            description = ""
        schema.pop("description", None)
        schema.pop("title", None)
        return Tool(spec.__name__, description, schema, model=spec)
    if callable(spec) and hasattr(spec, "__name__"):
        return _function_tool(spec)
    raise TypeError(
        "a tool is a function, a pydantic model class or an OpenAI tool dict "
        f"({{'type': 'function', 'function': {{'name': ..., 'parameters': ...}}}}), got "
        f"{type(spec).__name__}"
    )


def _dict_tool(spec: Mapping[str, Any]) -> Tool:
    fn = spec.get("function", spec) if spec.get("type", "function") == "function" else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise ValueError(
            "an OpenAI tool dict is {'type': 'function', 'function': {'name': ..., "
            f"'parameters': {{...}}}}; got {dict(spec)!r}"
        )
    parameters = fn.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise ValueError(f"tool {fn['name']!r}: parameters must be an object schema")
    return Tool(fn["name"], str(fn.get("description", "")), dict(parameters))


def _function_tool(fn: Callable[..., Any]) -> Tool:
    import pydantic

    fields: dict[str, Any] = {}
    try:  # string annotations (from __future__ import annotations) resolved in fn's module
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as err:
        raise TypeError(f"tool {fn.__name__!r}: cannot resolve its annotations: {err}") from err
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool {fn.__name__!r}: parameter {name!r} must be passable by keyword "
                "(no positional-only parameters, *args or **kwargs)"
            )
        annotation = hints.get(name, Any)
        default = ... if param.default is param.empty else param.default
        fields[name] = (annotation, default)
    model = pydantic.create_model(f"{fn.__name__}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    doc = inspect.getdoc(fn) or ""
    description = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return Tool(fn.__name__, description, schema, function=fn, model=model)


def _format(fmt: str | ToolFormat) -> ToolFormat:
    if isinstance(fmt, ToolFormat):
        return fmt
    found = TOOL_FORMATS.get(fmt)
    if found is None:
        raise ValueError(f"unknown tool format {fmt!r}; choose from {', '.join(TOOL_FORMATS)}")
    return found


def _chosen(tools: Sequence[Tool], tool_choice: ToolChoice) -> tuple[list[Tool], str]:
    """Return the tools that may be called and the mode: auto, required or none."""
    if isinstance(tool_choice, Mapping):
        name = tool_choice.get("name", tool_choice.get("function", {}).get("name"))
        picked = [t for t in tools if t.name == name]
        if not picked:
            known = ", ".join(t.name for t in tools)
            raise ValueError(f"tool_choice names {name!r}, which is not a tool ({known})")
        return picked, "required"
    if tool_choice not in ("auto", "required", "none"):
        raise ValueError(
            f"tool_choice is 'auto', 'required', 'none' or {{'name': ...}}, got {tool_choice!r}"
        )
    if tool_choice != "none" and not tools:
        raise ValueError(f"tool_choice={tool_choice!r} needs at least one tool")
    return list(tools), tool_choice


def tool_structural_tag(
    tools: Sequence[Any],
    *,
    tool_choice: ToolChoice = "auto",
    parallel: bool = True,
    format: str | ToolFormat = "hermes",  # noqa: A002 (the name users pass)
    max_items: int | None = None,
    max_length: int | None = None,
    special_tokens: Collection[str] = (),
    end_tokens: Collection[str] = (),
) -> dict[str, Any]:
    """Return XGrammar's structural tag for calls of ``tools`` in ``format``.

    ``"auto"``: prose, then (optionally) the calls; ``"required"`` and ``{"name": ...}``: the
    calls only, at least one; ``"none"``: prose that never starts a call. Without ``parallel``
    at most one call.
    Arguments follow each tool's schema as XGrammar reads JSON Schema (strict: no keys beyond
    ``properties`` unless the schema allows them). ``max_items`` and ``max_length``, when
    given, bound the arrays and strings the schemas leave open (``maxItems`` and
    ``maxLength`` written where a schema has none:
    :func:`~constrain.frontends.json_schema.open_ends.close_open_ends`); by default the
    schemas are used as they are.

    ``special_tokens`` names the tokenizer's special tokens (non-EOS): the format's markers
    among them are required by token id (``token`` formats in sequences:
    :func:`~constrain.tool_formats.sequence_tag`). ``end_tokens`` names its end-of-sequence
    tokens: a marker among them is left out, the output ends there. A format whose answer is a
    message of its own (``harmony``) is always written as sequences.
    """
    fmt = _format(format).ending_at(end_tokens)
    picked, mode = _chosen([as_tool(t) for t in tools], tool_choice)
    bounded = {
        t.name: close_open_ends(dict(t.parameters), max_items=max_items, max_length=max_length)
        for t in picked
    }
    if uses_sequence_tag(fmt, special_tokens):
        named = [(t.name, bounded[t.name]) for t in picked]
        return sequence_tag(fmt, named, mode, parallel=parallel, special_tokens=special_tokens)
    if mode == "none":  # prose that never starts a call
        return {"type": "structural_tag", "format": {"type": "any_text", "excludes": [fmt.trigger]}}
    tags = [
        {
            "type": "tag",
            "begin": fmt.begin(t.name),
            "content": {"type": "json_schema", "json_schema": bounded[t.name]},
            "end": fmt.call_end,
        }
        for t in picked
    ]
    required = mode == "required"
    if not fmt.block_begin:
        inner: dict[str, Any] = {
            "type": "triggered_tags",
            "triggers": [fmt.trigger],
            "tags": tags,
            "at_least_one": required,
            "stop_after_first": not parallel,
        }
        return {"type": "structural_tag", "format": inner}
    calls = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": fmt.separator,
        "at_least_one": True,
        "stop_after_first": not parallel,
    }
    block = {"type": "tag", "begin": fmt.block_begin, "content": calls, "end": fmt.block_end}
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": [fmt.block_begin],
            "tags": [block],
            "at_least_one": required,
            "stop_after_first": True,
        },
    }


def tool_system_prompt(tools: Sequence[Any], format: str | ToolFormat = "hermes") -> str:  # noqa: A002
    """Return the system-prompt text that lists ``tools`` the way ``format``'s models read it."""
    fmt = _format(format)
    listed = "\n".join(json.dumps(as_tool(t).openai()) for t in tools)
    return fmt.instructions.replace("{tools}", listed)


def parse_tool_calls(
    text: str,
    tools: Sequence[Any],
    format: str | ToolFormat = "hermes",  # noqa: A002
    *,
    end_tokens: Collection[str] = (),
) -> tuple[str, list[ToolCall]]:
    """Return the prose of ``text`` and its calls, each validated by its tool.

    Reads what :func:`tool_structural_tag` allows: prose and calls in ``format`` (the prose
    pieces around the calls are joined by a blank line). Special tokens are read by name, as
    :meth:`~constrain.Vocabulary.decode_text` writes them; markers that were end tokens
    (:meth:`~constrain.tool_formats.ToolFormat.ending_at`) are absent from the text. A
    reasoning message before the answer (Harmony's analysis channel) is skipped:
    :func:`split_thinking` returns it.

    Raises
    ------
    OutputValidationError
        If a call is malformed, names an unknown tool or its arguments do not validate.
    """
    fmt = _format(format).ending_at(end_tokens)
    known = [as_tool(t) for t in tools]
    text = split_thinking(text, fmt)[1]
    prose: list[str] = []
    calls: list[ToolCall] = []
    if fmt.answer_begin and text.startswith(fmt.answer_begin):
        if not text.endswith(fmt.answer_end):
            raise OutputValidationError(f"the answer does not end with {fmt.answer_end!r}", text)
        return text[len(fmt.answer_begin) : len(text) - len(fmt.answer_end)].strip(), []
    if fmt.block_begin or fmt.answer_begin:  # a block, or messages of calls only
        start = text.find(fmt.block_begin) if fmt.block_begin else 0
        if start < 0:
            return text.strip(), []
        body_at, body_end = start + len(fmt.block_begin), len(text) - len(fmt.block_end)
        if not text.endswith(fmt.block_end) or body_end < body_at:
            raise OutputValidationError(f"the calls do not end with {fmt.block_end!r}", text)
        prose.append(text[:start])
        pos = body_at
        while True:
            call, pos = _read_call(text, pos, known, fmt)
            calls.append(call)
            if pos == body_end:
                break
            if not text.startswith(fmt.separator, pos):
                raise OutputValidationError(f"calls must be separated by {fmt.separator!r}", text)
            pos += len(fmt.separator)
    else:
        pos = 0
        while (at := text.find(fmt.trigger, pos)) >= 0:
            prose.append(text[pos:at])
            call, pos = _read_call(text, at, known, fmt)
            calls.append(call)
        prose.append(text[pos:])
    return "\n\n".join(p.strip() for p in prose if p.strip()), calls


def split_thinking(text: str, format: str | ToolFormat) -> tuple[str | None, str]:  # noqa: A002
    """Return the reasoning message at the start of ``text`` (None: none) and the rest.

    Raises
    ------
    OutputValidationError
        If the reasoning message is not closed by the format's ``thinking_end``.
    """
    fmt = _format(format)
    if not fmt.thinking_begin or not text.startswith(fmt.thinking_begin):
        return None, text
    end = text.find(fmt.thinking_end, len(fmt.thinking_begin))
    if end < 0:
        raise OutputValidationError(f"the reasoning does not end with {fmt.thinking_end!r}", text)
    return text[len(fmt.thinking_begin) : end], text[end + len(fmt.thinking_end) :]


def _read_call(text: str, at: int, tools: Sequence[Tool], fmt: ToolFormat) -> tuple[ToolCall, int]:
    """Read the call that starts at ``at``; return it and where it ends."""
    for tool in tools:
        begin = fmt.begin(tool.name)
        if text.startswith(begin, at):
            try:
                arguments, end = json.JSONDecoder().raw_decode(text, at + len(begin))
            except json.JSONDecodeError as err:
                raise OutputValidationError(f"tool {tool.name!r}: arguments: {err}", text) from err
            if not text.startswith(fmt.call_end, end):
                raise OutputValidationError(f"the call of {tool.name!r} is not closed", text)
            return ToolCall(tool.name, tool.validate(arguments), tool), end + len(fmt.call_end)
    raise OutputValidationError(f"a call at offset {at} names no known tool", text)


@dataclass(frozen=True)
class AssistantMessage:
    """What ``constrain.generate(prompt, tools=...)`` returns: the prose and the calls."""

    content: str
    """The prose around the calls, stripped (empty when the output is calls only)."""
    tool_calls: list[ToolCall]
    """The calls, in order, each validated by its tool's schema."""
    text: str
    """The whole output, exactly as generated."""
    reasoning: str | None = None
    """The reasoning before the prose and calls (``generate(..., reasoning=...)``), without its
    markers; ``None`` without a reasoning block."""


def tool_output(
    tools: Sequence[Any],
    *,
    tool_choice: ToolChoice = "auto",
    parallel: bool = True,
    format: str | ToolFormat = "hermes",  # noqa: A002
    max_items: int | None = None,
    max_length: int | None = None,
    special_tokens: Collection[str] = (),
    end_tokens: Collection[str] = (),
) -> OutputType:
    """Return the output type of tool calls: a grammar, and a parser to AssistantMessage.

    ``max_items``, ``max_length``, ``special_tokens`` and ``end_tokens`` as
    :func:`tool_structural_tag` (by default: schemas as given, every marker as text). The
    parser reads text with special tokens by name (:meth:`~constrain.Vocabulary.decode_text`).
    """
    known = [as_tool(t) for t in tools]
    fmt = _format(format).ending_at(end_tokens)
    spec = tool_structural_tag(
        known,
        tool_choice=tool_choice,
        parallel=parallel,
        format=fmt,
        max_items=max_items,
        max_length=max_length,
        special_tokens=special_tokens,
    )
    grammar = Grammar.from_structural_tag(spec)
    plain = not (fmt.thinking_begin or fmt.answer_begin)

    def parse(text: str) -> AssistantMessage:
        if isinstance(tool_choice, str) and tool_choice == "none" and plain:
            return AssistantMessage(text.strip(), [], text)
        reasoning = split_thinking(text, fmt)[0]
        content, calls = parse_tool_calls(text, known, fmt)
        return AssistantMessage(content, calls, text, reasoning)

    names = ", ".join(t.name for t in known)
    return OutputType(grammar, "tools", f"tool calls ({fmt.name}: {names})", parse)
