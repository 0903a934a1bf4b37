"""Fuzz: random byte-level damage of a saved vocabulary file.

Every damaged file is refused with a VocabularyError naming the file (never numpy's pickle
hint) or, when the damage hit bytes nothing reads, loads as exactly the saved vocabulary. The
loads run in this process (a crash would end the run); tests/unit/test_vocab_files.py runs the
systematic categories in subprocesses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fuzz.budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from vocab_files import members, npz

from constrain.errors import VocabularyError
from constrain.testing import tiny_vocabulary
from constrain.vocab.vocabulary import Vocabulary

FIELDS = ("node_byte", "node_token", "node_end", "node_depth", "token_next_dup")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("vocab") / "tiny.npz"
    tiny_vocabulary().save(path)
    return path.read_bytes()


def _load_or_refuse(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        got = Vocabulary.load(path)
    except VocabularyError as err:
        assert str(path) in str(err) and "allow_pickle" not in str(err), str(err)
        return
    reference = tiny_vocabulary()
    assert got == reference
    assert all(np.array_equal(getattr(got, f), getattr(reference, f)) for f in FIELDS)


edits = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "cut", "insert", "delete"]),
        st.floats(0, 1),
        st.integers(0, 255),
    ),
    min_size=1,
    max_size=4,
)


@fuzz_settings(2)
@given(edits=edits)
def test_random_byte_damage(
    saved: bytes, tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, float, int]]
) -> None:
    data = bytearray(saved)
    for kind, where, value in edits:
        pos = min(int(where * len(data)), max(len(data) - 1, 0))
        if kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = bytes([value])
        elif not data:
            continue
        elif kind == "delete":
            del data[pos]
        elif kind == "flip":
            data[pos] ^= 1 << (value % 8)
        else:
            data[pos] = value
    _load_or_refuse(tmp_path_factory.mktemp("damage") / "v.npz", bytes(data))


@fuzz_settings(2)
@given(field=st.sampled_from(FIELDS + ("token_bytes", "token_indptr", "eos_ids")), data=st.data())
def test_crafted_array_values(
    saved: bytes, tmp_path_factory: pytest.TempPathFactory, field: str, data: st.DataObject
) -> None:
    """One value of one array changed and the checksum recomputed (what a crafter can do)."""
    arrays = members(saved)
    array = arrays[field].copy()
    pos = data.draw(st.integers(0, array.size - 1))
    info = np.iinfo(array.dtype)
    array[pos] = data.draw(
        st.integers(int(info.min), int(info.max)).filter(lambda x: x != array[pos])
    )
    _load_or_refuse(tmp_path_factory.mktemp("crafted") / "v.npz", npz({**arrays, field: array}))
