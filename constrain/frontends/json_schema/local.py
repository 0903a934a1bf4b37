"""Stage 1 (JSON Schema): the shape of one schema object's own keywords.

:func:`local_shape` reads the keywords that constrain a value directly — ``type``, ``enum``,
``const``, ``nullable`` and the number and string keywords — into a
:class:`~constrain.frontends.json_schema.shapes.Shape`. Array and object keywords are not read here:
the piece is recorded on the shape and read when the container's grammar is emitted
(:mod:`~constrain.frontends.json_schema.emit`), so that a recursive ``$ref`` inside ``items`` or
``properties`` is a grammar rule, not an infinite expansion. Combinators are the normal form's
business (:mod:`~constrain.frontends.json_schema.normal_form`).
"""

from __future__ import annotations

import json
from typing import Any

from constrain.errors import CompileLimitError, JsonSchemaError
from constrain.frontends.json_schema.context import SchemaContext
from constrain.frontends.json_schema.formats import format_regex
from constrain.frontends.json_schema.patterns import pattern_regex
from constrain.frontends.json_schema.shapes import (
    ARR_KEYWORDS,
    OBJ_KEYWORDS,
    TYPES,
    NumC,
    Piece,
    Shape,
    non_negative_int,
    to_decimal,
)
from constrain.ir import ANY_CHAR, Complement, Concat, Literal, Regex, Repeat

__all__ = ["local_shape"]

# Formats the JSON Schema specification defines; an unknown name (OpenAPI's "int64",
# "password", ...) has no meaning to enforce and is only reported as a warning.
STANDARD_FORMATS = frozenset(
    (
        "date-time date time duration email idn-email hostname idn-hostname ipv4 ipv6 uri "
        "uri-reference iri iri-reference uuid uri-template json-pointer relative-json-pointer "
        "regex"
    ).split()
)


def _types(ctx: SchemaContext, piece: Piece, schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        names = set(TYPES) | {"integer"}
    else:
        listed = declared if isinstance(declared, list) else [declared]
        names = set()
        for name in listed:
            if name not in TYPES and name != "integer":
                raise JsonSchemaError(f"unknown type {json.dumps(name)}", piece.path + "/type")
            names.add(name)
    if schema.get("nullable") is True and declared is not None:
        names.add("null")
    return names


def _numbers(ctx: SchemaContext, piece: Piece, schema: dict[str, Any], integer: bool) -> NumC:
    path = piece.path
    num = NumC(integer=integer)
    if "minimum" in schema:
        excl = schema.get("exclusiveMinimum") is True  # draft 4 boolean form
        num = num.merge(NumC(lo=to_decimal(schema["minimum"], path + "/minimum"), lo_excl=excl))
    if "maximum" in schema:
        excl = schema.get("exclusiveMaximum") is True
        num = num.merge(NumC(hi=to_decimal(schema["maximum"], path + "/maximum"), hi_excl=excl))
    ex_min, ex_max = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if ex_min is not None and not isinstance(ex_min, bool):
        num = num.merge(NumC(lo=to_decimal(ex_min, path + "/exclusiveMinimum"), lo_excl=True))
    if ex_max is not None and not isinstance(ex_max, bool):
        num = num.merge(NumC(hi=to_decimal(ex_max, path + "/exclusiveMaximum"), hi_excl=True))
    if "multipleOf" in schema:
        step = to_decimal(schema["multipleOf"], path + "/multipleOf")
        if step <= 0:
            raise JsonSchemaError("multipleOf must be greater than 0", path + "/multipleOf")
        num = num.merge(NumC(multiples=(step,)))
    return num


def _strings(ctx: SchemaContext, piece: Piece, schema: dict[str, Any]) -> tuple[list[Regex], bool]:
    path = piece.path
    out: list[Regex] = []
    exact = True
    lo = non_negative_int(schema.get("minLength", 0), path + "/minLength")
    hi = schema.get("maxLength")
    hi_n = None if hi is None else non_negative_int(hi, path + "/maxLength")
    if lo or hi_n is not None:
        cap = ctx.options.max_string_length
        for key, n in (("minLength", lo), ("maxLength", hi_n)):
            if n is not None and n > cap:
                raise CompileLimitError(
                    "max_string_length",
                    cap,
                    n,
                    f"{key} at {path} is larger than the strings the grammar counts; raise "
                    "max_string_length (large counts are folded, so compile time stays flat)",
                )
        out.append(Repeat(ANY_CHAR, lo, hi_n))
    if "pattern" in schema:
        out.append(pattern_regex(schema["pattern"], path + "/pattern"))
    name = schema.get("format")
    if name is not None and ctx.options.formats == "enforce":
        regex = format_regex(name) if isinstance(name, str) else None
        if regex is not None:
            out.append(regex)
            exact = False
            if ctx.options.python_compatible and name in ("date-time", "time"):
                # Python's datetime (and pydantic) refuse the leap second 23:59:60.
                any_run = Repeat(ANY_CHAR, 0, None)
                out.append(Complement(Concat((any_run, Literal(":60"), any_run))))
        elif name in STANDARD_FORMATS:
            ctx.unsupported(f"format {name!r} is not supported", path + "/format")
        else:
            ctx.warnings.append(f"{path}/format: unknown format {name!r} not enforced")
    return out, exact


def local_shape(ctx: SchemaContext, piece: Piece) -> Shape:
    """Return the shape of ``piece``'s own keywords (no combinators, no references).

    Parameters
    ----------
    ctx : SchemaContext
        The schema being compiled.
    piece : Piece
        A schema object.

    Returns
    -------
    Shape
        The conjunction of its type, enum/const, number and string constraints; the piece
        itself is recorded for its array and object keywords.
    """
    schema = piece.schema
    types = _types(ctx, piece, schema)
    has_number = "number" in types or "integer" in types
    num = _numbers(ctx, piece, schema, "number" not in types) if has_number else None
    strs: tuple[Regex, ...] | None = None
    exact = True
    if "string" in types:
        found, exact = _strings(ctx, piece, schema)
        strs = tuple(found)
    arr: tuple[Piece, ...] | None = None
    if "array" in types:
        arr = (piece,) if any(k in schema for k in ARR_KEYWORDS) else ()
    obj: tuple[Piece, ...] | None = None
    if "object" in types:
        obj = (piece,) if any(k in schema for k in OBJ_KEYWORDS) else ()
    values: tuple[Any, ...] | None = None
    if "enum" in schema:
        if not isinstance(schema["enum"], list):
            raise JsonSchemaError("enum must be an array", piece.path + "/enum")
        values = tuple(schema["enum"])
        if schema.get("nullable") is True:
            values = (*values, None)
    if "const" in schema:
        const = schema["const"]
        if values is None:
            values = (const,)
        else:
            shape = Shape(values=values).merge(Shape(values=(const,)))
            values = shape.values
    return Shape(
        null="null" in types,
        bools=frozenset((False, True)) if "boolean" in types else frozenset(),
        num=num,
        strs=strs,
        str_exact=exact,
        arr=arr,
        obj=obj,
        values=values,
        pieces=(piece,),
    )
