"""XGrammar's XML argument styles in structural tags (constrain.frontends.xml_arguments)."""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xml_styles import accepts, check_language, style_spec

import constrain
from constrain.frontends.xml_arguments import xml_value_text

ROOT = Path(__file__).resolve().parents[2]
WEATHER = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"enum": ["c", "f"]},
        "days": {"type": "integer"},
        "ok": {"type": "boolean"},
    },
    "required": ["location"],
}


P = "<parameter="
E = "</parameter>"
# (schema, extra, accepted, rejected): each expectation was checked against XGrammar 0.2.9.
CASES: list[tuple[Any, dict[str, Any], list[str], list[str]]] = [
    (
        WEATHER,
        {},
        [
            f"{P}location>Paris{E}",
            f"\n{P}location>\nSan Francisco, CA\n{E}\n{P}unit>\nc\n{E}\n{P}days> 3 {E}\n",
            f"{P}location>a</parameter{E}{P}ok>true{E}",  # the string ends at the first end
            f'{P}location>"x&lt;"{E}{P}unit>f{E}{P}days>-12{E}{P}ok>false{E}',
            f"{P}location>{E}",
        ],
        [
            "",
            f"{P}unit>c{E}",  # location is required
            f"{P}days>3{E}{P}location>x{E}",  # declared order
            f"{P}location>x{E}{P}location>y{E}",  # at most once
            f'{P}location>x{E}{P}unit>"c"{E}',  # enum strings are raw
            f"{P}location>x{E}{P}days>1.5{E}",
            f"{P}location>x{E}{P}zz>1{E}",  # strict: no undeclared property
            f"{P}location>x{E}y",
            f"{P} location>x{E}",
        ],
    ),
    (
        {
            "type": "object",
            "properties": {
                "o": {"type": "object", "properties": {"x": {"type": "string"}}},
                "a": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["a"],
        },
        {},
        [
            f'{P}o>{{"x": "y"}}{E}{P}a>["p", "q"]{E}',
            f"{P}a>[]{E}",
            f'{P}a>\n[ "</parameter>" ]\n{E}',
        ],
        [f"{P}a>[p]{E}", f'{P}o>{{"z": 1}}{E}{P}a>[]{E}', f"{P}o>{{}}{E}"],
    ),
    (
        True,
        {},
        ["", "  ", f"{P}x_1>[1, 2]{E} {P}y>text{E}", f'{P}k>{{"a": 1}}{E}{P}k>no{E}'],
        [f"{P}1x>a{E}", f"{P}x-y>a{E}", f"{P}x>a"],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "boolean"},
        },
        {},
        [f"{P}a>1{E}{P}b>true{E}{P}a>false{E}", f"{P}zz>true{E}", ""],
        [f"{P}b>true{E}{P}a>1{E}", f"{P}b>1{E}"],
    ),
    (
        {
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
                "note": {"type": "string", "maxLength": 3},
                "long": {"type": "string", "minLength": 1},
                "mode": {"const": "fast"},
                "maybe": {"type": ["string", "null"]},
                "n": {"enum": [1.0, {"k": "v"}, None]},
            },
        },
        {},
        [
            f"{P}code>\nAB1\n{E}",
            f"{P}note>ab<{E}",
            f"{P}long>{E}{E}",  # a bounded string may hold the end tag
            f"{P}mode> fast {E}{P}maybe>anything{E}",
            f"{P}n>1{E}",
            f'{P}n>{{"k":"v"}}{E}',
            f"{P}n>null{E}",
        ],
        [f"{P}code>ab1{E}", f"{P}note>abcd{E}", f"{P}mode>slow{E}", f"{P}n>1.0{E}"],
    ),
    (
        WEATHER,
        {"max_whitespace_cnt": 1},
        [f"\n{P}location>x{E} {P}days> 3 {E}\n"],
        [f"\n\n{P}location>x{E}", f"{P}location>x{E}{P}days>  3{E}"],
    ),
]


@pytest.mark.parametrize(("schema", "extra", "accepted", "rejected"), CASES)
def test_language_matches_xgrammar(
    schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    check_language(style_spec(schema, **extra), accepted, rejected)


def test_qwen_xml_parameter_is_the_same_style() -> None:
    old = {
        "type": "structural_tag",
        "format": {"type": "qwen_xml_parameter", "json_schema": WEATHER},
    }
    grammar = constrain.Grammar.from_structural_tag(old)
    assert accepts(grammar, f"{P}location>x{E}{P}unit>c{E}")
    assert not accepts(grammar, '{"location": "x"}')


def test_enum_values_are_spelled_as_xgrammar_does() -> None:
    # spellings printed by XGrammar 0.2.9's qwen_xml grammar for the same enum
    values = [
        1.0,
        0.1,
        1e20,
        12345678901234567890,
        1e-5,
        2**60,
        -0.0,
        'a"b',
        {"b": "x/y", "a": "\u00e9\n"},
    ]
    expected = ["1", "0.1", "1e+20", "1.2345678901234567e+19", "1e-05", "1152921504606846976"]
    expected += ["-0", 'a"b', '{"b":"x/y","a":"\u00e9\\n"}']
    assert [xml_value_text(v) for v in values] == expected
    assert xml_value_text({"k": 'q"\\\x7f\t', "l": [True, None]}) == (
        '{"k":"q\\"\\\\\\u007f\\t","l":[true,null]}'
    )


@pytest.mark.parametrize(
    ("fmt", "pointer"),
    [
        ({"type": "string"}, "#/format/json_schema/type"),
        ({"type": "object", "minProperties": 1}, "#/format/json_schema/minProperties"),
        (
            {"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}},
            "#/format/json_schema/properties/a/allOf",
        ),
        ({"type": "object", "properties": {"a": False}}, "#/format/json_schema/properties/a"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}},
            "#/format/json_schema/properties/a/$ref",
        ),
    ],
)
def test_errors_name_the_pointer(fmt: Any, pointer: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(style_spec(fmt))
    assert info.value.location == pointer


@pytest.mark.parametrize("style", ["x", "gemma_xml"])
def test_unknown_styles_are_refused(style: str) -> None:
    with pytest.raises(constrain.GrammarError) as info:
        constrain.Grammar.from_structural_tag(style_spec(WEATHER, style))
    assert info.value.location == "#/format/style"


NESTED = {
    "type": "object",
    "properties": {
        "o": {"type": "object", "properties": {"x": {"type": "string"}}},
        "a": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["a"],
}
FREE = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "additionalProperties": {"type": "integer"},
}
M, G, GV, GE = '<parameter name="', "<arg_key>", "</arg_key><arg_value>", "</arg_value>"
MIXED = {
    "type": "object",
    "properties": {
        "p": {"type": "string", "pattern": "[a-z]+"},
        "m": {"enum": ["a", 1]},
        "o": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "n": {"type": ["string", "null"]},
        "k": {"const": 3},
        "s": {"const": "x"},
    },
    "required": ["p"],
}
D, DE = '<\uff5cDSML\uff5cparameter name="', "</\uff5cDSML\uff5cparameter>"
T, F = '" string="true">', '" string="false">'
# (style, schema, extra, accepted, rejected): each expectation was checked against XGrammar 0.2.9.
STYLE_CASES: list[tuple[str, Any, dict[str, Any], list[str], list[str]]] = [
    (
        "minimax_xml",
        WEATHER,
        {},
        [
            f'{M}location">Paris{E}',
            f'\n{M}location">\nSan Francisco\n{E}\n{M}unit">c{E}{M}days"> 3 {E}\n',
            f'{M}location">a</parameter{E}{M}ok">true{E}',
            f'{M}location">{E}',
        ],
        [
            "",
            f'{M}unit">c{E}',
            f"{P}location>x{E}",  # qwen_xml's tags
            f"{M}location>x{E}",
            f'{M}location" >x{E}',
            f'{M}location">x{E}{M}unit">"c"{E}',
            f'{M}days">3{E}{M}location">x{E}',
            f'{M}location">x{E}{M}zz">1{E}',
        ],
    ),
    ("minimax_xml", NESTED, {}, [f'{M}o">{{"x": "y"}}{E}{M}a">["p", "q"]{E}'], [f'{M}a">[p]{E}']),
    (
        "minimax_xml",
        FREE,
        {},
        [f'{M}q">x{E}{M}n">1{E}{M}m">2{E}', f'{M}n"> 1 {E}', ""],
        [f'{M}n">x{E}', f'{M}1n">1{E}', f'{M}n">1{E}{M}q">x{E}'],
    ),
    (
        "minimax_xml",
        WEATHER,
        {"max_whitespace_cnt": 2},
        [f'  {M}location">x{E}{M}days">  3  {E}'],
        [f'   {M}location">x{E}', f'{M}location">x{E}{M}days">   3{E}'],
    ),
    (
        "glm_xml",
        WEATHER,
        {},
        [
            f"{G}location{GV}Paris{GE}",
            f"\n{G}location</arg_key>\n<arg_value>\nSF\n{GE}\n{G}unit{GV}c{GE}{G}days{GV} 3 {GE}\n",
            f"{G}location{GV}a</arg_value{GE}{G}ok{GV}true{GE}",
            f"{G}location{GV}{GE}",
        ],
        [
            "",
            f"{G}unit{GV}c{GE}",
            f"{G}location </arg_key><arg_value>x{GE}",
            f"{G} location{GV}x{GE}",
            f'{G}location{GV}x{GE}{G}unit{GV}"c"{GE}',
            f"{G}days{GV}3{GE}{G}location{GV}x{GE}",
            f"{G}location{GV}x{GE}{G}zz{GV}1{GE}",
            f"{G}location{GV}x{E}",
        ],
    ),
    (
        "glm_xml",
        NESTED,
        {},
        [f'{G}o{GV}{{"x": "y"}}{GE}{G}a{GV}["p", "q"]{GE}'],
        [f"{G}a{GV}[p]{GE}"],
    ),
    (
        "glm_xml",
        FREE,
        {},
        [f"{G}q{GV}x{GE}{G}n{GV}1{GE}{G}m</arg_key> <arg_value>2{GE}", ""],
        [f"{G}n{GV}x{GE}", f"{G}n{GV}1{GE}{G}q{GV}x{GE}"],
    ),
    (
        "glm_xml",
        WEATHER,
        {"max_whitespace_cnt": 2},
        [f"  {G}location</arg_key>  <arg_value>x{GE}"],
        [f"{G}location</arg_key>   <arg_value>x{GE}", f"   {G}location{GV}x{GE}"],
    ),
]


STYLE_CASES += [
    (
        "deepseek_xml",
        WEATHER,
        {},
        [
            f"{D}location{T}Paris{DE}",
            f"\n{D}location{T}\nSF\n{DE}\n{D}unit{T}c{DE}{D}days{F} 3 {DE}\n{D}ok{F}true{DE}",
            f"{D}location{T}{DE}",
        ],
        [
            "",
            f"{D}location{F}Paris{DE}",  # a string value is string="true"
            f"{D}location{T}x{DE}{D}unit{T} c{DE}",  # no whitespace around a raw string
            f"{D}location{T}x{DE}{D}unit{F}c{DE}",
            f"{D}location{T}x{DE}{D}days{T}3{DE}",
            f'{D}location{T}x{DE}{D}unit{T}"c"{DE}',
            f"{D}location{T}x{DE}{D}zz{T}1{DE}",
        ],
    ),
    (
        "deepseek_xml",
        MIXED,
        {},
        [
            f"{D}p{T}abc{DE}{D}m{T}a{DE}",
            f"{D}p{T}abc{DE}{D}m{F} 1 {DE}",
            f"{D}p{T}abc{DE}{D}o{F}7{DE}",
            f"{D}p{T}abc{DE}{D}o{T}seven{DE}",
            f"{D}p{T}abc{DE}{D}n{F} null {DE}",
            f"{D}p{T}abc{DE}{D}n{T}null{DE}",
            f"{D}p{T}abc{DE}{D}k{F} 3{DE}{D}s{T}x{DE}",
        ],
        [
            f"{D}p{T} abc{DE}",
            f"{D}p{F}abc{DE}",
            f"{D}p{T}abc{DE}{D}m{F}a{DE}",
            f"{D}p{T}abc{DE}{D}m{T}1{DE}",
            f"{D}p{T}abc{DE}{D}k{T}3{DE}",
            f"{D}p{T}abc{DE}{D}s{F}x{DE}",
            f"{D}p{T}abc{DE}{D}s{T} x{DE}",
            f"{D}p{T}abc{DE}{D}o{F}seven{DE}",
        ],
    ),
    (
        "deepseek_xml",
        {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": True},
        {},
        [f"{D}q{T}x{DE}{D}n{F}1{DE}{D}m{T}hi{DE}{D}z{F} true {DE}{D}v{F}null{DE}", ""],
        [f"{D}n{F}hi{DE}", f'{D}n{F}"hi"{DE}', f"{D}1a{T}x{DE}"],
    ),
    (
        "deepseek_xml",
        WEATHER,
        {"max_whitespace_cnt": 2},
        [f"  {D}location{T}x{DE}{D}days{F}  3  {DE}"],
        [f"   {D}location{T}x{DE}", f"{D}location{T}x{DE}{D}days{F}   3{DE}"],
    ),
]


V4, V4E = '<\uff5cDSML\uff5c parameter name="', "</\uff5cDSML\uff5c parameter>"
STYLE_CASES += [
    (
        "deepseek_v4_1_xml",
        MIXED,
        {},
        [
            f"{V4}p{T}abc{V4E}",
            f"\n{V4}p{T}abc{V4E}\n{V4}m{F} 1 {V4E}{V4}n{T}null{V4E}\n",
            f"{V4}p{T}abc{V4E}{V4}o{T}seven{V4E}{V4}k{F}3{V4E}",
        ],
        [
            f"{D}p{T}abc{DE}",  # deepseek_xml's tags
            f"{V4}p{T}abc{DE}",
            f"{V4}p{T} abc{V4E}",
            f"{V4}p{T}abc{V4E}{V4}m{T}1{V4E}",
            f"{V4}p{T}abc{V4E}{V4}o{F}seven{V4E}",
        ],
    ),
    (
        "deepseek_v4_1_xml",
        {},
        {"max_whitespace_cnt": 1},
        [f"{V4}a{F} 1.5 {V4E} {V4}b{T}t{V4E}", " "],
        [f"{V4}a{F}  1{V4E}", f"{V4}1a{T}x{V4E}", "  "],
    ),
]


@pytest.mark.parametrize(("style", "schema", "extra", "accepted", "rejected"), STYLE_CASES)
def test_other_styles_match_xgrammar(
    style: str, schema: Any, extra: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    check_language(style_spec(schema, style, **extra), accepted, rejected)


# --------------------------------------------------------------------------------------------
# Masks along random walks against a hand-written acceptor of WEATHER's language
# --------------------------------------------------------------------------------------------

WORDS = [b"</parameter>", b"<parameter=", b"location>", b"unit>", b"days>", b"ok>", b"12", b"ab"]
TOKENS: list[bytes | None] = [bytes([b]) for b in range(128)] + list(WORDS) + [None]
EOS = len(TOKENS) - 1


def _kmp(k: int, ch: str) -> int:
    """Characters of E matched after ``ch`` when ``k`` were matched (E has no border)."""
    if E[k] == ch:
        return k + 1
    return 1 if ch == E[0] else 0


class Acceptor:
    """WEATHER's qwen_xml language, as sets of parser states advanced character by character.

    A state is a small tuple: ("ws", i) before element i (i = index of the next property that
    may come), ("open", i, j) inside ``<parameter=NAME>`` of property i, ("val", i, data) in a
    value, ("end", i, j) inside the closing tag.
    """

    NAMES = ["location", "unit", "days", "ok"]

    def __init__(self) -> None:
        self.states: set[tuple[Any, ...]] = {("ws", 0)}

    @staticmethod
    def value_ok(i: int, text: str, done: bool) -> bool:
        """Whether ``text`` (after ``>``) can be, or with ``done`` is, a value of property i."""
        match = re.fullmatch(r"([ \t\n\r]*)(.*?)([ \t\n\r]*)", text, re.S)
        assert match is not None
        core, complete = match.group(2), done or bool(match.group(3))
        words = {1: ("c", "f"), 3: ("true", "false")}.get(i)
        if words is not None:
            return core in words if complete else any(w.startswith(core) for w in words)
        if complete:
            return re.fullmatch("-?(0|[1-9][0-9]*)", core) is not None
        return re.fullmatch("-?(0|[1-9][0-9]*)?", core) is not None

    def step(self, ch: str) -> None:
        out: set[tuple[Any, ...]] = set()
        for state in self.states:
            kind = state[0]
            if kind == "ws":
                i = state[1]
                if ch in " \t\n\r":
                    out.add(state)
                for k in range(i, 4):
                    if P[0] == ch:
                        out.add(("open", k, 1))
                    if k == 0:  # location is required: nothing after it may come first
                        break
            elif kind == "open":
                _, i, j = state
                want = P + self.NAMES[i] + ">"
                if want[j] == ch:
                    if j + 1 == len(want):
                        out.add(("val", i, "") if i else ("str", i, 0))
                    else:
                        out.add(("open", i, j + 1))
            elif kind == "str":
                _, i, k = state
                nxt = _kmp(k, ch)
                out.add(("after", i + 1) if nxt == len(E) else ("str", i, nxt))
            elif kind == "val":
                _, i, text = state
                if self.value_ok(i, text + ch, False):
                    out.add(("val", i, text + ch))
                if ch == "<" and self.value_ok(i, text, True):
                    out.add(("end", i, 1))
            elif kind == "end":
                _, i, j = state
                if E[j] == ch:
                    out.add(("after", i + 1) if j + 1 == len(E) else ("end", i, j + 1))
        # after an element: whitespace, then the next optional elements or the end
        for state in list(out):
            if state[0] == "after":
                out.discard(state)
                out.add(("ws", state[1]))
        self.states = out

    def feed(self, text: str) -> bool:
        for ch in text:
            self.step(ch)
        return bool(self.states)

    def complete(self) -> bool:
        return any(s[0] == "ws" and s[1] >= 1 for s in self.states)


def _oracle(prefix: str) -> Callable[[str], tuple[bool, bool]]:
    def check(more: str) -> tuple[bool, bool]:
        acceptor = Acceptor()
        alive = acceptor.feed(prefix + more)
        return alive, alive and acceptor.complete()

    return check


def test_masks_along_random_walks_match_a_hand_written_acceptor() -> None:
    vocab = constrain.Vocabulary.from_bytes(TOKENS, eos_ids=[EOS])
    compiled = constrain.Compiler(vocab).compile(
        constrain.Grammar.from_structural_tag(style_spec(WEATHER))
    )
    rng = random.Random(0)
    favoured = [128 + k for k in range(len(WORDS))] + [ord(c) for c in " \n<>cf-0123456789tx"]
    checked = 0
    for _ in range(30):
        matcher = constrain.Matcher(compiled)
        text = ""
        for _ in range(14):
            check = _oracle(text)
            want = [t for t in range(EOS) if check(TOKENS[t].decode())[0]]  # type: ignore[union-attr]
            if check("")[1]:
                want.append(EOS)
            assert matcher.allowed_token_ids().tolist() == want, text
            checked += 1
            ordinary = [t for t in want if t != EOS]
            if not ordinary:
                break
            preferred = [t for t in ordinary if t in favoured]
            tid = rng.choice(preferred if preferred and rng.random() < 0.8 else ordinary)
            assert matcher.accept_token(tid)
            text += TOKENS[tid].decode()  # type: ignore[union-attr]
    assert checked > 300


# --------------------------------------------------------------------------------------------
# Parity with XGrammar (skipped without it)
# --------------------------------------------------------------------------------------------


def _parity_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "structural_tag_parity", ROOT / "benchmarks" / "structural_tag_parity.py"
    )
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def test_walks_and_masks_match_xgrammar() -> None:
    pytest.importorskip("xgrammar")
    parity = _parity_module()
    try:
        vocab, compiler, encode, decode = parity.llama_setup()
    except constrain.VocabularyError as err:
        pytest.skip(str(err))
    name = "qwen_xml_tag"
    spec = dict(parity.parity_specs())[name]
    texts = parity.QWEN_SAMPLES[name]
    result = parity.compare(
        spec, vocab, compiler, encode, decode, walks=2, steps=12, seed=1, texts=texts
    )
    assert result.masks > 0
    assert (result.mask_diffs, result.rejected) == (0, 0), result.notes
