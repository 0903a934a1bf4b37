"""Token budgets (``max_tokens`` of structural tags' any_text / any_tokens), kept by the matcher.

The reference definition, XGrammar's: a token sequence is allowed when its text is a prefix of
a sentence in which every occurrence of the bounded region holds at most ``max_tokens`` tokens
that *start* inside it (a token that starts before the region and ends in it is not counted;
one that starts where the region ends is not either). Masks are compared with it at every node
of a depth-first walk of the token tree, on a small vocabulary with tokens that straddle the
region's ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from constrain import Compiler, Grammar, GrammarError, Matcher, Vocabulary
from constrain.diffusion.token_dfa import TokenDfa
from constrain.ir.serial import grammar_from_data, grammar_to_data

WORDS = [b"<", b"a", b">", b"<a>", b"x", b"xx", b"</", b"/a", b"a>", b"</a>", b"<a>x", b"x</a>"]
WORDS += [b">x", b"y", b"\xc3\xa9", b"\xc3", b"\xa9", b"\xa9x"]
EOS = len(WORDS)


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes([*WORDS, None], eos_ids=[EOS])


def _spec(limit: int) -> dict[str, Any]:
    text = {"type": "any_text", "max_tokens": limit}  # free text up to the tag's end
    tag = {"type": "tag", "begin": "<a>", "content": text, "end": "</a>"}
    return {"type": "structural_tag", "format": tag}


def _utf8(region: bytes, open_end: bool) -> bool:
    """Whether ``region`` is whole UTF-8 characters (or a prefix of some, if ``open_end``)."""
    try:
        region.decode("utf-8")
    except UnicodeDecodeError as err:
        return open_end and err.reason == "unexpected end of data"
    return True


def _reference(tokens: list[int], limit: int) -> tuple[bool, bool]:
    """Return (is a valid prefix, is a sentence) for ``<a>`` + bounded text + ``</a>``.

    The region (from offset 3 to where ``</a>`` starts) counts the tokens that start in it;
    past ``limit`` of them a token may still start in it only where the text before it stops
    inside a character (the budget is exceeded until the region can end).
    """
    text = b"".join(WORDS[t] for t in tokens)
    starts = np.cumsum([0] + [len(WORDS[t]) for t in tokens[:-1]]) if tokens else []
    if len(text) <= 3:
        return b"<a>".startswith(text), False
    if not text.startswith(b"<a>"):
        return False, False
    body = text[3:]
    first = body.find(b"</a>")
    if first >= 0:
        if len(body) != first + 4:
            return False, False  # text after the end
        ends = [3 + first]
    else:  # the end may have begun at the last bytes, or the region is still open
        ends = [3 + k for k in range(len(body)) if b"</a>".startswith(body[k:])] + [len(text)]
    for end in ends:
        if not _utf8(text[3:end], open_end=end == len(text) and first < 0):
            continue
        counted = [int(s) for s in starts if 3 <= s < end]
        if all(j < limit or not _utf8(text[3:s], open_end=False) for j, s in enumerate(counted)):
            return True, first >= 0
    return False, False


def _walk(vocab: Vocabulary, limit: int, depth: int) -> int:
    compiled = Compiler(vocab).compile(Grammar.from_structural_tag(_spec(limit)))
    matcher = Matcher(compiled)
    checked = 0

    def visit(prefix: list[int]) -> None:
        nonlocal checked
        allowed = set(matcher.allowed_token_ids().tolist())
        expected = {t for t in range(len(WORDS)) if _reference([*prefix, t], limit)[0]}
        if _reference(prefix, limit)[1]:
            expected.add(EOS)
        assert allowed == expected, (limit, [WORDS[t] for t in prefix])
        checked += 1
        if len(prefix) == depth:
            return
        for t in sorted(expected - {EOS}):
            assert matcher.accept_token(t)
            visit([*prefix, t])
            matcher.rollback(1)

    visit([])
    return checked


@pytest.mark.parametrize(
    ("limit", "depth"), [(1, 6), (2, 6), pytest.param(3, 5, marks=pytest.mark.slow)]
)
def test_masks_equal_the_reference_on_every_prefix(
    vocab: Vocabulary, limit: int, depth: int
) -> None:
    assert _walk(vocab, limit, depth) > 100


def _ids(*words: bytes) -> list[int]:
    return [WORDS.index(w) for w in words]


def test_the_region_ends_after_its_tokens(vocab: Vocabulary) -> None:
    compiled = Compiler(vocab).compile(Grammar.from_structural_tag(_spec(2)))
    assert compiled.token_budgets == ((compiled.terminal_names.index("B0"), 2),)
    m = Matcher(compiled)
    assert m.accept_tokens(_ids(b"<a>", b"x", b"xx")) == 3
    assert set(m.allowed_token_ids().tolist()) == set(_ids(b"<", b"</", b"</a>"))
    # a token that starts the region in its last bytes is not counted
    m.reset()
    assert m.accept_tokens(_ids(b"<a>x", b"x", b"x")) == 3
    assert not m.accept_token(_ids(b"x")[0])
    assert m.accept_token(_ids(b"</a>")[0]) and m.is_accepting()


def test_rollback_and_fork_restore_the_counts(vocab: Vocabulary) -> None:
    m = Matcher(Compiler(vocab).compile(Grammar.from_structural_tag(_spec(2))))
    assert m.accept_tokens(_ids(b"<a>", b"x", b"x")) == 3
    other = m.fork()
    m.rollback(1)
    assert m.accept_token(_ids(b"y")[0])  # the second token again
    assert not m.accept_token(_ids(b"y")[0])
    m.rollback(2)
    assert m.accept_tokens(_ids(b"xx", b"y")) == 2
    assert not other.accept_token(_ids(b"x")[0])  # the fork kept its own count
    assert other.accept_token(_ids(b"x</a>")[0]) is False
    assert other.accept_token(_ids(b"</a>")[0])


def test_text_is_not_counted(vocab: Vocabulary) -> None:
    m = Matcher(Compiler(vocab).compile(Grammar.from_structural_tag(_spec(1))))
    assert m.accept_bytes("<a>some text given as bytes")
    assert m.accept_token(_ids(b"x")[0])
    assert not m.accept_token(_ids(b"x")[0])
    assert m.accept_bytes("</a>") and m.is_accepting()


def test_each_occurrence_has_its_own_budget(vocab: Vocabulary) -> None:
    tag = {"type": "tag", "begin": "<a>", "content": {"type": "any_text", "max_tokens": 1}}
    spec = {"type": "structural_tag", "format": {"type": "star", "content": {**tag, "end": "</a>"}}}
    m = Matcher(Compiler(vocab).compile(Grammar.from_structural_tag(spec)))
    for _ in range(3):
        assert m.accept_tokens(_ids(b"<a>", b"xx")) == 2
        assert not m.accept_token(_ids(b"x")[0])
        assert m.accept_token(_ids(b"</a>")[0])
    assert m.is_accepting()


def test_a_budget_exceeded_inside_a_character_ends_after_it(vocab: Vocabulary) -> None:
    m = Matcher(Compiler(vocab).compile(Grammar.from_structural_tag(_spec(1))))
    assert m.accept_tokens(_ids(b"<a>", b"\xc3")) == 2
    # the region cannot end inside the character: its last byte is allowed, then the end
    assert m.accept_token(_ids(b"\xa9")[0])
    assert not m.accept_token(_ids(b"x")[0])
    assert set(m.allowed_token_ids().tolist()) == set(_ids(b"<", b"</", b"</a>"))


def test_zero_tokens_is_the_empty_region(vocab: Vocabulary) -> None:
    m = Matcher(Compiler(vocab).compile(Grammar.from_structural_tag(_spec(0))))
    assert m.accept_token(_ids(b"<a>")[0])
    assert set(m.allowed_token_ids().tolist()) == set(_ids(b"<", b"</", b"</a>"))
    m.rollback(1)
    assert not m.accept_token(_ids(b"<a>x")[0])  # not even a token's last bytes


def test_budgets_survive_serialisation_and_bad_ones_are_refused(vocab: Vocabulary) -> None:
    grammar = Grammar.from_structural_tag(_spec(3))
    again = grammar_from_data(grammar_to_data(grammar))
    assert again.token_budgets == grammar.token_budgets == (("B0", 3),)
    with pytest.raises(GrammarError, match="max_tokens"):
        Grammar.from_structural_tag(_spec(-1))
    with pytest.raises(GrammarError, match="not a terminal"):
        Grammar(
            rules=grammar.rules, terminals=grammar.terminals, start=grammar.start,
            token_budgets=(("NOPE", 2),),
        ).validate()  # fmt: skip


def test_diffusion_refuses_a_budget(vocab: Vocabulary) -> None:
    compiled = Compiler(vocab).compile(Grammar.from_structural_tag(_spec(2)))
    with pytest.raises(GrammarError, match="only a Matcher places"):
        TokenDfa.from_compiled(compiled)


def test_a_saved_grammar_keeps_its_budgets(vocab: Vocabulary, tmp_path: Any) -> None:
    from constrain.compiler import CompiledGrammar

    compiled = Compiler(vocab).compile(Grammar.from_structural_tag(_spec(2)))
    compiled.save(tmp_path / "budget.npz")
    loaded = CompiledGrammar.load(tmp_path / "budget.npz", vocab)
    assert loaded.token_budgets == compiled.token_budgets
    m = Matcher(loaded)
    assert m.accept_tokens(_ids(b"<a>", b"x", b"x")) == 3
    assert not m.accept_token(_ids(b"x")[0])


LARK = """
start: "<a>" body "</a>" COUNT?
body[max_tokens=2]: /[^<]+/
COUNT[max_tokens=1]: /y+/
"""


def test_lark_budgets_on_a_rule_and_a_terminal(vocab: Vocabulary) -> None:
    grammar = Grammar.from_lark(LARK)
    assert dict(grammar.token_budgets) == {"BODY_BUDGET": 2, "COUNT": 1}
    again = Grammar.from_lark(grammar.to_lark())
    assert dict(again.token_budgets) == dict(grammar.token_budgets)
    m = Matcher(Compiler(vocab).compile(grammar))
    assert m.accept_tokens(_ids(b"<a>", b"xx", b"x")) == 3
    assert set(m.allowed_token_ids().tolist()) == set(_ids(b"<", b"</", b"</a>"))
    assert m.accept_tokens(_ids(b"</a>", b"y")) == 2
    assert not m.accept_token(_ids(b"y")[0])  # COUNT took its one token
    assert m.is_accepting()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('start: x\nx[stop="a"]: "a"', "unknown or repeated attribute"),
        ('start: x\nx[max_tokens=0]: "a"', "at least 1 token"),
        ('start: x\nx[max_tokens=2]: "a" "b"', "must be one lexeme"),
        ('start: x\nx[max_tokens=2]: "a"\nx[max_tokens=3]: "b"', "two attribute lists"),
        ('start: "a" WS\nWS[max_tokens=2]: " "\n%ignore WS', "ignore"),
    ],
)
def test_lark_budget_errors_say_where(text: str, message: str) -> None:
    from constrain.errors import LarkGrammarError

    with pytest.raises(LarkGrammarError, match=message) as info:
        Grammar.from_lark(text)
    assert info.value.line is not None


def test_generate_checks_outputs_of_a_grammar_with_budgets() -> None:
    from constrain.output import output_type

    text = 'start: "<think>" thought "</think>" /[0-9]+/\nthought[max_tokens=3]: /[^<]+/\n'
    for spec in (text, Grammar.from_lark(text)):
        out = output_type(grammar=spec)
        assert out.parse("<think> it is two</think>2") == "<think> it is two</think>2"


def test_ignored_text_before_the_lexeme_is_not_counted() -> None:
    words = [b"<", b">", b" ", b"a", b"b", b"ab"]
    v = Vocabulary.from_bytes([*words, None], eos_ids=[len(words)])
    lark = 'start: "<" TEXT ">"\nTEXT[max_tokens=1]: /[ab]{2,}/\n%ignore " "\n'
    m = Matcher(Compiler(v).compile(Grammar.from_lark(lark)))
    assert m.accept_tokens([0, 2, 2, 5]) == 4  # two blanks, then the one token of TEXT
    assert not m.accept_token(3)  # TEXT has had its token
    assert m.accept_token(1) and m.is_accepting()


def test_adjacent_occurrences_are_counted_apart() -> None:
    words = [b"xa", b"xb", b"c", b"d", b"x"]
    v = Vocabulary.from_bytes([*words, None], eos_ids=[len(words)])
    m = Matcher(Compiler(v).compile(Grammar.from_lark("start: T T\nT[max_tokens=1]: /x[a-z]*/")))
    assert m.accept_token(0) and not m.accept_token(2)  # the first T has had its token
    assert m.accept_token(1) and not m.accept_token(3) and m.is_accepting()
    words = [b"a", b"b", b"bx", b"x", b"c"]
    v = Vocabulary.from_bytes([*words, None], eos_ids=[len(words)])
    text = {"type": "any_text", "max_tokens": 2}
    body = {"type": "sequence", "elements": [text, {"type": "const_string", "value": "x"}]}
    spec = {"type": "structural_tag", "format": {"type": "plus", "content": body}}
    compiled = Compiler(v).compile(Grammar.from_structural_tag(spec))
    masks = []
    for tokens in ([0, 2], [0, 1, 3]):  # "abx" in two tokens and in three: a new region
        m = Matcher(compiled)
        assert m.accept_tokens(tokens) == len(tokens)
        masks.append(m.allowed_token_ids().tolist())
        assert m.accept_tokens([0, 1]) == 2 and not m.accept_token(4)
    assert masks[0] == masks[1] == list(range(len(words) + 1))


def test_a_token_budget_needs_a_lexer_that_is_not_greedy() -> None:
    from constrain.output import output_type
    from constrain.reasoning import Reasoning, ReasoningPlan, reasoning_output

    greedy = output_type(grammar="start: /[0-9]+/\n%lexer basic\n")
    plan = ReasoningPlan(Reasoning(max_tokens=5), opened=False, optional=False)
    with pytest.raises(GrammarError, match="greedy"):
        reasoning_output(greedy, plan)
