"""The lazy lexer (constrain.automata.lazy_lexer) against the eager one: same language.

Random walks through the eager lexer's live bytes (and a few dead ones) step both lexers; at
every prefix the terminals accepted and kept alive must agree, and both must die together.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from constrain import Grammar
from constrain.automata import nfa
from constrain.automata.lazy_lexer import LazyLexer
from constrain.automata.lexer import build_lexer
from constrain.errors import CompileLimitError
from constrain.ir import Regex
from constrain.vocab.vocabulary import Vocabulary

CASES = {
    "class": Grammar.from_regex("[a-z0-9]{1,40}"),
    "exact": Grammar.from_regex("[a-zé€😀]{30}"),
    "at_least": Grammar.from_regex("x[ab]{25,}y"),
    "nested_alternatives": Grammar.from_regex("(ab|[a-c]{0,200}x|é{100,130})"),
    "wide": Grammar.from_regex(r"\w{18,24}-"),  # Unicode \w: 309 item states, walked
    "json_strings": Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 30},
                "b": {"type": "string", "minLength": 21},
                "c": {"anyOf": [{"type": "string", "maxLength": 24}, {"type": "null"}]},
            },
            "required": ["a"],
        }
    ),
}


def _terminals(grammar: Grammar) -> list[tuple[str, Regex]]:
    return [(t.name, t.regex) for t in grammar.normalise().terminals]


@pytest.mark.parametrize("name", sorted(CASES))
def test_lazy_lexer_language_equals_eager(name: str) -> None:
    terminals = _terminals(CASES[name])
    eager = build_lexer(terminals)
    lazy = LazyLexer(terminals, region_min=16)
    assert lazy.regions, "the case must fold a counted repetition"
    _walk_both(eager, lazy, random.Random(name), 40, 120)


def _walk_both(eager: Any, lazy: LazyLexer, rng: random.Random, walks: int, most: int) -> None:
    """Random walks along the eager lexer's live bytes, mostly inside strings (no closing
    quote), stepping both: at every prefix the same bytes go on (a kept state that cannot
    finish would let more through) and the same terminals are accepted and kept alive."""
    every_byte = np.arange(256)
    for _ in range(walks):
        s_e = s_l = 0
        for _ in range(rng.randint(1, most)):
            live = every_byte[eager.trans[s_e, eager.byte_class] >= 0]
            if live.size == 0:
                break
            lazy.expand([s_l], 1)
            snap = lazy.snapshot()
            assert (snap.trans[s_l, snap.byte_class] >= 0).tolist() == (
                eager.trans[s_e, eager.byte_class] >= 0
            ).tolist()
            inside = live[live != ord('"')]
            byte = int(rng.choice(inside if inside.size and rng.random() < 0.95 else live))
            s_e, s_l = eager.step(s_e, byte), snap.step(s_l, byte)
            accept, alive = lazy.accept_alive()
            assert eager.terminals_accepting(s_e) == snap.terminals_accepting(s_l)
            assert (eager.alive_bits[s_e] == alive[s_l]).all()
            assert (eager.accept_bits[s_e] == accept[s_l]).all()


def _string(**keywords: Any) -> Grammar:
    return Grammar.from_json_schema({"type": "string", **keywords})


PRODUCTS = {
    # A's accepting boundaries always take one more character: every count from the fewest up
    "pattern": _string(pattern="^[a-z]+(-[a-z]{2,4})*$", minLength=3, maxLength=70),
    # accepted lengths of one residue only: the count sets never settle before the bound
    "period": _string(pattern="^(abc)+$", minLength=6, maxLength=65),
    # a product region and a plain one, two terminals
    "object": Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "pattern": "^x+y?$", "maxLength": 64},
                "b": {"type": "string", "maxLength": 90},
            },
            "required": ["a"],
        }
    ),
    # a bounded language (lengths end), with escapes and multi-byte characters
    "email": _string(format="email", maxLength=80),  # its eager product: 81,871 states
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "email" else n for n in sorted(PRODUCTS)],
)
def test_product_regions_equal_the_eager_product(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``X{lo,hi} & A`` built lazily, a count and a state of A per virtual state, equals the
    eager product at every prefix: same terminals accepted and kept alive (the lazy DFA stays
    trim: a state that cannot reach acceptance within the bound is not kept), both dying
    together, up to and past the bound."""
    terminals = _terminals(PRODUCTS[name])
    eager = build_lexer(terminals)
    monkeypatch.setattr(nfa, "PRODUCT_FOLD", 0)
    lazy = LazyLexer(terminals, region_min=16)
    assert any(r.other is not None for r in lazy.regions), "the case must fold a product"
    _walk_both(eager, lazy, random.Random(name), 60, 200)


def test_lazy_lexer_builds_only_what_is_asked() -> None:
    """A million counts cost no more states than the neighbourhood asked for."""
    for n in (1_000, 1_000_000):
        lazy = LazyLexer(_terminals(Grammar.from_regex(f"[a-z]{{1,{n}}}")), region_min=256)
        assert lazy.num_real < 64  # the NFA does not unroll the count
        lazy.expand([0], 8)
        assert lazy.num_states <= 10
        state = lazy.snapshot().walk(0, b"abcdefgh")
        assert state > 0 and lazy.snapshot().terminals_accepting(state) == [0]


def test_lazy_lexer_counts_exactly_to_the_bound() -> None:
    lazy = LazyLexer(_terminals(Grammar.from_regex("[ab]{300,310}")), region_min=16)
    state = 0
    for k in range(1, 312):
        lazy.expand([state], 1)
        state = lazy.snapshot().step(state, ord("a"))
        if k > 310:
            assert state < 0
        else:
            assert lazy.snapshot().terminals_accepting(state) == ([0] if k >= 300 else [])


def test_lazy_lexer_limit() -> None:
    lazy = LazyLexer(_terminals(Grammar.from_regex("[ab]{1,5000}")), max_states=100)
    with pytest.raises(CompileLimitError, match="max_lexer_states"):
        lazy.expand([0], 500)


def test_the_eager_build_signals_a_foldable_count() -> None:
    """The signal names the fold count and the repetition (written out only when printed)."""
    terminals = _terminals(Grammar.from_regex("x[ab]{2000}"))
    with pytest.raises(nfa.FoldableRepeat) as signal:
        build_lexer(terminals, fold_signal=1024, fold_small=64)
    assert signal.value.region_min == 1024
    assert "max=2000" in str(signal.value) and "98" in str(signal.value)  # [ab]: 97-98
    many = _terminals(Grammar.from_regex("[ab]{100}c[ab]{100}d" * 6))  # 1,200 copies in all
    with pytest.raises(nfa.FoldableRepeat) as signal:
        build_lexer(many, fold_signal=1024, fold_small=64)
    assert signal.value.region_min == 64


# slow without JIT (16 s of the NUMBA_DISABLE_JIT pass); the tests below take the same lazy
# kernels through the same grammar there
@pytest.mark.slow
def test_the_compiler_builds_large_counts_lazily(tiny_vocab: Vocabulary) -> None:
    from constrain import CompileLimitError as Refused
    from constrain import Compiler, Matcher

    compiled = Compiler(tiny_vocab).compile(Grammar.from_regex("[a-z0-9]{1,1000000}!"))
    assert compiled.lazy is not None and compiled.lexer.num_states < 300
    matcher = Matcher(compiled)
    assert matcher.accept_bytes("abc" * 400)  # long text: walked a token's length at a time
    assert not matcher.accept_bytes("ABC")
    assert matcher.accept_bytes("9!") and matcher.is_accepting()
    with pytest.raises(Refused, match="max_lexer_states"):
        compiled.save("/nonexistent/never-written.npz")  # a million counts cannot be saved
    # a wide item (Unicode \w: 309 DFA states a character) is folded too, from 8 copies
    wide = LazyLexer(_terminals(Grammar.from_regex(r"\w{300}")), region_min=256)
    assert wide.regions and wide.regions[0].dfa.num_states > 300
    assert Compiler(tiny_vocab).compile(Grammar.from_regex(r"\w{8}")).lazy is not None
    assert Compiler(tiny_vocab).compile(Grammar.from_regex(r"\w{7}")).lazy is None


@pytest.mark.slow  # a product region's rows without JIT
def test_a_large_count_with_a_pattern_is_a_product_region(tiny_vocab: Vocabulary) -> None:
    """By default a count intersected with a pattern folds once the eager product would pass
    ``PRODUCT_FOLD`` states: ``maxLength: 1024`` with a Unicode ``\\w`` pattern (410,000
    product states, 0.1-0.2 s built whole) is a product region; ``maxLength: 40`` with a small
    pattern (30,340) stays in the eager lexer. Either way the bound and the pattern hold."""
    from constrain import Compiler, Matcher

    def compile_string(pattern: str, max_length: int) -> Any:
        schema = {"type": "string", "pattern": pattern, "maxLength": max_length}
        return Compiler(tiny_vocab).compile(Grammar.from_json_schema(schema))

    big = compile_string(r"^[\w /-]+\.[0-9a-zA-Z]+$", 1024)
    assert big.lazy is not None
    assert any(r.other is not None for r in big.lazy.regions)
    small = compile_string("^[a-z]+(-[a-z]{2,4})*$", 40)  # 37 x 41 x 20 states
    assert small.lazy is None
    for compiled, name in ((big, "watermark.png"), (small, "abc-de")):
        assert Matcher(compiled).accept_bytes(f'"{name}"')
    matcher = Matcher(big)
    assert matcher.accept_bytes('"' + "a" * 1020 + ".pn")  # 1,023 characters
    assert not matcher.accept_bytes("ng")  # 1,025: past the bound
    assert matcher.accept_bytes('g"') and matcher.is_accepting()
    assert not Matcher(big).accept_bytes('"no-dot"')


def test_the_boundary_neighbourhood_waits_for_the_first_mask(tiny_vocab: Vocabulary) -> None:
    """The first mask reads the token walks from state 0 only: the 16-byte neighbourhood of
    state 0 that later steps read is built by the first ensure() after it, once."""
    from constrain import Compiler, Matcher

    compiled = Compiler(tiny_vocab).compile(Grammar.from_regex("[a-z0-9]{1,1000000}!"))
    lazy = compiled.lazy
    assert lazy is not None
    matcher = Matcher(compiled)
    first = matcher.allowed_token_ids()
    assert lazy._radius[0] < 16  # the first mask did not build it
    assert matcher.accept_bytes("ab")
    rows = lazy.rows_built
    matcher.allowed_token_ids()
    assert lazy._radius[0] >= 16 and lazy.rows_built > rows
    assert lazy._boundary_neighbourhood() is False  # once
    fresh = Matcher(compiled)
    np.testing.assert_array_equal(fresh.allowed_token_ids(), first)


def test_published_rows_equal_a_fresh_computation(tiny_vocab: Vocabulary) -> None:
    """Each step publishes only the rows it built; the arrays equal ones computed whole."""
    from constrain import Compiler, Matcher
    from constrain.compiler import continuation_bits

    compiled = Compiler(tiny_vocab).compile(Grammar.from_regex("(ab|c){1,100000}[xy]"))
    assert compiled.lazy is not None
    matcher = Matcher(compiled)
    bitmask = np.zeros((1, -(-tiny_vocab.size // 32)), dtype=np.int32)
    views = []
    for i, chunk in enumerate(["ab", "c", "abab", "cab"] * 300):  # rooms grow several times
        matcher.fill_next_token_bitmask(bitmask)
        assert matcher.accept_bytes(chunk)
        if i % 97 == 0:  # flags kept up to date (not copied whole), one array per generation
            views.append(compiled.lazy.view(0))
            flags = views[-1][3]
            assert not flags.flags.writeable and flags.shape == (views[-1][0].num_states,)
            assert flags.tolist() == [compiled.lazy.expanded(s) for s in range(flags.size)]
        n = compiled.lexer.num_states
        assert compiled.cont_bits.shape[0] == compiled.restart.shape[0] == n
    assert np.array_equal(compiled.cont_bits, continuation_bits(compiled.lexer))
    assert not compiled.restart.any() and not compiled.restart.flags.writeable
    built = compiled.lazy.rows_built
    _, rows, count, flags = compiled.lazy.view(0)
    assert count == built and np.unique(rows).size == built  # each row built once, all logged
    assert all(compiled.lazy.expanded(s) for s in rows.tolist())
    assert flags.sum() == built and flags[rows].all()  # the same rows, as flags
    now = compiled.lazy.snapshot().trans
    generations = set()
    for lexer, _, _, old in views:  # an earlier view's flags: rows built in its arrays
        done = np.flatnonzero(old)
        assert all(compiled.lazy.expanded(s) for s in done.tolist())
        assert np.array_equal(lexer.trans[done], now[done])  # flagged: the row is there
        if np.shares_memory(lexer.trans, now):  # this generation: updated in place since
            assert old.tolist() == [compiled.lazy.expanded(s) for s in range(old.size)]
        generations.add(id(old.base))
    assert len(generations) > 1  # the store's rows were reallocated on the way
    assert matcher.accept_bytes("y") and matcher.is_accepting()


def test_a_lexer_without_terminals_keeps_its_boundary_state(
    tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The empty regex built lazily (``lazy_lexer.FORCE``): state 0 alone, every byte dead, as
    the eager lexer (the lazy one had no state at all, and refused the empty text)."""
    from constrain import CompiledGrammar, Compiler, Matcher
    from constrain.automata import lazy_lexer

    monkeypatch.setattr(lazy_lexer, "FORCE", 8)
    compiled = Compiler(tiny_vocab, cache_bytes=0).compile(Grammar.from_regex(r"[\s\S]{0}"))
    assert compiled.lazy is not None and compiled.lexer.num_states == 1
    assert not compiled.lexer.alive_bits.any()  # no terminal, none alive
    compiled.save(tmp_path / "empty.npz")  # (the file check refuses a terminal not there)
    for grammar in (compiled, CompiledGrammar.load(tmp_path / "empty.npz", tiny_vocab)):
        matcher = Matcher(grammar)
        assert matcher.is_accepting()
        assert matcher.allowed_token_ids().tolist() == list(tiny_vocab.eos_ids)
        assert not matcher.accept_bytes("a")


def test_a_stopped_neighbourhood_leaves_no_radius_behind() -> None:
    """A build stopped by the state limit claims nothing: asking again fails again."""
    from constrain.automata.lazy_lexer import TokenTries

    lazy = LazyLexer(_terminals(Grammar.from_regex("[a-z]{1,5000}")), max_states=30)
    tries = TokenTries(100, (), tuple(np.zeros(1, dtype=t) for t in (np.uint8, np.int32, np.int32)))
    for _ in range(2):
        with pytest.raises(CompileLimitError):
            lazy.ensure(np.zeros(1, dtype=np.int32), tries)


def test_diffusion_reads_a_lazy_lexer_whole(byte_vocab: Vocabulary) -> None:
    from constrain import Compiler
    from constrain.diffusion.token_dfa import TokenDfa

    compiled = Compiler(byte_vocab).compile(Grammar.from_regex("[a-z]{1,5000}"))
    assert compiled.lazy is not None
    dfa = TokenDfa.from_compiled(compiled)
    state = 0
    for _ in range(300):  # far past the neighbourhood built for the first mask
        state = dfa.step(state, ord("a"))
        assert state >= 0


@pytest.mark.slow  # the Llama 3 vocabulary's suffix trie: slow with NUMBA_DISABLE_JIT
def test_many_properties_stay_small_with_a_long_token() -> None:
    """Rows near the boundary follow token suffixes, not every lexeme a longest token deep.

    A breadth-first neighbourhood of state 0 as deep as the longest token (128 bytes here, as
    in Llama 3) would build the first 128 bytes of every property's string: more states than
    the limit allows for a large schema.
    """
    from constrain import Compiler, Matcher

    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    tokens += [b" " * 128, b'", "', b"description"]
    tokens.append(None)
    vocab = Vocabulary.from_bytes(tokens, eos_ids=[len(tokens) - 1])
    props = {f"field_{i}": {"type": "string", "maxLength": 255} for i in range(30)}
    props["body"] = {"type": "string", "maxLength": 32767}
    schema = {"type": "object", "properties": props, "required": ["body"]}
    compiled = Compiler(vocab).compile(Grammar.from_json_schema(schema, whitespace="flexible"))
    assert compiled.lazy is not None and compiled.lazy.num_states < 20_000
    matcher = Matcher(compiled)
    text = '{"field_7": "' + " " * 200 + '", "body": "' + "x" * 3000 + '"}'
    assert matcher.accept_bytes(text) and matcher.is_accepting()
    assert not Matcher(compiled).accept_bytes('{"field_7": "' + "x" * 256)


@pytest.mark.slow
@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_bounded_string_slices_keep_the_masks(
    llama_vocab: Vocabulary, lazy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Masks inside strings with a maxLength, their string slices bounded by what each string
    still takes (``MaskTables._bounded_slice``), equal those of trie walks over every other
    token (that shortcut off) on Llama 3.2's vocabulary, token by token, eager and lazy."""
    import json

    from constrain import Compiler, Matcher
    from constrain.automata import lazy_lexer
    from constrain.tables import mask_tables

    if lazy:
        monkeypatch.setattr(lazy_lexer, "FORCE", 8)
    else:  # (its eager lexer has more states than an eager build is allowed by default)
        monkeypatch.setattr(lazy_lexer, "EAGER_MEMBERS", 1 << 40)
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 12},
            "b": {"type": "string", "maxLength": 40},
            "c": {"type": "string", "maxLength": 300},
        },
        "required": ["a", "b", "c"],
    }
    value = {"a": "Hello World!", "b": "lorem ipsum " * 3 + "dolo", "c": "€ab" * 60}
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    by_bytes = {llama_vocab.token_bytes_of(t): t for t in range(llama_vocab.size)}
    data, ids = text.encode(), []
    while data:  # longest match: valid tokens (not the tokenizer's own split)
        n = max(k for k in range(1, min(len(data), 16) + 1) if data[:k] in by_bytes)
        ids.append(by_bytes[data[:n]])
        data = data[n:]
    grammar = Grammar.from_json_schema(schema)

    def masks() -> tuple[list[bytes], int]:
        matcher = Matcher(Compiler(llama_vocab, cache_bytes=0).compile(grammar))
        assert (matcher.compiled.lazy is not None) == lazy
        rows = []
        for token in ids:
            rows.append(matcher.allowed_token_ids().tobytes())
            assert matcher.accept_token(token)
        return rows, int(matcher.compiled.tables.num_builds)

    taken = []
    bounded = mask_tables.MaskTables._bounded_slice

    def spy(self: Any, *args: Any) -> int:
        taken.append(bounded(self, *args))
        return taken[-1]

    monkeypatch.setattr(mask_tables.MaskTables, "_bounded_slice", spy)
    with_bounds, _ = masks()
    assert sum(r > 0 for r in taken) >= 10  # bounded slices taken, up to each string's end
    monkeypatch.setattr(mask_tables.MaskTables, "_bounded_slice", lambda *_: -1)
    assert masks()[0] == with_bounds
