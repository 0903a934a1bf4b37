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
    tokens and before the first; none after the last (%ignore_at_end false)."""
    grammar = Grammar.builtin(name)
    assert grammar.greedy
    compiled = Compiler(byte_vocabulary()).compile(grammar)
    head, tail = {"sql": ("SELECT", "a FROM t"), "json": ("[1,", "2]"), "arithmetic": ("1 +", "2")}[
        name
    ]
    bound = 20 if name != "arithmetic" else 8
    for blanks in (" " * bound, "\n" + " " * (bound - 1), " \t" * (bound // 2)):
        assert accepts(compiled, head + blanks + tail)
        assert accepts(compiled, blanks + head + " " + tail)
        assert not accepts(compiled, head + blanks + " " + tail)
        assert not accepts(compiled, blanks + " " + head + " " + tail)
        # %ignore_at_end false: a text ends with its last token, never with whitespace
        assert not accepts(compiled, head + " " + tail + blanks)
        assert not accepts(compiled, head + " " + tail + blanks[0])


# -- %ignore_at_end false: no ignored lexeme after the last terminal ------------------------

AT_END = TOY.replace("%lexer basic", "%lexer basic\n%ignore_at_end false")


def test_ignore_at_end_is_read_printed_and_saved() -> None:
    from constrain.ir.serial import grammar_from_data, grammar_to_data

    grammar = Grammar.from_lark(AT_END)
    assert not grammar.ignore_at_end and grammar.ignore
    assert Grammar.from_lark(TOY).ignore_at_end
    assert "%ignore_at_end false" in grammar.to_lark()
    assert not Grammar.from_lark(grammar.to_lark()).ignore_at_end
    assert grammar_from_data(grammar_to_data(grammar)) == grammar
    with pytest.raises(constrain.LarkGrammarError, match="%ignore_at_end takes one of"):
        Grammar.from_lark('%ignore_at_end no\nstart: "a"\n')


def test_ignore_at_end_membership_is_the_language_without_trailing_blanks() -> None:
    """Greedy: the old language (where an ignored terminal never follows itself) minus the
    texts that end in an ignored lexeme; the marked oracle decides the old language."""
    loose = Grammar.from_lark(TOY)
    compiled = Compiler(byte_vocabulary()).compile(Grammar.from_lark(AT_END))
    rng = random.Random(5)
    texts = _random_texts(rng, 400) + [
        "let x = 1;",
        " let x = 1;",
        "let x=letter;",
        "let x = 12 ;let y=x;",
        "  let x =1;  let y=x;",
        "let x = 1; ",
        "let x=1;  ",
    ]
    positives = 0
    for text in texts:
        expected = reference.naive_greedy_accepts(loose, text) and not text.endswith(" ")
        positives += expected
        assert accepts(compiled, text) is expected, text
    assert positives >= 5


def test_ignore_at_end_without_greedy_lexing() -> None:
    """Every split, a one-character ignored terminal (so runs are several lexemes): the naive
    recogniser, which reads ignore_at_end itself, decides."""
    text = TOY.replace("%lexer basic", "").replace("/[ ]{1,3}/", '" "')
    strict = Grammar.from_lark(text + "%ignore_at_end false\n")
    recognizer = reference.naive_cfg_recognizer(strict)
    compiled = Compiler(byte_vocabulary()).compile(strict)
    samples = _random_texts(random.Random(9), 300) + [
        "let x  =  1;",
        "  let x = 1;",
        "let x = 1;  let y=x;",
        "let x=1;  ",
        "let x = 1; ",
    ]
    positives = 0
    for sample in samples:
        expected = recognizer.accepts(sample.encode())
        positives += expected
        assert accepts(compiled, sample) is expected, sample
        if expected:
            assert reference.naive_cfg_accepts(strict, sample.encode())
    assert positives >= 3


def test_ignore_at_end_masks_never_offer_trailing_blanks() -> None:
    vocab = tiny_vocabulary()
    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    eos = set(vocab.eos_ids.tolist())
    # one statement: after it only the end
    one = Compiler(vocab).compile(Grammar.from_lark(AT_END.replace("stmt+", "stmt")))
    m = Matcher(one)
    assert m.accept_bytes(b"let x = 1;")
    m.fill_next_token_bitmask(bitmask, 0)
    allowed = bitmask_to_bool_mask(np.asarray(bitmask)[0], vocab.size)
    assert set(np.flatnonzero(allowed).tolist()) == eos
    # several: a blank may come, but only before another statement
    m = Matcher(Compiler(vocab).compile(Grammar.from_lark(AT_END)))
    assert m.accept_bytes(b"let x = 1;")
    m.fill_next_token_bitmask(bitmask, 0)
    allowed = bitmask_to_bool_mask(np.asarray(bitmask)[0], vocab.size)
    assert all(allowed[t] for t in eos)
    assert m.accept_bytes(b" ") and not m.is_accepting()
    m.fill_next_token_bitmask(bitmask, 0)
    allowed = bitmask_to_bool_mask(np.asarray(bitmask)[0], vocab.size)
    assert not any(allowed[t] for t in eos)


def test_ignore_at_end_refuses_what_it_cannot_express() -> None:
    compile_ = Compiler(byte_vocabulary()).compile
    two = 'start: "a"+\nWS: " "\nNL: "\\n"\n%ignore WS\n%ignore NL\n%ignore_at_end false\n'
    loose = compile_(Grammar.from_lark(two))  # every split: any run of the two before a lexeme
    assert accepts(loose, " \na \n a") and not accepts(loose, "a a ")
    with pytest.raises(constrain.GrammarError, match="takes one ignored terminal"):
        compile_(Grammar.from_lark("%lexer basic\n" + two))
    # greedy: a terminal may not start with a byte that starts or continues the ignored one
    for clash in (
        "%lexer basic\nstart: X+\nX: /[ ]?a/\n%ignore /[ ]+/\n%ignore_at_end false\n",
        '%lexer basic\nstart: "a" | B\nB: " ab"\n%ignore " "\n%ignore_at_end false\n',
        '%lexer basic\nstart: item+\nitem: "#" NAME\nNAME: /[a-z]+/\nCOMMENT: /#[^\\n]*\\n/\n'
        "%ignore COMMENT\n%ignore_at_end false\n",
    ):
        with pytest.raises(constrain.GrammarError, match="may start with byte"):
            compile_(Grammar.from_lark(clash))
    used = 'start: "a" NL "b"\nNL: "\\n"\n%ignore NL\n%ignore_at_end false\n'
    with pytest.raises(constrain.GrammarError, match="also used in rule 'start'"):
        compile_(Grammar.from_lark(used))


def test_ignore_at_end_drops_terminals_that_match_nothing() -> None:
    """An empty terminal is dropped with its alternatives, as without the option."""
    from constrain.ir import Intersect, Literal, Rule, Terminal

    grammar = Grammar(
        rules=(Rule("start", (("A",), ("E",))),),
        terminals=(
            Terminal("A", Literal("a")),
            Terminal("E", Intersect((Literal("b"), Literal("c")))),
            Terminal("WS", Literal(" ")),
        ),
        start="start",
        ignore=("WS",),
        greedy=True,
        ignore_at_end=False,
    )
    compiled = Compiler(byte_vocabulary()).compile(grammar)
    assert accepts(compiled, " a") and not accepts(compiled, "a ")


def test_ignore_at_end_in_an_embedded_grammar(tmp_path: Path) -> None:
    """A %grammar part keeps its own option: nothing ignored after its last lexeme."""
    (tmp_path / "part.lark").write_text(AT_END.replace("stmt+", "stmt"), encoding="utf-8")
    (tmp_path / "outer.lark").write_text('start: "<" %grammar "part.lark" ">"\n', "utf-8")
    compiled = Compiler(byte_vocabulary()).compile(Grammar.from_lark_file(tmp_path / "outer.lark"))
    assert accepts(compiled, "< let x = 1;>")
    assert not accepts(compiled, "<let x = 1; >")
