"""Stage 1: case folding exactly as Python's ``re.IGNORECASE`` does it.

One implementation of Python's rules for the package: the regex front end folds literals and
classes through :func:`fold_literal` and :func:`fold_class`, and Lark's case-insensitive strings
(``"select"i``) become :func:`ignorecase_literal`. Literals are folded through
``_sre.unicode_tolower`` and Python's extra cases; classes are resolved by probing Python's
engine on the few thousand case-relevant code points.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

from constrain.ir.nodes import CharSet, Concat

__all__ = ["fold_class", "fold_literal", "ignorecase_charset", "ignorecase_literal"]

_SRE: Any = importlib.import_module("_sre")

_CASED_PLANES_END = 0x20000


@functools.cache
def _case_tables() -> tuple[tuple[int, ...], CharSet, dict[int, tuple[int, ...]]]:
    """Return the case-relevant code points, them as a set, and ``{lower: (chars...)}``.

    A code point outside the returned set is neither cased nor the lowercase of another one, so
    ``re.IGNORECASE`` matches it exactly as a case-sensitive pattern would.
    """
    iscased, tolower = _SRE.unicode_iscased, _SRE.unicode_tolower
    # Cased characters lie in planes 0 and 1 (the last, Adlam, ends at U+1E943 in Unicode 15):
    # planes 2-3 hold ideographs, 14 tags and selectors, 15-16 private use, none with case
    # mappings, and new scripts are encoded in plane 1. Scanning 2**17 code points instead of
    # all 1,114,112 takes ~10 ms instead of ~100 (a first case-insensitive compile).
    relevant = {c for c in range(_CASED_PLANES_END) if iscased(c)}
    relevant.update([tolower(c) for c in relevant])
    relevant.update(range(0x41, 0x5B))
    relevant.update(range(0x61, 0x7B))
    for key, others in _extra_cases().items():
        relevant.add(key)
        relevant.update(others)
    inverse: dict[int, list[int]] = {}
    for c in relevant:
        inverse.setdefault(tolower(c), []).append(c)
    ordered = tuple(sorted(relevant))
    as_set = CharSet.of((c, c) for c in ordered)
    return ordered, as_set, {k: tuple(sorted(v)) for k, v in inverse.items()}


@functools.cache
def _extra_cases() -> dict[int, tuple[int, ...]]:
    """Return Python's extra IGNORECASE equivalences, ``{lowercase: (other lowercases...)}``."""
    try:
        mod: Any = importlib.import_module("re._casefix")
    except ImportError:  # pragma: no cover - Python 3.10 keeps them in sre_compile
        mod = importlib.import_module("sre_compile")
        return dict(getattr(mod, "_ignorecase_fixes", {}))
    return dict(mod._EXTRA_CASES)


def fold_literal(cp: int, ascii_only: bool) -> CharSet | None:
    """Return the set matched by ``cp`` under IGNORECASE, or None when it is uncased."""
    if ascii_only:
        if not _SRE.ascii_iscased(cp):
            return None
        lo = _SRE.ascii_tolower(cp)
        return CharSet.of([(lo, lo), (lo - 32, lo - 32)])
    if not _SRE.unicode_iscased(cp):
        return None
    lo = _SRE.unicode_tolower(cp)
    _, _, inverse = _case_tables()
    keys = (lo, *_extra_cases().get(lo, ()))
    return CharSet.of((c, c) for k in keys for c in inverse.get(k, (k,)))


@functools.lru_cache(maxsize=1024)
def fold_class(class_text: str, flags: int, base: CharSet) -> CharSet:
    """Return the set matched by a class under IGNORECASE, by probing Python's engine.

    ``base`` is the case-sensitive set of the class; only case-relevant code points can differ
    from it, so only those (a few thousand) are tested.
    """
    ordered, relevant, _ = _case_tables()
    probe = re.compile(class_text, flags).fullmatch
    hits = [(c, c) for c in ordered if probe(chr(c))]
    return base.intersect(relevant.negate()).union(CharSet.of(hits))


# --------------------------------------------------------------------------------------------
# Case-insensitive literals (Lark ``"select"i``), matched as Python's ``re.IGNORECASE`` does
# --------------------------------------------------------------------------------------------


@functools.cache
def ignorecase_charset(ch: str) -> CharSet:
    """Return the characters that ``re.fullmatch(re.escape(ch), c, re.IGNORECASE)`` accepts.

    This is how Lark matches a case-insensitive string (``"select"i``), so ``"k"i`` also
    accepts the Kelvin sign U+212A and ``"s"i`` the long s U+017F. The case folding is
    :func:`fold_literal`'s, the one implementation of Python's rules in the package.

    Parameters
    ----------
    ch : str
        A single character.

    Returns
    -------
    CharSet
        ``ch`` and its case variants.
    """
    folded = fold_literal(ord(ch), ascii_only=False)
    return CharSet.chars(ch) if folded is None else folded


def ignorecase_literal(text: str) -> Concat:
    """Return the regex IR of ``text`` matched case-insensitively: one CharSet per character.

    ``Grammar.to_lark`` prints such a node back as ``"text"i``.
    """
    return Concat(tuple(ignorecase_charset(c) for c in text))
