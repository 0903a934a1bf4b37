"""Stage 1: pydantic models → JSON Schema → Grammar IR.

A model's validation JSON Schema (``Model.model_json_schema()``) goes through the JSON Schema
front end, so every option and guarantee of :meth:`constrain.Grammar.from_json_schema` applies;
the output parses with ``Model.model_validate_json``.

One change is made to the schema: an object schema that declares ``properties`` but says nothing
about ``additionalProperties`` gets ``additionalProperties: false``. pydantic omits the keyword
for its default ``extra="ignore"``, which *accepts and drops* unknown keys; generating them would
only waste tokens (a small model happily invents ``"state"`` and ``"zip"`` for an address), so
the grammar produces exactly the declared fields. Models with ``extra="allow"`` (pydantic writes
``additionalProperties: true``) or ``extra="forbid"`` are left as they are. Pass
``extra_properties=True`` to :meth:`~constrain.Grammar.from_pydantic` to keep pydantic's schema
unchanged.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pydantic_schema"]


_SUBSCHEMA: tuple[str, ...] = ("items", "additionalProperties", "not", "if", "then", "else")
_SUBSCHEMA += ("contains", "propertyNames", "unevaluatedItems", "additionalItems")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _close_objects(node: Any) -> Any:
    """Return a copy of ``node`` with closed objects (``additionalProperties: false``).

    Objects that declare properties and say nothing of other keys are closed. Only subschema
    positions are visited (never ``const``, ``default`` or ``examples`` values).
    """
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for key in _SUBSCHEMA:
        if key in node:
            value = node[key]
            out[key] = (
                [_close_objects(x) for x in value]
                if isinstance(value, list)
                else (_close_objects(value))
            )
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            out[key] = [_close_objects(x) for x in node[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            out[key] = {k: _close_objects(v) for k, v in node[key].items()}
    if (
        isinstance(node.get("properties"), dict)
        and "additionalProperties" not in node
        and "unevaluatedProperties" not in node
        and "patternProperties" not in node
    ):
        out["additionalProperties"] = False
    return out


def pydantic_schema(model: Any, *, extra_properties: bool = False) -> dict[str, Any]:
    """Return the validation JSON Schema of a pydantic model class or ``TypeAdapter``-able type.

    Parameters
    ----------
    model : type
        A ``pydantic.BaseModel`` subclass, or any type pydantic can validate (``list[int]``,
        a ``TypedDict``, a dataclass, ...).

    extra_properties : bool, optional
        Keep pydantic's schema as is, where objects of ``extra="ignore"`` models admit unknown
        keys. By default those objects are closed (see the module docstring).

    Returns
    -------
    dict
        The schema, in validation mode.

    Raises
    ------
    TypeError
        If pydantic cannot build a schema for ``model``.
    """
    import pydantic

    try:
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
            schema = model.model_json_schema(mode="validation")
        else:
            schema = pydantic.TypeAdapter(model).json_schema(mode="validation")
    except pydantic.errors.PydanticUserError as err:
        raise TypeError(f"pydantic cannot build a JSON Schema for {model!r}: {err}") from err
    except pydantic.errors.PydanticSchemaGenerationError as err:
        raise TypeError(f"pydantic cannot build a JSON Schema for {model!r}: {err}") from err
    return schema if extra_properties else _close_objects(schema)
