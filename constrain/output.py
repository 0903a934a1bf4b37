"""Output types (stage 8): what the user asked for -> a grammar, and generated text -> a value.

:func:`output_type` turns the constraint keywords of :func:`constrain.generate` into an
:class:`OutputType`: the :class:`~constrain.Grammar` to decode with and the parser that turns the
finished text into the value returned to the user.

=====================================  ===================================  ======================
``generate(...)`` keyword              grammar                              returned value
=====================================  ===================================  ======================
``schema=Model`` (pydantic class)      ``Grammar.from_pydantic``            ``Model`` instance
``schema=list[int]`` (any type         ``Grammar.from_pydantic``            the validated value
pydantic's ``TypeAdapter`` accepts)
``schema={...}``, JSON text, a path    ``Grammar.from_json_schema``         the parsed JSON value
``regex="..."``                        ``Grammar.from_regex``               ``str``
``grammar="sql"``, Lark text, a path   ``Grammar.builtin`` / ``from_lark``  ``str``
``grammar="root ::= ..."`` (EBNF)      ``Grammar.from_ebnf``                ``str``
``choices=["a", "b"]``                 the alternation of the literals      ``str``
=====================================  ===================================  ======================

Every value is validated once more on the way out, independently of the automata: pydantic's
``model_validate_json``, ``jsonschema``, ``re.fullmatch``, lark's own Earley parser, membership
in ``choices``. A failure there raises :class:`~constrain.errors.OutputValidationError`, which
is a bug in constrain: the matcher accepted a text outside the language. Where lark cannot
read a grammar (constrain's ``%json``, ``%grammar`` and ``%regex`` directives, terminals with
intersections) or its dynamic lexer misses a match, the grammar's byte-level automaton decides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from constrain.errors import GrammarError, OutputValidationError
from constrain.frontends.ebnf import is_ebnf
from constrain.frontends.lark import without_option_lines
from constrain.frontends.lark_budgets import strip_budgets
from constrain.ir import Alt, Grammar, Literal

__all__ = ["DEFAULT_NUMBER_DIGITS", "OutputType", "output_type"]

DEFAULT_NUMBER_DIGITS = 15
"""``max_number_digits`` of a schema's grammar unless ``json_options`` says otherwise."""


@dataclass(frozen=True)
class OutputType:
    """A grammar to decode with and the parser of its texts."""

    grammar: Grammar
    kind: str
    """``"pydantic"``, ``"type"``, ``"json"``, ``"regex"``, ``"grammar"``, ``"choices"`` or
    ``"tools"`` (:func:`constrain.tools.tool_output`)."""
    description: str
    _parse: Callable[[str], Any] = field(repr=False, compare=False)

    def parse(self, text: str) -> Any:
        """Return the value of a finished text; raise OutputValidationError if it is invalid."""
        return self._parse(text)


def output_type(
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: str | Path | Grammar | None = None,
    choices: Sequence[str] | None = None,
    json_options: Mapping[str, Any] | None = None,
) -> OutputType:
    """Return the :class:`OutputType` of exactly one constraint keyword.

    Parameters
    ----------
    schema : type, dict, bool, str or Path, optional
        A pydantic model class, a type pydantic's ``TypeAdapter`` accepts, a JSON Schema as a
        dict or bool, JSON text (a string starting with ``{``) or the path of a ``.json`` file.
    regex : str, optional
        A Python regular expression the whole output must match.
    grammar : str, Path or Grammar, optional
        A shipped grammar's name (``"sql"``, ``"json"``, ...), the path of a ``.lark`` file, Lark
        grammar text, or a :class:`~constrain.Grammar`.
    choices : sequence of str, optional
        The output is exactly one of these strings.
    json_options : mapping, optional
        Options of :meth:`Grammar.from_json_schema` (``whitespace``, ``any_order``, ...).
        Defaults here: ``whitespace="spaced"`` (``", "`` and ``": "``, as ``json.dumps``),
        ``python_compatible=True`` and ``max_number_digits=15`` (``None`` lifts it).

    Raises
    ------
    TypeError
        If not exactly one constraint keyword is given, or one has the wrong type.
    """
    given = [
        name
        for name, value in (
            ("schema", schema),
            ("regex", regex),
            ("grammar", grammar),
            ("choices", choices),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise TypeError(
            "give exactly one of schema=, regex=, grammar= or choices= "
            f"(got {', '.join(given) if given else 'none'})"
        )
    opts = dict(json_options or {})
    if schema is not None:
        return _schema_output(schema, opts)
    if opts:
        raise TypeError("json_options only apply with schema=")
    if regex is not None:
        return _regex_output(regex)
    if grammar is not None:
        return _grammar_output(grammar)
    assert choices is not None
    return _choices_output(choices)


# -- schema ------------------------------------------------------------------------------------


def _schema_output(schema: Any, opts: dict[str, Any]) -> OutputType:
    # Models write JSON with spaces ("age": 34); forbidding them makes a model choose between
    # tokens it finds unlikely. On the extraction set (docs/sampling.md) SmolLM2's age accuracy
    # was 0.22 under compact JSON, 0.80 with flexible whitespace and 0.76 with json.dumps's
    # ", " / ": " separators (field accuracy 0.43 / 0.57 / 0.58). "spaced" is as good as
    # flexible and leaves the layout to the grammar: no whitespace to choose, more text forced
    # (jump-forward drafts it), outputs about 8% shorter than flexible's.
    opts.setdefault("whitespace", "spaced")
    # Nothing else bounds a number's digits: greedy decoding of "population": 1111... would
    # run to max_tokens. 15 digits each side of the point: exact in a float64 and in JSON.
    opts.setdefault("max_number_digits", DEFAULT_NUMBER_DIGITS)
    if isinstance(schema, (dict, bool)):
        return _json_output(schema, opts, "JSON Schema")
    if isinstance(schema, Path) or (
        isinstance(schema, str) and not schema.lstrip().startswith(("{", "true", "false"))
    ):
        path = Path(schema)
        if not path.is_file():
            raise FileNotFoundError(
                f"schema={str(schema)!r} is neither JSON text nor an existing file; pass a "
                "dict, JSON text, a .json path or a pydantic model"
            )
        return _json_output(json.loads(path.read_text(encoding="utf-8")), opts, str(path))
    if isinstance(schema, str):
        return _json_output(json.loads(schema), opts, "JSON Schema text")
    return _pydantic_output(schema, opts)


def _json_output(schema: Any, opts: dict[str, Any], label: str) -> OutputType:
    import jsonschema

    # The value is parsed by Python: integers written plainly ("10", never "10.00", which
    # json.loads would turn into a float), other numbers within float64 range.
    opts.setdefault("python_compatible", True)
    grammar = Grammar.from_json_schema(schema, **opts)
    validator_cls = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    checker = None if opts.get("formats") == "ignore" else validator_cls.FORMAT_CHECKER
    validator = _exact_numbers(validator_cls)(schema, format_checker=checker)

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
            exact = json.loads(text, parse_float=_ExactFloat)
        except ValueError as err:
            raise OutputValidationError(f"the output is not JSON: {err}", text) from err
        errors = sorted(validator.iter_errors(exact), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path)
            raise OutputValidationError(
                f"the output fails the schema at '/{where}': {errors[0].message}", text
            )
        return value

    return OutputType(grammar, "json", label, parse)


class _ExactFloat(float):
    """A JSON number parsed as a float that remembers its text, as an exact decimal."""

    decimal: Decimal

    def __new__(cls, text: str) -> _ExactFloat:
        value = super().__new__(cls, text)
        value.decimal = Decimal(text)
        return value


def _exact(value: Any) -> Fraction:
    """Return the exact value of a JSON number: an output's text, a schema float's ``repr``.

    The grammar reads the schema's numbers the same way (``Decimal(repr(x))``), so the check
    and the grammar agree on every input.
    """
    if isinstance(value, _ExactFloat):
        return Fraction(value.decimal)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def _exact_numbers(validator_cls: Any) -> Any:
    """Return ``validator_cls`` with ``multipleOf`` and the bounds in exact decimal arithmetic.

    jsonschema divides floats (``0.684 / 1e-12`` is not an integer in binary), where the
    grammar works in decimals; these keywords compare the output's number as written with the
    schema's number as written. Draft 4 and older keep their own bounds (boolean exclusives).
    """
    import jsonschema

    def number(validator: Any, instance: Any) -> bool:
        return bool(validator.is_type(instance, "number"))

    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Any:
        if number(validator, instance) and (_exact(instance) / _exact(divisor)).denominator != 1:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {divisor!r}")

    def bound(word: str, fails: Callable[[Fraction, Fraction], bool]) -> Any:
        def check(validator: Any, limit: Any, instance: Any, schema: Any) -> Any:
            if number(validator, instance) and fails(_exact(instance), _exact(limit)):
                yield jsonschema.ValidationError(f"{instance!r} is {word} {limit!r}")

        return check

    keywords: dict[str, Any] = {"multipleOf": multiple_of}
    modern = (
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )
    if validator_cls in modern:
        keywords["minimum"] = bound("less than the minimum of", lambda x, y: x < y)
        keywords["maximum"] = bound("greater than the maximum of", lambda x, y: x > y)
        keywords["exclusiveMinimum"] = bound("not greater than", lambda x, y: x <= y)
        keywords["exclusiveMaximum"] = bound("not less than", lambda x, y: x >= y)
    return jsonschema.validators.extend(validator_cls, keywords)


def _pydantic_output(schema: Any, opts: dict[str, Any]) -> OutputType:
    import pydantic

    grammar = Grammar.from_pydantic(schema, **opts)
    is_model = isinstance(schema, type) and issubclass(schema, pydantic.BaseModel)
    if is_model:
        validate: Callable[[str], Any] = schema.model_validate_json
        kind, label = "pydantic", schema.__name__
    else:
        validate = pydantic.TypeAdapter(schema).validate_json
        kind, label = "type", repr(schema)

    def parse(text: str) -> Any:
        try:
            return validate(text)
        except pydantic.ValidationError as err:
            raise OutputValidationError(f"pydantic rejects the output: {err}", text) from err

    return OutputType(grammar, kind, label, parse)


# -- regex, grammar, choices -------------------------------------------------------------------


def _regex_output(pattern: str) -> OutputType:
    if not isinstance(pattern, str):
        raise TypeError(f"regex= must be a str, got {type(pattern).__name__}")
    grammar = Grammar.from_regex(pattern)
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        if compiled.fullmatch(text) is None:
            raise OutputValidationError(f"the output does not match {pattern!r}", text)
        return text

    return OutputType(grammar, "regex", pattern, parse)


def _grammar_output(spec: str | Path | Grammar) -> OutputType:
    paths: list[str] = []
    start = "start"
    if isinstance(spec, str) and is_ebnf(spec):  # XGrammar's / llama.cpp's "root ::= ..."
        spec = Grammar.from_ebnf(spec)
    if isinstance(spec, Grammar):
        from constrain.ir.printer import lark_names

        grammar, label = spec, "grammar"
        _refuse_special_tokens(grammar, label)
        start = lark_names(spec).get(spec.start, spec.start)  # the start rule's printed name
        try:
            text = spec.to_lark()
        except GrammarError:
            # Terminals with intersection or complement (e.g. Grammar.from_json_schema of an
            # object) have no Lark text: check the output with a byte-level matcher instead.
            return OutputType(grammar, "grammar", label, _byte_level_parser(grammar))
    else:
        path = Path(spec)
        if isinstance(spec, Path) or (path.suffix == ".lark" and "\n" not in str(spec)):
            if not path.is_file():
                raise FileNotFoundError(f"grammar file {str(spec)!r} does not exist")
            text = path.read_text(encoding="utf-8")
            grammar, label = Grammar.from_lark_file(path), str(path)
            paths = [str(path.resolve().parent)]
        elif "\n" not in spec and ":" not in spec:
            grammar, label = Grammar.builtin(spec), spec
            text, paths = _builtin_text(spec)
        else:
            grammar, label, text = Grammar.from_lark(spec), "Lark grammar", spec
    _refuse_special_tokens(grammar, label)
    # lark does not read constrain's %lexer and %ignore_at_end lines nor token budgets
    # (name[max_tokens=N]): it checks a superset
    text = strip_budgets(without_option_lines(text))[0]
    parser = _lark_parser(text, paths, start)
    byte_level = _byte_level_parser(grammar)

    def parse(out: str) -> str:
        import lark

        try:
            parser.parse(out)
        except lark.exceptions.GrammarError:
            # constrain's extensions (%json, %grammar, %regex) are not Lark: the automaton
            # built from the same grammar decides
            return byte_level(out)
        except lark.exceptions.LarkError as err:
            # lark's dynamic Earley lexer can miss a match its regexes allow (it tries one
            # lexeme length per position); the output stands if the grammar's own automaton
            # accepts it
            try:
                return byte_level(out)
            except OutputValidationError:
                raise OutputValidationError(f"lark cannot parse the output: {err}", out) from err
        return out

    return OutputType(grammar, "grammar", label, parse)


def _refuse_special_tokens(grammar: Grammar, label: str) -> None:
    """Raise GrammarError before decoding if ``grammar`` requires special tokens by id."""
    from constrain.vocab.grammar_specials import special_chars

    ids, names = special_chars(grammar)
    if ids or names:
        raise GrammarError(
            f"{label} requires special tokens (<|...|> or <[id]>), which generate() can neither "
            "render in its output text nor check yet; use constrain.Compiler and "
            "constrain.Matcher with this grammar"
        )


def _byte_level_parser(grammar: Grammar) -> Callable[[str], str]:
    """Return a check of ``grammar`` on raw bytes (compiled on first use) for ``OutputType``.

    Used where lark cannot read the grammar or rejects an output: it shares the automata with
    decoding but not the token-level tables.
    """
    built: list[Any] = []

    def parse(out: str) -> str:
        from constrain.compiler import Compiler
        from constrain.matcher import Matcher
        from constrain.vocab.vocabulary import Vocabulary

        if not built:
            byte_tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
            vocab = Vocabulary.from_bytes([*byte_tokens, None], eos_ids=[256])
            built.append(Compiler(vocab).compile(grammar))
        m = Matcher(built[0])
        if not (m.accept_bytes(out) and m.is_accepting()):
            raise OutputValidationError("the output is not a sentence of the grammar", out)
        return out

    return parse


def _builtin_text(name: str) -> tuple[str, list[str]]:
    from importlib.resources import files

    folder = files("constrain.grammars")
    return folder.joinpath(f"{name}.lark").read_text(encoding="utf-8"), [str(folder)]


def _lark_parser(text: str, import_paths: list[str], start: str = "start") -> Any:
    """Return a lark Earley parser of ``text``, built on first use (it is only for checking)."""
    import lark

    built: list[Any] = []

    class _Lazy:
        def parse(self, out: str) -> Any:
            if not built:
                built.append(
                    lark.Lark(
                        text,
                        parser="earley",
                        lexer="dynamic",
                        start=start,
                        import_paths=list(import_paths),
                    )
                )
            return built[0].parse(out)

    return _Lazy()


def choices_grammar(choices: Sequence[str]) -> tuple[Grammar, list[str]]:
    """Return the grammar of exactly one of ``choices`` and the distinct choices, in order.

    Raises
    ------
    TypeError
        If ``choices`` is not a sequence of strings.
    ValueError
        If it is empty.
    """
    if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
        raise TypeError("choices= must be a sequence of strings")
    options = list(dict.fromkeys(choices))
    if not options:
        raise ValueError("choices= must name at least one string")
    grammar = Grammar.from_terminal_regex(Alt(tuple(Literal(c) for c in options)), "CHOICE")
    return grammar, options


def _choices_output(choices: Sequence[str]) -> OutputType:
    grammar, options = choices_grammar(choices)
    allowed = set(options)

    def parse(text: str) -> str:
        if text not in allowed:
            raise OutputValidationError(f"the output {text!r} is not one of the choices", text)
        return text

    return OutputType(grammar, "choices", f"one of {len(options)} strings", parse)
