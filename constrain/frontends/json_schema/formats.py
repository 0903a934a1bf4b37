r"""JSON Schema ``format`` names as regular languages over the decoded string contents.

:func:`format_regex` returns the regex IR (:mod:`constrain.ir`) of the characters a string may
hold to be valid for a ``format`` of JSON Schema draft 2020-12; the JSON Schema front end adds
the quotes and the JSON escaping. The languages are *sound*: every string they accept is valid by
the RFC the format names and by the official JSON-Schema-Test-Suite. Where the exact language has
no compact automaton, or needs more than a regular language (Punycode decoding, the IDNA tables),
the language is a *conservative* subset, so a constrained model may be unable to write a rare
valid string but never writes an invalid one:

* ``date-time``/``time``: a leap second (``:60``) is accepted only where the time, moved to UTC,
  is 23:59:60, and only with an offset whose minutes are 00 or 30; years run from 0001.
* ``hostname``: LDH labels of at most 63 characters; no ``xn--`` (A-label) or other label with
  ``--`` in its third and fourth places; at most 3 labels, or at most 8 labels of 30 characters
  or fewer (so that the name never exceeds 253 characters).
* ``idn-hostname``: as ``hostname`` in lower case, plus labels of at most 9 characters mixing
  lower-case ASCII with a list of PVALID left-to-right letters (Latin-1, Greek, Cyrillic,
  Hiragana, Katakana, CJK, Hangul), whose A-label is then at most 59 octets.
* ``email``/``idn-email``: a dot-atom or quoted local part of at most 64 octets, at a host name
  (as above, at most 189 characters) or an ``[IPv4]`` / ``[IPv6:...]`` address literal.
* ``relative-json-pointer``: without the index manipulation (``0+1``) of later drafts.
* ``uri-template``: the RFC 6570 operators without the reserved ones (``= , ! @ |``).

``regex`` (ECMA-262 regular expressions) is not a regular language: :func:`format_regex`
returns None for it and for unknown names.
"""

from __future__ import annotations

import functools
import re

from constrain.frontends.regex import parse_regex
from constrain.ir import ANY_CHAR, Alt, CharSet, Concat, Intersect, Literal, Regex, Repeat

__all__ = ["SUPPORTED_FORMATS", "format_regex"]


def _ranges(ranges: list[tuple[int, int]]) -> str:
    """Return the text of a character-class body matching the code-point ranges."""
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


def _parse(pattern: str) -> Regex:
    """Parse a format pattern with ``re.ASCII`` (so no class escape is ever Unicode-wide)."""
    return parse_regex(pattern, flags=re.ASCII)


# --------------------------------------------------------------------------------------------
# Dates and times (RFC 3339 section 5.6, appendix A)
# --------------------------------------------------------------------------------------------

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001 .. 9999
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_MULT4 = "(?:0[48]|[2468][048]|[13579][26])"  # 04 .. 96 in steps of 4
_LEAP_YEAR = f"(?:[0-9]{{2}}{_MULT4}|{_MULT4}00)"  # year 0000 left out
DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"

_HOUR = "(?:[01][0-9]|2[0-3])"
_MINUTE = "[0-5][0-9]"
_FRACTION = "(?:\\.[0-9]+)?"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"
_LEAP_OFFSET_MINUTES = (0, 30)


def _leap_second_times() -> str:
    """Return the ``HH:MM:60[.frac]offset`` strings that are 23:59:60 in UTC (see module doc)."""
    alts: list[str] = []
    for om in _LEAP_OFFSET_MINUTES:
        for hour in range(24):
            # local - offset = 23:59  <=>  local = 23:59 + offset.
            minus_minute, minus_hour = 59 - om, 23 - hour  # local HH:MM for offset -oh:om
            alts.append(f"{hour:02d}:{minus_minute:02d}:60{_FRACTION}-{minus_hour:02d}:{om:02d}")
            plus_hour = hour if om else (hour - 1) % 24  # local = 23:59 + hour:om
            plus_minute = (om + 59) % 60
            alts.append(f"{plus_hour:02d}:{plus_minute:02d}:60{_FRACTION}\\+{hour:02d}:{om:02d}")
    alts.append(f"23:59:60{_FRACTION}[Zz]")
    return "(?:" + "|".join(alts) + ")"


TIME = f"(?:{_HOUR}:{_MINUTE}:{_MINUTE}{_FRACTION}{_OFFSET}|{_leap_second_times()})"
DATE_TIME = f"{DATE}[Tt]{TIME}"

_DUR_TIME = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = f"(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:{_DUR_TIME})?"
DURATION = f"P(?:{_DUR_DATE}|{_DUR_TIME}|[0-9]+W)"

# --------------------------------------------------------------------------------------------
# IP addresses and UUIDs
# --------------------------------------------------------------------------------------------

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"


def _ipv6() -> str:
    """Return RFC 3986's ``IPv6address`` (every ``::`` compression, an IPv4 tail)."""
    h16 = "[0-9A-Fa-f]{1,4}"
    ls32 = f"(?:{h16}:{h16}|{IPV4})"

    def rep(n: int) -> str:  # n times "h16:"
        return f"(?:{h16}:){{{n}}}" if n else ""

    def head(n: int) -> str:  # [ *(n-1)( h16 ":" ) h16 ]
        return "" if n == 0 else f"(?:(?:{h16}:){{0,{n - 1}}}{h16})?"

    alts = [f"{rep(6)}{ls32}", f"::{rep(5)}{ls32}"]
    alts += [f"{head(k)}::{rep(5 - k)}{ls32}" for k in range(1, 6)]
    alts += [f"{head(6)}::{h16}", f"{head(7)}::"]
    return "(?:" + "|".join(alts) + ")"


IPV6 = _ipv6()
UUID = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"

# --------------------------------------------------------------------------------------------
# URIs and IRIs (RFC 3986 appendix A, RFC 3987 section 2.2), URI templates (RFC 6570)
# --------------------------------------------------------------------------------------------

_UCSCHAR = [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)] + [
    (plane << 16, (plane << 16) + 0xFFFD) for plane in range(1, 14)
]
_UCSCHAR.append((0xE1000, 0xEFFFD))
_IPRIVATE = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]


def _uri(iri: bool, reference: bool) -> str:
    """Return RFC 3986's ``URI`` or ``URI-reference``, or RFC 3987's ``IRI`` variants."""
    ucs = _ranges(_UCSCHAR) if iri else ""
    unres = f"A-Za-z0-9\\-._~{ucs}"
    sub = "!$&'()*+,;="
    pct = "%[0-9A-Fa-f]{2}"
    pchar = f"(?:[{unres}{sub}:@]|{pct})"
    scheme = "[A-Za-z][A-Za-z0-9+\\-.]*"
    userinfo = f"(?:[{unres}{sub}:]|{pct})*"
    future = f"[Vv][0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~{sub}:]+"  # ASCII only, as in RFC 3987
    host = f"(?:\\[(?:{IPV6}|{future})\\]|(?:[{unres}{sub}]|{pct})*)"  # reg-name covers IPv4
    authority = f"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    segment = f"{pchar}*"
    abempty = f"(?:/{segment})*"
    absolute = f"/(?:{pchar}+{abempty})?"
    rootless = f"{pchar}+{abempty}"
    noscheme = f"(?:[{unres}{sub}@]|{pct})+{abempty}"
    private = _ranges(_IPRIVATE) if iri else ""
    query = f"(?:\\?(?:{pchar}|[/?{private}])*)?"
    fragment = f"(?:#(?:{pchar}|[/?])*)?"
    absolute_uri = f"{scheme}:(?://{authority}{abempty}|{absolute}|{rootless})?{query}{fragment}"
    if not reference:
        return absolute_uri
    relative = f"(?://{authority}{abempty}|{absolute}|{noscheme})?{query}{fragment}"
    return f"(?:{absolute_uri}|{relative})"


def _uri_template() -> str:
    """Return RFC 6570's ``URI-Template`` (level 4) without the reserved operators."""
    pct = "%[0-9A-Fa-f]{2}"
    # The RFC's literals leave out "'" (%x27); the test suite (and RFC erratum 6937) allow it.
    literal = f"(?:[!#$&'()*+,\\-./0-9:;=?@A-Z\\[\\]_a-z~{_ranges(_UCSCHAR + _IPRIVATE)}]|{pct})"
    varchar = f"(?:[A-Za-z0-9_]|{pct})"
    varspec = f"{varchar}(?:\\.?{varchar})*(?::[1-9][0-9]{{0,3}}|\\*)?"
    expression = f"\\{{[+#./;?&]?{varspec}(?:,{varspec})*\\}}"
    return f"(?:{literal}|{expression})*"


_JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"
RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"

# --------------------------------------------------------------------------------------------
# Host names (RFC 1123, RFC 5890-5893) and e-mail addresses (RFC 5321, RFC 6531)
# --------------------------------------------------------------------------------------------

# Lower-case letters that are PVALID in IDNA2008, NFC-stable, left-to-right (Bidi class L) and
# need no contextual rule: Latin-1, Greek, Cyrillic, Hiragana, Katakana, CJK, Hangul syllables.
IDN_LETTERS = CharSet.of(
    [(0xDF, 0xF6), (0xF8, 0xFF), (0x3AC, 0x3CE), (0x430, 0x44F), (0x451, 0x45F)]
    + [(0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3)]
)
# Punycode spends at most 6 digits per such letter, so a label of 9 characters or fewer has an
# A-label of at most 4 ("xn--") + 1 ("-") + 9 * 6 = 59 octets, below the 63 octets allowed.
_IDN_LABEL_CHARS = 9
_IDN_DOTS = "\\.\u3002\uff0e\uff61"


def _label(alnum: str, max_len: int) -> str:
    """Return an LDH label of 1..max_len characters, without ``--`` in places 3 and 4.

    ``alnum`` is the body of a character class (letters and digits). Labels start and end with
    one of them; RFC 5891 reserves ``??--`` labels for A-labels, whose Punycode is left out.
    """
    a, h = f"[{alnum}]", f"[{alnum}\\-]"
    longer = f"-{a}" if max_len == 4 else f"-{a}(?:{h}{{0,{max_len - 5}}}{a})?"
    return f"{a}(?:{a}|{h}{a}|{h}(?:{a}{h}{{0,{max_len - 4}}}{a}|{longer}))?"


def _dns_name(labels: dict[int, str], dots: str, schemes: tuple[tuple[int, int], ...]) -> str:
    """Return dot-separated labels: for some ``(count, size)``, at most count labels of size.

    ``labels[size]`` is the pattern of the labels whose A-label has at most ``size`` octets.
    """
    alts = [f"{labels[size]}(?:[{dots}]{labels[size]}){{0,{count - 1}}}" for count, size in schemes]
    return "(?:" + "|".join(alts) + ")"


# (labels, octets per label): 3 * 63 + 2 = 191 and 8 * 30 + 7 = 247, below RFC 1123's 253.
_HOST_SCHEMES = ((3, 63), (8, 30))
# In an address the domain stays within 189 octets: 64 + 1 + 189 = 254 (RFC 5321 4.5.3.1.3).
_MAIL_SCHEMES = ((2, 63), (6, 30))


def _hostname(idn: bool, schemes: tuple[tuple[int, int], ...]) -> str:
    """Return a host name (``idn``: lower case, with the IDN letters, any IDNA dot)."""
    if not idn:
        labels = {size: _label("A-Za-z0-9", size) for _, size in schemes}
        return _dns_name(labels, "\\.", schemes)
    letters = "a-z0-9" + _ranges(list(IDN_LETTERS.ranges))
    # Labels with IDN letters (A-label of at most 59 octets) only where 63 octets are allowed.
    labels = {
        size: f"(?:{_label('a-z0-9', size)}|{_label(letters, _IDN_LABEL_CHARS)})"
        if size >= 63
        else _label("a-z0-9", size)
        for _, size in schemes
    }
    return _dns_name(labels, _IDN_DOTS, schemes)


_ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-"
_QUOTED = '"(?:[ !#-\\[\\]-~]|\\\\[ -~])*"'  # RFC 5321 qtextSMTP / quoted-pairSMTP


def _email(idn: bool) -> Regex:
    """Return RFC 5321's ``Mailbox`` (RFC 6531's with ``idn``), local part within 64 octets."""
    non_ascii = _ranges([(0x80, 0xD7FF), (0xE000, 0x10FFFF)]) if idn else ""
    atom = f"[{_ATEXT}{non_ascii}]+"
    quoted = f'"(?:[ !#-\\[\\]-~{non_ascii}]|\\\\[ -~])*"' if idn else _QUOTED
    local = _parse(f"{atom}(?:\\.{atom})*|{quoted}")
    limit: Regex = Repeat(CharSet(((0, 0x7F),)), 1, 64)
    if idn:  # at most 64 octets of UTF-8: 64 ASCII, 32 two-byte, 21 three-byte or 16 characters
        limit = Alt(
            (
                limit,
                Repeat(CharSet(((0, 0x7FF),)), 1, 32),
                Repeat(CharSet(((0, 0xD7FF), (0xE000, 0xFFFF))), 1, 21),
                Repeat(ANY_CHAR, 1, 16),
            )
        )
    domain = _parse(f"{_hostname(idn, _MAIL_SCHEMES)}|\\[(?:{IPV4}|IPv6:{IPV6})\\]")
    return Concat((Intersect((local, limit)), Literal("@"), domain))


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

_PATTERNS = {
    "date-time": DATE_TIME,
    "date": DATE,
    "time": TIME,
    "duration": DURATION,
    "hostname": "",
    "idn-hostname": "",
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": "",
    "uri-reference": "",
    "iri": "",
    "iri-reference": "",
    "uri-template": "",
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}

SUPPORTED_FORMATS: frozenset[str] = frozenset(_PATTERNS) | {"email", "idn-email"}
"""The ``format`` names :func:`format_regex` gives a language for (``regex`` is not one)."""


@functools.cache
def format_regex(name: str) -> Regex | None:
    """Return the language of the string contents valid for a JSON Schema ``format``.

    Parameters
    ----------
    name : str
        A ``format`` name of JSON Schema draft 2020-12 (``"date-time"``, ``"email"``,
        ``"ipv4"``, ...).

    Returns
    -------
    Regex or None
        The regex IR of the decoded characters of the string (no quotes, no JSON escapes),
        accepting only valid strings (see the module documentation for the conservative
        cases); None for ``"regex"`` (not a regular language) and unknown names.

    Examples
    --------
    >>> from constrain.automata.dfa import compile_regex
    >>> dfa = compile_regex(format_regex("ipv4"))
    >>> dfa.matches(b"192.168.0.1"), dfa.matches(b"256.0.0.1")
    (True, False)
    >>> format_regex("regex") is None
    True
    """
    if name in ("email", "idn-email"):
        return _email(name == "idn-email")
    pattern = _PATTERNS.get(name)
    if pattern is None:
        return None
    if name in ("hostname", "idn-hostname"):
        pattern = _hostname(name == "idn-hostname", _HOST_SCHEMES)
    elif name in ("uri", "uri-reference", "iri", "iri-reference"):
        pattern = _uri(name.startswith("iri"), name.endswith("reference"))
    elif name == "uri-template":
        pattern = _uri_template()
    return _parse(pattern)
