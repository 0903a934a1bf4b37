"""Stage 1: pydantic models → JSON Schema → Grammar IR.

A model's validation JSON Schema (``Model.model_json_schema()``) goes through the JSON Schema
front end unchanged, so every option and guarantee of
:meth:`constrain.Grammar.from_json_schema` applies; the output parses with
``Model.model_validate_json``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pydantic_schema"]


def pydantic_schema(model: Any) -> dict[str, Any]:
    """Return the validation JSON Schema of a pydantic model class or ``TypeAdapter``-able type.

    Parameters
    ----------
    model : type
        A ``pydantic.BaseModel`` subclass, or any type pydantic can validate (``list[int]``,
        a ``TypedDict``, a dataclass, ...).

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
            return model.model_json_schema(mode="validation")
        return pydantic.TypeAdapter(model).json_schema(mode="validation")
    except pydantic.errors.PydanticUserError as err:
        raise TypeError(f"pydantic cannot build a JSON Schema for {model!r}: {err}") from err
    except pydantic.errors.PydanticSchemaGenerationError as err:
        raise TypeError(f"pydantic cannot build a JSON Schema for {model!r}: {err}") from err
