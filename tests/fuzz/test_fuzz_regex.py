"""Fuzz: random regexes against ``re.fullmatch``, through the DFA and through a Matcher."""

from __future__ import annotations

import re
from typing import Any

from fuzz.budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from property.test_matcher_property import patterns
from property.test_regex_property import GROUPS, check_against_re, pattern_trees, to_pattern

from constrain.compiler import Compiler
from constrain.ir import Grammar
from constrain.matcher import Matcher
from constrain.testing import byte_vocabulary

COMPILER = Compiler(byte_vocabulary())


@fuzz_settings()
@given(
    tree=pattern_trees(GROUPS), flags=st.sampled_from([0, re.I, re.S, re.I | re.S]), data=st.data()
)
def test_dfa_agrees_with_re(tree: Any, flags: int, data: Any) -> None:
    check_against_re(to_pattern(tree).replace("(?P<@>", "(?:"), flags, data)


@fuzz_settings(0.5)
@given(
    pattern=patterns, texts=st.lists(st.text(alphabet="abc1 é€😀dx\n\"'", max_size=6), max_size=8)
)
def test_matcher_agrees_with_re(pattern: str, texts: list[str]) -> None:
    matcher = Matcher(COMPILER.compile(Grammar.from_regex(pattern)))
    compiled = re.compile(pattern)
    for text in texts:
        matcher.reset()
        got = matcher.accept_bytes(text.encode()) and matcher.is_accepting()
        assert got == (compiled.fullmatch(text) is not None), (pattern, text)
