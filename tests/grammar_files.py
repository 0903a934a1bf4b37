"""Damaged and crafted compiled-grammar files, and the subprocess that loads them.

The same approach as ``tests/vocab_files.py`` (whose truncations, bit flips and archive helpers
are reused): each category maps a saved compiled-grammar file to named cases (file bytes);
crafted cases are rewritten with a valid checksum, so only the structural validation can refuse
them. :func:`load_in_subprocess` loads every case in a fresh interpreter: a crash shows as the
exit status; the child prints one line per case and a final ``SUMMARY`` line.
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
from vocab_files import PICKLE_HINT, TESTS, Case, bit_flips, members, truncations

from constrain.compiled_file import checksum

# the reference grammar: object properties (an intersection), multipleOf (an Automaton node)
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer", "multipleOf": 3}, "b": {"type": "string"}},
    "required": ["a"],
}
INSTANCE = b'{"a": 12, "b": "xy"}'
OTHER_SCHEMA = {"type": "array", "items": {"type": "boolean"}}


def npz(arrays: dict[str, Any], *, rechecksum: bool = True, compressed: bool = False) -> bytes:
    """Write ``arrays`` as an ``.npz``; with ``rechecksum`` the checksum member is recomputed."""
    out = {k: np.asarray(v) for k, v in arrays.items()}
    if rechecksum:
        out["checksum"] = np.array(checksum(out))
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **out)
    return buf.getvalue()


def header_of(arrays: dict[str, np.ndarray[Any, Any]]) -> dict[str, Any]:
    """The parsed JSON header of a (trusted) file's members."""
    return json.loads(str(arrays["header"]))  # type: ignore[no-any-return]


def with_header(arrays: dict[str, Any], header: Any, *, rechecksum: bool = True) -> bytes:
    """The file with its header replaced by ``header`` (JSON-encoded)."""
    return npz({**arrays, "header": np.array(json.dumps(header))}, rechecksum=rechecksum)


def _set(arrays: dict[str, np.ndarray[Any, Any]], name: str, pos: Any, value: int) -> bytes:
    a = arrays[name].copy()
    a[pos] = value
    return npz({**arrays, name: a})


def out_of_range(raw: bytes) -> Iterator[Case]:
    """Crafted (valid checksum): an out-of-range or inconsistent value in every array and
    in every kind of field of the header (grammar IR, limits)."""
    arrays = members(raw)
    trans = arrays["lexer.trans"]
    s, c = trans.shape
    big = 2**31 - 1
    values: dict[str, list[tuple[Any, int]]] = {
        "lexer.byte_class": [(0, c), (255, 255), (100, c + 1)],
        "lexer.trans": [((0, 0), s), ((1, 0), -2), ((0, 0), 0), ((s - 1, c - 1), big),
                        ((s - 1, 0), -(2**31)), ((2, 1), s + 1)],
        "lexer.accept_bits": [((0, 0), 2**63), ((s - 1, 0), 2**64 - 1), ((1, 0), 2**13)],
        "lexer.alive_bits": [((0, 0), 2**63), ((1, 0), 0), ((s - 1, 0), 2**20)],
    }  # fmt: skip
    for name, changes in values.items():
        for pos, value in changes:
            yield f"{name}[{pos}]={value}", _set(arrays, name, pos, value)
    for name, a in arrays.items():
        if name.startswith("lexer."):
            yield f"{name}-one-row-less", npz({**arrays, name: a[:-1]})
            if a.ndim == 2:
                yield f"{name}-one-column-more", npz({**arrays, name: np.hstack([a, a[:, :1]])})
    yield "lexer.trans-no-state", npz({**arrays, "lexer.trans": trans[:0]})
    header = header_of(arrays)
    for label, edit in _grammar_edits(header["grammar"]):
        changed = json.loads(json.dumps(header))
        edit(changed["grammar"])
        yield f"grammar-{label}", with_header(arrays, changed)
    for name, value in [("max_set_items", -1), ("max_lexer_states", True), ("precompute_ms", "5"),
                        ("mask_cache_bytes", 2**70), ("max_hypotheses", 1.5)]:  # fmt: skip
        changed = json.loads(json.dumps(header))
        changed["limits"][name] = value
        yield f"limits-{name}={value}", with_header(arrays, changed)
    text = json.dumps(header).replace('"precompute_ms": 5.0', '"precompute_ms": NaN')
    yield "limits-nan", npz({**arrays, "header": np.array(text)})
    deep = json.dumps(header)[:-1] + ', "deep": ' + "[" * 50000 + "]" * 50000 + "}"
    yield "header-nested-deeply", npz({**arrays, "header": np.array(deep)})
    yield (
        "lexer-states-above-limit",
        with_header(arrays, {**header, "limits": {**header["limits"], "max_lexer_states": s - 1}}),
    )


def _grammar_edits(grammar: dict[str, Any]) -> list[tuple[str, Callable[[Any], None]]]:
    """Edits of the grammar IR's data, each breaking one of its rules."""
    nodes = grammar["nodes"]
    n = len(nodes)
    fa = next(i for i, node in enumerate(nodes) if node[0] == "fa")
    cat = next(i for i, node in enumerate(nodes) if node[0] == "cat" and node[1])
    sets = next(i for i, node in enumerate(nodes) if node[0] == "set")

    def put(index: int, value: Any) -> Callable[[Any], None]:
        return lambda g: g["nodes"].__setitem__(index, value)

    return [
        ("node-names-a-later-node", put(cat, ["cat", [n - 1, n]])),
        ("node-names-itself", put(cat, ["cat", [cat]])),
        ("node-index-negative", put(cat, ["cat", [-1]])),
        ("node-unknown-kind", put(sets, ["pickle", "cos\nsystem\n"])),
        ("node-wrong-arity", put(sets, ["set"])),
        ("node-empty", put(sets, [])),
        ("node-not-a-list", put(sets, {"set": 1})),
        ("charset-beyond-unicode", put(sets, ["set", [[0, 0x110000]]])),
        ("charset-unsorted", put(sets, ["set", [[50, 60], [10, 20]]])),
        ("charset-reversed", put(sets, ["set", [[60, 50]]])),
        ("charset-bool", put(sets, ["set", [[True, 50]]])),
        ("repeat-max-negative", put(sets, ["rep", 0, 2, -1])),
        ("repeat-negative", put(sets, ["rep", 0, -1, None])),
        ("literal-not-text", put(sets, ["lit", 5])),
        ("automaton-edge-out-of-range", lambda g: g["nodes"][fa][4].append([0, [[48, 48]], 10**6])),
        ("automaton-start-out-of-range", lambda g: g["nodes"][fa].__setitem__(2, 10**6)),
        ("automaton-accept-out-of-range", lambda g: g["nodes"][fa][3].append(-1)),
        ("automaton-no-state", lambda g: g["nodes"][fa].__setitem__(1, 0)),
        ("terminal-root-out-of-range", lambda g: g["terminals"][0].__setitem__(1, n)),
        ("terminal-renamed", lambda g: g["terminals"][0].__setitem__(0, "RENAMED")),
        ("terminal-dropped", lambda g: g["terminals"].pop()),
        ("rule-undefined-symbol", lambda g: g["rules"][0][1][0].append("nowhere")),
        ("start-undefined", lambda g: g.__setitem__("start", "nowhere")),
        ("ignore-undefined", lambda g: g.__setitem__("ignore", ["NOWHERE"])),
        ("rule-unreachable", lambda g: g["rules"].append(["lonely", [[g["rules"][0][0]]]])),
        ("extra-field", lambda g: g.__setitem__("extra", 1)),
        ("meta-unknown", lambda g: g.__setitem__("meta", {"exec": "x"})),
    ]  # fmt: skip


def swaps(raw: bytes, other: bytes) -> Iterator[Case]:
    """Crafted: whole arrays swapped, and header fields or arrays taken from another compiled
    grammar (``other``) of the same vocabulary."""
    arrays, foreign = members(raw), members(other)
    for a, b in [
        ("lexer.accept_bits", "lexer.alive_bits"),
        ("lexer.trans", "lexer.accept_bits"),
        ("lexer.byte_class", "lexer.trans"),
        ("header", "checksum"),
    ]:
        yield f"swap-{a}-{b}", npz({**arrays, a: arrays[b], b: arrays[a]})
    header, other_header = header_of(arrays), header_of(foreign)
    yield (
        "other-grammar-in-header",
        with_header(arrays, {**header, "grammar": other_header["grammar"]}),
    )
    yield (
        "other-grammar-not-rechecksummed",
        with_header(arrays, {**header, "grammar": other_header["grammar"]}, rechecksum=False),
    )
    for name in ("lexer.trans", "lexer.accept_bits", "lexer.alive_bits"):
        yield f"other-{name}", npz({**arrays, name: foreign[name]})
    yield "other-header", npz({**arrays, "header": foreign["header"]})  # fmt: skip


def header_fields(raw: bytes) -> Iterator[Case]:
    """Replaced, missing, extra, retyped, reshaped, pickled and compressed members and fields."""
    arrays = members(raw)
    header = header_of(arrays)
    for version in (0, 1, 3, -1, 2**62, 2.0, "2", True, None):
        yield f"version-{version}", with_header(arrays, {**header, "format_version": version})
    yield (
        "version-1-not-rechecksummed",
        with_header(arrays, {**header, "format_version": 1}, rechecksum=False),
    )
    yield "format-other", with_header(arrays, {**header, "format": "numpy.savez"})
    yield "fingerprint-other", with_header(arrays, {**header, "vocab_fingerprint": "0" * 64})
    yield "fingerprint-int", with_header(arrays, {**header, "vocab_fingerprint": 7})
    yield "header-extra-field", with_header(arrays, {**header, "pickle": "x"})
    for field in header:
        rest = {k: v for k, v in header.items() if k != field}
        yield f"header-missing-{field}", with_header(arrays, rest)
    yield "header-not-json", npz({**arrays, "header": np.array("{not json")})
    yield "header-json-list", npz({**arrays, "header": np.array("[2]")})
    yield "header-int", npz({**arrays, "header": np.array(2)})
    yield "checksum-zeros", npz({**arrays, "checksum": np.array("0" * 64)}, rechecksum=False)
    yield "checksum-empty", npz({**arrays, "checksum": np.array("")}, rechecksum=False)
    yield "checksum-int", npz({**arrays, "checksum": np.array(5)}, rechecksum=False)
    for name in arrays:
        rest = {k: a for k, a in arrays.items() if k != name}
        yield f"missing-{name}", npz(rest, rechecksum=name != "checksum")
    yield "extra-member", npz({**arrays, "extra": np.zeros(3)})
    for name in ("lexer.byte_class", "lexer.trans", "lexer.accept_bits"):
        a = arrays[name]
        wrong = np.int64 if a.dtype != np.int64 else np.int32
        yield f"{name}-retyped", npz({**arrays, name: a.astype(wrong)})
        yield f"{name}-float", npz({**arrays, name: a.astype(np.float64)})
        yield f"{name}-3d", npz({**arrays, name: a[None]})
        yield f"{name}-big-endian", npz({**arrays, name: a.astype(a.dtype.newbyteorder(">"))})
    trans = arrays["lexer.trans"]
    yield "lexer.trans-fortran", npz({**arrays, "lexer.trans": np.asfortranarray(trans)})
    objects = np.empty(3, dtype=object)
    objects[:] = [1, "x", None]
    for name in ("lexer.trans", "header"):
        buf = io.BytesIO()
        np.savez(buf, **{**arrays, name: objects})
        yield f"object-array-{name}", buf.getvalue()
    yield "compressed", npz(arrays, compressed=True)
    yield "huge-declared-shape", _huge_header(raw)


def _huge_header(raw: bytes) -> bytes:
    """The lexer.trans member's ``.npy`` header rewritten to declare 10**12 x 10 elements."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "lexer.trans.npy":
                payload = data[10 + int.from_bytes(data[8:10], "little") :]
                text = "{'descr': '<i4', 'fortran_order': False, 'shape': (1000000000000, 10), }"
                encoded = text.encode("latin1")
                encoded += b" " * (-(10 + len(encoded) + 1) % 64) + b"\n"
                data = b"\x93NUMPY\x01\x00" + len(encoded).to_bytes(2, "little") + encoded
                data += payload
            dst.writestr(info, data)
    return out.getvalue()


def non_archives(raw: bytes, vocab_file: bytes) -> Iterator[Case]:
    """Files that are not compiled-grammar archives at all, pickles and a vocabulary included."""
    arrays = members(raw)
    yield "empty", b""
    yield "text", b"hello, this is not a compiled grammar\n"
    yield "random", np.random.default_rng(3).bytes(4096)
    yield "zip-magic-only", b"PK\x03\x04"
    npy = io.BytesIO()
    np.save(npy, arrays["lexer.trans"])
    yield "npy", npy.getvalue()
    yield "pickle-of-arrays", pickle.dumps(arrays)
    yield "pickle-protocol-0", pickle.dumps([1, 2, 3], protocol=0)
    yield "pickle-of-header", pickle.dumps(str(arrays["header"]))
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hi")
    yield "zip-of-text", other.getvalue()
    foreign = io.BytesIO()
    np.savez(foreign, x=np.zeros(3))
    yield "foreign-npz", foreign.getvalue()
    yield "vocabulary-file", vocab_file
    yield "json", json.dumps(header_of(arrays)).encode()


def categories(raw: bytes, other: bytes, vocab_file: bytes) -> dict[str, list[Case]]:
    """Every category's cases for the file ``raw`` (``other``: another grammar's file;
    ``vocab_file``: the vocabulary's own file)."""
    return {
        "truncations": list(truncations(raw)),
        "bit_flips": list(bit_flips(raw)),
        "out_of_range": list(out_of_range(raw)),
        "swaps": list(swaps(raw, other)),
        "header_fields": list(header_fields(raw)),
        "non_archives": list(non_archives(raw, vocab_file)),
    }


# -- the child process -----------------------------------------------------------------------

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import grammar_files
grammar_files.child_main(sys.argv[2])
"""


def child_main(folder: str) -> None:
    """Load every ``*.case`` file of ``folder`` with ``CompiledGrammar.load`` and print one line
    per case, then ``SUMMARY <cases> <refused> <loaded>``. A refusal must be a SavedFileError
    naming the file without numpy's pickle hint; a file that loads must mask exactly as the
    reference along :data:`INSTANCE`. Anything else, or a crash, ends the child with a non-zero
    status."""
    from constrain import CompiledGrammar
    from constrain.errors import SavedFileError
    from constrain.testing import tiny_vocabulary

    root = Path(folder)
    vocab = tiny_vocabulary()
    reference = CompiledGrammar.load(root / "reference.npz", vocab)
    refused = loaded = 0
    for case in sorted(root.glob("*.case")):
        try:
            got = CompiledGrammar.load(case, vocab)
        except SavedFileError as err:
            message = str(err)
            assert str(case) in message and PICKLE_HINT not in message, message
            refused += 1
            print("refused", case.name, message.splitlines()[0][-90:])
            continue
        assert same_masks(got, reference, INSTANCE), f"{case.name} loaded another grammar"
        loaded += 1
        print("loaded", case.name)
    print(f"SUMMARY {refused + loaded} {refused} {loaded}")


def same_masks(a: Any, b: Any, text: bytes) -> bool:
    """Whether two compiled grammars allow the same tokens before each byte of ``text`` (and
    after it), walking ``text`` byte by byte."""
    from constrain import Matcher

    ma, mb = Matcher(a), Matcher(b)
    for i in range(len(text) + 1):
        if not np.array_equal(ma.allowed_token_ids(), mb.allowed_token_ids()):
            return False
        if i < len(text) and ma.accept_bytes(text[i : i + 1]) != mb.accept_bytes(text[i : i + 1]):
            return False
    return ma.is_accepting() == mb.is_accepting()


def load_in_subprocess(reference: bytes, cases: list[Case], folder: Path) -> list[str]:
    """Write the cases to ``folder`` and load them in a child; return its case lines.

    Raises ``AssertionError`` (with the child's output) unless the child exits with status 0
    after a ``SUMMARY`` line that counts every case.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.npz").write_bytes(reference)
    for i, (name, data) in enumerate(cases):
        safe = "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in name)
        (folder / f"{i:04d}-{safe}.case").write_bytes(data)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(TESTS), str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = proc.stdout.splitlines()
    detail = f"exit status {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, detail
    body = lines[:-1]
    refused = sum(line.startswith("refused ") for line in body)
    summary = f"SUMMARY {len(body)} {refused} {len(body) - refused}"
    assert lines and lines[-1] == summary and len(body) == len(cases), detail
    return body
