"""Property tests: parse_regex + compile_regex agree with re.fullmatch on random patterns."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from constrain.automata.dfa import compile_regex
from constrain.frontends.regex import parse_regex
from constrain.ir import Alt, CharSet, Concat, Literal, Regex, Repeat, regex_to_pattern

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: a fixed cost (hypothesis samples some
    database=None,  # patterns with huge case-folded classes for minutes)
)

# ASCII-heavy, with digits, whitespace, newlines, case-folding traps and multi-byte characters.
ALPHABET = list("abcxyzABKZ0179_-. \t\n/") + [
    "é",
    "ß",
    "ſ",
    "\u212a",
    "٣",
    "Σ",
    "ς",
    "😀",
    "\u2028",
]
CLASS_ESCAPES = [r"\d", r"\D", r"\w", r"\W", r"\s", r"\S"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?", "+?", "??", "{1,2}?"]
GROUPS = ["(?:", "(", "(?P<@>", "(?i:", "(?s:", "(?-i:", "(?a:"]

Node = tuple[Any, ...]


def _class_char(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else ("\\n" if c == "\n" else c)


def _atom(node: Node, ecma: str | None) -> str:
    kind = node[0]
    if kind == "lit":
        return re.escape(node[1]).replace("\n", "\\n")
    if kind == "esc":
        return node[1] if ecma is None else ECMA_ORACLE[node[1]]
    items = []
    for item in node[2]:
        if item[0] == "range":
            items.append(_class_char(item[1]) + "-" + _class_char(item[2]))
        elif item[0] == "esc":
            items.append(item[1] if ecma is None else ECMA_IN_CLASS[item[1]])
        else:
            items.append(_class_char(item[1]))
    return "[" + ("^" if node[1] else "") + "".join(items) + "]"


def to_pattern(node: Node, ecma: str | None = None) -> str:
    """Print a random pattern tree; ``ecma="oracle"`` spells ECMAScript classes for Python."""
    kind = node[0]
    if kind == "cat":
        return "".join(
            f"(?:{to_pattern(x, ecma)})" if x[0] == "alt" else to_pattern(x, ecma) for x in node[1]
        )
    if kind == "alt":
        return "|".join(to_pattern(x, ecma) for x in node[1])
    if kind == "rep":
        inner = to_pattern(node[1], ecma)
        if node[1][0] not in ("lit", "esc", "class", "grp"):
            inner = f"(?:{inner})"
        return inner + node[2]
    if kind == "grp":
        return node[1] + to_pattern(node[2], ecma) + ")"
    return _atom(node, ecma)


def _number_groups(pattern: str) -> str:
    parts = pattern.split("(?P<@>")
    return parts[0] + "".join(f"(?P<g{i}>{p}" for i, p in enumerate(parts[1:]))


chars = st.sampled_from(ALPHABET)
class_items = st.one_of(
    chars.map(lambda c: ("char", c)),
    st.tuples(chars, chars).map(lambda t: ("range", min(t), max(t))),
    st.sampled_from(CLASS_ESCAPES).map(lambda e: ("esc", e)),
)
atoms = st.one_of(
    chars.map(lambda c: ("lit", c)),
    st.sampled_from([*CLASS_ESCAPES, "."]).map(lambda e: ("esc", e)),
    st.tuples(st.just("class"), st.booleans(), st.lists(class_items, min_size=1, max_size=4)),
)


def pattern_trees(groups: list[str]) -> st.SearchStrategy[Node]:
    def extend(kids: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        return st.one_of(
            st.tuples(st.just("cat"), st.lists(kids, min_size=2, max_size=3)),
            st.tuples(st.just("alt"), st.lists(kids, min_size=2, max_size=3)),
            st.tuples(st.just("rep"), kids, st.sampled_from(QUANTIFIERS)),
            st.tuples(st.just("grp"), st.sampled_from(groups), kids),
        )

    return st.recursive(atoms, extend, max_leaves=7)


def _strings(data: st.DataObject, sampled: re.Pattern[str]) -> list[str]:
    """Random strings, strings drawn from ``sampled``, and one-character edits of both."""
    out = data.draw(st.lists(st.text(alphabet=ALPHABET, max_size=6), max_size=10))
    try:
        out += data.draw(st.lists(st.from_regex(sampled, fullmatch=True), max_size=4))
    except Exception:  # noqa: BLE001 - hypothesis cannot sample every pattern; fine
        pass
    near = [s[:-1] for s in out if s] + [s + "a" for s in out]
    # Short strings only: re backtracks exponentially on nested quantifiers such as (?:a*)*b.
    return [s for s in out + near if len(s) <= 8 and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


def check_against_re(pattern: str, flags: int, data: st.DataObject, **kw: Any) -> None:
    compiled = re.compile(pattern, flags)
    dfa = compile_regex(parse_regex(pattern, flags=flags, **kw))
    for s in _strings(data, compiled):
        assert dfa.matches(s.encode()) == (compiled.fullmatch(s) is not None), (pattern, flags, s)


@SETTINGS
@given(
    tree=pattern_trees(GROUPS),
    prefix=st.sampled_from(["", "", "^", "(?i)", "(?s)", "(?a)", "(?x)", "(?is)"]),
    suffix=st.sampled_from(["", "", "$", r"\Z"]),
    data=st.data(),
)
def test_random_patterns_match_python(tree: Node, prefix: str, suffix: str, data: Any) -> None:
    check_against_re(_number_groups(prefix + to_pattern(tree) + suffix), 0, data)


@SETTINGS
@given(
    tree=pattern_trees(["(?:", "("]),
    flags=st.sampled_from([re.IGNORECASE, re.DOTALL, re.IGNORECASE | re.DOTALL, re.I | re.A]),
    data=st.data(),
)
def test_flag_variants_match_python(tree: Node, flags: int, data: Any) -> None:
    check_against_re(to_pattern(tree), flags, data)


# --------------------------------------------------------------------------------------------
# IR -> regex_to_pattern -> parse_regex round trip

code_points = st.one_of(
    st.integers(0x20, 0x7E), st.integers(0, 0x7FF), st.integers(0, 0xFFFF), st.integers(0, 0x10FFFF)
)
char_sets = st.lists(st.tuples(code_points, code_points), min_size=0, max_size=3).map(
    lambda rs: CharSet.of((min(r), max(r)) for r in rs)
)
ir_atoms = st.one_of(char_sets, st.text(alphabet=ALPHABET, max_size=3).map(Literal))


def _ir_extend(kids: st.SearchStrategy[Regex]) -> st.SearchStrategy[Regex]:
    return st.one_of(
        st.builds(Concat, st.lists(kids, max_size=3).map(tuple)),
        st.builds(Alt, st.lists(kids, max_size=3).map(tuple)),
        st.builds(
            lambda item, lo, extra: Repeat(item, lo, None if extra is None else lo + extra),
            kids,
            st.integers(0, 2),
            st.sampled_from([None, 0, 1, 2, 3]),
        ),
    )


ir_trees = st.recursive(ir_atoms, _ir_extend, max_leaves=6)


def _samples(node: Regex, data: st.DataObject) -> list[str]:
    """Draw a few strings of the language of ``node`` (or give up on empty parts)."""
    if isinstance(node, CharSet):
        ranges = [r for r in node.ranges if not 0xD800 <= r[0] <= r[1] <= 0xDFFF]
        if not ranges:
            return []
        lo, hi = data.draw(st.sampled_from(ranges))
        cp = data.draw(st.integers(lo, hi).filter(lambda c: not 0xD800 <= c <= 0xDFFF))
        return [chr(cp)]
    if isinstance(node, Literal):
        return [node.text]
    if isinstance(node, Concat):
        out = [""]
        for item in node.items:
            parts = _samples(item, data)
            if not parts:
                return []
            out = [a + parts[0] for a in out]
        return out
    if isinstance(node, Alt):
        return [s for item in node.items for s in _samples(item, data)[:1]]
    count = data.draw(st.integers(node.min, node.min + 2 if node.max is None else node.max))
    if count == 0:
        return [""]
    return _samples(Concat((node.item,) * count), data)


@SETTINGS
@given(node=ir_trees, data=st.data())
def test_ir_round_trip(node: Regex, data: Any) -> None:
    pattern = regex_to_pattern(node)
    direct = compile_regex(node)
    parsed = compile_regex(parse_regex(pattern))
    strings = _samples(node, data) + data.draw(st.lists(st.text(alphabet=ALPHABET, max_size=5)))
    strings += [chr(c) for c in data.draw(st.lists(code_points, max_size=5))]
    for s in strings:
        assume(not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
        expected = re.fullmatch(pattern, s) is not None
        assert direct.matches(s.encode()) == expected, (pattern, s)
        assert parsed.matches(s.encode()) == expected, (pattern, s)


# --------------------------------------------------------------------------------------------
# ECMAScript flavour: the same trees, with JS classes spelled out for the Python oracle

_JS_SPACE = (
    "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
ECMA_IN_CLASS = {
    r"\d": "0-9", r"\w": "A-Za-z0-9_", r"\s": _JS_SPACE,
    r"\D": r"\x00-/:-\U0010ffff", r"\W": r"\x00-/:-@\[-^`{-\U0010ffff",
    r"\S": r"\x00-\x08\x0e-\x1f!-\x9f\xa1-\u167f\u1681-\u1fff\u200b-\u2027\u202a-\u202e"
    r"\u2030-\u205e\u2060-\u2fff\u3001-\ufefe\uff00-\U0010ffff",
}  # fmt: skip
ECMA_ORACLE = {key: f"[{value}]" for key, value in ECMA_IN_CLASS.items()}
ECMA_ORACLE["."] = "[^\\n\\r\\u2028\\u2029]"


@SETTINGS
@given(tree=pattern_trees(["(?:", "("]), data=st.data())
def test_ecmascript_matches_oracle(tree: Node, data: Any) -> None:
    js = to_pattern(tree)
    oracle = re.compile(to_pattern(tree, ecma="oracle"))
    dfa = compile_regex(parse_regex(js, flavor="ecmascript"))
    # Sample from the Python reading of the pattern: hypothesis is slow on the huge classes.
    for s in _strings(data, re.compile(js)):
        assert dfa.matches(s.encode()) == (oracle.fullmatch(s) is not None), (js, s)
