"""Compiled-grammar files: round trips, and damaged or crafted files refused in a subprocess.

Each category of ``tests/grammar_files.py`` loads its cases in a child interpreter: a crash
would show as the exit status, and the child checks that every refusal is a SavedFileError
naming the file without numpy's pickle hint, and that every file it loads masks exactly as the
saved grammar.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from grammar_files import INSTANCE, OTHER_SCHEMA, SCHEMA, categories, load_in_subprocess, same_masks

from constrain import CompiledGrammar, Compiler, Grammar
from constrain.errors import SavedFileError
from constrain.testing import byte_vocabulary, tiny_vocabulary

# categories whose every case damages what is read; bit flips may hit bytes nothing reads (zip
# timestamps) and header fields include no-op rewrites (a big-endian uint8 array): those must
# then load and mask as the saved grammar
ALWAYS_REFUSED = {"truncations", "out_of_range", "swaps", "non_archives"}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("saved")
    vocab = tiny_vocabulary()
    compiler = Compiler(vocab)
    compiler.compile(Grammar.from_json_schema(SCHEMA)).save(folder / "g.npz")
    compiler.compile(Grammar.from_json_schema(OTHER_SCHEMA)).save(folder / "other.npz")
    vocab.save(folder / "vocab.npz")
    return {name: (folder / f"{name}.npz").read_bytes() for name in ("g", "other", "vocab")}


@pytest.mark.parametrize(
    "category",
    ["truncations", "bit_flips", "out_of_range", "swaps", "header_fields", "non_archives"],
)
def test_damaged_files_are_refused(category: str, files: dict[str, bytes], tmp_path: Path) -> None:
    cases = categories(files["g"], files["other"], files["vocab"])[category]
    lines = load_in_subprocess(files["g"], cases, tmp_path)
    refused = [line for line in lines if line.startswith("refused ")]
    if category in ALWAYS_REFUSED:
        assert len(refused) == len(cases), [line for line in lines if line not in refused]
    else:
        assert len(refused) >= 0.9 * len(cases)


def _case(files: dict[str, bytes], category: str, name: str) -> bytes:
    return dict(categories(files["g"], files["other"], files["vocab"])[category])[name]


@pytest.mark.parametrize(
    ("category", "name", "message"),
    [
        ("non_archives", "pickle-of-arrays", "not a constrain compiled grammar (a pickle"),
        ("non_archives", "empty", "not a constrain compiled grammar (no .npz archive)"),
        ("non_archives", "vocabulary-file", "not a constrain compiled grammar (no 'header'"),
        ("header_fields", "version-1", "compiled-grammar format 1, this constrain reads format 2"),
        ("header_fields", "version-1-not-rechecksummed", "compiled-grammar format 1"),
        ("header_fields", "checksum-zeros", "checksum mismatch"),
        ("header_fields", "fingerprint-other", "compiled for another vocabulary"),
        ("header_fields", "object-array-lexer.trans", "'lexer.trans' has dtype |O, expected <i4"),
        ("header_fields", "compressed", "is compressed"),
        ("header_fields", "huge-declared-shape", "'lexer.trans' holds"),
        ("header_fields", "missing-lexer.alive_bits", "entry 'lexer.alive_bits' is missing"),
        ("out_of_range", "lexer.trans[(0, 0)]=0", "lexer.trans holds a state outside"),
        ("out_of_range", "lexer.byte_class[255]=255", "lexer.byte_class names a class outside"),
        ("out_of_range", "grammar-node-names-a-later-node", "grammar node"),
        ("out_of_range", "grammar-rule-undefined-symbol", "undefined symbol 'nowhere'"),
        ("out_of_range", "header-nested-deeply", "no JSON header"),
        ("swaps", "other-grammar-not-rechecksummed", "checksum mismatch"),
        ("swaps", "other-grammar-in-header", "lexer."),
        ("truncations", "truncated-at-70", "unreadable archive"),
    ],
)
def test_messages_name_the_file_and_the_problem(
    category: str, name: str, message: str, files: dict[str, bytes], tmp_path: Path
) -> None:
    path = tmp_path / "g.npz"
    path.write_bytes(_case(files, category, name))
    with pytest.raises(SavedFileError, match=re.escape(message)) as info:
        CompiledGrammar.load(path, tiny_vocabulary())
    assert info.value.path == str(path) and "allow_pickle" not in str(info.value)


@pytest.mark.parametrize(
    ("grammar", "text"),
    [
        (Grammar.from_regex(""), b""),
        (Grammar.from_regex(r"(ab|cd)*e{2,5}"), b"abcdeee"),
        (Grammar.builtin("json"), INSTANCE),
        (Grammar.from_json_schema(SCHEMA), INSTANCE),
        (Grammar.from_json_schema({"type": "object", "properties": {"x": {"type": "number"}}}),
         b'{"x": -1.5e3}'),
        (Grammar.from_json_schema({"type": "string", "format": "color-xyz"}), b'"red"'),
        (Grammar.from_json_schema(
            {"anyOf": [{"type": "string", "minLength": 5, "maxLength": 3}, {"type": "integer"}]}),
         b"12"),
        (Grammar.from_lark(
            'start: "let" NAME "=" NAME\nNAME: /[a-z]+/\n%ignore " "', lexer="basic"),
         b"let lettuce = letter"),
    ],
    ids=["empty-regex", "regex", "json", "schema-multipleOf", "schema-properties", "warnings",
         "empty-repeat", "greedy"],
)  # fmt: skip
def test_every_grammar_round_trips(grammar: Grammar, text: bytes, tmp_path: Path) -> None:
    vocab = byte_vocabulary()
    compiled = Compiler(vocab).compile(grammar)
    compiled.save(tmp_path / "g.npz")
    loaded = CompiledGrammar.load(tmp_path / "g.npz", vocab)
    assert loaded.grammar == compiled.grammar and loaded.grammar.greedy == grammar.greedy
    assert loaded.grammar.warnings == compiled.grammar.warnings == grammar.warnings
    assert loaded.limits == compiled.limits
    for name in ("byte_class", "trans", "accept_bits", "alive_bits"):
        assert np.array_equal(getattr(loaded.lexer, name), getattr(compiled.lexer, name))
    assert same_masks(loaded, compiled, text)
