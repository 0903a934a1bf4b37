"""The XML argument-style specs of the structural-tag parity table.

``benchmarks/structural_tag_parity.py`` imports these: the ``qwen_xml`` specs (Qwen3-Coder's
tool calls), the other styles' specs (``qwen_xml``'s restyled), the sample outputs fed token by
token (:data:`QWEN_SAMPLES`) and the strings a walk of an XML spec favours
(:func:`qwen_xml_hints`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any


def json_format(schema: Any, **extra: Any) -> dict[str, Any]:
    """Return a ``json_schema`` format."""
    return {"type": "json_schema", "json_schema": schema, **extra}


def tag(begin: str, content: dict[str, Any], end: str | list[str]) -> dict[str, Any]:
    """Return a ``tag`` format."""
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def triggered(tags: list[dict[str, Any]], triggers: list[str], **flags: Any) -> dict[str, Any]:
    """Return a ``triggered_tags`` format."""
    return {"type": "triggered_tags", "triggers": triggers, "tags": tags, **flags}


def spec_strings(
    spec: Any, keys: Callable[[str], list[str]], fields: tuple[str, ...] = ("begin", "end", "const")
) -> list[str]:
    """Return a spec's strings a walk favours: ``keys(name)`` of every declared property, the
    string ``fields`` (tags, ``const``) and the string ``enum`` members, depth first."""
    out: list[str] = []
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
            if isinstance(node.get("properties"), dict):
                out.extend(text for k in node["properties"] for text in keys(k))
            out.extend(node[k] for k in fields if isinstance(node.get(k), str))
            out.extend(v for v in node.get("enum", []) if isinstance(v, str))
        elif isinstance(node, list):
            stack.extend(node)
    return out


THINK = tag("<think>", {"type": "any_text"}, "</think>")


ARGS = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["location"],
}
NESTED_ARGS = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filters": {
            "type": "object",
            "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}},
            "required": ["lang"],
        },
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "score": {"type": "number"},
    },
    "required": ["query", "tags"],
}
STRING_ARGS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "pattern": "[A-Z]{2}[0-9]{1,3}"},
        "note": {"type": "string", "maxLength": 6},
        "mode": {"const": "fast"},
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["code"],
}


FREE_ARGS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "additionalProperties": True,
}


def style_specs(
    style: str,
    calls: list[dict[str, Any]],
    trigger: str,
    samples: dict[str, tuple[str, ...]],
    more: dict[str, dict[str, Any]],
) -> list[tuple[str, dict[str, Any]]]:
    """Return a style's specs named ``STYLE_NAME`` and record their ``samples``.

    The specs: the weather and search arguments, ``more``, the first call as a tag and the
    calls behind ``trigger``.
    """
    specs = {
        "args": json_format(ARGS, style=style),
        "nested": json_format(NESTED_ARGS, style=style),
        **more,
        "tag": calls[0],
        "triggered": triggered(calls, [trigger]),
    }
    for name, texts in samples.items():
        QWEN_SAMPLES[f"{style}_{name}"] = texts
    return [(f"{style}_{name}", fmt) for name, fmt in specs.items()]


def value_specs(style: str) -> dict[str, dict[str, Any]]:
    """Return the string, additional-property and unconstrained specs of a style."""
    return {
        "strings": json_format(STRING_ARGS, style=style),
        "additional": json_format(FREE_ARGS, style=style),
        "any": json_format({}, style=style),
    }


def qwen_call(name: str, schema: Any, **extra: Any) -> dict[str, Any]:
    """Qwen3-Coder's tool call: ``<tool_call>\n<function=NAME>\n`` ... XML arguments."""
    begin = f"<tool_call>\n<function={name}>\n"
    return tag(begin, json_format(schema, style="qwen_xml", **extra), "</function>\n</tool_call>")


WEATHER_CALL = (
    "<parameter=location>\nSan Francisco, CA\n</parameter>\n"
    "<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
)
SEARCH_CALL = (
    "<parameter=query>\nbest <b>pizza</b> & pasta\n</parameter>\n"
    '<parameter=filters>\n{"lang": "en", "safe": true}\n</parameter>\n'
    '<parameter=tags>\n["food", "it"]\n</parameter>\n<parameter=score>\n-2.5e3\n</parameter>\n'
)
QWEN_SAMPLES: dict[str, tuple[str, ...]] = {
    "qwen_xml_args": (WEATHER_CALL, "<parameter=location>Paris</parameter>"),
    "qwen_xml_nested": (
        SEARCH_CALL,
        "<parameter=query></parameter><parameter=tags>[]</parameter>",
    ),
    "qwen_xml_strings": (
        "<parameter=code>\nAB12\n</parameter>\n<parameter=note>\nhi </p\n</parameter>\n"
        "<parameter=mode>fast</parameter>\n<parameter=maybe>\nnull\n</parameter>",
        "<parameter=code>XY9</parameter><parameter=maybe>\nnot null\n</parameter>",
    ),
    "qwen_xml_any": (
        '<parameter=x>\n{"k": [1, 2]}\n</parameter>\n<parameter=y_2>\n[1]\n</parameter>'
        "<parameter=z>text</parameter>\n",
    ),
    "qwen_xml_additional": (
        "<parameter=a>\n7\n</parameter>\n<parameter=a>\nagain\n</parameter>\n"
        '<parameter=b>\n["x"]\n</parameter>\n',
    ),
    "qwen_xml_ws_cnt": (
        "\n<parameter=location>Rome</parameter>\n<parameter=days>  14 </parameter>",
    ),
    "qwen_xml_parameter": (WEATHER_CALL,),
    "qwen_xml_tag": (
        f"<tool_call>\n<function=get_weather>\n{WEATHER_CALL}</function>\n</tool_call>",
    ),
    "qwen_xml_triggered": (
        f"Let me check.\n<tool_call>\n<function=get_weather>\n{WEATHER_CALL}</function>\n"
        f"</tool_call>\n<tool_call>\n<function=search>\n{SEARCH_CALL}</function>\n</tool_call>",
    ),
    "qwen_xml_think_tools": (
        "<think>The user wants the weather.</think><tool_call>\n<function=get_weather>\n"
        f"{WEATHER_CALL}</function>\n</tool_call>",
    ),
}


def qwen_xml_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the specs of the ``qwen_xml`` argument style (Qwen3-Coder's tool calls)."""
    calls = [qwen_call("get_weather", ARGS), qwen_call("search", NESTED_ARGS)]
    return [
        ("qwen_xml_args", json_format(ARGS, style="qwen_xml")),
        ("qwen_xml_nested", json_format(NESTED_ARGS, style="qwen_xml")),
        ("qwen_xml_strings", json_format(STRING_ARGS, style="qwen_xml")),
        ("qwen_xml_any", json_format({}, style="qwen_xml")),
        ("qwen_xml_additional", json_format(FREE_ARGS, style="qwen_xml")),
        ("qwen_xml_ws_cnt", json_format(ARGS, style="qwen_xml", max_whitespace_cnt=2)),
        ("qwen_xml_parameter", {"type": "qwen_xml_parameter", "json_schema": ARGS}),
        ("qwen_xml_tag", calls[0]),
        ("qwen_xml_triggered", triggered(calls, ["<tool_call>"])),
        ("qwen_xml_think_tools", {"type": "sequence", "elements": [THINK, *calls[:1]]}),
    ]


DS = "\uff5cDSML\uff5c"
TAGS = {
    "minimax_xml": ('<parameter name="', '">', "</parameter>"),
    "deepseek_xml": (f'<{DS}parameter name="', '" string="', f"</{DS}parameter>"),
    "deepseek_v4_1_xml": (f'<{DS} parameter name="', '" string="', f"</{DS} parameter>"),
    "glm_xml": ("<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>"),
    "kimi_k3_xml": ('<|open|>argument key="', '" type="', "<|close|>argument<|sep|>"),
}


def restyle(style: str, text: str) -> str:
    """Return a ``qwen_xml`` text in another XML style (DeepSeek's typed by each value)."""
    opening, middle, end = TAGS.get(style, ("<parameter=", ">", "</parameter>"))  # qwen_xml
    if style.startswith("deepseek"):
        text = re.sub(r"<parameter=(\w+)>(.*?)(?=</parameter>)", typed, text, flags=re.S)
    if style == "kimi_k3_xml":
        text = re.sub(r"<parameter=(\w+)>(.*?)(?=</parameter>)", kimi_typed, text, flags=re.S)
    text = re.sub(r"<parameter=(\w+)>", rf"{opening}\1{middle}", text)
    return text.replace("<parameter=", opening).replace("</parameter>", end)


def typed(match: re.Match[str]) -> str:
    raw = not re.match(r"\s*([-\d\[{]|true\b|false\b|null\b)", match[2])  # a string value
    return f'<parameter={match[1]}>{str(raw).lower()}">{match[2].strip() if raw else match[2]}'


def kimi_typed(match: re.Match[str]) -> str:
    """Return a ``qwen_xml`` element's opening with Kimi-K3's type name of its value."""
    value = match[2].strip()
    kinds = {"true": "boolean", "false": "boolean", "null": "null"}
    if value in kinds:
        kind = kinds[value]
    elif value.startswith(("[", "{")):
        kind = "array" if value[0] == "[" else "object"
    else:
        kind = "number" if re.fullmatch(r"-?\d[\d.eE+-]*", value) else "string"
    return f'<parameter={match[1]}>{kind}"<|sep|>{match[2]}'


def other_xml_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the other styles' specs (:data:`TAGS`): six of ``qwen_xml``'s each, restyled."""
    out, kept = [], ("args", "nested", "strings", "additional", "ws_cnt", "tag")
    for style in TAGS:
        for name, fmt in qwen_xml_specs():
            if name.removeprefix("qwen_xml_") in kept:
                new = f"{style}_{name.removeprefix('qwen_xml_')}"
                out.append((new, json.loads(json.dumps(fmt).replace('"qwen_xml"', f'"{style}"'))))
                QWEN_SAMPLES[new] = tuple(restyle(style, t) for t in QWEN_SAMPLES[name])
    return out


def qwen_xml_hints(spec: Any) -> list[str] | None:
    """Return the strings a walk of a ``qwen_xml`` spec favours, all their tokens (else None).

    A plain string value is free text that only ``</parameter>`` ends, so the walk favours few
    strings: the elements' openings and ends, the enum values and the tag strings.
    """
    text = json.dumps(spec)
    if "minimax_m3_xml" in text:
        return m3_hints(spec)
    if "cohere_xml" in text:
        return cohere_hints(spec)
    if '"gemma"' in text:
        return gemma_hints(spec)
    style = next((s for s in ("qwen_xml", *TAGS) if s in text), None)
    if style is None:
        return None
    out = ["</parameter>", "\n</parameter>\n<parameter=", "1", "true", '["a"]', '{"lang": "en"}']
    out = [restyle(style, t) for t in out]
    if style == "kimi_k3_xml":  # the type names
        out.extend(f'{kind}"<|sep|>' for kind in ("string", "number", "object", "array"))
    return out + spec_strings(spec, lambda k: [restyle(style, f"<parameter={k}>")])


# --------------------------------------------------------------------------------------------
# minimax_m3_xml: values nest as elements (no qwen_xml text to restyle)
# --------------------------------------------------------------------------------------------

NS = "]<]minimax[>["
MIXED_ARGS = {
    "type": "object",
    "properties": {
        "mode": {"const": "fast"},
        "pick": {"enum": ["a", 2, [True], {"k": "v"}]},
        "target": {
            "anyOf": [
                {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                {"type": "string"},
            ]
        },
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
            "items": {"type": "string"},
            "maxItems": 3,
        },
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["mode"],
}


def m3(name: str, value: str) -> str:
    """Return one ``minimax_m3_xml`` element."""
    return f"{NS}<{name}>{value}{NS}</{name}>"


def m3_call(name: str, schema: Any, **extra: Any) -> dict[str, Any]:
    """Return a tool call whose arguments are in the ``minimax_m3_xml`` style."""
    begin = f"<tool_call>\n<function={name}>\n"
    fmt = json_format(schema, style="minimax_m3_xml", **extra)
    return tag(begin, fmt, "</function>\n</tool_call>")


M3_WEATHER = "\n".join(
    ["", m3("location", "San Francisco, CA"), m3("unit", "celsius"), m3("days", "3"), ""]
)
M3_SEARCH = (
    m3("query", "best <b>pizza</b> & pasta")
    + "\n"
    + m3("filters", f"\n{m3('lang', 'en')}\n{m3('safe', 'true')}\n")
    + "\n"
    + m3("tags", m3("item", "food") + m3("item", "it"))
    + m3("score", "-2.5e3")
)


def m3_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the ``minimax_m3_xml`` specs and record their sample outputs."""
    calls = [m3_call("get_weather", ARGS), m3_call("search", NESTED_ARGS)]
    call_text = f"<tool_call>\n<function=get_weather>\n{M3_WEATHER}</function>\n</tool_call>"
    search_text = f"<tool_call>\n<function=search>\n{M3_SEARCH}</function>\n</tool_call>"
    pair = m3("item", "1") + " " + m3("item", "false") + m3("item", "x")
    samples = {
        "args": (M3_WEATHER, m3("location", "Paris")),
        "nested": (M3_SEARCH, m3("query", "") + m3("tags", "")),
        "mixed": (
            m3("mode", "fast")
            + "\n"
            + m3("pick", m3("k", "v"))
            + "\n"
            + m3("target", m3("id", "7"))
            + m3("pair", pair)
            + m3("maybe", "null"),
            m3("mode", "fast") + m3("target", "me") + m3("maybe", "not null"),
        ),  # fmt: skip
        "ws_cnt": ("\n" + m3("location", "Rome") + "\n" + m3("days", "14"),),
        "tag": (call_text,),
        "triggered": (f"Let me check.\n{call_text}\n{search_text}",),
    }
    more = {
        "mixed": json_format(MIXED_ARGS, style="minimax_m3_xml"),
        "ws_cnt": json_format(ARGS, style="minimax_m3_xml", max_whitespace_cnt=2),
    }
    return style_specs("minimax_m3_xml", calls, "<tool_call>", samples, more)


def m3_hints(spec: Any) -> list[str]:
    """Return the strings a walk of a ``minimax_m3_xml`` spec favours, all their tokens."""
    out = [NS, f"{NS}<item>", f"{NS}</item>", "1", "true", "null", "-2.5", "\n"]
    return out + spec_strings(spec, lambda k: [f"{NS}<{k}>", f"{NS}</{k}>"])


# --------------------------------------------------------------------------------------------
# cohere_xml: typed elements, objects and arrays nested
# --------------------------------------------------------------------------------------------


def cv(name: str, kind: str, value: str) -> str:
    """Return one ``cohere_xml`` element of an object."""
    return f'<cofl:value name="{name}" type="{kind}">{value}</cofl:value>'


def ci(kind: str, value: str) -> str:
    """Return one ``cohere_xml`` item of a list."""
    return f'<cofl:value type="{kind}">{value}</cofl:value>'


def cohere_call(name: str, schema: Any) -> dict[str, Any]:
    """Return a tool call whose arguments are in the ``cohere_xml`` style."""
    begin = f"<tool_call>\n<function={name}>\n"
    return tag(begin, json_format(schema, style="cohere_xml"), "</function>\n</tool_call>")


C_WEATHER = "\n".join(
    [
        "",
        cv("location", "raw", "San Francisco, CA"),
        cv("unit", "raw", " celsius "),
        cv("days", "json", "3"),
        "",
    ]
)
C_SEARCH = (
    cv("query", "raw", "best <b>pizza</b> & pasta")
    + "\n"
    + cv("filters", "dict", f"\n{cv('lang', 'raw', 'en')}\n{cv('safe', 'json', 'true')}\n")
    + "\n"
    + cv("tags", "list", ci("raw", "food") + ci("raw", "it"))
    + cv("score", "json", "-2.5e3")
)


def cohere_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the ``cohere_xml`` specs and record their sample outputs."""
    calls = [cohere_call("get_weather", ARGS), cohere_call("search", NESTED_ARGS)]
    call_text = f"<tool_call>\n<function=get_weather>\n{C_WEATHER}</function>\n</tool_call>"
    search_text = f"<tool_call>\n<function=search>\n{C_SEARCH}</function>\n</tool_call>"
    samples = {
        "args": (C_WEATHER, cv("location", "raw", "Paris")),
        "nested": (C_SEARCH, cv("query", "raw", "") + cv("tags", "list", "")),
        "strings": (
            cv("code", "raw", "\nAB12\n")
            + cv("note", "raw", "hi </p")
            + cv("mode", "raw", "fast")
            + cv("maybe", "json", " null "),
            cv("code", "raw", "XY9") + cv("maybe", "raw", "\nnot null\n"),
        ),  # fmt: skip
        "additional": (
            cv("a", "json", "7") + "\n" + cv("b", "raw", "again") + cv("c", "list", ci("raw", "x")),
        ),
        "any": (
            cv("x", "dict", cv("k", "list", ci("json", "1") + ci("json", "2")))
            + "\n"
            + cv("y_2", "raw", "text"),
        ),  # fmt: skip
        "tag": (call_text,),
        "triggered": (f"Let me check.\n{call_text}\n{search_text}",),
    }
    return style_specs("cohere_xml", calls, "<tool_call>", samples, value_specs("cohere_xml"))


def cohere_hints(spec: Any) -> list[str]:
    """Return the strings a walk of a ``cohere_xml`` spec favours, all their tokens."""
    out = ['<cofl:value name="', "<cofl:value", "</cofl:value>", "1", "true", "null", "\n"]
    out += [f' type="{kind}">' for kind in ("raw", "json", "dict", "list")]
    return out + spec_strings(spec, lambda k: [f'<cofl:value name="{k}"'])


# --------------------------------------------------------------------------------------------
# gemma: JSON with <|"|>-quoted strings and unquoted keys
# --------------------------------------------------------------------------------------------

GQ = '<|"|>'


def gq(text: str) -> str:
    """Return a ``gemma`` string."""
    return f"{GQ}{text}{GQ}"


def gemma_call(name: str, schema: Any) -> dict[str, Any]:
    """Return a Gemma-like tool call: ``<start_function_call>call:NAME{ARGS}``."""
    begin = f"<start_function_call>call:{name}"
    return tag(begin, json_format(schema, style="gemma"), "<end_function_call>")


G_WEATHER = "{location:" + gq("San Francisco, CA") + ",unit:" + gq("celsius") + ",days:3}"
G_SEARCH = (
    "{\n  query: " + gq('best <b>"pizza"</b> & pasta') + ",\n  filters: {lang:" + gq("en")
    + ",safe:true},\n  tags: [" + gq("food") + ", " + gq("it") + "],\n  score: -2.5e3\n}"
)  # fmt: skip


def gemma_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the ``gemma`` specs and record their sample outputs."""
    calls = [gemma_call("get_weather", ARGS), gemma_call("search", NESTED_ARGS)]
    call_text = f"<start_function_call>call:get_weather{G_WEATHER}<end_function_call>"
    search_text = f"<start_function_call>call:search{G_SEARCH}<end_function_call>"
    samples = {
        "args": (G_WEATHER, "{location:" + gq("Paris") + "}"),
        "nested": (G_SEARCH, "{query:" + gq("") + ",tags:[]}"),
        "strings": (
            "{code:"
            + gq("AB12")
            + ",note:"
            + gq("hi\n</p")
            + ",mode:"
            + gq("fast")
            + ",maybe:null}",
            "{code:" + gq("XY9") + ", maybe: " + gq("not null") + "}",
        ),  # fmt: skip
        "additional": ("{a:7, b:" + gq("again") + ", c:[" + gq("x") + ", {d: null}]}",),
        "any": ("{x:{k:[1, 2]}, y_2:" + gq("text") + "}",),
        "tag": (call_text,),
        "triggered": (f"Let me check.\n{call_text}{search_text}",),
    }
    trigger = "<start_function_call>"
    return style_specs("gemma", calls, trigger, samples, value_specs("gemma"))


def gemma_hints(spec: Any) -> list[str]:
    """Return the strings a walk of a ``gemma`` spec favours, all their tokens."""
    out = [GQ, "{", "}", ":", ",", "[", "]", "1", "true", "null", "-2.5", " "]
    return out + spec_strings(spec, lambda k: [f"{k}:"], ("begin", "end"))
