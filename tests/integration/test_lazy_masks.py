"""Masks over a lazy lexer equal the masks over the eager one, token by token.

Every grammar is compiled twice: eagerly (no counted repetition folded) and lazily (every
foldable repetition of 8 or more copies folded, :mod:`constrain.automata.lazy_lexer`). Random
walks through the allowed tokens compare the masks, acceptance, jump-forward bytes and byte
input at every step; a saved lazy grammar loads back with the same masks.
"""

from __future__ import annotations

import ast
import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from constrain import CompiledGrammar, Compiler, Grammar, Matcher
from constrain.automata import lazy_lexer, nfa
from constrain.errors import CompileLimitError, GrammarError
from constrain.vocab.vocabulary import Vocabulary

GRAMMARS = {
    "class": lambda: Grammar.from_regex("[a-z0-9]{3,12}"),
    "word": lambda: Grammar.from_regex("[a-zé€😀]{10}!"),
    "at_least": lambda: Grammar.from_regex("(ab|c{9,})d"),
    "two_counts": lambda: Grammar.from_regex("x{0,9}y{9,11}"),
    "wide": lambda: Grammar.from_regex(r"(\w{9,12}|\d{1,3})!"),  # Unicode \w: walked
    "strings": lambda: Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 12},
                "b": {"type": "string", "minLength": 9},
                "c": {"type": "string", "pattern": "^[A-Z]{2,10}$"},
                "d": {"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}]},
                "e": {"type": "array", "items": {"type": "string", "minLength": 8}},
            },
            "required": ["a", "b"],
        }
    ),
    # counts of 64 and more intersected with patterns: product regions
    "products": lambda: Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "pattern": "^[a-z]+(-[a-z]{2,4})*$", "maxLength": 70},
                "b": {"type": "string", "pattern": "^(abc)+$", "minLength": 6, "maxLength": 65},
            },
            "required": ["a", "b"],
        }
    ),
    "flexible": lambda: Grammar.from_json_schema(
        {"type": "array", "items": {"type": "string", "maxLength": 10}}, whitespace="flexible"
    ),
}


def _both(vocab: Vocabulary, grammar: Grammar, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.setattr(lazy_lexer, "REGION_MIN", 1 << 40)
    monkeypatch.setattr(lazy_lexer, "EAGER_MEMBERS", 1 << 62)  # no lexer too large to build whole
    monkeypatch.setattr(nfa, "WIDE_MIN_COUNT", 1 << 40)  # wide items too: unrolled
    monkeypatch.setattr(nfa, "PRODUCT_FOLD", 1 << 62)  # counts and patterns: their product
    try:
        eager = Compiler(vocab, cache_bytes=0).compile(grammar)
    finally:
        monkeypatch.setattr(nfa, "PRODUCT_FOLD", 0)  # ... and lazily, as a product region
    monkeypatch.setattr(lazy_lexer, "REGION_MIN", 8)
    monkeypatch.setattr(nfa, "_SHARED_MAX_STATES", 0)  # small pieces are folded too
    monkeypatch.setattr(nfa, "_SHARED_TEMPLATES", {})
    lazy = Compiler(vocab, cache_bytes=0).compile(grammar)
    monkeypatch.undo()
    assert eager.lazy is None
    return eager, lazy


def _walk(
    eager: CompiledGrammar,
    lazy: CompiledGrammar,
    rng: random.Random,
    steps: int,
    decoding: bool = False,
) -> None:
    """Compare masks along a random walk; ``decoding``: masks and tokens only, as a decoding
    loop asks (the byte-level questions build every row around the states)."""
    me, ml = Matcher(eager), Matcher(lazy)
    for _ in range(steps):
        allowed = me.allowed_token_ids()
        np.testing.assert_array_equal(allowed, ml.allowed_token_ids())
        assert me.is_accepting() == ml.is_accepting()
        if not decoding:
            assert me.forced_bytes() == ml.forced_bytes()
            np.testing.assert_array_equal(me.next_bytes(), ml.next_bytes())
        choices = [t for t in allowed.tolist() if t not in eager.vocab.eos_ids]
        if not choices:
            break
        rejected = rng.randrange(eager.vocab.size)
        assert me.accept_token(rejected) == ml.accept_token(rejected)
        token = rng.choice(choices)
        if rejected in allowed:
            me.rollback(1)
            ml.rollback(1)
        assert me.accept_token(token) and ml.accept_token(token)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_lazy_masks_equal_eager(
    name: str, tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    eager, lazy = _both(tiny_vocab, GRAMMARS[name](), monkeypatch)
    assert lazy.lazy is not None and lazy.lazy.regions
    assert (name == "products") == any(r.other is not None for r in lazy.lazy.regions)
    rng = random.Random(name)
    for _ in range(6):
        _walk(eager, lazy, rng, 40)


@pytest.mark.parametrize("name", ["strings", "products", "flexible"])
def test_lazy_masks_equal_eager_without_the_boundary_neighbourhood(
    name: str, tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over its budget (``_PRIME_BUDGET``, here none) the neighbourhood of state 0 is left to
    the token walks: the rows read from the boundary are those of the token suffixes."""
    monkeypatch.setattr(lazy_lexer, "_PRIME_BUDGET", 0)
    eager, lazy = _both(tiny_vocab, GRAMMARS[name](), monkeypatch)
    rng = random.Random(name)
    for k in range(6):
        _walk(eager, lazy, rng, 40, decoding=k % 2 == 0)


SHARED = {
    "strings": lambda: Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 40},
                "b": {"type": "string", "minLength": 24, "maxLength": 60},
                "c": {"type": "string", "pattern": "^[a-z]+(-[a-z]{2,4})*$", "maxLength": 45},
            },
            "required": ["a", "b", "c"],
        }
    ),
    "regex": lambda: Grammar.from_regex("([a-z0-9 ]{20,50}|x{30,}),"),
    # lexemes that end inside tokens: a mask from a sharing state simulates its candidates
    "lark": lambda: Grammar.from_lark('start: WORD ("," WORD)*\nWORD: /[a-z ]{20,50}/'),
}
# tokens across lexeme ends ("ab,cd"), for the "lark" case
_CROSSING = [b"abcde,", b"ab cd,ef", b"b,", b",a", b"abc", b"cd ef", b"a,bcd,e", b"xyzzy,"]


@pytest.mark.parametrize("name", sorted(SHARED))
def test_states_counted_alike_share_tables(
    name: str, tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted states clear of their bounds share token tables (``LazyLexer.share``): a mask
    from a sharing state walks only its candidates' rows, and equals the eager one. The bounds
    are a few tokens' lengths long, so the walks cross from shared states to exact ones near
    them, in plain and product regions; tokens end lexemes inside them ("lark")."""
    vocab = tiny_vocab
    if name == "lark":
        tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
        vocab = Vocabulary.from_bytes([*tokens, *_CROSSING, None], eos_ids=[264])
    eager, lazy = _both(vocab, SHARED[name](), monkeypatch)
    rng = random.Random(name)
    for k in range(8):
        _walk(eager, lazy, rng, 60, decoding=k % 2 == 0)
    assert lazy.lazy is not None and lazy.lazy.num_shared > 20


@pytest.mark.parametrize("name", ["strings", "class"])
def test_lazy_bytes_and_saved_file(
    name: str, tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    eager, lazy = _both(tiny_vocab, GRAMMARS[name](), monkeypatch)
    text = '{"a":"abcdefghijkl","b":"123456789"}' if name == "strings" else "abc123xyz"
    for cut in range(len(text) + 1):
        me, ml = Matcher(eager), Matcher(lazy)
        assert me.accept_bytes(text[:cut]) == ml.accept_bytes(text[:cut])
        np.testing.assert_array_equal(me.allowed_token_ids(), ml.allowed_token_ids())
    lazy.save(tmp_path / "g.npz")
    loaded = CompiledGrammar.load(tmp_path / "g.npz", tiny_vocab)
    _walk(eager, loaded, random.Random(1), 30)


def _counted_schemas(data_dir: Path, limit: int) -> list[Any]:
    out = []
    with gzip.open(data_dir / "maskbench-dev.jsonl.gz", "rt") as fh:
        for line in fh:
            if "Length" in line or "{1," in line:
                row = json.loads(line)
                out.append(
                    ast.literal_eval(row["schema"])
                    if isinstance(row["schema"], str)
                    else row["schema"]
                )
                if len(out) >= limit:
                    break
    return out


def test_lazy_masks_equal_eager_on_maskbench(
    data_dir: Path, llama_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real schemas with string lengths or counted patterns, on the Llama 3 vocabulary."""
    compared = products = 0
    for k, schema in enumerate(_counted_schemas(data_dir, 45)):
        try:
            grammar = Grammar.from_json_schema(schema)
            Compiler(llama_vocab, cache_bytes=0).compile(grammar)
        except (GrammarError, CompileLimitError):  # unsupported or too large either way
            continue
        try:
            eager, lazy = _both(llama_vocab, grammar, monkeypatch)
        except CompileLimitError:  # a product too big to build whole
            monkeypatch.undo()
            continue
        if lazy.lazy is None:
            continue
        products += any(r.other is not None for r in lazy.lazy.regions)
        _walk(eager, lazy, random.Random(k), 12)
        compared += 1
    assert compared >= 20 and products >= 2


def test_lazy_grammar_filled_from_threads(tiny_vocab: Vocabulary) -> None:
    """Matchers of one lazy grammar filled in threads: each row as its own fill writes it."""
    from constrain import allocate_token_bitmask
    from constrain.matcher import fill_next_token_bitmasks

    compiled = Compiler(tiny_vocab, cache_bytes=0).compile(
        Grammar.from_regex('[a-z0-9 ]{1,100000}(",|\\.)')
    )
    assert compiled.lazy is not None
    rng = random.Random(7)
    matchers = []
    for k in range(12):
        m = Matcher(compiled)
        m.accept_bytes("".join(rng.choice("ab1 ") for _ in range(17 * k + 1)))
        matchers.append(m)
    batch = allocate_token_bitmask(len(matchers), tiny_vocab.size)
    for _ in range(3):
        fill_next_token_bitmasks(matchers, batch, num_threads=4)
        for i, m in enumerate(matchers):
            one = allocate_token_bitmask(1, tiny_vocab.size)
            m.fill_next_token_bitmask(one)
            assert torch.equal(one[0], batch[i])
            token = rng.choice(m.allowed_token_ids().tolist())
            if token not in tiny_vocab.eos_ids:
                assert m.accept_token(token)


def test_many_bounded_strings_fold_when_their_counts_add_up(
    tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts of REGION_SMALL copies or more that add up to REGION_MIN make the lexer lazy.

    Twelve strings of ``maxLength`` 100 (1,200 copies in all) are built lazily, with masks equal
    to the eager build's; three of them (300 copies) stay eager.
    """

    def schema(n: int) -> Grammar:
        props = {f"k{i}": {"type": "string", "maxLength": 100 + i} for i in range(n)}
        return Grammar.from_json_schema({"type": "object", "properties": props})

    assert Compiler(tiny_vocab, cache_bytes=0).compile(schema(3)).lazy is None
    lazy = Compiler(tiny_vocab, cache_bytes=0).compile(schema(12))
    assert lazy.lazy is not None and len(lazy.lazy.regions) >= 12
    monkeypatch.setattr(lazy_lexer, "REGION_MIN", 1 << 40)
    monkeypatch.setattr(nfa, "WIDE_MIN_COUNT", 1 << 40)  # wide items too: unrolled
    eager = Compiler(tiny_vocab, cache_bytes=0).compile(schema(12))
    monkeypatch.undo()
    assert eager.lazy is None
    rng = random.Random(12)
    for _ in range(4):
        _walk(eager, lazy, rng, 60)
    text = '{"k0":"' + "x" * 100 + '","k11":"' + "y" * 111 + '"}'
    me, ml = Matcher(eager), Matcher(lazy)
    assert me.accept_bytes(text) and ml.accept_bytes(text)
    assert me.is_accepting() and ml.is_accepting()
    assert not Matcher(lazy).accept_bytes('{"k0":"' + "x" * 101)


def test_a_lexer_past_the_eager_budget_is_built_lazily_from_the_same_nfa(
    tiny_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eager subset construction that outgrows ``EAGER_MEMBERS`` hands its union NFA to a
    lazy lexer (no counted region in it): the masks are the eager build's, token by token."""
    grammar = Grammar.from_json_schema(
        {
            "type": "object",
            "properties": {f"key_{i}": {"enum": [f"v{i}_{j}" for j in range(6)]} for i in range(8)},
            "additionalProperties": {"type": "integer"},
        }
    )
    eager = Compiler(tiny_vocab, cache_bytes=0).compile(grammar)
    assert eager.lazy is None and eager.lexer.num_states > 64
    monkeypatch.setattr(lazy_lexer, "EAGER_MEMBERS", 64)
    lazy = Compiler(tiny_vocab, cache_bytes=0).compile(grammar)
    assert lazy.lazy is not None and not lazy.lazy.regions
    rng = random.Random(7)
    for _ in range(6):
        _walk(eager, lazy, rng, 40)
