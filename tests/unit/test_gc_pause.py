"""Unit tests of constrain._gc: the garbage collector paused while grammars are built."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

import constrain
import constrain.frontends.json_schema.emit as emit
from constrain._gc import paused_gc
from constrain.errors import RegexError


@pytest.fixture(autouse=True)
def _collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_front_end_and_compile_run_paused(tiny_vocab, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[bool] = []
    build = emit.compile_json_schema

    def recording_build(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return build(*args, **kwargs)

    monkeypatch.setattr(emit, "compile_json_schema", recording_build)
    compile_ = constrain.Compiler._compile

    def recording_compile(self, grammar):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return compile_(self, grammar)

    monkeypatch.setattr(constrain.Compiler, "_compile", recording_compile)
    grammar = constrain.Grammar.from_json_schema({"enum": ["a", "b"]})
    constrain.Compiler(tiny_vocab).compile(grammar)
    assert seen == [False, False]
    assert gc.isenabled()


def test_collector_restored_after_an_error() -> None:
    with pytest.raises(RegexError):
        constrain.Grammar.from_regex("(?<=a)b")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    constrain.Grammar.from_regex("[a-z]+")
    assert not gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_nested_and_concurrent_pauses_end_with_the_last() -> None:
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with paused_gc():
            entered.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=other)
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
        thread.start()
        assert entered.wait(timeout=30)
    assert not gc.isenabled()  # the other thread's pause goes on
    release.set()
    thread.join(timeout=30)
    assert gc.isenabled()


_CYCLE_SCHEMAS = [
    {  # objects in declaration order: optional, required, pattern and additional properties
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": {"type": "number"},
        "required": ["id"],
        "maxProperties": 6,
    },
    {  # arrays: prefix items, contains, uniqueItems, a large count (counted in binary)
        "type": "object",
        "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "null"}]},
            "some": {"type": "array", "contains": {"const": 1}, "minContains": 2},
            "set": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
            "many": {"type": "array", "items": {"type": "integer"}, "minItems": 3000},
        },
    },
    {"type": "string", "pattern": "^[\u00e0-\u00ff\u4e00-\u9fff]+$", "maxLength": 40},
]


@pytest.mark.parametrize("any_order", [False, True])
def test_a_grammar_and_its_compile_leave_no_reference_cycle(tiny_vocab, any_order) -> None:  # type: ignore[no-untyped-def]
    """Dropped, a grammar and its compiled form are freed by reference counting at once.

    A cycle among them (a nested function that calls itself holds its closure, and so the
    front end's emitter with every rule) would keep them until the cyclic collector ran.
    """

    def build() -> None:
        for schema in _CYCLE_SCHEMAS:
            grammar = constrain.Grammar.from_json_schema(schema, any_order=any_order)
            compiled = constrain.Compiler(tiny_vocab).compile(grammar)
            matcher = constrain.Matcher(compiled)
            bitmask = constrain.allocate_token_bitmask(1, tiny_vocab.size)
            matcher.fill_next_token_bitmask(bitmask)

    build()  # imports and one-time set-up (libraries' lazily made classes) out of the way
    gc.collect()
    gc.disable()
    try:
        build()
        assert gc.collect() == 0
    finally:
        gc.enable()
