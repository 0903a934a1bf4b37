"""Stage 1 (JSON Schema): complements and disjointness of shapes (``not``, ``oneOf``, ``if``).

The complement of a :class:`~constrain.frontends.json_schema.shapes.Shape` is computed type by type.
It is exact where the shape's languages are exact: ``null``, booleans, numbers (the number
language is exact on plain spellings ``-?int(.frac)?``, so its complement is taken among plain
spellings), strings without ``format`` (a content regex's complement), finite value sets of
scalars, and objects constrained by ``required`` alone (``not required [a, b]`` is "a is absent
or b is absent"). Anything else raises :class:`~constrain.JsonSchemaError` (a warning under
``lenient``, where the ``not`` is then not enforced for that type).

:func:`disjoint` proves that two shapes share no value, which makes ``oneOf`` the plain union
of its branches (the common case: a discriminator property, different types, disjoint ranges).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, NamedTuple

from constrain.errors import CompileLimitError
from constrain.frontends.json_schema.context import SchemaContext
from constrain.frontends.json_schema.numbers import number_regex
from constrain.frontends.json_schema.patterns import pattern_dfa
from constrain.frontends.json_schema.shapes import (
    NEGATION_MARK,
    SOME_KEY,
    NumC,
    Piece,
    Shape,
    json_equal_key,
)
from constrain.ir import (
    NOTHING,
    Alt,
    CharSet,
    Complement,
    Concat,
    Intersect,
    Literal,
    Regex,
    Repeat,
)

__all__ = ["PLAIN_NUMBER", "disjoint", "negate_shape", "number_language", "value_number_text"]

_DIGIT = CharSet(((48, 57),))
_DIGITS = Repeat(_DIGIT, 1, None)
PLAIN_NUMBER: Regex = Concat(
    (
        Repeat(Literal("-"), 0, 1),
        Alt((Literal("0"), Concat((CharSet(((49, 57),)), Repeat(_DIGIT, 0, None))))),
        Repeat(Concat((Literal("."), _DIGITS)), 0, 1),
    )
)

JSON_NUMBER: Regex = Concat(
    (
        PLAIN_NUMBER,
        Repeat(
            Concat(
                (
                    CharSet(((69, 69), (101, 101))),
                    Repeat(CharSet(((43, 43), (45, 45))), 0, 1),
                    _DIGITS,
                )
            ),
            0,
            1,
        ),
    )
)


def number_language(num: NumC) -> Regex:
    """Return the IR of the JSON number texts satisfying ``num`` (exact on plain spellings)."""
    return _number_language(num)


@functools.lru_cache(maxsize=4096)
def _number_language(num: NumC) -> Regex:
    if num.is_unconstrained():
        return JSON_NUMBER
    base: dict[str, Any] = {
        "integer": num.integer,
        "minimum": num.lo,
        "maximum": num.hi,
        "exclusive_minimum": num.lo_excl,
        "exclusive_maximum": num.hi_excl,
    }
    if not num.multiples:
        parts = [number_regex(**base)]
    else:
        parts = [number_regex(**base, multiple_of=num.multiples[0])]
        parts += [number_regex(integer=num.integer, multiple_of=m) for m in num.multiples[1:]]
    parts += list(num.extra)
    if any(p == NOTHING for p in parts):
        return NOTHING
    return parts[0] if len(parts) == 1 else Intersect(tuple(parts))


def value_number_text(value: Any) -> Regex:
    """Return the IR of every JSON spelling of the number ``value`` (plain ones exact)."""
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return number_regex(integer=False, minimum=exact, maximum=exact)


def _only(**fields: Any) -> Shape:
    return Shape(
        null=fields.get("null", False),
        bools=fields.get("bools", frozenset()),
        num=fields.get("num"),
        strs=fields.get("strs"),
        str_exact=True,
        arr=fields.get("arr"),
        obj=fields.get("obj"),
    )


def _negate_values(ctx: SchemaContext, shape: Shape, pointer: str) -> list[Shape]:
    kept = [v for v in shape.values or () if ctx.is_valid(v, shape.pieces)]
    nums = [v for v in kept if isinstance(v, (int, float)) and not isinstance(v, bool)]
    strings = [v for v in kept if isinstance(v, str)]
    containers = [v for v in kept if isinstance(v, (list, dict))]
    if containers:
        ctx.unsupported("not/oneOf/if of an array or object enum value", pointer)
    num = NumC()
    if nums:
        spelled = Alt(tuple(value_number_text(v) for v in nums))
        num = NumC(extra=(Intersect((Complement(spelled), PLAIN_NUMBER)),))
    strs: tuple[Regex, ...] = ()
    if strings:
        strs = (Complement(Alt(tuple(Literal(s) for s in strings))),)
    return [
        Shape(
            null=None not in kept,
            bools=frozenset(b for b in (False, True) if not any(v is b for v in kept)),
            num=num,
            strs=strs,
            arr=(),
            obj=(),
        )
    ]


def negate_shape(ctx: SchemaContext, shape: Shape, pointer: str) -> Iterator[Shape | Piece]:
    """Yield the complement of one shape as a disjunction, one disjunct at a time.

    Scalar parts come as single-type shapes; the complement of a container's keywords comes as
    pieces (synthetic schemas, marked :data:`~.shapes.NEGATION_MARK`) whose normal forms are
    further disjuncts: the caller (the normal form) expands each piece as it is yielded, so
    diagnostics keep the order of the parts.

    Parameters
    ----------
    ctx : SchemaContext
        The schema being compiled (for value checks and diagnostics).
    shape : Shape
        The shape to complement.
    pointer : str
        JSON pointer reported when a part cannot be complemented exactly.

    Yields
    ------
    Shape or Piece
        Disjuncts whose union is every JSON value outside ``shape``; a yielded shape may be
        empty (:meth:`Shape.is_empty`).

    Raises
    ------
    JsonSchemaError
        When a part has no exact complement and ``lenient`` is off.
    """
    if shape.values is not None:
        yield from _negate_values(ctx, shape, pointer)
        return
    if not shape.null:
        yield _only(null=True)
    if len(shape.bools) < 2:
        yield _only(bools=frozenset((False, True)) - shape.bools)
    if shape.num is None:
        yield _only(num=NumC())
    elif not shape.num.is_unconstrained():
        lang = number_language(shape.num)
        yield _only(num=NumC(extra=(Intersect((Complement(lang), PLAIN_NUMBER)),)))
    if shape.strs is None:
        yield _only(strs=())
    elif shape.strs:
        if not shape.str_exact:
            ctx.unsupported(
                "the complement of a format (not/oneOf/if)",
                pointer,
            )
            yield _only(strs=())
        else:
            inner = shape.strs[0] if len(shape.strs) == 1 else Intersect(shape.strs)
            yield _only(strs=(Complement(inner),))
    for kind, pieces in (("array", shape.arr), ("object", shape.obj)):
        if pieces is None:
            yield _only(**{kind[:3]: ()})
            continue
        for piece in pieces:
            negated = _negate_container(ctx, piece, kind)
            if negated is None:
                ctx.unsupported(f"the complement of these {kind} keywords (not/oneOf/if)", pointer)
                continue
            for i, schema in enumerate(negated):
                # Marked: a failed subschema evaluates nothing (for unevaluated*).
                yield ctx.child(piece, {"type": kind, NEGATION_MARK: True, **schema}, "not", i)


def _negate_container(ctx: SchemaContext, piece: Piece, kind: str) -> list[dict[str, Any]] | None:
    """Return the complement of a piece's own array/object keywords as a union of schemas.

    Each keyword's failure is itself a schema (``minItems: n`` fails as ``maxItems: n-1``,
    ``properties: {a: S}`` as "a present and not S", ``contains`` as ``items: {not: C}``, ...),
    so the union over keywords is exact. None when a keyword has no such form.
    """
    schema = piece.schema if isinstance(piece.schema, dict) else {}
    out: list[dict[str, Any]] = []
    if kind == "object":
        props = schema.get("properties") or {}
        required = dict.fromkeys(schema.get("required", []))
        for name in required:
            sub = props.get(name, True)
            # a required property fails absent, or present outside its schema: one disjunct
            # (two would double the disjuncts of every conjunction of complements, e.g. a
            # oneOf of objects each requiring its own key)
            out.append({"properties": {name: False if sub is True else {"not": sub}}})
        for name, sub in props.items():
            if sub is not True and name not in required:
                out.append({"required": [name], "properties": {name: {"not": sub}}})
        if schema.get("minProperties", 0) > 0:
            out.append({"maxProperties": schema["minProperties"] - 1})
        if "maxProperties" in schema:
            out.append({"minProperties": schema["maxProperties"] + 1})
        if schema.get("propertyNames", True) is not True or SOME_KEY in schema:
            return None
        patterns = schema.get("patternProperties") or {}
        for pattern, sub in patterns.items():
            if sub is not True:  # some key matching the pattern has a value outside sub
                value = True if sub is False else {"not": sub}
                out.append({SOME_KEY: [{"pattern": pattern, "value": value}]})
        additional = schema.get("additionalProperties", True)
        if additional is not True:  # some other key has a value outside additional
            value = True if additional is False else {"not": additional}
            spec = {"except": list(props), "except_patterns": list(patterns), "value": value}
            out.append({SOME_KEY: [spec]})
        return out
    if schema.get("minItems", 0) > 0:
        out.append({"maxItems": schema["minItems"] - 1})
    if "maxItems" in schema:
        out.append({"minItems": schema["maxItems"] + 1})
    items = schema.get("items")
    prefix = items if isinstance(items, list) else schema.get("prefixItems")
    key = "items" if isinstance(items, list) or ctx.legacy else "prefixItems"
    for i, sub in enumerate(prefix if isinstance(prefix, list) else []):
        if sub is not True:
            out.append({"minItems": i + 1, key: [True] * i + [{"not": sub}]})
    if items is not None and not isinstance(items, list) and items is not True:
        if prefix:
            return None
        out.append({"contains": {"not": items}})
    if "contains" in schema:
        low = schema.get("minContains", 1)
        if low == 1:
            out.append({"items": {"not": schema["contains"]}})
        elif low > 1:
            out.append({"contains": schema["contains"], "minContains": 0, "maxContains": low - 1})
        if "maxContains" in schema:
            out.append({"contains": schema["contains"], "minContains": schema["maxContains"] + 1})
    if schema.get("uniqueItems") is True or "additionalItems" in schema and isinstance(items, list):
        return None
    return out


# --------------------------------------------------------------------------------------------
# Disjointness
# --------------------------------------------------------------------------------------------


def _intervals_disjoint(a: NumC, b: NumC) -> bool:
    def below(hi: Decimal | None, hi_x: bool, lo: Decimal | None, lo_x: bool) -> bool:
        if hi is None or lo is None:
            return False
        return hi < lo or (hi == lo and (hi_x or lo_x))

    return below(a.hi, a.hi_excl, b.lo, b.lo_excl) or below(b.hi, b.hi_excl, a.lo, a.lo_excl)


def _strings_disjoint(a: tuple[Regex, ...], b: tuple[Regex, ...]) -> bool:
    if not a and not b:
        return False
    # Deferred: building a grammar must not import numba (test_front_ends_are_light).
    from constrain.automata.dfa import compile_regex

    try:
        return compile_regex(Intersect(a + b), max_states=20_000).is_empty_language()
    except CompileLimitError:
        return False


class _Member(NamedTuple):
    """What an object's shape allows a property's value to be, where it is present.

    ``values``: the allowed values by :func:`json_equal_key` (None: not a finite set);
    ``types``: the allowed JSON types, integers counted as numbers (None: any type).
    """

    values: dict[Any, Any] | None
    types: frozenset[str] | None


_TYPE_NAMES = frozenset(("null", "boolean", "integer", "number", "string", "array", "object"))


def _json_type(value: Any) -> str | None:
    """Return a value's JSON type, integers counted as numbers (None: not a JSON value)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else None


def _member(schema: dict[str, Any]) -> _Member:
    found = [schema["const"]] if "const" in schema else schema.get("enum")
    values = {json_equal_key(v): v for v in found} if isinstance(found, list) else None
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared
    types = None
    if isinstance(names, list) and all(n in _TYPE_NAMES for n in names):
        types = frozenset("number" if n == "integer" else n for n in names)
    return _Member(values, types)


def _both(a: _Member, b: _Member) -> _Member:
    if a.values is None or b.values is None:
        values = a.values if b.values is None else b.values
    else:
        values = {k: v for k, v in a.values.items() if k in b.values}
    types = a.types if b.types is None else b.types if a.types is None else a.types & b.types
    return _Member(values, types)


def _members(ctx: SchemaContext, pieces: tuple[Piece, ...]) -> dict[str, _Member]:
    """Return, per property some piece's ``properties`` names, what its value may be."""
    out: dict[str, _Member] = {}
    for piece in pieces:
        schema = piece.schema
        if not isinstance(schema, dict):
            continue
        for name, sub in (schema.get("properties") or {}).items():
            if isinstance(sub, dict) and "$ref" in sub and len(sub) == 1:
                try:
                    sub = ctx.resolve(piece, sub["$ref"]).schema
                except Exception:  # noqa: BLE001 - an unresolvable ref proves nothing
                    continue
            if not isinstance(sub, dict):
                continue
            member = _member(sub)
            out[name] = _both(out[name], member) if name in out else member
    return out


def _members_disjoint(a: _Member, b: _Member) -> bool:
    """Return whether no value is allowed by both (False: unknown or overlapping)."""
    both = _both(a, b)
    if both.values is not None:
        if both.types is None:
            return not both.values
        kinds = {_json_type(v) for v in both.values.values()}
        return None not in kinds and not (kinds & both.types)
    return both.types is not None and not both.types


def disjoint(ctx: SchemaContext, a: Shape, b: Shape) -> bool:
    """Return True when no JSON value satisfies both shapes (False: unknown or overlapping)."""
    if a.values is not None or b.values is not None:
        first, second = (a, b) if a.values is not None else (b, a)
        return not any(
            ctx.is_valid(v, first.pieces) and ctx.is_valid(v, second.pieces)
            for v in first.values or ()
        )
    if a.null and b.null or a.bools & b.bools:
        return False
    if a.num is not None and b.num is not None and not _intervals_disjoint(a.num, b.num):
        return False
    if a.strs is not None and b.strs is not None and not _strings_disjoint(a.strs, b.strs):
        return False
    if a.arr is not None and b.arr is not None:
        return False
    if a.obj is not None and b.obj is not None:
        # a property one side requires, whose values on the two sides do not meet (a
        # discriminator: ``"type": {"const": "a"}`` required on one side, ``"b"`` where
        # present on the other), or that the other side forbids
        needs_a, needs_b = _required(a.obj), _required(b.obj)
        ma, mb = _members(ctx, a.obj), _members(ctx, b.obj)
        if not any(
            name in mb and (name in needs_a or name in needs_b) and _members_disjoint(m, mb[name])
            for name, m in ma.items()
        ):
            if not any(_forbids(b.obj, n) for n in needs_a) and not any(
                _forbids(a.obj, n) for n in needs_b
            ):
                return False
    return True


def _required(pieces: tuple[Piece, ...]) -> set[str]:
    out: set[str] = set()
    for piece in pieces:
        if isinstance(piece.schema, dict) and isinstance(piece.schema.get("required"), list):
            out.update(r for r in piece.schema["required"] if isinstance(r, str))
    return out


def _forbids(pieces: tuple[Piece, ...], name: str) -> bool:
    """Return whether some piece rules out property ``name`` (``false`` or no room for it)."""
    for piece in pieces:
        schema = piece.schema if isinstance(piece.schema, dict) else {}
        props = schema.get("properties") or {}
        if props.get(name, True) is False:
            return True
        if name in props or schema.get("additionalProperties", True) is not False:
            continue
        patterns = schema.get("patternProperties") or {}
        if not any(pattern_dfa(p).matches(name.encode()) for p in patterns):
            return True
    return False
