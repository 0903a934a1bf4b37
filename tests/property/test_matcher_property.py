"""Property tests of the Matcher on regular grammars: random regexes, random strings and walks.

Every regex is a random regex-IR tree printed with ``regex_to_pattern`` and read back with
``Grammar.from_regex``, so one pattern string feeds both the engine and the oracles:

- acceptance: ``re.fullmatch`` (and the exact rejection point: the longest prefix on which the
  pattern's DFA, ``compile_regex``, is still live);
- masks: ``tests.reference.naive_mask`` with viability = liveness of the DFA after
  ``Dfa.walk``, over ``tiny_vocabulary`` (multi-byte tokens, tokens that split UTF-8 characters,
  a token starting with a continuation byte, a duplicate, EOS and a special token);
- invariants: mask == {t : validate_tokens([t]) == 1}; rollback after accept is the identity;
  forks are independent; EOS is allowed exactly when the text so far is accepted;
  validate_tokens and forced_bytes (jump-forward) follow their definitions.

Hypothesis runs derandomized (fixed seeds), without deadlines or an example database.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

import numpy as np
import pytest
import reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrain import Compiler, Grammar, Matcher
from constrain.automata.dfa import Dfa, compile_regex
from constrain.frontends.regex import parse_regex
from constrain.ir import ANY_CHAR, Alt, CharSet, Concat, Literal, Regex, Repeat, regex_to_pattern
from constrain.testing import byte_vocabulary, tiny_vocabulary

naive_mask = reference.naive_mask

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Characters of 1 to 4 UTF-8 bytes; tiny_vocabulary has tokens that split "€" and "😀".
ALPHABET = "abc1 é€😀"
EXTRA = "dx\n\"'"  # characters the regexes rarely use, for random strings

chars = st.sampled_from(ALPHABET)
charsets = st.one_of(
    chars.map(CharSet.chars),
    st.lists(chars, min_size=1, max_size=3).map(lambda cs: CharSet.chars("".join(cs))),
    st.tuples(chars, chars).map(lambda p: CharSet.of([tuple(sorted(map(ord, p)))])),
    st.lists(chars, min_size=1, max_size=2).map(lambda cs: CharSet.chars("".join(cs)).negate()),
    st.just(ANY_CHAR),
)
leaves = st.one_of(charsets, st.text(alphabet=ALPHABET, min_size=1, max_size=3).map(Literal))


def _repeat(t: tuple[Regex, int, int | None]) -> Regex:
    item, lo, extra = t
    return Repeat(item, lo, None if extra is None else lo + extra)


regex_trees = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, min_size=2, max_size=3).map(lambda xs: Concat(tuple(xs))),
        st.lists(kids, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
        st.tuples(kids, st.integers(0, 2), st.sampled_from([None, 0, 1, 2])).map(_repeat),
    ),
    max_leaves=6,
)


patterns = regex_trees.map(regex_to_pattern)


@cache
def _compiler(vocab_name: str) -> Compiler:
    vocab = tiny_vocabulary() if vocab_name == "tiny" else byte_vocabulary()
    return Compiler(vocab)


@cache
def _dfa(pattern: str) -> Dfa:
    return compile_regex(parse_regex(pattern))


def _matcher(pattern: str, vocab_name: str = "tiny") -> Matcher:
    return Matcher(_compiler(vocab_name).compile(Grammar.from_regex(pattern)))


def _oracle(pattern: str) -> tuple[Callable[[bytes], bool], Callable[[bytes], bool]]:
    """Return ``(viable, complete)`` on bytes: DFA liveness after ``walk``, and ``re``."""
    dfa = _dfa(pattern)
    compiled = re.compile(pattern)

    def viable(data: bytes) -> bool:
        state = dfa.walk(0, data)
        return state >= 0 and bool(dfa.live[state])

    def complete(data: bytes) -> bool:
        try:
            return compiled.fullmatch(data.decode("utf-8")) is not None
        except UnicodeDecodeError:
            return False

    return viable, complete


def _mask(m: Matcher) -> set[int]:
    return set(m.allowed_token_ids().tolist())


def _bitmask_mask(m: Matcher) -> set[int]:
    vocab = m.vocab
    row = np.zeros((1, (vocab.size + 31) // 32), dtype=np.int32)
    m.fill_next_token_bitmask(row)
    bits = np.unpackbits(row[0].view(np.uint8), bitorder="little")[: vocab.size]
    return set(np.flatnonzero(bits).tolist())


def _token_bytes(t: int) -> bytes:
    return tiny_vocabulary().token_bytes_of(t)


def _samples(data: st.DataObject, pattern: str) -> list[str]:
    out = data.draw(st.lists(st.text(alphabet=ALPHABET + EXTRA, max_size=6), max_size=6))
    try:
        out += data.draw(st.lists(st.from_regex(re.compile(pattern), fullmatch=True), max_size=4))
    except Exception:  # noqa: BLE001 - hypothesis cannot sample every pattern; fine
        pass
    out += [s[:-1] for s in out if s] + [s + "a" for s in out]
    return [s for s in out if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


def _seed_prefix(data: st.DataObject, pattern: str) -> bytes:
    """A byte prefix of a sentence (it may end inside a multi-byte character)."""
    try:
        sentence = data.draw(st.from_regex(re.compile(pattern), fullmatch=True))
    except Exception:  # noqa: BLE001
        return b""
    raw = sentence.encode("utf-8", "surrogatepass")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in sentence):
        return b""
    return raw[: data.draw(st.integers(0, len(raw)), label="cut")]


def _walk_token(data: st.DataObject, allowed: set[int], eos: set[int]) -> int | None:
    """Draw the next token of a walk among the allowed ones, EOS excepted."""
    choices = sorted(allowed - eos)
    if not choices:
        return None
    # Prefer tokens that are not single bytes half of the time: they cross lexemes and split
    # UTF-8 characters.
    multi = [t for t in choices if len(_token_bytes(t)) > 1]
    pool = multi if multi and data.draw(st.booleans(), label="multi") else choices
    return pool[data.draw(st.integers(0, len(pool) - 1), label="token")]


# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_byte_acceptance_equals_fullmatch(pattern: str, data: st.DataObject) -> None:
    """Token by token over byte_vocabulary: accepted iff re.fullmatch; rejected exactly where
    the DFA dies."""
    m = _matcher(pattern, "byte")
    viable, _ = _oracle(pattern)
    for s in _samples(data, pattern):
        raw = s.encode()
        m.reset()
        n = m.accept_tokens(list(raw))
        live = next((k for k in range(len(raw) + 1) if not viable(raw[:k])), len(raw) + 1) - 1
        assert n == live, (pattern, s, n, live)
        accepted = n == len(raw) and m.is_accepting()
        assert accepted == (re.fullmatch(pattern, s) is not None), (pattern, s)
        assert m.num_accepted_tokens == n


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_masks_equal_brute_force_on_a_walk(pattern: str, data: st.DataObject) -> None:
    """From a byte prefix of a sentence, walk allowed tiny_vocabulary tokens; at every step the
    mask is the brute-force definition, the bitmask, and {t : validate_tokens([t]) == 1}."""
    vocab = tiny_vocabulary()
    eos = {int(e) for e in vocab.eos_ids}
    viable, complete = _oracle(pattern)
    m = _matcher(pattern)
    prefix = _seed_prefix(data, pattern)
    assert m.accept_tokens(list(prefix)) == len(prefix)
    for _ in range(data.draw(st.integers(1, 5), label="steps")):
        mask = _mask(m)
        assert mask == naive_mask(vocab, viable, complete, prefix), (pattern, prefix)
        assert _bitmask_mask(m) == mask
        assert {t for t in range(vocab.size) if m.validate_tokens([t]) == 1} == mask
        token = _walk_token(data, mask, eos)
        if token is None:
            break
        assert m.accept_token(token)
        prefix += _token_bytes(token)


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_rollback_after_accept_is_identity(pattern: str, data: st.DataObject) -> None:
    """accept_token(s) followed by rollback restores the mask, acceptance and token count."""
    vocab = tiny_vocabulary()
    eos = {int(e) for e in vocab.eos_ids}
    m = _matcher(pattern)
    prefix = _seed_prefix(data, pattern)
    m.accept_tokens(list(prefix))
    before, accepting, count = _mask(m), m.is_accepting(), m.num_accepted_tokens
    walk: list[int] = []
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        current = _mask(m)
        token = _walk_token(data, current, eos)
        if token is None:
            break
        assert m.accept_token(token)
        m.rollback(1)
        assert _mask(m) == current
        assert m.accept_token(token)
        walk.append(token)
    m.rollback(len(walk))
    assert (_mask(m), m.is_accepting(), m.num_accepted_tokens) == (before, accepting, count)
    assert m.accept_tokens(walk) == len(walk)
    m.rollback(len(walk))
    assert _mask(m) == before
    if eos & before:
        assert m.accept_token(min(eos & before)) and m.is_terminated()
        m.rollback(1)
        assert not m.is_terminated() and _mask(m) == before


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_forks_are_independent(pattern: str, data: st.DataObject) -> None:
    """A fork starts where its parent is; advancing either one leaves the other unchanged."""
    vocab = tiny_vocabulary()
    eos = {int(e) for e in vocab.eos_ids}
    viable, complete = _oracle(pattern)
    m = _matcher(pattern)
    prefix = _seed_prefix(data, pattern)
    m.accept_tokens(list(prefix))
    before = _mask(m)
    f = m.fork()
    assert _mask(f) == before and f.num_accepted_tokens == m.num_accepted_tokens
    fork_prefix = prefix
    for _ in range(3):
        token = _walk_token(data, _mask(f), eos)
        if token is None:
            break
        assert f.accept_token(token)
        fork_prefix += _token_bytes(token)
    assert _mask(m) == before
    token = _walk_token(data, before, eos)
    if token is not None:
        assert m.accept_token(token)
        assert _mask(m) == naive_mask(vocab, viable, complete, prefix + _token_bytes(token))
    assert _mask(f) == naive_mask(vocab, viable, complete, fork_prefix)
    if f.num_accepted_tokens > len(prefix):
        f.rollback(f.num_accepted_tokens - len(prefix))
        assert _mask(f) == before


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_eos_only_when_accepting(pattern: str, data: st.DataObject) -> None:
    """EOS is in the mask iff is_accepting() iff re.fullmatch; after EOS only EOS is allowed."""
    vocab = tiny_vocabulary()
    eos = int(vocab.eos_ids[0])
    special = int(vocab.special_ids[-1])
    m = _matcher(pattern)
    for s in _samples(data, pattern):
        m.reset()
        raw = s.encode()
        if m.accept_tokens(list(raw)) != len(raw):
            continue
        full = re.fullmatch(pattern, s) is not None
        assert m.is_accepting() == full
        assert (eos in _mask(m)) == full
        assert special not in _mask(m) and not m.accept_token(special)
        assert m.accept_token(eos) == full
        assert m.is_terminated() == full
        if full:
            assert _mask(m) == {eos}
            assert not m.accept_token(ord("a")) and m.is_accepting()


@SETTINGS
@given(pattern=patterns, data=st.data())
def test_validate_tokens_and_forced_bytes(pattern: str, data: st.DataObject) -> None:
    """validate_tokens(seq) is the longest viable prefix of seq (state unchanged), and
    forced_bytes() is the run of bytes the pattern alone decides (one viable byte each, and
    the text so far not accepted)."""
    vocab = tiny_vocabulary()
    viable, complete = _oracle(pattern)
    m = _matcher(pattern)
    prefix = _seed_prefix(data, pattern)
    m.accept_tokens(list(prefix))
    before = _mask(m)
    seq = data.draw(st.lists(st.integers(0, vocab.size - 1), max_size=4), label="seq")
    seq = [t for t in seq if _token_bytes(t)]
    text, expected = prefix, 0
    for t in seq:
        text += _token_bytes(t)
        if not viable(text):
            break
        expected += 1
    assert m.validate_tokens(seq) == expected
    assert _mask(m) == before and m.num_accepted_tokens == len(prefix)
    forced = b""
    while not complete(prefix + forced) and len(forced) < 64:
        nxt = [b for b in range(256) if viable(prefix + forced + bytes([b]))]
        if len(nxt) != 1:
            break
        forced += bytes(nxt)
    assert m.forced_bytes() == forced, (pattern, prefix)
    assert _mask(m) == before


UTF8_ALPHABET = "1é€😀"
utf8_patterns = st.recursive(
    st.one_of(
        st.text(alphabet=UTF8_ALPHABET, min_size=1, max_size=3).map(Literal),
        st.lists(st.sampled_from(UTF8_ALPHABET), min_size=1, max_size=3).map(
            lambda cs: CharSet.chars("".join(cs))
        ),
    ),
    lambda kids: st.one_of(
        st.lists(kids, min_size=2, max_size=3).map(lambda xs: Concat(tuple(xs))),
        st.lists(kids, min_size=2, max_size=2).map(lambda xs: Alt(tuple(xs))),
        kids.map(lambda x: Repeat(x, 1, None)),
    ),
    max_leaves=4,
).map(regex_to_pattern)


@SETTINGS
@given(pattern=utf8_patterns, data=st.data())
def test_tokens_that_split_utf8_characters(pattern: str, data: st.DataObject) -> None:
    """Walks over multi-byte characters that prefer tokens with incomplete UTF-8 ("€"[:2],
    "😀"[:3], b"\\xac1"): the mask is the brute-force one at every (mid-character) step."""
    vocab = tiny_vocabulary()
    eos = {int(e) for e in vocab.eos_ids}
    viable, complete = _oracle(pattern)
    m = _matcher(pattern)
    prefix = b""
    for _ in range(6):
        mask = _mask(m)
        assert mask == naive_mask(vocab, viable, complete, prefix), (pattern, prefix)
        split = [t for t in sorted(mask - eos) if not _is_utf8(_token_bytes(t))]
        token = split[0] if split and data.draw(st.booleans()) else _walk_token(data, mask, eos)
        if token is None:
            break
        assert m.accept_token(token)
        prefix += _token_bytes(token)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_split_euro_sign_example() -> None:
    """ "€" is e2 82 ac; tiny_vocabulary has b"\\xe2\\x82" and b"\\xac1" ("€1" over 2 tokens)."""
    vocab = tiny_vocabulary()
    ids = {vocab.token_bytes_of(t): t for t in range(vocab.size)}
    m = _matcher("€1(€1)*")
    head, tail = ids["€".encode()[:2]], ids[b"\xac1"]
    assert head in _mask(m) and tail not in _mask(m)
    assert m.accept_token(head)
    assert tail in _mask(m) and not m.is_accepting()
    assert m.accept_token(tail) and m.is_accepting()
    assert m.accept_token(head) and m.accept_token(0xAC) and not m.accept_token(0xAC)


@pytest.mark.parametrize("pattern", ["a*", "(ab)?", "[0-9]{0,3}"])
def test_nullable_regex_compiles(pattern: str) -> None:
    """A regex that matches the empty string is a valid constraint: EOS is allowed at once."""
    vocab = byte_vocabulary()
    m = _matcher(pattern, "byte")
    viable, complete = _oracle(pattern)
    assert m.is_accepting()
    assert _mask(m) == naive_mask(vocab, viable, complete, b"")
