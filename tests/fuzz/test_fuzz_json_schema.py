"""Fuzz: random JSON Schemas (generated, and mutated from the dev MaskBench file) must never
accept an instance ``jsonschema`` rejects; random instances are checked through a Matcher on the
byte vocabulary. Schemas the compiler refuses (GrammarError, or CompileLimitError past an
automaton size limit) are skipped: refusal is the documented outcome, never a wrong grammar."""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fuzz.budget import fuzz_settings
from hypothesis import assume, given
from hypothesis import strategies as st
from property.test_json_schema_property import accepts

from constrain.compiler import CompiledGrammar, Compiler
from constrain.errors import CompileLimitError, GrammarError
from constrain.ir import Grammar
from constrain.testing import byte_vocabulary

COMPILER = Compiler(byte_vocabulary())
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

scalars = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("integer")},
        optional={
            "minimum": st.integers(-20, 20),
            "maximum": st.integers(-20, 20),
            "multipleOf": st.integers(1, 4),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("number")},
        optional={"minimum": st.integers(-5, 5), "exclusiveMaximum": st.integers(-5, 5)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 4),
            "pattern": st.sampled_from(["^a", "b$", "^[ab]*$", "\\d"]),
            "format": st.sampled_from(["date", "email", "uuid"]),
        },
    ),
    st.fixed_dictionaries(
        {
            "enum": st.lists(
                st.one_of(st.integers(-3, 3), st.text("ab", max_size=2), st.booleans(), st.none()),
                min_size=1,
                max_size=3,
            )
        }
    ),
    st.fixed_dictionaries({"const": st.one_of(st.integers(-3, 3), st.text("ab", max_size=2))}),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.just({}),
)


def _containers(kids: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("array"), "items": kids},
            optional={
                "minItems": st.integers(0, 2),
                "maxItems": st.integers(0, 3),
                "uniqueItems": st.booleans(),
            },
        ),
        st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.dictionaries(names, kids, max_size=3)},
            optional={
                "required": st.lists(names, max_size=2, unique=True),
                "additionalProperties": st.one_of(st.booleans(), kids),
                "minProperties": st.integers(0, 2),
            },
        ),
        st.lists(kids, min_size=2, max_size=3).map(lambda xs: {"anyOf": xs}),
        st.lists(kids, min_size=2, max_size=2).map(lambda xs: {"oneOf": xs}),
        st.lists(kids, min_size=2, max_size=2).map(lambda xs: {"allOf": xs}),
        kids.map(lambda x: {"not": x}),
    )


schemas = st.recursive(scalars, _containers, max_leaves=5)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-25, 25),
        st.floats(-6, 6, allow_nan=False).map(lambda x: round(x, 1)),
        st.text("abc1-@.", max_size=4),
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), kids, max_size=3),
    ),
    max_leaves=6,
)


@cache
def _compile(text: str) -> CompiledGrammar | None:
    try:
        return COMPILER.compile(Grammar.from_json_schema(json.loads(text)))
    except (GrammarError, CompileLimitError):  # documented refusals, not wrong grammars
        return None


def _never_accepts_invalid(schema: dict[str, Any], instances: list[Any]) -> None:
    compiled = _compile(json.dumps(schema, sort_keys=True))
    assume(compiled is not None)
    assert compiled is not None
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    for value in instances:
        for text in (json.dumps(value, separators=(",", ":")), json.dumps(value)):
            if accepts(compiled, text):
                assert validator.is_valid(value), (schema, text)


@fuzz_settings()
@given(schema=schemas, instances=st.lists(json_values, max_size=10))
def test_generated_schemas_never_accept_invalid_instances(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    _never_accepts_invalid(schema, instances)


@pytest.fixture(scope="module")
def maskbench(data_dir: Path) -> list[dict[str, Any]]:
    rows = []
    with gzip.open(data_dir / "maskbench-dev.jsonl.gz", "rt") as fh:
        for line in fh:
            row = json.loads(line)
            if len(line) < 1500:  # small schemas: cheap to compile many times
                rows.append(row)
    return rows


def _mutate(node: Any, rng: random.Random) -> Any:
    """Change one numeric bound, type, enum, required list or boolean somewhere in the schema."""
    if isinstance(node, list):
        return [_mutate(x, rng) if rng.random() < 0.5 else x for x in node]
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for key, value in node.items():
        roll = rng.random()
        if isinstance(value, bool):
            out[key] = not value if roll < 0.3 else value
        elif isinstance(value, int) and roll < 0.3:
            out[key] = value + rng.choice([-2, -1, 1, 2])
        elif key == "type" and roll < 0.2:
            out[key] = rng.choice(
                ["string", "integer", "number", "object", "array", "boolean", "null"]
            )
        elif key == "required" and isinstance(value, list) and roll < 0.3:
            out[key] = value[1:]
        elif isinstance(value, (dict, list)):
            out[key] = _mutate(value, rng)
    return out


@fuzz_settings()
@given(
    pick=st.integers(0, 10**6),
    seed=st.integers(0, 2**32 - 1),
    instances=st.lists(json_values, max_size=6),
)
def test_mutated_maskbench_schemas_never_accept_invalid_instances(
    maskbench: list[dict[str, Any]], pick: int, seed: int, instances: list[Any]
) -> None:
    row = maskbench[pick % len(maskbench)]
    schema = _mutate(row["schema"], random.Random(seed))
    tests = [t["data"] for t in row.get("tests", [])]
    _never_accepts_invalid(schema, tests + instances)
