"""Unit tests of constrain.frontends.json_schema.numbers against an exact ``decimal`` oracle."""

from __future__ import annotations

import decimal
import functools
import itertools
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrain.automata.dfa import Dfa, compile_regex
from constrain.errors import CompileLimitError
from constrain.frontends.json_schema.numbers import number_regex
from constrain.ir import NOTHING, Automaton, Intersect, Regex

JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
FULL_ALPHABET = "-0123456789.eE+"
SMALL_ALPHABET = "-0159.e+"


@dataclass(frozen=True)
class Spec:
    integer: bool
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: Decimal | None = None

    def regex(self) -> Regex:
        return number_regex(
            integer=self.integer,
            minimum=self.minimum,
            maximum=self.maximum,
            exclusive_minimum=self.exclusive_minimum,
            exclusive_maximum=self.exclusive_maximum,
            multiple_of=self.multiple_of,
        )


# --------------------------------------------------------------------------------------------
# Oracles: the exact semantics, and the documented accepted subset (module docstring)


@functools.cache
def value_of(text: str) -> Fraction | None:
    """The exact value of a JSON number text, None for anything else."""
    return Fraction(Decimal(text)) if JSON_NUMBER.fullmatch(text) else None


def qualifies(text: str, spec: Spec) -> bool:
    """Exact JSON Schema semantics of the text's value (no regex involved)."""
    v = value_of(text)
    if v is None:
        return False
    if spec.integer and v.denominator != 1:
        return False
    if spec.minimum is not None:
        lo = Fraction(spec.minimum)
        if v < lo or (spec.exclusive_minimum and v == lo):
            return False
    if spec.maximum is not None:
        hi = Fraction(spec.maximum)
        if v > hi or (spec.exclusive_maximum and v == hi):
            return False
    return spec.multiple_of is None or (v / Fraction(spec.multiple_of)).denominator == 1


def _effective(spec: Spec) -> tuple[bool, bool]:
    """(integer, has_multiple) after the documented reductions of multipleOf."""
    q = spec.multiple_of
    if q is None:
        return spec.integer, False
    if q == 1 or (spec.integer and (1 / Fraction(q)).denominator == 1):
        return True, False
    return spec.integer, True


def _side(spec: Spec, negative: bool) -> tuple[Fraction, bool, Fraction | None]:
    """(L, L inclusive, H) of the magnitude constraints on one sign's side."""
    lo = None if spec.minimum is None else Fraction(spec.minimum)
    hi = None if spec.maximum is None else Fraction(spec.maximum)
    lo_incl = not (spec.exclusive_maximum if negative else spec.exclusive_minimum)
    if negative:
        lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
    if lo is None or lo <= 0:
        return Fraction(0), False, hi
    return lo, lo_incl, hi


def _adjusted(x: Fraction) -> int:
    """floor(log10(x)) for x > 0, exactly."""
    k = len(str(x.numerator)) - len(str(x.denominator))
    while Fraction(10) ** k > x:
        k -= 1
    while Fraction(10) ** (k + 1) <= x:
        k += 1
    return k


def documented(text: str, spec: Spec) -> bool:
    """The module docstring's rules 1-4, written independently of the implementation."""
    if not qualifies(text, spec):
        return False
    value = Decimal(text)
    match = JSON_NUMBER.fullmatch(text)
    assert match is not None
    if value == 0 or match.group(3) is None:
        return True
    integer, has_multiple = _effective(spec)
    if has_multiple:
        return False
    mant_text, exp_text = re.split("[eE]", text.lstrip("-"))
    m, e = Decimal(mant_text), int(exp_text)
    big_l, l_incl, big_h = _side(spec, text.startswith("-"))
    normal = 1 <= m < 10
    if integer:
        if (match.group(2) or ".0").strip(".0") or e < 0:
            return False
        a = max(1, math.ceil(big_l) if l_incl else math.floor(big_l) + 1)  # least integer
        if a == 1 and big_h is None:
            return True
        return normal or (big_h is None and e > len(str(a)) - 1)
    if big_l == 0 and big_h is None:
        return True
    if normal:
        return True
    if big_h is None and m >= 1 and e > _adjusted(big_l):
        return True
    return big_l == 0 and big_h is not None and m < 1 and e < _adjusted(big_h)


# --------------------------------------------------------------------------------------------
# Matching: compiled DFAs, plus an independent simulator for Automaton / Intersect


def simulate(aut: Automaton, text: str) -> bool:
    by_src: dict[int, list[tuple[object, int]]] = {}
    for src, chars, dst in aut.edges:
        by_src.setdefault(src, []).append((chars, dst))
    cur = {aut.start}
    for ch in text:
        cur = {d for s in cur for chars, d in by_src.get(s, ()) if ord(ch) in chars}  # type: ignore[operator]
        if not cur:
            return False
    return bool(cur & aut.accept)


def matcher(node: Regex) -> Callable[[str], bool]:
    """A membership test that does not rely on the DFA builder for Automaton / Intersect."""
    if isinstance(node, Intersect):
        parts = [matcher(item) for item in node.items]
        return lambda text: all(p(text) for p in parts)
    if isinstance(node, Automaton):
        return functools.partial(simulate, node)
    dfa = compile_regex(node)
    return lambda text: dfa.matches(text.encode())


def try_compile(node: Regex) -> Dfa | None:
    """compile_regex when the DFA builder supports every node, else None."""
    try:
        return compile_regex(node)
    except (TypeError, CompileLimitError):
        return None


def dfa_language(dfa: Dfa, alphabet: str, max_len: int) -> set[str]:
    """Every accepted string over ``alphabet`` up to ``max_len`` (foreign bytes must be dead)."""
    trans, cls, acc = dfa.trans.tolist(), dfa.byte_class.tolist(), dfa.accept.tolist()
    foreign = [cls[b] for b in range(256) if chr(b) not in FULL_ALPHABET]
    assert all(trans[s][c] < 0 for s in range(dfa.num_states) for c in foreign)
    out: set[str] = set()
    stack = [(0, "")] if dfa.live[0] else []
    while stack:
        state, text = stack.pop()
        if acc[state]:
            out.add(text)
        if len(text) < max_len:
            for ch in alphabet:
                nxt = trans[state][cls[ord(ch)]]
                if nxt >= 0:
                    stack.append((nxt, text + ch))
    return out


@functools.cache
def universe(alphabet: str, max_len: int) -> tuple[str, ...]:
    words = (
        "".join(p) for n in range(1, max_len + 1) for p in itertools.product(alphabet, repeat=n)
    )
    return tuple(w for w in words if JSON_NUMBER.fullmatch(w))


def check_exhaustive(spec: Spec) -> None:
    """Accepted strings == documented ones, over two finite universes."""
    node = spec.regex()
    dfa = try_compile(node)
    for alphabet, max_len in ((FULL_ALPHABET, 4), (SMALL_ALPHABET, 6)):
        expected = {t for t in universe(alphabet, max_len) if documented(t, spec)}
        if dfa is not None:
            got = dfa_language(dfa, alphabet, max_len)
        else:
            match = matcher(node)
            got = {t for t in universe(alphabet, max_len) if match(t)}
        wrong = sorted(t for t in got if not qualifies(t, spec))
        assert not wrong, f"false positives for {spec}: {wrong[:20]}"
        assert got == expected, (spec, sorted(expected - got)[:20], sorted(got - expected)[:20])
    if dfa is not None and isinstance(node, (Automaton, Intersect)):
        match = matcher(node)  # the simulator agrees with the DFA builder
        assert {t for t in universe(FULL_ALPHABET, 4) if match(t)} == dfa_language(
            dfa, FULL_ALPHABET, 4
        )


# --------------------------------------------------------------------------------------------
# Exhaustive checks on short strings

D = Decimal
BOUNDS = [None, D("-12"), D("-1.5"), D("-1"), D("-0.5"), D("0"), D("-0"), D("0.05"), D("0.5")]
BOUNDS += [D("1"), D("2.25"), D("9.9"), D("10"), D("99"), D("1E+2"), D("12.5"), D("0.1E1")]


def _random_specs(n: int, seed: int) -> list[Spec]:
    rng = random.Random(seed)
    specs = []
    for _ in range(n):
        lo, hi = rng.choice(BOUNDS), rng.choice(BOUNDS)
        if lo is not None and hi is not None and lo > hi and rng.random() < 0.8:
            lo, hi = hi, lo
        specs.append(Spec(rng.random() < 0.4, lo, hi, rng.random() < 0.4, rng.random() < 0.4))
    return specs


HAND_SPECS = [
    Spec(True),
    Spec(False),
    Spec(True, D(0), D(100)),
    Spec(False, D(0)),
    Spec(False, D(0), exclusive_minimum=True),
    Spec(False, maximum=D(0), exclusive_maximum=True),
    Spec(True, D("-0.5"), D("0.5")),
    Spec(False, D(1), D(1)),
    Spec(False, D(1), D(1), exclusive_maximum=True),
    Spec(True, D("1.5"), D("1.9")),
    Spec(False, D("0.999"), D("1.001")),
    Spec(False, D("1e-3"), D("5e-2")),
    Spec(False, D("-1e2"), D("-0.01"), True, True),
    Spec(True, D("-1E+3")),
    Spec(False, maximum=D("9.99")),
]


@pytest.mark.parametrize("spec", HAND_SPECS + _random_specs(45, 7), ids=str)
def test_exhaustive_short_strings(spec: Spec) -> None:
    check_exhaustive(spec)


MULTIPLE_SPECS = [
    Spec(False, multiple_of=D("0.5")),
    Spec(True, multiple_of=D("0.5")),
    Spec(False, multiple_of=D("1")),
    Spec(False, multiple_of=D("3")),
    Spec(False, multiple_of=D("0.25"), minimum=D("-1"), maximum=D("2")),
    Spec(True, multiple_of=D("20"), maximum=D("1E+3")),
    Spec(False, multiple_of=D("1.5"), minimum=D("0"), exclusive_minimum=True),
    Spec(True, multiple_of=D("0.4")),
    Spec(False, multiple_of=D("0.01"), minimum=D("-0.5"), maximum=D("0.5")),
    Spec(False, multiple_of=D("7"), minimum=D("1"), maximum=D("6")),
    Spec(False, multiple_of=D("1E+2")),
]


@pytest.mark.parametrize("spec", MULTIPLE_SPECS, ids=str)
def test_exhaustive_multiple_of(spec: Spec) -> None:
    check_exhaustive(spec)


# --------------------------------------------------------------------------------------------
# Spellings near the bounds, long and exponent forms


def plain(v: Decimal, extra_zeros: int = 0) -> str:
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    if exp >= 0:
        whole, frac = text + "0" * exp, ""
    else:
        whole, frac = text[:exp], text[exp:].rjust(-exp, "0")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0") + "0" * extra_zeros
    return ("-" if sign and v != 0 else "") + whole + ("." + frac if frac else "")


def spellings(v: Decimal, rng: random.Random) -> list[str]:
    """Plain and exponent spellings of ``v`` (all exact)."""
    base = plain(v)
    out = [base, plain(v, 1), plain(v, rng.randint(2, 5))]
    sign = "-" if v < 0 else ""
    digits = "".join(map(str, v.as_tuple().digits)).rstrip("0") or "0"
    adj = v.adjusted()
    e = rng.choice("eE")
    out.append(f"{sign}{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}{e}{adj}")
    out.append(f"{sign}{digits[0]}.{digits[1:]}0{e}+{adj:03d}" if adj >= 0 else base)
    out.append(f"{sign}{digits}{e}{adj - len(digits) + 1}")
    out.append(f"{sign}0.{digits}{e}{adj + 1}")
    out.append(f"{sign}{digits}0{e}{adj - len(digits)}")
    return out


def nearby(bound: Decimal, rng: random.Random) -> list[Decimal]:
    """Values at, just inside and just outside ``bound``, at several scales."""
    out = [bound]
    with decimal.localcontext() as ctx:
        ctx.prec = 5000  # exact sums
        for k in range(-3, 4):
            step = Decimal(1).scaleb(bound.adjusted() - rng.randint(0, 6) + k)
            out += [bound + step, bound - step]
    return out


def check_texts(spec: Spec, texts: list[str]) -> None:
    node = spec.regex()
    match = matcher(node)
    compiled = try_compile(node)
    for text in texts:
        got = match(text)
        assert not got or qualifies(text, spec), f"false positive {text!r} for {spec}"
        assert got == documented(text, spec), (text, spec, got)
        if compiled is not None:
            assert compiled.matches(text.encode()) == got, (text, spec)


bound_values = st.builds(
    lambda digits, exp, neg: Decimal(f"{'-' if neg else ''}{digits}e{exp}"),
    st.integers(0, 10**12),
    st.integers(-20, 20),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    lo=st.none() | bound_values,
    hi=st.none() | bound_values,
    integer=st.booleans(),
    ex_lo=st.booleans(),
    ex_hi=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_random_bounds_near_values(
    lo: Decimal | None, hi: Decimal | None, integer: bool, ex_lo: bool, ex_hi: bool, seed: int
) -> None:
    rng = random.Random(seed)
    spec = Spec(integer, lo, hi, ex_lo, ex_hi)
    values = [D(0), D(1), D(-1), D("0.5")]
    for b in (lo, hi):
        if b is not None:
            values += nearby(b, rng)
    texts = [t for v in values for t in spellings(v, rng)]
    texts += ["-0", "0.0", "-0.0e-5", "1e999", "-1E+999", "1e-999", "1.0", "1.", ".5", "01"]
    check_texts(spec, texts)


@settings(max_examples=25, deadline=None)
@given(
    lo=st.none()
    | st.builds(lambda d, e: Decimal(f"{d}e{e}"), st.integers(-999, 999), st.integers(-320, 300)),
    hi=st.none()
    | st.builds(lambda d, e: Decimal(f"{d}e{e}"), st.integers(-999, 999), st.integers(-320, 300)),
    integer=st.booleans(),
    ex_lo=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_huge_and_tiny_bounds(
    lo: Decimal | None, hi: Decimal | None, integer: bool, ex_lo: bool, seed: int
) -> None:
    rng = random.Random(seed)
    spec = Spec(integer, lo, hi, ex_lo, not ex_lo)
    values = [D(0), D(1), D(-1), D("1e-300"), D("-1e300")]
    for b in (lo, hi):
        if b is not None:
            values += nearby(b, rng)
    check_texts(spec, [t for v in values for t in spellings(v, rng)])


@pytest.mark.parametrize(
    ("spec", "accepted", "rejected"),
    [
        (Spec(True, D(0), D(100)), ["0", "-0", "1.0", "100", "1e2", "1E+2", "-0.0e9"], ["101"]),
        (Spec(False, D(0)), ["1e999", "0.5e-999", "1.5e+16", "-0"], ["-1e-999", "-1"]),
        (Spec(False, D(0), exclusive_minimum=True), ["1e-999", "0.001"], ["0", "-0", "0e1"]),
        (Spec(True), ["1.0", "-0", "1.00e1", "1e+16", "10e0"], ["1.5", "1e-1", "1.50e1"]),
        (Spec(False, D("1E+300"), D("1E+300")), ["1" + "0" * 300, "1e300", "1.0E+300"], ["1e299"]),
        (Spec(False, D("1e-300")), ["0." + "0" * 299 + "1", "1e-300", "5e-300"], ["9e-301"]),
        (Spec(False, D("1e-300"), exclusive_minimum=True), ["1.0001e-300"], ["1e-300"]),
        (Spec(True, maximum=D("1E+300"), exclusive_maximum=True), ["9" * 300], ["1" + "0" * 300]),
        (Spec(False, D(1), D(1)), ["1", "1.0", "1.000", "1e0", "1.00E-0"], ["10e-1", "1.01"]),
        (Spec(False, D(0), D(0)), ["0", "-0", "0.0", "-0.00e+5"], ["1e-999"]),
    ],
    ids=str,
)
def test_known_spellings(spec: Spec, accepted: list[str], rejected: list[str]) -> None:
    check_texts(spec, accepted + rejected)
    match = matcher(spec.regex())
    assert all(match(t) for t in accepted)
    assert not any(match(t) for t in rejected)


def test_empty_ranges_are_nothing() -> None:
    assert number_regex(integer=False, minimum=D(2), maximum=D(1)) == NOTHING
    assert (
        number_regex(integer=False, minimum=D(1), maximum=D(1), exclusive_minimum=True) == NOTHING
    )
    assert number_regex(integer=True, minimum=D("1.1"), maximum=D("1.9")) == NOTHING
    assert number_regex(integer=True, minimum=D(1), maximum=D(2), exclusive_minimum=True,
                        exclusive_maximum=True) == NOTHING  # fmt: skip
    assert number_regex(integer=False, minimum=D(1), maximum=D(6), multiple_of=D(7)) == NOTHING


def test_dfa_sizes_stay_small() -> None:
    assert compile_regex(number_regex(integer=True, minimum=D(0), maximum=D(100))).num_states < 40
    assert compile_regex(number_regex(integer=False)).num_states < 15
    huge = number_regex(integer=False, minimum=D("-1e300"), maximum=D("1e300"))
    assert compile_regex(huge).num_states < 1000


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="multipleOf"):
        number_regex(integer=False, multiple_of=D(0))
    with pytest.raises(ValueError, match="finite"):
        number_regex(integer=False, minimum=D("NaN"))
    with pytest.raises(CompileLimitError, match="significant digits"):
        number_regex(integer=False, minimum=D("1." + "1" * 150))
    with pytest.raises(CompileLimitError, match="multipleOf"):
        number_regex(integer=False, multiple_of=D("0.123456789"))


# --------------------------------------------------------------------------------------------
# multipleOf automata (simulated independently of the DFA builder)

MULTIPLES = ["0.5", "3", "0.25", "20", "1e-8", "0.0001", "7", "0.3", "1.5", "2.5e-3", "1E+3", "12"]


@pytest.mark.parametrize("q", MULTIPLES)
def test_multiple_automaton_random_texts(q: str) -> None:
    spec = Spec(False, multiple_of=D(q))
    node = spec.regex()
    assert isinstance(node, Automaton)
    rng = random.Random(q)
    step = D(q)
    texts = ["0", "-0", "0.0", "0e0", "-0.00E+3", "1e2", "0.5e1"]
    for _ in range(300):
        k = rng.randint(-(10**6), 10**6)
        v = step * k + (
            0 if rng.random() < 0.6 else D(rng.randint(1, 99)).scaleb(-rng.randint(0, 9))
        )
        texts += spellings(v, rng)[:3]
    for text in texts:
        assert simulate(node, text) == documented(text, spec), (q, text)


@settings(max_examples=60, deadline=None)
@given(
    q=st.sampled_from(["0.5", "3", "0.25", "20", "1e-3", "7", "0.3", "1.5", "1E+2"]),
    lo=st.none() | bound_values,
    hi=st.none() | bound_values,
    integer=st.booleans(),
    ex_lo=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_random_multiple_of_with_bounds(
    q: str, lo: Decimal | None, hi: Decimal | None, integer: bool, ex_lo: bool, seed: int
) -> None:
    rng = random.Random(seed)
    spec = Spec(integer, lo, hi, ex_lo, False, D(q))
    values = [D(q) * rng.randint(-50, 50) for _ in range(20)]
    for b in (lo, hi):
        if b is not None:
            k = (b / D(q)).to_integral_value()
            values += [D(q) * (k + d) for d in range(-2, 3)] + nearby(b, rng)[:6]
    check_texts(spec, [t for v in values for t in spellings(v, rng)[:4]])


def test_multiple_of_huge_and_tiny() -> None:
    node = number_regex(integer=False, multiple_of=D("1e308"))
    assert isinstance(node, Automaton)
    zeros = "0" * 308
    cases = [("0", True), ("1" + zeros, True), ("-25" + zeros + ".000", True)]
    cases += [(zeros[1:], False), ("1" + zeros[1:], False), ("1e308", False), ("5e307", False)]
    for text, ok in cases:
        assert simulate(node, text) == ok, text
    tiny = number_regex(integer=False, minimum=D(0), maximum=D(1), multiple_of=D("1e-8"))
    match = matcher(tiny)
    assert match("0.12345678") and match("0.123456780000") and match("1.0")
    assert not match("0.123456789") and not match("1.00000001") and not match("-0.5")


def test_multiple_of_with_ranges_compiles() -> None:
    node = number_regex(integer=False, minimum=D(0), maximum=D(10), multiple_of=D("0.5"))
    dfa = try_compile(node)
    if dfa is None:
        pytest.skip("the DFA builder does not support Automaton/Intersect yet")
    for text in ["0", "0.5", "10", "9.50", "-0"]:
        assert dfa.matches(text.encode()), text
    for text in ["10.5", "-0.5", "0.25", "5e0", "11"]:
        assert not dfa.matches(text.encode()), text
