"""Stage 1: the JSON Schema front end (``Grammar.from_json_schema``, ``Grammar.from_pydantic``).

One module per step, from the schema to the grammar; each runs only on those listed before it:

- :mod:`~.shapes`: the data (:class:`JsonSchemaOptions`, pieces, :class:`~.shapes.Shape`);
- :mod:`~.numbers`: exact digit automata for ranges and ``multipleOf``;
- :mod:`~.strings`: string content, quoting and whitespace;
- :mod:`~.formats`: ``format`` languages;
- :mod:`~.patterns`: ECMAScript ``pattern`` as regex IR and as a DFA;
- :mod:`~.context`: references, value checks and diagnostics of one root schema;
- :mod:`~.local`: a schema object's own keywords (type, enum, numbers, strings);
- :mod:`~.logic`: complements and disjointness (``not``, ``oneOf``, ``if``);
- :mod:`~.normal_form`: combinators and references rewritten into a disjunctive normal form;
- :mod:`~.objects`: object keywords merged into key regions;
- :mod:`~.emit`: the Grammar IR of the normal form (:func:`compile_json_schema`).
"""

from constrain.frontends.json_schema.emit import compile_json_schema
from constrain.frontends.json_schema.shapes import JsonSchemaOptions

__all__ = ["JsonSchemaOptions", "compile_json_schema"]
