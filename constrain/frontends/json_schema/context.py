"""Stage 1 (JSON Schema): the context of one root schema (references, validation, diagnostics).

:class:`SchemaContext` knows the draft, resolves ``$ref`` with ``referencing`` (the library
``jsonschema`` uses, so ``$id``, ``$anchor``, ``$defs``/``definitions`` and JSON pointers behave
as in the validators), names sub-schemas by their JSON pointer (:meth:`SchemaContext.child`),
validates values against pieces with ``jsonschema`` (``enum``/``const`` values, property names:
their interaction with every other keyword is then exact) and records or raises what cannot be
enforced (:meth:`SchemaContext.unsupported`). The normal form
(:class:`~constrain.frontends.json_schema.normal_form.NormalForm`) builds on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import compress
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema

from constrain.errors import JsonSchemaError
from constrain.frontends.json_schema.patterns import pattern_dfa
from constrain.frontends.json_schema.shapes import (
    SOME_KEY,
    JsonSchemaOptions,
    Piece,
    json_equal_key,
)

__all__ = ["SchemaContext"]

# enum list (by id, the list itself kept so its id stays its own) -> its JSON-equal keys
_ENUM_KEYS: dict[int, tuple[list[Any], frozenset[Any] | None]] = {}
_ENUM_VALIDATORS: dict[Any, Any] = {}


def _json_keys(values: list[Any]) -> frozenset[Any] | None:
    """Return the :func:`json_equal_key` of each value; None if one is not JSON, or not finite."""
    try:
        keys = frozenset(json_equal_key(v) for v in values)
    except TypeError:
        return None
    # NaN is equal to nothing, itself included: leave it to jsonschema
    return None if any(k[0] == "f" for k in keys) else keys


def _enum_keys(enums: list[Any]) -> frozenset[Any] | None:
    """Return :func:`_json_keys` of an ``enum`` list, memoised by the list's identity."""
    entry = _ENUM_KEYS.get(id(enums))
    if entry is None or entry[0] is not enums:
        if len(_ENUM_KEYS) >= 1024:
            _ENUM_KEYS.clear()
        entry = _ENUM_KEYS[id(enums)] = (enums, _json_keys(enums))
    return entry[1]


# the keywords a fast check decides: the rest of a schema's keywords need jsonschema
_SIMPLE = frozenset(
    {"type", "enum", "const", "title", "description", "$comment", "examples", "default",
     "deprecated", "readOnly", "writeOnly", "$schema", "$id"}
)  # fmt: skip
# the JSON type names of a value, by its exact Python type (jsonschema's type checks); a float
# is a "number", and an "integer" too when integral (1.0), except to the draft 4 validator
_TYPE_NAMES: dict[type, tuple[str, ...]] = {
    str: ("string",),
    int: ("integer", "number"),
    bool: ("boolean",),
    type(None): ("null",),
    list: ("array",),
    dict: ("object",),
}
_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})


class _ValueCheck:
    """The fast check of a schema of ``type``, ``enum``, ``const`` and annotations only.

    It answers as the jsonschema validator of the schema's draft: a bool is neither an integer
    nor a number, ``1.0`` is an integer (not to the draft 4 validator), ``enum`` and ``const``
    members compare by JSON equality (:func:`json_equal_key`; ``members`` holds their keys).
    None for a value it cannot decide (not a JSON value, or not finite): jsonschema decides.
    """

    __slots__ = ("draft4", "members", "number", "typed")

    def __init__(
        self, kinds: frozenset[str] | None, members: frozenset[Any] | None, draft4: bool
    ) -> None:
        # whether each exact Python type of a JSON value, floats aside, meets "type" (None: any)
        self.typed: dict[type, bool] | None = None
        if kinds is not None:
            self.typed = {t: not kinds.isdisjoint(names) for t, names in _TYPE_NAMES.items()}
        self.number = kinds is not None and "number" in kinds  # a float that is no "integer"
        self.members = members
        self.draft4 = draft4

    def __call__(self, value: Any) -> bool | None:
        """Whether ``value`` validates; None: undecided."""
        return self.many((value,))[0]

    def many(self, values: Sequence[Any]) -> list[bool | None]:
        """Return the answer of each value: one pass per keyword (the hot path of enums)."""
        found: list[bool | None]
        if self.typed is None:
            found = [True] * len(values)
        else:
            typed = self.typed
            found = [typed.get(type(v)) for v in values]  # None: a float, or not JSON
            if None in found:
                pairs = zip(values, found, strict=True)
                found = [self._float_type(v) if f is None else f for v, f in pairs]
        members, member = self.members, self._member
        if members is not None:
            # a string's key (json_equal_key's) built inline: enums of strings are the bulk
            pairs = zip(values, found, strict=True)
            found = [f and (("s", v) in members if type(v) is str else member(v)) for v, f in pairs]
        return found

    def _float_type(self, value: Any) -> bool | None:
        if type(value) is not float:
            return None
        assert self.typed is not None
        return self.typed[int] if not self.draft4 and value.is_integer() else self.number

    def _member(self, value: Any) -> bool | None:
        assert self.members is not None
        try:
            key = json_equal_key(value)
        except TypeError:
            return None
        return None if key[0] == "f" else key in self.members


def _value_check(schema: Any, draft4: bool) -> _ValueCheck | None:
    """Return the fast check of a schema of ``type``, ``enum``, ``const`` and annotations.

    None (no fast check: jsonschema decides) for a schema with other keywords or malformed
    ones, or with ``const`` under ``draft4`` (whose validator ignores it).
    """
    if isinstance(schema, bool):  # false: as {"type": []}
        return _ValueCheck(None if schema else frozenset(), None, draft4)
    if not isinstance(schema, dict) or not _SIMPLE.issuperset(schema):
        return None
    kinds: frozenset[str] | None = None
    if "type" in schema:
        kind = schema["type"]
        names = [kind] if isinstance(kind, str) else kind
        known = isinstance(names, list) and all(isinstance(n, str) for n in names)
        if not known or not _JSON_TYPES.issuperset(names):
            return None  # not type names, or draft 3's ("any", schemas)
        kinds = frozenset(names)
    members: frozenset[Any] | None = None
    if "enum" in schema:
        enums = schema["enum"]
        if not isinstance(enums, list):
            return None
        # hashed, memoised: every value of a long enum is checked against it
        members = _enum_keys(enums) if len(enums) > 16 else _json_keys(enums)
        if members is None:
            return None
    if "const" in schema:
        const = None if draft4 else _json_keys([schema["const"]])
        if const is None:
            return None
        members = const if members is None else members & const
    return _ValueCheck(kinds, members, draft4)


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
        # Deferred: jsonschema (~0.1 s to import) loads only for schemas with values to check.
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


class SchemaContext:
    """Reference resolution, value checks and diagnostics of one root schema.

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
        self._checks: dict[tuple[int, str], _ValueCheck | None] = {}  # fast checks, per piece
        self._alive: list[Any] = []

    # -- diagnostics --------------------------------------------------------------------------

    def unsupported(self, message: str, pointer: str) -> None:
        """Raise (or, when lenient, record) a keyword that cannot be enforced.

        Parameters
        ----------
        message : str
            What is not supported.
        pointer : str
            JSON pointer of the keyword.

        Raises
        ------
        JsonSchemaError
            Unless ``options.lenient``, which appends a warning instead.
        """
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
        """Return the piece a ``$ref`` points at.

        Parameters
        ----------
        piece : Piece
            The schema object holding the reference.
        ref : str
            The reference.
        keyword : str, optional
            The keyword that holds it, for the error's pointer.

        Returns
        -------
        Piece
            The target, with the resolver of its location; its path is ``ref``.

        Raises
        ------
        JsonSchemaError
            If the reference cannot be resolved (remote documents are not fetched).
        """
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

    def valid_values(self, values: Sequence[Any], pieces: tuple[Piece, ...]) -> list[Any]:
        """Return the ``values`` valid against every piece, in order (:meth:`is_valid` each).

        A piece of ``type``, ``enum``, ``const`` and annotations only is checked for all values
        by its fast check (an enum of 4,096 strings: one set lookup each, not a memoised call).
        """
        out = list(values)
        for piece in pieces:
            check = self._check(piece)
            found: list[bool | None] = [None] * len(out) if check is None else check.many(out)
            if None in found:  # undecided values: the validator's answer
                pairs = zip(out, found, strict=True)
                found = [self.is_valid(v, (piece,)) if f is None else f for v, f in pairs]
            out = list(compress(out, found))
        return out

    def _check(self, piece: Piece) -> _ValueCheck | None:
        """Return the fast check of ``piece`` (:func:`_value_check`, memoised), or None."""
        key = piece.key()
        if key in self._checks:
            return self._checks[key]
        # of the validators used, only draft 4's differs on type, enum and const
        draft4 = self.draft == referencing.jsonschema.DRAFT4
        check = self._checks[key] = _value_check(piece.schema, draft4)
        return check

    def _piece_valid(self, value: Any, piece: Piece) -> bool:
        """Whether ``value`` validates against one piece (uncached :meth:`is_valid`)."""
        check = self._check(piece)
        if check is not None:
            # most enum values meet "type" and "enum" alone: hashed membership, without a
            # validator call per value (an enum of 16,384 strings: 0.23 s of jsonschema calls)
            found = check(value)
            if found is not None:
                return found
        # Deferred: jsonschema (~0.1 s to import) loads only for schemas with values to check.
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
        if isinstance(piece.schema, dict) and SOME_KEY in piece.schema:
            if not self._has_members(value, piece):
                return False
        return True

    def _has_members(self, value: Any, piece: Piece) -> bool:
        """Check the synthetic "some member" requirements of a complement piece."""
        if not isinstance(value, dict):
            return True  # the keyword only constrains objects
        for i, spec in enumerate(piece.schema[SOME_KEY]):
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
