"""The ``.npz`` file of a :class:`~constrain.CompiledGrammar`, read as untrusted input.

A compiled-grammar file is an uncompressed zip archive of ``.npy`` members, as ``numpy.savez``
writes it; no member is an object array:

=====================  ======  ======  =====================================================
member                 dtype   shape   content
=====================  ======  ======  =====================================================
``header``             ``<U``  ()      JSON: ``format``, ``format_version``
                                       (:data:`FORMAT_VERSION`), ``constrain_version``,
                                       ``vocab_fingerprint``, ``limits`` (the
                                       :class:`~constrain.CompileLimits`), ``grammar`` (the
                                       normalised IR, :mod:`constrain.ir.serial`)
``lexer.byte_class``   ``|u1`` (256,)  the combined lexer (:class:`~constrain.automata.lexer.
``lexer.trans``        ``<i4`` (S, C)  LexerDfa`); its terminal names are the grammar's
``lexer.accept_bits``  ``<u8`` (S, W)  terminals, in order
``lexer.alive_bits``   ``<u8`` (S, W)
``checksum``           ``<U``  ()      SHA-256 (hex) of every other member (:func:`checksum`)
=====================  ======  ======  =====================================================

The parser tables are not stored: they are rebuilt from the grammar (a few milliseconds), so
they are exactly those of a compilation. :func:`read_compiled_file` trusts nothing: it reads the
zip directory and each member's ``.npy`` header before any data (so a declared huge array
allocates nothing and nothing is unpickled), checks the header's format version, the member
set, dtypes, ranks and sizes, verifies the checksum (random damage, edited header fields), then
validates the content: the header's fields and types, the grammar IR (every node, range and
symbol), and every lexer array (shapes against the grammar's terminal count, byte classes and
state ids in range, every byte class used, no edge back to the start state, terminal bits
within the terminals, accepting bits within the alive ones), before any kernel sees an array.
Every failure is a :class:`~constrain.errors.SavedFileError` naming the file and the problem.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from constrain import npz
from constrain.automata.lexer import LexerDfa
from constrain.errors import SavedFileError
from constrain.ir import Grammar
from constrain.ir.serial import grammar_from_data, grammar_to_data

__all__ = ["FORMAT_TAG", "FORMAT_VERSION", "SavedGrammar", "checksum", "read_compiled_file"]

FORMAT_VERSION = 2
"""Version of the layout written by :meth:`CompiledGrammar.save`; other versions are refused.

Version 2 stores the grammar IR itself (version 1 printed it as Lark text, which fails for
intersections), adds the checksum, and no longer stores the parser tables."""

FORMAT_TAG = "constrain.CompiledGrammar"

# member -> (dtype string, rank); "<U" is any little-endian unicode string
_LAYOUT: dict[str, tuple[str, int]] = {
    "header": ("<U", 0),
    "lexer.byte_class": ("|u1", 1),
    "lexer.trans": ("<i4", 2),
    "lexer.accept_bits": ("<u8", 2),
    "lexer.alive_bits": ("<u8", 2),
    "checksum": ("<U", 0),
}
_HEADER_FIELDS = frozenset(
    {"format", "format_version", "constrain_version", "vocab_fingerprint", "limits", "grammar"}
)
_CHECKSUM_TAG = b"constrain.CompiledGrammar.checksum/2\x00"
_MAX_INT = 2**62


class SavedGrammar:
    """The validated content of a compiled-grammar file.

    Parameters
    ----------
    grammar : Grammar
        The normalised grammar.
    lexer : LexerDfa
        Its combined lexer.
    limits : dict of str to int or float
        The compile limits' fields, type-checked against ``limit_types``.
    """

    __slots__ = ("grammar", "lexer", "limits")

    def __init__(self, grammar: Grammar, lexer: LexerDfa, limits: dict[str, Any]) -> None:
        self.grammar = grammar
        self.lexer = lexer
        self.limits = limits


def checksum(arrays: Mapping[str, np.ndarray[Any, Any]]) -> str:
    """Return the SHA-256 hex digest of every member but ``checksum``: name, dtype, shape, bytes.

    Parameters
    ----------
    arrays : mapping of str to numpy.ndarray
        The members, in any order (they are hashed sorted by name).

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    return npz.checksum(_CHECKSUM_TAG, arrays)


def write_compiled_file(
    path: Path,
    *,
    grammar: Grammar,
    lexer: LexerDfa,
    vocab_fingerprint: str,
    limits: Mapping[str, Any],
    constrain_version: str,
) -> None:
    """Write a compiled grammar's file atomically (a temporary file, then a rename).

    Parameters
    ----------
    path : Path
        Destination.
    grammar : Grammar
        The normalised grammar.
    lexer : LexerDfa
        Its combined lexer.
    vocab_fingerprint : str
        The vocabulary's fingerprint.
    limits : mapping
        The compile limits' fields.
    constrain_version : str
        The writing library's version (informative).

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    header = {
        "format": FORMAT_TAG,
        "format_version": FORMAT_VERSION,
        "constrain_version": constrain_version,
        "vocab_fingerprint": vocab_fingerprint,
        "limits": dict(limits),
        "grammar": grammar_to_data(grammar),
    }
    members: dict[str, np.ndarray[Any, Any]] = {
        "header": np.array(json.dumps(header, separators=(",", ":"))),
    }
    for name, (kind, _) in _LAYOUT.items():
        if name.startswith("lexer."):
            members[name] = np.ascontiguousarray(getattr(lexer, name[6:]), dtype=kind)
    npz.write_archive(path, _CHECKSUM_TAG, members)


def read_compiled_file(
    path: Path, vocab_fingerprint: str | Callable[[Grammar], str], limit_types: Mapping[str, type]
) -> SavedGrammar:
    """Read and validate a compiled-grammar file.

    Parameters
    ----------
    path : Path
        The ``.npz`` file.
    vocab_fingerprint : str or callable
        The fingerprint of the vocabulary it must have been compiled for, or a function of the
        file's (validated) grammar that returns it: a grammar with special tokens is compiled
        for the vocabulary in which they have bytes (``Vocabulary.with_special_bytes``).
    limit_types : mapping of str to type
        The compile limits' field names and types (``int`` or ``float``).

    Returns
    -------
    SavedGrammar
        The grammar, its lexer (read-only arrays) and the limits, all validated.

    Raises
    ------
    SavedFileError
        If the file cannot be read, is not a compiled grammar, has another format version, was
        compiled for another vocabulary, or is damaged or inconsistent in any way; the message
        names the file and the problem.
    """
    try:
        size = npz.sniff(path)
    except OSError as err:
        raise SavedFileError(path, f"cannot read the file ({err})") from None
    except npz.DamagedArchiveError as err:
        raise SavedFileError(path, f"not a constrain compiled grammar ({err})") from None
    try:
        with zipfile.ZipFile(path) as zf:
            header, arrays = _read_members(zf, size)
    except _RefusedError as err:
        raise SavedFileError(path, str(err)) from None
    except npz.DamagedArchiveError as err:
        raise SavedFileError(path, f"corrupt compiled grammar: {err}") from None
    except npz.ARCHIVE_ERRORS as err:
        raise SavedFileError(
            path, f"corrupt compiled grammar: unreadable archive ({err})"
        ) from None
    another = "compiled for another vocabulary; compile it for this tokenizer"
    if isinstance(vocab_fingerprint, str) and header["vocab_fingerprint"] != vocab_fingerprint:
        raise SavedFileError(path, another)
    try:
        saved = _check_content(header, arrays, limit_types)
    except ValueError as err:
        raise SavedFileError(path, f"corrupt compiled grammar: {err}") from None
    if callable(vocab_fingerprint) and header["vocab_fingerprint"] != vocab_fingerprint(
        saved.grammar
    ):
        raise SavedFileError(path, another)
    return saved


class _RefusedError(Exception):
    """A problem found inside the archive; :func:`read_compiled_file` names the file."""


def _read_members(
    zf: zipfile.ZipFile, size: int
) -> tuple[dict[str, Any], dict[str, np.ndarray[Any, Any]]]:
    """Check the zip directory and the header's version, then read and checksum every member."""
    infos = npz.member_infos(zf, size)
    if "header" not in infos:
        raise _RefusedError("not a constrain compiled grammar (no 'header' entry)")
    text = str(npz.read_member(zf, infos["header"], "header", _LAYOUT))
    try:
        header = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        header = None
    if type(header) is not dict or "format_version" not in header:
        raise _RefusedError("not a constrain compiled grammar (no JSON header)")
    version = header["format_version"]
    if version != FORMAT_VERSION or type(version) is not int:
        shown = json.dumps(version)[:20]
        raise _RefusedError(
            f"compiled-grammar format {shown}, this constrain reads format {FORMAT_VERSION}; "
            "recompile the grammar"
        )
    unknown = sorted(set(infos) - set(_LAYOUT))
    if unknown:
        raise _RefusedError(f"corrupt compiled grammar: unexpected entry {unknown[0][:40]!r}")
    missing = sorted(set(_LAYOUT) - set(infos))
    if missing:
        raise _RefusedError(f"corrupt compiled grammar: entry {missing[0]!r} is missing")
    arrays = {name: npz.read_member(zf, infos[name], name, _LAYOUT) for name in _LAYOUT}
    if str(arrays["checksum"]) != checksum(arrays):
        raise _RefusedError(
            "corrupt compiled grammar: checksum mismatch (the file was damaged or edited)"
        )
    if set(header) != _HEADER_FIELDS or header["format"] != FORMAT_TAG:
        raise _RefusedError(
            "corrupt compiled grammar: the header's fields are not those of the format"
        )
    if type(header["vocab_fingerprint"]) is not str:
        raise _RefusedError("corrupt compiled grammar: the vocabulary fingerprint is not a string")
    return header, arrays


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _check_limits(limits: Any, limit_types: Mapping[str, type]) -> dict[str, Any]:
    if type(limits) is not dict or set(limits) != set(limit_types):
        raise ValueError(f"limits: expected the fields {sorted(limit_types)}")
    out: dict[str, int | float] = {}
    for name, kind in limit_types.items():
        value: Any = limits[name]
        if kind is float and type(value) is int:
            value = float(value)
        is_kind = type(value) is kind
        if not (is_kind and 0 <= value <= _MAX_INT and math.isfinite(value)):
            raise ValueError(f"limits: {name} is not a {kind.__name__} in [0, {_MAX_INT}]")
        out[name] = value
    return out


def _check_content(
    header: dict[str, Any], arrays: dict[str, np.ndarray[Any, Any]], limit_types: Mapping[str, type]
) -> SavedGrammar:
    """Validate the header's fields and every array; raise ValueError naming the first problem."""
    limits = _check_limits(header["limits"], limit_types)
    try:
        grammar = grammar_from_data(header["grammar"])
    except RecursionError:
        raise ValueError("the grammar is nested too deeply") from None
    if grammar.normalise() != grammar:
        raise ValueError("the grammar is not normalised (it was not written by a compilation)")
    names = tuple(t.name for t in grammar.terminals)
    byte_class = arrays["lexer.byte_class"]
    trans = arrays["lexer.trans"]
    accept, alive = arrays["lexer.accept_bits"], arrays["lexer.alive_bits"]
    num_states, num_classes = trans.shape
    words = max(1, -(-len(names) // 64))
    if byte_class.shape != (256,):
        raise ValueError(f"lexer.byte_class has shape {byte_class.shape}, expected (256,)")
    if not 1 <= num_states <= limits["max_lexer_states"]:
        raise ValueError(f"lexer.trans has {num_states} states (max_lexer_states is the limit)")
    if not 1 <= num_classes <= 256 or int(byte_class.max()) >= num_classes:
        raise ValueError(f"lexer.byte_class names a class outside the {num_classes} of trans")
    if not np.bincount(byte_class, minlength=num_classes).all():
        raise ValueError("lexer.trans has a byte class that no byte belongs to")
    if ((trans < -1) | (trans >= num_states) | (trans == 0)).any():
        raise ValueError(f"lexer.trans holds a state outside 1..{num_states - 1} (or -1)")
    for label, bits in (("accept_bits", accept), ("alive_bits", alive)):
        if bits.shape != (num_states, words):
            raise ValueError(
                f"lexer.{label} has shape {bits.shape}, expected ({num_states}, {words}) for "
                f"{len(names)} terminals"
            )
    if len(names) % 64 or not names:
        beyond = np.uint64(~((1 << (len(names) % 64)) - 1) & (2**64 - 1))
        if ((alive[:, -1] & beyond) != 0).any():
            raise ValueError("lexer.alive_bits names a terminal the grammar does not have")
    if (accept & ~alive).any():
        raise ValueError("lexer.accept_bits accepts a terminal that is not alive")
    if num_states > 1 and not alive[1:].any(axis=1).all():
        raise ValueError("lexer.alive_bits has a state where no terminal is alive")
    lexer = LexerDfa(byte_class, trans, accept, alive, names)
    return SavedGrammar(grammar, lexer, limits)
