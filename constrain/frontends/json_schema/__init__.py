"""Stage 2: the JSON Schema front end (``Grammar.from_json_schema``, ``Grammar.from_pydantic``).

One module per step, from the schema to the grammar:

- :mod:`~.normal_form`: references, keywords and the disjunctive normal form (:class:`Shape`);
- :mod:`~.local`: a schema object's own keywords (type, enum, numbers, strings);
- :mod:`~.numbers`: exact digit automata for ranges and ``multipleOf``;
- :mod:`~.strings`: string content, quoting and whitespace;
- :mod:`~.formats`: ``format`` languages;
- :mod:`~.logic`: complements and disjointness (``not``, ``oneOf``, ``if``);
- :mod:`~.objects`: object keywords merged into key regions;
- :mod:`~.emit`: the Grammar IR of the normal form (:func:`compile_json_schema`).
"""

from constrain.frontends.json_schema.emit import compile_json_schema
from constrain.frontends.json_schema.normal_form import JsonSchemaOptions

__all__ = ["JsonSchemaOptions", "compile_json_schema"]
