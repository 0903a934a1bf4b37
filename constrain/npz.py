"""Uncompressed ``.npz`` archives written atomically and read as untrusted input.

The one reader and writer behind vocabulary files (:mod:`constrain.vocab.vocab_file`) and
compiled-grammar files (:mod:`constrain.compiled_file`). An archive is a zip of ``.npy`` members
as ``numpy.savez`` writes it, stored uncompressed, with a SHA-256 ``checksum`` member over all
the others. Reading trusts nothing: the zip directory and each member's ``.npy`` header are
checked against a *layout* (member name -> dtype string and rank) before any data is read, so a
header that declares a huge array allocates nothing and no member is ever unpickled.

Every problem is a :class:`DamagedArchiveError` (a ``ValueError``) with a short description;
the file formats re-raise it as their own documented error naming the file.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import tokenize
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ARCHIVE_ERRORS",
    "DamagedArchiveError",
    "Layout",
    "checksum",
    "member_infos",
    "read_member",
    "sniff",
    "write_archive",
]

Layout = Mapping[str, tuple[str, int]]
"""Member name -> (dtype string, rank); the dtype ``"<U"`` is any little-endian unicode string."""

# what zipfile and numpy's .npy header reader raise on damaged input: BadZipFile, EOFError,
# struct.error, NotImplementedError (unknown compression), RuntimeError (encrypted member);
# the header parser's ValueError, SyntaxError and tokenize.TokenError
ARCHIVE_ERRORS: tuple[type[BaseException], ...] = (
    SyntaxError,
    tokenize.TokenError,
    OSError,
    EOFError,
    ValueError,
    TypeError,
    struct.error,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    RuntimeError,
)


class DamagedArchiveError(ValueError):
    """A problem found in an archive, described without the file's name (the caller adds it)."""


def sniff(path: Path) -> int:
    """Return the file's size after checking that it starts like a zip archive.

    Raises
    ------
    OSError
        If the file cannot be read.
    DamagedArchiveError
        ``"a pickle, which constrain never loads"`` or ``"no .npz archive"``.
    """
    with open(path, "rb") as fh:
        head = fh.read(4)
        size = os.fstat(fh.fileno()).st_size
    if head != b"PK\x03\x04":
        raise DamagedArchiveError(
            "a pickle, which constrain never loads" if head[:1] == b"\x80" else "no .npz archive"
        )
    return size


def member_infos(zf: zipfile.ZipFile, size: int) -> dict[str, zipfile.ZipInfo]:
    """Return the members by name (``.npy`` dropped): each once, stored, within the file's size.

    Raises
    ------
    DamagedArchiveError
        For a repeated or compressed member, or members larger than the file.
    """
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        name = info.filename.removesuffix(".npy")
        if name in infos:
            raise DamagedArchiveError(f"entry {name[:40]!r} appears twice")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise DamagedArchiveError(f"entry {name[:40]!r} is compressed (members are stored)")
        infos[name] = info
    if sum(info.file_size for info in infos.values()) > size:
        raise DamagedArchiveError("entries larger than the file")
    return infos


def read_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    name: str,
    layout: Layout,
    *,
    max_string_chars: int | None = None,
) -> np.ndarray[Any, Any]:
    """Read one ``.npy`` member after checking its header against the layout and its size.

    Returns
    -------
    numpy.ndarray
        A read-only array over the member's bytes, with the layout's dtype and rank.

    Raises
    ------
    DamagedArchiveError
        For an encrypted member, another ``.npy`` version, dtype or rank, a size that does not
        match the header, or truncated data.
    """

    def bad(problem: str) -> DamagedArchiveError:
        return DamagedArchiveError(f"entry {name!r} {problem}")

    if info.flag_bits & 0x1:
        raise bad("is encrypted")
    kind, rank = layout[name]
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise bad(f"has .npy version {version}")
        if kind == "<U":
            limit = 4 * max_string_chars if max_string_chars is not None else None
            ok = dtype.str.startswith("<U") and 0 < dtype.itemsize <= (limit or dtype.itemsize)
        else:
            ok = dtype.str == kind
        if not ok:
            raise bad(f"has dtype {dtype.str}, expected {kind}")
        if len(shape) != rank or fortran or any(n < 0 for n in shape):
            raise bad(f"has shape {shape}, expected {rank} dimension(s)")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if fh.tell() + nbytes != info.file_size:
            raise bad(f"holds {info.file_size - fh.tell()} data bytes for shape {shape}")
        data = fh.read(nbytes)
        if len(data) != nbytes or fh.read(1):
            raise bad("is truncated")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def checksum(tag: bytes, arrays: Mapping[str, np.ndarray[Any, Any]]) -> str:
    """Return the SHA-256 hex digest of ``tag`` and every member but ``checksum``.

    Each member contributes its name, dtype, shape and bytes (C order), sorted by name, so the
    digest does not depend on the members' order or memory layout.
    """
    h = hashlib.sha256(tag)
    for name in sorted(arrays):
        if name == "checksum":
            continue
        a = arrays[name]
        h.update(f"{name}\x00{a.dtype.str}\x00{a.shape}\x00{a.nbytes}\x00".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def write_archive(path: Path, tag: bytes, members: Mapping[str, np.ndarray[Any, Any]]) -> None:
    """Write the members and their ``checksum`` atomically: a temporary file, then a rename.

    Raises
    ------
    OSError
        If the folder or the file cannot be written (the temporary file is removed).
    """
    arrays = dict(members)
    arrays["checksum"] = np.array(checksum(tag, arrays))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
