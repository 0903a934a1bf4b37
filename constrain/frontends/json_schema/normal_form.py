"""Stage 1 (JSON Schema): the disjunctive normal form of a schema (the semantic half).

A schema is a conjunction of constraints on one JSON value, combined by ``allOf``/``anyOf``/
``oneOf``/``not``/``if``. This module rewrites every schema into a *disjunctive normal form*:
a list of :class:`~.shapes.Shape` (one per way of satisfying it), each a conjunction of
per-type constraints that can be emitted as grammar directly (:mod:`~.emit`):

- scalars become regular languages (``null``, booleans, numbers from exact digit-range
  automata, strings as a content regex);
- arrays and objects keep the list of schema *pieces* that constrain them, merged when the
  grammar for the container is emitted (so recursion through ``$ref`` stays a CFG);
- ``enum``/``const`` restrict a shape to a finite set of values, each checked against the
  shape's pieces with ``jsonschema`` (so their interaction with every other keyword is exact).

``dependentRequired``/``dependentSchemas``/``dependencies`` and ``if``/``then``/``else`` are
rewritten into ``anyOf`` of simpler schemas; ``not`` and exact ``oneOf`` use the complement of a
shape (:mod:`~.logic`), which is exact for scalars and for ``required``-only objects. Any
keyword this cannot enforce raises :class:`~constrain.JsonSchemaError` with its JSON pointer
(``lenient=True`` records a warning instead). A schema object's own keywords are read by
:mod:`~.local`; references, value checks and diagnostics come from :mod:`~.context`, which
:class:`NormalForm` extends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from constrain.errors import CompileLimitError, JsonSchemaError
from constrain.frontends.json_schema.context import SchemaContext
from constrain.frontends.json_schema.local import local_shape
from constrain.frontends.json_schema.logic import disjoint, negate_shape
from constrain.frontends.json_schema.shapes import (
    ANY_SHAPE,
    NEGATION_MARK,
    JsonSchemaOptions,
    Piece,
    Shape,
)

__all__ = ["NormalForm"]


class NormalForm(SchemaContext):
    """The disjunctive normal form of the schemas of one root schema (memoised per piece).

    Parameters
    ----------
    schema : dict or bool
        The root schema.
    options : JsonSchemaOptions
        Compilation options.
    """

    def __init__(self, schema: Any, options: JsonSchemaOptions) -> None:
        super().__init__(schema, options)
        self._expanding: set[tuple[int, str]] = set()
        self._expanded: dict[tuple[int, str], list[Shape]] = {}
        self._combinations = 0  # shape pairs conjoined so far (max_combinations)
        # a complement's content key by the id of its schema (kept, so that ids stay unique):
        # _distinct compares the same complements over and over
        self._content_keys: dict[int, tuple[Any, Any]] = {}

    def shapes(self, pieces: tuple[Piece, ...]) -> list[Shape]:
        """Return the disjunctive normal form of the conjunction of ``pieces``."""
        result = [ANY_SHAPE]
        for piece in pieces:
            result = self.conjoin(result, self._expand(piece), piece.path)
        return [s for s in result if not s.is_empty()]

    def conjoin(self, left: list[Shape], right: list[Shape], pointer: str) -> list[Shape]:
        """Return the disjuncts of the conjunction of two disjunctions (their pairwise merges).

        Parameters
        ----------
        left, right : list of Shape
            The disjunctions.
        pointer : str
            JSON pointer of the combinator, for the errors.

        Returns
        -------
        list of Shape
            The non-empty merges.

        Raises
        ------
        CompileLimitError
            When the result has more than ``max_branches`` disjuncts, or the schema has
            conjoined more than ``max_combinations`` pairs so far.
        """
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
        out = [s for a in left for b in right if not (s := a.merge(b)).is_empty()]
        if len(out) > 1:
            out = _distinct(out, self._piece_key)
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
        if "$ref" in schema and self.legacy:  # draft 7 and older: $ref ignores its siblings
            return self._expand(self.resolve(piece, schema["$ref"]))
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in schema:
                self.unsupported(f"{keyword} is not supported", f"{piece.path}/{keyword}")
        result = [local_shape(self, piece)]
        if "$ref" in schema:
            result = self.conjoin(
                result, self._expand(self.resolve(piece, schema["$ref"])), piece.path
            )
        for i, sub in enumerate(_schema_list(schema, "allOf", piece) if "allOf" in schema else []):
            result = self.conjoin(result, self._expand(self.child(piece, sub, "allOf", i)), "")
        if "anyOf" in schema:
            branches = [
                self._expand(self.child(piece, sub, "anyOf", i))
                for i, sub in enumerate(_schema_list(schema, "anyOf", piece))
            ]
            result = self.conjoin(result, [s for b in branches for s in b], piece.path)
        if "oneOf" in schema:
            result = self.conjoin(result, self._one_of(piece, schema), piece.path)
        if "not" in schema:
            sub = self.child(piece, schema["not"], "not")
            result = self.conjoin(result, self.negate(self._expand(sub), sub.path), piece.path)
        if "if" in schema and ("then" in schema or "else" in schema):
            result = self.conjoin(result, self._if_then_else(piece, schema), piece.path)
        for name, dep in _dependencies(schema, piece).items():
            result = self.conjoin(result, self._dependency(piece, name, dep), piece.path)
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
                if s.get(NEGATION_MARK):
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
                if s.get(NEGATION_MARK):
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
        """Exactly one branch: each disjunct minus the disjuncts of other branches it meets.

        A value of a disjunct ``a`` of branch ``i`` is already outside every disjunct ``b``
        proven :func:`disjoint` from ``a``, so ``a`` is conjoined with the complements of the
        others only (none: ``a`` as it is). Negating every other branch whole multiplies the
        disjuncts of all their complements, thousands for a oneOf of a few objects of which
        only two overlap.
        """
        branches = [
            self._expand(self.child(piece, sub, "oneOf", i))
            for i, sub in enumerate(_schema_list(schema, "oneOf", piece))
        ]
        if self.options.one_of == "any":
            return [s for b in branches for s in b]
        out: list[Shape] = []
        pointer = piece.path + "/oneOf"
        for i, branch in enumerate(branches):
            for shape in branch:
                alive = [shape]
                for j, other in enumerate(branches):
                    rivals = [b for b in other if i != j and not disjoint(self, shape, b)]
                    if rivals and alive:
                        negated = self.negate(rivals, f"{pointer}/{j}")
                        alive = self.conjoin(alive, negated, pointer)
                out.extend(alive)
        return out

    def _if_then_else(self, piece: Piece, schema: dict[str, Any]) -> list[Shape]:
        cond = self._expand(self.child(piece, schema["if"], "if"))
        then = self._expand(self.child(piece, schema.get("then", True), "then"))
        other = self._expand(self.child(piece, schema.get("else", True), "else"))
        yes = self.conjoin(cond, then, piece.path)
        no = self.conjoin(self.negate(cond, piece.path + "/if"), other, piece.path)
        return yes + no

    def _dependency(self, piece: Piece, name: str, dep: Any) -> list[Shape]:
        absent = self.child(piece, {"properties": {name: False}}, "dependentRequired", name)
        if isinstance(dep, list):
            present: Any = {"required": [name, *dep]}
            sub = self.child(piece, present, "dependentRequired", name)
            return self._expand(absent) + self._expand(sub)
        need = self.child(piece, {"required": [name]}, "dependentSchemas", name)
        sub = self.child(piece, dep, "dependentSchemas", name)
        return self._expand(absent) + self.conjoin(self._expand(need), self._expand(sub), "")

    def _piece_key(self, piece: Piece) -> Any:
        """Return what tells ``piece`` apart in :func:`_distinct`: its identity, or its content."""
        if not (isinstance(piece.schema, dict) and piece.schema.get(NEGATION_MARK)):
            return piece.key()
        found = self._content_keys.get(id(piece.schema))
        if found is not None and found[0] is piece.schema:
            return found[1]
        try:  # a complement is a fresh schema each time: compared by content
            key: Any = (json.dumps(piece.schema, sort_keys=True), piece.key()[1])
        except (TypeError, ValueError):
            key = piece.key()
        self._content_keys[id(piece.schema)] = (piece.schema, key)
        return key

    def negate(self, shapes: list[Shape], pointer: str) -> list[Shape]:
        """Return the normal form of the complement of a disjunction of shapes.

        Parameters
        ----------
        shapes : list of Shape
            The disjunction.
        pointer : str
            JSON pointer of the keyword that negates (``not``, ``oneOf``, ``if``).

        Returns
        -------
        list of Shape
            The disjuncts of the complement.

        Raises
        ------
        JsonSchemaError
            When a part has no exact complement and ``lenient`` is off.
        CompileLimitError
            When the conjunction grows past ``max_branches`` or ``max_combinations``.
        """
        result = [ANY_SHAPE]
        for shape in shapes:
            result = self.conjoin(result, self._complement(shape, pointer), pointer)
        return result

    def _complement(self, shape: Shape, pointer: str) -> list[Shape]:
        """Return the complement of one shape: :func:`negate_shape`, its pieces expanded."""
        out: list[Shape] = []
        for part in negate_shape(self, shape, pointer):
            if isinstance(part, Piece):
                out.extend(self.shapes((part,)))
            elif not part.is_empty():
                out.append(part)
        return out


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


def _distinct(shapes: list[Shape], piece_key: Callable[[Piece], Any]) -> list[Shape]:
    """Return ``shapes`` without repeats (the same constraints reached by two products)."""
    seen: set[Any] = set()
    out: list[Shape] = []
    for shape in shapes:
        try:
            key = (
                shape.null,
                shape.bools,
                shape.num,
                shape.strs,
                shape.str_exact,
                None if shape.arr is None else frozenset(map(piece_key, shape.arr)),
                None if shape.obj is None else frozenset(map(piece_key, shape.obj)),
                None if shape.values is None else json.dumps(shape.values, sort_keys=True),
                frozenset(map(piece_key, shape.pieces)),
            )
            hash(key)
        except (TypeError, ValueError):
            out.append(shape)
            continue
        if key not in seen:
            seen.add(key)
            out.append(shape)
    return out
