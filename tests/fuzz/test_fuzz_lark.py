"""Fuzz: random Lark grammars against lark's Earley parser on random strings."""

from __future__ import annotations

import lark
from fuzz.budget import fuzz_settings
from hypothesis import assume, given
from hypothesis import strategies as st
from property.test_lark_equivalence import random_grammars

from constrain.compiler import Compiler
from constrain.errors import GrammarError
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.testing import byte_vocabulary

COMPILER = Compiler(byte_vocabulary())


@fuzz_settings(0.5)
@given(g=random_grammars(), texts=st.lists(st.text(alphabet="abc ", max_size=7), max_size=12))
def test_grammar_acceptance_agrees_with_lark_earley(g: Grammar, texts: list[str]) -> None:
    try:
        compiled = COMPILER.compile(g)
    except GrammarError:
        assume(False)  # the grammar derives nothing
    parser = lark.Lark(g.to_lark(), parser="earley", lexer="dynamic_complete")
    matcher = Matcher(compiled)
    for text in texts:
        matcher.reset()
        got = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        try:
            parser.parse(text)
        except lark.exceptions.LarkError:
            assert not got, (g.to_lark(), text)
        except RuntimeError:  # lark's Earley gives up on some cyclic grammars
            continue
        else:
            assert got, (g.to_lark(), text)
