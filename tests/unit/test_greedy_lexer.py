"""Greedy lexing (``Grammar.greedy``, Lark's ``lexer="basic"``, ``%lexer basic``).

A lexeme may end before a byte only if no terminal of the grammar could take that byte next,
and an ignored terminal never follows itself (so a bounded ``%ignore`` terminal bounds the run).
The oracle of sentence membership is independent of the matcher: the greedy boundaries of a
text are found with the plain lexer, a marker byte is written after each lexeme and after each
terminal of the grammar, and the naive scannerless CYK recogniser (``tests/reference.py``)
decides the marked text; so a text is a sentence iff some derivation has exactly the greedy
boundaries. Masks are checked token by token against the byte-level step along random walks.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import reference

import constrain
from constrain import Compiler, Grammar, Matcher
from constrain.bitmask import bitmask_to_bool_mask
from constrain.testing import byte_vocabulary, tiny_vocabulary

ROOT = Path(__file__).resolve().parents[2]

TOY = r"""
%lexer basic
start: stmt+
stmt: "let" NAME "=" value ";"
value: NAME | NUMBER | "letter"
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore /[ ]{1,3}/
"""


def accepts(compiled: constrain.CompiledGrammar, text: str) -> bool:
    m = Matcher(compiled)
    return m.accept_bytes(text.encode()) and m.is_accepting()


def test_keywords_and_identifiers_separate_as_sql_separates_them() -> None:
    compiler = Compiler(byte_vocabulary())
    text = (ROOT / "grammars" / "sql.lark").read_text(encoding="utf-8")
    loose = compiler.compile(Grammar.from_lark(text, lexer="dynamic_complete"))
    greedy = compiler.compile(Grammar.from_lark(text, lexer="basic"))
    assert greedy.grammar.greedy and not loose.grammar.greedy
    for query, ok in [
        ("SELECT a FROM t", True),
        ("SELECT*FROM t", True),
        ("SELECT ION FROM t", True),
        ("SELECTION FROM t", False),  # one identifier, never SELECT + ION
        ("SELECT a FROMt", True),  # the alias FROMt
        ("SELECT a FROM tWHERE x = 1", False),
        ("SELECT a FROM t WHERE x = 1", True),
        ("select count(*) from t group by a", True),
        ("SELECT a FROM t ORDERBY a", False),
    ]:
        assert accepts(greedy, query) is ok, query
    assert accepts(loose, "SELECTION FROM t")  # every split: SELECT ION


def test_lexer_mode_from_the_text_and_the_argument() -> None:
    assert Grammar.from_lark(TOY).greedy
    assert not Grammar.from_lark(TOY, lexer="dynamic_complete").greedy
    assert not Grammar.from_lark(TOY.replace("%lexer basic", "")).greedy
    with pytest.raises(constrain.LarkGrammarError, match="%lexer takes one of"):
        Grammar.from_lark('%lexer greedy\nstart: "a"\n')
    with pytest.raises(constrain.LarkGrammarError, match="lexer='x'"):
        Grammar.from_lark('start: "a"\n', lexer="x")


def _random_texts(rng: random.Random, count: int) -> list[str]:
    words = ["let", "letter", "lett", "x", "xy", "=", ";", "1", "12", " ", "  ", "le", "t", "   "]
    return ["".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(count)]


def test_membership_matches_the_marked_oracle() -> None:
    grammar = Grammar.from_lark(TOY)
    compiled = Compiler(byte_vocabulary()).compile(grammar)
    rng = random.Random(3)
    texts = _random_texts(rng, 400) + [
        "let x = 1;",
        "letx=1;",  # one NAME 'letx': not a statement
        "let x=letter;",
        "let x = lettery;",
        "let letter = 1;",  # greedy: the lexeme "letter" is the keyword or a NAME
        "let x = 12 ;let y=x;",
    ]
    positives = 0
    for text in texts:
        expected = reference.naive_greedy_accepts(grammar, text)
        positives += expected
        assert accepts(compiled, text) is expected, text
    assert positives >= 5


@pytest.mark.parametrize("which", ["toy", "sql"])
def test_masks_equal_the_byte_level_step(which: str) -> None:
    """Every token the mask allows is accepted by the matcher, and no other (random walks)."""
    vocab = tiny_vocabulary()
    text = TOY if which == "toy" else (ROOT / "grammars" / "sql.lark").read_text("utf-8")
    compiled = Compiler(vocab).compile(Grammar.from_lark(text, lexer="basic"))
    rng = random.Random(7)
    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    eos = set(vocab.eos_ids.tolist())
    for _ in range(6):
        m = Matcher(compiled)
        for _ in range(25):
            m.fill_next_token_bitmask(bitmask, 0)
            allowed = bitmask_to_bool_mask(np.asarray(bitmask)[0], vocab.size)
            for t in range(vocab.size):
                if t in eos or vocab.token_lengths[t] == 0:
                    continue
                assert bool(allowed[t]) == m.fork().accept_token(t), (which, t)
            choices = [t for t in np.flatnonzero(allowed).tolist() if t not in eos]
            if not choices:
                break
            assert m.accept_token(rng.choice(choices))


@pytest.mark.parametrize("name", ["sql", "json", "arithmetic"])
def test_shipped_grammars_bound_every_run_of_whitespace(name: str) -> None:
    """Greedy lexing with a bounded %ignore terminal: the longest run is the bound, between
    tokens and after the end."""
    grammar = Grammar.builtin(name)
    assert grammar.greedy
    compiled = Compiler(byte_vocabulary()).compile(grammar)
    head, tail = {"sql": ("SELECT", "a FROM t"), "json": ("[1,", "2]"), "arithmetic": ("1 +", "2")}[
        name
    ]
    bound = 20 if name != "arithmetic" else 8
    for blanks in (" " * bound, "\n" + " " * (bound - 1), " \t" * (bound // 2)):
        assert accepts(compiled, head + blanks + tail)
        assert accepts(compiled, head + " " + tail + blanks)
        assert not accepts(compiled, head + blanks + " " + tail)
        assert not accepts(compiled, head + " " + tail + blanks + "\n")
