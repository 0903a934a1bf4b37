"""The ``.npz`` file of a :class:`constrain.Vocabulary`, read as untrusted input.

A vocabulary file is an uncompressed zip archive of ``.npy`` members, as ``numpy.savez`` writes
it. Every member has a fixed little-endian dtype and rank; no member is an object array:

==================  ======  =====  =========================================================
member              dtype   shape  content
==================  ======  =====  =========================================================
``format``          ``<U``  ()     ``"constrain.Vocabulary"``
``version``         ``<i8`` ()     :data:`VOCAB_FORMAT_VERSION`
``model_vocab_size`` ``<i8`` ()    the logits width, ``>= V``
``token_indptr``    ``<i8`` (V+1,) CSR offsets of the token bytes
``token_bytes``     ``|u1`` (N,)   concatenated token bytes
``eos_ids``         ``<i4`` (k,)   sorted end-of-sequence ids
``node_byte``       ``|u1`` (M,)   the token trie (:mod:`constrain.vocab.trie`)
``node_token``      ``<i4`` (M,)
``node_end``        ``<i4`` (M,)
``node_depth``      ``<i4`` (M,)
``token_next_dup``  ``<i4`` (V,)
``cache_key``       ``<U``  ()     optional: the disk-cache key the file was written under
``special_names``   ``<U``  (n,)   optional: names of special tokens (``Vocabulary.special_names``)
``special_name_ids`` ``<i4`` (n,)  their ids (present exactly when ``special_names`` is)
``checksum``        ``<U``  ()     SHA-256 (hex) of every other member (see :func:`checksum`)
==================  ======  =====  =========================================================

:func:`read_vocab_file` trusts nothing in the file. It reads the zip directory and each member's
``.npy`` header before any data (so a header that declares a huge array allocates nothing and no
member is ever unpickled), checks the member set, dtypes, ranks and sizes, verifies the checksum
(random damage), then validates the content: CSR offsets, id ranges, and that the trie is exactly
the trie of the tokens (:func:`constrain.vocab.trie.check_trie`), so a file whose arrays were
altered consistently and re-checksummed is refused as well. Every failure is a
:class:`~constrain.errors.VocabularyError` whose message names the file and the problem.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from constrain import npz
from constrain.errors import VocabularyError
from constrain.vocab.trie import Trie, check_trie

__all__ = [
    "FORMAT_TAG",
    "TRIE_FIELDS",
    "VOCAB_FORMAT_VERSION",
    "checksum",
    "read_vocab_file",
    "special_name_arrays",
    "special_names_of",
    "cache_dir",
    "vocab_cache_dir",
    "write_vocab_file",
]

VOCAB_FORMAT_VERSION = 2
"""Version of the ``.npz`` layout written by :meth:`Vocabulary.save`; other versions are refused.

Version 2 added the checksum over every member and dropped the content fingerprint."""

FORMAT_TAG = "constrain.Vocabulary"
TRIE_FIELDS = ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup")

# member -> (dtype string, rank); "<U" is any non-empty little-endian unicode string
_LAYOUT: dict[str, tuple[str, int]] = {
    "format": ("<U", 0),
    "version": ("<i8", 0),
    "model_vocab_size": ("<i8", 0),
    "token_indptr": ("<i8", 1),
    "token_bytes": ("|u1", 1),
    "eos_ids": ("<i4", 1),
    "node_byte": ("|u1", 1),
    "node_token": ("<i4", 1),
    "node_end": ("<i4", 1),
    "node_depth": ("<i4", 1),
    "token_next_dup": ("<i4", 1),
    "cache_key": ("<U", 0),
    "special_names": ("<U", 1),
    "special_name_ids": ("<i4", 1),
    "checksum": ("<U", 0),
}
_OPTIONAL = frozenset({"cache_key", "special_names", "special_name_ids"})
_MAX_STRING_CHARS = 256
_MAX_ID = 2**31 - 1  # token ids and node indices are int32
_CHECKSUM_TAG = b"constrain.Vocabulary.checksum/2\x00"


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


def write_vocab_file(path: Path, arrays: Mapping[str, np.ndarray[Any, Any]]) -> None:
    """Write the members (checksum added) atomically: a temporary file, then a rename.

    Parameters
    ----------
    path : Path
        Destination; its folder is created if missing.
    arrays : mapping of str to numpy.ndarray
        Every required member of the layout but ``checksum``, with the layout's dtypes.

    Raises
    ------
    OSError
        If the folder or the file cannot be written.
    """
    members = {
        name: np.asarray(a, dtype=_file_dtype(name, a), order="C") for name, a in arrays.items()
    }
    npz.write_archive(path, _CHECKSUM_TAG, members)


def _file_dtype(name: str, a: np.ndarray[Any, Any]) -> Any:
    kind = _LAYOUT[name][0]
    return a.dtype.newbyteorder("<") if kind == "<U" else np.dtype(kind)


def read_vocab_file(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """Read and validate a vocabulary file; return its members (``checksum`` excluded).

    Parameters
    ----------
    path : Path
        The ``.npz`` file.

    Returns
    -------
    dict of str to numpy.ndarray
        Read-only arrays with the layout's dtypes and ranks, content validated: a
        :class:`~constrain.Vocabulary` can be built over them without further checks.

    Raises
    ------
    VocabularyError
        If the file cannot be read, is not a constrain vocabulary file, has another format
        version, or is damaged or inconsistent in any way; the message names the file and the
        problem.
    """
    try:
        size = npz.sniff(path)
    except OSError as err:
        raise VocabularyError(f"cannot read vocabulary file {path}: {err}") from None
    except npz.DamagedArchiveError as err:
        raise VocabularyError(f"{path} is not a constrain vocabulary file ({err})") from None
    try:
        with zipfile.ZipFile(path) as zf:
            arrays = _read_members(zf, path, size)
    except VocabularyError:
        raise
    except npz.DamagedArchiveError as err:
        raise VocabularyError(f"corrupt vocabulary file {path}: {err}") from None
    except npz.ARCHIVE_ERRORS as err:
        raise VocabularyError(
            f"corrupt vocabulary file {path}: unreadable archive ({err})"
        ) from None
    try:
        _check_content(arrays)
    except VocabularyError as err:
        raise VocabularyError(f"corrupt vocabulary file {path}: {err}") from None
    del arrays["checksum"]
    return arrays


def _read_members(zf: zipfile.ZipFile, path: Path, size: int) -> dict[str, np.ndarray[Any, Any]]:
    """Check the zip directory, then read ``format`` and ``version``, then every member."""
    infos = npz.member_infos(zf, size)
    if "format" not in infos:
        raise VocabularyError(f"{path} is not a constrain vocabulary file (no 'format' entry)")
    tag = _read_member(zf, infos["format"], "format")
    if str(tag) != FORMAT_TAG:
        raise VocabularyError(
            f"{path} is not a constrain vocabulary file (format {str(tag)[:40]!r})"
        )
    version = int(_read_member(zf, _entry(infos, "version"), "version"))
    if version != VOCAB_FORMAT_VERSION:
        raise VocabularyError(
            f"{path} has vocabulary format version {version}; this constrain reads version "
            f"{VOCAB_FORMAT_VERSION}. Re-create the file with Vocabulary.save"
        )
    unknown = sorted(set(infos) - set(_LAYOUT))
    if unknown:
        raise npz.DamagedArchiveError(f"unexpected entry {unknown[0][:40]!r}")
    arrays = {"format": tag}
    for name in _LAYOUT:
        if name not in arrays and (name in infos or name not in _OPTIONAL):
            arrays[name] = _read_member(zf, _entry(infos, name), name)
    if str(arrays["checksum"]) != checksum(arrays):
        raise npz.DamagedArchiveError("checksum mismatch (the file was damaged or edited)")
    return arrays


def _entry(infos: Mapping[str, zipfile.ZipInfo], name: str) -> zipfile.ZipInfo:
    if name not in infos:
        raise npz.DamagedArchiveError(f"entry {name!r} is missing")
    return infos[name]


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> np.ndarray[Any, Any]:
    return npz.read_member(zf, info, name, _LAYOUT, max_string_chars=_MAX_STRING_CHARS)


def _check_content(arrays: Mapping[str, np.ndarray[Any, Any]]) -> None:
    """Validate the members' values; raise VocabularyError naming the first problem."""
    indptr, data = arrays["token_indptr"], arrays["token_bytes"]
    if indptr.shape[0] < 2 or indptr.shape[0] - 1 > _MAX_ID:
        raise VocabularyError(f"token_indptr has {indptr.shape[0]} entries")
    if indptr[0] != 0 or indptr[-1] != data.shape[0] or (np.diff(indptr) < 0).any():
        raise VocabularyError(
            "token_indptr does not start at 0, rise monotonically and end at len(token_bytes)"
        )
    size = indptr.shape[0] - 1
    mvs = int(arrays["model_vocab_size"])
    if not size <= mvs <= _MAX_ID:
        raise VocabularyError(f"model_vocab_size {mvs} outside [{size}, {_MAX_ID}]")
    eos = arrays["eos_ids"].astype(np.int64)
    if eos.size and (eos[0] < 0 or eos[-1] >= size or (np.diff(eos) <= 0).any()):
        raise VocabularyError("eos_ids are not sorted distinct ids of the vocabulary")
    if (indptr[eos + 1] != indptr[eos]).any():
        raise VocabularyError("an EOS id has bytes (EOS tokens must be special)")
    if ("special_names" in arrays) != ("special_name_ids" in arrays):
        raise VocabularyError("special_names and special_name_ids come together")
    if "special_names" in arrays:
        names, ids = arrays["special_names"], arrays["special_name_ids"].astype(np.int64)
        if names.shape != ids.shape or ((ids < 0) | (ids >= size)).any():
            raise VocabularyError("special_name_ids are not ids of the vocabulary, one per name")
        if len(set(names.tolist())) != names.shape[0] or "" in names.tolist():
            raise VocabularyError("special_names are not distinct non-empty names")
    trie = Trie(*(arrays[name] for name in TRIE_FIELDS))
    check_trie(trie, indptr, data)


def cache_dir(name: str) -> Path:
    """Return the folder ``name`` of constrain's on-disk caches (``"vocab"``, ``"models"``).

    ``$CONSTRAIN_CACHE_DIR/<name>`` when that variable is set, else
    ``$XDG_CACHE_HOME/constrain/<name>`` or ``~/.cache/constrain/<name>``.

    Returns
    -------
    Path
        The folder (not created here).
    """
    root = os.environ.get("CONSTRAIN_CACHE_DIR")
    if root:
        return Path(root).expanduser() / name
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "constrain" / name


def vocab_cache_dir() -> Path:
    """Return the folder of cached vocabularies (:func:`cache_dir` ``"vocab"``)."""
    return cache_dir("vocab")


def special_name_arrays(names: Mapping[str, int]) -> dict[str, np.ndarray[Any, Any]]:
    """Return the optional members that store special token names (none when there are none).

    Parameters
    ----------
    names : mapping of str to int
        ``Vocabulary.special_names``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``special_names`` and ``special_name_ids``, or an empty dict.
    """
    if not names:  # files without names stay readable by older versions
        return {}
    return {
        "special_names": np.array(list(names), dtype=str),
        "special_name_ids": np.array(list(names.values()), dtype="<i4"),
    }


def special_names_of(arrays: Mapping[str, np.ndarray[Any, Any]]) -> dict[str, int]:
    """Return the special token names of validated members (``{}`` for a file without them).

    Parameters
    ----------
    arrays : mapping of str to numpy.ndarray
        What :func:`read_vocab_file` returned.

    Returns
    -------
    dict of str to int
        Name -> token id.
    """
    if "special_names" not in arrays:
        return {}
    names, ids = arrays["special_names"].tolist(), arrays["special_name_ids"].tolist()
    return dict(zip(names, ids, strict=True))
