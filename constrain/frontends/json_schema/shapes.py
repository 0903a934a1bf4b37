"""Stage 1 (JSON Schema): the data of the normal form, below every other module of the package.

- :class:`JsonSchemaOptions`, the options of ``Grammar.from_json_schema``;
- :class:`Piece`, one schema object with its reference resolver and JSON pointer;
- :class:`Shape` (with :class:`NumC`), one disjunct of a schema's normal form;
- the keyword sets that route a schema object's keywords, and the two synthetic keywords the
  complements of object keywords write (:data:`SOME_KEY`, :data:`NEGATION_MARK`);
- the readers of schema numbers (:func:`to_decimal`, :func:`non_negative_int`) and
  :func:`json_equal_key`, JSON equality as a hashable key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from constrain.errors import JsonSchemaError
from constrain.ir import Complement, Intersect

__all__ = [
    "ANY_SHAPE",
    "ARR_KEYWORDS",
    "NEGATION_MARK",
    "OBJ_KEYWORDS",
    "SOME_KEY",
    "TYPES",
    "JsonSchemaOptions",
    "NumC",
    "Piece",
    "Shape",
    "json_equal_key",
    "non_negative_int",
    "to_decimal",
]

Whitespace = Literal["compact", "spaced", "flexible", "indent"]

ARR_KEYWORDS = frozenset(
    (
        "items prefixItems additionalItems minItems maxItems contains minContains maxContains "
        "uniqueItems unevaluatedItems"
    ).split()
)
OBJ_KEYWORDS = frozenset(
    (
        "properties patternProperties additionalProperties required minProperties "
        "maxProperties propertyNames unevaluatedProperties x-constrain-some"
    ).split()
)
TYPES = ("null", "boolean", "number", "string", "array", "object")

# A synthetic keyword (never in user schemas): "the object has a member whose key is in this
# language and whose value satisfies this schema", the complement of additionalProperties /
# patternProperties. A list of {"except": [names], "except_patterns": [...], "pattern": p,
# "value": schema}.
SOME_KEY = "x-constrain-some"
# Marks a synthetic schema that complements container keywords: a failed subschema evaluates
# nothing (for unevaluated*).
NEGATION_MARK = "x-constrain-complement"


@dataclass(frozen=True)
class JsonSchemaOptions:
    """Options of :meth:`constrain.Grammar.from_json_schema` (see its docstring)."""

    whitespace: Whitespace = "compact"
    max_whitespace: int = 4
    indent: int = 2
    any_order: bool = False
    one_of: Literal["exact", "any"] = "exact"
    formats: Literal["enforce", "ignore"] = "enforce"
    lenient: bool = False
    max_branches: int = 256
    max_combinations: int = 100_000
    max_any_order_properties: int = 8
    max_repeat: int = 4096
    max_string_length: int = 1 << 24
    draft: Literal["2020-12", "2019-09", "7", "6", "4"] | None = None
    python_compatible: bool = False
    max_number_digits: int | None = None


@dataclass(frozen=True, eq=False)
class Piece:
    """One schema object (or boolean) with the resolver of its location and its JSON pointer."""

    schema: Any
    resolver: Any
    path: str

    def key(self) -> tuple[int, str]:
        """Identity of the piece: the schema object and its base URI."""
        return (id(self.schema), str(getattr(self.resolver, "_base_uri", "")))


@dataclass(frozen=True)
class NumC:
    """Number constraints of a shape: integrality, bounds, multiples, extra regexes."""

    integer: bool = False
    lo: Decimal | None = None
    lo_excl: bool = False
    hi: Decimal | None = None
    hi_excl: bool = False
    multiples: tuple[Decimal, ...] = ()
    extra: tuple[Any, ...] = ()  # regex IR over the number text (from ``not``)

    def merge(self, other: NumC) -> NumC:
        """Return the conjunction of two number constraints."""
        lo, lo_x = self.lo, self.lo_excl
        if other.lo is not None and (lo is None or (other.lo, other.lo_excl) > (lo, lo_x)):
            lo, lo_x = other.lo, other.lo_excl
        hi, hi_x = self.hi, self.hi_excl
        if other.hi is not None and (hi is None or (other.hi, not other.hi_excl) < (hi, not hi_x)):
            hi, hi_x = other.hi, other.hi_excl
        return NumC(
            self.integer or other.integer,
            lo,
            lo_x,
            hi,
            hi_x,
            tuple(dict.fromkeys(self.multiples + other.multiples)),
            self.extra + other.extra,
        )

    def is_unconstrained(self) -> bool:
        """Whether every number satisfies it."""
        return self == NumC()


def _union(first: tuple[Piece, ...], second: tuple[Piece, ...]) -> tuple[Piece, ...]:
    """Return the pieces of ``first`` then those of ``second`` not in it (by key).

    A conjunction is idempotent: a schema reached twice (``allOf`` of two references to one
    definition, and so on down) constrains once, and a shape's pieces stay as many as the
    schemas it involves rather than the paths to them.
    """
    if not first:
        return second
    if not second:
        return first
    keys = {p.key() for p in first}
    extra = tuple(p for p in second if p.key() not in keys)
    return first + extra if extra else first


def _conjoin(first: tuple[Any, ...], second: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Return the string languages of two shapes together; None when they plainly exclude all.

    That is when one language is the complement of another, or of an intersection of others
    (``X`` and ``not X``, as ``allOf`` with a ``not`` of its own patterns writes it): the
    product that would find the intersection empty is not built (it may take seconds).
    """
    both = first + second
    negated = [lang.item for lang in both if isinstance(lang, Complement)]
    if negated:  # (most conjunctions have none: no set to build)
        present = set(both)
        for inner in negated:
            parts = inner.items if isinstance(inner, Intersect) else (inner,)
            if all(part in present for part in parts):
                return None
    return both


@dataclass(frozen=True)
class Shape:
    """One disjunct of a schema's normal form: per-type constraints, all of which must hold.

    ``None`` for a type means no value of that type is allowed; ``arr``/``obj`` hold the
    pieces whose array/object keywords apply (``()``: any array/object); ``strs`` holds content
    regexes (all must match; ``str_exact`` is False when one is a conservative format regex);
    ``values`` restricts the shape to a finite set of JSON values.
    """

    null: bool = True
    bools: frozenset[bool] = frozenset((False, True))
    num: NumC | None = field(default_factory=NumC)
    strs: tuple[Any, ...] | None = ()
    str_exact: bool = True
    arr: tuple[Piece, ...] | None = ()
    obj: tuple[Piece, ...] | None = ()
    values: tuple[Any, ...] | None = None
    pieces: tuple[Piece, ...] = ()

    def merge(self, other: Shape) -> Shape:
        """Return the conjunction of two shapes."""
        values = self.values
        if other.values is not None:
            if values is None:
                values = other.values
            else:
                keys = {json_equal_key(v) for v in other.values}
                values = tuple(v for v in values if json_equal_key(v) in keys)
        return Shape(
            self.null and other.null,
            self.bools & other.bools,
            None if self.num is None or other.num is None else self.num.merge(other.num),
            None if self.strs is None or other.strs is None else _conjoin(self.strs, other.strs),
            self.str_exact and other.str_exact,
            None if self.arr is None or other.arr is None else _union(self.arr, other.arr),
            None if self.obj is None or other.obj is None else _union(self.obj, other.obj),
            values,
            _union(self.pieces, other.pieces),
        )

    def is_empty(self) -> bool:
        """Whether it obviously allows nothing."""
        if self.values is not None and not self.values:
            return True
        return (
            not self.null
            and not self.bools
            and self.num is None
            and self.strs is None
            and self.arr is None
            and self.obj is None
        )


ANY_SHAPE = Shape()


def json_equal_key(value: Any) -> Any:
    """Return a hashable key under which JSON-equal values (``1`` and ``1.0``) coincide.

    Parameters
    ----------
    value : Any
        A JSON value (``None``, bool, int, float, str, list or dict of them).

    Returns
    -------
    Any
        The key: ``True`` and ``1`` differ, ``1`` and ``1.0`` do not, containers compare
        member by member; a non-finite float is keyed by its ``repr``.

    Raises
    ------
    TypeError
        If ``value`` is not a JSON value.
    """
    if isinstance(value, str):  # first: enums of many strings
        return ("s", value)
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return ("f", repr(value))
        return ("n", Decimal(value).normalize() if value else Decimal(0))
    if isinstance(value, list):
        return ("a", tuple(json_equal_key(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, json_equal_key(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {value!r}")


def to_decimal(value: Any, pointer: str) -> Decimal:
    """Return a schema number as an exact Decimal (floats through their shortest repr).

    Parameters
    ----------
    value : Any
        The keyword's value (``minimum``, ``multipleOf``, ...).
    pointer : str
        JSON pointer of the keyword, for the error.

    Returns
    -------
    Decimal
        The finite number.

    Raises
    ------
    JsonSchemaError
        If ``value`` is not a finite number.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JsonSchemaError(f"expected a number, got {json.dumps(value)}", pointer)
    try:
        result = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as err:  # pragma: no cover - repr of a float always parses
        raise JsonSchemaError(f"invalid number {value!r}", pointer) from err
    if not result.is_finite():
        raise JsonSchemaError(f"non-finite number {value!r}", pointer)
    return result


def non_negative_int(value: Any, pointer: str) -> int:
    """Return ``value`` as an int when it is a non-negative integer (``2.0`` counts).

    Parameters
    ----------
    value : Any
        The keyword's value (``minLength``, ``maxItems``, ...).
    pointer : str
        JSON pointer of the keyword, for the error.

    Returns
    -------
    int
        The count.

    Raises
    ------
    JsonSchemaError
        If ``value`` is not a non-negative integer.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JsonSchemaError(f"expected a non-negative integer, got {json.dumps(value)}", pointer)
    if value < 0 or int(value) != value:
        raise JsonSchemaError(f"expected a non-negative integer, got {json.dumps(value)}", pointer)
    return int(value)
