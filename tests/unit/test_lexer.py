"""Unit tests of constrain.automata.lexer: the combined lexer DFA of several terminals."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import reference

import constrain.automata.lexer as lexer_module
from constrain.automata.dfa import compile_regex
from constrain.automata.lexer import LexerDfa, build_lexer
from constrain.errors import CompileLimitError, GrammarError
from constrain.frontends.regex import parse_regex
from constrain.ir import NOTHING, Literal

TERMINALS = {
    "IF": "if",
    "NAME": "[a-z_][a-z0-9_]*",
    "NUMBER": r"\d+(?:\.\d+)?",
    "WS": r"\s+",
    "STRING": r'"(?:[^"\\]|\\.)*"',
    "ARROW": "->",
    "MINUS": "-",
    "ABC": "(?:ab)*c",
}


def lexer_of(terminals: dict[str, str]) -> LexerDfa:
    return build_lexer([(name, parse_regex(p)) for name, p in terminals.items()])


def test_bits_example() -> None:
    lx = lexer_of(TERMINALS)
    names = lx.names

    def acc(text: str) -> set[str]:
        return {names[t] for t in lx.terminals_accepting(lx.walk(0, text.encode()))}

    def alive(text: str) -> set[str]:
        return {names[t] for t in lx.terminals_alive(lx.walk(0, text.encode()))}

    assert acc("if") == {"IF", "NAME"} and alive("if") == {"IF", "NAME"}
    assert acc("i") == {"NAME"} and alive("i") == {"IF", "NAME"}
    assert acc("iff") == {"NAME"} and alive("iff") == {"NAME"}
    assert acc("12.5") == {"NUMBER"} and acc("12.") == set() and alive("12.") == {"NUMBER"}
    assert acc("-") == {"MINUS"} and alive("-") == {"MINUS", "ARROW"} and acc("->") == {"ARROW"}
    assert acc(" \u2028\t") == {"WS"} and acc('"a\\"b"') == {"STRING"}
    assert lx.walk(0, b"1a") == -1 and lx.terminals_accepting(-1) == []
    assert lx.terminals_alive(-1) == [] and lx.step(-1, 0) == -1
    assert set(lx.terminals_alive(0)) == set(range(len(names)))
    assert lx.terminals_accepting(0) == []
    assert lx.num_terminals == len(TERMINALS) and names == tuple(TERMINALS)


def test_layout() -> None:
    lx = lexer_of(TERMINALS)
    assert lx.byte_class.dtype == np.uint8 and lx.byte_class.shape == (256,)
    assert lx.trans.dtype == np.int32 and lx.trans.shape == (lx.num_states, lx.num_classes)
    assert lx.accept_bits.dtype == np.uint64 and lx.accept_bits.shape == (lx.num_states, 1)
    assert lx.alive_bits.dtype == np.uint64 and lx.alive_bits.shape == (lx.num_states, 1)
    assert (lx.alive_bits[1:] != 0).all(axis=1).all()  # no dead state
    assert not ((lx.accept_bits & ~lx.alive_bits) != 0).any()  # accepting implies alive
    assert int(lx.byte_class.max()) < lx.num_classes


def test_state_zero_never_reentered() -> None:
    # (ab)*c: after "ab" the future is the start's future, so plain minimisation would merge.
    lx = build_lexer([("ABC", parse_regex("(?:ab)*c"))])
    assert not (lx.trans == 0).any()
    assert lx.walk(0, b"ab") not in (0, -1) and lx.walk(0, b"abab") == lx.walk(0, b"ab")
    assert lx.num_states == compile_regex(parse_regex("(?:ab)*c")).num_states + 1
    for terminals in (TERMINALS, {"A": "a+"}, {"X": "(?:xy)+", "Y": "y(?:xy)*"}):
        assert not (lexer_of(terminals).trans == 0).any()


def test_minimal_for_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``MINIMIZE_MAX_CELLS`` (raised here) the lexer is the minimal DFA."""
    monkeypatch.setattr(lexer_module, "MINIMIZE_MAX_CELLS", 1 << 30)
    lx = lexer_of(TERMINALS)
    signature = [
        (q == 0, *lx.accept_bits[q].tolist(), *lx.alive_bits[q].tolist())
        for q in range(lx.num_states)
    ]
    ids: dict[tuple[object, ...], int] = {}
    init = [ids.setdefault(sig, len(ids)) for sig in signature]
    blocks = reference.naive_minimize(lx.trans.tolist(), init)
    assert len(set(blocks)) == lx.num_states


@pytest.mark.parametrize("minimised", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_bits_against_per_terminal_automata(
    seed: int, minimised: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minimised or not (past ``MINIMIZE_MAX_CELLS``), the same bits."""
    rng = random.Random(seed)
    monkeypatch.setattr(lexer_module, "MINIMIZE_MAX_CELLS", 1 << 30)
    small = lexer_of(TERMINALS)
    if not minimised:
        monkeypatch.setattr(lexer_module, "MINIMIZE_MAX_CELLS", 0)
    lx = lexer_of(TERMINALS)
    assert lx.num_states > small.num_states if not minimised else lx.num_states == small.num_states
    assert not (lx.trans == 0).any()  # state 0 is never re-entered
    dfas = [compile_regex(parse_regex(p)) for p in TERMINALS.values()]
    alphabet = 'ifabc_xyz019.-> \n"\\é'
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        state = lx.walk(0, text.encode())
        for t, (pattern, dfa) in enumerate(zip(TERMINALS.values(), dfas, strict=True)):
            single = dfa.walk(0, text.encode())
            assert (t in lx.terminals_alive(state)) == (single >= 0), (text, t)
            expected = re.fullmatch(pattern, text) is not None
            assert (t in lx.terminals_accepting(state)) == expected, (text, t)
        assert (state >= 0) == any(dfa.walk(0, text.encode()) >= 0 for dfa in dfas)


def test_many_terminals_use_several_words() -> None:
    words = [f"w{i}x" for i in range(70)]
    lx = build_lexer([(w.upper(), Literal(w)) for w in words] + [("ANY", parse_regex("w[0-9]+x"))])
    assert lx.accept_bits.shape[1] == 2 and lx.num_terminals == 71
    assert lx.terminals_accepting(lx.walk(0, b"w65x")) == [65, 70]
    assert lx.terminals_accepting(lx.walk(0, b"w99x")) == [70]
    assert lx.terminals_alive(lx.walk(0, b"w6")) == [6, *range(60, 70), 70]


def test_terminal_errors() -> None:
    for regex, needle in [
        ("a*", "empty string"),
        ("(?:a|)", "empty string"),
        ("(?!)", "no string"),
    ]:
        with pytest.raises(GrammarError, match=needle) as info:
            build_lexer([("OK", parse_regex("x")), ("BAD_ONE", parse_regex(regex))])
        assert "'BAD_ONE'" in str(info.value)
    with pytest.raises(GrammarError, match="no string"):
        build_lexer([("SURROGATE", Literal("\ud800"))])
    with pytest.raises(GrammarError, match="'N'"):
        build_lexer([("N", NOTHING)])


def test_limits_and_degenerate_inputs() -> None:
    with pytest.raises(CompileLimitError) as info:
        build_lexer([("A", parse_regex("[ab]{12}")), ("B", parse_regex("a+"))], max_states=10)
    assert info.value.limit_name == "max_lexer_states" and info.value.limit == 10
    with pytest.raises(CompileLimitError, match="max_lexer_states"):
        build_lexer([("A", parse_regex("a{1,10000000}"))])
    empty = build_lexer([])
    assert empty.num_states == 1 and empty.walk(0, b"a") == -1 and empty.num_terminals == 0
    with pytest.raises(ValueError):
        build_lexer([("A", Literal("a"))], max_states=0)


def _canonical(labels: list[int]) -> list[int]:
    """Relabel a partition by first appearance (equal lists iff equal partitions)."""
    ids: dict[int, int] = {}
    return [ids.setdefault(x, len(ids)) for x in labels]


def _outputs(lx: LexerDfa, states: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(lx.accept_bits[s].tolist()) + tuple(lx.alive_bits[s].tolist()) for s in states]


COUNTED = {
    "STR": r'"[a-c]{0,40}"',
    "NUM": "[0-9]{2,30}",
    "WORD": "ab(?:cd){1,12}e?",
    "MINUS": "-",
}


@pytest.mark.parametrize("terminals", [TERMINALS, COUNTED], ids=["plain", "counted"])
@pytest.mark.parametrize("depth", [0, 1, 2, 5, 17, 1000])
def test_bounded_classes_equal_moore_rounds(
    terminals: dict[str, str], depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From every start state: the states reached and their classes are those of ``depth``
    rounds of Moore's refinement over the reachable part (the oracle)."""
    monkeypatch.setattr(lexer_module, "MINIMIZE_MAX_CELLS", 1 << 30)  # minimal: see the end
    lx = lexer_of(terminals)
    for start in sorted({0, *range(1, lx.num_states, max(lx.num_states // 7, 1))}):
        found = lx.bounded_classes(depth, [start])
        assert found is not None
        states, classes = found
        index = {int(s): i for i, s in enumerate(states)}
        assert int(states[0]) == start and len(index) == len(states)
        if start == 0:
            assert sorted(index) == list(range(lx.num_states))
        local = [
            [index[int(t)] if t >= 0 else -1 for t in lx.trans[s].tolist()] for s in states
        ]  # closed under transitions: every live target is in the set
        want = reference.naive_bounded_classes(local, _outputs(lx, states), depth)
        assert _canonical(classes.tolist()) == _canonical(want), (start, depth)
        assert int(classes.max()) == len(set(want)) - 1  # ids are 0 .. k - 1
    if depth == 1000:  # the lexer is minimal: every state a class of its own
        assert len(set(lx.bounded_classes(depth)[1].tolist())) == lx.num_states  # type: ignore[index]


def test_bounded_classes_merge_counts_far_from_their_bound() -> None:
    """``"[a-c]{0,40}"``: after k characters the states with more than ``depth`` characters to
    go agree on every string of ``depth`` bytes, and exactly those share a class."""
    lx = lexer_of({"STR": r'"[a-c]{0,40}"'})
    depth = 6
    states, classes = lx.bounded_classes(depth)  # type: ignore[misc]
    cls = dict(zip(states.tolist(), classes.tolist(), strict=True))
    counts = [lx.walk(0, b'"' + b"a" * k) for k in range(41)]
    shared = {cls[s] for s in counts[: 41 - depth]}
    assert len(shared) == 1
    assert len({cls[s] for s in counts[41 - depth :]} | shared) == depth + 1
    # and the classes are the definition's, pair by pair
    outs = _outputs(lx, np.arange(lx.num_states))
    rows = lx.trans.tolist()
    for p in counts:
        for q in counts:
            same = reference.naive_alike_within(rows, outs, p, q, depth)
            assert (cls[p] == cls[q]) == same, (p, q)


def test_bounded_classes_random_dfas_against_the_definition() -> None:
    """Random small DFAs (any shape, dead transitions included): a class holds exactly the
    states alike on every string of ``depth`` classes."""
    from constrain.kernels.numba_dfa import bounded_classes_kernel, closure_csr_kernel

    rng = np.random.default_rng(7)
    for _ in range(30):
        n, c = int(rng.integers(1, 14)), int(rng.integers(1, 4))
        trans = rng.integers(-1, n, size=(n, c)).astype(np.int32)
        outputs = rng.integers(0, 2, size=n).tolist()
        states, lptr, lcls, ldst = closure_csr_kernel(
            trans, np.arange(n, dtype=np.int32), np.full(n, -1, np.int32), n
        )
        assert states.tolist() == list(range(n))
        for depth in (0, 1, 2, 3):
            ids: dict[int, int] = {}
            cls = np.array([ids.setdefault(o, len(ids)) for o in outputs], dtype=np.int32)
            k = bounded_classes_kernel(lptr, lcls, ldst, cls, len(ids), depth)
            assert k == len(set(cls.tolist()))
            rows = trans.tolist()
            for p in range(n):
                for q in range(n):
                    same = reference.naive_alike_within(rows, outputs, p, q, depth)
                    assert (cls[p] == cls[q]) == same, (p, q, depth)


def test_bounded_classes_stop_past_max_states() -> None:
    lx = lexer_of(COUNTED)
    assert lx.bounded_classes(5, [0], max_states=lx.num_states - 1) is None
    assert lx.bounded_classes(5, [0], max_states=lx.num_states) is not None
