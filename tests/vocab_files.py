"""Damaged and crafted vocabulary files, and the subprocess that loads them.

Each category function maps a saved vocabulary file to named cases (file bytes). ``crafted``
cases are rewritten with a valid checksum (what an attacker can do), so only the structural
and trie validation can refuse them. :func:`load_in_subprocess` writes the cases to a folder and
loads every one in a fresh interpreter (``python -c``): a crash shows as the exit status, and
the child prints one line per case and a final ``SUMMARY`` line the parent checks.

Used by ``tests/unit/test_vocab_files.py`` (every category) and ``tests/fuzz/`` (random damage).
"""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from constrain.vocab.vocab_file import checksum

TESTS = Path(__file__).resolve().parent
Case = tuple[str, bytes]
PICKLE_HINT = "allow_pickle"


def members(raw: bytes) -> dict[str, np.ndarray[Any, Any]]:
    """Read the members of a (trusted, undamaged) vocabulary file."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def npz(arrays: dict[str, Any], *, rechecksum: bool = True, compressed: bool = False) -> bytes:
    """Write ``arrays`` as an ``.npz``; with ``rechecksum`` the checksum member is recomputed."""
    out = {k: np.asarray(v) for k, v in arrays.items()}
    if rechecksum:
        out["checksum"] = np.array(checksum(out))
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **out)
    return buf.getvalue()


def sections(raw: bytes) -> list[int]:
    """Offsets where the archive's sections start: each entry's local header, its ``.npy``
    header and its data, the central directory and its end record."""
    out = {0, len(raw) - 22}
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            local = info.header_offset
            name_len = int.from_bytes(raw[local + 26 : local + 28], "little")
            extra_len = int.from_bytes(raw[local + 28 : local + 30], "little")
            data_start = local + 30 + name_len + extra_len
            npy_header = int.from_bytes(raw[data_start + 8 : data_start + 10], "little")
            out |= {info.header_offset, data_start, data_start + 10, data_start + 10 + npy_header}
        out.add(zf.start_dir)  # type: ignore[attr-defined]
    return sorted(o for o in out if 0 <= o < len(raw))


# -- categories ------------------------------------------------------------------------------


def truncations(raw: bytes) -> Iterator[Case]:
    """The file cut at every section boundary (and one byte either side), and at 64 more
    evenly spaced offsets."""
    cuts = {c + d for c in sections(raw) for d in (-1, 0, 1)}
    cuts |= {len(raw) * k // 64 for k in range(64)}
    for cut in sorted(c for c in cuts if 0 <= c < len(raw)):
        yield f"truncated-at-{cut}", raw[:cut]


def bit_flips(raw: bytes, count: int = 300, seed: int = 0) -> Iterator[Case]:
    """One bit flipped at each section start and at ``count`` random offsets."""
    rng = np.random.default_rng(seed)
    offsets = sorted({*sections(raw), *rng.integers(0, len(raw), count).tolist()})
    for off in offsets:
        bit = int(rng.integers(0, 8))
        damaged = bytearray(raw)
        damaged[off] ^= 1 << bit
        yield f"bit-{bit}-flipped-at-{off}", bytes(damaged)


def _set(arrays: dict[str, np.ndarray[Any, Any]], name: str, pos: int, value: int) -> bytes:
    changed = dict(arrays)
    a = arrays[name].copy()
    a[pos] = value
    changed[name] = a
    return npz(changed)


def out_of_range(raw: bytes) -> Iterator[Case]:
    """Crafted (valid checksum): an out-of-range or inconsistent value in every array."""
    arrays = members(raw)
    v = arrays["token_indptr"].shape[0] - 1
    m = arrays["node_byte"].shape[0]
    n = arrays["token_bytes"].shape[0]
    last_leaf = int(np.flatnonzero(arrays["node_token"] >= 0)[-1])
    linked = np.flatnonzero(arrays["token_next_dup"] >= 0)  # else any non-special token
    dup = int(linked[0] if linked.size else np.flatnonzero(np.diff(arrays["token_indptr"]))[1])
    values = {
        "token_indptr": [(0, 1), (0, -1), (1, -5), (v, n + 1), (v, n - 1), (2, 10**12)],
        "eos_ids": [(0, -1), (0, v), (0, 2**31 - 1), (0, 65)],
        "node_token": [(1, v), (1, -2), (m - 1, -1), (last_leaf, 0), (1, 2**31 - 1)],
        "node_end": [(0, m + 1), (1, 0), (1, 1), (1, m + 1), (2, -(2**31)), (m - 1, m - 1)],
        "node_depth": [(0, 1), (1, 0), (1, -1), (2, 2**31 - 1), (m - 1, 200)],
        "token_next_dup": [(0, v), (0, -2), (dup, 0), (dup, dup), (dup, v - 1)],
        "node_byte": [(0, 1), (1, 255), (m - 1, 0)],
        "token_bytes": [(0, 255), (n - 1, 0)],
    }
    for name, changes in values.items():
        for pos, value in changes:
            if pos < arrays[name].shape[0]:  # a cache file has no EOS ids
                yield f"{name}[{pos}]={value}", _set(arrays, name, pos, value)
    mvs = arrays["model_vocab_size"]
    for value in (v - 1, -1, 2**31, 2**62):
        yield f"model_vocab_size={value}", npz({**arrays, "model_vocab_size": mvs * 0 + value})


def swaps(raw: bytes) -> Iterator[Case]:
    """Crafted: whole arrays swapped, and two entries swapped inside each array."""
    arrays = members(raw)
    for a, b in [
        ("node_end", "node_depth"),
        ("node_token", "node_end"),
        ("node_token", "node_depth"),
        ("node_byte", "token_bytes"),
        ("token_next_dup", "node_token"),
        ("eos_ids", "token_next_dup"),
    ]:
        yield f"swap-{a}-{b}", npz({**arrays, a: arrays[b], b: arrays[a]})
    rng = np.random.default_rng(1)
    for name in ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup"):
        a = arrays[name]
        others = np.flatnonzero(a != a[-1])
        for k in range(4 if others.size else 0):
            i, j = rng.choice(others, 1)[0], a.shape[0] - 1 - k
            if a[i] == a[j]:
                continue
            swapped = a.copy()
            swapped[[i, j]] = swapped[[j, i]]
            yield f"swap-{name}-{i}-{j}", npz({**arrays, name: swapped})
    tokens = arrays["token_bytes"]
    i = int(np.flatnonzero(tokens != tokens[0])[0])
    swapped = tokens.copy()
    swapped[[0, i]] = swapped[[i, 0]]
    yield "swap-token_bytes-entries", npz({**arrays, "token_bytes": swapped})


def header_fields(raw: bytes) -> Iterator[Case]:
    """Replaced, missing, extra, retyped, reshaped, pickled and compressed members."""
    arrays = members(raw)
    yield "format-other", npz({**arrays, "format": np.array("numpy.savez")})
    yield "format-int", npz({**arrays, "format": np.array(7)})
    for version in (0, 1, 3, -1, 2**62):
        yield f"version-{version}", npz({**arrays, "version": np.array(version)})
    yield "version-float", npz({**arrays, "version": np.array(2.0)})
    yield "version-string", npz({**arrays, "version": np.array("2")})
    yield "checksum-zeros", npz({**arrays, "checksum": np.array("0" * 64)}, rechecksum=False)
    yield "checksum-empty", npz({**arrays, "checksum": np.array("")}, rechecksum=False)
    yield "checksum-int", npz({**arrays, "checksum": np.array(5)}, rechecksum=False)
    yield "cache-key-added", npz({**arrays, "cache_key": np.array("x" * 64)}, rechecksum=False)
    for name in arrays:
        rest = {k: a for k, a in arrays.items() if k != name}
        yield f"missing-{name}", npz(rest, rechecksum=name != "checksum")
    yield "extra-member", npz({**arrays, "extra": np.zeros(3)})
    yield "extra-huge-member", npz({**arrays, "extra": np.zeros(10**6, np.uint8)})
    for name in ("token_indptr", "node_end", "token_bytes", "eos_ids"):
        a = arrays[name]
        wrong = np.int32 if a.dtype == np.int64 else np.int64
        yield f"{name}-retyped", npz({**arrays, name: a.astype(wrong)})
        yield f"{name}-float", npz({**arrays, name: a.astype(np.float64)})
        yield f"{name}-2d", npz({**arrays, name: np.stack([a, a])})
        yield f"{name}-fortran", npz({**arrays, name: np.asfortranarray(np.stack([a, a]).T)})
        yield f"{name}-big-endian", npz({**arrays, name: a.astype(a.dtype.newbyteorder(">"))})
    objects = np.empty(3, dtype=object)
    objects[:] = [1, "x", None]
    for name in ("node_token", "format", "extra"):
        buf = io.BytesIO()
        np.savez(buf, **{**arrays, name: objects})
        yield f"object-array-{name}", buf.getvalue()
    yield "compressed", npz(arrays, compressed=True)
    yield "huge-declared-shape", _huge_header(raw)
    # numpy's header parser raises tokenize.TokenError and SyntaxError on these
    yield "npy-header-unterminated", _huge_header(raw, "{'descr': '<i4', 'shape': (3,")
    yield "npy-header-syntax", _huge_header(raw, "{'descr': '<i4' 'shape': }")
    yield "npy-header-not-a-dict", _huge_header(raw, "[1, 2, 3]")


def _huge_header(
    raw: bytes,
    header: str = "{'descr': '<i4', 'fortran_order': False, 'shape': (1000000000000,), }",
) -> bytes:
    """The node_end member's ``.npy`` header rewritten (by default to declare 10**12 elements)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "node_end.npy":
                payload = data[10 + int.from_bytes(data[8:10], "little") :]
                data = _npy_v1(header, payload)
            dst.writestr(info, data)
    return out.getvalue()


def _npy_v1(header: str, payload: bytes) -> bytes:
    """An ``.npy`` version 1.0 member with the given header text (padded as numpy pads it)."""
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


def non_archives(raw: bytes) -> Iterator[Case]:
    """Files that are not vocabulary archives at all, pickles included."""
    from constrain.testing import tiny_vocabulary

    arrays = members(raw)
    yield "empty", b""
    yield "text", b"hello, this is not a vocabulary\n"
    yield "random", np.random.default_rng(2).bytes(4096)
    yield "zip-magic-only", b"PK\x03\x04"
    npy = io.BytesIO()
    np.save(npy, arrays["token_bytes"])
    yield "npy", npy.getvalue()
    yield "pickle-of-vocabulary", pickle.dumps(tiny_vocabulary())
    yield "pickle-of-arrays", pickle.dumps(arrays)
    yield "pickle-protocol-0", pickle.dumps([1, 2, 3], protocol=0)
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hi")
    yield "zip-of-text", other.getvalue()
    foreign = io.BytesIO()
    np.savez(foreign, x=np.zeros(3))
    yield "foreign-npz", foreign.getvalue()
    yield "json", json.dumps({"format": "constrain.Vocabulary"}).encode()


CATEGORIES: dict[str, Callable[[bytes], Iterator[Case]]] = {
    "truncations": truncations,
    "bit_flips": bit_flips,
    "out_of_range": out_of_range,
    "swaps": swaps,
    "header_fields": header_fields,
    "non_archives": non_archives,
}


# -- the child process -----------------------------------------------------------------------

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import vocab_files
vocab_files.child_main(sys.argv[2], sys.argv[3])
"""


def child_main(folder: str, mode: str) -> None:
    """Load every ``*.case`` file of ``folder`` (mode ``load``: ``Vocabulary.load``; mode
    ``cache``: through the disk cache of ``Vocabulary.from_huggingface``) and print one line
    per case, then ``SUMMARY <cases> <refused> <loaded>``. Any other exception or a crash ends
    the process with a non-zero status."""
    import os

    from constrain.errors import VocabularyError
    from constrain.vocab.vocabulary import Vocabulary

    root = Path(folder)
    reference = Vocabulary.load(root / "reference.npz")
    refused = loaded = 0
    if mode == "cache":
        os.environ["CONSTRAIN_CACHE_DIR"] = str(root / "cache")
        tokenizer = byte_level_tokenizer()
        base = Vocabulary.from_huggingface(tokenizer, eos_ids=[0])
        (cache_file,) = (root / "cache" / "vocab").glob("*.npz")
        cached = Vocabulary.load(cache_file)
    for case in sorted(root.glob("*.case")):
        if mode == "load":
            try:
                got = Vocabulary.load(case)
            except VocabularyError as err:
                message = str(err)
                assert str(case) in message and PICKLE_HINT not in message, message
                refused += 1
                print("refused", case.name, message.splitlines()[0][-80:])
                continue
            same = got == reference and _same_trie(got, reference)
            assert same, f"{case.name} loaded as another vocabulary"
        else:
            cache_file.write_bytes(case.read_bytes())
            got = Vocabulary.from_huggingface(tokenizer, eos_ids=[0])
            assert got == base and _same_trie(got, base), f"{case.name}: wrong cache result"
            assert Vocabulary.load(cache_file) == cached, f"{case.name}: cache not rewritten"
        loaded += 1
        print("loaded", case.name)
    print(f"SUMMARY {refused + loaded} {refused} {loaded}")


def _same_trie(a: Any, b: Any) -> bool:
    fields = ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup")
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)


def byte_level_tokenizer() -> Any:
    """A small byte-level BPE tokenizer built in memory (no training, no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<|endoftext|>": 0, **{c: i + 1 for i, c in enumerate(alphabet)}}
    merges = [("a", "b"), ("ab", "c"), ("Ġ", "t"), ("Ġt", "h"), ("h", "e")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def load_in_subprocess(reference: bytes, cases: list[Case], folder: Path, mode: str) -> list[str]:
    """Write the cases to ``folder`` and load them in a child; return its case lines.

    Raises ``AssertionError`` (with the child's output) unless the child exits with status 0
    after its ``SUMMARY`` line.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.npz").write_bytes(reference)
    for i, (name, data) in enumerate(cases):
        (folder / f"{i:04d}-{name}.case").write_bytes(data)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(TESTS), str(folder), mode],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = proc.stdout.splitlines()
    detail = f"exit status {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, detail
    assert lines and lines[-1] == _summary(lines[:-1]), detail
    assert len(lines) - 1 == len(cases), detail
    return lines[:-1]


def _summary(lines: list[str]) -> str:
    refused = sum(line.startswith("refused ") for line in lines)
    loaded = sum(line.startswith("loaded ") for line in lines)
    return f"SUMMARY {len(lines)} {refused} {loaded}"
