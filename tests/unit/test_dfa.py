"""Unit tests of constrain.automata.{dfa,nfa,subsets} and their kernels (numba_subsets,
numba_minimize, numba_dfa)."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest
import reference

from constrain.automata.dfa import compile_regex
from constrain.automata.nfa import NfaBuilder
from constrain.automata.subsets import (
    OverBudget,
    compress_classes,
    determinize,
    minimize,
    nfa_live,
)
from constrain.automata.utf8 import utf8_sequences
from constrain.errors import CompileLimitError
from constrain.frontends.regex import parse_regex
from constrain.ir import EMPTY, NOTHING, Alt, CharSet, Concat, Literal, Regex, Repeat
from constrain.kernels.numba_minimize import merge_classes_kernel, minimize_kernel
from constrain.kernels.numba_subsets import determinize_kernel, nfa_csr_kernel, nfa_live_kernel


def dfa_of(pattern: str) -> object:
    return compile_regex(parse_regex(pattern))


def as_lists(dfa: object) -> tuple[list[int], list[list[int]], list[bool]]:
    return (dfa.byte_class.tolist(), dfa.trans.tolist(), dfa.accept.tolist())  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# UTF-8 sequences


def test_utf8_sequences_known() -> None:
    assert utf8_sequences(0, 0x7F) == [((0, 0x7F),)]
    assert utf8_sequences(0, 0x7FF) == [((0, 0x7F),), ((0xC2, 0xDF), (0x80, 0xBF))]
    assert utf8_sequences(0xD7FF, 0xE000) == [
        ((0xED, 0xED), (0x9F, 0x9F), (0xBF, 0xBF)),
        ((0xEE, 0xEE), (0x80, 0x80), (0x80, 0x80)),
    ]
    assert utf8_sequences(0xD800, 0xDFFF) == []
    assert utf8_sequences(0x10FFFF, 0x10FFFF) == [((0xF4, 0xF4), (0x8F, 0x8F), (0xBF, 0xBF),
                                                   (0xBF, 0xBF))]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_utf8_sequences_cover_exactly(seed: int) -> None:
    rng = random.Random(seed)
    lo = rng.choice([0, 0x70, 0x7F0, 0xD700, 0xFFF0, 0x10000, rng.randrange(0x110000)])
    hi = min(0x10FFFF, lo + rng.choice([0, 1, 50, 3000, 70000]))
    seqs = utf8_sequences(lo, hi)

    def covered(data: bytes) -> int:
        return sum(
            len(seq) == len(data) and all(a <= b <= z for (a, z), b in zip(seq, data, strict=True))
            for seq in seqs
        )

    probes = {lo, hi, lo - 1, hi + 1, *(rng.randrange(0x110000) for _ in range(300))}
    probes |= {rng.randrange(lo, hi + 1) for _ in range(300)}
    for cp in probes:
        if 0 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
            expected = 1 if lo <= cp <= hi else 0
            assert covered(chr(cp).encode()) == expected, hex(cp)


# --------------------------------------------------------------------------------------------
# Compiled DFAs


def test_minimal_textbook_example() -> None:
    dfa = dfa_of("(a|b)*abb")
    assert dfa.num_states == 4  # type: ignore[attr-defined]
    assert dfa.matches(b"abb") and dfa.matches(b"babaabb")  # type: ignore[attr-defined]
    assert not dfa.matches(b"ab") and not dfa.matches(b"abba")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("pattern", "states"),
    [("a*", 1), ("[ab]*", 1), ("", 1), ("a", 2), ("a+", 2), ("a{3}", 4), ("a{1,3}", 4),
     ("(?:ab|cd)*", 3), ("[0-9]{3}-[0-9]{4}", 9), ("(?:a|b|c)+d?", 3), ("é", 3)],
)  # fmt: skip
def test_state_counts(pattern: str, states: int) -> None:
    assert dfa_of(pattern).num_states == states  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "pattern", [r"\d{3}-\d{4}", r"[\w.+-]+@\w+\.\w{2,}", r"(a|ab)(c|bcd)(d*)", r"[^\x00-\x7f]+é?"]
)
def test_result_is_minimal_and_trim(pattern: str) -> None:
    dfa = dfa_of(pattern)
    trans = dfa.trans.tolist()  # type: ignore[attr-defined]
    blocks = reference.naive_minimize(trans, [int(a) for a in dfa.accept])  # type: ignore[attr-defined]
    assert len(set(blocks)) == len(trans)  # nothing left to merge
    seen, todo = {0}, [0]
    while todo:  # every state reachable
        for t in trans[todo.pop()]:
            if t >= 0 and t not in seen:
                seen.add(t)
                todo.append(t)
    assert seen == set(range(len(trans)))
    assert dfa.live.all()  # type: ignore[attr-defined]
    columns = {tuple(col) for col in dfa.trans.T.tolist()}  # type: ignore[attr-defined]
    assert len(columns) == dfa.num_classes  # type: ignore[attr-defined]


def test_arrays_layout() -> None:
    dfa = dfa_of("[a-c]+x")
    assert dfa.byte_class.dtype == np.uint8 and dfa.byte_class.shape == (256,)  # type: ignore[attr-defined]
    assert dfa.trans.dtype == np.int32 and dfa.trans.ndim == 2  # type: ignore[attr-defined]
    assert dfa.accept.dtype == np.bool_ and dfa.live.dtype == np.bool_  # type: ignore[attr-defined]
    assert int(dfa.byte_class.max()) < dfa.num_classes  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        dfa.trans[0, 0] = 5  # type: ignore[attr-defined]  # read-only


def test_step_walk_and_multibyte() -> None:
    dfa = dfa_of("é+")
    e1, e2 = "é".encode()
    s = dfa.step(0, e1)  # type: ignore[attr-defined]
    assert s > 0 and not dfa.accept[s]  # type: ignore[attr-defined]  # inside a character
    s = dfa.step(s, e2)  # type: ignore[attr-defined]
    assert dfa.accept[s]  # type: ignore[attr-defined]
    assert dfa.walk(0, "éé".encode()) == s  # type: ignore[attr-defined]
    assert dfa.walk(0, b"e") == -1 and dfa.step(-1, 0) == -1 and dfa.walk(-1, b"") == -1  # type: ignore[attr-defined]
    assert not dfa.matches("é".encode()[:1])  # type: ignore[attr-defined]


def test_empty_language_and_empty_string() -> None:
    for node in (NOTHING, CharSet(()), CharSet(((0xD800, 0xDFFF),)), Literal("\ud800"),
                 Concat((Literal("a"), NOTHING))):  # fmt: skip
        dfa = compile_regex(node)
        assert dfa.is_empty_language() and not dfa.matches_empty() and dfa.num_states == 1
        assert not dfa.matches(b"") and not dfa.matches(b"a")
    dfa = compile_regex(EMPTY)
    assert dfa.matches_empty() and not dfa.is_empty_language() and not dfa.matches(b"a")
    assert compile_regex(Alt((NOTHING, Literal("a")))).matches(b"a")


def test_invalid_bytes_never_match() -> None:
    dfa = dfa_of(".*")
    assert dfa.matches("aé😀\u2028".encode())  # type: ignore[attr-defined]
    for bad in (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"):
        assert not dfa.matches(bad), bad  # type: ignore[attr-defined]


def test_ir_equivalences() -> None:
    pairs: list[tuple[Regex, Regex]] = [
        (parse_regex("a(b|c)"), parse_regex("ab|ac")),
        (Repeat(Repeat(Literal("a"), 0, None), 1, 100000), Repeat(Literal("a"), 0, None)),
        (Repeat(Repeat(Literal("a"), 1, None), 2, 7), Repeat(Literal("a"), 2, None)),
        (Repeat(Alt((Literal(""), Literal("ab"))), 3, None), Repeat(Literal("ab"), 0, None)),
        (Repeat(Literal("ab"), 1, 1), Literal("ab")),
        (
            Alt((Literal("ab"), Literal("a"), Literal("abc"), Literal(""))),
            parse_regex("(?:a(?:bc?)?)?"),
        ),
    ]
    for left, right in pairs:
        assert reference.naive_dfa_equivalent(
            as_lists(compile_regex(left)), as_lists(compile_regex(right))
        )
    not_equal = (parse_regex("(?:ab|a)c"), parse_regex("abc"))
    assert not reference.naive_dfa_equivalent(*(as_lists(compile_regex(n)) for n in not_equal))
    # a{3,2}: no count is in range, the empty language (a schema's minLength above maxLength)
    empty = as_lists(compile_regex(Repeat(Literal("a"), 3, 2)))
    assert reference.naive_dfa_equivalent(empty, as_lists(compile_regex(Alt(()))))
    with pytest.raises(ValueError):
        compile_regex(Literal("a"), max_states=0)


# --------------------------------------------------------------------------------------------
# Limits: fail fast, never hang


# Without the JIT (the coverage pass) the same checks run at a smaller scale.
LIMIT = 1000 if os.environ.get("NUMBA_DISABLE_JIT") == "1" else 100_000


@pytest.mark.parametrize(
    "pattern",
    [
        f"a{{1,{LIMIT}}}",
        f"\\w{{1,{LIMIT // 20}}}",
        "a{1000000000}",
        f"(a|b)*a(a|b){{{LIMIT.bit_length()}}}",
    ],
)
def test_limits_fail_fast(pattern: str) -> None:
    start = time.perf_counter()
    with pytest.raises(CompileLimitError) as info:
        compile_regex(parse_regex(pattern), max_states=LIMIT)
    assert info.value.limit_name == "max_dfa_states" and info.value.limit == LIMIT
    assert info.value.value > LIMIT
    assert time.perf_counter() - start < 60  # generous: a guard against hangs, not a benchmark


def test_limits() -> None:
    with pytest.raises(CompileLimitError) as info:
        compile_regex(parse_regex("[ab]{10}"), max_states=5)
    assert info.value.value == 6
    assert compile_regex(parse_regex("[ab]{10}"), max_states=11).num_states == 11
    assert dfa_of(r"(?:a*){1,100000}b").num_states == 2  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Kernels against tests/reference.py


def _random_nfa(
    rng: random.Random, wide: bool = False
) -> tuple[int, list[tuple[int, int, int, int]], list[tuple[int, int]], list[int]]:
    # wide: subsets with more live byte edges than determinize_kernel splits by their bounds
    # (it then sorts the edges' targets by class instead)
    n = rng.randint(20, 30) if wide else rng.randint(2, 9)
    byte_edges = [
        (rng.randrange(n), lo, lo + rng.choice([0, 0, 1, 2]), rng.randrange(n))
        for lo in (
            rng.randrange(3) for _ in range(rng.randint(80, 160) if wide else rng.randint(1, 14))
        )
    ]
    eps = [
        (rng.randrange(n), rng.randrange(n))
        for _ in range(rng.randint(10, 30) if wide else rng.randint(0, 5))
    ]
    finals = rng.sample(range(n), rng.randint(1, 2))
    return n, byte_edges, eps, finals


def _nfa_from(
    n: int,
    byte_edges: list[tuple[int, int, int, int]],
    eps: list[tuple[int, int]],
    finals: list[int],
) -> object:
    builder = NfaBuilder(10**6, "max_dfa_states", 10**6)
    builder.num_states = n
    for s, lo, hi, d in byte_edges:
        builder._edges.extend((s, lo, hi, d))
    for s, d in eps:
        builder.add_eps(s, d)
    return builder.finish(0, finals)


@pytest.mark.parametrize(
    ("seed", "wide"), [(seed, False) for seed in range(40)] + [(seed, True) for seed in range(10)]
)
def test_kernels_match_reference(seed: int, wide: bool) -> None:
    rng = random.Random(seed)
    n, byte_edges, eps, finals = _random_nfa(rng, wide)
    nfa = _nfa_from(n, byte_edges, eps, finals)
    live = np.zeros(n, dtype=np.bool_)
    all_edges = [(s, d) for s, _, _, d in byte_edges] + eps
    src = np.array([s for s, _ in all_edges], np.int32)
    dst = np.array([d for _, d in all_edges], np.int32)
    nfa_live_kernel(src, dst, np.array(sorted(set(finals)), np.int32), live)
    assert live.tolist() == reference.naive_nfa_live(n, all_edges, finals)
    assert nfa_live(nfa).tolist() == live.tolist()  # type: ignore[arg-type]

    subsets = determinize(nfa, max_states=1 << 16, limit_name="max_dfa_states")  # type: ignore[arg-type]
    bc = subsets.byte_class
    class_edges = [(s, int(bc[lo]), int(bc[hi]), d) for s, lo, hi, d in byte_edges]
    keep = [live[q] and (any(e[0] == q for e in byte_edges) or q in finals) for q in range(n)]
    results = {}
    for keep_start in (False, True):
        results[keep_start] = reference.naive_determinize(
            n, class_edges, eps, keep, live.tolist(), 0, int(bc[255]) + 1, keep_start
        )
        got = determinize(nfa, max_states=1 << 16, limit_name="x", keep_start=keep_start)  # type: ignore[arg-type]
        assert got.trans.tolist() == results[keep_start][0]
        pool, ptr = got.pool.tolist(), got.set_ptr.tolist()
        sets = [tuple(pool[ptr[i] : ptr[i + 1]]) for i in range(len(ptr) - 1)]
        assert sets == results[keep_start][1]
        if keep_start and all(e[-1] != 0 for e in byte_edges + eps):
            assert not (got.trans == 0).any()
    trans, sets = results[False]

    if trans:
        accept = np.array([any(q in finals for q in s) for s in sets], dtype=np.int32)
        trans_arr = np.array(trans, dtype=np.int32)
        block = np.empty(len(trans), np.int32)
        count = minimize_kernel(trans_arr, accept, 2, block)
        expected = reference.naive_minimize(trans, accept.tolist())
        assert count == len(set(expected))
        assert len(set(zip(block.tolist(), expected, strict=True))) == count  # the same partition
        quotient, reps = minimize(trans_arr, accept, 2)
        assert quotient.shape[0] == count and reps[0] == 0

    for _ in range(30):
        data = bytes(rng.randrange(4) for _ in range(rng.randint(0, 6)))
        state = 0 if trans else -1
        for b in data:
            state = trans[state][int(bc[b])] if state >= 0 else -1
        got_match = state >= 0 and any(q in finals for q in sets[state])
        assert got_match == reference.naive_nfa_accepts(n, byte_edges, eps, 0, finals, data), data


@pytest.mark.parametrize("seed", range(20))
def test_nfa_csr_kernel_matches_a_direct_construction(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    edges = []
    for _ in range(rng.randint(0, 14)):
        lo = rng.choice([0, 1, 9, 97, 128, 200, 255, rng.randrange(256)])
        edges.append((rng.randrange(n), lo, rng.randint(lo, 255), rng.randrange(n)))
    eps = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 6))]
    tag = np.array([rng.choice([-1, -1, 0, 1]) for _ in range(n)], np.int32)
    live = np.array([rng.random() < 0.8 for _ in range(n)], np.bool_)
    col = list(zip(*edges, strict=True)) if edges else [(), (), (), ()]
    arrays = [np.array(c, np.int32) for c in col]
    eps_cols = list(zip(*eps, strict=True)) if eps else [(), ()]
    bc, nc, bptr, blo, bhi, bdst, eptr, edst, keep = nfa_csr_kernel(
        n, *arrays, *[np.array(c, np.int32) for c in eps_cols], tag, live
    )
    # classes: bytes b and b + 1 share one exactly when no edge starts at b + 1 or ends at b
    cuts = {lo for _, lo, _, _ in edges} | {hi + 1 for _, _, hi, _ in edges}
    expected_class, c = [], 0
    for b in range(256):
        if b > 0 and b in cuts:
            c += 1
        expected_class.append(c)
    assert bc.tolist() == expected_class and nc == expected_class[255] + 1
    for q in range(n):  # each state's edges in their original order
        mine = [(bc[lo], bc[hi], d) for s, lo, hi, d in edges if s == q]
        got = list(
            zip(
                blo[bptr[q] : bptr[q + 1]],
                bhi[bptr[q] : bptr[q + 1]],
                bdst[bptr[q] : bptr[q + 1]],
                strict=True,
            )
        )
        assert [tuple(map(int, g)) for g in got] == [tuple(map(int, m)) for m in mine]
        assert edst[eptr[q] : eptr[q + 1]].tolist() == [d for s, d in eps if s == q]
        assert keep[q] == (live[q] and (bool(mine) or tag[q] >= 0))


def test_determinize_kernel_limit_status() -> None:
    nfa = _nfa_from(3, [(0, 0, 0, 1), (1, 0, 0, 2)], [], [2])
    bptr = np.array([0, 1, 2, 2], np.int64)
    out = determinize_kernel(
        bptr, np.zeros(2, np.int32), np.zeros(2, np.int32), np.array([1, 2], np.int32),
        np.zeros(4, np.int64), np.zeros(0, np.int32), np.ones(3, np.bool_), np.ones(3, np.bool_),
        0, 1, 2, False, 1 << 62,
    )  # fmt: skip
    assert out[0] == 1 and out[1] == 3
    assert determinize(nfa, max_states=3, limit_name="x").trans.shape[0] == 3  # type: ignore[arg-type]
    # the members budget: three subsets of one member each
    assert determinize(nfa, max_states=9, limit_name="x", max_members=3).trans.shape[0] == 3  # type: ignore[arg-type]
    with pytest.raises(OverBudget):
        determinize(nfa, max_states=9, limit_name="x", max_members=2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "pattern",
    [
        r"[a-cé]{0,20}",
        r"(?:ab|c|\\u[0-9a-f]{2}){3,18}x",
        r"(?:x[yz]*){16}",
        r"(?:[0-9]|é€){2,17}-?",
        r"(?:(?:a|bc)?){16,20}",
    ],
)
def test_counted_repetition_built_by_replication(pattern: str) -> None:
    """Repeats of 16 or more copies are written by replicating one copy's fragment
    (NfaBuilder._chain); the language is the one ``re.fullmatch`` gives."""
    import re

    dfa = dfa_of(pattern)
    rng = random.Random(pattern)
    alphabet = ["a", "b", "c", "é", "x", "y", "z", "0", "7", "-", "€", "é€", "\\u", "f", "ab"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        expected = re.fullmatch(pattern, text) is not None
        assert dfa.matches(text.encode()) == expected, (pattern, text)  # type: ignore[attr-defined]
    for k in range(25):  # exact counts around the bounds
        for unit in ("a", "ab", "c", "é€", "xy"):
            text = unit * k
            expected = re.fullmatch(pattern, text) is not None
            assert dfa.matches(text.encode()) == expected, (pattern, text)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Fragments shared across builds


SHARED_PATTERNS = [
    r"(?:ab|c|\\u[0-9a-f]{2})*x",
    r"[ \t]{0,4}:[ \t]{0,4}(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?)[ \t]{0,4}",
    r"\"(?:[^\"\\]|\\[\"\\/bfnrt]|\\u[0-9a-fA-F]{4}){2,40}\"",
    r"(?:(?:a|bc)?){3,5}(?:é|€+)*",
    r"(?:x[yz]*){16}(?:q|rs)?",
]


@pytest.mark.parametrize("pattern", SHARED_PATTERNS)
def test_shared_fragments_build_the_same_automaton(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeats and alternations placed from the process-wide copies (cold and warm cache) give
    the same minimal DFA as building every piece in place."""
    import constrain.automata.nfa as nfa_module

    monkeypatch.setattr(nfa_module, "_SHARED_TEMPLATES", {})
    cold = as_lists(dfa_of(pattern))
    assert nfa_module._SHARED_TEMPLATES, "no piece was shared"
    warm = as_lists(dfa_of(pattern))
    monkeypatch.setattr(nfa_module, "_SHARED_MAX_STATES", 0)
    monkeypatch.setattr(nfa_module, "_SHARED_TEMPLATES", {})
    in_place = as_lists(dfa_of(pattern))
    assert not nfa_module._SHARED_TEMPLATES
    assert cold == warm == in_place


def test_shared_fragments_keep_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece cached under a generous limit is still counted against a smaller one, and the
    cache stays bounded."""
    import constrain.automata.nfa as nfa_module

    monkeypatch.setattr(nfa_module, "_SHARED_TEMPLATES", {})
    monkeypatch.setattr(nfa_module, "_SHARED_CACHE_SIZE", 3)
    regex = parse_regex(r"(?:[a-f]|\\u[0-9]{4}){0,20}z")
    assert compile_regex(regex).matches(b"ab\\u0123z")
    with pytest.raises(CompileLimitError):
        compile_regex(regex, max_states=3)
    # the cached copy is reused under the large limit, and only keyed copies are kept
    assert compile_regex(regex).matches(b"\\u9999fz")
    for k in range(10):
        compile_regex(parse_regex(f"(?:a|b{k + 1}c)*"))
    assert len(nfa_module._SHARED_TEMPLATES) <= 3


@pytest.mark.parametrize("seed", range(8))
def test_row_ids_kernel_numbers_distinct_rows(seed: int) -> None:
    """row_ids_kernel (the lexer's initial blocks) against a dictionary of row tuples."""
    from constrain.kernels.numba_dfa import row_ids_kernel

    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 4))
    pool = rng.integers(0, 2**63, size=(int(rng.integers(1, 6)), width), dtype=np.uint64)
    rows = pool[rng.integers(0, pool.shape[0], size=int(rng.integers(1, 200)))]
    ids = np.empty(rows.shape[0], dtype=np.int32)
    count = row_ids_kernel(rows, ids)
    first: dict[tuple[int, ...], int] = {}
    expected = [first.setdefault(tuple(r), len(first)) for r in rows.tolist()]
    assert ids.tolist() == expected and count == len(first)


@pytest.mark.parametrize("seed", range(6))
def test_compress_classes_equals_naive(seed: int) -> None:
    rng = np.random.default_rng(seed)
    states, distinct = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    base = rng.integers(-1, states, size=(states, distinct)).astype(np.int32)
    trans = base[:, rng.integers(0, distinct, size=int(rng.integers(1, 12)))]  # repeated columns
    byte_class = rng.integers(0, trans.shape[1], size=256)
    got_class, got_trans = compress_classes(trans, byte_class)
    want_class, want_trans = reference.naive_compress_classes(trans.tolist(), byte_class.tolist())
    assert got_class.tolist() == want_class
    assert got_trans.tolist() == want_trans
    assert got_trans.dtype == np.int32 and got_trans.flags.c_contiguous


def test_merge_classes_kernel_is_exact_under_hash_collisions() -> None:
    trans = np.array([[0, 1, 0, 2], [1, 1, 1, 1], [2, 0, 2, 0]], dtype=np.int32)
    new_class = np.empty(4, np.int32)
    keep = np.empty(4, np.int64)
    # every column hashed alike: the grouping check fails and columns are compared in full
    count = merge_classes_kernel(trans, np.zeros(4, np.int64), new_class, keep)
    assert count == 3
    assert new_class.tolist() == [0, 1, 0, 2]
    assert keep[:count].tolist() == [0, 1, 3]


def test_literal_alternatives_are_the_minimal_acyclic_automaton() -> None:
    # literal_trie (numpy trie + acyclic_classes_kernel) against the naive right-language count
    # and the language read back from its edges, on random sets with shared prefixes/suffixes
    # (a few strings: the plain trie, its language only)
    from constrain.automata.nfa_parts import _SMALL_ALT, literal_trie

    rng = random.Random(0)
    for trial in range(300):
        texts = [
            bytes(rng.choice(b"abcd") for _ in range(rng.randint(0, 7)))
            for _ in range(rng.randint(1, 15) if trial % 3 == 0 else rng.randint(80, 200))
        ]
        edges, ends, count = literal_trie(texts, 3, 10)
        if len(set(texts)) > _SMALL_ALT:
            assert count == reference.naive_acyclic_states(texts), texts
        out: dict[int, list[tuple[int, int]]] = {}
        for src, lo, hi, dst in edges.tolist():
            assert lo == hi and 10 <= dst < 10 + count
            out.setdefault(src, []).append((lo, dst))
        assert all(len({b for b, _ in v}) == len(v) for v in out.values())  # deterministic
        language: set[bytes] = set()
        stack: list[tuple[int, bytes]] = [(3, b"")]
        while stack:  # acyclic: every path ends
            state, text = stack.pop()
            if state in set(ends.tolist()):
                language.add(text)
            stack.extend((dst, text + bytes([b])) for b, dst in out.get(state, []))
        assert language == set(texts)


def test_a_large_enum_shares_suffixes() -> None:
    # 65,536 codes ending in one suffix: the lexer stays far below one state per byte
    values = Alt(tuple(Literal(f"code-{i:05x}-end") for i in range(65_536)))
    dfa = compile_regex(values)
    classes, trans, accept = as_lists(dfa)
    assert len(trans) < 100_000

    def accepts(text: bytes) -> bool:
        state = 0
        for byte in text:
            state = trans[state][classes[byte]]
            if state < 0:
                return False
        return accept[state]

    assert accepts(b"code-0abcd-end") and accepts(b"code-00000-end")
    assert not accepts(b"code-10000-end") and not accepts(b"code-0abcd-en")
