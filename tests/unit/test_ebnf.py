"""The EBNF front end (XGrammar's grammar syntax, llama.cpp's GBNF): language and errors.

Languages are checked by accepting and refusing strings through a compiled matcher; parity with
XGrammar on whole grammars is in ``tests/unit/test_structural_tag.py`` (``ebnf_list``) and
``benchmarks/structural_tag_parity.py --only ebnf``.
"""

from __future__ import annotations

import pytest

from constrain import Compiler, Grammar, GrammarError, Matcher, Vocabulary

BYTES = Vocabulary.from_bytes([bytes([b]) for b in range(128)] + [b"\xc3\xa9", None])


def _accepts(grammar: Grammar, text: str) -> bool:
    matcher = Matcher(Compiler(BYTES).compile(grammar))
    return matcher.accept_bytes(text) and matcher.is_accepting()


GRAMMAR = r"""
# a comment line
root ::= "Items:" ( "\n- " item ){1,3} "\n"   # bounded repetition of a group
item ::= name-part ( ", " name-part )?
       | "\u00e9t\u00e9 " Regex("[0-9]{2,3}")
name-part ::= [A-Z] [a-z\-]{0,8} | "x\x41" | num
num ::= [0-9]+ ("." [0-9]*)?
"""


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("Items:\n- Ab\n", True),
        ("Items:\n- Ab-c, xA\n- été 123\n", True),
        ("Items:\n- 1.\n- 2.50, Z\n- xA\n", True),
        ("Items:\n- Ab\n- Ab\n- Ab\n- Ab\n", False),  # four items: {1,3}
        ("Items:\n\n", False),
        ("Items:\n- été 1\n", False),  # Regex("[0-9]{2,3}")
        ("Items:\n- Abcdefghij\n", False),  # [a-z\-]{0,8}
        ("Items:\n- ab\n", False),
    ],
)
def test_the_language_of_a_grammar(text: str, ok: bool) -> None:
    assert _accepts(Grammar.from_ebnf(GRAMMAR), text) == ok


def test_classes_strings_and_empty_alternatives() -> None:
    grammar = Grammar.from_ebnf(
        r"""root ::= q ws [^"\\\x00-\x1F]* q [\d\-]+ ("" | "!") ()
q ::= "\""
ws ::= "" | [ \t]{1,2}"""
    )
    assert _accepts(grammar, '"  abc"1-2')
    assert _accepts(grammar, '"é"-!')
    assert not _accepts(grammar, '"a"b"1')  # a quote inside
    assert not _accepts(grammar, '"\t\t\ta"1')  # three tabs: ws takes two, the string none
    assert not _accepts(grammar, '"a"')  # [\d\-]+ needs one


@pytest.mark.parametrize(
    ("cls", "accepted", "refused"),
    [
        ("[-a]", "-a", "b"),  # a "-" that begins or ends a class is itself
        ("[a-]", "-a", "b"),
        ("[a-c-e]", "abc-e", "d"),  # a range, then "-" and "e"
        ("[--/]", "-./", ","),  # "-" as a range's bounds
        ("[!--]", "!,-", "."),
        ("[\\d-z]", "0-z", "a"),  # a class escape is no bound
        ("[a\\-z]", "a-z", "b"),
        ("[^-a]", "b", "-a"),
    ],
)
def test_dashes_in_a_character_class(cls: str, accepted: str, refused: str) -> None:
    grammar = Grammar.from_ebnf(f"root ::= {cls}")
    assert all(_accepts(grammar, c) for c in accepted)
    assert not any(_accepts(grammar, c) for c in refused)


def test_rule_names_are_free_text() -> None:
    grammar = Grammar.from_ebnf('root ::= ebnf_1 ("x" ebnf_1)*\nebnf_1 ::= "a" | "b" ebnf_1')
    assert _accepts(grammar, "axba")
    assert not _accepts(grammar, "ax")


def test_a_choice_inside_and_a_recursive_rule() -> None:
    grammar = Grammar.from_ebnf('expr ::= "(" expr ")" | "x"', root="expr")
    assert _accepts(grammar, "((x))")
    assert not _accepts(grammar, "((x)")


@pytest.mark.parametrize(
    ("text", "message", "where"),
    [
        ('root ::= "a" (= "b")', "lookahead", "line 1, column 14"),
        ('root ::= a\na ::= "x"\na ::= "y"', "defined twice", "line 3, column 1"),
        ("root ::= b", "rule 'b' is not defined", "line 1, column 10"),
        ('rule ::= "a"', "root rule 'root' is not defined", None),
        ('root ::= "a', "a string ends at its line", "line 1, column 12"),
        ("root ::= [a-", "a character class ends at its line", "line 1, column 10"),
        ("root ::= [z-a]", "out of order", "line 1, column 10"),
        ('root ::= "a"{3,2}', "upper bound is below", "line 1, column 17"),
        ('root ::= "\\q"', "unknown escape", "line 1, column 11"),
        ('root ::= "a" x ::= "b"', "a rule name begins its line", "line 1, column 14"),
        ('root[max_tokens=3] ::= "a"', "rule attributes", "line 1, column 5"),
        ('root ::= TagDispatch(("<a>", b))', "TagDispatch", "line 1, column 10"),
        ('root ::= Regex("(")', "invalid regex", "line 1, column 16"),
        ('root ::= "a" ; "b"', "unexpected character ';'", "line 1, column 14"),
        ('root ::= ( "a"', r"expected \) to close the group", "line 1, column 15"),
        ('root ::= "a"{2 "b"', "expected } after the repetition bounds", "line 1, column 16"),
        ('root ::= "a"{,2}', "expected a number", "line 1, column 14"),
        ("root ::= Token(1 x)", "a macro argument is a string or a token id", "line 1, column 18"),
        ('root ::= "a" **', "expected an element, got '\\*'", "line 1, column 15"),
        ('root ::= "a"\n  ::= "b"', "::= must follow a rule name", "line 2, column 3"),
        ('root ::= "a" )', "expected a rule", "line 1, column 14"),
        ('root ::= "\\x4"', "takes 2 hex digits", "line 1, column 11"),
    ],
)
def test_errors_give_line_and_column(text: str, message: str, where: str | None) -> None:
    with pytest.raises(GrammarError, match=message) as info:
        Grammar.from_ebnf(text)
    assert info.value.location == where


def test_token_macros_are_the_structural_tag_formats() -> None:
    names = {"<|call|>": 130, "<|eos|>": 131}
    vocab = Vocabulary.from_bytes(
        [bytes([b]) for b in range(128)] + [b"ab", b"xy", None, None],
        eos_ids=[131],
        special_names=names,
    )
    grammar = Grammar.from_ebnf('root ::= Token("<|call|>") ExcludeToken() "!"')
    assert [kind for _, kind in grammar.token_aligned] == ["token"]
    matcher = Matcher(Compiler(vocab).compile(grammar))
    assert matcher.accept_token(130)
    assert matcher.accept_token(128)  # "ab" is the one token
    assert matcher.allowed_token_ids().tolist() == [ord("!")]
