"""Damaged and crafted vocabulary files: every load refuses them or, through the cache, rebuilds.

Each category loads its cases in a subprocess (``tests/vocab_files.py``): a crash would show as
the child's exit status, and the child checks that every refusal is a VocabularyError naming the
file without numpy's pickle hint, and that every file it loads equals the saved vocabulary.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import vocab_files
from vocab_files import CATEGORIES, load_in_subprocess

from constrain.errors import VocabularyError
from constrain.testing import tiny_vocabulary
from constrain.vocab.vocabulary import Vocabulary

# categories whose every case damages the content; the others may hit bytes nothing reads
# (zip timestamps) or change nothing (a big-endian uint8 array), and must then load unchanged
ALWAYS_REFUSED = {"truncations", "out_of_range", "swaps", "non_archives"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("vocab") / "tiny.npz"
    tiny_vocabulary().save(path)
    return path.read_bytes()


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_damaged_files_are_refused(category: str, saved: bytes, tmp_path: Path) -> None:
    cases = list(CATEGORIES[category](saved))
    lines = load_in_subprocess(saved, cases, tmp_path, "load")
    refused = [line for line in lines if line.startswith("refused ")]
    if category in ALWAYS_REFUSED:
        assert len(refused) == len(cases), [line for line in lines if line not in refused]
    else:
        assert len(refused) >= 0.9 * len(cases)


def test_damaged_cache_files_are_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONSTRAIN_CACHE_DIR", str(tmp_path / "first"))
    Vocabulary.from_huggingface(vocab_files.byte_level_tokenizer(), eos_ids=[0])
    (cache_file,) = (tmp_path / "first" / "vocab").glob("*.npz")
    raw = cache_file.read_bytes()
    cases = [case for make in CATEGORIES.values() for case in list(make(raw))[::5]]
    lines = load_in_subprocess(raw, cases, tmp_path / "cases", "cache")
    assert all(line.startswith("loaded ") for line in lines)


def _case(category: str, name: str, raw: bytes) -> bytes:
    return dict(CATEGORIES[category](raw))[name]


@pytest.mark.parametrize(
    ("category", "name", "message"),
    [
        ("non_archives", "pickle-of-vocabulary", "not a constrain vocabulary file (a pickle"),
        ("non_archives", "empty", "not a constrain vocabulary file (no .npz archive)"),
        ("non_archives", "foreign-npz", "not a constrain vocabulary file (no 'format' entry)"),
        ("header_fields", "version-1", "has vocabulary format version 1; this constrain reads"),
        ("header_fields", "checksum-zeros", "checksum mismatch"),
        ("header_fields", "object-array-node_token", "'node_token' has dtype |O, expected <i4"),
        ("header_fields", "compressed", "is compressed"),
        ("header_fields", "huge-declared-shape", "'node_end' holds 1436 data bytes"),
        ("header_fields", "extra-member", "unexpected entry 'extra'"),
        ("header_fields", "missing-node_end", "entry 'node_end' is missing"),
        ("out_of_range", "node_end[1]=1", "token trie: node_end has an index out of range"),
        ("out_of_range", "token_indptr[1]=-5", "token_indptr does not start at 0"),
        ("swaps", "swap-node_end-node_depth", "token trie: the root"),
        ("truncations", "truncated-at-70", "unreadable archive"),
    ],
)
def test_messages_name_the_file_and_the_problem(
    category: str, name: str, message: str, saved: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "v.npz"
    path.write_bytes(_case(category, name, saved))
    with pytest.raises(VocabularyError, match=re.escape(message)) as info:
        Vocabulary.load(path)
    assert str(path) in str(info.value) and "allow_pickle" not in str(info.value)
