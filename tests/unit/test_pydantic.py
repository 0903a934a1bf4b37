"""pydantic front end: ``Grammar.from_pydantic`` on v2 models and ``TypeAdapter`` types.

A model's dump (``model_dump_json``, compact, and ``indent=2`` under ``whitespace="indent"``)
is accepted, and seeded random walks of the byte-level matcher end in text that
``model_validate_json`` accepts (the guarantee ``from_pydantic`` documents). Unsupported
constructs fail with :class:`~constrain.JsonSchemaError` pointing into the model's schema.
"""

from __future__ import annotations

import datetime
import enum
import random
import uuid
import zlib
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal

import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from constrain import CompiledGrammar, Compiler, Grammar, JsonSchemaError, Matcher
from constrain.testing import byte_vocabulary

VOCAB = byte_vocabulary()
EOS = int(VOCAB.eos_ids[0])
COMPILER = Compiler(VOCAB)
CLOSERS = frozenset(b']}"')
NUM_WALKS = 15
MAX_STEPS = 500
UTC = datetime.timezone.utc


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    street: Annotated[str, Field(max_length=10)]
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]


class Cat(BaseModel):
    pet_type: Literal["cat"]
    lives: Annotated[int, Field(ge=0, le=9)]


class Dog(BaseModel):
    pet_type: Literal["dog"]
    barks: bool = True


class Person(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=8)]
    age: Annotated[int, Field(ge=0, le=150)]
    address: Address
    nickname: str | None = None
    scores: Annotated[list[int], Field(min_length=1, max_length=3)]
    color: Color = Color.RED
    level: Level = Level.LOW
    mode: Literal["a", "b"] = "a"
    pet: Annotated[Cat | Dog, Field(discriminator="pet_type")]
    weights: dict[str, float] = {}


class Event(BaseModel):
    id: uuid.UUID
    day: datetime.date
    at: datetime.datetime
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5
    count: Annotated[int, Field(ge=0, le=10)] = 0


class Node(BaseModel):
    value: int
    children: list[Node] = []


ADDRESS = Address(street="Main St 1", zip="12345")
INSTANCES: dict[str, tuple[type[BaseModel], Callable[[], BaseModel]]] = {
    "address": (Address, lambda: ADDRESS),
    "person_defaults": (
        Person,
        lambda: Person(name="Ann", age=30, address=ADDRESS, scores=[1], pet=Dog(pet_type="dog")),
    ),
    "person_full": (
        Person,
        lambda: Person(
            name="Bob é",
            age=0,
            address=Address(street='a"b\\c\n', zip="00000"),
            nickname="bobby",
            scores=[-5, 0, 10**20],
            color=Color.GREEN,
            level=Level.HIGH,
            mode="b",
            pet=Cat(pet_type="cat", lives=9),
            weights={"x": 0.5, "y": -1e-7, "": 3.0, "z": 1e300},
        ),
    ),
    "event": (
        Event,
        lambda: Event(
            id=uuid.UUID(int=2**128 - 1),
            day=datetime.date(2024, 2, 29),
            at=datetime.datetime(2024, 1, 2, 3, 4, 5, 123, tzinfo=UTC),
            ratio=0.999,
            count=10,
        ),
    ),
    "event_offset": (
        Event,
        lambda: Event(
            id=uuid.UUID(int=1),
            day=datetime.date(1, 1, 1),
            at=datetime.datetime(
                1999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))
            ),
        ),
    ),
    "node_leaf": (Node, lambda: Node(value=-1)),
    "node_tree": (
        Node,
        lambda: Node(value=1, children=[Node(value=2, children=[Node(value=3)]), Node(value=4)]),
    ),
}
MODELS: list[type[BaseModel]] = [Address, Person, Event, Node]


@cache
def compiled(model: Any, **options: Any) -> CompiledGrammar:
    return COMPILER.compile(Grammar.from_pydantic(model, **options))


def accepts(grammar: CompiledGrammar, text: str) -> bool:
    matcher = Matcher(grammar)
    data = list(text.encode())
    return matcher.accept_tokens(data) == len(data) and matcher.is_accepting()


def validates(model: type[BaseModel], text: str) -> bool:
    try:
        model.model_validate_json(text)
    except pydantic.ValidationError:
        return False
    return True


def random_walk(grammar: CompiledGrammar, rng: random.Random) -> bytes | None:
    """Return the text of a walk that ends in EOS, biased towards short texts (None: capped)."""
    matcher = Matcher(grammar)
    out = bytearray()
    for _ in range(MAX_STEPS):
        allowed = matcher.allowed_token_ids().tolist()
        assert allowed, f"dead end after {bytes(out)!r}"
        long = len(out) > 40
        closers = [t for t in allowed if t in CLOSERS]
        if EOS in allowed and (long or rng.random() < 0.15):
            token = EOS
        elif closers and rng.random() < (0.8 if long else 0.1):
            token = rng.choice(closers)
        else:
            token = rng.choice(allowed)
        assert matcher.accept_token(token)
        if token == EOS:
            return bytes(out)
        out.append(token)
    return None


def check_walks(model: Any, validate: Callable[[bytes], object]) -> None:
    """Run seeded walks and validate every completed text."""
    grammar = compiled(model)
    rng = random.Random(zlib.crc32(repr(model).encode()))
    done = 0
    for _ in range(NUM_WALKS):
        text = random_walk(grammar, rng)
        if text is None:
            continue
        try:
            validate(text)
        except pydantic.ValidationError as err:
            raise AssertionError(f"{text!r}: {err.errors()}") from err
        done += 1
    assert done >= NUM_WALKS // 2, f"only {done} of {NUM_WALKS} walks were usable"


# -- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_model_dump_is_accepted(name: str) -> None:
    model, make = INSTANCES[name]
    instance = make()
    text = instance.model_dump_json()
    assert accepts(compiled(model), text), text
    assert model.model_validate_json(text) == instance
    indented = instance.model_dump_json(indent=2)
    assert accepts(compiled(model, whitespace="indent"), indented), indented


@pytest.mark.parametrize("model", [Address, Event, Node])
def test_any_order_accepts_reordered_dump(model: type[BaseModel]) -> None:
    for name, (cls, make) in INSTANCES.items():
        if cls is not model:
            continue
        dumped = make().model_dump(mode="json")
        text = pydantic.TypeAdapter(dict[str, Any]).dump_json(dict(reversed(dumped.items())))
        assert accepts(compiled(model, any_order=True), text.decode()), name


def test_optional_and_defaults() -> None:
    grammar = compiled(Person)
    required = '{"name":"A","age":1,"address":{"street":"","zip":"12345"},"scores":[1]'
    assert accepts(grammar, required + ',"pet":{"pet_type":"dog"}}')
    assert accepts(grammar, required + ',"pet":{"pet_type":"cat","lives":0}}')
    assert accepts(grammar, required.replace('"scores"', '"nickname":null,"scores"') + ',"pet"'
                   ':{"pet_type":"dog","barks":false}}')  # fmt: skip
    assert not accepts(grammar, required + "}")  # pet is required
    assert not accepts(grammar, required.replace("[1]", "[]") + ',"pet":{"pet_type":"dog"}}')
    assert not accepts(grammar, required + ',"pet":{"pet_type":"cat"}}')  # lives required
    assert not accepts(grammar, required + ',"pet":{"pet_type":"cow"}}')
    assert not accepts(grammar, required.replace('"age":1', '"age":151') + ',"pet":{}}')
    assert not accepts(grammar, required + ',"color":"blue","pet":{"pet_type":"dog"}}')
    assert not accepts(grammar, required + ',"level":3,"pet":{"pet_type":"dog"}}')


@pytest.mark.parametrize("model", MODELS, ids=[m.__name__ for m in MODELS])
def test_walks_validate(model: type[BaseModel]) -> None:
    check_walks(model, model.model_validate_json)


def test_type_adapter_list_of_int() -> None:
    grammar = compiled(list[int])
    for text in ["[]", "[1]", "[-3,0,12]"]:
        assert accepts(grammar, text), text
    for text in ['["1"]', "[1.5]", "{}", "[1,]", "1", "[1.0,2e3]"]:
        assert not accepts(grammar, text), text
    check_walks(list[int], TypeAdapter(list[int]).validate_json)


def test_type_adapter_dict_of_float() -> None:
    grammar = compiled(dict[str, float])
    assert accepts(grammar, '{"a":1,"b":-2.5e-3}')
    assert not accepts(grammar, '{"a":"1"}')
    check_walks(dict[str, float], TypeAdapter(dict[str, float]).validate_json)


def test_lookahead_pattern_is_rejected_with_pointer() -> None:
    class Code(BaseModel):
        model_config = ConfigDict(regex_engine="python-re")  # pydantic's own engine refuses it
        ok: str
        code: Annotated[str, Field(pattern=r"(?=a)a")]

    with pytest.raises(JsonSchemaError, match="lookahead") as info:
        Grammar.from_pydantic(Code)
    assert info.value.pointer == "#/properties/code/pattern"


def test_set_field_needs_lenient() -> None:
    class Tagged(BaseModel):
        tags: set[str]

    with pytest.raises(JsonSchemaError, match="uniqueItems") as info:
        Grammar.from_pydantic(Tagged)
    assert info.value.pointer == "#/properties/tags/uniqueItems"
    grammar = Grammar.from_pydantic(Tagged, lenient=True)
    assert any("uniqueItems" in w for w in grammar.warnings)
    assert accepts(COMPILER.compile(grammar), Tagged(tags={"a", "b"}).model_dump_json())


def test_non_pydantic_type_is_a_type_error() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="pydantic cannot build a JSON Schema"):
        Grammar.from_pydantic(Opaque)


@pytest.mark.parametrize("number", ["1e19", "12345678901234567890.0", "3e400"])
def test_unbounded_int_with_exponent(number: str) -> None:
    text = '{"value":%s}' % number  # noqa: UP031
    assert not accepts(compiled(Node), text) or validates(Node, text), text


def test_leap_second() -> None:
    text = Event(
        id=uuid.UUID(int=0), day=datetime.date(2024, 6, 30), at=datetime.datetime(2024, 1, 1)
    ).model_dump_json()
    text = text.replace('"2024-01-01T00:00:00"', '"2024-06-30T23:59:60Z"')
    assert not accepts(compiled(Event), text) or validates(Event, text), text


class _Inner(BaseModel):
    properties: int  # a field named like the keyword
    const_holder: dict[str, int] = {"properties": 1}


class _Outer(BaseModel):
    inner: _Inner
    items: list[_Inner]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


def test_objects_are_closed_by_default() -> None:
    from constrain.frontends.pydantic import pydantic_schema

    schema = pydantic_schema(_Outer)
    assert schema["additionalProperties"] is False
    inner = schema["$defs"]["_Inner"]
    assert inner["additionalProperties"] is False
    assert set(inner["properties"]) == {"properties", "const_holder"}  # no keyword injected
    assert inner["properties"]["const_holder"]["default"] == {"properties": 1}
    assert pydantic_schema(_Open)["additionalProperties"] is True  # extra="allow" kept
    assert "additionalProperties" not in pydantic_schema(_Outer, extra_properties=True)


def test_closed_objects_reject_unknown_keys(byte_vocab) -> None:  # type: ignore[no-untyped-def]
    ok = '{"inner":{"properties":1},"items":[]}'
    extra = '{"inner":{"properties":1,"zip":"x"},"items":[]}'
    closed = Matcher(Compiler(byte_vocab).compile(Grammar.from_pydantic(_Outer)))
    assert closed.accept_bytes(ok) and closed.is_accepting()
    closed.reset()
    assert not closed.accept_bytes(extra)
    open_ = Matcher(
        Compiler(byte_vocab).compile(Grammar.from_pydantic(_Outer, extra_properties=True))
    )
    assert open_.accept_bytes(extra) and open_.is_accepting()
    _Outer.model_validate_json(ok)


class _Bounded(BaseModel):
    n: int = Field(ge=0, le=100)


@pytest.mark.parametrize("number", ["11.0", "11.000", "1e1", "1.1e1"])
def test_integers_are_written_plainly(number: str, byte_vocab) -> None:  # type: ignore[no-untyped-def]
    # pydantic reads these as integers, but generation must not wander into "11.0000..."
    m = Matcher(Compiler(byte_vocab).compile(Grammar.from_pydantic(_Bounded)))
    text = '{"n":%s}' % number  # noqa: UP031
    assert not (m.accept_bytes(text) and m.is_accepting()), text
    m.reset()
    assert m.accept_bytes('{"n":11}') and m.is_accepting()
