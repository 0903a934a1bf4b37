"""Diffusion decoding: token-level DFA, DINGO, grammar infilling and LAVE against brute force.

- ``TokenDfa``: walks agree with the language's prefix set, enumerated with ``re.fullmatch``, and
  with the ``Matcher`` for inlined Lark / JSON Schema grammars; the trie-walk row kernel agrees
  with byte-by-byte walks of every token.
- ``dingo``: its value equals the brute-force maximum over every assignment of the block
  (tokens and masks) whose masks can be substituted into a valid prefix (hypothesis, small
  vocabulary and blocks); its assignment is valid and has that value. The Viterbi kernel is
  compared with a numpy oracle (this file also runs under ``NUMBA_DISABLE_JIT=1``).
- ``InfillChecker``: agrees with exhaustive enumeration of gap fillings (fixed-length gaps, byte
  and token alphabets) checked by the ``Matcher``; every example completion is a sentence.
- ``lave_step``: with the exact fallback, a proposal is accepted iff the block stays completable
  (brute force over token fillings, EOS padding included); without it, never an uncompletable
  one.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

import numpy as np
import pytest
import reference
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrain import Compiler, ConstrainError, Grammar, Matcher, Vocabulary
from constrain.diffusion.dingo_lave import (
    MASK,
    Gap,
    InfillChecker,
    NotRegularError,
    TokenDfa,
    block_completable,
    block_problems,
    dingo,
    lave_step,
    lookahead,
)
from constrain.errors import CompileLimitError
from constrain.kernels.numba_diffusion import viterbi_step_kernel
from constrain.testing import tiny_vocabulary

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

# ---------------------------------------------------------------- regular: toy vocabulary

TOKENS: list[bytes | None] = [b"a", b"b", b"c", b"d", b"ab", b"bc", b"cd", None]
EOS = 7
REGEX = r"(ab|c){1,3}d?"


@cache
def toy_vocab() -> Vocabulary:
    return Vocabulary.from_bytes(TOKENS, eos_ids=[EOS])


@cache
def toy_tdfa() -> TokenDfa:
    return TokenDfa.from_compiled(Compiler(toy_vocab()).compile(Grammar.from_regex(REGEX)))


@cache
def language() -> tuple[frozenset[str], frozenset[str]]:
    """Return (words, prefixes of words) of REGEX; its words have at most 7 characters."""
    words = {
        "".join(s)
        for n in range(8)
        for s in itertools.product("abcd", repeat=n)
        if re.fullmatch(REGEX, "".join(s))
    }
    return frozenset(words), frozenset(w[:k] for w in words for k in range(len(w) + 1))


def oracle_step(configs: frozenset[tuple[str, bool]], tok: int) -> frozenset[tuple[str, bool]]:
    """Configurations ``(text, ended)`` after a token (MASK: after any real token)."""
    words, prefixes = language()
    if tok == MASK:
        return frozenset().union(*(oracle_step(configs, t) for t in range(len(TOKENS))))
    out = set()
    for text, ended in configs:
        if tok == EOS:
            if ended or text in words:
                out.add((text, True))
        elif not ended and text + TOKENS[tok].decode() in prefixes:  # type: ignore[union-attr]
            out.add((text + TOKENS[tok].decode(), False))  # type: ignore[union-attr]
    return frozenset(out)


def oracle_done(configs: frozenset[tuple[str, bool]], complete: bool) -> bool:
    words = language()[0]
    return any(not complete or ended or text in words for text, ended in configs)


def test_token_dfa_walks_match_the_prefix_language() -> None:
    tdfa = toy_tdfa()
    words = language()[0]
    assert tdfa.dense().shape == (tdfa.num_states, len(TOKENS))
    for n in range(5):
        for seq in itertools.product(range(len(TOKENS)), repeat=n):
            configs = frozenset({("", False)})
            for tok in seq:
                configs = oracle_step(configs, tok)
            state = tdfa.walk(seq)
            assert (state >= 0) == bool(configs), seq
            if state >= 0:
                (text, ended), *_ = configs
                assert bool(tdfa.accepting[state]) == (ended or text in words)
                assert (state == tdfa.end_state) == ended
    for q in range(tdfa.num_states):
        row = tdfa.row(q)
        assert tdfa.mask_successors(q).tolist() == sorted(set(row[row >= 0].tolist()))
        assert [tdfa.step(q, t) for t in range(len(TOKENS))] == row.tolist()


def test_token_dfa_of_regular_lark_and_json_schema_grammars_agrees_with_the_matcher() -> None:
    vocab = tiny_vocabulary()  # ids 0..255 are the single bytes
    grammars = {
        "ignore+left recursion": (
            'start: item ("," item)*\nitem: "a"+ | "b" item\n%ignore " "',
            " ab,",
        ),
        "right recursion": ('start: "x" start | "y" | ', "xy"),
        "nullable regex": (None, "ab"),
        "schema": ({"type": "array", "items": {"enum": [1, 22]}, "maxItems": 2}, "[],12"),
    }
    for name, (source, alphabet) in grammars.items():
        if source is None:
            grammar = Grammar.from_regex("(ab)*")
        elif isinstance(source, dict):
            grammar = Grammar.from_json_schema(source)
        else:
            grammar = Grammar.from_lark(source)
        compiled = Compiler(vocab).compile(grammar)
        tdfa = TokenDfa.from_compiled(compiled)
        for n in range(6):
            for chars in itertools.product(alphabet, repeat=n):
                text = "".join(chars).encode()
                m = Matcher(compiled)
                ok = m.accept_bytes(text)
                state = tdfa.walk(list(text))
                assert (state >= 0) == ok, (name, text)
                if ok:
                    assert bool(tdfa.accepting[state]) == m.is_accepting(), (name, text)
        # the trie-walk kernel against byte-by-byte walks of every token (duplicates included)
        for q in range(tdfa.num_states):
            assert tdfa.row(q).tolist() == [tdfa.step(q, t) for t in range(vocab.size)], name


def test_context_free_grammar_is_refused_with_a_hint() -> None:
    compiled = Compiler(toy_vocab()).compile(Grammar.from_lark('start: "a" start "b" | "c"'))
    with pytest.raises(NotRegularError, match="InfillChecker") as info:
        TokenDfa.from_compiled(compiled)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ConstrainError)
    with pytest.raises(CompileLimitError):
        toy_tdfa().dense(max_bytes=16)


# ---------------------------------------------------------------- DINGO


def brute_force_dingo(
    logp: np.ndarray, mask_lp: np.ndarray | None, committed: list[int], start: list[int], complete
) -> float | None:
    """Best log-probability over all valid assignments (None if there is none)."""
    configs = frozenset({("", False)})
    for tok in start:
        configs = oracle_step(configs, tok)
    best: list[float] = []

    def rec(i: int, configs: frozenset[tuple[str, bool]], score: float) -> None:
        if not configs:
            return
        if i == len(committed):
            if oracle_done(configs, complete):
                best.append(score)
            return
        if committed[i] != MASK:
            rec(i + 1, oracle_step(configs, committed[i]), score)
            return
        for t in range(len(TOKENS)):
            if logp[i, t] > -np.inf:
                rec(i + 1, oracle_step(configs, t), score + logp[i, t])
        if mask_lp is not None:
            rec(i + 1, oracle_step(configs, MASK), score + mask_lp[i])

    rec(0, configs, 0.0)
    return max(best) if best else None


@SETTINGS
@given(
    seed=st.integers(0, 2**31),
    length=st.integers(1, 4),
    masks=st.booleans(),
    complete=st.booleans(),
    num_start=st.integers(0, 2),
)
def test_dingo_equals_brute_force(seed, length, masks, complete, num_start) -> None:
    rng = np.random.default_rng(seed)
    tdfa = toy_tdfa()
    logp = np.log(rng.dirichlet(np.full(len(TOKENS), 0.5), size=length))
    logp[rng.random(logp.shape) < 0.15] = -np.inf
    mask_lp = np.log(rng.uniform(0.01, 0.6, size=length)) if masks else None
    committed = [int(rng.integers(len(TOKENS))) if rng.random() < 0.3 else MASK for _ in logp]
    start = [0, 1][:num_start] if rng.random() < 0.5 else [2, 2][:num_start]
    expected = brute_force_dingo(logp, mask_lp, committed, start, complete)
    result = dingo(
        tdfa,
        torch.tensor(logp) if seed % 2 else logp,
        mask_logp=mask_lp,
        committed=committed,
        start_state=tdfa.walk(start),
        complete=complete,
    )
    if expected is None:
        assert result is None
        return
    assert result is not None
    assert result.log_prob == pytest.approx(expected)
    chosen = result.tokens.tolist()
    assert [c for c in committed if c != MASK] == [
        t for t, c in zip(chosen, committed, strict=True) if c >= 0
    ]
    free = [i for i, c in enumerate(committed) if c == MASK]
    score = sum(mask_lp[i] if chosen[i] == MASK else logp[i, chosen[i]] for i in free)  # type: ignore[index]
    assert score == pytest.approx(expected)
    configs = frozenset({("", False)})
    for tok in start + chosen:
        configs = oracle_step(configs, tok)
    assert oracle_done(configs, complete)


def test_viterbi_kernel_matches_numpy_oracle(rng: np.random.Generator) -> None:
    num, width = 9, 13
    for _ in range(20):
        states = np.sort(rng.choice(num, size=rng.integers(1, num), replace=False)).astype(np.int32)
        dense = rng.integers(-1, num, size=(len(states), width)).astype(np.int32)
        rows = [np.flatnonzero(r >= 0) for r in dense]
        succs = [np.unique(r[r >= 0]) for r in dense]
        row_ptr = np.cumsum([0] + [len(r) for r in rows])
        succ_ptr = np.cumsum([0] + [len(r) for r in succs])
        tokens = np.concatenate(rows).astype(np.int32)
        targets = np.concatenate([r[r >= 0] for r in dense]).astype(np.int32)
        scores = rng.normal(size=len(states))
        logp = np.log(rng.dirichlet(np.ones(width)))
        mask_lp = float(np.log(rng.uniform(0.01, 1.0))) if rng.random() < 0.5 else -np.inf
        out = np.full(num, -np.inf)
        back_q = np.full(num, -1, np.int32)
        back_t = np.full(num, -7, np.int32)
        viterbi_step_kernel(
            states, np.stack([row_ptr[:-1], row_ptr[1:]], 1), tokens, targets,
            np.stack([succ_ptr[:-1], succ_ptr[1:]], 1), np.concatenate(succs).astype(np.int32),
            scores, logp, mask_lp, out, back_q, back_t,
        )  # fmt: skip
        cand = scores[:, None] + logp[None, :]
        for q2 in range(num):
            hit = dense == q2
            masked = (scores + mask_lp)[hit.any(1)]
            want = max(cand[hit].max(initial=-np.inf), masked.max(initial=-np.inf))
            assert out[q2] == want
            if want > -np.inf:
                a = int(np.flatnonzero(states == back_q[q2])[0])
                t = int(back_t[q2])
                assert dense[a, t] == q2 if t != MASK else hit[a].any()
                assert scores[a] + (mask_lp if t == MASK else logp[t]) == want


def test_dingo_rejects_bad_input_and_dead_commits() -> None:
    tdfa = toy_tdfa()
    logp = np.zeros((2, len(TOKENS)))
    assert dingo(tdfa, logp, committed=[3, MASK]) is None  # "d" cannot start a word
    with pytest.raises(ValueError, match="columns"):
        dingo(tdfa, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="positions"):
        dingo(tdfa, logp, mask_logp=np.zeros(3))
    with pytest.raises(ValueError, match="start_state"):
        dingo(tdfa, logp, start_state=99)


# ---------------------------------------------------------------- infilling

CFGS = {
    "parens": ('start: "(" start ")" start | ', "()"),
    "sum": ('start: s\ns: s "+" a | a\na: "1" | "(" s ")"', "1+()"),
    "mini_json": (
        '?start: v\n?v: "[" [v ("," v)*] "]" | "1"\n%ignore " "',
        "[]1, ",
    ),
}


@cache
def cfg(name: str) -> tuple[Grammar, InfillChecker, Compiler]:
    grammar = Grammar.from_lark(CFGS[name][0])
    return grammar, InfillChecker(grammar), Compiler(toy_vocab())


def is_sentence(name: str, text: bytes) -> bool:
    grammar, _, compiler = cfg(name)
    m = Matcher(compiler.compile(grammar))
    return m.accept_bytes(text) and m.is_accepting()


def fill_words(gap: Gap, alphabet: str) -> list[bytes]:
    units = [c.encode() for c in alphabet] if gap.alphabet is None else list(gap.alphabet)
    assert gap.max_len is not None
    return [
        b"".join(w)
        for n in range(gap.min_len, gap.max_len + 1)
        for w in itertools.product(units, repeat=n)
    ]


def check_witness(name: str, parts: list, result) -> None:  # type: ignore[no-untyped-def]
    assert is_sentence(name, result.text)
    fills = iter(result.fills)
    assert b"".join(p if isinstance(p, bytes) else next(fills) for p in parts) == result.text
    for part, fill in zip([p for p in parts if isinstance(p, Gap)], result.fills, strict=True):
        counts = {len(fill)} if part.alphabet is None else word_counts(fill, part.alphabet)
        assert any(
            part.min_len <= n and (part.max_len is None or n <= part.max_len) for n in counts
        )


def word_counts(text: bytes, words: tuple[bytes, ...]) -> set[int]:
    """The numbers of words of the ways to write ``text`` as a sequence of ``words``."""
    ways: list[set[int]] = [{0}] + [set() for _ in text]
    for i in range(len(text)):
        for w in words:
            if ways[i] and text.startswith(w, i):
                ways[i + len(w)].update(n + 1 for n in ways[i])
    return ways[-1]


@SETTINGS
@given(name=st.sampled_from(sorted(CFGS)), data=st.data())
def test_infilling_agrees_with_enumeration(name: str, data: st.DataObject) -> None:
    grammar, checker, _ = cfg(name)
    alphabet = CFGS[name][1]
    texts = st.text(alphabet, max_size=4).map(str.encode)
    gaps = st.builds(
        lambda lo, extra, words: Gap(lo, lo + extra, words),
        st.integers(0, 2),
        st.integers(0, 1),
        st.sampled_from([None, (b"(", b"1+", b"()")]) if name != "mini_json" else st.none(),
    )
    parts = data.draw(st.lists(st.one_of(texts, gaps), min_size=1, max_size=4))
    result = checker.check(parts)
    options = [[p] if isinstance(p, bytes) else fill_words(p, alphabet) for p in parts]
    expected = any(is_sentence(name, b"".join(c)) for c in itertools.product(*options))
    assert result.completable == expected, parts
    if result:
        check_witness(name, parts, result)
        if len(result.text) <= 8:
            assert reference.naive_cfg_accepts(grammar, result.text)


@pytest.mark.parametrize(
    ("name", "parts", "expected"),
    [
        ("parens", [b"((", Gap(), b")"], True),
        ("parens", [b")", Gap()], False),
        ("parens", [Gap(), b")(", Gap()], True),
        ("sum", [b"1+", Gap(), b"+1"], True),
        ("sum", [b"(", Gap(), b"+)"], False),
        ("mini_json", [b"[ [1,", Gap(), b" 1 ]"], True),
        ("mini_json", [b"[1 1", Gap()], False),
        ("mini_json", [Gap(1), b",,"], False),
    ],
)
def test_unbounded_gaps(name: str, parts: list, expected: bool) -> None:
    result = cfg(name)[1].check(parts)
    assert result.completable == expected
    if expected:
        check_witness(name, parts, result)


def test_infilling_limits_and_regular_grammars() -> None:
    checker = InfillChecker(Grammar.builtin("json"), max_states=8)
    with pytest.raises(CompileLimitError, match="max_infill_states"):
        checker.check([b'{"key": ', Gap()])
    with pytest.raises(CompileLimitError, match="max_infill_items"):
        InfillChecker(Grammar.builtin("json"), max_items=5).check([b"[", Gap()])
    regex = InfillChecker(Compiler(toy_vocab()).compile(Grammar.from_regex(REGEX)))
    assert regex.check([b"ab", Gap(), b"d"]).fills == (b"",)
    assert not regex.check([b"ab", Gap(), b"dd"])
    with pytest.raises(TypeError, match="Gap"):
        regex.check([b"a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="min_len"):
        Gap(3, 2)


# ---------------------------------------------------------------- LAVE

LAVE_TOKENS: list[bytes | None] = [b"a", b"(", b")", b"+", b"(a", b"a)", b"+a", None]
LAVE_EOS = 7
LAVE_GRAMMAR = 'start: e\ne: "a" | "(" e ")" | e "+" e'


@cache
def lave_setup() -> tuple[Vocabulary, Matcher, InfillChecker]:
    vocab = Vocabulary.from_bytes(LAVE_TOKENS, eos_ids=[LAVE_EOS])
    compiled = Compiler(vocab).compile(Grammar.from_lark(LAVE_GRAMMAR))
    return vocab, Matcher(compiled), InfillChecker(compiled)


def completable(matcher: Matcher, block: list[int], final: bool) -> bool:
    """Whether some token per masked position makes the block valid (brute force)."""

    def rec(j: int, m: Matcher) -> bool:
        if j == len(block):
            return not final or m.is_accepting()
        options = [block[j]] if block[j] >= 0 else range(len(LAVE_TOKENS))
        for tok in options:
            if m.is_terminated():
                if tok == LAVE_EOS and rec(j + 1, m):
                    return True
                continue
            m2 = m.fork()
            if m2.accept_token(tok) and rec(j + 1, m2):
                return True
        return False

    return rec(0, matcher.fork())


@settings(SETTINGS, max_examples=80)
@given(
    seed=st.integers(0, 2**31),
    length=st.integers(1, 5),
    final=st.booleans(),
    gaps=st.sampled_from(["tokens", "bytes", "unbounded", None]),
)
def test_lave_commits_only_completable_tokens(seed, length, final, gaps) -> None:
    rng = np.random.default_rng(seed)
    vocab, start, checker = lave_setup()
    matcher = start.fork()
    prefix = [[], [1], [0, 3], [4, 3], [1, 1], [0]][int(rng.integers(6))]  # "", "(", "a+", ...
    if matcher.accept_tokens(prefix) != len(prefix) or not completable(
        matcher, [MASK] * length, final
    ):
        return
    block = [MASK] * length
    for j in range(length):  # commit a few tokens that keep the block completable
        tok = int(rng.integers(len(LAVE_TOKENS)))
        trial = block[:j] + [tok] + block[j + 1 :]
        if rng.random() < 0.3 and completable(matcher, trial, final):
            block = trial
    masked = [j for j in range(length) if block[j] < 0]
    proposals = [(int(j), int(rng.integers(len(LAVE_TOKENS)))) for j in rng.permutation(masked)]
    candidates = rng.integers(-1, len(LAVE_TOKENS), size=(length, 2))
    text = b"".join(LAVE_TOKENS[t] for t in prefix)  # type: ignore[misc]
    result = lave_step(
        matcher, block, proposals, candidates, checker=checker if gaps else None,
        prefix=text, final=final, gaps=gaps or "auto",
    )  # fmt: skip
    cur = list(block)
    for (pos, tok), ok, method in zip(proposals, result.accepted, result.methods, strict=True):
        trial = cur[:pos] + [tok] + cur[pos + 1 :]
        expected = completable(matcher, trial, final)
        if gaps == "tokens":  # exact
            assert ok == expected, (prefix, cur, pos, tok, method)
        elif gaps == "unbounded":  # over-approximation: never rejects a completable token
            assert ok or not expected
        else:  # lookahead only, or the single-byte under-approximation: sound
            assert not ok or expected
        assert (method != "rejected") == ok
        if ok:
            cur = trial
    assert result.block.tolist() == cur
    if gaps != "unbounded":
        assert completable(matcher, cur, final)


@settings(SETTINGS, max_examples=60)
@given(
    seed=st.integers(0, 2**31),
    length=st.integers(5, 11),
    final=st.booleans(),
    gaps=st.sampled_from(["tokens", "bytes"]),
)
def test_relaxed_tail_check_agrees_with_the_bounded_one(seed, length, final, gaps) -> None:
    """block_completable decides long trailing gaps through an unbounded relaxation first.

    Its verdict must equal the exact check of every problem with the bounded gaps, and its
    witness must respect the bounds (a fill of at most ``k`` units in a ``0..k`` gap).
    """
    rng = np.random.default_rng(seed)
    vocab, start, checker = lave_setup()
    prefix = [b"", b"", b"a+", b"(a)+"][int(rng.integers(4))]

    def expr(depth: int) -> str:  # a random sentence of LAVE_GRAMMAR
        r = rng.random()
        if depth > 3 or r < 0.4:
            return "a"
        return f"({expr(depth + 1)})" if r < 0.7 else f"{expr(depth + 1)}+{expr(depth + 1)}"

    text = "+".join(expr(0) for _ in range(4))
    ids = {b: LAVE_TOKENS.index(b) for b in (b"a", b"(", b")", b"+")}
    block = [MASK] * length
    for j in range(min(length - 5, len(text))):  # the last 5 stay masked: a trailing run
        if rng.random() < 0.5:
            block[j] = ids[text[j].encode()] if rng.random() < 0.9 else int(rng.integers(7))
    problems = block_problems(block, vocab, prefix=prefix, final=final, gaps=gaps)
    exact = any(checker.check(parts) for parts in problems)
    result = block_completable(checker, block, vocab, prefix=prefix, final=final, gaps=gaps)
    assert bool(result) == exact, (prefix, block, final, gaps)
    if not result:
        return
    assert result.fills is not None and result.text is not None

    def unit_counts(fill: bytes, alphabet: tuple[bytes, ...] | None) -> set[int]:
        """Every number of alphabet words (any bytes when None) that ``fill`` splits into."""
        if alphabet is None:
            return {len(fill)}
        counts: list[set[int]] = [set() for _ in range(len(fill) + 1)]
        counts[0].add(0)
        for i in range(len(fill)):
            for word in alphabet:
                if counts[i] and fill.startswith(word, i):
                    counts[i + len(word)].update(c + 1 for c in counts[i])
        return counts[len(fill)]

    def fits(parts: list) -> bool:
        holes = [x for x in parts if isinstance(x, Gap)]
        if len(holes) != len(result.fills):
            return False
        return all(
            any(h.min_len <= c and (h.max_len is None or c <= h.max_len) for c in counts)
            for h, fill in zip(holes, result.fills, strict=True)
            for counts in [unit_counts(fill, h.alphabet)]
        )

    assert any(fits(parts) for parts in problems), (block, result.fills)
    m = start.fork()
    assert m.accept_bytes(result.text) and m.is_accepting()


def test_lookahead_fills_with_allowed_predictions() -> None:
    vocab, matcher, _ = lave_setup()
    cand = np.array([[1, 0], [3, 0], [2, 5], [LAVE_EOS, 3], [0, 1]])
    filled = lookahead(matcher, [MASK, 0, MASK, MASK, MASK], cand, final=True)
    assert filled is not None and filled.tolist() == [1, 0, 2, LAVE_EOS, LAVE_EOS]
    assert lookahead(matcher, [MASK, 2, MASK], cand[:3]) is None  # ")" cannot come second here
    assert lookahead(matcher, [LAVE_EOS], [[0]]) is None  # the empty text is not a sentence
    with pytest.raises(ValueError, match="masked position"):
        lave_step(matcher, [0, MASK], [(0, 1)], cand[:2])


def test_block_problems_edge_cases() -> None:
    vocab = lave_setup()[0]
    assert block_problems([0, LAVE_EOS, 0], vocab) == []  # text after EOS
    ended = block_problems([0, MASK, LAVE_EOS, MASK], vocab, prefix=b"(")
    assert ended == [[b"(", b"a", Gap.tokens(vocab, 0, 1)]]
    assert block_problems([MASK, 0], vocab, gaps="unbounded") == [[b"", Gap(), b"a", Gap()]]
    two = block_problems([0, MASK, MASK], vocab)
    assert two == [
        [b"", b"a", Gap.tokens(vocab, 2, 2), Gap()],
        [b"", b"a", Gap.tokens(vocab, 0, 1)],
    ]
    special = Vocabulary.from_bytes([b"a", None, None], eos_ids=[1])
    assert block_problems([2], special) == []
    singles = block_problems([MASK, 0], vocab, gaps="bytes", final=True)
    assert singles == [[b"", Gap(1, 1, (b"(", b")", b"+", b"a")), b"a"]]
    assert block_problems([MASK], tiny_vocabulary(), gaps="bytes")[0][1] == Gap(1, 1)
    with pytest.raises(ValueError, match="gaps"):
        block_problems([MASK], vocab, gaps="bad")  # type: ignore[arg-type]
