"""Stage 1: JSON Schema → Grammar IR (the semantic half: references, keywords, normal form).

A schema is a conjunction of constraints on one JSON value, combined by ``allOf``/``anyOf``/
``oneOf``/``not``/``if``. This module rewrites every schema into a *disjunctive normal form*:
a list of :class:`Shape` (one per way of satisfying it), each a conjunction of per-type
constraints that can be emitted as grammar directly (``json_emit``):

- scalars become regular languages (``null``, booleans, numbers from exact digit-range
  automata, strings as a content regex);
- arrays and objects keep the list of schema *pieces* that constrain them, merged when the
  grammar for the container is emitted (so recursion through ``$ref`` stays a CFG);
- ``enum``/``const`` restrict a shape to a finite set of values, each checked against the
  shape's pieces with ``jsonschema`` (so their interaction with every other keyword is exact).

``dependentRequired``/``dependentSchemas``/``dependencies`` and ``if``/``then``/``else`` are
rewritten into ``anyOf`` of simpler schemas; ``not`` and exact ``oneOf`` use the complement of a
shape, which is exact for scalars and for ``required``-only objects. Any keyword this cannot
enforce raises :class:`~constrain.JsonSchemaError` with its JSON pointer (``lenient=True``
records a warning instead). ``$ref`` is resolved with ``referencing`` (the library
``jsonschema`` uses), so ``$id``, ``$anchor``, ``$defs``/``definitions`` and JSON pointers
behave as in the validators.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import referencing
import referencing.exceptions
import referencing.jsonschema

from constrain.errors import CompileLimitError, JsonSchemaError

__all__ = [
    "JsonSchemaOptions",
    "NumC",
    "Piece",
    "SchemaContext",
    "Shape",
    "json_equal_key",
]

Whitespace = Literal["compact", "spaced", "flexible", "indent"]

ANNOTATIONS = frozenset(
    (
        "$schema $id $anchor $dynamicAnchor $defs definitions $comment $vocabulary title "
        "description default examples deprecated readOnly writeOnly contentMediaType "
        "contentEncoding contentSchema discriminator"
    ).split()
)
NUM_KEYWORDS = frozenset("minimum maximum exclusiveMinimum exclusiveMaximum multipleOf".split())
STR_KEYWORDS = frozenset("minLength maxLength pattern format".split())
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
    max_string_length: int = 1024
    draft: Literal["2020-12", "2019-09", "7", "6", "4"] | None = None
    python_compatible: bool = False


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
            None if self.strs is None or other.strs is None else self.strs + other.strs,
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


NOTHING_SHAPE = Shape(False, frozenset(), None, None, True, None, None)
ANY_SHAPE = Shape()


def json_equal_key(value: Any) -> Any:
    """Return a hashable key under which JSON-equal values (``1`` and ``1.0``) coincide."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return ("f", repr(value))
        return ("n", Decimal(value).normalize() if value else Decimal(0))
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(json_equal_key(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, json_equal_key(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {value!r}")


# enum list (by id, the list itself kept so its id stays its own) -> its JSON-equal keys
_ENUM_KEYS: dict[int, tuple[list[Any], frozenset[Any] | None]] = {}
_ENUM_VALIDATORS: dict[Any, Any] = {}


def _enum_keys(enums: list[Any]) -> frozenset[Any] | None:
    entry = _ENUM_KEYS.get(id(enums))
    if entry is None or entry[0] is not enums:
        try:
            keys: frozenset[Any] | None = frozenset(json_equal_key(v) for v in enums)
        except TypeError:
            keys = None
        if keys is not None and any(k[0] == "f" for k in keys):
            keys = None  # NaN is equal to nothing, itself included: leave it to jsonschema
        if len(_ENUM_KEYS) >= 1024:
            _ENUM_KEYS.clear()
        entry = _ENUM_KEYS[id(enums)] = (enums, keys)
    return entry[1]


def _enum_member(enums: Any, instance: Any) -> bool | None:
    """Whether ``instance`` is in a long ``enum`` list by hashed lookup; None: undecided.

    Membership by :func:`json_equal_key` follows jsonschema's equality (``1 == 1.0``,
    ``True != 1``, containers member by member). A top-level NaN (equal to nothing) is left
    undecided; one nested in a container would count as equal to itself, which jsonschema's
    equality does not, but JSON text cannot hold NaN, so no emitted value meets the case.
    """
    if not isinstance(enums, list) or len(enums) <= 16:
        return None
    keys = _enum_keys(enums)
    if keys is None:
        return None
    try:
        key = json_equal_key(instance)
    except TypeError:
        return None
    return None if key[0] == "f" else key in keys


def _hashed_enum_validator(cls: Any) -> Any:
    """Return ``cls`` (a jsonschema validator class) with a hashed ``enum`` check (made once).

    jsonschema compares the instance with every member (a linear scan): checking each member
    of a 5,000-value enum against the schema that declares it took ~10 s.
    """
    found = _ENUM_VALIDATORS.get(cls)
    if found is None:
        import jsonschema.validators
        from jsonschema.exceptions import ValidationError

        linear = cls.VALIDATORS["enum"]

        def enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Any:
            member = _enum_member(enums, instance)
            if member is None:
                yield from linear(validator, enums, instance, schema)
            elif not member:
                yield ValidationError(f"{instance!r} is not one of {enums!r}")

        found = _ENUM_VALIDATORS[cls] = jsonschema.validators.extend(cls, {"enum": enum})
    return found


def to_decimal(value: Any, pointer: str) -> Decimal:
    """Return a schema number as an exact Decimal (floats through their shortest repr)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JsonSchemaError(f"expected a number, got {json.dumps(value)}", pointer)
    try:
        result = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as err:  # pragma: no cover - repr of a float always parses
        raise JsonSchemaError(f"invalid number {value!r}", pointer) from err
    if not result.is_finite():
        raise JsonSchemaError(f"non-finite number {value!r}", pointer)
    return result


class SchemaContext:
    """Reference resolution, option checks and the normal form of one root schema.

    Parameters
    ----------
    schema : dict or bool
        The root schema.
    options : JsonSchemaOptions
        Compilation options.
    """

    def __init__(self, schema: Any, options: JsonSchemaOptions) -> None:
        self.options = options
        self.warnings: list[str] = []
        draft = _DRAFTS.get(options.draft or "", referencing.jsonschema.DRAFT202012)
        tuple_items, has_refs = _scan(schema)
        if options.draft is None and tuple_items:
            draft = referencing.jsonschema.DRAFT7  # array-form items: a draft 4-7 schema
        if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
            try:
                draft = referencing.jsonschema.specification_with(schema["$schema"])
            except referencing.exceptions.CannotDetermineSpecification:
                pass
        self.draft = draft
        self.legacy = draft not in (
            referencing.jsonschema.DRAFT202012,
            referencing.jsonschema.DRAFT201909,
        )
        # Draft 4: an integer is a number written without fraction or exponent (1.0 is not one).
        self.plain_integers = draft in (
            referencing.jsonschema.DRAFT4,
            referencing.jsonschema.DRAFT3,
        )
        resource = draft.create_resource(schema)
        base = resource.id() or "urn:constrain:root"
        self.registry: Any = referencing.Registry().with_resource(base, resource)
        if has_refs:  # the crawl finds embedded $id / $anchor targets, for references only
            try:
                self.registry = self.registry.crawl()
            except (AttributeError, TypeError):
                # referencing's draft 4-7 crawl fails on ``dependencies`` mixing schemas and
                # arrays of names (it takes the arrays for schemas); references resolve without
                # the crawl
                pass
        self.root = Piece(schema, self.registry.resolver(base_uri=base), "#")
        self._validators: dict[tuple[int, str], Any] = {}
        self._valid: dict[tuple[tuple[int, str], Any], bool] = {}  # is_valid, per piece
        self._expanding: set[tuple[int, str]] = set()
        self._expanded: dict[tuple[int, str], list[Shape]] = {}
        self._combinations = 0  # shape pairs conjoined so far (max_combinations)
        self._alive: list[Any] = []

    # -- diagnostics --------------------------------------------------------------------------

    def unsupported(self, message: str, pointer: str) -> None:
        """Raise (or, when lenient, record) a keyword that cannot be enforced."""
        if self.options.lenient:
            self.warnings.append(f"{pointer}: {message}")
            return
        raise JsonSchemaError(
            f"{message}; pass lenient=True to compile without it (see docs/json_schema.md)",
            pointer,
        )

    # -- pieces -------------------------------------------------------------------------------

    def child(self, piece: Piece, sub: Any, *path: str | int) -> Piece:
        """Return the sub-schema ``sub`` of ``piece`` at ``path``, entering its ``$id`` if any."""
        resolver = piece.resolver
        if isinstance(sub, dict) and ("$id" in sub or "id" in sub):  # else no resource id
            resource = self.draft.create_resource(sub)
            if resource.id() is not None:
                resolver = resolver.in_subresource(resource)
        self._alive.append(sub)  # ids of synthetic schemas key caches: keep them alive
        pointer = piece.path + "".join(
            "/" + str(p).replace("~", "~0").replace("/", "~1") for p in path
        )
        return Piece(sub, resolver, pointer)

    def resolve(self, piece: Piece, ref: str, keyword: str = "$ref") -> Piece:
        """Return the piece a ``$ref`` points at."""
        try:
            resolved = piece.resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as err:
            raise JsonSchemaError(
                f"cannot resolve {keyword} {ref!r} (remote documents are not fetched)",
                piece.path + "/" + keyword,
            ) from err
        target = resolved.contents
        resolver = resolved.resolver
        if isinstance(target, dict):
            resource = self.draft.create_resource(target)
            if resource.id() is not None:
                resolver = resolver.in_subresource(resource)
        return Piece(target, resolver, f"{ref}")

    def is_valid(self, value: Any, pieces: tuple[Piece, ...]) -> bool:
        """Whether ``value`` validates against every piece (``jsonschema``, formats asserted).

        Answers are memoised per (piece, value): the disjuncts of a normal form share pieces
        and enum values, so the same checks recur (an enum under ``oneOf`` products: once per
        disjunct, each check itself linear in the enum).
        """
        vkey = value if isinstance(value, str) else (type(value), json.dumps(value, sort_keys=True))
        for piece in pieces:
            mkey = (piece.key(), vkey)
            found = self._valid.get(mkey)
            if found is None:
                found = self._valid[mkey] = self._piece_valid(value, piece)
            if not found:
                return False
        return True

    def _piece_valid(self, value: Any, piece: Piece) -> bool:
        """Whether ``value`` validates against one piece (uncached :meth:`is_valid`)."""
        import jsonschema

        validator = self._validators.get(piece.key())
        if validator is None:
            cls = {
                referencing.jsonschema.DRAFT7: jsonschema.Draft7Validator,
                referencing.jsonschema.DRAFT6: jsonschema.Draft6Validator,
                referencing.jsonschema.DRAFT4: jsonschema.Draft4Validator,
                referencing.jsonschema.DRAFT201909: jsonschema.Draft201909Validator,
            }.get(self.draft, jsonschema.Draft202012Validator)
            checker = cls.FORMAT_CHECKER if self.options.formats == "enforce" else None
            validator = _hashed_enum_validator(cls)(
                piece.schema,
                registry=self.registry,
                format_checker=checker,
                _resolver=piece.resolver,
            )
            self._validators[piece.key()] = validator
        try:
            if not validator.is_valid(value):
                return False
        except (jsonschema.exceptions.SchemaError, RecursionError):
            return False
        if isinstance(piece.schema, dict) and "x-constrain-some" in piece.schema:
            if not self._has_members(value, piece):
                return False
        return True

    def _has_members(self, value: Any, piece: Piece) -> bool:
        """Check the synthetic "some member" requirements of a complement piece."""
        from constrain.frontends.json_schema.objects import pattern_dfa

        if not isinstance(value, dict):
            return True  # the keyword only constrains objects
        for i, spec in enumerate(piece.schema["x-constrain-some"]):
            sub = self.child(piece, spec.get("value", True), "some", i)
            found = False
            for key, item in value.items():
                if key in spec.get("except", []):
                    continue
                if any(
                    pattern_dfa(p).matches(key.encode()) for p in spec.get("except_patterns", [])
                ):
                    continue
                if "pattern" in spec and not pattern_dfa(spec["pattern"]).matches(key.encode()):
                    continue
                if self.is_valid(item, (sub,)):
                    found = True
                    break
            if not found:
                return False
        return True

    # -- normal form --------------------------------------------------------------------------

    def shapes(self, pieces: tuple[Piece, ...]) -> list[Shape]:
        """Return the disjunctive normal form of the conjunction of ``pieces``."""
        result = [ANY_SHAPE]
        for piece in pieces:
            result = self._conjoin(result, self._expand(piece), piece.path)
        return [s for s in result if not s.is_empty()]

    def _conjoin(self, left: list[Shape], right: list[Shape], pointer: str) -> list[Shape]:
        self._combinations += len(left) * len(right)
        if self._combinations > self.options.max_combinations:
            # each conjunction may be small while their number is not: complements and
            # oneOf over recursive references make products of subschemas without end
            raise CompileLimitError(
                "max_combinations",
                self.options.max_combinations,
                self._combinations,
                f"the combinators at {pointer or '#'} (oneOf, not, if/then/else, allOf over "
                "references) combine subschemas into too many products; simplify them, read "
                "oneOf as anyOf (one_of='any') or raise max_combinations",
            )
        out = [a.merge(b) for a in left for b in right]
        out = [s for s in out if not s.is_empty()]
        if len(out) > self.options.max_branches:
            raise CompileLimitError(
                "max_branches",
                self.options.max_branches,
                len(out),
                f"the combinators at {pointer} expand into too many alternatives; simplify "
                "anyOf/oneOf/allOf nesting or raise max_branches",
            )
        return out

    def _expand(self, piece: Piece) -> list[Shape]:
        """Return the normal form of one piece (combinators expanded, references followed)."""
        schema = piece.schema
        if schema is True:
            return [ANY_SHAPE]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            raise JsonSchemaError(
                f"a schema must be an object or a boolean, got {json.dumps(schema)}", piece.path
            )
        key = piece.key()
        found = self._expanded.get(key)
        if found is not None:  # a schema met again (through $ref, negations): expanded once
            return list(found)
        if key in self._expanding:
            raise JsonSchemaError(
                "the schema refers to itself without consuming any input (an in-place $ref "
                "cycle): it has no finite grammar",
                piece.path,
            )
        self._expanding.add(key)
        try:
            result = self._expand_dict(piece, schema)
        finally:
            self._expanding.discard(key)
        self._expanded[key] = result
        return list(result)

    def _expand_dict(self, piece: Piece, schema: dict[str, Any]) -> list[Shape]:
        from constrain.frontends.json_schema.local import local_shape

        if "$ref" in schema and self.legacy:  # draft 7 and older: $ref ignores its siblings
            return self._expand(self.resolve(piece, schema["$ref"]))
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in schema:
                self.unsupported(f"{keyword} is not supported", f"{piece.path}/{keyword}")
        result = [local_shape(self, piece)]
        if "$ref" in schema:
            result = self._conjoin(
                result, self._expand(self.resolve(piece, schema["$ref"])), piece.path
            )
        for i, sub in enumerate(_schema_list(schema, "allOf", piece) if "allOf" in schema else []):
            result = self._conjoin(result, self._expand(self.child(piece, sub, "allOf", i)), "")
        if "anyOf" in schema:
            branches = [
                self._expand(self.child(piece, sub, "anyOf", i))
                for i, sub in enumerate(_schema_list(schema, "anyOf", piece))
            ]
            result = self._conjoin(result, [s for b in branches for s in b], piece.path)
        if "oneOf" in schema:
            result = self._conjoin(result, self._one_of(piece, schema), piece.path)
        if "not" in schema:
            sub = self.child(piece, schema["not"], "not")
            result = self._conjoin(result, self.negate(self._expand(sub), sub.path), piece.path)
        if "if" in schema and ("then" in schema or "else" in schema):
            result = self._conjoin(result, self._if_then_else(piece, schema), piece.path)
        for name, dep in _dependencies(schema, piece).items():
            result = self._conjoin(result, self._dependency(piece, name, dep), piece.path)
        if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
            result = [self._unevaluated(piece, schema, shape) for shape in result]
        return result

    def _unevaluated(self, piece: Piece, schema: dict[str, Any], shape: Shape) -> Shape:
        """Turn ``unevaluated*`` into plain keywords, given what this disjunct evaluates.

        Every piece on ``shape`` came from this schema's own subtree (in-place applicators
        whose branch this disjunct takes), so what they declare is what is evaluated; a branch
        of ``anyOf`` that also validates but is not the one taken is not counted, which can only
        reject more (never accept an invalid instance).
        """
        if "unevaluatedProperties" in schema and shape.obj is not None:
            names: dict[str, bool] = {}
            patterns: dict[str, bool] = {}
            covered = False
            for p in shape.obj:
                s = p.schema if isinstance(p.schema, dict) else {}
                if s.get("x-constrain-complement"):
                    continue
                names.update(dict.fromkeys(s.get("properties") or {}, True))
                patterns.update(dict.fromkeys(s.get("patternProperties") or {}, True))
                covered = covered or "additionalProperties" in s
            if not covered:
                synthetic = {
                    "properties": names,
                    "patternProperties": patterns,
                    "additionalProperties": schema["unevaluatedProperties"],
                }
                extra = self.child(piece, synthetic, "unevaluatedProperties")
                shape = replace(shape, obj=(*shape.obj, extra))
        if "unevaluatedItems" in schema and shape.arr is not None:
            count, covered = 0, False
            for p in shape.arr:
                s = p.schema if isinstance(p.schema, dict) else {}
                if s.get("x-constrain-complement"):
                    continue
                items = s.get("items")
                if isinstance(items, list):
                    count = max(count, len(items))
                    covered = covered or "additionalItems" in s
                else:
                    count = max(count, len(s.get("prefixItems") or []))
                    covered = covered or items is not None
                if "contains" in s:
                    self.unsupported(
                        "unevaluatedItems together with contains", piece.path + "/unevaluatedItems"
                    )
            if not covered:
                synthetic = {"prefixItems": [True] * count, "items": schema["unevaluatedItems"]}
                extra = self.child(piece, synthetic, "unevaluatedItems")
                shape = replace(shape, arr=(*shape.arr, extra))
        return shape

    def _one_of(self, piece: Piece, schema: dict[str, Any]) -> list[Shape]:
        from constrain.frontends.json_schema.logic import disjoint

        branches = [
            self._expand(self.child(piece, sub, "oneOf", i))
            for i, sub in enumerate(_schema_list(schema, "oneOf", piece))
        ]
        flat = [s for b in branches for s in b]
        if self.options.one_of == "any" or all(
            disjoint(self, a, b)
            for i, ba in enumerate(branches)
            for bb in branches[i + 1 :]
            for a in ba
            for b in bb
        ):
            return flat
        out: list[Shape] = []
        pointer = piece.path + "/oneOf"
        for i, branch in enumerate(branches):
            alive = branch
            for j, other in enumerate(branches):
                if i != j and alive:
                    alive = self._conjoin(alive, self.negate(other, f"{pointer}/{j}"), pointer)
            out.extend(alive)
        return out

    def _if_then_else(self, piece: Piece, schema: dict[str, Any]) -> list[Shape]:
        cond = self._expand(self.child(piece, schema["if"], "if"))
        then = self._expand(self.child(piece, schema.get("then", True), "then"))
        other = self._expand(self.child(piece, schema.get("else", True), "else"))
        yes = self._conjoin(cond, then, piece.path)
        no = self._conjoin(self.negate(cond, piece.path + "/if"), other, piece.path)
        return yes + no

    def _dependency(self, piece: Piece, name: str, dep: Any) -> list[Shape]:
        absent = self.child(piece, {"properties": {name: False}}, "dependentRequired", name)
        if isinstance(dep, list):
            present: Any = {"required": [name, *dep]}
            sub = self.child(piece, present, "dependentRequired", name)
            return self._expand(absent) + self._expand(sub)
        need = self.child(piece, {"required": [name]}, "dependentSchemas", name)
        sub = self.child(piece, dep, "dependentSchemas", name)
        return self._expand(absent) + self._conjoin(self._expand(need), self._expand(sub), "")

    def negate(self, shapes: list[Shape], pointer: str) -> list[Shape]:
        """Return the normal form of the complement of a disjunction of shapes."""
        from constrain.frontends.json_schema.logic import negate_shape

        result = [ANY_SHAPE]
        for shape in shapes:
            result = self._conjoin(result, negate_shape(self, shape, pointer), pointer)
        return result


_DRAFTS = {
    "2020-12": referencing.jsonschema.DRAFT202012,
    "2019-09": referencing.jsonschema.DRAFT201909,
    "7": referencing.jsonschema.DRAFT7,
    "6": referencing.jsonschema.DRAFT6,
    "4": referencing.jsonschema.DRAFT4,
}


_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def _scan(schema: Any) -> tuple[bool, bool]:
    """Return (draft 4-7 array-form ``items`` within 64 levels, a reference keyword anywhere).

    Iterative, and each object or array is visited once, so a self-containing Python structure
    ends too. A key that only looks like a reference (a property named ``$ref``) counts: the
    answer may say "references" where there are none, never the reverse.
    """
    tuple_items = has_refs = False
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if not tuple_items and depth <= 64 and isinstance(node.get("items"), list):
                tuple_items = True
            if not has_refs and any(k in node for k in _REF_KEYWORDS):
                has_refs = True
            if tuple_items and has_refs:
                break
            values: Any = node.values()
        elif isinstance(node, list):
            values = node
        else:  # a boolean schema
            continue
        stack.extend((v, depth + 1) for v in values if isinstance(v, (dict, list)))
    return tuple_items, has_refs


def _schema_list(schema: dict[str, Any], keyword: str, piece: Piece) -> list[Any]:
    value = schema.get(keyword, [])
    if not isinstance(value, list) or not value:
        raise JsonSchemaError(f"{keyword} must be a non-empty array of schemas", piece.path)
    return value


def _dependencies(schema: dict[str, Any], piece: Piece) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
        value = schema.get(keyword)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise JsonSchemaError(f"{keyword} must be an object", f"{piece.path}/{keyword}")
        for name, dep in value.items():
            if name in out:
                other = out[name]
                both = [other, dep]
                if all(isinstance(d, list) for d in both):
                    out[name] = [*other, *dep]
                    continue
                out[name] = {"allOf": [{"required": d} if isinstance(d, list) else d for d in both]}
                continue
            out[name] = dep
    return out


def options_with(options: JsonSchemaOptions, **changes: Any) -> JsonSchemaOptions:
    """Return ``options`` with some fields replaced (validated)."""
    return replace(options, **changes)
