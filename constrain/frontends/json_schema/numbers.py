r"""Stage 1: exact regex IR for JSON numbers under JSON Schema's numeric keywords.

:func:`number_regex` returns the set of JSON number texts (RFC 8259,
``-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?``) whose exact decimal value satisfies
``type: integer`` (JSON Schema: ``1.0`` is an integer), ``minimum``/``maximum``, their exclusive
forms and ``multipleOf``. Ranges are digit-range automata over the digit strings (no float
arithmetic anywhere); ``multipleOf`` is a remainder :class:`~constrain.ir.Automaton` intersected
with the range.

The result never accepts a text whose value fails a constraint. A regular language cannot follow
an unbounded exponent, so some exponent spellings of qualifying values are rejected. Exactly,
a qualifying text ``T`` with value ``v`` is accepted iff one of these holds:

1. ``v == 0``: every zero spelling (``0``, ``-0``, ``0.00``, ``-0.0E+7``, ...);
2. ``T`` has no exponent (``-?int`` or ``-?int.frac``, any number of trailing zeros);
3. ``T`` has an exponent, ``v != 0`` and there is no ``multipleOf`` (``multipleOf: 1`` counts
   as ``type: integer``; with ``type: integer`` a fractional ``multipleOf`` is reduced to an
   integer one first, so ``multipleOf: 0.5`` is just ``integer`` there), and, with ``m`` the
   mantissa's magnitude (the text between the sign and ``e``), ``e`` the exponent value and
   the constraints on ``|v|`` for ``v``'s sign written ``L < |v|`` or ``L <= |v|`` (``L >= 0``;
   ``L = 0`` when that side has no bound beyond the sign) and ``|v| <= H`` or ``|v| < H`` (``H``
   absent when unbounded):

   * numbers (``integer`` false): the side is unbounded (``L = 0``, no ``H``, e.g. any positive
     text for ``minimum: 0``, ``1e999`` included); or ``m`` is normalised (``1 <= m < 10``, as
     ``1.5e+16``, ``1e-05``, ``5E3`` print); or there is no ``H``, ``m >= 1`` and
     ``e > floor(log10(L))``; or ``L = 0``, ``m < 1`` and ``e < floor(log10(H))``;
   * integers: the mantissa's fraction is absent or all zeros and ``e >= 0`` (``-0`` counts),
     and: the side's integers are all of ``1, 2, 3, ...`` (no ``H`` and 1 qualifies); or
     ``1 <= m < 10``; or there is no ``H`` and ``e > floor(log10(a))`` with ``a`` the least
     qualifying integer. So ``1.5e1`` (15) is rejected as an integer.

4. Every other exponent spelling is rejected (e.g. ``15e-1`` for ``minimum: 1, maximum: 2``,
   any ``1e2`` under ``multipleOf: 5``).

``number_regex`` raises :class:`~constrain.CompileLimitError` when a bound has more than 100
significant digits or a magnitude beyond ``1e1000`` (or below ``1e-1000``), and when the
``multipleOf`` automaton would exceed 10000 states.
"""

from __future__ import annotations

import functools
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from math import ceil, floor, gcd

from constrain.errors import CompileLimitError
from constrain.ir import (
    EMPTY,
    NOTHING,
    Alt,
    Automaton,
    CharSet,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
)

__all__ = ["number_regex"]

MAX_SIGNIFICANT_DIGITS = 100
MAX_ADJUSTED_EXPONENT = 1000
MAX_MULTIPLE_STATES = 10_000

_DIGIT = CharSet(((0x30, 0x39),))
_ZERO = Literal("0")
_ANY = Repeat(_DIGIT, 0, None)  # [0-9]*
_SOME = Repeat(_DIGIT, 1, None)  # [0-9]+
_NONZERO = Concat((Repeat(_ZERO, 0, None), CharSet(((0x31, 0x39),)), _ANY))  # 0*[1-9][0-9]*
_ANY_FRAC = Repeat(Concat((Literal("."), _SOME)), 0, 1)  # (\.[0-9]+)?
_ZERO_FRAC = Repeat(Concat((Literal("."), Repeat(_ZERO, 1, None))), 0, 1)  # (\.0+)?
_E = CharSet.chars("eE")
_ANY_EXP = Concat((_E, Repeat(CharSet.chars("+-"), 0, 1), _SOME))


# --------------------------------------------------------------------------------------------
# IR helpers (flatten, drop the empty language early so the trees stay small)
# --------------------------------------------------------------------------------------------


def _digits(lo: int, hi: int) -> Regex:
    """Return ``[lo-hi]`` over decimal digits (NOTHING when ``lo > hi``)."""
    lo, hi = max(lo, 0), min(hi, 9)
    return NOTHING if lo > hi else CharSet(((0x30 + lo, 0x30 + hi),))


def _alt(*items: Regex) -> Regex:
    out: list[Regex] = []
    for item in items:
        parts = item.items if isinstance(item, Alt) else (item,)
        out.extend(p for p in parts if p not in out)
    return out[0] if len(out) == 1 else Alt(tuple(out))


def _cat(*items: Regex) -> Regex:
    out: list[Regex] = []
    for item in items:
        if item == NOTHING or (isinstance(item, CharSet) and item.is_empty()):
            return NOTHING
        for part in item.items if isinstance(item, Concat) else (item,):
            if isinstance(part, Literal) and out and isinstance(out[-1], Literal):
                out[-1] = Literal(out[-1].text + part.text)
            elif part != Literal(""):
                out.append(part)
    return out[0] if len(out) == 1 else Concat(tuple(out))


def _rep(item: Regex, lo: int, hi: int | None) -> Regex:
    if hi is not None and hi < lo:
        return NOTHING
    if hi == 0:
        return EMPTY
    return item if lo == hi == 1 else Repeat(item, lo, hi)


# --------------------------------------------------------------------------------------------
# Exact decimal helpers
# --------------------------------------------------------------------------------------------


def _split(d: Decimal) -> tuple[int, str]:
    """Return the integer part and the fraction digits (no trailing zeros) of ``d >= 0``."""
    _, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    if exp >= 0:
        return int(text + "0" * exp), ""
    whole = text[:exp] or "0"
    return int(whole), text[exp:].rjust(-exp, "0").rstrip("0")


def _scale(d: Decimal, k: int) -> Decimal:
    """Return ``d * 10**k`` exactly (no context rounding)."""
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    return Decimal((sign, digits, exp + k))


def _check_bound(name: str, d: Decimal) -> None:
    if not d.is_finite():
        raise ValueError(f"{name} must be a finite number, got {d}")
    if d.is_zero():
        return
    sig = len(str(int("".join(map(str, d.as_tuple().digits)))).rstrip("0"))
    if sig > MAX_SIGNIFICANT_DIGITS:
        raise CompileLimitError(
            "max_significant_digits",
            MAX_SIGNIFICANT_DIGITS,
            sig,
            f"{name} has more than {MAX_SIGNIFICANT_DIGITS} significant digits",
        )
    if abs(d.adjusted()) > MAX_ADJUSTED_EXPONENT:
        raise CompileLimitError(
            "max_adjusted_exponent",
            MAX_ADJUSTED_EXPONENT,
            abs(d.adjusted()),
            f"{name} {d} is beyond 1e{MAX_ADJUSTED_EXPONENT} in magnitude",
        )


# --------------------------------------------------------------------------------------------
# Digit-range automata: integers (canonical digit strings) and fractions
# --------------------------------------------------------------------------------------------


@functools.cache
def _cmp_fixed(s: str, op: str) -> Regex:
    """Digit strings of length ``len(s)`` that compare ``op`` (ge/gt/le/lt) to ``s``.

    Split in halves, so the nesting depth is logarithmic (the automaton builder recurses).
    """
    n = len(s)
    if n == 0:
        return EMPTY if op in ("ge", "le") else NOTHING
    if n == 1:
        d = int(s)
        lo, hi = {"ge": (d, 9), "gt": (d + 1, 9), "le": (0, d), "lt": (0, d - 1)}[op]
        return _digits(lo, hi)
    if (op == "ge" and not s.strip("0")) or (op == "le" and not s.strip("9")):
        return _rep(_DIGIT, n, n)
    if (op == "gt" and not s.strip("9")) or (op == "lt" and not s.strip("0")):
        return NOTHING
    half = n // 2
    strict = "gt" if op[0] == "g" else "lt"
    return _alt(
        _cat(_cmp_fixed(s[:half], strict), _rep(_DIGIT, n - half, n - half)),
        _cat(Literal(s[:half]), _cmp_fixed(s[half:], op)),
    )


def _int_range(a: int, b: int | None) -> Regex:
    """Canonical integer texts ``0|[1-9][0-9]*`` with value in ``[a, b]`` (``b=None``: no max)."""
    if b is not None and a > b:
        return NOTHING
    parts: list[Regex] = []
    if a <= 0:
        parts.append(_ZERO)
        a = 1
        if b is not None and b < 1:
            return _ZERO
    sa = str(a)
    na = len(sa)
    if b is None:
        parts += [_cmp_fixed(sa, "ge"), _cat(_digits(1, 9), _rep(_DIGIT, na, None))]
        return _alt(*parts)
    sb = str(b)
    nb = len(sb)
    if na == nb:
        i = next((k for k in range(na) if sa[k] != sb[k]), na)
        if i == na:
            return _alt(*parts, Literal(sa))
        k = na - i - 1
        body = _alt(
            _cat(Literal(sa[i]), _cmp_fixed(sa[i + 1 :], "ge")),
            _cat(_digits(int(sa[i]) + 1, int(sb[i]) - 1), _rep(_DIGIT, k, k)),
            _cat(Literal(sb[i]), _cmp_fixed(sb[i + 1 :], "le")),
        )
        return _alt(*parts, _cat(Literal(sa[:i]), body))
    parts.append(_cmp_fixed(sa, "ge"))
    parts.append(_cat(_digits(1, 9), _rep(_DIGIT, na, nb - 2)))
    first = int(sb[0])
    parts.append(_cat(_digits(1, first - 1), _rep(_DIGIT, nb - 1, nb - 1)))
    parts.append(_cat(Literal(sb[0]), _cmp_fixed(sb[1:], "le")))
    return _alt(*parts)


def _run(s: str) -> int:
    return len(s) - len(s.lstrip(s[0]))


def _frac_ge(lo: str, lo_incl: bool) -> Regex:
    """Digit strings ``D`` (maybe empty) with ``0.D >= 0.lo`` (``>`` when not ``lo_incl``)."""
    if not lo:
        return _ANY if lo_incl else _NONZERO
    n, c = _run(lo), lo[0]
    return _alt(
        _cat(_rep(Literal(c), 0, n - 1), _digits(int(c) + 1, 9), _ANY),
        _cat(Literal(c * n), _frac_ge(lo[n:], lo_incl)),
    )


def _frac_le(hi: str, hi_incl: bool) -> Regex:
    """Digit strings ``D`` (maybe empty) with ``0.D <= 0.hi`` (``<`` when not ``hi_incl``)."""
    if not hi:
        return _rep(_ZERO, 0, None) if hi_incl else NOTHING
    n, c = _run(hi), hi[0]
    below = _alt(EMPTY, _cat(_digits(0, int(c) - 1), _ANY))
    return _alt(
        _cat(_rep(Literal(c), 0, n - 1), below), _cat(Literal(c * n), _frac_le(hi[n:], hi_incl))
    )


def _frac_digits(lo: str, hi: str | None, lo_incl: bool, hi_incl: bool) -> Regex:
    """Non-empty digit strings ``D`` with ``0.lo <= 0.D <= 0.hi`` (bounds strict when not incl).

    ``lo``/``hi`` have no trailing zeros; ``hi=None`` means no upper bound; ``0.lo <= 0.hi``.
    """
    if hi is None:
        return (_SOME if lo_incl else _NONZERO) if not lo else _frac_ge(lo, lo_incl)
    if not hi:
        return _rep(_ZERO, 1, None) if not lo and lo_incl and hi_incl else NOTHING
    if not lo and lo_incl:
        c = hi[0]
        return _alt(_cat(_digits(0, int(c) - 1), _ANY), _cat(Literal(c), _frac_le(hi[1:], hi_incl)))
    m = max(len(lo), len(hi))
    lp, hp = lo.ljust(m, "0"), hi.ljust(m, "0")
    i = next((k for k in range(m) if lp[k] != hp[k]), m)
    if i == m:
        return _cat(Literal(hi), _rep(_ZERO, 0, None)) if lo_incl and hi_incl else NOTHING
    ends_at_lo = EMPTY if len(lo) <= i and lo_incl else NOTHING  # D == lo exactly
    body = _alt(
        ends_at_lo,
        _cat(Literal(lp[i]), _frac_ge(lo[i + 1 :], lo_incl)),
        _cat(_digits(int(lp[i]) + 1, int(hp[i]) - 1), _ANY),
        _cat(Literal(hp[i]), _frac_le(hi[i + 1 :], hi_incl)),
    )
    return _cat(Literal(hi[:i]), body)


def _frac_text(lo: str, hi: str | None, lo_incl: bool, hi_incl: bool) -> Regex:
    """Fraction texts (empty or ``.D``) whose value ``0.D`` lies between ``0.lo`` and ``0.hi``."""
    zero_ok = not lo and lo_incl and (hi is None or hi != "" or hi_incl)
    dotted = _cat(Literal("."), _frac_digits(lo, hi, lo_incl, hi_incl))
    return _alt(EMPTY, dotted) if zero_ok else dotted


def _dec_range(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool) -> Regex:
    r"""Plain texts ``(0|[1-9][0-9]*)(\.[0-9]+)?`` with value between ``lo >= 0`` and ``hi``."""
    i_lo, f_lo = _split(lo)
    head = Literal(str(i_lo))
    if hi is None:
        return _alt(
            _cat(head, _frac_text(f_lo, None, lo_incl, True)),
            _cat(_int_range(i_lo + 1, None), _ANY_FRAC),
        )
    i_hi, f_hi = _split(hi)
    if i_lo == i_hi:
        return _cat(head, _frac_text(f_lo, f_hi, lo_incl, hi_incl))
    return _alt(
        _cat(head, _frac_text(f_lo, None, lo_incl, True)),
        _cat(_int_range(i_lo + 1, i_hi - 1), _ANY_FRAC),
        _cat(Literal(str(i_hi)), _frac_text("", f_hi, True, hi_incl)),
    )


# --------------------------------------------------------------------------------------------
# Exponent spellings
# --------------------------------------------------------------------------------------------


def _exp_text(lo: int | None, hi: int | None) -> Regex:
    """``[eE][+-]?[0-9]+`` spellings whose exponent value is in ``[lo, hi]`` (None: unbounded)."""
    if lo is not None and hi is not None and lo > hi:
        return NOTHING
    parts: list[Regex] = []
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        parts.append(_cat(_rep(CharSet.chars("+-"), 0, 1), _rep(_ZERO, 1, None)))
    if hi is None or hi >= 1:
        pos = _int_range(max(lo if lo is not None else 1, 1), hi)
        parts.append(_cat(_rep(Literal("+"), 0, 1), _rep(_ZERO, 0, None), pos))
    if lo is None or lo <= -1:
        neg_lo = 1 if hi is None or hi >= 0 else -hi
        neg = _int_range(neg_lo, None if lo is None else -lo)
        parts.append(_cat(Literal("-"), _rep(_ZERO, 0, None), neg))
    return _cat(_E, _alt(*parts))


def _decimal_exponents(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool) -> Regex:
    """Exponent spellings of magnitudes between ``lo >= 0`` and ``hi`` (rule 3, numbers)."""
    a_lo = lo.adjusted() if lo > 0 else None
    a_hi = hi.adjusted() if hi is not None else None
    nonzero_mant = _alt(_cat(_digits(1, 9), _ANY, _ANY_FRAC), _cat(Literal("0."), _NONZERO))
    if a_lo is None and a_hi is None:
        return _cat(nonzero_mant, _ANY_EXP)
    normal = _cat(_digits(1, 9), _ANY_FRAC)
    if a_hi is None:
        mant = _cat(_digits(1, 9), _ANY, _ANY_FRAC)  # m >= 1
    elif a_lo is None:
        mant = _alt(normal, _cat(Literal("0."), _NONZERO))  # 0 < m < 10
    else:
        mant = normal
    interior = _exp_text(
        None if a_lo is None else a_lo + 1, None if a_hi is None else a_hi - 1
    )  # 10**e <= m * 10**e < 10**(e+1) lies strictly inside the bounds
    parts = [_cat(mant, interior)]
    if a_lo is not None:
        top = _scale(hi, -a_lo) if hi is not None and a_hi == a_lo else Decimal(10)
        top_incl = hi_incl if hi is not None and a_hi == a_lo else False
        mant_lo = _dec_range(_scale(lo, -a_lo), lo_incl, top, top_incl)
        parts.append(_cat(mant_lo, _exp_text(a_lo, a_lo)))
    if hi is not None and a_hi is not None and a_hi != a_lo:
        mant_hi = _dec_range(Decimal(1), True, _scale(hi, -a_hi), hi_incl)
        parts.append(_cat(mant_hi, _exp_text(a_hi, a_hi)))
    return _alt(*parts)


def _integer_exponents(a: int, b: int | None) -> Regex:
    """Exponent spellings of the integers in ``[a, b]`` (``a >= 1``; rule 3, integers)."""
    wide = _cat(_digits(1, 9), _ANY, _ZERO_FRAC)  # integral mantissa >= 1
    if a == 1 and b is None:
        return _cat(wide, _exp_text(0, None))
    a_lo = len(str(a)) - 1
    a_hi = None if b is None else len(str(b)) - 1
    interior = _exp_text(a_lo + 1, None if a_hi is None else a_hi - 1)
    parts = [_cat(wide if b is None else _cat(_digits(1, 9), _ZERO_FRAC), interior)]
    lead_a = -(-a // 10**a_lo)  # least digit d with d * 10**a_lo >= a
    top = 9 if b is None or a_hi != a_lo else b // 10**a_lo
    parts.append(_cat(_digits(lead_a, top), _ZERO_FRAC, _exp_text(a_lo, a_lo)))
    if b is not None and a_hi is not None and a_hi != a_lo:
        parts.append(_cat(_digits(1, b // 10**a_hi), _ZERO_FRAC, _exp_text(a_hi, a_hi)))
    return _alt(*parts)


def _magnitudes(
    lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool, integer: bool
) -> Regex:
    """Unsigned texts with a non-zero value between ``lo >= 0`` and ``hi`` (``lo=0``: open)."""
    if integer:
        a = _ceil(lo) if lo_incl else _floor(lo) + 1
        b = None if hi is None else _floor(hi) if hi_incl else _ceil(hi) - 1
        a = max(a, 1)
        if b is not None and a > b:
            return NOTHING
        return _alt(_cat(_int_range(a, b), _ZERO_FRAC), _integer_exponents(a, b))
    if hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
        return NOTHING
    return _alt(_dec_range(lo, lo_incl, hi, hi_incl), _decimal_exponents(lo, lo_incl, hi, hi_incl))


# --------------------------------------------------------------------------------------------
# multipleOf: a remainder automaton
# --------------------------------------------------------------------------------------------


class _AutomatonBuilder:
    def __init__(self) -> None:
        self.num_states = 0
        self.chars: dict[tuple[int, int], set[int]] = {}
        self.accept: set[int] = set()

    def state(self, accept: bool = False) -> int:
        self.num_states += 1
        if accept:
            self.accept.add(self.num_states - 1)
        return self.num_states - 1

    def edge(self, src: int, chars: str, dst: int) -> None:
        self.chars.setdefault((src, dst), set()).update(map(ord, chars))

    def finish(self, start: int) -> Automaton:
        """Return the automaton trimmed to useful states (reachable and co-reachable)."""
        fwd: dict[int, set[int]] = {}
        back: dict[int, set[int]] = {}
        for src, dst in self.chars:
            fwd.setdefault(src, set()).add(dst)
            back.setdefault(dst, set()).add(src)
        reach = _closure({start}, fwd)
        keep = sorted(reach & _closure(self.accept & reach, back))
        if start not in keep:
            return Automaton(1, (), 0, frozenset())
        ids = {old: new for new, old in enumerate(sorted(keep, key=lambda s: s != start))}
        edges = tuple(
            (ids[src], CharSet.of((c, c) for c in cps), ids[dst])
            for (src, dst), cps in self.chars.items()
            if src in ids and dst in ids
        )
        return Automaton(len(ids), edges, 0, frozenset(ids[s] for s in self.accept if s in ids))


def _closure(seeds: set[int], succ: dict[int, set[int]]) -> set[int]:
    seen = set(seeds)
    todo = list(seeds)
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _multiple_automaton(c: int, t: int, s: int) -> Automaton:
    """JSON number texts whose value is a multiple of ``c * 10**t / 10**s`` (``t == 0 or s == 0``).

    Digits of the integer part and the first ``s`` fraction digits, read as one integer ``N``,
    are tracked mod ``c``; further fraction digits must be zeros. For ``t > 0`` the integer
    part is a head ``= 0 (mod c)`` followed by exactly ``t`` zeros (guessed nondeterministically).
    Non-zero exponent spellings are rejected; zero is accepted in every spelling.
    """
    digits = "0123456789"
    bld = _AutomatonBuilder()
    start, minus = bld.state(), bld.state()
    bld.edge(start, "-", minus)
    z_int, z_dot, z_frac, z_e, z_sign = (bld.state(i in (0, 2)) for i in range(5))
    z_exp = bld.state(True)
    for src in (start, minus):
        bld.edge(src, "0", z_int)
    bld.edge(z_int, ".", z_dot)
    bld.edge(z_dot, "0", z_frac)
    bld.edge(z_frac, "0", z_frac)
    for src in (z_int, z_frac):
        bld.edge(src, "eE", z_e)
    bld.edge(z_e, "+-", z_sign)
    for src in (z_e, z_sign, z_exp):
        bld.edge(src, digits, z_exp)

    def ok(r: int, j: int) -> bool:  # N = r * 10**(s - j) mod c == 0
        return r * pow(10, s - j, c) % c == 0

    frac: dict[tuple[int, int], int] = {}
    todo: list[tuple[int, int]] = []

    def frac_state(r: int, j: int) -> int:
        if (r, j) not in frac:
            frac[(r, j)] = bld.state(ok(r, j))
            todo.append((r, j))
        return frac[(r, j)]

    dots: dict[int, int] = {}

    def dot_state(r: int) -> int:
        if r not in dots:
            dots[r] = bld.state()
            for d in range(10):
                if s >= 1:
                    bld.edge(dots[r], str(d), frac_state((10 * r + d) % c, 1))
                elif d == 0:
                    bld.edge(dots[r], "0", frac_state(r, 0))
        return dots[r]

    head = [bld.state(t == 0 and ok(r, 0)) for r in range(c)]
    for src in (start, minus):
        for d in range(1, 10):
            bld.edge(src, str(d), head[d % c])
    for r in range(c):
        for d in range(10):
            bld.edge(head[r], str(d), head[(10 * r + d) % c])
        if t == 0:
            bld.edge(head[r], ".", dot_state(r))
    if t > 0:
        tail = [head[0]] + [bld.state(z == t) for z in range(1, t + 1)]
        for z in range(t):
            bld.edge(tail[z], "0", tail[z + 1])
        bld.edge(tail[t], ".", dot_state(0))
    if s > 0:
        int_zero = bld.state()
        for src in (start, minus):
            bld.edge(src, "0", int_zero)
        bld.edge(int_zero, ".", dot_state(0))
    while todo:
        r, j = todo.pop()
        if j < s:
            for d in range(10):
                bld.edge(frac[(r, j)], str(d), frac_state((10 * r + d) % c, j + 1))
        else:
            bld.edge(frac[(r, j)], "0", frac[(r, j)])
    return bld.finish(start)


def _decompose(q: Decimal) -> tuple[int, int, int]:
    """Return ``(c, t, s)``: ``q = c * 10**t / 10**s``, ``c % 10 != 0``, ``t == 0 or s == 0``."""
    _, digits, exp = q.as_tuple()
    assert isinstance(exp, int)
    c = int("".join(map(str, digits)))
    while c % 10 == 0:
        c, exp = c // 10, exp + 1
    return (c, exp, 0) if exp >= 0 else (c, 0, -exp)


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def number_regex(
    *,
    integer: bool,
    minimum: Decimal | None = None,
    maximum: Decimal | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    multiple_of: Decimal | None = None,
) -> Regex:
    """Return the regex IR of the JSON number texts whose value meets the numeric keywords.

    The language is exact up to the exponent spellings listed in the module docstring: no
    accepted text has a value outside the constraints, and every plain spelling
    (``-?int`` or ``-?int.frac``) of a qualifying value is accepted.

    Parameters
    ----------
    integer : bool
        Require an integral value (JSON Schema ``type: integer``; ``1.0`` qualifies).
    minimum, maximum : Decimal or None, optional
        Bounds on the value; inclusive unless the matching ``exclusive_*`` flag is set.
    exclusive_minimum, exclusive_maximum : bool, optional
        Make the corresponding bound strict.
    multiple_of : Decimal or None, optional
        The value divided by this (positive) number must be an integer (exact arithmetic).

    Returns
    -------
    Regex
        The language; :data:`~constrain.ir.NOTHING` when no number qualifies. With
        ``multiple_of`` it contains an :class:`~constrain.ir.Automaton`, intersected
        (:class:`~constrain.ir.Intersect`) with the range when there are bounds.

    Raises
    ------
    ValueError
        If a bound is not finite, or ``multiple_of`` is not finite and positive.
    CompileLimitError
        If a bound has more than 100 significant digits or a magnitude past ``1e+-1000``, or the
        ``multipleOf`` automaton needs more than 10000 states.
    """
    for name, bound in (("minimum", minimum), ("maximum", maximum)):
        if bound is not None:
            _check_bound(name, bound)
    lo, lo_incl = minimum, not exclusive_minimum
    hi, hi_incl = maximum, not exclusive_maximum
    mult: tuple[int, int, int] | None = None
    if multiple_of is not None:
        if not multiple_of.is_finite() or multiple_of <= 0:
            raise ValueError(f"multipleOf must be a positive finite number, got {multiple_of}")
        c, t, s = _decompose(multiple_of)
        if integer and s > 0:
            c, s = c // gcd(c, 10**s), 0  # integer x: x * 10**s = 0 (mod c)
        if (c, t, s) == (1, 0, 0):
            integer = True
        else:
            mult = (c, t, s)
            integer = integer or s == 0
            size = 12 + t + c * (s + 3)
            if size > MAX_MULTIPLE_STATES:
                raise CompileLimitError(
                    "max_multiple_states",
                    MAX_MULTIPLE_STATES,
                    size,
                    f"multipleOf {multiple_of}: the remainder automaton needs about {size} "
                    f"states (more than {MAX_MULTIPLE_STATES})",
                )
    if integer:  # tighten to inclusive integer bounds
        if lo is not None:
            lo = Decimal(_ceil(lo) if lo_incl else _floor(lo) + 1)
            lo_incl = True
        if hi is not None:
            hi = Decimal(_floor(hi) if hi_incl else _ceil(hi) - 1)
            hi_incl = True
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_incl and hi_incl))):
        return NOTHING
    if mult is not None and not _has_multiple(mult, lo, lo_incl, hi, hi_incl):
        return NOTHING
    ranged = _ranges(lo, lo_incl, hi, hi_incl, integer)
    if mult is None or ranged == NOTHING:
        return ranged
    automaton = _multiple_automaton(*mult)
    return automaton if lo is None and hi is None else Intersect((ranged, automaton))


def _floor(d: Decimal) -> int:
    return int(d.to_integral_value(rounding=ROUND_FLOOR))


def _ceil(d: Decimal) -> int:
    return int(d.to_integral_value(rounding=ROUND_CEILING))


def _has_multiple(
    mult: tuple[int, int, int], lo: Decimal | None, lo_incl: bool, hi: Decimal | None, hi_incl: bool
) -> bool:
    """Return whether some multiple of ``c * 10**t / 10**s`` lies within the bounds."""
    if lo is None or hi is None:
        return True
    c, t, s = mult
    q = Fraction(c * 10**t, 10**s)
    k_lo, k_hi = Fraction(lo) / q, Fraction(hi) / q
    first = ceil(k_lo) if lo_incl or k_lo.denominator != 1 else int(k_lo) + 1
    last = floor(k_hi) if hi_incl or k_hi.denominator != 1 else int(k_hi) - 1
    return first <= last


def _ranges(
    lo: Decimal | None, lo_incl: bool, hi: Decimal | None, hi_incl: bool, integer: bool
) -> Regex:
    """Zero, positive and negative texts within the bounds (see the module docstring)."""
    zero = Decimal(0)
    if lo is None and hi is None and not integer:
        return _cat(
            Repeat(Literal("-"), 0, 1), _int_range(0, None), _ANY_FRAC, _rep(_ANY_EXP, 0, 1)
        )
    parts: list[Regex] = []
    zero_ok = (lo is None or lo < 0 or (lo == 0 and lo_incl)) and (
        hi is None or hi > 0 or (hi == 0 and hi_incl)
    )
    if zero_ok:
        parts.append(_cat(_rep(Literal("-"), 0, 1), _ZERO, _ZERO_FRAC, _rep(_ANY_EXP, 0, 1)))
    if hi is None or hi > 0:
        pos_lo, pos_incl = (lo, lo_incl) if lo is not None and lo > 0 else (zero, False)
        parts.append(_magnitudes(pos_lo, pos_incl, hi, hi_incl, integer))
    if lo is None or lo < 0:
        neg_lo, neg_incl = (
            (hi.copy_negate(), hi_incl) if hi is not None and hi < 0 else (zero, False)
        )
        neg_hi = None if lo is None else lo.copy_negate()
        parts.append(_cat(Literal("-"), _magnitudes(neg_lo, neg_incl, neg_hi, lo_incl, integer)))
    return _alt(*parts)
