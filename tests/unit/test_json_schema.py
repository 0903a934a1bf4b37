"""JSON Schema front end: table-driven acceptance, options, errors and pointers."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest

import constrain
from constrain import CompileLimitError, Grammar, JsonSchemaError
from constrain.testing import byte_vocabulary

_COMPILER = constrain.Compiler(byte_vocabulary())


def accepts(grammar: Grammar, text: str) -> bool:
    """Whether the byte-level matcher takes ``text`` to an accepting state."""
    matcher = constrain.Matcher(_COMPILER.compile(grammar))
    data = list(text.encode())
    return matcher.accept_tokens(data) == len(data) and matcher.is_accepting()


CASES: list[tuple[dict[str, Any], dict[str, Any], list[str], list[str]]] = [
    (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
        {},
        ['{"a":1}', '{"a":1,"b":"x"}', '{"b":"x"}', "{}", '{"a":1,"b":"x","c":[1]}'],
        ['{"b":"x","a":1}', '{"a":1.5}', '{"a":"1"}', '{"a":1,"a":2}', "[]"],
    ),
    (
        {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"]},
        {"any_order": True},
        ['{"b":1}', '{"b":1,"a":2}', '{"a":2,"b":1}'],
        ['{"a":2}', '{"b":1,"b":1}', "{}"],
    ),
    (
        {"type": "object", "additionalProperties": False, "properties": {"x": {"const": 1}}},
        {},
        ['{"x":1}', '{"x":1.0}', "{}"],
        ['{"x":2}', '{"y":1}', '{"x":1,"y":1}'],
    ),
    (
        {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"},
        {},
        ['"ab"', '"éé"', '"abc"'],
        ['"a"', '"abcd"', '"AB"', '"a1"'],
    ),
    (
        {"type": "string", "pattern": "b"},
        {},
        ['"b"', '"abc"', '"xxbxx"'],
        ['"a"', '""'],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "null"}], "items": {"type": "boolean"}},
        {},
        ["[]", "[null]", "[null,true,false]"],
        ["[true]", "[null,null]"],
    ),
    (
        {"type": "array", "contains": {"const": 2}, "minContains": 2, "maxContains": 3},
        {},
        ["[2,2]", "[1,2,3,2]", "[2,2,2]"],
        ["[2]", "[2,2,2,2]", "[]"],
    ),
    (
        {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
        {},
        ["1", "2.5", '"x"'],
        ["2", "3"],
    ),
    (
        {"not": {"type": ["string", "null"]}},
        {},
        ["1", "true", "[]", "{}"],
        ['"x"', "null"],
    ),
    (
        {"if": {"properties": {"k": {"const": "n"}}}, "then": {"required": ["v"]}},
        {"any_order": True},
        ['{"k":"n","v":1}', '{"k":"m"}', '{"v":1}'],
        ['{"k":"n"}', "{}"],
    ),
    (
        {"dependentRequired": {"a": ["b"]}},
        {"any_order": True},
        ['{"a":1,"b":2}', '{"b":2}', "{}", "1"],
        ['{"a":1}'],
    ),
    (
        {
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node",
        },
        {},
        ["{}", '{"next":{}}', '{"next":{"next":{"next":{}}}}'],
        ['{"next":1}', '{"next":{"next":[]}}'],
    ),
    (
        {"enum": ["a", 1, None, [1, 2], {"k": True}]},
        {},
        ['"a"', "1", "1.0", "null", "[1,2]", '{"k":true}'],
        ['"b"', "2", "[2,1]", '{"k":false}', "true"],
    ),
    (
        {"type": "integer", "minimum": -5, "exclusiveMaximum": 10, "multipleOf": 3},
        {},
        ["-3", "0", "3", "9", "6.0"],
        ["-6", "10", "12", "4", "3.5"],
    ),
    (
        {"type": "string", "format": "date"},
        {},
        ['"2024-02-29"', '"1999-12-31"'],
        ['"2023-02-29"', '"2024-13-01"', '"x"'],
    ),
]


@pytest.mark.parametrize(("schema", "options", "good", "bad"), CASES)
def test_acceptance_matches_the_schema(
    schema: dict[str, Any], options: dict[str, Any], good: list[str], bad: list[str]
) -> None:
    import jsonschema

    grammar = Grammar.from_json_schema(schema, **options)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for text in good:
        assert jsonschema.Draft202012Validator(schema, format_checker=checker).is_valid(
            json.loads(text)
        ), text  # the table itself is right
        assert accepts(grammar, text), text
    for text in bad:
        assert not accepts(grammar, text), text


def test_flexible_whitespace_is_bounded() -> None:
    grammar = Grammar.from_json_schema(
        {"type": "object", "properties": {"a": {"type": "array"}}},
        whitespace="flexible",
        max_whitespace=2,
    )
    assert accepts(grammar, '{ "a" : [ 1 , 2 ] }')
    assert accepts(grammar, '{"a":  [1,2]}')
    assert not accepts(grammar, '{"a":   [1,2]}')
    assert not accepts(Grammar.from_json_schema({}), "[1, 2]")


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object", "properties": {"a": {"type": "array"}, "b": {"const": [1, {"c": 2}]}}},
        {"type": "array", "prefixItems": [{"type": "integer"}, {"enum": [[1, 2]]}]},
        {"type": "object", "additionalProperties": {"type": "integer"}},
    ],
)
def test_spaced_layout_is_exactly_json_dumps(schema: dict[str, Any]) -> None:
    grammar = Grammar.from_json_schema(schema, whitespace="spaced")
    values: list[Any] = [
        {"a": [1, 2], "b": [1, {"c": 2}]},
        [3, [1, 2]],
        {"x": 1, "y": 2},
        {"a": [], "b": [1, {"c": 2}]},
    ]
    import jsonschema

    for value in values:
        if not jsonschema.Draft202012Validator(schema).is_valid(value):
            continue
        text = json.dumps(value)
        assert accepts(grammar, text), text
        assert not accepts(grammar, json.dumps(value, separators=(",", ":"))) or "," not in text
        assert not accepts(grammar, json.dumps(value, indent=1))


def test_unknown_whitespace_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="whitespace='tabs'"):
        Grammar.from_json_schema({}, whitespace="tabs")  # type: ignore[arg-type]


def test_string_escapes_are_decoded_before_checking() -> None:
    grammar = Grammar.from_json_schema({"type": "string", "maxLength": 1})
    assert accepts(grammar, '"\\n"')
    assert accepts(grammar, '"\\u001f"')
    assert accepts(grammar, '"\\""')
    assert not accepts(grammar, '"\\n\\n"')
    assert not accepts(grammar, '"\n"')  # a raw control character is not JSON


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"properties": {"a": {"type": "array", "uniqueItems": True}}}, "#/properties/a"),
        ({"items": {"$dynamicRef": "#x"}}, "#/items/$dynamicRef"),
        ({"properties": {"p": {"pattern": "(?<=a)b"}}}, "#/properties/p/pattern"),
        ({"type": "strin"}, "#/type"),
        ({"$ref": "#/$defs/missing"}, "#/$ref"),
    ],
)
def test_errors_carry_the_pointer(schema: dict[str, Any], pointer: str) -> None:
    with pytest.raises(JsonSchemaError) as info:
        Grammar.from_json_schema(schema)
    assert info.value.pointer.startswith(pointer)
    assert isinstance(info.value, ValueError)


def test_lenient_records_warnings() -> None:
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    grammar = Grammar.from_json_schema(schema, lenient=True)
    assert any("uniqueItems" in w for w in grammar.warnings)
    assert accepts(grammar, '["a"]')
    assert Grammar.from_json_schema({"type": "string"}).warnings == ()


def test_unknown_format_is_a_warning_not_an_error() -> None:
    grammar = Grammar.from_json_schema({"type": "string", "format": "int64"})
    assert any("int64" in w for w in grammar.warnings)


def test_unsatisfiable_schema_is_an_error() -> None:
    with pytest.raises(JsonSchemaError, match="accepts no JSON value"):
        Grammar.from_json_schema({"type": "integer", "minimum": 3, "maximum": 2})
    with pytest.raises(JsonSchemaError):
        Grammar.from_json_schema(False)


def test_a_pattern_and_its_negation_exclude_strings_without_a_product() -> None:
    from constrain.frontends.json_schema.shapes import Shape
    from constrain.ir import Complement, Intersect, Literal

    a, b = Literal("a"), Literal("b")
    assert Shape(strs=(a,)).merge(Shape(strs=(Complement(a),))).strs is None
    both = Shape(strs=(a, b)).merge(Shape(strs=(Complement(Intersect((a, b))),)))
    assert both.strs is None
    assert Shape(strs=(a,)).merge(Shape(strs=(Complement(Intersect((a, b))),))).strs is not None
    # strings go, the rest stays (the string alternative is not built at all)
    either = Grammar.from_json_schema(
        {
            "anyOf": [
                {"type": "integer"},
                {"type": "string", "pattern": "^a", "not": {"pattern": "^a"}},
                {
                    "type": "string",
                    "allOf": [{"pattern": "x"}, {"pattern": "y"}],
                    "not": {"allOf": [{"pattern": "x"}, {"pattern": "y"}]},
                },
            ]
        }
    )
    assert "Intersect" not in repr([t.regex for t in either.terminals])
    assert accepts(either, "12") and not accepts(either, '"ab"') and not accepts(either, '"xy"')
    with pytest.raises(JsonSchemaError, match="accepts no JSON value"):
        Grammar.from_json_schema({"type": "string", "pattern": "^a", "not": {"pattern": "^a"}})


def test_limits_raise_compile_limit_error() -> None:
    many = {f"p{i}": {} for i in range(12)}
    with pytest.raises(CompileLimitError) as info:
        Grammar.from_json_schema({"properties": many}, any_order=True)
    assert info.value.limit_name == "max_any_order_properties"
    nested = {"anyOf": [{"type": "integer", "minimum": i} for i in range(20)]}
    with pytest.raises(CompileLimitError):
        Grammar.from_json_schema({"allOf": [nested, nested, nested]}, max_branches=100)
    with pytest.raises(CompileLimitError):
        Grammar.from_json_schema({"type": "array", "contains": {}, "minContains": 10**6})
    with pytest.raises(CompileLimitError) as info:
        Grammar.from_json_schema({"allOf": [nested, nested]}, max_combinations=50)
    assert info.value.limit_name == "max_combinations"


def test_a_schema_reached_many_ways_is_expanded_once() -> None:
    # d0 -> d1 twice -> d2 twice ...: 2**40 paths to the integer; expanded once per
    # definition it is 40 small conjunctions, far within max_combinations
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)
    }
    defs["d40"] = {"type": "integer", "minimum": 3}
    grammar = Grammar.from_json_schema({"$ref": "#/$defs/d0", "$defs": defs})
    assert accepts(grammar, "7")
    assert not accepts(grammar, "2")


def test_draft7_dependencies_mixing_schemas_and_arrays() -> None:
    # the referencing library's draft 7 crawl takes every dependencies value for a schema
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "c": {"type": "integer"},
        },
        "dependencies": {"a": {"required": ["b"]}, "c": ["a"]},
    }
    grammar = Grammar.from_json_schema(schema)
    assert accepts(grammar, '{"a":1,"b":2,"c":3}')
    assert not accepts(grammar, '{"a":1}')
    assert not accepts(grammar, '{"b":2,"c":3}')
    assert accepts(grammar, '{"b":2}')


def test_one_of_overlap_modes() -> None:
    schema = {"oneOf": [{"type": "object", "propertyNames": {"maxLength": 2}}, {"type": "object"}]}
    with pytest.raises(JsonSchemaError, match="oneOf|complement"):
        Grammar.from_json_schema(schema)
    assert accepts(Grammar.from_json_schema(schema, one_of="any"), "{}")


def test_one_of_excludes_only_the_branches_each_disjunct_meets() -> None:
    """Five branches told apart by a required discriminator, a sixth whose discriminator is
    optional, and a seventh that overlaps the sixth: each disjunct is conjoined with the
    complements of the disjuncts it can meet only, so the normal form stays small (negating
    every other branch made 512 disjuncts and a CompileLimitError) and stays exact."""
    import jsonschema

    from constrain.frontends.json_schema.normal_form import NormalForm
    from constrain.frontends.json_schema.shapes import JsonSchemaOptions

    branches: list[Any] = [
        {
            "type": "object",
            "properties": {"kind": {"const": k}, "v": {"type": "integer"}},
            "required": ["kind", "v"],
        }
        for k in "abcde"
    ]
    branches.append(
        {"type": "object", "properties": {"kind": {"const": "f"}, "w": {"type": "string"}}}
    )
    branches.append({"properties": {"kind": {"enum": ["f", "g"]}}, "required": ["kind", "w"]})
    schema = {"oneOf": branches}
    form = NormalForm(schema, JsonSchemaOptions())
    assert len(form.shapes((form.root,))) <= 16
    grammar = Grammar.from_json_schema(schema, any_order=True)  # every member order
    validator = jsonschema.Draft202012Validator(schema)
    members = ['"kind":"a"', '"kind":"f"', '"kind":"g"', '"kind":1', '"v":1', '"w":"x"', '"w":1']
    texts = ["[]", "1", "null"]
    for n in range(4):
        texts.extend(
            "{" + ",".join(chosen) + "}"
            for chosen in itertools.combinations(members, n)
            if len({m.split(":")[0] for m in chosen}) == n  # no repeated key
        )
    for text in texts:
        assert accepts(grammar, text) == validator.is_valid(json.loads(text)), text


def test_one_of_branches_told_apart_by_a_value_type() -> None:
    """A property one branch requires, typed differently on each side: no complement needed."""
    import jsonschema

    from constrain.frontends.json_schema.normal_form import NormalForm
    from constrain.frontends.json_schema.shapes import JsonSchemaOptions

    schema = {
        "oneOf": [
            {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]},
            {"type": "object", "properties": {"v": {"type": ["integer", "null"]}}},
            {"type": "object", "properties": {"v": {"enum": [True, "x"]}}, "required": ["v"]},
        ]
    }
    form = NormalForm(schema, JsonSchemaOptions())
    grammar = Grammar.from_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in [
        '{"v":"a"}',
        '{"v":"x"}',
        '{"v":1}',
        '{"v":null}',
        '{"v":true}',
        "{}",
        '{"v":1.5}',
    ]:
        assert accepts(grammar, text) == validator.is_valid(json.loads(text)), text
    # branches 1 and 2 meet ("x"), as do 2 and 3 (an object without v): only those complements
    assert len(form.shapes((form.root,))) <= 6


def test_json_text_and_file(tmp_path: Any) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"type": "boolean"}')
    grammar = Grammar.from_json_schema_file(path)
    assert accepts(grammar, "true")
    assert not accepts(grammar, "1")
    assert accepts(Grammar.from_json_schema('{"const": "x"}'), '"x"')
    with pytest.raises(JsonSchemaError):
        Grammar.from_json_schema("{not json")


def test_draft7_ref_overrides_siblings() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string"}},
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}},
        "items": [{"type": "integer"}],
        "additionalItems": False,
    }
    grammar = Grammar.from_json_schema(schema)
    assert accepts(grammar, '{"a":"long"}')  # draft 7: maxLength next to $ref is ignored
    assert accepts(grammar, "[1]")
    assert not accepts(grammar, "[1,2]")


def test_masks_equal_brute_force_inside_strings_and_keys() -> None:
    """Token masks (string-body slice included) equal the byte-level definition."""

    from constrain.testing import tiny_vocabulary

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tag": {"enum": ["ab", "a\u20acb"]},
            "list": {"type": "array", "items": {"type": "string", "maxLength": 2}},
        },
        "required": ["name"],
    }
    grammar = Grammar.from_json_schema(schema, whitespace="flexible", max_whitespace=1)
    tiny = tiny_vocabulary()
    text = '{"name": "x\\"\u20ac ab", "tag":"a\u20acb","list":["ab", ""]}'.encode()
    _assert_masks_equal_brute_force(constrain.Compiler(tiny).compile(grammar), text)


def _assert_masks_equal_brute_force(
    compiled: constrain.CompiledGrammar, text: bytes, every: int = 1
) -> None:
    """After every prefix of ``text`` (every ``every``-th), the mask equals the definition."""
    import numpy as np

    from constrain.testing import brute_force_mask

    vocab = compiled.vocab
    byte_compiled = _COMPILER.compile(compiled.grammar)

    def accepts_prefix(data: bytes) -> bool:
        return constrain.Matcher(byte_compiled).accept_tokens(list(data)) == len(data)

    def complete(data: bytes) -> bool:
        m = constrain.Matcher(byte_compiled)
        return m.accept_tokens(list(data)) == len(data) and m.is_accepting()

    bitmask = constrain.allocate_token_bitmask(1, vocab.size)
    for cut in range(0, len(text) + 1, every):
        prefix = text[:cut]
        matcher = constrain.Matcher(compiled)
        assert matcher.accept_tokens(list(prefix)) == cut
        matcher.fill_next_token_bitmask(bitmask, 0)
        words = bitmask.numpy()[0].view(np.uint32)
        got = np.array([(words[t >> 5] >> (t & 31)) & 1 for t in range(vocab.size)], dtype=bool)
        want = brute_force_mask(vocab, accepts_prefix, prefix, complete)[: vocab.size]
        assert np.array_equal(got, want), (prefix, np.flatnonzero(got != want)[:10])


def test_string_slice_matches_its_definition() -> None:
    from constrain.testing import tiny_vocabulary

    vocab = tiny_vocabulary()
    bits, trie = vocab.string_slice()
    special = set(vocab.special_ids.tolist())
    in_trie: set[int] = set()
    for t in trie.node_token.tolist():
        while t >= 0:
            in_trie.add(t)
            t = int(trie.token_next_dup[t])
    for t in range(vocab.size):
        lo, hi = int(vocab.token_indptr[t]), int(vocab.token_indptr[t + 1])
        data = bytes(vocab.token_bytes[lo:hi])
        try:
            text = data.decode("utf-8")
            want = bool(text) and all(c >= " " and c not in '"\\' for c in text)
        except UnicodeDecodeError:
            want = False
        want = want and t not in special
        assert bool(bits[t >> 5] >> (t & 31) & 1) == want, (t, data)
        # every other token is walked through the slice's trie
        assert (t in in_trie) == (bool(data) and not want and t not in special), (t, data)


def test_string_slice_bounded_by_characters() -> None:
    """``string_slice(n)`` keeps the slice tokens of at most ``n`` characters (not bytes), which
    ``body_chars`` counts."""
    from constrain.testing import tiny_vocabulary

    vocab = tiny_vocabulary()
    full, _ = vocab.string_slice()
    for n in (1, 2, 3):
        bits, trie = vocab.string_slice(n)
        for t in range(vocab.size):
            lo, hi = int(vocab.token_indptr[t]), int(vocab.token_indptr[t + 1])
            in_full = bool(full[t >> 5] >> (t & 31) & 1)
            short = in_full and len(bytes(vocab.token_bytes[lo:hi]).decode("utf-8")) <= n
            assert bool(bits[t >> 5] >> (t & 31) & 1) == short, (n, t)
            chars = len(bytes(vocab.token_bytes[lo:hi]).decode("utf-8")) if in_full else -1
            assert vocab.body_chars[t] == chars, t
        # the bitset alone, as the mask tables take it at a maxLength's bound
        assert np.array_equal(vocab.string_slice_bits(n), bits) and not bits.flags.writeable
    assert np.array_equal(vocab.string_slice_bits(), full)


def test_vocabulary_prepare_builds_the_trie_and_slices() -> None:
    from constrain.tables import SLICE_CHARS
    from constrain.testing import tiny_vocabulary

    tiny = tiny_vocabulary()
    vocab = constrain.Vocabulary.from_bytes([tiny.token_bytes_of(t) for t in range(300)])
    assert vocab._trie is None and not vocab._slice
    assert vocab.prepare() is vocab
    assert vocab._trie is not None and set(vocab._slice) == {0, SLICE_CHARS}


# 64 is slow without JIT (18 s of the NUMBA_DISABLE_JIT pass): None covers the same kernels there
@pytest.mark.parametrize("list_limit", [None, pytest.param(64, marks=pytest.mark.slow)])
def test_masks_equal_brute_force_in_bounded_strings(
    list_limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside strings with maxLength / minLength the slice of short tokens is taken wholesale
    (the whole slice would let a long token overrun the bound), and where the maxLength is
    near, the slice of the tokens it still takes; masks equal the definition, with entries
    stored as rows of their own or (``list_limit`` 64) as a slice's row plus a list of the
    other tokens."""
    import numpy as np

    import constrain.tables.mask_tables

    if list_limit is not None:
        monkeypatch.setattr(constrain.tables.mask_tables, "_list_limit", lambda words: list_limit)

    from constrain.tables import SLICE_CHARS

    long_tokens = [b"abcdefghijklmnopq", "\u20ac".encode() * 17, b"0123456789abcdef", b"xy"]
    vocab = constrain.Vocabulary.from_bytes(
        [bytes([b]) for b in range(256)] + long_tokens + [None], eos_ids=[256 + len(long_tokens)]
    )
    assert SLICE_CHARS == 16  # the long tokens above straddle it
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "maxLength": 20},
            "t": {"type": "string", "minLength": 18},
        },
        "required": ["s", "t"],
    }
    compiled = constrain.Compiler(vocab).compile(Grammar.from_json_schema(schema))
    text = ('{"s":"' + "x" * 20 + '","t":"' + "\u20ac" * 25 + '"}').encode()
    _assert_masks_equal_brute_force(compiled, text)
    # both slices served some entries; stored entries hold what a fresh build computes
    tables = compiled.tables
    snap = tables.snapshot()
    rows = set(snap.w_row[: snap.num_entries].tolist())
    if list_limit is None:  # 9 words a row: a list holds 4 tokens, string entries need rows
        assert not set(tables._base_rows.values()) & rows
    else:  # and within SLICE_CHARS of the maxLength, the slices bounded by what it takes
        assert {0, SLICE_CHARS} < set(tables._base_rows) <= set(range(21))
        assert set(tables._base_rows.values()) <= rows
    for (state, raw), e in snap.key_index.items():
        fresh = tables.build(state, np.frombuffer(raw, dtype=np.int32))
        assert (snap.within(e) == fresh[0]).all()


def test_masks_equal_brute_force_with_bounded_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a long ``maxLength`` string the count states alike to a token's depth share one
    entry (MaskTables classifies them at once here); masks still equal the definition at every
    count, and every shared entry holds what a fresh build at each of its states computes."""
    import numpy as np

    import constrain.tables.mask_tables

    monkeypatch.setattr(constrain.tables.mask_tables, "_CLASS_MIN_NS", 0)
    monkeypatch.setattr(constrain.tables.mask_tables, "_CLASS_NS_PER_STATE", 1)
    long_tokens = [b"abcdefghijklmnopq", "\u20ac".encode() * 4, b'xx","t":"', b"xy"]
    vocab = constrain.Vocabulary.from_bytes(
        [bytes([b]) for b in range(256)] + long_tokens + [None], eos_ids=[256 + len(long_tokens)]
    )
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "maxLength": 40},
            "t": {"type": "string", "minLength": 2, "maxLength": 30},
        },
        "required": ["s", "t"],
    }
    grammar = Grammar.from_json_schema(schema)
    compiled = constrain.Compiler(vocab).compile(grammar)
    text = ('{"s":"' + "x" * 38 + '","t":"' + "\u20ac" * 26 + '"}').encode()
    # every mask equals the one of tables that never classify; some equal the definition
    with monkeypatch.context() as m:
        m.setattr(constrain.tables.mask_tables, "_CLASS_MIN_NS", 1 << 62)
        plain = constrain.Compiler(vocab, cache_bytes=0).compile(grammar)
        a, b = constrain.Matcher(compiled), constrain.Matcher(plain)
        for byte in text:
            assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids())
            assert a.accept_bytes(bytes([byte])) and b.accept_bytes(bytes([byte]))
        assert plain.tables.num_classified == 0
    _assert_masks_equal_brute_force(compiled, text, every=11)
    tables = compiled.tables
    assert tables.num_classified >= 1 and tables.num_shared > 0
    snap = tables.snapshot()
    for (state, raw), e in snap.key_index.items():
        fresh = tables.build(state, np.frombuffer(raw, dtype=np.int32))
        assert (snap.within(e) == fresh[0]).all()
        candidates = snap.c_tokens[snap.c_indptr[e] : snap.c_indptr[e + 1]]
        assert np.array_equal(candidates, fresh[1]), state


def test_unbounded_strings_are_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only builds inside a string with a ``maxLength`` a token's length or more away count
    toward the bounded classes: a string with no bound takes its slice whole (0) at a state
    that loops, and never classifies, however cheap classes are made."""
    import constrain.tables.mask_tables

    monkeypatch.setattr(constrain.tables.mask_tables, "_CLASS_MIN_NS", 0)
    monkeypatch.setattr(constrain.tables.mask_tables, "_CLASS_NS_PER_STATE", 1)
    vocab = constrain.Vocabulary.from_bytes(
        [bytes([b]) for b in range(256)] + [b"abcdefghijklmnopq", b'xx","t":"', None],
        eos_ids=[258],
    )
    schema = {  # each member one lexeme with its key: two string bodies, read alike
        "type": "object",
        "properties": {"s": {"type": "string"}, "t": {"type": "string"}},
    }
    compiled = constrain.Compiler(vocab, cache_bytes=0).compile(Grammar.from_json_schema(schema))
    matcher = constrain.Matcher(compiled)
    for byte in ('{"s":"' + "xy" * 20 + '","t":"' + "yx" * 20 + '"}').encode():
        assert matcher.allowed_token_ids().size
        assert matcher.accept_bytes(bytes([byte]))
    assert matcher.is_accepting()
    assert compiled.tables.num_classified == 0 and compiled.tables.counted_ns == 0


def test_body_class_sequences_are_the_classes_of_each_position() -> None:
    """The string-body character shapes as byte classes: per position, its distinct classes."""
    import types

    import numpy as np

    from constrain.tables.string_bodies import BODY_SEQUENCES, body_class_sequences

    rng = np.random.default_rng(1)
    for _ in range(20):
        byte_class = rng.integers(0, rng.integers(1, 200), 256).astype(np.int32)
        classes, pos_ptr, seq_ptr = body_class_sequences(
            types.SimpleNamespace(byte_class=byte_class)  # type: ignore[arg-type]
        )
        positions = [r for seq in BODY_SEQUENCES for r in seq]
        assert seq_ptr.tolist() == np.cumsum([0] + [len(q) for q in BODY_SEQUENCES]).tolist()
        assert len(pos_ptr) == len(positions) + 1
        for p, (lo, hi) in enumerate(positions):
            want = sorted(set(byte_class[lo : hi + 1].tolist()))
            assert classes[pos_ptr[p] : pos_ptr[p + 1]].tolist() == want


def test_draft4_integers_have_no_fraction() -> None:
    """Draft 4 defines an integer by its spelling: ``1.0`` is a number, not an integer."""
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    assert accepts(Grammar.from_json_schema(draft4), "12")
    assert not accepts(Grammar.from_json_schema(draft4), "12.0")
    assert not accepts(Grammar.from_json_schema(draft4), "1e2")
    assert accepts(Grammar.from_json_schema({"type": "integer"}), "12.0")  # draft 6 and later


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (
            {"not": {"type": "object", "additionalProperties": False, "properties": {"a": {}}}},
            ['{"b":1}', '{"a":1,"c":null}', "1", "[]"],
            ["{}", '{"a":2}'],
        ),
        (
            {"not": {"patternProperties": {"^x": {"type": "integer"}}}},
            ['{"xa":"s"}', '{"b":1,"x":1.5}'],
            ["{}", '{"xa":1}', '{"b":"s"}', '"str"'],
        ),
        (
            {
                "oneOf": [
                    {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                    {"properties": {"b": {"type": "integer"}}, "additionalProperties": False},
                ]
            },
            ['{"a":1}', '{"b":2}'],
            ["{}", '{"c":1}', '{"a":"x"}', '{"a":1,"b":2}'],
        ),
    ],
)
def test_complements_of_additional_and_pattern_properties(
    schema: dict[str, Any], good: list[str], bad: list[str]
) -> None:
    import jsonschema

    grammar = Grammar.from_json_schema(schema, any_order=True)
    for text in good:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
        assert accepts(grammar, text), text
    for text in bad:
        assert not jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
        assert not accepts(grammar, text), text


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (
            {"type": "array", "items": {"enum": ["a", "b", 1, None]}, "uniqueItems": True},
            ["[]", '["a"]', '["b","a",1,null]', '[1,"a"]'],
            ['["a","a"]', "[1,1.0]", '["c"]', '["a","b",1,null,"a"]'],
        ),
        (
            {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2},
            ["[true,false]", "[false,true]"],
            ["[true,true]", "[true]", "[true,false,true]"],
        ),
        (
            {
                "type": "array",
                "prefixItems": [{"const": [1]}],
                "items": {"enum": [[1], {"k": 2}]},
                "uniqueItems": True,
            },
            ["[[1]]", '[[1],{"k":2}]'],
            ["[[1],[1]]", '[{"k":2}]'],
        ),
    ],
)
def test_unique_items_over_finite_domains(
    schema: dict[str, Any], good: list[str], bad: list[str]
) -> None:
    import jsonschema

    grammar = Grammar.from_json_schema(schema)
    for text in good:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
        assert accepts(grammar, text), text
    for text in bad:
        assert not jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
        assert not accepts(grammar, text), text


@pytest.mark.slow  # long strings through the lazy lexer: minutes with NUMBA_DISABLE_JIT
def test_long_string_bounds_are_exact() -> None:
    # maxLength/minLength far past what an eager lexer could count: enforced as written
    for schema, good, bad in (
        ({"type": "string", "maxLength": 5000}, [0, 4999, 5000], [5001]),
        ({"type": "string", "minLength": 3000}, [3000, 3100], [0, 2999]),
        ({"type": "string", "minLength": 2000, "maxLength": 2002}, [2000, 2002], [1999, 2003]),
    ):
        grammar = Grammar.from_json_schema(schema)
        assert not grammar.warnings
        for n in good:
            assert accepts(grammar, '"' + "xé"[n % 2] * n + '"'), (schema, n)
        for n in bad:
            assert not accepts(grammar, '"' + "x" * n + '"'), (schema, n)
    # the complement of an exact bound is exact too
    negated = Grammar.from_json_schema({"type": "string", "not": {"maxLength": 5000}})
    assert accepts(negated, '"' + "x" * 5001 + '"')
    assert not accepts(negated, '"' + "x" * 5000 + '"')
    for key in ("minLength", "maxLength"):
        with pytest.raises(CompileLimitError) as info:
            Grammar.from_json_schema({"type": "string", key: 9}, max_string_length=8)
        assert info.value.limit_name == "max_string_length"
        assert key in str(info.value)


def _count_cases(top: int) -> range:
    return range(top + 3)


@pytest.mark.parametrize(
    ("lo", "hi", "fixed"),
    [
        (0, 33, 0),
        (0, 34, 0),
        (5, 45, 0),
        (37, None, 0),
        (40, 41, 0),
        (3, 70, 3),
        (35, 35, 0),
        (36, 36, 1),
        (0, 100, 0),
    ],  # fmt: skip
)
def test_large_item_counts_are_exact(lo: int, hi: int | None, fixed: int) -> None:
    # counts past CHAIN_LIMIT are written in binary (counted.py): every count from 0 to
    # past the bound is accepted exactly when minItems <= count <= maxItems
    from constrain.frontends.json_schema.counted import CHAIN_LIMIT

    schema: dict[str, Any] = {"type": "array", "items": {"type": "integer"}, "minItems": lo}
    if hi is not None:
        schema["maxItems"] = hi
    if fixed:
        schema["prefixItems"] = [{"const": "x"}] * fixed
    assert max(lo, hi or 0) - max(fixed, 1) > CHAIN_LIMIT or hi == 33
    grammar = Grammar.from_json_schema(schema)
    for n in _count_cases(hi if hi is not None else lo):
        items = ["x"] * min(n, fixed) + list(range(max(0, n - fixed)))
        want = lo <= n and (hi is None or n <= hi)
        assert accepts(grammar, json.dumps(items, separators=(",", ":"))) == want, n


@pytest.mark.parametrize(
    ("lo", "hi", "declared", "required"),
    [
        (0, 40, 2, 0),
        (0, 40, 2, 1),
        (5, 45, 0, 0),
        (37, None, 0, 0),
        (40, 41, 3, 2),
        (35, 35, 0, 0),
        (0, 100, 1, 0),
    ],  # fmt: skip
)
def test_large_member_counts_are_exact(
    lo: int, hi: int | None, declared: int, required: int
) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f"d{i}": {"type": "integer"} for i in range(declared)},
        "required": [f"d{i}" for i in range(required)],
        "additionalProperties": {"type": "integer"},
        "minProperties": lo,
    }
    if hi is not None:
        schema["maxProperties"] = hi
    grammar = Grammar.from_json_schema(schema)
    for n in _count_cases(hi if hi is not None else lo):
        for written in sorted({0, required, declared}):
            if required <= written <= n:
                value = {f"d{i}": i for i in range(written)}
                value.update({f"k{k}": k for k in range(n - written)})
                want = lo <= n and (hi is None or n <= hi)
                text = json.dumps(value, separators=(",", ":"))
                assert accepts(grammar, text) == want, (n, written)


def test_a_million_items_is_a_few_rules() -> None:
    for schema in (
        {"type": "array", "items": {"type": "integer"}, "minItems": 999, "maxItems": 10**6},
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 10**6},
    ):
        grammar = Grammar.from_json_schema(schema)
        assert len(grammar.rules) < 100, schema
    items = Grammar.from_json_schema(
        {"type": "array", "items": {"type": "integer"}, "minItems": 999, "maxItems": 10**6}
    )
    for n in (998, 999, 3000):
        assert accepts(items, json.dumps(list(range(n)), separators=(",", ":"))) == (n >= 999)


def test_hashed_enum_agrees_with_jsonschema() -> None:
    import jsonschema

    from constrain.frontends.json_schema.context import _hashed_enum_validator

    members: list[Any] = [1, 2.5, "a", True, None, [1, "x"], {"k": [False]}, 0, -0.0]
    members += [f"s{i}" for i in range(30)]  # long enough for the hashed lookup
    schema = {"enum": members}
    fast = _hashed_enum_validator(jsonschema.Draft202012Validator)(schema)
    slow = jsonschema.Draft202012Validator(schema)
    probes: list[Any] = [1, 1.0, True, False, 0, 0.0, -0.0, 2.5, "a", "b", None, "s7", "s70", 3]
    probes += [[1, "x"], [1.0, "x"], [True, "x"], {"k": [False]}, {"k": [0]}]
    for probe in probes:
        assert fast.is_valid(probe) == slow.is_valid(probe), probe


def test_fast_value_check_agrees_with_jsonschema() -> None:
    """Schemas of type, enum, const and annotations: the fast check decides as the validator."""
    import jsonschema

    from constrain.frontends.json_schema.context import _value_check

    long_enum: list[Any] = [f"s{i}" for i in range(20)] + [1, 2.5, True, None, [1, "x"]]
    schemas: list[Any] = [True, False, {}, {"title": "t", "default": 3, "examples": [1]}]
    schemas += [{"type": t} for t in ("string", "integer", "number", "boolean", "null")]
    schemas += [{"type": t} for t in ("array", "object")]
    schemas += [{"type": ["integer", "null"]}, {"type": []}, {"type": ["string", "boolean"]}]
    schemas += [
        {"enum": [1, "a", None, [1, "x"], {"k": [False]}, -0.0]},
        {"enum": long_enum},
        {"enum": long_enum, "type": "integer"},
        {"enum": [1.0, True, "1"], "type": "number", "description": "d"},
        {"const": 1},
        {"const": False, "type": "boolean"},
        {"const": {"a": [1.0]}},
        {"const": "s1", "enum": long_enum},
        {"const": 2, "enum": [1, 2.0], "type": "integer", "$comment": "c"},
    ]
    probes: list[Any] = [1, 1.0, 1.5, True, False, 0, -0.0, 0.0, 2, 2.0, "a", "1", "s1", None]
    probes += [[1, "x"], [1.0, "x"], [True, "x"], {"k": [False]}, {"k": [0]}, {"a": [1]}, []]
    validators = (
        (False, jsonschema.Draft202012Validator),
        (False, jsonschema.Draft7Validator),
        (False, jsonschema.Draft6Validator),
        (True, jsonschema.Draft4Validator),
    )
    decided = 0
    for draft4, cls in validators:
        for schema in schemas:
            check = _value_check(schema, draft4)
            if check is None:
                assert draft4 and "const" in schema, schema
                continue
            # a boolean schema as its object form (the draft 4 validator takes no boolean)
            validator = cls(schema if isinstance(schema, dict) else {} if schema else {"not": {}})
            for probe in probes:
                found = check(probe)
                if found is not None:
                    decided += 1
                    assert found == validator.is_valid(probe), (cls.__name__, schema, probe)
    assert decided > 500
    for schema in ({"minimum": 1}, {"type": "any"}, {"enum": "a"}, {"type": [{"type": "x"}]}):
        assert _value_check(schema, False) is None, schema  # jsonschema decides
    assert _value_check({"enum": [float("nan"), 1]}, False) is None
    check = _value_check({"enum": [1]}, False)
    assert check is not None and check(float("nan")) is None and check((1,)) is None


def test_long_enums_compile_exactly() -> None:
    values = [f"v{i:05d}" for i in range(3000)]
    schema = {"type": "array", "items": {"enum": values}, "minItems": 1}
    grammar = Grammar.from_json_schema({"oneOf": [schema, {"type": "integer"}]})
    assert accepts(grammar, '["v00000","v02999"]')
    assert not accepts(grammar, '["v03000"]')
    assert accepts(grammar, "12")


def test_scan_finds_references_at_any_depth_and_tuple_items_within_64_levels() -> None:
    from constrain.frontends.json_schema.context import _scan

    assert _scan(True) == (False, False)
    assert _scan({"items": [{"type": "string"}]}) == (True, False)
    assert _scan({"properties": {"a": {"anyOf": [{"$ref": "#/$defs/x"}]}}}) == (False, True)
    assert _scan({"$dynamicRef": "#node"})[1] and _scan({"$recursiveRef": "#"})[1]
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(100):
        nxt: dict[str, object] = {}
        cur["not"] = nxt
        cur = nxt
    cur["items"] = [{}]
    cur["$ref"] = "#"
    assert _scan(deep) == (False, True)  # too deep for the draft guess, never for references
    loop: dict[str, object] = {"type": "object"}
    loop["properties"] = {"self": loop}  # a Python structure that contains itself
    assert _scan(loop) == (False, False)


def test_references_resolve_without_a_crawl_only_when_there_are_none() -> None:
    """Embedded $id / $anchor targets are found (the crawl runs) whenever a reference exists."""
    schema = {
        "$defs": {"item": {"$id": "https://example.com/item", "$anchor": "it", "type": "integer"}},
        "type": "array",
        "items": {"$ref": "https://example.com/item#it"},
    }
    grammar = Grammar.from_json_schema(schema)
    compiled = constrain.Compiler(byte_vocabulary()).compile(grammar)
    assert constrain.Matcher(compiled).accept_tokens(list(b"[1,2]")) == 5
    assert constrain.Matcher(compiled).accept_tokens(list(b'["a"]')) < 5


@pytest.mark.parametrize(
    ("schema", "accepted", "rejected"),
    [
        ({"type": "integer"}, ["0", "-7", "999", "1.0"], ["1000", "1e2", "1.0000"]),
        ({"type": "number"}, ["0.125", "-999.5", "12"], ["0.1255", "1000", "1e2"]),
        # the schema's own bounds need more digits: they get one more than they need
        ({"type": "integer", "minimum": 100000}, ["100000", "999999"], ["10000000"]),
        ({"type": "number", "multipleOf": 0.00001}, ["0.00002", "1.5"], ["0.000002"]),
    ],
)
def test_max_number_digits_bounds_each_side_of_the_point(
    schema: dict[str, Any], accepted: list[str], rejected: list[str]
) -> None:
    grammar = Grammar.from_json_schema(schema, max_number_digits=3)
    for text in accepted:
        assert accepts(grammar, text), text
    for text in rejected:
        assert not accepts(grammar, text), text


def test_max_number_digits_is_recorded_where_it_narrows() -> None:
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "population": {"type": "integer", "minimum": 0},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "additionalProperties": False,
    }
    warnings = Grammar.from_json_schema(schema, max_number_digits=15).warnings
    assert [w.split(":")[0] for w in warnings] == ["#/properties/population", "#/properties/ratio"]
    assert all("max_number_digits" in w for w in warnings)
    assert Grammar.from_json_schema(schema).warnings == ()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "15"])
def test_max_number_digits_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_number_digits"):
        Grammar.from_json_schema({"type": "number"}, max_number_digits=bad)


def test_open_ends_name_what_bounds_nothing() -> None:
    from constrain.frontends.json_schema.open_ends import open_ends

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "code": {"type": "string", "maxLength": 4},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "score": {"type": "number"},
        },
        "additionalProperties": False,
        "$defs": {"tag": {"type": "string", "enum": ["a", "b"]}, "x/y": {"type": "object"}},
    }
    assert [s.split(": ")[0] for s in open_ends(schema)] == [
        "#/properties/name",
        "#/properties/tags",
        "#/properties/score",
        "#/$defs/x~1y",
    ]
    assert "#/properties/score" not in " ".join(open_ends(schema, max_number_digits=15))


def test_unsatisfiable_length_bounds_are_an_empty_branch() -> None:
    """minLength above maxLength: that branch accepts nothing (was a bare ValueError)."""
    either = Grammar.from_json_schema(
        {"anyOf": [{"type": "string", "minLength": 5, "maxLength": 3}, {"type": "integer"}]}
    )
    assert accepts(either, "12") and not accepts(either, '"abcd"')
    optional = Grammar.from_json_schema(
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 1}}}
    )
    assert accepts(optional, "{}") and not accepts(optional, '{"a":"x"}')
    for schema in (
        {"type": "string", "minLength": 5, "maxLength": 3},
        {
            "type": "object",
            "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 3}},
            "required": ["a"],
        },
    ):
        with pytest.raises(constrain.GrammarError, match="match no string at all"):
            _COMPILER.compile(Grammar.from_json_schema(schema))


def test_a_large_count_is_dropped_only_where_implied() -> None:
    from constrain.automata.product import plain_dfa as plain
    from constrain.automata.product import unit_counts
    from constrain.ir import ANY_CHAR, Literal, Repeat
    from constrain.ir.nodes import Alt

    unit = plain(ANY_CHAR, 4096, "max_dfa_states")
    word = plain(Repeat(Alt((Literal("ab"), Literal("é"))), 1, 3), 4096, "max_dfa_states")
    assert unit_counts(word, unit) == (1, 6)  # "é" is one character, "ab" two
    # a language with a string that ends inside a character is not made of characters
    broken = plain(Alt((Literal("ab"), Literal("é"))), 4096, "max_dfa_states")
    assert unit_counts(broken, plain(Literal("ab"), 4096, "max_dfa_states")) is None
    # bounds the other operand always meets go; the others stay and are enforced
    for schema, good, bad in (
        ({"type": "string", "format": "date", "maxLength": 40000}, ["2024-01-31"], ["2024-1-1"]),
        ({"type": "string", "pattern": "^[a-z]+$", "minLength": 300}, ["a" * 300], ["a" * 299]),
    ):
        grammar = Grammar.from_json_schema(schema)
        for text in good:
            assert accepts(grammar, json.dumps(text))
        for text in bad:
            assert not accepts(grammar, json.dumps(text))
