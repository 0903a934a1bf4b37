"""Terminals that differ only in the keys they exclude, built as shared fragments.

:mod:`constrain.automata.key_groups` plans them; the combined lexer must equal the one built
terminal by terminal (same transitions, same accepted and alive terminals in every state), eager
and lazy, and the JSON Schema objects that produce them keep their meaning.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest

from constrain import Compiler, Grammar, Matcher, Vocabulary
from constrain.automata import key_groups as key_groups_module
from constrain.automata.key_groups import key_groups
from constrain.automata.lazy_lexer import LazyLexer
from constrain.automata.lexer import build_lexer
from constrain.ir import Alt, CharSet, Complement, Concat, Intersect, Literal, Regex, Repeat

LETTERS = Repeat(CharSet(((ord("a"), ord("z")),)), 0, None)
BYTES = Vocabulary.from_bytes([bytes([b]) for b in range(128)] + [None])


def _other_keys(head: str, keys: list[str], tail: str = '":') -> Regex:
    """``head "(letters & ~keys)" tail``, the shape of an object's "any other key" terminal."""
    excluded: Regex = Literal(keys[0]) if len(keys) == 1 else Alt(tuple(map(Literal, keys)))
    body = Intersect((LETTERS, Complement(excluded)))
    return Concat((Literal(head), body, Literal(tail)))


def _same_lexers(a: Any, b: Any) -> bool:
    """Whether two lexers agree on every string: a walk of their product from both starts."""
    seen = {(0, 0)}
    todo = [(0, 0)]
    every_byte = np.arange(256)
    while todo:
        x, y = todo.pop()
        if not (a.accept_bits[x] == b.accept_bits[y]).all():
            return False
        if not (a.alive_bits[x] == b.alive_bits[y]).all():
            return False
        nx = a.trans[x, a.byte_class[every_byte]]
        ny = b.trans[y, b.byte_class[every_byte]]
        if ((nx < 0) != (ny < 0)).any():
            return False
        for pair in set(zip(nx[nx >= 0].tolist(), ny[ny >= 0].tolist(), strict=True)):
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)
    return True


def test_the_plan_shares_the_keys_no_terminal_declares() -> None:
    terminals = [
        _other_keys('"', ["ab", "cd"]),
        _other_keys('"', ["ab", "ef", "Zq"]),  # Zq is no string of letters: nobody accepts it
        _other_keys('"', ["cd"]),
        _other_keys(',"', ["ab"]),  # alone with its head: left as it is
        Literal("{"),
    ]
    plan = key_groups(terminals)
    assert plan.grouped == {0, 1, 2}
    head, tail = Concat((Literal('"'),)), Literal('":')
    union = Alt(tuple(map(Literal, ["Zq", "ab", "cd", "ef"])))
    shared = Concat((head, Intersect((LETTERS, Complement(union))), tail))
    assert plan.fragments[0] == (shared, (0, 1, 2))
    assert dict((who, f) for f, who in plan.fragments[1:]) == {
        (2,): Concat((head, Literal("ab"), tail)),
        (1,): Concat((head, Literal("cd"), tail)),
        (0, 2): Concat((head, Literal("ef"), tail)),
    }


@pytest.mark.parametrize("seed", range(6))
def test_grouped_lexers_equal_the_terminals_built_one_by_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    pool = ["a", "ab", "abc", "b", "ba", "cab", "zz", "Key", "abd"]
    terminals = [
        (f"T{i}", _other_keys(rng.choice(['"', ',"', ", "]), rng.sample(pool, rng.randint(1, 5))))
        for i in range(rng.randint(3, 9))
    ]
    terminals += [("OPEN", Literal('"a')), ("ANY", Concat((Literal('"'), LETTERS, Literal('"')))),
                  ("COMMA", Literal(","))]  # fmt: skip
    rng.shuffle(terminals)
    assert key_groups([r for _, r in terminals]).grouped
    grouped = build_lexer(terminals)
    lazy = LazyLexer(terminals)
    lazy.expand_all()
    monkeypatch.setattr(key_groups_module, "GROUP_MIN", 1 << 30)
    assert not key_groups([r for _, r in terminals]).grouped
    alone = build_lexer(terminals)
    assert _same_lexers(grouped, alone)
    assert _same_lexers(lazy.snapshot(), alone)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "inner": {
            "type": "object",
            "properties": {"b": {"type": "boolean"}, "a": {"type": "string"}},
        },
        "other": {
            "type": "object",
            "properties": {"c": {"type": "null"}},
            "additionalProperties": {"type": "integer"},
        },
    },
}


@pytest.mark.parametrize(
    "instance",
    [
        '{"a": 1, "inner": {"b": true, "a": "x", "c": [1]}, "b": "any"}',
        '{"inner": {"a": 1}}',  # a: a string in here
        '{"inner": {"b": false, "zz": {}}}',
        '{"other": {"c": null, "a": 2, "b": 3}}',
        '{"other": {"a": "two"}}',  # other keys of "other" are integers
        '{"other": {"c": 1}}',
        '{"a": "one"}',
        '{"a": 2, "inner": {"bb": 1}, "other": {"cc": 0}, "ab": "x"}',
        '{"inner": {"a": "x", "b": true}}',  # declared keys come in their order
    ],
)
def test_objects_keep_their_own_other_keys(instance: str) -> None:
    # (declared properties come first, in their order: an instance out of it is refused)
    grammar = Grammar.from_json_schema(SCHEMA, whitespace="flexible")
    terminals = [t.regex for t in grammar.normalise().terminals]
    assert len(key_groups(terminals).grouped) >= 3
    valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(json.loads(instance))
    valid &= instance != '{"inner": {"a": "x", "b": true}}'

    matcher = Matcher(Compiler(BYTES).compile(grammar))
    assert (matcher.accept_bytes(instance) and matcher.is_accepting()) == valid


def test_no_head_and_an_empty_key(monkeypatch: pytest.MonkeyPatch) -> None:
    def other(*keys: str) -> Regex:
        excluded: Regex = Alt(tuple(map(Literal, keys))) if len(keys) > 1 else Literal(keys[0])
        return Concat((Intersect((LETTERS, Complement(excluded))), Literal(":")))

    terminals = [("A", other("ab", "")), ("B", other("cd")), ("C", other("ab"))]
    assert key_groups([r for _, r in terminals]).grouped == {0, 1, 2}
    grouped = build_lexer(terminals)
    accepted = {
        text: {grouped.names[t] for t in grouped.terminals_accepting(grouped.walk(0, text))}
        for text in (b"ab:", b"cd:", b":", b"x:")
    }
    assert accepted == {b"ab:": {"B"}, b"cd:": {"A", "C"}, b":": {"B", "C"}, b"x:": {"A", "B", "C"}}
    monkeypatch.setattr(key_groups_module, "GROUP_MIN", 1 << 30)
    assert _same_lexers(grouped, build_lexer(terminals))
