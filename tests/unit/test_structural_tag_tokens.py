"""Token-level structural-tag formats: any_tokens, token_triggered_tags, token_dispatch.

Masks are compared along random walks with the definition: a token sequence is a list of
symbols (its bytes, or one ``("S", id)`` for a special token), mapped to a string and matched
with Python's ``re`` against the language written out by hand.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from constrain import Compiler, Grammar, GrammarError, Matcher, Vocabulary
from constrain.frontends.special_sets import OPEN_MARK, is_open_set, open_special_set

# ASCII bytes, a few words, text spelling a special token's name, then six specials.
_WORDS = [b"ab", b"xa", b"<|call|>", b"<|", b"b<|"]
TOKENS: list[bytes | None] = [bytes([b]) for b in range(128)] + list(_WORDS) + [None] * 6
CALL, END, THINK, UNTHINK, EOS, UNNAMED = range(len(TOKENS) - 6, len(TOKENS))
NAMES = {"<|call|>": CALL, "<|end|>": END, "<|think|>": THINK, "<|/think|>": UNTHINK}
NAMES["<|eos|>"] = EOS
SPECIALS = (CALL, END, THINK, UNTHINK, UNNAMED)


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_names=NAMES)


def _token(token: int | str) -> dict[str, Any]:
    return {"type": "token", "token": token}


def _sym(tid: int) -> str:
    """The character a special token stands for in the reference patterns."""
    return chr(0xE000 + tid)


def _free(*excluded: int) -> str:
    """Pattern of one symbol of a token-level region: any text byte or allowed special."""
    allowed = "".join(_sym(t) for t in SPECIALS if t not in excluded)
    return f"[\\x00-\\x7f{allowed}]"


def _text(vocab: Vocabulary, tid: int) -> str | None:
    if tid in SPECIALS:
        return _sym(tid)
    data = vocab.token_bytes_of(tid)
    return data.decode("ascii") if data else None


def _check_walks(vocab: Vocabulary, fmt: dict[str, Any], full: str, prefix: str) -> int:
    """Compare the matcher's masks with the patterns along 40 random walks; return the count."""
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    compiled = Compiler(vocab).compile(grammar)
    is_full, is_prefix = re.compile(full, re.S), re.compile(prefix, re.S)
    rng = random.Random(0)
    checked = 0
    for _ in range(40):
        m = Matcher(compiled)
        text = ""
        for _ in range(10):
            want = [
                t
                for t in range(vocab.size)
                if (s := _text(vocab, t)) is not None and is_prefix.fullmatch(text + s)
            ]
            if is_full.fullmatch(text):
                want.append(EOS)
            assert m.allowed_token_ids().tolist() == sorted(want), (text, want)
            checked += 1
            ordinary = [t for t in want if t != EOS]
            if not ordinary:
                break
            tid = rng.choice(ordinary)
            assert m.accept_token(tid)
            text += _text(vocab, tid) or ""
    return checked


def test_any_tokens_excludes_by_id_and_name(vocab: Vocabulary) -> None:
    fmt = {"type": "any_tokens", "exclude_tokens": [CALL, "<|think|>"]}
    free = _free(CALL, THINK)
    assert _check_walks(vocab, fmt, f"{free}*", f"{free}*") > 100


def test_any_tokens_inside_a_token_tag_excludes_its_end(vocab: Vocabulary) -> None:
    fmt = {
        "type": "tag",
        "begin": _token("<|think|>"),
        "content": {"type": "any_tokens"},
        "end": _token(UNTHINK),
    }
    free, t, u = _free(UNTHINK), _sym(THINK), _sym(UNTHINK)
    assert _check_walks(vocab, fmt, f"{t}{free}*{u}", f"({t}{free}*{u}?)?") > 100


@pytest.mark.parametrize(
    ("flags", "full", "prefix"),
    [
        ({}, "(F|Cx(E))*", "(F|CxE)*(Cx?)?"),
        ({"stop_after_first": True}, "F*(CxE)?", "F*(C(xE?)?)?"),
        ({"at_least_one": True}, "CxE(F|CxE)*", "(Cx?|CxE(F|CxE)*(Cx?)?)?"),
        ({"at_least_one": True, "stop_after_first": True}, "CxE", "(C(xE?)?)?"),
    ],
)
def test_token_triggered_tags(
    vocab: Vocabulary, flags: dict[str, Any], full: str, prefix: str
) -> None:
    fmt = {
        "type": "token_triggered_tags",
        "trigger_tokens": ["<|call|>"],
        "tags": [
            {
                "type": "tag",
                "begin": _token("<|call|>"),
                "content": {"type": "const_string", "value": "x"},
                "end": _token(END),
            }
        ],
        "exclude_tokens": [UNNAMED],
        **flags,
    }
    subst = {"F": _free(CALL, UNNAMED), "C": _sym(CALL), "E": _sym(END)}
    full, prefix = (re.sub("[FCE]", lambda m: subst[m.group()], p) for p in (full, prefix))
    assert _check_walks(vocab, fmt, full, prefix) > 60


def test_token_triggered_tags_in_a_tag_excludes_its_end(vocab: Vocabulary) -> None:
    tags = {
        "type": "token_triggered_tags",
        "trigger_tokens": [CALL],
        "tags": [
            {
                "type": "tag",
                "begin": _token(CALL),
                "content": {"type": "any_tokens"},
                "end": _token(END),
            }
        ],
    }
    fmt = {"type": "tag", "begin": _token(THINK), "content": tags, "end": _token(UNTHINK)}
    f, g = _free(CALL, UNTHINK), _free(END)  # the tag's own any_tokens excludes only END
    t, u, c, e = (_sym(x) for x in (THINK, UNTHINK, CALL, END))
    full = f"{t}({f}|{c}{g}*{e})*{u}"
    prefix = f"({t}({f}|{c}{g}*{e})*({c}{g}*|{u})?)?"
    assert _check_walks(vocab, fmt, full, prefix) > 100


@pytest.mark.parametrize("loop", [True, False])
def test_token_dispatch(vocab: Vocabulary, loop: bool) -> None:
    fmt = {
        "type": "token_dispatch",
        "rules": [["<|call|>", {"type": "const_string", "value": "ab"}], [END, _token(THINK)]],
        "exclude_tokens": ["<|/think|>"],
        "loop": loop,
    }
    f, c, e, t = _free(CALL, END, UNTHINK), _sym(CALL), _sym(END), _sym(THINK)
    step = f"({c}ab|{e}{t})"
    partial = f"({c}a?|{e})"
    if loop:
        full, prefix = f"({f}|{step})*", f"({f}|{step})*{partial}?"
    else:
        full, prefix = f"{f}*{step}?", f"{f}*({step}|{partial})?"
    assert _check_walks(vocab, fmt, full, prefix) > 60


@pytest.mark.parametrize(
    ("fmt", "pointer"),
    [
        ({"type": "exclude_token", "exclude_tokens": [1.5]}, "#/format/exclude_tokens/0"),
        ({"type": "any_tokens", "max_tokens": 2.5}, "#/format/max_tokens"),
        ({"type": "any_tokens", "exclude_tokens": [True]}, "#/format/exclude_tokens/0"),
        (
            {"type": "token_triggered_tags", "trigger_tokens": [], "tags": []},
            "#/format/trigger_tokens",
        ),
        (
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [CALL],
                "tags": [
                    {"type": "tag", "begin": "<a>", "content": {"type": "any_tokens"}, "end": "b"}
                ],
            },
            "#/format/tags/0/begin",
        ),
        ({"type": "token_dispatch", "rules": [[CALL]]}, "#/format/rules/0"),
        ({"type": "json_schema", "json_schema": {}, "style": "no_such_style"}, "#/format/style"),
    ],
)
def test_errors(fmt: dict[str, Any], pointer: str) -> None:
    with pytest.raises(GrammarError) as info:
        Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert info.value.location == pointer


def test_unknown_excluded_name_is_refused_at_compile(vocab: Vocabulary) -> None:
    fmt = {"type": "any_tokens", "exclude_tokens": ["<|nope|>"]}
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    with pytest.raises(GrammarError, match=r"<\|nope\|> is not a special token"):
        Compiler(vocab).compile(grammar)


def test_open_set_layout() -> None:
    cs = open_special_set([3], [0])
    assert is_open_set(cs) and OPEN_MARK in cs
    assert 0x110000 + 2 in cs and 0x110000 + 3 not in cs
    assert 0x110000 + 2**18 not in cs and 0x110000 + 2**18 + 1 in cs
    assert not is_open_set(open_special_set([], []).intersect(open_special_set([], []).negate()))
