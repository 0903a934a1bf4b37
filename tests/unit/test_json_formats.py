"""JSON Schema ``format`` languages: the official test suite, reference checkers, hypothesis."""

from __future__ import annotations

import datetime
import functools
import ipaddress
import json
import os
import re
import time
import unicodedata
import uuid
from collections.abc import Callable
from pathlib import Path
from string import hexdigits

import idna
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrain.automata.dfa import Dfa, compile_regex
from constrain.frontends.json_schema.formats import IDN_LETTERS, SUPPORTED_FORMATS, format_regex
from constrain.ir import regex_to_pattern

SUITE = Path("json-schema-test-suite/tests/draft2020-12/optional/format")

# Valid suite strings accepted / all valid suite strings, per format: a ratchet (raise it when a
# language grows). Every invalid suite string must be rejected (no false positive at all).
MIN_VALID_ACCEPTED = {
    "date": (17, 17),
    "date-time": (8, 8),
    "duration": (21, 21),
    "email": (10, 10),
    "hostname": (8, 23),  # A-labels (xn--) are left out: Punycode is not regular
    "idn-email": (9, 10),  # a combining mark in the domain
    "idn-hostname": (11, 30),  # contextual rules, RTL scripts, labels over 9 characters
    "ipv4": (5, 5),
    "ipv6": (11, 11),
    "iri": (12, 12),
    "iri-reference": (5, 5),
    "json-pointer": (22, 22),
    "relative-json-pointer": (7, 7),
    "time": (13, 13),
    "uri": (15, 15),
    "uri-reference": (11, 11),
    "uri-template": (19, 19),
    "uuid": (9, 9),
}

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


@functools.cache
def dfa(name: str) -> Dfa:
    regex = format_regex(name)
    assert regex is not None
    return compile_regex(regex)


def accepts(name: str, text: str) -> bool:
    return dfa(name).matches(text.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------------------------


def test_supported_formats() -> None:
    assert set(MIN_VALID_ACCEPTED) == SUPPORTED_FORMATS
    for name in ("regex", "unknown", "", "DATE", "color"):
        assert name not in SUPPORTED_FORMATS
        assert format_regex(name) is None


@pytest.mark.parametrize("name", sorted(SUPPORTED_FORMATS))
def test_compiles_quickly(name: str) -> None:
    dfa(name)  # warm the kernels and the cache of the IR
    start = time.perf_counter()
    regex = format_regex.__wrapped__(name)
    assert regex is not None
    compiled = compile_regex(regex)
    elapsed = time.perf_counter() - start
    assert not compiled.is_empty_language()
    assert compiled.num_states <= 2_000
    if not os.environ.get("NUMBA_DISABLE_JIT"):
        assert elapsed < 1.0, f"{name}: {elapsed:.2f} s, {compiled.num_states} states"


# --------------------------------------------------------------------------------------------
# The official test suite (optional/format)
# --------------------------------------------------------------------------------------------


def suite_cases(data_dir: Path) -> dict[str, list[tuple[str, bool, str]]]:
    folder = data_dir / SUITE
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    cases: dict[str, list[tuple[str, bool, str]]] = {}
    for path in sorted(folder.glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            name = group["schema"].get("format")
            if name not in SUPPORTED_FORMATS:
                continue
            for case in group["tests"]:
                if isinstance(case["data"], str):
                    cases.setdefault(name, []).append(
                        (case["data"], case["valid"], case["description"])
                    )
    return cases


def test_suite(data_dir: Path) -> None:
    cases = suite_cases(data_dir)
    assert set(cases) == SUPPORTED_FORMATS
    false_positives = []
    report = []
    for name, items in sorted(cases.items()):
        valid = [(data, desc) for data, ok, desc in items if ok]
        missed = [(data, desc) for data, desc in valid if not accepts(name, data)]
        false_positives += [
            (name, data, desc) for data, ok, desc in items if not ok and accepts(name, data)
        ]
        accepted = len(valid) - len(missed)
        report.append(f"{name}: {accepted}/{len(valid)} valid accepted")
        report += [f"    rejects valid {data!r} ({desc})" for data, desc in missed]
        floor, total = MIN_VALID_ACCEPTED[name]
        assert accepted / len(valid) >= floor / total, f"{name}: {accepted}/{len(valid)}"
    print("\n".join(report))
    assert not false_positives


# --------------------------------------------------------------------------------------------
# Reference checkers (exact or stricter than the RFCs; independent of the regexes)
# --------------------------------------------------------------------------------------------


def ref_date(s: str) -> bool:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", s, re.ASCII):
        return False
    try:
        datetime.date.fromisoformat(s)
    except ValueError:
        return False
    return True


def ref_time(s: str) -> bool:
    m = re.fullmatch(
        r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))",
        s,
        re.ASCII,
    )
    if not m:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    sign = -1 if m[5] == "-" else 1
    off_h, off_m = (int(m[6]), int(m[7])) if m[5] else (0, 0)
    if hour > 23 or minute > 59 or second > 60 or off_h > 23 or off_m > 59:
        return False
    utc = (hour * 60 + minute - sign * (off_h * 60 + off_m)) % 1440
    return second < 60 or utc == 23 * 60 + 59


def ref_date_time(s: str) -> bool:
    return len(s) > 11 and s[10] in "Tt" and ref_date(s[:10]) and ref_time(s[11:])


_LDH = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?", re.ASCII)


def ref_hostname(s: str) -> bool:
    labels = s.split(".")
    return len(s) <= 253 and all(
        len(label) <= 63 and _LDH.fullmatch(label) and label[2:4] != "--" for label in labels
    )


def ref_idn_hostname(s: str) -> bool:
    """IDNA2008 by the ``idna`` package, without right-to-left text (its Bidi rule is per label)."""
    if any(unicodedata.bidirectional(c) in ("R", "AL", "AN") for c in s):
        return False
    if not all(re.split("[.\u3002\uff0e\uff61]", s)):  # idna allows a trailing dot
        return False
    try:
        idna.encode(s)
    except idna.IDNAError:
        return False
    return bool(CHECKER.conforms(s, "idn-hostname"))


_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"


def ref_email(s: str, idn: bool = False) -> bool:
    local, at, domain = s.rpartition("@")
    if not at or len(local.encode()) > 64 or len(s.encode()) > 254:
        return False
    atext = "[\u0080-\U0010ffff" + _ATEXT[1:] if idn else _ATEXT
    qtext = "[ !#-\\[\\]-~\u0080-\U0010ffff]" if idn else "[ !#-\\[\\]-~]"
    if not re.fullmatch(f'{atext}+(?:\\.{atext}+)*|"(?:{qtext}|\\\\[ -~])*"', local):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal.startswith("IPv6:"):
            return ref_ipv6(literal[5:])
        return ref_ipv4(literal)
    return ref_idn_hostname(domain) if idn else ref_hostname(domain)


def ref_ipv4(s: str) -> bool:
    return s.isascii() and bool(CHECKER.conforms(s, "ipv4"))


def ref_ipv6(s: str) -> bool:
    try:
        return s.isascii() and "%" not in s and bool(ipaddress.IPv6Address(s))
    except ValueError:
        return False


def ref_uuid(s: str) -> bool:
    hex_part = s.replace("-", "")
    dashes = [i for i, c in enumerate(s) if c == "-"]
    return dashes == [8, 13, 18, 23] and len(hex_part) == 32 and set(hex_part) <= set(hexdigits)


def ref_json_pointer(s: str) -> bool:
    if s and not s.startswith("/"):
        return False
    return all(re.fullmatch("(?:[^~]|~[01])*", token, re.S) for token in s.split("/")[1:])


def ref_relative_json_pointer(s: str) -> bool:
    m = re.fullmatch("(0|[1-9][0-9]*)(.*)", s, re.ASCII | re.S)
    return m is not None and (m[2] == "#" or ref_json_pointer(m[2]))


REFERENCES: dict[str, Callable[[str], bool]] = {
    "date": ref_date,
    "time": ref_time,
    "date-time": ref_date_time,
    "hostname": ref_hostname,
    "idn-hostname": ref_idn_hostname,
    "email": ref_email,
    "idn-email": functools.partial(ref_email, idn=True),
    "ipv4": ref_ipv4,
    "ipv6": ref_ipv6,
    "uuid": ref_uuid,
    "json-pointer": ref_json_pointer,
    "relative-json-pointer": ref_relative_json_pointer,
}


def test_references_agree_with_suite(data_dir: Path) -> None:
    """The reference checkers never call a suite-invalid string valid."""
    for name, items in suite_cases(data_dir).items():
        if name in REFERENCES:
            for data, ok, desc in items:
                assert ok or not REFERENCES[name](data), (name, data, desc)


# --------------------------------------------------------------------------------------------
# Hypothesis: strings of each language are valid; loose random strings agree with the oracles
# --------------------------------------------------------------------------------------------


def language(name: str) -> st.SearchStrategy[str]:
    """Strings drawn from the format's own language (its printed pattern)."""
    regex = format_regex(name)
    assert regex is not None
    return st.from_regex(re.compile(regex_to_pattern(regex)), fullmatch=True)


def email_language(idn: bool) -> st.SearchStrategy[str]:
    """E-mail addresses of the language (its Intersect node has no printed pattern)."""
    atom = f"[{'a-z0-9!#$%&*+/=?^_`{|}~-'}{'é中' if idn else ''}]{{1,8}}"
    local = st.from_regex(f'{atom}(?:\\.{atom}){{0,3}}|"[ a-z@.\\\\"]{{0,10}}"', fullmatch=True)
    domain = language("idn-hostname" if idn else "hostname") | st.sampled_from(
        ["[127.0.0.1]", "[IPv6:::1]", "[IPv6:1:2:3:4:5:6:1.2.3.4]"]
    )
    return st.builds(lambda a, b: f"{a}@{b}", local, domain)


@pytest.mark.parametrize("name", sorted(REFERENCES))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_language_strings_are_valid(name: str, data: st.DataObject) -> None:
    if name in ("email", "idn-email"):  # drawn from a superset: keep the accepted ones
        text = data.draw(email_language(name == "idn-email"))
        if not accepts(name, text):
            return
    else:
        text = data.draw(language(name))
        assert accepts(name, text)
    assert REFERENCES[name](text), f"{name} accepts invalid {text!r}"


LOOSE = {
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9০-]{6,12}",
    "time": r"[0-2][0-9]:[0-6][0-9]:[56][0-9](\.[0-9]{1,3})?([Zz]|[+-][0-2][0-9]:[0-6][0-9])",
    "date-time": r"[0-9]{4}-[01][0-9]-[0-3][0-9][Tt ][0-2][0-9]:[0-5][0-9]:60[Zz+-][0-9:]{0,6}",
    "ipv4": r"[0-9]{1,3}(\.[0-9]{1,3}){2,4}|[0-9.]{1,16}",
    "ipv6": r"([0-9a-fA-F]{0,5}:){1,9}[0-9a-fA-F]{0,4}|(::)?([0-9a-f]{1,4}:){0,6}[0-9.]{7,15}",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-gA-F]{4}-[0-9a-f]{4}-[0-9a-f-]{4}-[0-9a-f]{11,13}",
    "hostname": r"[a-zA-Z0-9.-]{1,70}|([a-z0-9-]{1,64}\.){1,9}[a-z0-9-]{1,64}",
    "idn-hostname": (
        r"([a-zA-Z0-9\-ßéαяあア中한·\u0300\u05d0\u3002]{1,12}\.){0,5}[a-z0-9éα中-]{1,70}"
    ),
    "email": r'[a-z0-9."@()\[\] .-]{1,20}@[a-z0-9.\[\]:IPv6-]{1,20}',
    "idn-email": r'[a-zé中0-9."@ .-]{1,20}@[a-z0-9é中.\u3002\[\]:-]{1,20}',
    "json-pointer": r"[/~01a]{0,12}",
    "relative-json-pointer": r"[0-9]{0,3}[#/~01a]{0,8}",
}


@pytest.mark.parametrize("name", sorted(LOOSE))
@settings(max_examples=250, deadline=None)
@given(data=st.data())
def test_loose_strings_against_oracles(name: str, data: st.DataObject) -> None:
    text = data.draw(st.from_regex(LOOSE[name], fullmatch=True))
    if accepts(name, text):
        assert REFERENCES[name](text), f"{name} accepts invalid {text!r}"
        if name in CHECKER.checkers:  # jsonschema's own checker, where it has one
            assert CHECKER.conforms(text, name), f"{name}: jsonschema rejects {text!r}"


# --------------------------------------------------------------------------------------------
# Language relations and targeted cases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("small", "large"),
    [
        ("uri", "uri-reference"),
        ("uri", "iri"),
        ("uri-reference", "iri-reference"),
        ("ipv4", "hostname"),
        ("hostname", "uri-reference"),
        ("json-pointer", "uri-template"),
    ],
)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_inclusions(small: str, large: str, data: st.DataObject) -> None:
    text = data.draw(language(small))
    if small == "json-pointer":
        text = re.sub(r"[^a-z0-9/]", "", text)
    assert accepts(large, text), f"{small} {text!r} is not {large}"


@pytest.mark.parametrize(
    ("name", "text", "ok"),
    [
        ("date", "0000-01-01", False),  # year 0 is left out (Python has no year 0)
        ("date", "2000-02-29", True),
        ("date", "1900-02-29", False),
        ("time", "05:29:60+05:30", True),
        ("time", "23:59:60-00:00", True),
        ("time", "23:59:60z", True),
        ("time", "22:59:60-01:00", True),
        ("time", "23:59:60+00:01", False),
        ("time", "23:59:60.5+05:30", False),
        ("date-time", "2016-12-31t23:59:60.25Z", True),
        ("hostname", "a" * 63 + "." + "b" * 63 + "." + "c" * 63, True),
        ("hostname", ".".join(["a" * 30] * 8), True),
        ("hostname", ".".join(["a" * 63] * 4), False),
        ("hostname", "ab--c.com", False),
        ("idn-hostname", "실례.테스트", True),
        ("idn-hostname", "Example.com", False),
        ("idn-hostname", "ü" * 10, False),
        ("email", "a" * 64 + "@example.com", True),
        ("email", "a" * 65 + "@example.com", False),
        ("email", '"a\\"b"@example.com', True),
        ("idn-email", "é" * 32 + "@example.com", True),
        ("idn-email", "é" * 33 + "@example.com", False),
        ("ipv6", "::ffff:1.2.3.4", True),
        ("ipv6", "1:2:3:4:5:6:7::", True),
        ("ipv6", "1:2:3:4:5:6:7:8:9", False),
        ("uri", "http://[v7.a:b]/", True),
        ("uri", "http://a b", False),
        ("iri", "http://x/?\U000f0000#y", True),
        ("iri", "http://x/#\U000f0000", False),
        ("uri-template", "{+a,b.c:4,d*}", True),
        ("uri-template", "{=a}", False),
        ("relative-json-pointer", "0+1/a", False),
        ("duration", "P1Y2M3DT4H5M6S", True),
        ("duration", "P1W2D", False),
    ],
)
def test_targeted(name: str, text: str, ok: bool) -> None:
    assert accepts(name, text) is ok


@pytest.mark.parametrize("cp_range", list(IDN_LETTERS.ranges))
def test_idn_letters_are_valid_u_labels(cp_range: tuple[int, int]) -> None:
    lo, hi = cp_range
    for cp in range(lo, hi + 1, max(1, (hi - lo) // 200)):
        assert ref_idn_hostname("a" + chr(cp) + "b"), hex(cp)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from([chr(lo) for lo, _ in IDN_LETTERS.ranges] + ["\ud7a3", "a"])))
def test_idn_labels_fit_63_octets(label: str) -> None:
    label = (label or "a")[:9]
    if accepts("idn-hostname", label):
        assert len(idna.encode(label)) <= 63


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**128 - 1), st.integers(1, 3_652_058))
def test_exact_formats_accept_valid(v4: int, v6: int, ordinal: int) -> None:
    """The exact formats accept every valid string (completeness, beside soundness)."""
    assert accepts("ipv4", str(ipaddress.IPv4Address(v4)))
    address = ipaddress.IPv6Address(v6)
    assert accepts("ipv6", address.compressed)
    assert accepts("ipv6", address.exploded.upper())
    assert accepts("ipv6", "::ffff:" + str(ipaddress.IPv4Address(v4)))
    assert accepts("uuid", str(uuid.UUID(int=v6)))
    day = datetime.date.fromordinal(ordinal)
    assert accepts("date", day.isoformat())
    assert accepts("date-time", f"{day.isoformat()}T{v4 % 24:02d}:{v4 % 60:02d}:{v6 % 60:02d}Z")


def test_recurring_format_bodies_enter_the_lexer_as_their_minimal_dfa(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From its second build on, a big format body is spliced as its cached minimal DFA.

    The lexers compiled with and without the cache accept the same tokens (masks walked over
    valid and invalid texts on a small vocabulary).
    """
    from constrain import Compiler, Grammar, Matcher
    from constrain.automata import lexer, nfa
    from constrain.automata.nfa_parts import FragmentCache
    from constrain.testing import tiny_vocabulary

    vocab = tiny_vocabulary()
    schema = {
        "type": "object",
        "properties": {k: {"type": "string", "format": "uri"} for k in ("a", "b", "c")},
    }
    monkeypatch.setattr(lexer, "MINIMIZE_MAX_CELLS", 1 << 30)  # minimal lexers: compared below
    monkeypatch.setattr(nfa, "_DFA_SEEN", {})
    monkeypatch.setattr(nfa, "_DFA_FRAGMENTS", FragmentCache(4096, max_bytes=64 << 20))
    cached = Compiler(vocab, cache_bytes=0).compile(Grammar.from_json_schema(schema))
    assert nfa._DFA_FRAGMENTS.fragments()  # built at the second field
    again = Compiler(vocab, cache_bytes=0).compile(Grammar.from_json_schema(schema))
    monkeypatch.setattr(nfa, "_DFA_MIN_STATES", 1 << 40)
    monkeypatch.setattr(nfa, "_DFA_FRAGMENTS", FragmentCache(4096, max_bytes=64 << 20))
    plain = Compiler(vocab, cache_bytes=0).compile(Grammar.from_json_schema(schema))
    assert again.lexer.num_states == plain.lexer.num_states  # both minimal
    texts = [
        '{"a":"https://example.com/x?y=1#z","b":"mailto:someone@example.org"}',
        '{"c":"urn:isbn:0451450523","a":"ftp://[::1]:21/"}',
        '{"a":"not a uri","b":"http://exa mple.com"}',
        '{"b":"http://example.com/%zz"}',
    ]
    for text in texts:
        for cut in range(0, len(text) + 1, 3):
            mp, mc = Matcher(plain), Matcher(cached)
            assert mp.accept_bytes(text[:cut]) == mc.accept_bytes(text[:cut])
            assert mp.allowed_token_ids().tolist() == mc.allowed_token_ids().tolist()
            assert mp.is_accepting() == mc.is_accepting()


def test_fragment_cache_keeps_a_running_byte_count() -> None:
    """The process-wide DFA fragment cache: bytes counted as entries come and go, budget exact."""
    import numpy as np

    from constrain.automata.byte_dfa import DfaFragment
    from constrain.automata.nfa_parts import FragmentCache
    from constrain.ir import Literal

    def frag(edges: int) -> DfaFragment:  # 16 bytes per edge
        return DfaFragment(1, np.zeros((4, edges), np.int32), np.zeros(1, np.int64))

    def total(cache: FragmentCache) -> int:
        return sum(f.table.nbytes for f in cache.fragments())

    a, b, c, d = (Literal(t) for t in "abcd")
    cache = FragmentCache(3, max_bytes=160)
    assert cache.claim(a) and not cache.claim(a)
    assert a in cache and cache.get(a) is None and cache.nbytes == 0
    assert cache.add(a, frag(6)) and cache.nbytes == 96 == total(cache)
    assert cache.claim(b) and not cache.add(b, frag(5))  # 96 + 80 > 160: the placeholder stays
    assert b in cache and cache.get(b) is None and cache.nbytes == 96
    assert cache.add(b, frag(4)) and cache.nbytes == 160 == total(cache)  # exactly the budget
    assert cache.add(c, frag(0)) and len(cache) == 3
    assert cache.claim(d) and a not in cache  # the oldest entry goes, and its bytes with it
    assert cache.nbytes == 64 == total(cache)
    assert cache.add(d, frag(6)) and cache.nbytes == 160 == total(cache)
