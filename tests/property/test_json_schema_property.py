"""JSON Schema grammars against hypothesis-jsonschema instances and ``jsonschema`` validation.

For a table of supported schemas (every keyword family the front end claims), in both
directions:

- completeness: instances drawn by ``hypothesis_jsonschema.from_schema`` (kept only when
  ``jsonschema`` validates them, since the generator ignores some 2019+ keywords such as
  ``maxContains``) are accepted, compact with ``any_order=True``, compact in declaration order
  after reordering the keys to the schema's order, and with ``json.dumps``' ``", "``/``": "``
  separators under ``whitespace="flexible"``;
- soundness: seeded random walks of the byte-level matcher (random allowed byte, biased towards
  closing brackets, quotes and EOS so that texts stay short) end in text that ``json.loads``
  reads and ``Draft202012Validator`` (with the format checker) validates; in flexible mode no
  whitespace run exceeds ``max_whitespace``.

Numbers whose value Python floats cannot hold (``1e999``, ``1e-999``) cannot be judged by
``jsonschema`` and their walks are skipped, as are walks that hit the step cap. Hypothesis runs
derandomized, without deadlines or an example database.
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as conjecture_utils
from hypothesis_jsonschema import _from_schema, from_schema

from constrain import CompiledGrammar, Compiler, Grammar, Matcher
from constrain.frontends.json_schema.shapes import JsonSchemaOptions
from constrain.testing import byte_vocabulary

VOCAB = byte_vocabulary()
EOS = int(VOCAB.eos_ids[0])
COMPILER = Compiler(VOCAB)
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
MAX_STEPS = 400
NUM_WALKS = 16
MAX_WHITESPACE = 2

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

Schema = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """A supported schema; ``hyp`` is an equivalent one hypothesis-jsonschema can read."""

    name: str
    schema: Schema
    hyp: Schema | None = None
    ordered: bool = True  # whether in_declaration_order() knows this schema's key order


NODE = {
    "type": "object",
    "properties": {
        "value": {"type": "integer", "minimum": -99, "maximum": 99},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
    },
    "required": ["value"],
    "additionalProperties": False,
}
PET = {
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "cat"},
                "lives": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "required": ["type", "lives"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"type": {"const": "dog"}, "good": {"type": "boolean"}},
            "required": ["type"],
            "additionalProperties": False,
        },
    ],
    "discriminator": {"propertyName": "type"},
}
PREFIX = [{"type": "string", "maxLength": 3}, {"type": "integer"}, {"type": "boolean"}]

CASES = [
    Case(
        "object_required_optional",
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string", "maxLength": 8},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
    ),
    Case(
        "nested_arrays",
        {
            "type": "array",
            "items": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 99},
                "minItems": 1,
                "maxItems": 3,
            },
            "minItems": 1,
            "maxItems": 3,
        },
    ),
    Case("enum", {"enum": ["red", "green", "blue", 3, None, True, [1, {"k": "v"}]]}),
    Case(
        "const_object",
        {
            "type": "object",
            "properties": {"kind": {"const": "point"}, "xy": {"const": [1, 2.5]}},
            "required": ["kind"],
            "additionalProperties": False,
        },
    ),
    Case("number_range", {"type": "number", "minimum": -10.5, "maximum": 100}),
    Case("number_positive", {"type": "number", "exclusiveMinimum": 0}),
    Case(
        "integer_exclusive_multiple",
        {"type": "integer", "exclusiveMinimum": -20, "exclusiveMaximum": 50, "multipleOf": 5},
    ),
    Case("number_multiple", {"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 10}),
    Case("string_pattern", {"type": "string", "pattern": "^[a-z]{2,4}-[0-9]{1,3}$"}),
    Case("string_length", {"type": "string", "minLength": 2, "maxLength": 6}),
    Case("format_date", {"type": "string", "format": "date"}),
    Case("format_uuid", {"type": "string", "format": "uuid"}),
    Case("format_ipv4", {"type": "string", "format": "ipv4"}),
    Case(
        "any_of",
        {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "maxLength": 3}]},
    ),
    Case("one_of_discriminator", PET),
    Case(
        "all_of",
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string", "maxLength": 3}}, "required": ["b"]},
                {"properties": {"a": {"minimum": 0, "maximum": 9}}},
            ],
            "propertyNames": {"enum": ["a", "b", "c"]},
        },
        ordered=False,
    ),
    Case("ref_recursion", {"$defs": {"node": NODE}, "$ref": "#/$defs/node"}),
    Case(
        "additional_properties_schema",
        {
            "type": "object",
            "properties": {"x": {"type": "boolean"}},
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9},
            "maxProperties": 3,
        },
    ),
    Case(
        "pattern_properties",
        {
            "type": "object",
            "patternProperties": {
                "^s_": {"type": "string", "maxLength": 3},
                "^n_": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "additionalProperties": False,
            "maxProperties": 3,
        },
    ),
    Case(
        "property_names",
        {
            "type": "object",
            "propertyNames": {"pattern": "^[a-c]{1,3}$"},
            "additionalProperties": {"type": "null"},
            "maxProperties": 3,
        },
    ),
    Case(
        "dependent_required",
        {
            "type": "object",
            "properties": {
                "card": {"type": "string", "maxLength": 4},
                "billing": {"type": "string", "maxLength": 4},
                "x": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "dependentRequired": {"card": ["billing"]},
            "additionalProperties": False,
        },
    ),
    Case(
        "if_then_else",
        {
            "type": "object",
            "properties": {"country": {"enum": ["US", "NL"]}, "code": {"type": "string"}},
            "required": ["country", "code"],
            "additionalProperties": False,
            "if": {"properties": {"country": {"const": "US"}}},
            "then": {"properties": {"code": {"pattern": "^[0-9]{5}$"}}},
            "else": {"properties": {"code": {"pattern": "^[0-9]{4}[A-Z]{2}$"}}},
        },
    ),
    Case(
        "prefix_items",
        {"type": "array", "prefixItems": PREFIX, "items": False, "minItems": 2},
        # hypothesis-jsonschema reads only the draft 7 spelling of tuples
        hyp={"type": "array", "items": PREFIX, "additionalItems": False, "minItems": 2},
    ),
    Case(
        "contains",
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 9},
            "contains": {"const": 7},
            "minContains": 1,
            "maxContains": 2,
            "maxItems": 5,
        },
    ),
    Case("type_list", {"type": ["string", "integer", "null"], "maxLength": 3, "maximum": 5}),
]
IDS = [case.name for case in CASES]


# -- helpers -------------------------------------------------------------------------------


@cache
def compiled(name: str, **options: Any) -> CompiledGrammar:
    case = next(c for c in CASES if c.name == name)
    return COMPILER.compile(Grammar.from_json_schema(case.schema, **options))


def accepts(grammar: CompiledGrammar, text: str) -> bool:
    matcher = Matcher(grammar)
    data = list(text.encode())
    return matcher.accept_tokens(data) == len(data) and matcher.is_accepting()


def validator(schema: Schema) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def unroll(schema: Any, defs: Schema, depth: int) -> Any:
    """Inline local ``$ref``s ``depth`` levels deep (then ``false``): hypothesis-jsonschema
    cannot generate from recursive references."""
    if isinstance(schema, list):
        return [unroll(s, defs, depth) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return unroll(defs[name], defs, depth - 1) if depth > 0 else False
    return {k: unroll(v, defs, depth) for k, v in schema.items() if k != "$defs"}


@cache
def instances(name: str) -> st.SearchStrategy[Any]:
    case = next(c for c in CASES if c.name == name)
    schema = case.hyp or case.schema
    if "$defs" in schema:
        schema = unroll(schema, schema["$defs"], 3)
    uuids = st.uuids().map(str)
    check = validator(case.schema)
    # hypothesis-jsonschema ignores maxContains; keep only what jsonschema calls valid
    return from_schema(schema, custom_formats={"uuid": uuids}).filter(check.is_valid)


class _ManyCompat:
    """The ``more()``/``reject()`` interface of hypothesis' old ``many``, on top of the new one.

    hypothesis-jsonschema 0.23 draws objects with ``cu.many(...).more()``; newer hypothesis
    turned ``many`` into a context manager and iterator (``AttributeError: 'many' object has no
    attribute 'more'``).
    """

    def __init__(self, data: Any, **kwargs: Any) -> None:
        self._many = conjecture_utils.many(data, **kwargs)
        self._many.__enter__()
        self._steps: Iterator[None] = iter(self._many)

    def more(self) -> bool:
        if next(self._steps, False) is None:
            return True
        self._many.__exit__(None)
        return False

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


@pytest.fixture(scope="module", autouse=True)
def _hypothesis_jsonschema_compat() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        if not hasattr(conjecture_utils.many, "more"):

            class _Utils:
                many = _ManyCompat

            patch.setattr(_from_schema, "cu", _Utils)
        yield


def in_declaration_order(value: Any, schema: Any, root: Schema) -> Any:
    """Return ``value`` with every object's keys in the order the grammar expects.

    Declared properties (``properties``, then names only in ``required``) come first, in
    declaration order; other keys follow in their original order.
    """
    if not isinstance(schema, dict):
        return value
    if "$ref" in schema:
        return in_declaration_order(value, root["$defs"][schema["$ref"].split("/")[-1]], root)
    for keyword in ("oneOf", "anyOf"):
        for branch in schema.get(keyword, []):
            if validator({**root, **branch}).is_valid(value):
                return in_declaration_order(value, branch, root)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        names = list(dict.fromkeys([*props, *schema.get("required", [])]))
        keys = [k for k in names if k in value] + [k for k in value if k not in names]
        additional = schema.get("additionalProperties", True)
        return {k: in_declaration_order(value[k], props.get(k, additional), root) for k in keys}
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        return [
            in_declaration_order(v, prefix[i] if i < len(prefix) else items, root)
            for i, v in enumerate(value)
        ]
    return value


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class UnrepresentableError(Exception):
    """A number Python floats cannot hold, so ``jsonschema`` cannot judge the text."""


def parse_number(text: str) -> int | float:
    """Read a JSON number: integral values exactly as ``int``, others as ``float``."""
    if not any(c in "123456789" for c in text.lower().partition("e")[0]):
        return 0
    value = float(text)
    if math.isinf(value) or value == 0.0:
        raise UnrepresentableError(text)
    exact = Decimal(text)  # the exponent is small here: the float is finite and not 0
    return int(exact) if exact == exact.to_integral_value() else value


CLOSERS = frozenset(b']}"')
WHITESPACE = frozenset(b" \t\n\r")


def choose(allowed: list[int], size: int, rng: random.Random, prefer_space: bool) -> int:
    """Pick a token: EOS or closers when the text is long, whitespace first if asked."""
    long = size > 40
    if EOS in allowed and (long or rng.random() < 0.15):
        return EOS
    closers = [t for t in allowed if t in CLOSERS]
    if closers and rng.random() < (0.8 if long else 0.1):
        return rng.choice(closers)
    spaces = [t for t in allowed if t in WHITESPACE]
    if prefer_space and spaces and rng.random() < 0.6:
        return rng.choice(spaces)
    return rng.choice(allowed)


def random_walk(grammar: CompiledGrammar, rng: random.Random, prefer_space: bool) -> str | None:
    """Return the text of one random walk that ends in EOS (None: it hit the step cap)."""
    matcher = Matcher(grammar)
    out = bytearray()
    for _ in range(MAX_STEPS):
        allowed = matcher.allowed_token_ids().tolist()
        assert allowed, f"dead end after {bytes(out)!r}"
        token = choose(allowed, len(out), rng, prefer_space)
        assert matcher.accept_token(token)
        if token == EOS:
            assert matcher.is_terminated()
            return out.decode()
        out.append(token)
    return None


def declared_names(schema: Any) -> set[str]:
    """Return every name in some ``properties`` or ``required`` of ``schema``."""
    if isinstance(schema, list):
        return set().union(*map(declared_names, schema))
    if not isinstance(schema, dict):
        return set()
    names = set(schema.get("properties", ())) | set(schema.get("required", ()))
    return names.union(*map(declared_names, schema.values()))


def walks(name: str, prefer_space: bool = False, **options: Any) -> Iterator[tuple[str, Any]]:
    """Yield ``(text, value)`` for the completed, representable walks of one case.

    A declared property never appears twice in an object (additional ones may: the grammar
    cannot tell every undeclared key from the others, and ``json.loads`` keeps the last).
    """
    declared = declared_names(next(c for c in CASES if c.name == name).schema)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items if k in declared]
        assert len(keys) == len(set(keys)), f"a declared property repeats in {items}"
        return dict(items)

    grammar = compiled(name, **options)
    rng = random.Random(zlib.crc32(f"{name}{sorted(options.items())}".encode()))
    done = 0
    for _ in range(NUM_WALKS):
        text = random_walk(grammar, rng, prefer_space)
        if text is None:
            continue
        try:
            value = json.loads(
                text, parse_float=parse_number, parse_int=int, object_pairs_hook=pairs
            )
        except UnrepresentableError:
            continue
        done += 1
        yield text, value
    assert done >= NUM_WALKS // 3, f"only {done} of {NUM_WALKS} walks were usable"


def whitespace_runs(text: str) -> Iterator[int]:
    """Yield the length of every run of whitespace outside string literals."""
    run, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char in " \t\n\r":
            run += 1
            continue
        else:
            in_string = char == '"'
        if run:
            yield run
        run = 0
    if run:
        yield run


# -- tests ---------------------------------------------------------------------------------


def test_cases_are_supported_and_satisfiable() -> None:
    assert JsonSchemaOptions().max_whitespace > MAX_WHITESPACE
    for case in CASES:
        jsonschema.Draft202012Validator.check_schema(case.schema)
        assert compiled(case.name, any_order=True).vocab.size == VOCAB.size


@pytest.mark.parametrize("name", IDS)
@SETTINGS
@given(data=st.data())
def test_instances_are_accepted_any_order(name: str, data: st.DataObject) -> None:
    value = data.draw(instances(name))
    text = compact(value)
    assert accepts(compiled(name, any_order=True), text), text


@pytest.mark.parametrize("name", IDS)
@SETTINGS
@given(data=st.data())
def test_instances_are_accepted_flexible(name: str, data: st.DataObject) -> None:
    # ", " and ": "; raw non-ASCII: \uXXXX spellings of printable characters are a documented
    # false negative (constrain/frontends/json_schema/strings.py), see test_ascii_escapes below
    text = json.dumps(data.draw(instances(name)), ensure_ascii=False)
    assert accepts(compiled(name, any_order=True, whitespace="flexible"), text), text


@pytest.mark.parametrize("name", [c.name for c in CASES if c.ordered])
@SETTINGS
@given(data=st.data())
def test_instances_in_declaration_order_are_accepted(name: str, data: st.DataObject) -> None:
    case = next(c for c in CASES if c.name == name)
    value = in_declaration_order(data.draw(instances(name)), case.schema, case.schema)
    assume(validator(case.schema).is_valid(value))
    text = compact(value)
    assert accepts(compiled(name), text), text
    assert accepts(compiled(name, any_order=True), text), text


@pytest.mark.parametrize("any_order", [False, True])
@pytest.mark.parametrize("name", IDS)
def test_walks_are_valid(name: str, any_order: bool) -> None:
    case = next(c for c in CASES if c.name == name)
    check = validator(case.schema)
    for text, value in walks(name, any_order=any_order):
        errors = [e.message for e in check.iter_errors(value)]
        assert not errors, f"{text!r}: {errors}"


@pytest.mark.parametrize("name", IDS)
def test_flexible_walks_are_valid_and_bound_whitespace(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    check = validator(case.schema)
    longest = 0
    options = {"whitespace": "flexible", "max_whitespace": MAX_WHITESPACE, "any_order": True}
    for text, value in walks(name, prefer_space=True, **options):
        assert check.is_valid(value), text
        runs = list(whitespace_runs(text))
        assert max(runs, default=0) <= MAX_WHITESPACE, text
        longest = max(longest, *runs, 0)
    assert longest == MAX_WHITESPACE


@pytest.mark.parametrize("char", ["\x7f", "\u00e9", "\u20ac", "\U0001f600"])
def test_ascii_escapes(char: str) -> None:
    grammar = COMPILER.compile(Grammar.from_json_schema({"type": "string"}))
    assert accepts(grammar, json.dumps(char)), json.dumps(char)


def test_whitespace_runs() -> None:
    assert list(whitespace_runs('{ "a \\"  b" :\n\t[1 ,  2] }  ')) == [1, 1, 2, 1, 2, 1, 2]
