"""Token-aligned terminals: regions that end where a token ends (``Grammar.token_aligned``).

XGrammar reads its token-level regions whole token by whole token: ``any_tokens`` ends at a
token boundary (text after it starts a new token) and ``exclude_token`` is the rest of the one
token it starts in. The definition is written out over *marked* strings, each token's text
followed by ``|``: a region that ends at a boundary is followed by a mark, a one-token region
holds none. Masks are compared with it at every prefix of every token sequence up to a depth
(``regex``'s partial matching decides "a prefix of some sequence of the language").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import regex

from constrain import Compiler, Grammar, GrammarError, Matcher, Vocabulary
from constrain.diffusion.token_dfa import TokenDfa
from constrain.ir.serial import grammar_from_data, grammar_to_data

_WORDS = [b"a", b"b", b"x", b"y", b"<", b">", b"ab", b"xa", b"ay", b"yy", b"xy", b"by", b"a>"]
TOKENS: list[bytes | None] = [*_WORDS, None, None, None]
CALL, END, EOS = range(len(_WORDS), len(_WORDS) + 3)
NAMES = {"<|call|>": CALL, "<|end|>": END, "<|eos|>": EOS}
SPECIAL = {CALL: "\ue000", END: "\ue001"}


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_names=NAMES)


def _lit(text: str) -> str:
    """A constant: marks may fall between any two of its characters."""
    return r"\|?".join(regex.escape(c) for c in text)


ONE = r"[^|]+\|"  # the rest of one token, then its end
ONE_NO_END = r"[^|\ue001]+\|"
ANY = rf"(?:{ONE})*"  # whole tokens (the first may be the rest of one)


def _seq(*parts: str) -> str:
    """Parts in order, a mark or none between two, and the last token's mark at the end."""
    return r"\|?".join(parts) + r"\|"


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "exclude_token": (
        {"type": "sequence", "elements": [
            {"type": "const_string", "value": "x"},
            {"type": "exclude_token", "exclude_tokens": [END]},
            {"type": "const_string", "value": "y"},
        ]},
        _seq("x", ONE_NO_END + "y"),
    ),
    "exclude_token_twice": (
        {"type": "sequence", "elements": [
            {"type": "exclude_token"}, {"type": "exclude_token"},
            {"type": "const_string", "value": "ab"},
        ]},
        _seq(ONE + ONE + _lit("ab")),
    ),
    "exclude_token_or_text": (
        {"type": "sequence", "elements": [
            {"type": "or", "elements": [
                {"type": "exclude_token", "exclude_tokens": ["<|call|>"]},
                {"type": "const_string", "value": "ab"},
            ]},
            {"type": "const_string", "value": "y"},
        ]},
        rf"(?:[^|\ue000]+\|y|{_lit('ab')}\|?y)\|",
    ),
    "exclude_token_in_tag": (
        {"type": "tag", "begin": "<", "content": {"type": "exclude_token"}, "end": ">"},
        _seq("<", ONE + ">"),
    ),
    "text_after_any_tokens": (
        {"type": "sequence", "elements": [
            {"type": "const_string", "value": "x"},
            {"type": "any_tokens", "exclude_tokens": [END]},
            {"type": "const_string", "value": "ab"},
        ]},
        _seq("x", r"(?:[^|\ue001]+\|)*" + _lit("ab")),
    ),
    "any_tokens_then_tag": (
        {"type": "sequence", "elements": [
            {"type": "any_tokens", "exclude_tokens": [CALL]},
            {"type": "tag", "begin": {"type": "token", "token": CALL},
             "content": {"type": "const_string", "value": "xy"}, "end": ">"},
        ]},
        _seq(r"(?:[^|\ue000]+\|)*" + "\ue000", _lit("xy"), ">"),
    ),
}  # fmt: skip


def _marked(vocab: Vocabulary, tokens: list[int]) -> str:
    return "".join(
        (SPECIAL[t] if t in SPECIAL else vocab.token_bytes_of(t).decode()) + "|" for t in tokens
    )


def _walk(vocab: Vocabulary, matcher: Matcher, pattern: Any, tokens: list[int], depth: int) -> int:
    """Compare masks with the definition below ``tokens``; return the prefixes checked."""
    want = [
        t
        for t in range(vocab.size)
        if t != EOS and pattern.fullmatch(_marked(vocab, [*tokens, t]), partial=True)
    ]
    complete = pattern.fullmatch(_marked(vocab, tokens)) is not None
    got = matcher.allowed_token_ids().tolist()
    assert got == sorted(want + [EOS] * complete), (tokens, _marked(vocab, tokens))
    assert matcher.is_accepting() == complete
    if depth == 0:
        return 1
    checked = 1
    for t in range(vocab.size):
        if t == EOS:
            continue
        accepted = matcher.accept_token(t)
        assert accepted == (t in want), (tokens, t)
        if accepted:
            checked += _walk(vocab, matcher, pattern, [*tokens, t], depth - 1)
            matcher.rollback()
    return checked


@pytest.mark.parametrize("case", sorted(CASES))
def test_masks_equal_the_definition(vocab: Vocabulary, case: str) -> None:
    fmt, pattern = CASES[case]
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    assert grammar.token_aligned
    matcher = Matcher(Compiler(vocab).compile(grammar))
    assert _walk(vocab, matcher, regex.compile(pattern), [], 4) > 20


def test_fork_and_save_keep_the_alignment(vocab: Vocabulary, tmp_path: Any) -> None:
    fmt, pattern = CASES["exclude_token"]
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    compiled = Compiler(vocab).compile(grammar)
    path = tmp_path / "aligned.npz"
    compiled.save(path)
    loaded = type(compiled).load(path, vocab)
    assert loaded.token_aligned == compiled.token_aligned
    assert [kind for _, kind in loaded.token_aligned] == ["token"]
    matcher = Matcher(loaded)
    assert _walk(vocab, matcher, regex.compile(pattern), [], 3) > 10
    matcher.accept_token(_WORDS.index(b"x"))
    fork = matcher.fork()
    assert fork.accept_token(_WORDS.index(b"ab"))  # the region is "ab": "y" must follow
    assert fork.allowed_token_ids().tolist() == [_WORDS.index(b"y")]
    assert len(matcher.allowed_token_ids()) > 1  # the matcher itself is still before the region


def test_the_ir_lark_text_and_json_keep_the_alignment() -> None:
    text = (
        'start: "x" FREE "ab" one "y"\n'
        "FREE[max_tokens=3, token_end]: /[a-z]+/\n"
        "one[one_token]: /[a-z]+/\n"
    )
    grammar = Grammar.from_lark(text).normalise()
    assert dict(grammar.token_aligned) == {"FREE": "end", "ONE_ALIGNED": "token"}
    assert grammar.token_budgets == (("FREE", 3),)
    again = Grammar.from_lark(grammar.to_lark()).normalise()
    assert (again.token_aligned, again.token_budgets) == (
        grammar.token_aligned,
        grammar.token_budgets,
    )
    assert "FREE[max_tokens=3, token_end]" in grammar.to_lark()
    assert grammar_from_data(grammar_to_data(grammar)).token_aligned == grammar.token_aligned


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('start: A\nA[token_edn]: "a"\n', "unknown or repeated attribute 'token_edn'"),
        ('start: A\nA[token_end, one_token]: "a"\n', "unknown or repeated attribute 'one_token'"),
        ('start: a\na[token_end]: "a" "b"\n', "must be one lexeme"),
        ('start: A\nA[one_token]: "a"\n%ignore A\n', "%ignore-d"),
    ],
)
def test_lark_attribute_errors_say_where(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        Grammar.from_lark(text)


def test_validation_and_diffusion_refuse_what_they_cannot_do(vocab: Vocabulary) -> None:
    base = Grammar.from_lark('start: A\nA: "a"\n')
    with pytest.raises(GrammarError, match="'end' or 'token'"):
        dataclasses.replace(base, token_aligned=(("A", "start"),)).validate()
    with pytest.raises(GrammarError, match="not a terminal"):
        dataclasses.replace(base, token_aligned=(("B", "end"),)).validate()
    fmt, _ = CASES["exclude_token_in_tag"]
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    with pytest.raises(GrammarError, match="only a Matcher places"):
        TokenDfa.from_compiled(Compiler(vocab).compile(grammar))


@pytest.mark.parametrize("kind", ["exclude_token", "any_tokens"])
def test_an_ordinary_token_cannot_be_excluded(vocab: Vocabulary, kind: str) -> None:
    # its text could still be written by other tokens: refused rather than silently allowed
    fmt = {"type": kind, "exclude_tokens": [END, _WORDS.index(b"ab")]}
    grammar = Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    with pytest.raises(GrammarError, match=r"token id 6 \('ab'\), an ordinary token"):
        Compiler(vocab).compile(grammar)
